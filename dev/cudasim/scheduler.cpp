// The launcher: checks a launch when it is enqueued, and when the stream scheduler runs it, runs the grid block by
// block, each block's threads as fibers scheduled in the thread order that was current at the launch.
#include <cuda_runtime.h>

#include "dev/cudasim/fiber.h"
#include "dev/cudasim/state.h"
#include "dev/cudasim/include/cudasim.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace cudasim {
namespace detail {

uint3 g_threadIdx;
uint3 g_blockIdx;
dim3 g_blockDim;
dim3 g_gridDim;

namespace {

enum class State { Ready, Barrier, Warp, Done };

struct Fiber {
    Context ctx;
    uint3 tid;
    int linear = 0;
    State state = State::Ready;
    unsigned warp_mask = 0;   // the mask of the warp collective this fiber waits in
    uint64_t warp_value = 0;  // its contribution
    int barrier_pred = 0;     // __syncthreads_count predicate
    WarpView view;            // what the collective returned to this fiber
};

struct Sim {
    Order order = Order::Forward;
    uint64_t seed = 1;
    uint64_t launches = 0, switches = 0;
    size_t stack_bytes = 64 * 1024;

    std::vector<std::unique_ptr<Stack>> stacks;  // pooled, one per thread slot, reused by every block
    std::vector<Fiber> fibers;
    Context scheduler;
    Fiber* current = nullptr;  // null outside a kernel
    int nthreads = 0;
    int barrier_arrived = 0, barrier_count = 0;
    uint64_t barriers_released = 0;  // lets the warp-serial orders restart from their first warp after a barrier
    std::vector<unsigned> warp_waiting, warp_exited;  // per warp: lanes waiting in a collective / lanes exited

    void (*body)(void*) = nullptr;
    void* body_ctx = nullptr;
    std::string kernel_name;  // of the grid being run
    const void* kernel = nullptr;
};

Sim& sim() {
    static Sim s = [] {
        Sim s;
        if (const char* e = std::getenv("CUDASIM_ORDER")) {
            std::string v = e;
            if (v == "forward") s.order = Order::Forward;
            else if (v == "reverse") s.order = Order::Reverse;
            else if (v == "warp-serial") s.order = Order::WarpSerial;
            else if (v == "warp-serial-reverse") s.order = Order::WarpSerialReverse;
            else if (v.rfind("shuffled", 0) == 0) {
                s.order = Order::Shuffled;
                if (v.size() > 9 && v[8] == ':') s.seed = std::strtoull(v.c_str() + 9, nullptr, 10);
            } else {
                std::fprintf(stderr, "cudasim: CUDASIM_ORDER=%s: expected forward, reverse, shuffled, shuffled:SEED, "
                                     "warp-serial or warp-serial-reverse\n", e);
                std::exit(1);
            }
        }
        if (const char* e = std::getenv("CUDASIM_STACK_KB")) s.stack_bytes = std::strtoull(e, nullptr, 10) * 1024;
        return s;
    }();
    return s;
}

std::string where() {
    Sim& s = sim();
    char buf[512];
    if (!s.current) return "host code";
    std::snprintf(buf, sizeof buf, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u)", s.kernel_name.c_str(),
                  g_blockIdx.x, g_blockIdx.y, g_blockIdx.z, s.current->tid.x, s.current->tid.y, s.current->tid.z);
    return buf;
}

[[noreturn]] void die(const std::string& msg) { fatal("%s", msg.c_str()); }

// Back to the scheduler; returns when the scheduler resumes this fiber.
void yield() {
    Sim& s = sim();
    Fiber* f = s.current;
    s.switches++;
    switch_context(f->ctx, s.scheduler);
}

void fiber_entry() {
    Sim& s = sim();
    try {
        s.body(s.body_ctx);
    } catch (const std::exception& e) {
        die(where() + ": exception in kernel: " + e.what());
    } catch (...) {
        die(where() + ": exception in kernel");
    }
    Fiber* f = s.current;
    f->state = State::Done;
    s.warp_exited[f->linear / 32] |= 1u << (f->linear & 31);
    // A lane that exits while its warp mates wait for it in a collective would hang them: report it now.
    int warp0 = f->linear & ~31;
    for (int l = warp0; l < std::min(warp0 + 32, s.nthreads); l++) {
        Fiber& o = s.fibers[l];
        if (o.state == State::Warp && (o.warp_mask >> (f->linear & 31) & 1u))
            die(where() + ": thread exited while lane " + std::to_string(l & 31) +
                " of its warp waits for it in a warp collective (__shfl_*_sync/__syncwarp/vote with a mask naming it)");
    }
    switch_context(f->ctx, s.scheduler);
    die("finished fiber resumed");
}

std::vector<int> make_order(Order order, int n, std::mt19937_64& rng) {
    std::vector<int> v(n);
    for (int i = 0; i < n; i++) v[i] = i;
    if (order == Order::Reverse) std::reverse(v.begin(), v.end());
    if (order == Order::Shuffled) std::shuffle(v.begin(), v.end(), rng);
    return v;
}

// Resumes fiber f once (it runs to its next yield point); returns true if it finished.
bool resume(Fiber& f) {
    Sim& s = sim();
    s.current = &f;
    g_threadIdx = f.tid;
    s.switches++;
    switch_context(s.scheduler, f.ctx);
    return f.state == State::Done;
}

// Nothing is runnable but the block has not finished: explain why and abort.
[[noreturn]] void report_stuck() {
    Sim& s = sim();
    int done = 0, barrier = 0, warp = 0;
    int first_barrier = -1, first_warp = -1;
    for (int i = 0; i < s.nthreads; i++) {
        switch (s.fibers[i].state) {
            case State::Done: done++; break;
            case State::Barrier: barrier++; if (first_barrier < 0) first_barrier = i; break;
            case State::Warp: warp++; if (first_warp < 0) first_warp = i; break;
            default: break;
        }
    }
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "kernel %s, block (%u,%u,%u) of %d threads is stuck: %d exited, %d wait at __syncthreads "
                  "(first: linear thread %d), %d wait in a warp collective (first: linear thread %d).%s",
                  s.kernel_name.c_str(), g_blockIdx.x, g_blockIdx.y, g_blockIdx.z, s.nthreads,
                  done, barrier, first_barrier, warp, first_warp,
                  (barrier && done) ? " Divergent __syncthreads: some threads returned before a barrier the others wait at."
                  : (barrier && warp) ? " Divergent barrier/warp collective: threads wait at different sync points."
                  : " Warp collective masks do not match or name lanes that never arrive.");
    die(buf);
}

// Round by round (Forward, Reverse, Shuffled): each round resumes every runnable fiber once, in the order.
void schedule_rounds(std::mt19937_64& rng) {
    Sim& s = sim();
    int done = 0;
    while (done < s.nthreads) {
        bool ran = false;
        for (int i : make_order(s.order, s.nthreads, rng)) {
            Fiber& f = s.fibers[i];
            if (f.state != State::Ready) continue;
            ran = true;
            done += resume(f);
        }
        s.current = nullptr;
        if (!ran && done < s.nthreads) report_stuck();
    }
}

// One warp at a time (WarpSerial: first warp first; WarpSerialReverse: last warp first, and last lane first inside
// a warp): the warp's lanes take rounds among themselves, so its shuffles and __syncwarp complete, until every lane
// waits at __syncthreads or has exited; then the next warp. When a barrier releases, the pass starts again from the
// first warp (otherwise the warp that released it would always run ahead). A warp thus gets as far ahead of the
// others as the block barriers allow: a missing write-after-read barrier between two uses of one shared array lets
// it overwrite values a later warp has not read yet, which the round-by-round orders never show.
void schedule_warp_serial() {
    Sim& s = sim();
    const bool rev = s.order == Order::WarpSerialReverse;
    const int nwarps = (s.nthreads + 31) / 32;
    int done = 0;
    while (done < s.nthreads) {
        bool ran = false;
        const uint64_t phase = s.barriers_released;
        for (int wi = 0; wi < nwarps && s.barriers_released == phase; wi++) {
            const int w0 = 32 * (rev ? nwarps - 1 - wi : wi), nlanes = std::min(32, s.nthreads - w0);
            for (bool warp_ran = true; warp_ran && s.barriers_released == phase;) {
                warp_ran = false;
                for (int li = 0; li < nlanes && s.barriers_released == phase; li++) {
                    Fiber& f = s.fibers[w0 + (rev ? nlanes - 1 - li : li)];
                    if (f.state != State::Ready) continue;
                    warp_ran = ran = true;
                    done += resume(f);
                }
            }
        }
        s.current = nullptr;
        if (!ran && done < s.nthreads) report_stuck();
    }
}

void run_block(std::mt19937_64& rng) {
    Sim& s = sim();
    poison_static_shared();  // shared memory starts with garbage on a GPU, in every block
    for (int i = 0; i < s.nthreads; i++) {
        Fiber& f = s.fibers[i];
        f.state = State::Ready;
        f.warp_mask = 0;
        make_context(f.ctx, *s.stacks[i], fiber_entry);
    }
    s.barrier_arrived = 0;
    s.warp_waiting.assign((s.nthreads + 31) / 32, 0u);
    s.warp_exited.assign((s.nthreads + 31) / 32, 0u);
    if (s.order == Order::WarpSerial || s.order == Order::WarpSerialReverse) schedule_warp_serial();
    else schedule_rounds(rng);
}

std::string kernel_display_name(const void* kernel, const char* name) {
    return name ? std::string(name) : function_name(kernel);
}

// Checks the configuration as a GPU does at launch time: a bad configuration is not run, the launch reports why
// and records the error code the driver gives (cudaGetLastError), which LLMC_LAUNCH checks as it does on a GPU.
cudaError_t check_launch(const void* kernel, const char* name, dim3 grid, dim3 block, size_t shared_bytes) {
    const DeviceProfile& d = device();
    const long long nthreads = (long long)block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || nthreads == 0 || nthreads > d.max_threads_per_block ||
        block.x > 1024 || block.y > 1024 || block.z > 64 || grid.y > 65535 || grid.z > 65535) {
        std::fprintf(stderr, "cudasim: launch of kernel %s with grid (%u,%u,%u), block (%u,%u,%u): invalid "
                     "configuration (at most %d threads per block): cudaErrorInvalidConfiguration\n",
                     kernel_display_name(kernel, name).c_str(), grid.x, grid.y, grid.z, block.x, block.y, block.z,
                     d.max_threads_per_block);
        return set_last_error(cudaErrorInvalidConfiguration);
    }
    const size_t limit = max_dynamic_shared(kernel), fixed = static_shared_bytes(kernel);
    if (shared_bytes > limit || shared_bytes + fixed > d.shared_per_block_optin) {
        std::fprintf(stderr, "cudasim: launch of kernel %s with %zu bytes of dynamic shared memory (and %zu static): "
                     "the kernel's limit is %zu (raise it with cudaFuncSetAttribute(kernel, "
                     "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), up to %zu with the static bytes on %s, "
                     "%s; CUDASIM_DEVICE): cudaErrorInvalidValue\n", kernel_display_name(kernel, name).c_str(),
                     shared_bytes, fixed, limit, d.shared_per_block_optin, d.arch, d.product);
        return set_last_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

// Runs the grid now, in the thread order captured at the launch.
void run_grid(const void* kernel, const std::string& name, dim3 grid, dim3 block, size_t shared_bytes, Order order,
              uint64_t seed, void (*body)(void*), void* ctx) {
    Sim& s = sim();
    if (s.current) die(where() + ": kernel launch from inside a kernel (dynamic parallelism) is not supported");
    install_fault_handler();
    const Order saved_order = s.order;
    const uint64_t saved_seed = s.seed;
    s.order = order;
    s.seed = seed;
    s.kernel = kernel;
    s.kernel_name = name;
    const long long nthreads = (long long)block.x * block.y * block.z;
    s.launches++;
    s.body = body;
    s.body_ctx = ctx;
    s.nthreads = (int)nthreads;
    while (s.stacks.size() < (size_t)nthreads) s.stacks.push_back(std::make_unique<Stack>(s.stack_bytes));
    s.fibers.resize(nthreads);
    for (int i = 0; i < s.nthreads; i++) {
        Fiber& f = s.fibers[i];
        f.linear = i;
        f.tid = uint3{(unsigned)(i % block.x), (unsigned)(i / block.x % block.y), (unsigned)(i / (block.x * block.y))};
    }
    g_blockDim = block;
    g_gridDim = grid;

    std::mt19937_64 rng(s.seed * 0x9E3779B97F4A7C15ull + s.launches);
    const long long nblocks = (long long)grid.x * grid.y * grid.z;
    std::vector<long long> blocks;
    if (s.order == Order::Forward || s.order == Order::WarpSerial) {
        for (long long b = 0; b < nblocks; b++) blocks.push_back(b);
    } else {
        for (long long b = nblocks - 1; b >= 0; b--) blocks.push_back(b);
        if (s.order == Order::Shuffled) std::shuffle(blocks.begin(), blocks.end(), rng);
    }
    bound_dynamic_shared(shared_bytes);  // accesses past the launch's size fault or land in the checked slack
    for (long long b : blocks) {
        g_blockIdx = uint3{(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y), (unsigned)(b / ((long long)grid.x * grid.y))};
        // Shared memory starts with garbage on the GPU: poison it so reads before writes give NaN.
        poison_dynamic_shared(shared_bytes);
        run_block(rng);
        if (const int n = threads_with_unwaited_copies(); n > 0) {
            char buf[512];
            std::snprintf(buf, sizeof buf, "kernel %s, block (%u,%u,%u): %d threads exited with cp.async copies they "
                          "never waited for (cp.async.wait_group / wait_all): on a GPU they land in shared memory "
                          "that may already belong to another block", name.c_str(), g_blockIdx.x, g_blockIdx.y,
                          g_blockIdx.z, n);
            die(buf);
        }
        if (const long at = dynamic_shared_slack_write(shared_bytes); at >= 0) {
            char buf[512];
            std::snprintf(buf, sizeof buf, "out-of-bounds write to dynamic shared memory by kernel %s, block (%u,%u,%u)"
                          ": byte %ld was written, but the launch requested %zu bytes (the kernel's shared-memory "
                          "layout and the launch's byte count disagree)", name.c_str(), g_blockIdx.x, g_blockIdx.y,
                          g_blockIdx.z, at, shared_bytes);
            die(buf);
        }
    }
    s.kernel = nullptr;
    s.kernel_name.clear();
    s.order = saved_order;
    s.seed = saved_seed;
}

// CUDASIM_LAUNCH_LOG=FILE: every distinct (kernel, threads per block, dynamic shared bytes) this program launches is
// appended to FILE as "profile<TAB>kernel<TAB>threads<TAB>bytes", for the resource check (test/e2e/resource_check_test.py),
// which compares them with the registers and static shared memory ptxas gave each kernel.
void log_launch(const std::string& kernel, long long threads, size_t shared_bytes) {
    static const char* path = std::getenv("CUDASIM_LAUNCH_LOG");
    static std::set<std::string> seen;
    if (!path || !*path) return;
    char line[1024];
    std::snprintf(line, sizeof line, "%s\t%s\t%lld\t%zu\n", device().arch, kernel.c_str(), threads, shared_bytes);
    if (!seen.insert(line).second) return;
    if (FILE* f = std::fopen(path, "a")) {
        std::fputs(line, f);
        std::fclose(f);
    }
}

}  // namespace

cudaError_t enqueue_launch(const void* kernel, const char* name, dim3 grid, dim3 block, size_t shared_bytes,
                           cudaStream_t stream, void (*body)(void*), std::shared_ptr<void> ctx,
                           std::vector<const void*> pointers) {
    Sim& s = sim();
    if (s.current) die(where() + ": kernel launch from inside a kernel (dynamic parallelism) is not supported");
    if (cudaError_t e = check_launch(kernel, name, grid, block, shared_bytes)) return e;
    const std::string kname = kernel_display_name(kernel, name);
    log_launch(function_name(kernel), (long long)block.x * block.y * block.z, shared_bytes);
    char what[512];
    std::snprintf(what, sizeof what, "kernel %s<<<(%u,%u,%u), (%u,%u,%u), %zu>>>", kname.c_str(), grid.x, grid.y,
                  grid.z, block.x, block.y, block.z, shared_bytes);
    Work w;
    w.what = what;
    const Order order = s.order;
    const uint64_t seed = s.seed;
    w.run = [=] {
        run_grid(kernel, kname, grid, block, shared_bytes, order, seed, body, ctx.get());
        check_guard_bytes(pointers, ("kernel " + kname).c_str());
    };
    if (enqueue(stream, std::move(w)) != cudaSuccess)
        die("launch of kernel " + kname + " on an invalid stream handle (cudaErrorInvalidResourceHandle on a GPU)");
    return cudaSuccess;
}

std::string current_location() { return where(); }
bool in_kernel() { return sim().current != nullptr; }
bool is_fiber_stack_guard(const void* addr) {
    for (const auto& st : sim().stacks)
        if (st->in_guard(addr)) return true;
    return false;
}

void syncthreads() { (void)syncthreads_count(0); }

int syncthreads_count(int predicate) {
    Sim& s = sim();
    if (!s.current) die("__syncthreads() called outside a kernel");
    Fiber* f = s.current;
    f->state = State::Barrier;
    f->barrier_pred = predicate != 0;
    if (++s.barrier_arrived == s.nthreads) {  // the last thread releases the barrier
        int count = 0;
        for (int i = 0; i < s.nthreads; i++) count += s.fibers[i].barrier_pred;
        for (int i = 0; i < s.nthreads; i++) s.fibers[i].state = State::Ready;
        s.barrier_arrived = 0;
        s.barrier_count = count;
        s.barriers_released++;
    }
    yield();
    return s.barrier_count;  // every thread reads it before any thread can reach the next barrier
}

const WarpView& warp_collective(unsigned mask, uint64_t value) {
    Sim& s = sim();
    if (!s.current) die("warp collective (__shfl_*_sync, __syncwarp, vote) called outside a kernel");
    Fiber* f = s.current;
    const int lane = f->linear & 31, warp0 = f->linear & ~31;
    const int nlanes = std::min(32, s.nthreads - warp0);
    const unsigned existing = nlanes == 32 ? 0xffffffffu : ((1u << nlanes) - 1);
    if (!(mask >> lane & 1u)) die(where() + ": warp collective called with a mask that does not include the calling lane");
    f->state = State::Warp;
    f->warp_mask = mask;
    f->warp_value = value;
    const unsigned need = mask & existing;
    unsigned& waiting = s.warp_waiting[warp0 / 32];
    waiting |= 1u << lane;
    if (const unsigned gone = need & s.warp_exited[warp0 / 32])
        die(where() + ": warp collective waits for lane " + std::to_string(__builtin_ctz(gone)) + ", which has exited");
    // Complete when every lane of `need` waits, all with the same mask (the bit loops visit only lanes of `need`).
    bool complete = (waiting & need) == need;
    for (unsigned m = need; m && complete; m &= m - 1) complete = s.fibers[warp0 + __builtin_ctz(m)].warp_mask == mask;
    if (complete) {  // the last lane to arrive hands every participant the values of all participants
        uint64_t values[32];
        for (int j = 0; j < 32; j++) values[j] = (need >> j & 1u) ? s.fibers[warp0 + j].warp_value : ~uint64_t(0);
        for (unsigned m = need; m; m &= m - 1) {
            const int l = __builtin_ctz(m);
            Fiber& o = s.fibers[warp0 + l];
            std::memcpy(o.view.values, values, sizeof values);
            o.view.present = need;
            o.view.lane = l;
            o.state = State::Ready;
        }
        waiting &= ~need;
    }
    yield();
    return f->view;
}

unsigned active_mask() {
    Sim& s = sim();
    if (!s.current) die("__activemask() called outside a kernel");
    const int warp0 = s.current->linear & ~31;
    unsigned m = 0;
    for (int l = 0; l < 32 && warp0 + l < s.nthreads; l++)
        if (s.fibers[warp0 + l].state != State::Done) m |= 1u << l;
    return m;
}

void device_fail(const char* what) { die(where() + ": " + what); }

}  // namespace detail

void set_thread_order(Order order, uint64_t seed) {
    detail::sim().order = order;
    detail::sim().seed = seed;
}
Order thread_order() { return detail::sim().order; }
uint64_t thread_order_seed() { return detail::sim().seed; }
const char* order_name(Order order) {
    switch (order) {
        case Order::Forward: return "forward";
        case Order::Reverse: return "reverse";
        case Order::Shuffled: return "shuffled";
        case Order::WarpSerial: return "warp-serial";
        case Order::WarpSerialReverse: return "warp-serial-reverse";
    }
    return "?";
}
uint64_t launch_count() { return detail::sim().launches; }
uint64_t switch_count() { return detail::sim().switches; }

}  // namespace cudasim
