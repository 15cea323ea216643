// Streams and events: asynchronous device work with a seeded scheduler.
//
// Every kernel launch, asynchronous copy, memset, event record, stream wait, cuBLASLt matmul and NCCL collective
// becomes an operation queued on its stream. Nothing runs when it is enqueued: operations run when the host must
// observe them (cudaStreamSynchronize, cudaEventSynchronize/Query, cudaDeviceSynchronize, a synchronous copy,
// cudaFree, ...), and then in an order the scheduler picks at random (seeded by CUDASIM_STREAM_SEED) among the
// operations CUDA allows to run next:
//   - the head of each stream's queue (stream order);
//   - whose event waits are satisfied (cudaStreamWaitEvent waits for the event's latest record at the time of the
//     wait; an event never recorded is no wait at all);
//   - the legacy default stream's rules: an operation on it waits for everything enqueued before on every blocking
//     stream (created without cudaStreamNonBlocking, and the per-thread default stream), and later operations on
//     those streams wait for it; non-blocking streams are not ordered with it;
//   - NCCL collectives in this rank's issue order (all communicators): every rank issues the same collectives in
//     the same order, so the ranks' MPI calls match and cannot deadlock.
// A missing or misplaced wait therefore runs the consumer before the producer in some seeds (a wrong result), and
// an asynchronous copy reads or writes host memory when it runs, not when it is enqueued.
//
// Two collectives of one communicator must be ordered by stream order or events: NCCL gives no order between
// streams, so each rank could run them in a different order, or one could block the other (NVIDIA/nccl#217). A
// collective that is not ordered after the previous collective of its communicator is reported (the simulator
// itself runs them in issue order, so it never deadlocks on it).
//
// Hazard detector: copies, memsets and collectives touch exactly known byte ranges. Each operation carries a vector
// clock (one entry per stream) built from stream order, event waits, the legacy stream rules and what the host has
// observed; two such operations on overlapping bytes, one of them writing, with neither ordered before the other, are
// reported with both names. Kernels and matmuls touch unknown parts of their buffers and are not checked (a
// whole-buffer check would flag the legal overlap of the comm stream reducing one gradient bucket while the main
// stream computes another in the same allocation); their races show up as wrong results instead.
#include <cuda_runtime.h>

#include "dev/cudasim/state.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace cudasim::detail {
namespace {

using Clock = std::vector<uint64_t>;  // per stream slot: the number of that stream's operations ordered before

void join(Clock& a, const Clock& b) {
    if (a.size() < b.size()) a.resize(b.size(), 0);
    for (size_t i = 0; i < b.size(); i++) a[i] = std::max(a[i], b[i]);
}
uint64_t at(const Clock& c, int slot) { return (size_t)slot < c.size() ? c[slot] : 0; }

struct Op;

}  // namespace
}  // namespace cudasim::detail

struct CUstream_st {
    int slot = 0;                 // index in the vector clocks
    int number = 0;               // for messages
    bool blocking = true;         // ordered with the legacy default stream
    const char* kind = "stream";
    bool destroyed = false;       // cudaStreamDestroy'ed: its queued work still runs
    std::deque<cudasim::detail::Op*> queue;
    uint64_t last_op = 0;         // the last operation enqueued here (0: none)
    cudasim::detail::Clock clock; // the clock of that operation
};

struct CUevent_st {
    unsigned flags = 0;
    bool recorded = false;
    uint64_t record_op = 0;         // the latest cudaEventRecord's operation
    cudasim::detail::Clock clock;   // its clock
    std::shared_ptr<std::chrono::steady_clock::time_point> time;  // set when that record runs
};

namespace cudasim::detail {
namespace {

struct Op {
    uint64_t id = 0;
    CUstream_st* stream = nullptr;
    Work work;
    std::vector<uint64_t> deps;  // operations that must have run (event waits, legacy stream rules)
    Clock clock;
};

// An operation with exact ranges, kept until the host has observed it (every later operation is then ordered after).
struct Recent {
    int slot;
    uint64_t tick;  // its own entry of its clock
    std::string what, stream;
    std::vector<Range> reads, writes;
};

std::string stream_name(const CUstream_st* s) {
    if (s->slot == 0) return "the legacy default stream";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s %d (%s)", s->kind, s->number, s->blocking ? "blocking" : "non-blocking");
    return buf;
}

uint64_t parse_seed() {
    const char* e = std::getenv("CUDASIM_STREAM_SEED");
    if (!e || !*e) return 1;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(e, &end, 10);
    if (*end) {
        std::fprintf(stderr, "cudasim: CUDASIM_STREAM_SEED=%s: expected a non-negative integer (0 = issue order)\n", e);
        std::exit(1);
    }
    return v;
}

// The last collective enqueued on a communicator.
struct LastCollective {
    int slot;
    uint64_t tick;
    std::string what, stream;
};

struct Scheduler {
    std::recursive_mutex mu;
    std::unordered_map<const void*, LastCollective> last_collective;  // per communicator
    std::vector<CUstream_st*> slots;              // every stream ever created, by slot (never freed)
    std::unordered_set<CUstream_st*> handles;     // user streams that are not destroyed
    std::unordered_set<CUevent_st*> events;
    CUstream_st* per_thread = nullptr;            // cudaStreamPerThread, created on first use
    std::unordered_map<uint64_t, Op*> pending;
    std::deque<uint64_t> collectives;             // pending collectives in issue order
    std::vector<Recent> recent;
    Clock host;                                   // what the host has observed
    uint64_t next_id = 1;
    int next_number = 1;
    bool running = false;                         // an operation is being executed
    const std::thread::id owner = std::this_thread::get_id();  // the thread that runs device work in queries
    uint64_t seed = parse_seed();
    std::mt19937_64 rng{seed * 0x9E3779B97F4A7C15ull + 12345};

    Scheduler() {
        auto* legacy = new CUstream_st;
        legacy->kind = "legacy default stream";
        slots.push_back(legacy);
    }
    CUstream_st* legacy() { return slots[0]; }

    CUstream_st* new_stream(bool blocking, const char* kind) {
        auto* s = new CUstream_st;
        s->slot = (int)slots.size();
        s->number = next_number++;
        s->blocking = blocking;
        s->kind = kind;
        slots.push_back(s);
        return s;
    }
    CUstream_st* resolve(cudaStream_t h) {
        if (h == nullptr || h == cudaStreamLegacy) return legacy();
        if (h == cudaStreamPerThread) {
            if (!per_thread) per_thread = new_stream(true, "per-thread default stream");
            return per_thread;
        }
        return handles.count(h) ? h : nullptr;
    }
    bool done(uint64_t id) const { return id == 0 || !pending.count(id); }

    void check_hazards(const Op& op) {
        const Work& w = op.work;
        if (w.reads.empty() && w.writes.empty()) return;
        auto overlap = [](const Range& a, const Range& b) {
            return a.bytes && b.bytes && a.begin < b.begin + b.bytes && b.begin < a.begin + a.bytes;
        };
        for (const Recent& r : recent) {
            if (r.tick <= at(op.clock, r.slot)) continue;  // r happens before op
            const Range* hit = nullptr;
            for (const Range& a : w.writes) {
                for (const Range& b : r.writes) if (!hit && overlap(a, b)) hit = &a;
                for (const Range& b : r.reads) if (!hit && overlap(a, b)) hit = &a;
            }
            for (const Range& a : w.reads)
                for (const Range& b : r.writes) if (!hit && overlap(a, b)) hit = &a;
            if (hit)
                fatal("stream hazard: `%s` on %s and `%s` on %s access overlapping memory (around %p, one of them "
                      "writes), and nothing orders them: no stream order, event wait (cudaStreamWaitEvent after the "
                      "cudaEventRecord it needs) or host synchronisation lies between them",
                      w.what.c_str(), stream_name(op.stream).c_str(), r.what.c_str(), r.stream.c_str(),
                      (const void*)hit->begin);
        }
    }

    void check_collective_order(const Op& op) {
        const Work& w = op.work;
        if (!w.collective) return;
        auto it = last_collective.find(w.comm);
        if (it != last_collective.end() && it->second.tick > at(op.clock, it->second.slot))
            fatal("NCCL hazard: `%s` on %s is not ordered after `%s` on %s, the previous collective of the same "
                  "communicator (no stream order, event wait or host synchronisation between them): NCCL does not "
                  "order collectives of different streams, so ranks may run them in different orders and deadlock",
                  w.what.c_str(), stream_name(op.stream).c_str(), it->second.what.c_str(),
                  it->second.stream.c_str());
        last_collective[w.comm] = {op.stream->slot, op.clock[op.stream->slot], w.what, stream_name(op.stream)};
    }

    // The host has observed everything `c` covers: operations it covers no longer race with later work.
    void observe(const Clock& c) {
        join(host, c);
        recent.erase(std::remove_if(recent.begin(), recent.end(),
                                    [&](const Recent& r) { return r.tick <= at(host, r.slot); }),
                     recent.end());
    }

    Op* enqueue(CUstream_st* s, Work work, std::vector<uint64_t> deps = {}, const Clock* extra = nullptr) {
        if (running) fatal("a CUDA API call from inside device work (%s)", work.what.c_str());
        auto* op = new Op;
        op->id = next_id++;
        op->stream = s;
        op->work = std::move(work);
        op->deps = std::move(deps);
        op->clock = s->clock;
        join(op->clock, host);
        if (extra) join(op->clock, *extra);
        if (s == legacy()) {  // waits for all earlier work of the blocking streams
            for (CUstream_st* b : slots)
                if (b != s && b->blocking && b->last_op) {
                    op->deps.push_back(b->last_op);
                    join(op->clock, b->clock);
                }
        } else if (s->blocking && legacy()->last_op) {  // waits for the legacy stream's earlier work
            op->deps.push_back(legacy()->last_op);
            join(op->clock, legacy()->clock);
        }
        if (op->clock.size() <= (size_t)s->slot) op->clock.resize(s->slot + 1, 0);
        op->clock[s->slot] = at(s->clock, s->slot) + 1;
        check_hazards(*op);
        check_collective_order(*op);
        const Work& w = op->work;
        if (!w.reads.empty() || !w.writes.empty())
            recent.push_back({s->slot, op->clock[s->slot], w.what, stream_name(s), w.reads, w.writes});
        for (const Work::Pinned& p : w.pinned) protect_pinned(p.p, p.n, p.device_writes, op->id, w.what);
        s->queue.push_back(op);
        s->last_op = op->id;
        s->clock = op->clock;
        pending[op->id] = op;
        if (w.collective) collectives.push_back(op->id);
        return op;
    }

    bool runnable(const Op* op) const {
        for (uint64_t d : op->deps)
            if (!done(d)) return false;
        return !op->work.collective || collectives.front() == op->id;
    }

    // One operation CUDA allows to run next: the earliest enqueued with seed 0, a random one otherwise.
    Op* pick() {
        std::vector<Op*> ready;
        for (CUstream_st* s : slots)
            if (!s->queue.empty() && runnable(s->queue.front())) ready.push_back(s->queue.front());
        if (ready.empty()) return nullptr;
        if (seed == 0)
            return *std::min_element(ready.begin(), ready.end(), [](Op* a, Op* b) { return a->id < b->id; });
        return ready[rng() % ready.size()];
    }

    void execute(Op* op) {
        op->stream->queue.pop_front();
        running = true;
        open_pinned_for(op->id);
        if (op->work.run) op->work.run();
        unprotect_pinned(op->id);
        running = false;
        pending.erase(op->id);
        if (op->work.collective) collectives.pop_front();
        delete op;
    }

    bool step() {
        Op* op = pick();
        if (!op) {
            if (pending.empty()) return false;
            fatal("internal error: %zu operations pending and none can run", pending.size());
        }
        execute(op);
        return true;
    }

    template <class Pred>
    void run_until(Pred done_pred) {
        if (running) fatal("a synchronising CUDA call from inside device work");
        while (!done_pred()) step();
    }

    void drain_stream(CUstream_st* s) {
        const uint64_t target = s->last_op;
        const Clock c = s->clock;
        run_until([&] { return done(target); });
        observe(c);
    }
    void drain_all() {
        run_until([&] { return pending.empty(); });
        for (CUstream_st* s : slots) observe(s->clock);
    }
};

Scheduler& sched() {
    static Scheduler* s = new Scheduler;  // never destroyed: work may be enqueued by static destructors
    return *s;
}

cudaError_t invalid_handle(const char* fn, const void* h) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: unknown or destroyed handle %p", fn, h);
    std::fflush(stdout);
    std::fprintf(stderr, "cudasim: %s\n", buf);
    return set_last_error(cudaErrorInvalidResourceHandle);
}

// A query: an unfinished target gets one scheduling step (so a polling loop makes progress), then is looked at.
// Only the program's main thread (the first to use the scheduler) runs device work; another thread (a watchdog)
// only looks.
template <class Done>
cudaError_t query(Done target_done) {
    Scheduler& s = sched();
    if (target_done()) return cudaSuccess;
    if (!s.running && std::this_thread::get_id() == s.owner) s.step();
    return target_done() ? cudaSuccess : cudaErrorNotReady;
}

}  // namespace

cudaError_t enqueue(cudaStream_t stream, Work work) {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    CUstream_st* st = s.resolve(stream);
    if (!st) return set_last_error(cudaErrorInvalidResourceHandle);
    s.enqueue(st, std::move(work));
    return cudaSuccess;
}

cudaError_t synchronize_stream(cudaStream_t stream) {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    CUstream_st* st = s.resolve(stream);
    if (!st) return invalid_handle("cudaStreamSynchronize", stream);
    s.drain_stream(st);
    return cudaSuccess;
}

void synchronize_device() {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    s.drain_all();
}

void drain_communicator(const void* comm) {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    s.run_until([&] {
        for (const auto& kv : s.pending)
            if (kv.second->work.comm == comm) return false;
        return true;
    });
}

uint64_t stream_seed() { return sched().seed; }

}  // namespace cudasim::detail

namespace cudasim {
void set_stream_seed(uint64_t seed) {
    detail::Scheduler& s = detail::sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    s.seed = seed;
    s.rng.seed(seed * 0x9E3779B97F4A7C15ull + 12345);
}
uint64_t stream_seed() { return detail::stream_seed(); }
}  // namespace cudasim

using namespace cudasim::detail;

// ---- streams --------------------------------------------------------------------------------------------------
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* out, unsigned int flags) {
    if (!out) return set_last_error(cudaErrorInvalidValue);
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    CUstream_st* st = s.new_stream(!(flags & cudaStreamNonBlocking), "stream");
    s.handles.insert(st);
    *out = st;
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* out, unsigned int flags, int) {
    return cudaStreamCreateWithFlags(out, flags);
}
cudaError_t cudaStreamGetFlags(cudaStream_t h, unsigned int* flags) {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    CUstream_st* st = s.resolve(h);
    if (!st || !flags) return invalid_handle("cudaStreamGetFlags", h);
    *flags = st->blocking ? cudaStreamDefault : cudaStreamNonBlocking;
    return cudaSuccess;
}
// Work already queued on a destroyed stream still runs (as on a GPU); the handle is invalid from now on.
cudaError_t cudaStreamDestroy(cudaStream_t h) {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    if (!s.handles.erase(h)) return invalid_handle("cudaStreamDestroy", h);
    h->destroyed = true;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t h) { return synchronize_stream(h); }
cudaError_t cudaStreamQuery(cudaStream_t h) {
    Scheduler& s = sched();
    std::unique_lock<std::recursive_mutex> lock(s.mu, std::try_to_lock);
    if (!lock.owns_lock()) return cudaErrorNotReady;  // another thread is running device work right now
    CUstream_st* st = s.resolve(h);
    if (!st) return invalid_handle("cudaStreamQuery", h);
    const uint64_t target = st->last_op;
    const Clock c = st->clock;
    const cudaError_t e = query([&] { return s.done(target); });
    if (e == cudaSuccess) s.observe(c);
    return e;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned int) {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    CUstream_st* st = s.resolve(h);
    if (!st) return invalid_handle("cudaStreamWaitEvent (stream)", h);
    if (!s.events.count(e)) return invalid_handle("cudaStreamWaitEvent (event)", e);
    if (!e->recorded) return cudaSuccess;  // CUDA: waiting for an event that was never recorded does not wait
    Work w;
    char buf[96];
    std::snprintf(buf, sizeof buf, "cudaStreamWaitEvent (for operation #%" PRIu64 ")", e->record_op);
    w.what = buf;
    s.enqueue(st, std::move(w), {e->record_op}, &e->clock);
    return cudaSuccess;
}

// ---- events ---------------------------------------------------------------------------------------------------
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
    if (!e) return set_last_error(cudaErrorInvalidValue);
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    *e = new CUevent_st;
    (*e)->flags = flags;
    s.events.insert(*e);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    if (!s.events.erase(e)) return invalid_handle("cudaEventDestroy", e);
    delete e;  // a pending record keeps its own time slot alive
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h) {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    if (!s.events.count(e)) return invalid_handle("cudaEventRecord (event)", e);
    CUstream_st* st = s.resolve(h);
    if (!st) return invalid_handle("cudaEventRecord (stream)", h);
    auto time = std::make_shared<std::chrono::steady_clock::time_point>();
    Work w;
    w.what = "cudaEventRecord";
    w.run = [time] { *time = std::chrono::steady_clock::now(); };
    Op* op = s.enqueue(st, std::move(w));
    e->recorded = true;
    e->record_op = op->id;
    e->clock = op->clock;
    e->time = time;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    if (!s.events.count(e)) return invalid_handle("cudaEventSynchronize", e);
    if (!e->recorded) return cudaSuccess;
    const uint64_t target = e->record_op;
    s.run_until([&] { return s.done(target); });
    s.observe(e->clock);
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    Scheduler& s = sched();
    std::unique_lock<std::recursive_mutex> lock(s.mu, std::try_to_lock);
    if (!lock.owns_lock()) return cudaErrorNotReady;
    if (!s.events.count(e)) return invalid_handle("cudaEventQuery", e);
    if (!e->recorded) return cudaSuccess;
    const uint64_t target = e->record_op;
    const cudaError_t r = query([&] { return s.done(target); });
    if (r == cudaSuccess) s.observe(e->clock);
    return r;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    Scheduler& s = sched();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    if (!ms || !s.events.count(start) || !s.events.count(end)) return invalid_handle("cudaEventElapsedTime", ms);
    if ((start->flags | end->flags) & cudaEventDisableTiming) {
        std::fprintf(stderr, "cudasim: cudaEventElapsedTime: event created with cudaEventDisableTiming\n");
        return set_last_error(cudaErrorInvalidResourceHandle);
    }
    if (!start->recorded || !end->recorded) {
        std::fprintf(stderr, "cudasim: cudaEventElapsedTime: event not recorded\n");
        return set_last_error(cudaErrorInvalidResourceHandle);
    }
    if (!s.done(start->record_op) || !s.done(end->record_op)) return cudaErrorNotReady;
    *ms = std::chrono::duration<float, std::milli>(*end->time - *start->time).count();
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    synchronize_device();
    return cudaSuccess;
}
