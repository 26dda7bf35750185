// Runs one launch plan (written by the Java tests from the real launchers' calls) under several
// schedules and checks that every schedule leaves every buffer bit-identical after every launch;
// writes the memory of the first schedule for the Java side to compare with its fp64 reference.
//
// usage: runner PLAN IMAGE_IN IMAGE_OUT SCHEDULES SEED
//   PLAN       text: "buffer <id> <bytes>" lines (ids 0, 1, ... in order), then
//              "launch <kernel> <gridX> <gridY> <blockX> <blockY> <strided 0|1> <arg>..." lines,
//              each arg p<buffer>+<byte offset> | n (null pointer) | i<int> | l<long long> | f<float bits, hex>
//   IMAGE_IN   every buffer's initial bytes, concatenated in id order; IMAGE_OUT likewise
//   SCHEDULES  comma-separated: asc, desc, rand (thread and block orders), grid1, grid3
//              (grid-stride launches forced onto 1 or 3 blocks)
//   SEED       for the random orders
// Exit status 0, or emu::EXIT_* (emu_launch.h); AddressSanitizer/UBSan report and exit on their own.
#include "emu_bind.h"
#include "emu_launch.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

struct Launch {
    std::string kernel;
    emu::Dim grid, block;
    bool strided;
    std::vector<emu::PlanArg> args;
    const emu::KernelEntry* entry;
};

struct Plan {
    std::vector<size_t> bufferBytes;
    std::vector<Launch> launches;
};

[[noreturn]] void die(int code, const std::string& what) {
    std::cerr << "emu: " << what << std::endl;
    std::exit(code);
}

const emu::KernelEntry* find_kernel(const std::string& name) {
    for (size_t i = 0; i < emu::kernel_count; i++) {
        if (name == emu::kernel_table[i].name) return &emu::kernel_table[i];
    }
    die(emu::EXIT_PLAN, "no kernel named " + name + " in this build");
}

emu::PlanArg parse_arg(const std::string& tok) {
    emu::PlanArg a{tok.empty() ? '?' : tok[0], -1, 0, 0, 0};
    std::string v = tok.substr(1);
    switch (a.kind) {
        case 'p': {
            size_t plus = v.find('+');
            if (plus == std::string::npos) die(emu::EXIT_PLAN, "bad pointer argument " + tok);
            a.buffer = std::stoi(v.substr(0, plus));
            a.offset = std::stoull(v.substr(plus + 1));
            break;
        }
        case 'n':
            if (!v.empty()) die(emu::EXIT_PLAN, "bad null pointer argument " + tok);
            break;
        case 'i':
        case 'l': a.integer = std::stoll(v); break;
        case 'f': a.floatBits = static_cast<uint32_t>(std::stoul(v, nullptr, 16)); break;
        default: die(emu::EXIT_PLAN, "bad argument " + tok);
    }
    return a;
}

Plan read_plan(const char* path) {
    std::ifstream in(path);
    if (!in) die(emu::EXIT_PLAN, std::string("cannot read ") + path);
    Plan plan;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string what;
        if (!(words >> what)) continue;
        if (what == "buffer") {
            size_t id, bytes;
            words >> id >> bytes;
            if (id != plan.bufferBytes.size()) die(emu::EXIT_PLAN, "buffers must be numbered in order: " + line);
            plan.bufferBytes.push_back(bytes);
        } else if (what == "launch") {
            Launch l;
            int strided;
            words >> l.kernel >> l.grid.x >> l.grid.y >> l.block.x >> l.block.y >> strided;
            l.strided = strided != 0;
            std::string tok;
            while (words >> tok) l.args.push_back(parse_arg(tok));
            l.entry = find_kernel(l.kernel);
            plan.launches.push_back(l);
        } else {
            die(emu::EXIT_PLAN, "unknown plan line: " + line);
        }
    }
    return plan;
}

emu::Schedule schedule_named(const std::string& name, uint64_t seed) {
    using emu::Order;
    if (name == "asc") return {name, Order::ASCENDING, 0, seed, 0xff};
    if (name == "desc") return {name, Order::DESCENDING, 0, seed, 0x7f};
    if (name == "rand") return {name, Order::RANDOM, 0, seed, 0xa5};
    if (name == "grid1") return {name, Order::DESCENDING, 1, seed, 0x5a};
    if (name == "grid3") return {name, Order::RANDOM, 3, seed ^ 0x3, 0xc3};
    die(emu::EXIT_PLAN, "unknown schedule " + name);
}

// The first byte where two memories differ, described for a person; empty if none.
std::string first_difference(const emu::DeviceMemory& a, const emu::DeviceMemory& b) {
    for (size_t i = 0; i < a.buffers.size(); i++) {
        const std::vector<unsigned char>& x = a.buffers[i];
        const std::vector<unsigned char>& y = b.buffers[i];
        for (size_t j = 0; j < x.size(); j++) {
            if (x[j] == y[j]) continue;
            size_t word = j & ~size_t(3);
            std::ostringstream o;
            o << "buffer " << i << " byte " << j << " (32-bit word at " << word << ": ";
            for (const std::vector<unsigned char>* v : {&x, &y}) {
                o << "0x";
                for (size_t k = word + 4; k-- > word;) {
                    char hex[3];
                    snprintf(hex, sizeof hex, "%02x", k < v->size() ? (*v)[k] : 0);
                    o << hex;
                }
                o << (v == &x ? " vs " : ")");
            }
            return o.str();
        }
    }
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 6) die(emu::EXIT_PLAN, "usage: runner PLAN IMAGE_IN IMAGE_OUT SCHEDULES SEED");
    Plan plan = read_plan(argv[1]);
    std::ifstream imageIn(argv[2], std::ios::binary);
    emu::DeviceMemory initial;
    for (size_t bytes : plan.bufferBytes) {
        initial.buffers.emplace_back(bytes);
        if (bytes > 0 && !imageIn.read(reinterpret_cast<char*>(initial.buffers.back().data()), bytes)) {
            die(emu::EXIT_PLAN, std::string("image ") + argv[2] + " is shorter than the plan's buffers");
        }
    }
    uint64_t seed = std::stoull(argv[5]);
    std::vector<emu::Schedule> schedules;
    std::stringstream names(argv[4]);
    for (std::string name; std::getline(names, name, ',');) schedules.push_back(schedule_named(name, seed));

    std::vector<emu::DeviceMemory> afterLaunch;   // the first schedule's memory after each launch
    for (const emu::Schedule& s : schedules) {
        emu::DeviceMemory memory = initial;
        for (size_t k = 0; k < plan.launches.size(); k++) {
            const Launch& l = plan.launches[k];
            emu::Launchable run;
            try {
                run = l.entry->bind(l.args, memory);
            } catch (const std::exception& e) {
                die(emu::EXIT_PLAN, "launch " + std::to_string(k) + " of " + l.kernel + ": " + e.what());
            }
            emu::Dim grid = l.strided && s.stridedBlocks > 0 ? emu::Dim{s.stridedBlocks, 1} : l.grid;
            emu::launch(l.kernel, grid, l.block, s, run);
            if (&s == &schedules.front()) {
                afterLaunch.push_back(memory);
            } else {
                std::string diff = first_difference(afterLaunch[k], memory);
                if (!diff.empty()) {
                    die(emu::EXIT_ORDER, "order-dependent result after launch " + std::to_string(k) + " (" + l.kernel +
                                             "): " + diff + " under schedules " + schedules.front().name + " and " +
                                             s.name + " (seed " + std::to_string(seed) + ")");
                }
            }
        }
    }
    std::ofstream out(argv[3], std::ios::binary);
    const emu::DeviceMemory& result = afterLaunch.empty() ? initial : afterLaunch.back();
    for (const std::vector<unsigned char>& b : result.buffers) {
        out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }
    if (!out) die(emu::EXIT_PLAN, std::string("cannot write ") + argv[3]);
    return 0;
}
