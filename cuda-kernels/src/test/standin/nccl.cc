// The stand-in NCCL (libnccl.so.2): several ranks of one process, each on a stand-in device, on
// the stand-in's streams. ncclCommInitRank meets the other ranks of the unique id (blocking, as
// NCCL's does; two ranks on one device are refused, "Duplicate GPU detected", as NCCL refuses
// them); a collective is checked when it is issued (buffers in device memory of the
// communicator's device, aligned to the dtype, in-place layouts as NCCL defines them, a stream of
// that device) and queued on the stream; when every rank's stream has reached it, the last to
// arrive moves the data for all of them (reductions in rank order, rounded to the dtype after
// each step; ncclAvg of floats multiplies each input by 1/N first, as NCCL's PreMulSum does).
// Stricter than NCCL, which would hang or mix buffers: the n-th collective of every rank of a
// communicator must be the same call (operation, count, dtype, reduction, root), or the rank that
// issues a different one gets ncclInvalidUsage and the ranks waiting for it fail instead of
// waiting. ncclCommAbort releases every rank waiting in the communicator's collectives. A wait
// longer than FSDP4J_STANDIN_NCCL_TIMEOUT_S (default 600) fails with ncclSystemError, where NCCL
// would wait forever. Group calls defer the queuing to ncclGroupEnd; a ncclCommInitRank inside a
// group is not modelled.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <sstream>

#include "../emulator/fallback/cuda_bf16.h"
#include "../emulator/fallback/cuda_fp16.h"
#include "standin.h"

using namespace standin;

namespace {

enum Result : int {
    SUCCESS = 0,
    UNHANDLED_CUDA_ERROR = 1,
    SYSTEM_ERROR = 2,
    INTERNAL_ERROR = 3,
    INVALID_ARGUMENT = 4,
    INVALID_USAGE = 5,
    REMOTE_ERROR = 6,
    IN_PROGRESS = 7,
};

enum Type : int { I8 = 0, U8 = 1, I32 = 2, U32 = 3, I64 = 4, U64 = 5, F16 = 6, F32 = 7, F64 = 8, BF16 = 9 };
enum Op : int { SUM = 0, PROD = 1, MAX = 2, MIN = 3, AVG = 4 };

struct UniqueId {
    char internal[128];
};


std::mutex lastErrorMutex;
std::string lastError;

int fail(int result, const std::string& why) {
    {
        std::lock_guard<std::mutex> lock(lastErrorMutex);
        lastError = why;
    }
    fprintf(stderr, "[stand-in NCCL] %s\n", why.c_str());
    fflush(stderr);
    return result;
}

long timeoutMs() {
    static long ms = [] {
        const char* v = getenv("FSDP4J_STANDIN_NCCL_TIMEOUT_S");
        long s = v != nullptr && *v != 0 ? atol(v) : 600;
        return (s > 0 ? s : 600) * 1000;
    }();
    return ms;
}

size_t type_bytes(int t) {
    switch (t) {
        case I8: case U8: return 1;
        case F16: case BF16: return 2;
        case I32: case U32: case F32: return 4;
        case I64: case U64: case F64: return 8;
        default: return 0;
    }
}

const char* type_name(int t) {
    static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
                                  "float64", "bfloat16"};
    return t >= 0 && t <= 9 ? names[t] : "?";
}

const char* op_name(int op) {
    static const char* names[] = {"sum", "prod", "max", "min", "avg"};
    return op >= 0 && op <= 4 ? names[op] : "?";
}

struct Comm;

// One collective, from its issue to the end of its data movement on every rank.
struct Slot {
    std::string signature;     // what the first rank to issue it issued
    int issuedBy = -1;
    std::string mismatch;      // non-empty: a rank issued something else; nobody waits for it
    int arrived = 0;           // ranks whose streams reached it
    std::vector<const void*> send;
    std::vector<void*> recv;
    bool done = false;
    int finished = 0;
};

// What the ranks of one ncclCommSplit bring.
struct SplitSlot {
    int arrived = 0;
    std::vector<int> color, key;
    std::vector<Comm*> made;
    bool done = false;
    int finished = 0;
};

// The ranks of one communicator.
struct Clique {
    int nranks = 0;
    std::mutex m;
    std::condition_variable cv;
    std::vector<Comm*> members;
    std::map<uint64_t, Slot> slots;
    std::map<uint64_t, SplitSlot> splits;
    bool aborted = false;
    std::string abortedBy;
};

struct Comm {
    std::shared_ptr<Clique> clique;
    int rank = 0;
    int device = 0;
    uint64_t issued = 0;       // collectives issued (clique->m)
    uint64_t splitsIssued = 0;
    std::atomic<int> asyncError{SUCCESS};
    std::atomic<int> pending{0};
    bool aborted = false;
};

// Ranks joining a unique id, until all have come.
struct Joining {
    int nranks = 0;
    int joined = 0;
    std::vector<int> devices;
    std::vector<Comm*> comms;
    std::shared_ptr<Clique> clique;
    int result = SUCCESS;
    std::string why;
    bool done = false;
};

std::mutex joinMutex;
std::condition_variable joinCv;
std::map<std::string, std::shared_ptr<Joining>> joining;

std::string where(const Comm* c) {
    return "rank " + std::to_string(c->rank) + " of " + std::to_string(c->clique->nranks) + " (cuda:" +
           std::to_string(c->device) + ")";
}

// ------------------------------------------------------------------ reductions

double to_double(const unsigned char* p, int t) {
    switch (t) {
        case I8: return *reinterpret_cast<const int8_t*>(p);
        case U8: return *p;
        case I32: return *reinterpret_cast<const int32_t*>(p);
        case U32: return *reinterpret_cast<const uint32_t*>(p);
        case I64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
        case U64: return static_cast<double>(*reinterpret_cast<const uint64_t*>(p));
        case F16: return __half2float(*reinterpret_cast<const __half*>(p));
        case F32: return *reinterpret_cast<const float*>(p);
        case F64: return *reinterpret_cast<const double*>(p);
        default: return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
    }
}

// v rounded to the dtype and stored.
void from_double(unsigned char* p, int t, double v) {
    switch (t) {
        case I8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
        case U8: *p = static_cast<uint8_t>(v); break;
        case I32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
        case U32: *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(v); break;
        case I64: *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
        case U64: *reinterpret_cast<uint64_t*>(p) = static_cast<uint64_t>(v); break;
        case F16: *reinterpret_cast<__half*>(p) = __float2half_rn(static_cast<float>(v)); break;
        case F32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
        case F64: *reinterpret_cast<double*>(p) = v; break;
        default: *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(static_cast<float>(v)); break;
    }
}

// v as the dtype holds it (the rounding of one step of the reduction).
double rounded(double v, int t) {
    unsigned char b[8];
    from_double(b, t, v);
    return to_double(b, t);
}

bool is_float(int t) {
    return t == F16 || t == F32 || t == F64 || t == BF16;
}

// out[i] = op over the ranks' inputs[r][i], in rank order, rounded to the dtype after each step.
void reduce(const std::vector<const unsigned char*>& inputs, unsigned char* out, size_t count, int t, int op) {
    size_t size = type_bytes(t);
    size_t n = inputs.size();
    double premul = op == AVG && is_float(t) ? rounded(1.0 / n, t) : 1.0;
    for (size_t i = 0; i < count; i++) {
        double acc = 0;
        for (size_t r = 0; r < n; r++) {
            double x = to_double(inputs[r] + i * size, t);
            if (op == AVG && is_float(t)) x = rounded(x * premul, t);
            if (r == 0) {
                acc = x;
                continue;
            }
            switch (op) {
                case PROD: acc = acc * x; break;
                case MAX: acc = x > acc ? x : acc; break;
                case MIN: acc = x < acc ? x : acc; break;
                default: acc = acc + x; break;
            }
            acc = rounded(acc, t);
        }
        if (op == AVG && !is_float(t)) acc = static_cast<double>(static_cast<int64_t>(acc) / static_cast<int64_t>(n));
        from_double(out + i * size, t, acc);
    }
}

// ------------------------------------------------------------------ collectives

enum class Kind { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST };

struct Call {
    Kind kind;
    const char* name;
    const void* send;
    void* recv;
    size_t count;      // NCCL's count: all-gather's send count, reduce-scatter's receive count
    int type;
    int op;            // reductions
    int root;          // broadcast
};

std::string signature(const Call& c) {
    std::ostringstream o;
    o << c.name << "(count " << c.count << ", " << type_name(c.type);
    if (c.kind == Kind::ALL_REDUCE || c.kind == Kind::REDUCE_SCATTER) o << ", " << op_name(c.op);
    if (c.kind == Kind::BROADCAST) o << ", root " << c.root;
    o << ")";
    return o.str();
}

// Moves the data of a collective every rank has reached; clique->m held.
void move(const Call& c, Slot& slot, int nranks) {
    size_t size = type_bytes(c.type);
    size_t bytes = c.count * size;
    std::vector<const unsigned char*> in;
    for (int r = 0; r < nranks; r++) in.push_back(static_cast<const unsigned char*>(slot.send[r]));
    switch (c.kind) {
        case Kind::ALL_REDUCE: {
            std::vector<unsigned char> result(bytes);
            reduce(in, result.data(), c.count, c.type, c.op);
            for (int r = 0; r < nranks; r++) memcpy(slot.recv[r], result.data(), bytes);
            break;
        }
        case Kind::ALL_GATHER: {
            std::vector<unsigned char> all(bytes * nranks);
            for (int q = 0; q < nranks; q++) memcpy(all.data() + q * bytes, in[q], bytes);
            for (int r = 0; r < nranks; r++) memcpy(slot.recv[r], all.data(), all.size());
            break;
        }
        case Kind::REDUCE_SCATTER: {
            std::vector<std::vector<unsigned char>> parts(nranks, std::vector<unsigned char>(bytes));
            for (int r = 0; r < nranks; r++) {
                std::vector<const unsigned char*> chunk;
                for (int q = 0; q < nranks; q++) chunk.push_back(in[q] + r * bytes);
                reduce(chunk, parts[r].data(), c.count, c.type, c.op);
            }
            for (int r = 0; r < nranks; r++) memcpy(slot.recv[r], parts[r].data(), bytes);
            break;
        }
        case Kind::BROADCAST: {
            std::vector<unsigned char> data(in[c.root], in[c.root] + bytes);
            for (int r = 0; r < nranks; r++) memcpy(slot.recv[r], data.data(), bytes);
            break;
        }
    }
}

// Runs on the rank's stream: deposit the buffers, wait for every rank, and the last one moves
// the data. A mismatch, an abort or a timeout fails the collective as NCCL reports asynchronous
// failures: the communicator's async error, the stream itself going on.
int execute(const std::shared_ptr<Comm>& comm, uint64_t seq, const Call& c) {
    std::shared_ptr<Clique> k = comm->clique;
    std::unique_lock<std::mutex> lock(k->m);
    Slot& slot = k->slots[seq];
    if (slot.send.empty()) {
        slot.send.assign(k->nranks, nullptr);
        slot.recv.assign(k->nranks, nullptr);
    }
    slot.send[comm->rank] = c.send;
    slot.recv[comm->rank] = c.recv;
    slot.arrived++;
    if (slot.arrived == k->nranks && slot.mismatch.empty() && !k->aborted) {
        move(c, slot, k->nranks);
        slot.done = true;
        k->cv.notify_all();
    }
    bool ok = k->cv.wait_for(lock, std::chrono::milliseconds(timeoutMs()),
                             [&] { return slot.done || !slot.mismatch.empty() || k->aborted; });
    int result = SUCCESS;
    std::string why;
    if (!slot.done) {
        if (!slot.mismatch.empty()) {
            result = INVALID_USAGE;
            why = "collective #" + std::to_string(seq) + " " + signature(c) + " at " + where(comm.get()) +
                  " failed: " + slot.mismatch;
        } else if (k->aborted) {
            result = REMOTE_ERROR;
            why = "collective #" + std::to_string(seq) + " " + signature(c) + " at " + where(comm.get()) +
                  " was aborted (" + k->abortedBy + ")";
        } else {
            result = SYSTEM_ERROR;
            why = "collective #" + std::to_string(seq) + " " + signature(c) + " at " + where(comm.get()) + ": only " +
                  std::to_string(slot.arrived) + " of " + std::to_string(k->nranks) + " ranks reached it in " +
                  std::to_string(timeoutMs() / 1000) + " s (NCCL would wait forever)";
        }
        (void)ok;
    }
    if (++slot.finished == k->nranks) k->slots.erase(seq);
    lock.unlock();
    if (result != SUCCESS) {
        int expected = SUCCESS;
        comm->asyncError.compare_exchange_strong(expected, result);
        fail(result, why);
    }
    comm->pending--;
    return OK;   // NCCL's failures are the communicator's, not the CUDA stream's
}

std::map<const void*, std::shared_ptr<Comm>> comms;   // live handles
std::mutex commsMutex;

std::shared_ptr<Comm> live(const void* handle) {
    std::lock_guard<std::mutex> lock(commsMutex);
    auto it = comms.find(handle);
    return it == comms.end() ? nullptr : it->second;
}

void publish(const std::shared_ptr<Comm>& c) {
    std::lock_guard<std::mutex> lock(commsMutex);
    comms[c.get()] = c;
}

struct Deferred {
    std::shared_ptr<Comm> comm;
    std::shared_ptr<Stream> stream;
    uint64_t seq;
    Call call;
};

// Group calls (this host thread's): depth, and the collectives to queue at ncclGroupEnd.
thread_local int groupDepth = 0;
thread_local std::vector<Deferred> deferred;

int queue(const Deferred& d) {
    d.comm->pending++;
    std::shared_ptr<Comm> comm = d.comm;
    uint64_t seq = d.seq;
    Call call = d.call;
    int rc = enqueue(d.stream, std::string("nccl") + call.name, [comm, seq, call] { return execute(comm, seq, call); });
    if (rc != OK) {
        d.comm->pending--;
        return fail(UNHANDLED_CUDA_ERROR, std::string("nccl") + call.name + ": the stream refused the work: " +
                                              runtime_error_name(rc));
    }
    return SUCCESS;
}

std::string hex(const void* p) {
    char b[32];
    snprintf(b, sizeof b, "%p", p);
    return b;
}

int issue(Call c, void* handle, void* stream) {
    std::string call = std::string("nccl") + c.name;
    std::shared_ptr<Comm> comm = live(handle);
    if (comm == nullptr) return fail(INVALID_ARGUMENT, call + ": " + hex(handle) + " is not a live communicator");
    if (in_host_function()) return fail(INVALID_USAGE, call + " from a CUDA host function");
    std::shared_ptr<Clique> k = comm->clique;
    std::string at = call + " at " + where(comm.get());
    if (type_bytes(c.type) == 0) return fail(INVALID_ARGUMENT, at + ": unsupported datatype " + std::to_string(c.type));
    if ((c.kind == Kind::ALL_REDUCE || c.kind == Kind::REDUCE_SCATTER) && (c.op < SUM || c.op > AVG)) {
        return fail(INVALID_ARGUMENT, at + ": invalid reduction " + std::to_string(c.op));
    }
    if (c.kind == Kind::BROADCAST && (c.root < 0 || c.root >= k->nranks)) {
        return fail(INVALID_ARGUMENT, at + ": root " + std::to_string(c.root) + " is not a rank");
    }
    std::shared_ptr<Stream> s;
    if (resolve_stream(stream, &s) != OK) return fail(INVALID_ARGUMENT, at + ": " + hex(stream) + " is not a live stream");
    if (s->device != comm->device) {
        return fail(INVALID_ARGUMENT, at + ": the stream belongs to cuda:" + std::to_string(s->device) +
                                          ", the communicator to cuda:" + std::to_string(comm->device));
    }
    size_t size = type_bytes(c.type);
    size_t n = static_cast<size_t>(k->nranks);
    size_t sendBytes = c.count * size * (c.kind == Kind::REDUCE_SCATTER ? n : 1);
    size_t recvBytes = c.count * size * (c.kind == Kind::ALL_GATHER ? n : 1);
    uintptr_t sp = reinterpret_cast<uintptr_t>(c.send), rp = reinterpret_cast<uintptr_t>(c.recv);
    bool rootOnly = c.kind == Kind::BROADCAST && comm->rank != c.root;   // only the root's send is read
    if (c.count > 0) {
        std::string why = rootOnly ? "" : check_device_range(comm->device, sp, sendBytes, size, "sendbuff");
        if (why.empty()) why = check_device_range(comm->device, rp, recvBytes, size, "recvbuff");
        if (!why.empty()) return fail(INVALID_ARGUMENT, at + ": " + why);
        bool overlap = !rootOnly && sp < rp + recvBytes && rp < sp + sendBytes;
        bool inPlace = c.kind == Kind::ALL_GATHER ? sp == rp + comm->rank * sendBytes
                     : c.kind == Kind::REDUCE_SCATTER ? rp == sp + comm->rank * recvBytes
                     : sp == rp;
        if (overlap && !inPlace) {
            return fail(INVALID_ARGUMENT, at + ": sendbuff " + hex(c.send) + " and recvbuff " + hex(c.recv) +
                                              " overlap but are not the in-place layout NCCL defines for " + c.name);
        }
    }
    Deferred d{comm, s, 0, c};
    {
        std::lock_guard<std::mutex> lock(k->m);
        if (comm->aborted || k->aborted) return fail(INVALID_USAGE, at + ": the communicator was aborted");
        d.seq = comm->issued++;
        Slot& slot = k->slots[d.seq];
        std::string sig = signature(c);
        if (slot.issuedBy < 0 && slot.mismatch.empty()) {
            slot.signature = sig;
            slot.issuedBy = comm->rank;
        } else if (slot.mismatch.empty() && slot.signature != sig) {
            slot.mismatch = "rank " + std::to_string(comm->rank) + " issued " + sig + " as collective #" +
                            std::to_string(d.seq) + ", rank " + std::to_string(slot.issuedBy) + " issued " +
                            slot.signature + ": every rank must issue the same collectives in the same order";
            std::string why = at + ": " + slot.mismatch;
            k->cv.notify_all();
            if (++slot.finished == k->nranks) k->slots.erase(d.seq);   // this rank will not run it
            return fail(INVALID_USAGE, why);
        }
    }
    if (groupDepth > 0) {
        deferred.push_back(d);
        return SUCCESS;
    }
    return queue(d);
}

}  // namespace

extern "C" {

int ncclGetVersion(int* version) {
    if (version == nullptr) return INVALID_ARGUMENT;
    *version = 22903;
    return SUCCESS;
}

int ncclGetUniqueId(UniqueId* id) {
    if (id == nullptr) return fail(INVALID_ARGUMENT, "ncclGetUniqueId: id is NULL");
    static std::atomic<uint64_t> counter{0};
    static const uint64_t nonce = std::random_device{}() * 0x100000001ull + static_cast<uint64_t>(
            std::chrono::steady_clock::now().time_since_epoch().count());
    memset(id->internal, 0, sizeof id->internal);
    uint64_t n = counter++;
    snprintf(id->internal, sizeof id->internal, "fsdp4j-standin-nccl %016llx %llu",
             static_cast<unsigned long long>(nonce), static_cast<unsigned long long>(n));
    return SUCCESS;
}

int ncclCommInitRank(void** comm, int nranks, UniqueId id, int rank) {
    if (comm == nullptr) return fail(INVALID_ARGUMENT, "ncclCommInitRank: comm is NULL");
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        return fail(INVALID_ARGUMENT, "ncclCommInitRank: rank " + std::to_string(rank) + " of " +
                                          std::to_string(nranks) + " ranks");
    }
    if (groupDepth > 0) return fail(INVALID_USAGE, "ncclCommInitRank inside a group is not modelled by the stand-in");
    if (in_host_function()) return fail(INVALID_USAGE, "ncclCommInitRank from a CUDA host function");
    if (strncmp(id.internal, "fsdp4j-standin-nccl ", 20) != 0) {
        return fail(INVALID_ARGUMENT, "ncclCommInitRank: the unique id was not made by ncclGetUniqueId");
    }
    int device;
    runtime_device(&device);
    std::string key(id.internal, sizeof id.internal);
    std::unique_lock<std::mutex> lock(joinMutex);
    std::shared_ptr<Joining>& j = joining[key];
    if (j == nullptr) {
        j = std::make_shared<Joining>();
        j->nranks = nranks;
        j->devices.assign(nranks, -1);
        j->comms.assign(nranks, nullptr);
    }
    std::shared_ptr<Joining> me = j;
    if (me->nranks != nranks) {
        return fail(INVALID_USAGE, "ncclCommInitRank: rank " + std::to_string(rank) + " says " +
                                       std::to_string(nranks) + " ranks, another said " + std::to_string(me->nranks));
    }
    if (me->devices[rank] >= 0) {
        return fail(INVALID_USAGE, "ncclCommInitRank: rank " + std::to_string(rank) + " joined twice");
    }
    me->devices[rank] = device;
    if (++me->joined == nranks) {
        for (int a = 0; a < nranks && me->result == SUCCESS; a++) {
            for (int b = a + 1; b < nranks; b++) {
                if (me->devices[a] == me->devices[b]) {
                    me->result = INVALID_USAGE;
                    me->why = "Duplicate GPU detected : rank " + std::to_string(a) + " and rank " +
                              std::to_string(b) + " both on CUDA device " + std::to_string(me->devices[a]);
                    break;
                }
            }
        }
        if (me->result == SUCCESS) {
            me->clique = std::make_shared<Clique>();
            me->clique->nranks = nranks;
            for (int r = 0; r < nranks; r++) {
                auto c = std::make_shared<Comm>();
                c->clique = me->clique;
                c->rank = r;
                c->device = me->devices[r];
                me->clique->members.push_back(c.get());
                me->comms[r] = c.get();
                publish(c);
            }
        }
        me->done = true;
        joining.erase(key);
        joinCv.notify_all();
    }
    if (!joinCv.wait_for(lock, std::chrono::milliseconds(timeoutMs()), [&] { return me->done; })) {
        return fail(SYSTEM_ERROR, "ncclCommInitRank: rank " + std::to_string(rank) + " waited " +
                                      std::to_string(timeoutMs() / 1000) + " s for " +
                                      std::to_string(nranks - me->joined) + " more rank(s) (NCCL would wait forever)");
    }
    if (me->result != SUCCESS) return fail(me->result, "ncclCommInitRank: " + me->why);
    *comm = me->comms[rank];
    return SUCCESS;
}

int ncclCommSplit(void* handle, int color, int key, void** newcomm, void* config) {
    (void)config;
    if (newcomm == nullptr) return fail(INVALID_ARGUMENT, "ncclCommSplit: newcomm is NULL");
    std::shared_ptr<Comm> comm = live(handle);
    if (comm == nullptr) return fail(INVALID_ARGUMENT, "ncclCommSplit: " + hex(handle) + " is not a live communicator");
    if (color < -1) return fail(INVALID_ARGUMENT, "ncclCommSplit: color " + std::to_string(color));
    std::shared_ptr<Clique> k = comm->clique;
    std::unique_lock<std::mutex> lock(k->m);
    if (k->aborted) return fail(INVALID_USAGE, "ncclCommSplit: the communicator was aborted");
    uint64_t seq = comm->splitsIssued++;
    SplitSlot& s = k->splits[seq];
    if (s.color.empty()) {
        s.color.assign(k->nranks, 0);
        s.key.assign(k->nranks, 0);
        s.made.assign(k->nranks, nullptr);
    }
    s.color[comm->rank] = color;
    s.key[comm->rank] = key;
    if (++s.arrived == k->nranks) {
        std::map<int, std::vector<int>> groups;
        for (int r = 0; r < k->nranks; r++) {
            if (s.color[r] >= 0) groups[s.color[r]].push_back(r);
        }
        for (auto& [c, members] : groups) {
            std::stable_sort(members.begin(), members.end(),
                             [&](int a, int b) { return s.key[a] != s.key[b] ? s.key[a] < s.key[b] : a < b; });
            auto clique = std::make_shared<Clique>();
            clique->nranks = static_cast<int>(members.size());
            for (size_t i = 0; i < members.size(); i++) {
                auto m = std::make_shared<Comm>();
                m->clique = clique;
                m->rank = static_cast<int>(i);
                m->device = k->members[members[i]]->device;
                clique->members.push_back(m.get());
                s.made[members[i]] = m.get();
                publish(m);
            }
        }
        s.done = true;
        k->cv.notify_all();
    }
    if (!k->cv.wait_for(lock, std::chrono::milliseconds(timeoutMs()), [&] { return s.done || k->aborted; })) {
        return fail(SYSTEM_ERROR, "ncclCommSplit at " + where(comm.get()) + ": the other ranks never split");
    }
    if (!s.done) return fail(INVALID_USAGE, "ncclCommSplit at " + where(comm.get()) + ": aborted");
    *newcomm = s.made[comm->rank];
    if (++s.finished == k->nranks) k->splits.erase(seq);
    return SUCCESS;
}

int ncclCommCount(const void* handle, int* count) {
    std::shared_ptr<Comm> comm = live(handle);
    if (comm == nullptr || count == nullptr) return fail(INVALID_ARGUMENT, "ncclCommCount: not a live communicator");
    *count = comm->clique->nranks;
    return SUCCESS;
}

int ncclCommUserRank(const void* handle, int* rank) {
    std::shared_ptr<Comm> comm = live(handle);
    if (comm == nullptr || rank == nullptr) return fail(INVALID_ARGUMENT, "ncclCommUserRank: not a live communicator");
    *rank = comm->rank;
    return SUCCESS;
}

int ncclCommCuDevice(const void* handle, int* device) {
    std::shared_ptr<Comm> comm = live(handle);
    if (comm == nullptr || device == nullptr) return fail(INVALID_ARGUMENT, "ncclCommCuDevice: not a live communicator");
    *device = comm->device;
    return SUCCESS;
}

int ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, void* comm, void* stream) {
    return issue({Kind::ALL_REDUCE, "AllReduce", send, recv, count, type, op, 0}, comm, stream);
}

int ncclAllGather(const void* send, void* recv, size_t sendCount, int type, void* comm, void* stream) {
    return issue({Kind::ALL_GATHER, "AllGather", send, recv, sendCount, type, 0, 0}, comm, stream);
}

int ncclReduceScatter(const void* send, void* recv, size_t recvCount, int type, int op, void* comm, void* stream) {
    return issue({Kind::REDUCE_SCATTER, "ReduceScatter", send, recv, recvCount, type, op, 0}, comm, stream);
}

int ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, void* comm, void* stream) {
    return issue({Kind::BROADCAST, "Broadcast", send, recv, count, type, 0, root}, comm, stream);
}

int ncclGroupStart() {
    groupDepth++;
    return SUCCESS;
}

int ncclGroupEnd() {
    if (groupDepth == 0) return fail(INVALID_USAGE, "ncclGroupEnd without ncclGroupStart");
    if (--groupDepth > 0) return SUCCESS;
    std::vector<Deferred> todo;
    todo.swap(deferred);
    int result = SUCCESS;
    for (const Deferred& d : todo) {
        int rc = queue(d);
        if (result == SUCCESS) result = rc;
    }
    return result;
}

int ncclCommGetAsyncError(void* handle, int* error) {
    std::shared_ptr<Comm> comm = live(handle);
    if (comm == nullptr || error == nullptr) {
        return fail(INVALID_ARGUMENT, "ncclCommGetAsyncError: not a live communicator");
    }
    *error = comm->asyncError.load();
    return SUCCESS;
}

int ncclCommAbort(void* handle) {
    std::shared_ptr<Comm> comm = live(handle);
    if (comm == nullptr) return fail(INVALID_ARGUMENT, "ncclCommAbort: " + hex(handle) + " is not a live communicator");
    {
        std::lock_guard<std::mutex> lock(comm->clique->m);
        comm->aborted = true;
        if (!comm->clique->aborted) {
            comm->clique->aborted = true;
            comm->clique->abortedBy = "ncclCommAbort at " + where(comm.get());
        }
        comm->clique->cv.notify_all();
    }
    std::lock_guard<std::mutex> lock(commsMutex);
    comms.erase(handle);
    return SUCCESS;
}

int ncclCommDestroy(void* handle) {
    std::shared_ptr<Comm> comm = live(handle);
    if (comm == nullptr) return fail(INVALID_ARGUMENT, "ncclCommDestroy: " + hex(handle) + " is not a live communicator");
    if (in_host_function()) return fail(INVALID_USAGE, "ncclCommDestroy from a CUDA host function");
    // NCCL finishes the communicator's queued collectives first.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs());
    while (comm->pending.load() > 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            return fail(SYSTEM_ERROR, "ncclCommDestroy at " + where(comm.get()) + ": collectives still pending");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::lock_guard<std::mutex> lock(commsMutex);
    comms.erase(handle);
    return SUCCESS;
}

int ncclCommFinalize(void* handle) {
    return live(handle) == nullptr ? INVALID_ARGUMENT : SUCCESS;
}

const char* ncclGetErrorString(int result) {
    switch (result) {
        case SUCCESS: return "no error";
        case UNHANDLED_CUDA_ERROR: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
        case SYSTEM_ERROR: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
        case INTERNAL_ERROR: return "internal error - please report this issue to the NCCL developers";
        case INVALID_ARGUMENT: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
        case INVALID_USAGE: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
        case REMOTE_ERROR: return "remote process exited or there was a network error";
        case IN_PROGRESS: return "NCCL operation in progress";
        default: return "unknown result code";
    }
}

const char* ncclGetLastError(void* comm) {
    (void)comm;   // as NCCL: the process's last error, whatever the communicator
    thread_local std::string copy;
    std::lock_guard<std::mutex> lock(lastErrorMutex);
    copy = lastError;
    return copy.c_str();
}

}  // extern "C"
