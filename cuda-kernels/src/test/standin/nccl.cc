// The stand-in NCCL (libnccl.so.2): ranks on stand-in devices, in one process or in several
// processes of this host, on the stand-in's streams. What it models:
//   - Meeting. ncclGetUniqueId starts, once per process, a hub: a thread serving a listening socket
//     on 127.0.0.1. The id carries a magic, the hub's random nonce, the id's number and the hub's
//     address, so that any process can meet there: ncclCommInitRank(Config) connects (one
//     connection per process and hub, a reader and a writer thread on each side, so that no caller
//     ever blocks on a slow or stopped peer) and joins the id with its current device and the
//     host's name. When every rank has joined, the hub refuses two ranks on one (host, device)
//     ("Duplicate GPU detected", ncclInvalidUsage for every rank, as NCCL) or makes the
//     communicator. One whose ranks are all in one process then runs in that process alone; one
//     that spans processes runs through the hub, whose process must outlive it (the process that
//     called ncclGetUniqueId is the job's rendezvous, as its store is). ncclCommSplit takes every
//     rank's color and key (no color: no communicator) and makes the new ones the same way.
//   - Non-blocking communicators. A config with blocking = 0 (its header read as NCCL reads it:
//     `size` bytes of it, the magic 0xcafebeef, a version from 2.14 for `blocking` to count) makes
//     ncclCommInitRankConfig and ncclCommSplit return ncclInProgress at once with a handle, whose
//     ncclCommGetAsyncError says ncclInProgress until the communicator exists, then ncclSuccess or
//     why it never will (a duplicate GPU, a rank that did not come within the stand-in's timeout,
//     an abort, a process gone). No config means blocking for an init; a split without one
//     inherits its parent's mode, as in NCCL. A handle still being made refuses collectives,
//     splits and queries (ncclInvalidUsage); ncclCommAbort on it gives up its init or split.
//   - Collectives. A collective is checked when it is issued (buffers in device memory of the
//     communicator's device, aligned to the dtype, in-place layouts as NCCL defines them, a stream
//     of that device) and queued on the stream. In one process, when every rank's stream has
//     reached it, the last to arrive moves the data for all; across processes each rank's stream
//     sends its input to the hub, which moves the data when every rank's has come and sends each
//     rank its output. Both with one arithmetic: reductions in rank order, rounded to the dtype
//     after each step; ncclAvg of floats multiplies each input by 1/N first, as NCCL's PreMulSum
//     does. Stricter than NCCL, which would hang or mix buffers: the n-th collective of every rank
//     of a communicator must be the same call (operation, count, dtype, reduction, root). In one
//     process the rank that issues a different one gets ncclInvalidUsage from the call; across
//     processes the hub notices, and every rank's n-th collective fails with ncclInvalidUsage as
//     its communicator's async error. Both name both calls.
//   - Kernel slots and launch order. With FSDP4J_STANDIN_NCCL_SLOTS=k a device runs at most k
//     collectives at a time, from the moment its stream reaches one until its data has moved (as
//     NCCL's kernels spin on the GPU until their peers come), so two ranks whose streams reach two
//     communicators' collectives in different orders can deadlock. With NCCL_LAUNCH_ORDER_IMPLICIT
//     set (NCCL 2.26), a device's collectives start in the order the host issued them, over every
//     communicator of that device in this process: a later-issued one never starts before an
//     earlier-issued one has.
//   - Failures are the communicator's, as NCCL reports asynchronous ones: a rank waiting in a
//     collective fails with its communicator's async error, its stream going on. ncclCommAbort
//     stops the communicator in this process (its ranks waiting here in collectives, kernel slots
//     or splits are released; later calls on it fail at once) and, spanning processes, at the hub,
//     which tells the other processes: their waiting ranks get ncclRemoteError at once. A process
//     that dies closes its connection: whatever it had ranks in (and had not destroyed) fails at
//     the hub, so that ranks waiting elsewhere get ncclRemoteError; when the hub's process dies,
//     every rank waiting there does. Ranks not waiting notice at their next call on the
//     communicator, as NCCL notices a peer's failure only in an operation with it. A stopped
//     process makes the others wait, as NCCL hangs, until FSDP4J_STANDIN_NCCL_TIMEOUT_S (default
//     600) passes: then ncclSystemError. Each failure is one line on stderr, "[stand-in NCCL] ...",
//     and what ncclGetLastError says.
// Not modelled: NCCL's transports, topology, channels and proxies; other hosts (the hub listens on
// loopback); collectives or ncclGroupEnd returning ncclInProgress on non-blocking communicators;
// NCCL_COMM_BLOCKING and the config's other fields; ncclCommInitRank inside a group; point-to-point,
// reduce and all-to-all. Nothing read from a socket is trusted: lengths are capped (1 GiB a
// message) and every field is checked before use.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <list>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

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

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------ settings

long timeoutMs() {
    static long ms = [] {
        const char* v = getenv("FSDP4J_STANDIN_NCCL_TIMEOUT_S");
        long s = v != nullptr && *v != 0 ? atol(v) : 600;
        return (s > 0 ? s : 600) * 1000;
    }();
    return ms;
}

Clock::time_point deadline() {
    return Clock::now() + std::chrono::milliseconds(timeoutMs());
}

// FSDP4J_STANDIN_NCCL_SLOTS: collectives a device runs at once (0: any number).
int kernelSlots() {
    static int k = [] {
        const char* v = getenv("FSDP4J_STANDIN_NCCL_SLOTS");
        long n = v != nullptr && *v != 0 ? atol(v) : 0;
        return n > 0 ? static_cast<int>(std::min(n, 1024L)) : 0;
    }();
    return k;
}

// NCCL_LAUNCH_ORDER_IMPLICIT, read as NCCL reads its integer parameters (non-zero: on).
bool implicitLaunchOrder() {
    static bool on = [] {
        const char* v = getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
        return v != nullptr && atol(v) != 0;
    }();
    return on;
}

// ------------------------------------------------------------------ dtypes and reductions

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

// ------------------------------------------------------------------ collectives: what they are

enum class Kind : uint8_t { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST };

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::ALL_REDUCE: return "AllReduce";
        case Kind::ALL_GATHER: return "AllGather";
        case Kind::REDUCE_SCATTER: return "ReduceScatter";
        default: return "Broadcast";
    }
}

struct Call {
    Kind kind;
    const void* send;
    void* recv;
    size_t count;      // NCCL's count: all-gather's send count, reduce-scatter's receive count
    int type;
    int op;            // reductions
    int root;          // broadcast
};

std::string signature(const Call& c) {
    std::ostringstream o;
    o << kind_name(c.kind) << "(count " << c.count << ", " << type_name(c.type);
    if (c.kind == Kind::ALL_REDUCE || c.kind == Kind::REDUCE_SCATTER) o << ", " << op_name(c.op);
    if (c.kind == Kind::BROADCAST) o << ", root " << c.root;
    o << ")";
    return o.str();
}

size_t send_bytes(const Call& c, size_t nranks) {
    return c.count * type_bytes(c.type) * (c.kind == Kind::REDUCE_SCATTER ? nranks : 1);
}

size_t recv_bytes(const Call& c, size_t nranks) {
    return c.count * type_bytes(c.type) * (c.kind == Kind::ALL_GATHER ? nranks : 1);
}

// Moves a collective's data: in[r] is rank r's send buffer (a broadcast reads only the root's),
// out[r] its receive buffer. The one arithmetic of both paths, so that they agree bit for bit.
void move(const Call& c, const std::vector<const unsigned char*>& in, const std::vector<unsigned char*>& out) {
    size_t nranks = in.size();
    size_t bytes = c.count * type_bytes(c.type);
    switch (c.kind) {
        case Kind::ALL_REDUCE: {
            std::vector<unsigned char> result(bytes);
            reduce(in, result.data(), c.count, c.type, c.op);
            for (size_t r = 0; r < nranks; r++) memcpy(out[r], result.data(), bytes);
            break;
        }
        case Kind::ALL_GATHER: {
            std::vector<unsigned char> all(bytes * nranks);
            for (size_t q = 0; q < nranks; q++) memcpy(all.data() + q * bytes, in[q], bytes);
            for (size_t r = 0; r < nranks; r++) memcpy(out[r], all.data(), all.size());
            break;
        }
        case Kind::REDUCE_SCATTER: {
            std::vector<std::vector<unsigned char>> parts(nranks, std::vector<unsigned char>(bytes));
            for (size_t r = 0; r < nranks; r++) {
                std::vector<const unsigned char*> chunk;
                for (size_t q = 0; q < nranks; q++) chunk.push_back(in[q] + r * bytes);
                reduce(chunk, parts[r].data(), c.count, c.type, c.op);
            }
            for (size_t r = 0; r < nranks; r++) memcpy(out[r], parts[r].data(), bytes);
            break;
        }
        case Kind::BROADCAST: {
            std::vector<unsigned char> data(in[c.root], in[c.root] + bytes);
            for (size_t r = 0; r < nranks; r++) memcpy(out[r], data.data(), bytes);
            break;
        }
    }
}

// ------------------------------------------------------------------ the wire

// A sane cap on one message: a length read from a socket is never trusted beyond it.
constexpr uint32_t MAX_FRAME = 1u << 30;
constexpr uint32_t MAX_TEXT = 1u << 16;
// What one rank's collective may move across processes (its input or its output).
constexpr size_t MAX_DATA = MAX_FRAME - 4096;

// The messages between a process and a hub. A frame is its length (u32), its type (u8), then its
// fields, little-endian; a string or a byte run is its length, then its bytes.
enum Message : uint8_t {
    HELLO = 1,     // process -> hub: the id's nonce u64, pid i32, host str
    REFUSED,       // hub -> process: why str (the id was not made by this hub)
    JOIN,          // id number u64, nranks i32, rank i32, device i32, token u64
    JOINING,       // hub -> each joined rank: token u64, ranks joined so far i32
    ABORT_JOIN,    // id number u64, rank i32 (ncclCommAbort while being made)
    SPLIT,         // comm u64, split number u64, rank i32, color i32, key i32, token u64
    ABORT_SPLIT,   // comm u64, split number u64, rank i32
    MADE,          // hub -> rank: token u64, comm u64 (0: no color), nranks i32, rank i32, in one process u8
    MAKE_FAILED,   // hub -> rank: token u64, code i32, why str
    ISSUE,         // comm u64, seq u64, rank i32, kind u8, count u64, dtype i32, op i32, root i32
    ARRIVE,        // comm u64, seq u64, rank i32, send buffer bytes (the stream reached it)
    RESULT,        // hub -> rank: comm u64, seq u64, rank i32, receive buffer bytes
    COLL_FAILED,   // hub -> rank: comm u64, seq u64, rank i32, code i32, why str
    ABORT,         // comm u64, rank i32, why str
    LEAVE,         // comm u64, rank i32 (ncclCommDestroy)
    COMM_FAILED,   // hub -> process: comm u64, code i32, why str
};

struct Out {
    std::vector<unsigned char> b;
    explicit Out(Message type) : b(4, 0) { b.push_back(type); }
    Out& u8(uint8_t v) {
        b.push_back(v);
        return *this;
    }
    Out& u32(uint32_t v) {
        for (int i = 0; i < 4; i++) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
        return *this;
    }
    Out& u64(uint64_t v) {
        for (int i = 0; i < 8; i++) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
        return *this;
    }
    Out& i32(int v) { return u32(static_cast<uint32_t>(v)); }
    Out& str(const std::string& s) {
        size_t n = std::min<size_t>(s.size(), MAX_TEXT);
        u32(static_cast<uint32_t>(n));
        b.insert(b.end(), s.begin(), s.begin() + n);
        return *this;
    }
    Out& bytes(const void* p, size_t n) {
        u64(n);
        const unsigned char* c = static_cast<const unsigned char*>(p);
        if (n > 0) b.insert(b.end(), c, c + n);
        return *this;
    }
    std::vector<unsigned char> frame() {
        uint32_t n = static_cast<uint32_t>(b.size() - 4);
        for (int i = 0; i < 4; i++) b[i] = static_cast<unsigned char>(n >> (8 * i));
        return std::move(b);
    }
};

// One received message's fields; reading past its end throws (the connection is then dropped).
struct In {
    const unsigned char* p;
    size_t n;
    size_t at = 0;
    void need(uint64_t k) const {
        if (k > n - at) throw std::runtime_error("a truncated message");
    }
    uint8_t u8() {
        need(1);
        return p[at++];
    }
    uint32_t u32() {
        need(4);
        uint32_t v = 0;
        for (int i = 0; i < 4; i++) v |= static_cast<uint32_t>(p[at + i]) << (8 * i);
        at += 4;
        return v;
    }
    uint64_t u64() {
        need(8);
        uint64_t v = 0;
        for (int i = 0; i < 8; i++) v |= static_cast<uint64_t>(p[at + i]) << (8 * i);
        at += 8;
        return v;
    }
    int i32() { return static_cast<int>(u32()); }
    std::string str() {
        uint32_t len = u32();
        if (len > MAX_TEXT) throw std::runtime_error("a string of " + std::to_string(len) + " bytes");
        need(len);
        std::string s(reinterpret_cast<const char*>(p + at), len);
        at += len;
        return s;
    }
    std::vector<unsigned char> bytes() {
        uint64_t len = u64();
        need(len);
        std::vector<unsigned char> v(p + at, p + at + len);
        at += len;
        return v;
    }
};

std::string errno_text(int e) {
    char buf[256];
    return strerror_r(e, buf, sizeof buf);   // the GNU strerror_r: returns the text
}

std::atomic<uint64_t> linkSerials{1};

// One TCP connection between a process and a hub: a reader thread hands each message to a handler,
// a writer thread sends what send() queued, so that no caller ever blocks on a peer that is slow or
// stopped. When the connection ends (EOF, an error, a malformed message, close()) the handler of
// closing runs once, on the reader thread, with the first reason.
class Link : public std::enable_shared_from_this<Link> {
  public:
    using Handler = std::function<void(Link&, uint8_t, In&)>;
    using Closed = std::function<void(Link&, const std::string&)>;

    Link(int fd, std::string peer) : serial(linkSerials++), fd_(fd), peer_(std::move(peer)) {}
    ~Link() { ::close(fd_); }

    const uint64_t serial;

    void start(Handler onMessage, Closed onClosed) {
        std::shared_ptr<Link> self = shared_from_this();
        std::thread([self, onMessage, onClosed] { self->readLoop(onMessage, onClosed); }).detach();
        std::thread([self] { self->writeLoop(); }).detach();
    }

    void send(std::vector<unsigned char> frame) {
        {
            std::lock_guard<std::mutex> lock(m_);
            if (closing_) return;
            outbox_.push_back(std::move(frame));
            queued_++;
        }
        cv_.notify_all();
    }

    // Waits until what was sent so far is in the kernel's hands (a process may exit right after),
    // the connection ended, or `until` passed.
    void flush(Clock::time_point until) {
        std::unique_lock<std::mutex> lock(m_);
        uint64_t target = queued_;
        cv_.wait_until(lock, until, [&] { return written_ >= target || closing_; });
    }

    void close(const std::string& why) {
        {
            std::lock_guard<std::mutex> lock(m_);
            if (why_.empty()) why_ = why;
            if (closing_) return;
            closing_ = true;
        }
        ::shutdown(fd_, SHUT_RDWR);
        cv_.notify_all();
    }

    bool closed() {
        std::lock_guard<std::mutex> lock(m_);
        return closing_;
    }

    std::string peer() {
        std::lock_guard<std::mutex> lock(m_);
        return peer_;
    }

    void setPeer(const std::string& p) {
        std::lock_guard<std::mutex> lock(m_);
        peer_ = p;
    }

  private:
    int fd_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::vector<unsigned char>> outbox_;
    uint64_t queued_ = 0;
    uint64_t written_ = 0;
    bool closing_ = false;
    std::string why_;
    std::string peer_;

    bool readAll(unsigned char* p, size_t n, std::string* why) {
        while (n > 0) {
            ssize_t r = ::recv(fd_, p, n, 0);
            if (r > 0) {
                p += r;
                n -= static_cast<size_t>(r);
            } else if (r == 0) {
                *why = "the connection closed";
                return false;
            } else if (errno != EINTR) {
                *why = errno_text(errno);
                return false;
            }
        }
        return true;
    }

    void readLoop(const Handler& onMessage, const Closed& onClosed) {
        std::string why;
        std::vector<unsigned char> buf;
        for (;;) {
            unsigned char head[4];
            if (!readAll(head, 4, &why)) break;
            uint32_t len = head[0] | head[1] << 8 | head[2] << 16 | static_cast<uint32_t>(head[3]) << 24;
            if (len == 0 || len > MAX_FRAME) {
                why = "a message of " + std::to_string(len) + " bytes, not the stand-in NCCL's protocol";
                break;
            }
            buf.resize(len);
            if (!readAll(buf.data(), len, &why)) break;
            In in{buf.data() + 1, len - 1};
            try {
                onMessage(*this, buf[0], in);
            } catch (const std::exception& e) {
                why = std::string("a malformed message (") + e.what() + ")";
                break;
            }
        }
        close(why);
        {
            std::lock_guard<std::mutex> lock(m_);
            why = why_;
        }
        onClosed(*this, why);
    }

    void writeLoop() {
        for (;;) {
            std::vector<unsigned char> f;
            {
                std::unique_lock<std::mutex> lock(m_);
                cv_.wait(lock, [&] { return closing_ || !outbox_.empty(); });
                if (closing_) return;
                f = std::move(outbox_.front());
                outbox_.pop_front();
            }
            size_t at = 0;
            while (at < f.size()) {
                ssize_t w = ::send(fd_, f.data() + at, f.size() - at, MSG_NOSIGNAL);
                if (w > 0) {
                    at += static_cast<size_t>(w);
                } else if (w < 0 && errno != EINTR) {
                    close("sending failed: " + errno_text(errno));
                    return;
                }
            }
            {
                std::lock_guard<std::mutex> lock(m_);
                written_++;
            }
            cv_.notify_all();
        }
    }
};

void noDelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::string hostName() {
    char b[256] = {0};
    if (gethostname(b, sizeof b - 1) != 0) return "localhost";
    return b;
}

// ------------------------------------------------------------------ this process's communicators

struct Comm;

// One collective of a communicator of this process, from its issue to the end of its data movement
// on every rank.
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

// What the ranks of one ncclCommSplit of a communicator of this process bring.
struct SplitSlot {
    int arrived = 0;
    std::vector<int> color, key;
    std::vector<std::shared_ptr<Comm>> made;   // each rank's new handle
};

// A rank's collective across processes, waiting for the hub's answer.
struct RemoteWait {
    bool done = false;
    int code = SUCCESS;
    std::string why;
    std::vector<unsigned char> data;
};

// The ranks of one communicator that live in this process (all of them, unless it spans processes).
struct Clique {
    int nranks = 0;
    std::mutex m;
    std::condition_variable cv;
    std::map<uint64_t, Slot> slots;
    std::map<uint64_t, SplitSlot> splits;
    bool aborted = false;     // ncclCommAbort here, or a failure elsewhere
    bool remote = false;      // ... elsewhere: another process aborted it, or is gone
    std::string abortedBy;
    std::atomic<bool> stopped{false};   // aborted, read by waiters for a kernel slot
    // Spanning processes: the connection to its hub and the hub's number for it; the collectives of
    // this process's ranks waiting for the hub, by (sequence number, rank).
    std::shared_ptr<Link> link;
    uint64_t id = 0;
    std::map<std::pair<uint64_t, int>, RemoteWait> waits;
};

struct Comm {
    std::mutex m;                          // being made against ncclCommAbort
    std::shared_ptr<Clique> clique;        // set once made
    std::atomic<bool> ready{false};
    int rank = -1;
    int nranks = 0;
    int device = 0;
    bool blocking = true;                  // its config's: a split without a config inherits it
    uint64_t issued = 0;                   // collectives issued (clique->m)
    uint64_t splitsIssued = 0;
    std::atomic<int> asyncError{IN_PROGRESS};
    std::atomic<int> pending{0};
    std::atomic<bool> aborted{false};
    std::function<void()> abandon;         // while being made: tells the hub this rank gave up (m)
};

std::string where(const Comm* c) {
    return "rank " + (c->rank >= 0 ? std::to_string(c->rank) : std::string("?")) + " of " +
           std::to_string(c->nranks) + " (cuda:" + std::to_string(c->device) + ")";
}

std::string hex(const void* p) {
    char b[32];
    snprintf(b, sizeof b, "%p", p);
    return b;
}

// A rank of this process waiting at a hub for its communicator to be made.
struct Pending {
    std::shared_ptr<Comm> comm;
    std::shared_ptr<Link> link;
    std::weak_ptr<Clique> parent;   // a split's
    std::string what;               // "ncclCommSplit at rank 1 of 4 (cuda:1)"
    int joined = 0;                 // an init's: ranks at the hub so far
};

// A device's NCCL kernels: the slots they hold, and (implicit launch order) the tickets the host
// handed out in issue order and the next one allowed to start.
struct DeviceLaunches {
    int busy = 0;
    std::list<std::string> holders;
    uint64_t nextTicket = 0;
    uint64_t nextToStart = 0;
    std::set<uint64_t> startedEarly;          // failed before their turn
    std::map<uint64_t, std::string> waiting;  // ticket -> what it is, until it starts
};

class Hub;

// The process's state; never destroyed, since stream workers and socket threads may outlive main.
struct State {
    std::mutex lastErrorMutex;
    std::string lastError;
    std::mutex commsMutex;
    std::map<const void*, std::shared_ptr<Comm>> comms;   // live handles
    std::mutex hubMutex;
    Hub* hub = nullptr;
    std::string hubError;
    // Connections to hubs, ranks waiting at them, and communicators by (connection, hub number);
    // cv: a handle was made or failed.
    std::mutex m;
    std::condition_variable cv;
    std::map<std::string, std::shared_ptr<Link>> links;
    std::map<uint64_t, Pending> pendings;
    std::map<std::pair<uint64_t, uint64_t>, std::weak_ptr<Clique>> cliques;
    uint64_t nextToken = 1;
    std::mutex launchMutex;
    std::condition_variable launchCv;
    std::map<int, DeviceLaunches> launches;
};

State& S() {
    static State* s = new State;
    return *s;
}

int fail(int result, const std::string& why) {
    {
        std::lock_guard<std::mutex> lock(S().lastErrorMutex);
        S().lastError = why;
    }
    fprintf(stderr, "[stand-in NCCL] %s\n", why.c_str());
    fflush(stderr);
    return result;
}

std::shared_ptr<Comm> live(const void* handle) {
    std::lock_guard<std::mutex> lock(S().commsMutex);
    auto it = S().comms.find(handle);
    return it == S().comms.end() ? nullptr : it->second;
}

void publish(const std::shared_ptr<Comm>& c) {
    std::lock_guard<std::mutex> lock(S().commsMutex);
    S().comms[c.get()] = c;
}

void forget(const void* handle) {
    std::lock_guard<std::mutex> lock(S().commsMutex);
    S().comms.erase(handle);
}

void notifyMade() {
    { std::lock_guard<std::mutex> lock(S().m); }
    S().cv.notify_all();
}

void notifyLaunches() {
    { std::lock_guard<std::mutex> lock(S().launchMutex); }
    S().launchCv.notify_all();
}

void failMaking(const std::shared_ptr<Comm>& c, int code, const std::string& why);

// Marks a communicator of this process aborted: its ranks waiting here (collectives, kernel slots,
// splits of it) are released, each with its communicator's async error, and later calls on it fail
// at once. Ranks not waiting are left alone, as NCCL notices a peer's failure only in an operation
// with it. `remote`: the cause is elsewhere (ncclRemoteError). False if it already was.
bool stopClique(const std::shared_ptr<Clique>& k, const std::string& why, bool remote) {
    std::vector<std::shared_ptr<Comm>> children;
    {
        std::lock_guard<std::mutex> lock(k->m);
        if (k->aborted) return false;
        k->aborted = true;
        k->remote = remote;
        k->abortedBy = why;
        k->stopped = true;
        for (auto& [seq, s] : k->splits) {
            for (auto& c : s.made) {
                if (c != nullptr) children.push_back(c);
            }
        }
        k->splits.clear();
        k->cv.notify_all();
    }
    notifyLaunches();
    std::vector<Pending> splits;
    {
        std::lock_guard<std::mutex> lock(S().m);
        for (auto it = S().pendings.begin(); it != S().pendings.end();) {
            if (it->second.parent.lock() == k) {
                splits.push_back(it->second);
                it = S().pendings.erase(it);
            } else {
                ++it;
            }
        }
    }
    int code = remote ? REMOTE_ERROR : INVALID_USAGE;
    for (auto& c : children) failMaking(c, code, "ncclCommSplit: aborted (" + why + ")");
    for (auto& p : splits) failMaking(p.comm, code, p.what + ": aborted (" + why + ")");
    return true;
}

// How long ncclCommAbort and ncclCommDestroy wait for their message to the hub to leave.
constexpr auto FLUSH = std::chrono::seconds(2);

// A ncclCommAbort at c: its communicator stops here, and, spanning processes, at the hub, which
// tells the other processes.
void abortHere(const std::shared_ptr<Comm>& c, const std::string& why) {
    std::shared_ptr<Clique> k = c->clique;
    if (stopClique(k, why, false) && k->link != nullptr) {
        k->link->send(Out(ABORT).u64(k->id).i32(c->rank).str(why + " (pid " + std::to_string(getpid()) + " on " +
                                                              hostName() + ")").frame());
        k->link->flush(Clock::now() + FLUSH);
    }
}

// c's communicator exists (k: null for a split's NCCL_SPLIT_NOCOLOR): c becomes usable, unless it
// was aborted or gave up meanwhile, in which case the communicator is aborted at once so that its
// other ranks do not wait for this one.
void make(const std::shared_ptr<Comm>& c, const std::shared_ptr<Clique>& k, int rank) {
    bool dead;
    {
        std::lock_guard<std::mutex> lock(c->m);
        c->rank = rank;
        c->nranks = k != nullptr ? k->nranks : 0;
        c->clique = k;
        c->abandon = nullptr;
        dead = c->aborted || c->asyncError.load() != IN_PROGRESS;
        if (!dead) {
            if (k != nullptr) c->ready = true;
            c->asyncError = SUCCESS;
        }
    }
    if (dead && k != nullptr) {
        abortHere(c, c->aborted ? "ncclCommAbort at " + where(c.get()) + " while its communicator was being made"
                                : where(c.get()) + " gave up before its communicator was made");
    }
    notifyMade();
}

// c's communicator cannot be made: c's async error says why (once).
void failMaking(const std::shared_ptr<Comm>& c, int code, const std::string& why) {
    bool now;
    {
        std::lock_guard<std::mutex> lock(c->m);
        now = c->asyncError.load() == IN_PROGRESS;
        if (now) {
            c->asyncError = code;
            c->abandon = nullptr;
        }
    }
    if (now && !c->aborted) fail(code, why);
    notifyMade();
}

// Waits until c is made or has failed, at most the stand-in's timeout, after which it fails with
// the text `why` gives (NCCL would wait forever). Returns c's state.
int awaitMade(const std::shared_ptr<Comm>& c, const std::function<std::string()>& why) {
    {
        std::unique_lock<std::mutex> lock(S().m);
        S().cv.wait_until(lock, deadline(), [&] { return c->asyncError.load() != IN_PROGRESS || c->aborted; });
    }
    if (c->asyncError.load() == IN_PROGRESS && !c->aborted) failMaking(c, SYSTEM_ERROR, why());
    return c->asyncError.load();
}

// ------------------------------------------------------------------ kernel slots and launch order

constexpr uint64_t NO_TICKET = UINT64_MAX;

// A ticket in the device's issue order (implicit launch order).
uint64_t takeTicket(int device, const std::string& what) {
    std::lock_guard<std::mutex> lock(S().launchMutex);
    DeviceLaunches& d = S().launches[device];
    d.waiting[d.nextTicket] = what;
    return d.nextTicket++;
}

// The collective of ticket t has started (or will never start): the next may. launchMutex held.
void startTicket(DeviceLaunches& d, uint64_t t) {
    if (t == NO_TICKET) return;
    d.waiting.erase(t);
    if (t != d.nextToStart) {
        d.startedEarly.insert(t);
        return;
    }
    d.nextToStart++;
    while (d.startedEarly.erase(d.nextToStart) > 0) d.nextToStart++;
}

void dropTicket(int device, uint64_t t) {
    if (t == NO_TICKET) return;
    {
        std::lock_guard<std::mutex> lock(S().launchMutex);
        startTicket(S().launches[device], t);
    }
    S().launchCv.notify_all();
}

struct Launch {
    int code = SUCCESS;
    std::string why;
    bool holds = false;
    std::list<std::string>::iterator holder;
};

// The stream has reached a collective: it waits for its turn (implicit launch order) and a free
// kernel slot of its device. SUCCESS without a slot when the communicator was aborted meanwhile.
Launch acquire(const Comm& comm, uint64_t ticket, const std::string& what, Clock::time_point until) {
    Launch l;
    int slots = kernelSlots();
    if (slots == 0 && ticket == NO_TICKET) return l;
    const Clique& k = *comm.clique;
    std::unique_lock<std::mutex> lock(S().launchMutex);
    DeviceLaunches& d = S().launches[comm.device];
    auto turn = [&] { return ticket == NO_TICKET || ticket == d.nextToStart; };
    auto free = [&] { return slots == 0 || d.busy < slots; };
    bool ok = S().launchCv.wait_until(lock, until, [&] { return k.stopped.load() || (turn() && free()); });
    if (ok && !k.stopped.load() && slots > 0) {
        d.busy++;
        l.holder = d.holders.insert(d.holders.end(), what);
        l.holds = true;
    } else if (!ok) {
        std::string waited = "waited " + std::to_string(timeoutMs() / 1000) + " s ";
        if (!turn()) {
            auto next = d.waiting.find(d.nextToStart);
            l.why = waited + "for the collectives issued before it on cuda:" + std::to_string(comm.device) +
                    " to start (NCCL_LAUNCH_ORDER_IMPLICIT: a device's collectives start in the order the host issued"
                    " them; the next to start is " + (next != d.waiting.end() ? next->second : std::string("?")) +
                    ") (NCCL would wait forever)";
        } else {
            std::string held;
            for (const std::string& h : d.holders) held += (held.empty() ? "" : "; ") + h;
            l.why = waited + "for one of cuda:" + std::to_string(comm.device) + "'s " + std::to_string(slots) +
                    " NCCL kernel slot(s) (FSDP4J_STANDIN_NCCL_SLOTS), held by " + held +
                    " (NCCL would wait forever)";
        }
        l.code = SYSTEM_ERROR;
    }
    startTicket(d, ticket);
    lock.unlock();
    S().launchCv.notify_all();
    return l;
}

void release(int device, Launch& l) {
    if (!l.holds) return;
    {
        std::lock_guard<std::mutex> lock(S().launchMutex);
        DeviceLaunches& d = S().launches[device];
        d.busy--;
        d.holders.erase(l.holder);
    }
    l.holds = false;
    S().launchCv.notify_all();
}

// ------------------------------------------------------------------ collectives: running them

// In one process: deposit the buffers, wait for every rank, and the last one moves the data.
int exchangeHere(const std::shared_ptr<Comm>& comm, uint64_t seq, const Call& c, const std::string& at,
                 Clock::time_point until, std::string* why) {
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
        std::vector<const unsigned char*> in;
        std::vector<unsigned char*> out;
        for (int r = 0; r < k->nranks; r++) {
            in.push_back(static_cast<const unsigned char*>(slot.send[r]));
            out.push_back(static_cast<unsigned char*>(slot.recv[r]));
        }
        move(c, in, out);
        slot.done = true;
        k->cv.notify_all();
    }
    k->cv.wait_until(lock, until, [&] { return slot.done || !slot.mismatch.empty() || k->aborted; });
    int result = SUCCESS;
    if (!slot.done) {
        if (!slot.mismatch.empty()) {
            result = INVALID_USAGE;
            *why = at + " failed: " + slot.mismatch;
        } else if (k->aborted) {
            result = REMOTE_ERROR;
            *why = at + " was aborted (" + k->abortedBy + ")";
        } else {
            result = SYSTEM_ERROR;
            *why = at + ": only " + std::to_string(slot.arrived) + " of " + std::to_string(k->nranks) +
                   " ranks reached it in " + std::to_string(timeoutMs() / 1000) + " s (NCCL would wait forever)";
        }
    }
    if (++slot.finished == k->nranks) k->slots.erase(seq);
    return result;
}

// Across processes: send this rank's input to the hub and wait for its output.
int exchangeAtHub(const std::shared_ptr<Comm>& comm, uint64_t seq, const Call& c, const std::string& at,
                  Clock::time_point until, std::string* why) {
    std::shared_ptr<Clique> k = comm->clique;
    std::pair<uint64_t, int> key{seq, comm->rank};
    {
        std::lock_guard<std::mutex> lock(k->m);
        if (k->aborted) {
            *why = at + " was aborted (" + k->abortedBy + ")";
            return REMOTE_ERROR;
        }
        k->waits[key];
    }
    size_t n = static_cast<size_t>(k->nranks);
    bool sends = c.kind != Kind::BROADCAST || comm->rank == c.root;   // only the root's send is read
    k->link->send(Out(ARRIVE).u64(k->id).u64(seq).i32(comm->rank).bytes(c.send, sends ? send_bytes(c, n) : 0).frame());
    std::unique_lock<std::mutex> lock(k->m);
    RemoteWait& w = k->waits[key];
    k->cv.wait_until(lock, until, [&] { return w.done || k->aborted; });
    int result = SUCCESS;
    if (w.done && w.code == SUCCESS) {
        if (w.data.size() != recv_bytes(c, n)) {
            result = INTERNAL_ERROR;
            *why = at + ": the hub sent " + std::to_string(w.data.size()) + " bytes for " +
                   std::to_string(recv_bytes(c, n));
        } else if (!w.data.empty()) {
            memcpy(c.recv, w.data.data(), w.data.size());
        }
    } else if (w.done) {
        result = w.code;
        *why = at + " failed: " + w.why;
    } else if (k->aborted) {
        result = REMOTE_ERROR;
        *why = at + " was aborted (" + k->abortedBy + ")";
    } else {
        result = SYSTEM_ERROR;
        *why = at + ": the other ranks did not all reach it in " + std::to_string(timeoutMs() / 1000) +
               " s (NCCL would wait forever)";
    }
    k->waits.erase(key);
    return result;
}

// Runs on the rank's stream. A mismatch, an abort or a timeout fails the collective as NCCL reports
// asynchronous failures: the communicator's async error, the stream itself going on.
int execute(const std::shared_ptr<Comm>& comm, uint64_t seq, const Call& c, uint64_t ticket) {
    Clock::time_point until = deadline();
    std::string at = "collective #" + std::to_string(seq) + " " + signature(c) + " at " + where(comm.get());
    Launch launch = acquire(*comm, ticket, at, until);
    int result = SUCCESS;
    std::string why;
    if (launch.code != SUCCESS) {
        result = launch.code;
        why = at + ": " + launch.why;
    } else if (comm->clique->link != nullptr) {
        result = exchangeAtHub(comm, seq, c, at, until, &why);
    } else {
        result = exchangeHere(comm, seq, c, at, until, &why);
    }
    release(comm->device, launch);
    if (result != SUCCESS) {
        int expected = SUCCESS;
        comm->asyncError.compare_exchange_strong(expected, result);
        fail(result, why);
    }
    comm->pending--;
    return OK;   // NCCL's failures are the communicator's, not the CUDA stream's
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
    std::string name = std::string("nccl") + kind_name(call.kind);
    uint64_t ticket = implicitLaunchOrder() ? takeTicket(comm->device, "collective #" + std::to_string(seq) + " " +
                                                                         signature(call) + " at " + where(comm.get()))
                                            : NO_TICKET;
    int rc = enqueue(d.stream, name, [comm, seq, call, ticket] { return execute(comm, seq, call, ticket); });
    if (rc != OK) {
        dropTicket(comm->device, ticket);
        d.comm->pending--;
        return fail(UNHANDLED_CUDA_ERROR, name + ": the stream refused the work: " + runtime_error_name(rc));
    }
    return SUCCESS;
}

// A handle that is made (not still being made, nor failed to be).
int readyComm(const void* handle, const std::string& call, std::shared_ptr<Comm>* out) {
    std::shared_ptr<Comm> comm = live(handle);
    if (comm == nullptr) return fail(INVALID_ARGUMENT, call + ": " + hex(handle) + " is not a live communicator");
    if (!comm->ready) {
        int e = comm->asyncError.load();
        return fail(INVALID_USAGE, call + ": the communicator at " + where(comm.get()) +
                                       (e == IN_PROGRESS ? " is still being made (ncclCommGetAsyncError says ncclInProgress)"
                                                         : " was never made (ncclCommGetAsyncError says " +
                                                               std::to_string(e) + ")"));
    }
    *out = comm;
    return SUCCESS;
}

int issue(Call c, void* handle, void* stream) {
    std::string call = std::string("nccl") + kind_name(c.kind);
    std::shared_ptr<Comm> comm;
    if (int rc = readyComm(handle, call, &comm)) return rc;
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
    if (c.count > MAX_DATA / (size * n)) {
        return fail(INVALID_ARGUMENT, at + ": count " + std::to_string(c.count) + " is more than the stand-in moves");
    }
    size_t sendBytes = send_bytes(c, n);
    size_t recvBytes = recv_bytes(c, n);
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
                                              " overlap but are not the in-place layout NCCL defines for " +
                                              kind_name(c.kind));
        }
    }
    Deferred d{comm, s, 0, c};
    if (k->link != nullptr) {
        // Across processes the hub compares the calls, and a mismatch becomes every rank's async error.
        {
            std::lock_guard<std::mutex> lock(k->m);
            if (k->aborted) {
                return fail(k->remote ? REMOTE_ERROR : INVALID_USAGE,
                            at + ": the communicator was aborted (" + k->abortedBy + ")");
            }
            d.seq = comm->issued++;
        }
        k->link->send(Out(ISSUE).u64(k->id).u64(d.seq).i32(comm->rank).u8(static_cast<uint8_t>(c.kind))
                              .u64(c.count).i32(c.type).i32(c.op).i32(c.root).frame());
    } else {
        std::lock_guard<std::mutex> lock(k->m);
        if (k->aborted) return fail(INVALID_USAGE, at + ": the communicator was aborted");
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

// ------------------------------------------------------------------ the hub

struct HubPeer {
    std::shared_ptr<Link> link;
    bool greeted = false;
    int pid = 0;
    std::string host;
};

struct HubJoin {
    int nranks = 0;
    int joined = 0;
    std::vector<uint64_t> peer, token;   // peer 0: not joined yet
    std::vector<int> device;
};

struct HubSlot {
    Call call{};
    std::string signature;
    int issuedBy = -1;
    std::string mismatch;
    std::vector<bool> arrived;
    int arrivals = 0;
    std::vector<std::vector<unsigned char>> in;
};

struct HubSplit {
    int arrivals = 0;
    std::vector<bool> arrived;
    std::vector<int> color, key;
    std::vector<uint64_t> token;
    std::string failed;   // non-empty: it will never complete
};

struct HubComm {
    int nranks = 0;
    std::vector<uint64_t> peer;
    std::vector<bool> left;
    int leftCount = 0;
    bool failed = false;
    std::map<uint64_t, HubSlot> slots;
    std::map<uint64_t, HubSplit> splits;
};

// Where ranks of any process of this host meet: the unique ids this process made, and the
// communicators made from them that span processes. One mutex; it only queues messages, so a slow
// or stopped process never holds it up.
class Hub {
  public:
    uint64_t nonce = 0;
    int port = 0;

    static Hub* start(std::string* why) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            *why = "socket: " + errno_text(errno);
            return nullptr;
        }
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = 0;
        socklen_t len = sizeof a;
        if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 128) != 0 ||
            getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
            *why = "listening on 127.0.0.1: " + errno_text(errno);
            ::close(fd);
            return nullptr;
        }
        Hub* h = new Hub;   // never destroyed, as the rest of the state
        h->listenFd = fd;
        h->port = ntohs(a.sin_port);
        std::random_device rd;
        h->nonce = (static_cast<uint64_t>(rd()) << 32 ^ rd()) ^
                   static_cast<uint64_t>(Clock::now().time_since_epoch().count());
        std::thread([h] { h->acceptLoop(); }).detach();
        return h;
    }

    // Waits until what the hub queued for every process is written: the hub's process may exit
    // after its ncclCommDestroy, and the others' last results must have left by then.
    void flush(Clock::time_point until) {
        std::vector<std::shared_ptr<Link>> links;
        {
            std::lock_guard<std::mutex> lock(m);
            for (auto& [serial, p] : peers) {
                if (p.link != nullptr) links.push_back(p.link);
            }
        }
        for (auto& l : links) l->flush(until);
    }

  private:
    int listenFd = -1;
    std::mutex m;
    std::map<uint64_t, HubPeer> peers;                       // by connection
    std::map<uint64_t, HubJoin> joins;                       // by the id's number
    std::map<uint64_t, std::pair<int, std::string>> deadIds; // ids that failed: later joiners fail at once
    std::set<uint64_t> madeIds;
    std::map<uint64_t, HubComm> comms;                       // spanning processes, by number
    uint64_t nextComm = 1;

    void acceptLoop() {
        for (;;) {
            int fd = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno != EINTR && errno != ECONNABORTED) std::this_thread::sleep_for(std::chrono::milliseconds(10));
                continue;
            }
            noDelay(fd);
            auto link = std::make_shared<Link>(fd, "a process not yet introduced");
            {
                std::lock_guard<std::mutex> lock(m);
                peers[link->serial].link = link;
            }
            link->start([this](Link& l, uint8_t t, In& in) { onMessage(l, t, in); },
                        [this](Link& l, const std::string& why) { onClosed(l, why); });
        }
    }

    // m held.
    void send(uint64_t peer, std::vector<unsigned char> frame) {
        auto it = peers.find(peer);
        if (it != peers.end() && it->second.link != nullptr) it->second.link->send(std::move(frame));
    }

    std::string who(uint64_t peer) {
        auto it = peers.find(peer);
        if (it == peers.end()) return "a process that is gone";
        return "pid " + std::to_string(it->second.pid) + " on " + it->second.host;
    }

    std::string hostOf(uint64_t peer) {
        auto it = peers.find(peer);
        return it == peers.end() ? "" : it->second.host;
    }

    static void check(bool ok, const char* what) {
        if (!ok) throw std::runtime_error(what);
    }

    void onMessage(Link& from, uint8_t type, In& in) {
        std::lock_guard<std::mutex> lock(m);
        auto known = peers.find(from.serial);
        check(known != peers.end(), "a message from an unknown connection");
        HubPeer& p = known->second;
        if (type == HELLO) {
            uint64_t n = in.u64();
            p.pid = in.i32();
            p.host = in.str();
            p.greeted = n == nonce;
            from.setPeer("pid " + std::to_string(p.pid) + " on " + p.host);
            if (n != nonce) {
                from.send(Out(REFUSED).str("the unique id was made by another stand-in NCCL hub than the one at "
                                           "127.0.0.1:" + std::to_string(port) +
                                           " (the process that called ncclGetUniqueId is gone)").frame());
            }
            return;
        }
        check(p.greeted, "a message before HELLO");
        switch (type) {
            case JOIN: join(from.serial, in); break;
            case ABORT_JOIN: abortJoin(from.serial, in); break;
            case ISSUE: issued(in); break;
            case ARRIVE: arrived(in); break;
            case SPLIT: split(from.serial, in); break;
            case ABORT_SPLIT: abortSplit(from.serial, in); break;
            case ABORT: {
                uint64_t id = in.u64();
                in.i32();
                std::string why = in.str();
                failComm(id, REMOTE_ERROR, why, from.serial);
                break;
            }
            case LEAVE: {
                uint64_t id = in.u64();
                int rank = in.i32();
                auto it = comms.find(id);
                if (it == comms.end()) break;
                HubComm& c = it->second;
                check(rank >= 0 && rank < c.nranks, "LEAVE: a rank out of range");
                if (!c.left[rank]) {
                    c.left[rank] = true;
                    if (++c.leftCount == c.nranks) comms.erase(it);
                }
                break;
            }
            default: throw std::runtime_error("an unknown message " + std::to_string(type));
        }
    }

    void failJoin(uint64_t number, int code, const std::string& why) {
        auto it = joins.find(number);
        if (it == joins.end()) return;
        HubJoin& j = it->second;
        for (int r = 0; r < j.nranks; r++) {
            if (j.peer[r] != 0) send(j.peer[r], Out(MAKE_FAILED).u64(j.token[r]).i32(code).str(why).frame());
        }
        deadIds[number] = {code, why};
        joins.erase(it);
    }

    void join(uint64_t peer, In& in) {
        uint64_t number = in.u64();
        int nranks = in.i32();
        int rank = in.i32();
        int device = in.i32();
        uint64_t token = in.u64();
        check(nranks >= 1 && nranks <= (1 << 20) && rank >= 0 && rank < nranks, "JOIN: a rank out of range");
        auto refuse = [&](int code, const std::string& why) {
            send(peer, Out(MAKE_FAILED).u64(token).i32(code).str(why).frame());
        };
        auto dead = deadIds.find(number);
        if (dead != deadIds.end()) return refuse(dead->second.first, dead->second.second);
        if (madeIds.count(number) > 0) {
            return refuse(INVALID_USAGE, "ncclCommInitRank: rank " + std::to_string(rank) +
                                             " joined a unique id whose communicator was already made");
        }
        HubJoin& j = joins[number];
        if (j.nranks == 0) {
            j.nranks = nranks;
            j.peer.assign(nranks, 0);
            j.token.assign(nranks, 0);
            j.device.assign(nranks, -1);
        }
        if (j.nranks != nranks) {
            return refuse(INVALID_USAGE, "ncclCommInitRank: rank " + std::to_string(rank) + " says " +
                                             std::to_string(nranks) + " ranks, another said " + std::to_string(j.nranks));
        }
        if (j.peer[rank] != 0) {
            return refuse(INVALID_USAGE, "ncclCommInitRank: rank " + std::to_string(rank) + " joined twice");
        }
        j.peer[rank] = peer;
        j.token[rank] = token;
        j.device[rank] = device;
        j.joined++;
        for (int r = 0; r < nranks; r++) {
            if (j.peer[r] != 0) send(j.peer[r], Out(JOINING).u64(j.token[r]).i32(j.joined).frame());
        }
        if (j.joined < nranks) return;
        for (int a = 0; a < nranks; a++) {
            for (int b = a + 1; b < nranks; b++) {
                if (j.device[a] == j.device[b] && hostOf(j.peer[a]) == hostOf(j.peer[b])) {
                    std::string why = "ncclCommInitRank: Duplicate GPU detected : rank " + std::to_string(a) +
                                      " and rank " + std::to_string(b) + " both on CUDA device " +
                                      std::to_string(j.device[a]);
                    if (j.peer[a] != j.peer[b]) {
                        why += " of " + hostOf(j.peer[a]) + " (" + who(j.peer[a]) + " and " + who(j.peer[b]) + ")";
                    }
                    return failJoin(number, INVALID_USAGE, why);
                }
            }
        }
        uint64_t id = nextComm++;
        bool oneProcess = std::all_of(j.peer.begin(), j.peer.end(), [&](uint64_t q) { return q == j.peer[0]; });
        if (!oneProcess) newComm(id, j.peer);
        for (int r = 0; r < nranks; r++) {
            send(j.peer[r], Out(MADE).u64(j.token[r]).u64(id).i32(nranks).i32(r).u8(oneProcess).frame());
        }
        madeIds.insert(number);
        joins.erase(number);
    }

    void newComm(uint64_t id, const std::vector<uint64_t>& peerOf) {
        HubComm& c = comms[id];
        c.nranks = static_cast<int>(peerOf.size());
        c.peer = peerOf;
        c.left.assign(peerOf.size(), false);
    }

    void abortJoin(uint64_t peer, In& in) {
        uint64_t number = in.u64();
        int rank = in.i32();
        auto it = joins.find(number);
        if (it == joins.end()) return;   // made meanwhile: the rank aborts the communicator itself
        failJoin(number, REMOTE_ERROR, "ncclCommInitRank: rank " + std::to_string(rank) + " (" + who(peer) +
                                           ") called ncclCommAbort before every rank had joined");
    }

    HubComm* commOf(uint64_t id, int rank) {
        auto it = comms.find(id);
        if (it == comms.end() || it->second.failed) return nullptr;
        check(rank >= 0 && rank < it->second.nranks, "a rank out of range");
        return &it->second;
    }

    void issued(In& in) {
        uint64_t id = in.u64();
        uint64_t seq = in.u64();
        int rank = in.i32();
        Call call{};
        uint8_t kind = in.u8();
        call.count = in.u64();
        call.type = in.i32();
        call.op = in.i32();
        call.root = in.i32();
        HubComm* c = commOf(id, rank);
        if (c == nullptr) return;
        size_t n = static_cast<size_t>(c->nranks);
        check(kind <= static_cast<uint8_t>(Kind::BROADCAST) && type_bytes(call.type) > 0, "ISSUE: not a collective");
        check(call.count <= MAX_DATA / (type_bytes(call.type) * n), "ISSUE: a count beyond the cap");
        call.kind = static_cast<Kind>(kind);
        check(call.kind != Kind::BROADCAST || (call.root >= 0 && call.root < c->nranks), "ISSUE: a root out of range");
        HubSlot& s = c->slots[seq];
        std::string sig = signature(call);
        if (s.issuedBy < 0 && s.mismatch.empty()) {
            s.call = call;
            s.signature = sig;
            s.issuedBy = rank;
            s.arrived.assign(n, false);
            s.in.resize(n);
        } else if (s.mismatch.empty() && s.signature != sig) {
            s.mismatch = "rank " + std::to_string(rank) + " issued " + sig + " as collective #" + std::to_string(seq) +
                         ", rank " + std::to_string(s.issuedBy) + " issued " + s.signature +
                         ": every rank must issue the same collectives in the same order";
            s.in.assign(n, {});
            for (size_t r = 0; r < n; r++) {
                if (s.arrived[r]) collFailed(*c, id, seq, static_cast<int>(r), s.mismatch);
            }
        }
    }

    void collFailed(HubComm& c, uint64_t id, uint64_t seq, int rank, const std::string& why) {
        send(c.peer[rank], Out(COLL_FAILED).u64(id).u64(seq).i32(rank).i32(INVALID_USAGE).str(why).frame());
    }

    void arrived(In& in) {
        uint64_t id = in.u64();
        uint64_t seq = in.u64();
        int rank = in.i32();
        HubComm* c = commOf(id, rank);
        if (c == nullptr) return;
        auto it = c->slots.find(seq);
        check(it != c->slots.end() && !it->second.arrived.empty(), "ARRIVE before its ISSUE");
        HubSlot& s = it->second;
        check(!s.arrived[rank], "ARRIVE twice");
        s.arrived[rank] = true;
        s.arrivals++;
        if (!s.mismatch.empty()) {
            collFailed(*c, id, seq, rank, s.mismatch);
        } else {
            size_t n = static_cast<size_t>(c->nranks);
            bool sends = s.call.kind != Kind::BROADCAST || rank == s.call.root;
            s.in[rank] = in.bytes();
            check(s.in[rank].size() == (sends ? send_bytes(s.call, n) : 0), "ARRIVE with the wrong size");
        }
        if (s.arrivals < c->nranks) return;
        if (s.mismatch.empty()) {
            size_t n = static_cast<size_t>(c->nranks);
            size_t bytes = recv_bytes(s.call, n);
            std::vector<std::vector<unsigned char>> out(n, std::vector<unsigned char>(bytes));
            std::vector<const unsigned char*> inputs(n, nullptr);
            std::vector<unsigned char*> outputs(n, nullptr);
            for (size_t r = 0; r < n; r++) {
                inputs[r] = s.in[r].data();
                outputs[r] = out[r].data();
            }
            move(s.call, inputs, outputs);
            for (size_t r = 0; r < n; r++) {
                send(c->peer[r], Out(RESULT).u64(id).u64(seq).i32(static_cast<int>(r)).bytes(out[r].data(), bytes).frame());
            }
        }
        c->slots.erase(it);
    }

    void split(uint64_t peer, In& in) {
        uint64_t id = in.u64();
        uint64_t seq = in.u64();
        int rank = in.i32();
        int color = in.i32();
        int key = in.i32();
        uint64_t token = in.u64();
        auto it = comms.find(id);
        if (it == comms.end() || it->second.failed) {
            send(peer, Out(MAKE_FAILED).u64(token).i32(REMOTE_ERROR)
                               .str("ncclCommSplit: the communicator split has failed").frame());
            return;
        }
        HubComm& c = it->second;
        check(rank >= 0 && rank < c.nranks && color >= -1, "SPLIT: a rank or color out of range");
        HubSplit& s = c.splits[seq];
        if (s.arrived.empty()) {
            s.arrived.assign(c.nranks, false);
            s.color.assign(c.nranks, -1);
            s.key.assign(c.nranks, 0);
            s.token.assign(c.nranks, 0);
        }
        check(!s.arrived[rank], "SPLIT twice");
        s.arrived[rank] = true;
        s.color[rank] = color;
        s.key[rank] = key;
        s.token[rank] = token;
        s.arrivals++;
        if (!s.failed.empty()) {
            send(peer, Out(MAKE_FAILED).u64(token).i32(REMOTE_ERROR).str(s.failed).frame());
            if (s.arrivals == c.nranks) c.splits.erase(seq);
            return;
        }
        if (s.arrivals < c.nranks) return;
        std::map<int, std::vector<int>> groups;
        for (int r = 0; r < c.nranks; r++) {
            if (s.color[r] >= 0) {
                groups[s.color[r]].push_back(r);
            } else {
                send(c.peer[r], Out(MADE).u64(s.token[r]).u64(0).i32(0).i32(-1).u8(1).frame());
            }
        }
        for (auto& [col, members] : groups) {
            std::stable_sort(members.begin(), members.end(),
                             [&](int a, int b) { return s.key[a] != s.key[b] ? s.key[a] < s.key[b] : a < b; });
            std::vector<uint64_t> peerOf;
            for (int r : members) peerOf.push_back(c.peer[r]);
            bool oneProcess = std::all_of(peerOf.begin(), peerOf.end(), [&](uint64_t q) { return q == peerOf[0]; });
            uint64_t newId = nextComm++;
            if (!oneProcess) newComm(newId, peerOf);
            for (size_t i = 0; i < members.size(); i++) {
                send(peerOf[i], Out(MADE).u64(s.token[members[i]]).u64(newId).i32(static_cast<int>(members.size()))
                                        .i32(static_cast<int>(i)).u8(oneProcess).frame());
            }
        }
        c.splits.erase(seq);
    }

    void abortSplit(uint64_t peer, In& in) {
        uint64_t id = in.u64();
        uint64_t seq = in.u64();
        int rank = in.i32();
        HubComm* c = commOf(id, rank);
        if (c == nullptr) return;
        auto it = c->splits.find(seq);
        if (it == c->splits.end() || !it->second.failed.empty()) return;   // made meanwhile
        HubSplit& s = it->second;
        s.failed = "ncclCommSplit: rank " + std::to_string(rank) + " (" + who(peer) +
                   ") called ncclCommAbort on its new communicator before every rank had split";
        for (int r = 0; r < c->nranks; r++) {
            if (s.arrived[r]) send(c->peer[r], Out(MAKE_FAILED).u64(s.token[r]).i32(REMOTE_ERROR).str(s.failed).frame());
        }
    }

    // The communicator fails everywhere but at `except` (whose process knows already): its pending
    // splits, collectives, and the processes holding its ranks.
    void failComm(uint64_t id, int code, const std::string& why, uint64_t except) {
        auto it = comms.find(id);
        if (it == comms.end() || it->second.failed) return;
        HubComm& c = it->second;
        c.failed = true;
        c.slots.clear();
        for (auto& [seq, s] : c.splits) {
            if (!s.failed.empty()) continue;
            s.failed = "ncclCommSplit: " + why;
            for (int r = 0; r < c.nranks; r++) {
                if (s.arrived[r]) send(c.peer[r], Out(MAKE_FAILED).u64(s.token[r]).i32(code).str(s.failed).frame());
            }
        }
        std::set<uint64_t> told;
        for (int r = 0; r < c.nranks; r++) {
            if (!c.left[r] && c.peer[r] != except && told.insert(c.peer[r]).second) {
                send(c.peer[r], Out(COMM_FAILED).u64(id).i32(code).str(why).frame());
            }
        }
    }

    // A process is gone (or broke the protocol): what it had ranks in fails for the others.
    void onClosed(Link& from, const std::string& why) {
        std::lock_guard<std::mutex> lock(m);
        std::string w = who(from.serial);
        auto known = peers.find(from.serial);
        bool greeted = known != peers.end() && known->second.greeted;
        if (known != peers.end()) peers.erase(known);
        if (!greeted) return;
        std::vector<std::pair<uint64_t, std::string>> deadJoins;
        for (auto& [number, j] : joins) {
            std::string ranks;
            for (int r = 0; r < j.nranks; r++) {
                if (j.peer[r] == from.serial) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
            }
            if (!ranks.empty()) {
                deadJoins.push_back({number, "ncclCommInitRank: rank(s) " + ranks + " (" + w + ") are gone before every "
                                             "rank had joined: their process's connection to the stand-in NCCL hub "
                                             "ended (" + why + ")"});
            }
        }
        for (auto& [number, text] : deadJoins) failJoin(number, REMOTE_ERROR, text);
        std::vector<std::pair<uint64_t, std::string>> deadComms;
        for (auto& [id, c] : comms) {
            std::string ranks;
            for (int r = 0; r < c.nranks; r++) {
                if (c.peer[r] == from.serial && !c.left[r]) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
            }
            if (!ranks.empty() && !c.failed) {
                deadComms.push_back({id, "rank(s) " + ranks + " of " + std::to_string(c.nranks) + " (" + w +
                                         ") are gone: their process's connection to the stand-in NCCL hub ended (" +
                                         why + ")"});
            }
        }
        for (auto& [id, text] : deadComms) failComm(id, REMOTE_ERROR, text, from.serial);
    }
};

Hub* theHub(std::string* why) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.hubMutex);
    if (s.hub == nullptr && s.hubError.empty()) {
        s.hub = Hub::start(&s.hubError);
    }
    *why = s.hubError;
    return s.hub;
}

// ------------------------------------------------------------------ this process's side of a hub

std::shared_ptr<Clique> cliqueOf(const Link& link, uint64_t id) {
    std::lock_guard<std::mutex> lock(S().m);
    auto it = S().cliques.find({link.serial, id});
    return it == S().cliques.end() ? nullptr : it->second.lock();
}

void onMade(Link& link, In& in) {
    uint64_t token = in.u64();
    uint64_t id = in.u64();
    int nranks = in.i32();
    int rank = in.i32();
    bool oneProcess = in.u8() != 0;
    if (id != 0 && (nranks < 1 || nranks > (1 << 20) || rank < 0 || rank >= nranks)) {
        throw std::runtime_error("MADE: a rank out of range");
    }
    std::shared_ptr<Comm> c;
    std::shared_ptr<Clique> k;
    {
        std::lock_guard<std::mutex> lock(S().m);
        auto it = S().pendings.find(token);
        if (it == S().pendings.end()) return;
        c = it->second.comm;
        S().pendings.erase(it);
        if (id != 0) {
            std::weak_ptr<Clique>& slot = S().cliques[{link.serial, id}];
            k = slot.lock();
            if (k == nullptr) {
                for (auto e = S().cliques.begin(); e != S().cliques.end();) {   // forget the dead ones
                    e = e->second.expired() && &e->second != &slot ? S().cliques.erase(e) : std::next(e);
                }
                k = std::make_shared<Clique>();
                k->nranks = nranks;
                if (!oneProcess) {
                    k->link = link.shared_from_this();
                    k->id = id;
                }
                slot = k;
            }
        }
    }
    make(c, k, rank);
}

void onMakeFailed(In& in) {
    uint64_t token = in.u64();
    int code = in.i32();
    std::string why = in.str();
    std::shared_ptr<Comm> c;
    {
        std::lock_guard<std::mutex> lock(S().m);
        auto it = S().pendings.find(token);
        if (it == S().pendings.end()) return;
        c = it->second.comm;
        S().pendings.erase(it);
    }
    failMaking(c, code, why);
}

void onReply(Link& link, In& in, bool ok) {
    uint64_t id = in.u64();
    uint64_t seq = in.u64();
    int rank = in.i32();
    int code = SUCCESS;
    std::string why;
    std::vector<unsigned char> data;
    if (ok) {
        data = in.bytes();
    } else {
        code = in.i32();
        why = in.str();
    }
    std::shared_ptr<Clique> k = cliqueOf(link, id);
    if (k == nullptr) return;
    std::lock_guard<std::mutex> lock(k->m);
    auto it = k->waits.find({seq, rank});
    if (it == k->waits.end()) return;   // it gave up meanwhile
    it->second.done = true;
    it->second.code = code == SUCCESS && !ok ? INTERNAL_ERROR : code;
    it->second.why = why;
    it->second.data = std::move(data);
    k->cv.notify_all();
}

void onClientMessage(Link& link, uint8_t type, In& in) {
    switch (type) {
        case MADE: onMade(link, in); break;
        case MAKE_FAILED: onMakeFailed(in); break;
        case JOINING: {
            uint64_t token = in.u64();
            int joined = in.i32();
            std::lock_guard<std::mutex> lock(S().m);
            auto it = S().pendings.find(token);
            if (it != S().pendings.end()) it->second.joined = joined;
            break;
        }
        case RESULT: onReply(link, in, true); break;
        case COLL_FAILED: onReply(link, in, false); break;
        case COMM_FAILED: {
            uint64_t id = in.u64();
            int code = in.i32();
            std::string why = in.str();
            (void)code;   // always ncclRemoteError: what a waiting rank gets
            std::shared_ptr<Clique> k = cliqueOf(link, id);
            if (k != nullptr) stopClique(k, why, true);
            break;
        }
        case REFUSED: link.close(in.str()); break;
        default: throw std::runtime_error("an unknown message " + std::to_string(type));
    }
}

// The hub is gone: what this process waits for there fails.
void onClientClosed(Link& link, const std::string& why) {
    std::string what = "the stand-in NCCL hub at " + link.peer() + " (in the process that called ncclGetUniqueId) is "
                       "gone: " + why;
    std::vector<std::shared_ptr<Clique>> cliques;
    std::vector<Pending> pendings;
    {
        std::lock_guard<std::mutex> lock(S().m);
        for (auto it = S().links.begin(); it != S().links.end();) {
            it = it->second.get() == &link ? S().links.erase(it) : std::next(it);
        }
        for (auto it = S().cliques.begin(); it != S().cliques.end();) {
            if (it->first.first == link.serial) {
                if (auto k = it->second.lock()) {
                    if (k->link != nullptr) cliques.push_back(k);
                }
                it = S().cliques.erase(it);
            } else {
                ++it;
            }
        }
        for (auto it = S().pendings.begin(); it != S().pendings.end();) {
            if (it->second.link.get() == &link) {
                pendings.push_back(it->second);
                it = S().pendings.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& k : cliques) stopClique(k, what, true);
    for (auto& p : pendings) {
        failMaking(p.comm, REMOTE_ERROR, (p.what.empty() ? "ncclCommInitRank" : p.what) + ": " + what);
    }
}

// This process's connection to the hub at 127.0.0.1:port, made on first use.
std::shared_ptr<Link> hubLink(uint64_t nonce, int port, std::string* why) {
    char keyText[64];
    snprintf(keyText, sizeof keyText, "%016llx@%d", static_cast<unsigned long long>(nonce), port);
    std::string key = keyText;
    std::lock_guard<std::mutex> lock(S().m);
    auto it = S().links.find(key);
    if (it != S().links.end() && !it->second->closed()) return it->second;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        *why = "cannot reach the unique id's stand-in NCCL hub at 127.0.0.1:" + std::to_string(port) +
               " (is the process that called ncclGetUniqueId gone?): " + errno_text(errno);
        if (fd >= 0) ::close(fd);
        return nullptr;
    }
    noDelay(fd);
    auto link = std::make_shared<Link>(fd, "127.0.0.1:" + std::to_string(port));
    S().links[key] = link;
    link->start(onClientMessage, onClientClosed);
    link->send(Out(HELLO).u64(nonce).i32(getpid()).str(hostName()).frame());
    return link;
}

// NCCL's reading of a ncclConfig_t: the caller's `size` bytes over NCCL_CONFIG_INITIALIZER's values
// with the magic cleared, so that a config never initialised is refused; a version before 2.14 has
// no `blocking`; NCCL_CONFIG_UNDEF_INT there means the default, blocking. Only the header and
// `blocking` are read.
int readConfig(const void* config, bool* blocking, std::string* why) {
    struct Header {
        size_t size;
        unsigned magic;
        unsigned version;
        int blocking;
    } h{sizeof(Header), 0, 22903, INT_MIN};
    size_t size;
    memcpy(&size, config, sizeof size);
    memcpy(&h, config, std::min(size, offsetof(Header, blocking) + sizeof(int)));
    if (h.magic != 0xcafebeef) {
        char m[16];
        snprintf(m, sizeof m, "0x%x", h.magic);
        *why = std::string("ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER (size ") +
               std::to_string(size) + ", magic " + m + ")";
        return INVALID_ARGUMENT;
    }
    if (h.version < 21400) h.blocking = INT_MIN;
    if (h.blocking != INT_MIN && h.blocking != 0 && h.blocking != 1) {
        *why = "Invalid config blocking attribute value " + std::to_string(h.blocking);
        return INVALID_ARGUMENT;
    }
    *blocking = h.blocking != 0;
    return SUCCESS;
}

int initRank(void** out, int nranks, const UniqueId& id, int rank, const void* config, const std::string& call) {
    if (out == nullptr) return fail(INVALID_ARGUMENT, call + ": comm is NULL");
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        return fail(INVALID_ARGUMENT, call + ": rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " ranks");
    }
    if (groupDepth > 0) return fail(INVALID_USAGE, call + " inside a group is not modelled by the stand-in");
    if (in_host_function()) return fail(INVALID_USAGE, call + " from a CUDA host function");
    bool blocking = true;
    std::string why;
    if (config != nullptr && readConfig(config, &blocking, &why) != SUCCESS) return fail(INVALID_ARGUMENT, call + ": " + why);
    char text[sizeof id.internal + 1];
    memcpy(text, id.internal, sizeof id.internal);
    text[sizeof id.internal] = 0;
    unsigned long long nonce, number;
    int a, b, c, d, port;
    if (strncmp(text, "fsdp4j-standin-nccl ", 20) != 0 ||
        sscanf(text, "fsdp4j-standin-nccl %16llx %llu %d.%d.%d.%d:%d", &nonce, &number, &a, &b, &c, &d, &port) != 7 ||
        a != 127 || b != 0 || c != 0 || d != 1 || port <= 0 || port > 65535) {
        return fail(INVALID_ARGUMENT, call + ": the unique id was not made by ncclGetUniqueId");
    }
    int device;
    runtime_device(&device);
    std::shared_ptr<Link> link = hubLink(nonce, port, &why);
    if (link == nullptr) return fail(REMOTE_ERROR, call + ": " + why);
    auto comm = std::make_shared<Comm>();
    comm->rank = rank;
    comm->nranks = nranks;
    comm->device = device;
    comm->blocking = blocking;
    uint64_t token;
    {
        std::lock_guard<std::mutex> lock(S().m);
        token = S().nextToken++;
        S().pendings[token] = Pending{comm, link, {}, "", 0};
    }
    comm->abandon = [link, number, rank] { link->send(Out(ABORT_JOIN).u64(number).i32(rank).frame()); };
    link->send(Out(JOIN).u64(number).i32(nranks).i32(rank).i32(device).u64(token).frame());
    auto timedOut = [call, token, rank, nranks] {
        int joined = 0;
        {
            std::lock_guard<std::mutex> lock(S().m);
            auto it = S().pendings.find(token);
            if (it != S().pendings.end()) joined = it->second.joined;
        }
        return call + ": rank " + std::to_string(rank) + " waited " + std::to_string(timeoutMs() / 1000) + " s for " +
               (joined > 0 ? std::to_string(nranks - joined) : "the other") +
               " rank(s) to join (NCCL would wait forever)";
    };
    if (blocking) {
        int e = awaitMade(comm, timedOut);
        if (e != SUCCESS) return e;
        publish(comm);
        *out = comm.get();
        return SUCCESS;
    }
    publish(comm);
    *out = comm.get();
    std::thread([comm, timedOut] { awaitMade(comm, timedOut); }).detach();
    return IN_PROGRESS;
}

// ncclCommSplit of a communicator of this process: the last rank to come makes the new ones.
int splitHere(const std::shared_ptr<Comm>& comm, int color, int key, const std::shared_ptr<Comm>& child) {
    std::shared_ptr<Clique> k = comm->clique;
    std::vector<std::tuple<std::shared_ptr<Comm>, std::shared_ptr<Clique>, int>> made;
    {
        std::lock_guard<std::mutex> lock(k->m);
        if (k->aborted) return fail(INVALID_USAGE, "ncclCommSplit at " + where(comm.get()) + ": the communicator was aborted");
        uint64_t seq = comm->splitsIssued++;
        SplitSlot& s = k->splits[seq];
        if (s.color.empty()) {
            s.color.assign(k->nranks, 0);
            s.key.assign(k->nranks, 0);
            s.made.assign(k->nranks, nullptr);
        }
        s.color[comm->rank] = color;
        s.key[comm->rank] = key;
        s.made[comm->rank] = child;
        if (++s.arrived == k->nranks) {
            std::map<int, std::vector<int>> groups;
            for (int r = 0; r < k->nranks; r++) {
                if (s.color[r] >= 0) {
                    groups[s.color[r]].push_back(r);
                } else {
                    made.emplace_back(s.made[r], nullptr, -1);
                }
            }
            for (auto& [c, members] : groups) {
                std::stable_sort(members.begin(), members.end(),
                                 [&](int a, int b) { return s.key[a] != s.key[b] ? s.key[a] < s.key[b] : a < b; });
                auto clique = std::make_shared<Clique>();
                clique->nranks = static_cast<int>(members.size());
                for (size_t i = 0; i < members.size(); i++) made.emplace_back(s.made[members[i]], clique, static_cast<int>(i));
            }
            k->splits.erase(seq);
        }
    }
    for (auto& [c, q, r] : made) make(c, q, r);
    return SUCCESS;
}

// ncclCommSplit of a communicator spanning processes: the hub makes the new ones.
int splitAtHub(const std::shared_ptr<Comm>& comm, int color, int key, const std::shared_ptr<Comm>& child,
               const std::string& what) {
    std::shared_ptr<Clique> k = comm->clique;
    uint64_t seq;
    {
        std::lock_guard<std::mutex> lock(k->m);
        if (k->aborted) {
            return fail(k->remote ? REMOTE_ERROR : INVALID_USAGE, what + ": the communicator was aborted (" + k->abortedBy + ")");
        }
        seq = comm->splitsIssued++;
    }
    uint64_t token;
    {
        std::lock_guard<std::mutex> lock(S().m);
        token = S().nextToken++;
        S().pendings[token] = Pending{child, k->link, k, what, 0};
    }
    std::shared_ptr<Link> link = k->link;
    uint64_t id = k->id;
    int rank = comm->rank;
    {
        std::lock_guard<std::mutex> lock(child->m);
        child->abandon = [link, id, seq, rank] { link->send(Out(ABORT_SPLIT).u64(id).u64(seq).i32(rank).frame()); };
    }
    link->send(Out(SPLIT).u64(id).u64(seq).i32(rank).i32(color).i32(key).u64(token).frame());
    return SUCCESS;
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
    std::string why;
    Hub* hub = theHub(&why);
    if (hub == nullptr) return fail(SYSTEM_ERROR, "ncclGetUniqueId: the stand-in NCCL hub cannot start: " + why);
    static std::atomic<uint64_t> counter{0};
    memset(id->internal, 0, sizeof id->internal);
    snprintf(id->internal, sizeof id->internal, "fsdp4j-standin-nccl %016llx %llu 127.0.0.1:%d",
             static_cast<unsigned long long>(hub->nonce), static_cast<unsigned long long>(counter++), hub->port);
    return SUCCESS;
}

int ncclCommInitRank(void** comm, int nranks, UniqueId id, int rank) {
    return initRank(comm, nranks, id, rank, nullptr, "ncclCommInitRank");
}

int ncclCommInitRankConfig(void** comm, int nranks, UniqueId id, int rank, const void* config) {
    return initRank(comm, nranks, id, rank, config, "ncclCommInitRankConfig");
}

int ncclCommSplit(void* handle, int color, int key, void** newcomm, const void* config) {
    if (newcomm == nullptr) return fail(INVALID_ARGUMENT, "ncclCommSplit: newcomm is NULL");
    std::shared_ptr<Comm> comm;
    if (int rc = readyComm(handle, "ncclCommSplit", &comm)) return rc;
    if (color < -1) return fail(INVALID_ARGUMENT, "ncclCommSplit: color " + std::to_string(color));
    if (in_host_function()) return fail(INVALID_USAGE, "ncclCommSplit from a CUDA host function");
    bool blocking = comm->blocking;   // NCCL: no config, the parent's
    std::string why;
    if (config != nullptr && readConfig(config, &blocking, &why) != SUCCESS) {
        return fail(INVALID_ARGUMENT, "ncclCommSplit: " + why);
    }
    std::string what = "ncclCommSplit at " + where(comm.get());
    auto child = std::make_shared<Comm>();   // with NCCL_SPLIT_NOCOLOR, only this rank's part in the split
    child->device = comm->device;
    child->blocking = blocking;
    int rc = comm->clique->link != nullptr ? splitAtHub(comm, color, key, child, what) : splitHere(comm, color, key, child);
    if (rc != SUCCESS) return rc;
    auto timedOut = [what] { return what + ": the other ranks never split (NCCL would wait forever)"; };
    if (blocking) {
        int e = awaitMade(child, timedOut);
        if (e != SUCCESS) return e;
        if (color < 0) {
            *newcomm = nullptr;
            return SUCCESS;
        }
        publish(child);
        *newcomm = child.get();
        return SUCCESS;
    }
    if (color < 0) {   // nothing to poll: the split goes on without this rank's handle
        *newcomm = nullptr;
        return SUCCESS;
    }
    publish(child);
    *newcomm = child.get();
    std::thread([child, timedOut] { awaitMade(child, timedOut); }).detach();
    return IN_PROGRESS;
}

int ncclCommCount(const void* handle, int* count) {
    if (count == nullptr) return fail(INVALID_ARGUMENT, "ncclCommCount: count is NULL");
    std::shared_ptr<Comm> comm;
    if (int rc = readyComm(handle, "ncclCommCount", &comm)) return rc;
    *count = comm->clique->nranks;
    return SUCCESS;
}

int ncclCommUserRank(const void* handle, int* rank) {
    if (rank == nullptr) return fail(INVALID_ARGUMENT, "ncclCommUserRank: rank is NULL");
    std::shared_ptr<Comm> comm;
    if (int rc = readyComm(handle, "ncclCommUserRank", &comm)) return rc;
    *rank = comm->rank;
    return SUCCESS;
}

int ncclCommCuDevice(const void* handle, int* device) {
    if (device == nullptr) return fail(INVALID_ARGUMENT, "ncclCommCuDevice: device is NULL");
    std::shared_ptr<Comm> comm;
    if (int rc = readyComm(handle, "ncclCommCuDevice", &comm)) return rc;
    *device = comm->device;
    return SUCCESS;
}

int ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, void* comm, void* stream) {
    return issue({Kind::ALL_REDUCE, send, recv, count, type, op, 0}, comm, stream);
}

int ncclAllGather(const void* send, void* recv, size_t sendCount, int type, void* comm, void* stream) {
    return issue({Kind::ALL_GATHER, send, recv, sendCount, type, 0, 0}, comm, stream);
}

int ncclReduceScatter(const void* send, void* recv, size_t recvCount, int type, int op, void* comm, void* stream) {
    return issue({Kind::REDUCE_SCATTER, send, recv, recvCount, type, op, 0}, comm, stream);
}

int ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, void* comm, void* stream) {
    return issue({Kind::BROADCAST, send, recv, count, type, 0, root}, comm, stream);
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
    std::function<void()> abandon;
    bool made;
    {
        std::lock_guard<std::mutex> lock(comm->m);
        comm->aborted = true;
        abandon.swap(comm->abandon);
        made = comm->ready;
    }
    if (abandon) abandon();   // still being made: the hub tells the others
    notifyMade();
    if (made) abortHere(comm, "ncclCommAbort at " + where(comm.get()));
    forget(handle);
    return SUCCESS;
}

int ncclCommDestroy(void* handle) {
    std::shared_ptr<Comm> comm = live(handle);
    if (comm == nullptr) return fail(INVALID_ARGUMENT, "ncclCommDestroy: " + hex(handle) + " is not a live communicator");
    if (in_host_function()) return fail(INVALID_USAGE, "ncclCommDestroy from a CUDA host function");
    if (!comm->ready) return ncclCommAbort(handle);   // never made: nothing to finish
    // NCCL finishes the communicator's queued collectives first.
    auto until = deadline();
    while (comm->pending.load() > 0) {
        if (Clock::now() > until) {
            return fail(SYSTEM_ERROR, "ncclCommDestroy at " + where(comm.get()) + ": collectives still pending");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::shared_ptr<Clique> k = comm->clique;
    if (k->link != nullptr) {
        // This process may exit next: its leaving, and the results its hub owes the others, go first.
        k->link->send(Out(LEAVE).u64(k->id).i32(comm->rank).frame());
        k->link->flush(Clock::now() + FLUSH);
        Hub* hub;
        {
            std::lock_guard<std::mutex> lock(S().hubMutex);
            hub = S().hub;
        }
        if (hub != nullptr) hub->flush(Clock::now() + FLUSH);
    }
    forget(handle);
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
    std::lock_guard<std::mutex> lock(S().lastErrorMutex);
    copy = S().lastError;
    return copy.c_str();
}

}  // extern "C"
