// cudasim: run CUDA kernels on the CPU, one fiber per CUDA thread (see docs/cudasim.md).
//
//   cudasim::launch(kernel, grid, block, shared_bytes, stream, args...)   // what LLMC_LAUNCH expands to
//   cudasim::set_thread_order(cudasim::Order::Shuffled, seed)             // scheduling order of the fibers
//   cudasim::for_each_order([&](cudasim::Order o) { ... })                // run a test under every order
//
// A launch is enqueued on its stream and runs when the stream scheduler gets to it (a host synchronisation that needs
// it, see docs/cudasim.md), in the thread order current at the launch: blocks one after another (in the order's block
// order), and inside a block every thread as a fiber. Fibers yield only at __syncthreads, __syncwarp and warp collectives; between yield points the
// scheduler resumes the runnable fibers in the current order (Forward: thread 0 first; Reverse: last thread first;
// Shuffled: a fresh pseudo-random permutation each round), or runs one warp at a time up to the next __syncthreads
// (WarpSerial: warp 0 first; WarpSerialReverse: last warp first). A kernel that lacks a barrier reads data another
// thread has not written yet, or has already overwritten, in at least one of the orders.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cudasim {

// Forward, Reverse, Shuffled: round by round, every runnable thread advances to its next yield point.
// WarpSerial, WarpSerialReverse: one warp runs alone (its lanes in rounds) until all its lanes wait at __syncthreads
// or exited, then the next warp (first to last, or last to first with lanes last to first too).
enum class Order { Forward, Reverse, Shuffled, WarpSerial, WarpSerialReverse };

// The order used by following launches. The initial order comes from the environment variable CUDASIM_ORDER
// (forward | reverse | shuffled | shuffled:SEED | warp-serial | warp-serial-reverse), default forward.
void set_thread_order(Order order, uint64_t seed = 1);
Order thread_order();
uint64_t thread_order_seed();
const char* order_name(Order order);

// Calls fn under every order (fn takes an Order, or nothing), then restores the previous order.
template <class Fn>
void for_each_order(Fn&& fn, uint64_t seed = 0x5eed) {
    const Order saved = thread_order();
    const uint64_t saved_seed = thread_order_seed();
    for (Order o : {Order::Forward, Order::Reverse, Order::Shuffled, Order::WarpSerial, Order::WarpSerialReverse}) {
        set_thread_order(o, seed);
        if constexpr (std::is_invocable_v<Fn&, Order>) fn(o);
        else fn();
    }
    set_thread_order(saved, saved_seed);
}

// The stream scheduler's seed: which of the operations CUDA allows to run next runs next, when the host waits for
// device work (see docs/cudasim.md). The initial seed comes from CUDASIM_STREAM_SEED (default 1); 0 runs them in the
// order they were enqueued.
void set_stream_seed(uint64_t seed);
uint64_t stream_seed();

// Number of kernel launches run and of fiber context switches so far (for tests and speed checks).
uint64_t launch_count();
uint64_t switch_count();

namespace detail {
// Checks the launch and enqueues the grid on `stream`. body(ctx) is the kernel call of one CUDA thread. `kernel`
// identifies the function for cudaFuncSetAttribute limits; `name` (may be null: the symbol table gives it) is used in
// messages. `pointers` are the kernel's pointer arguments: after the grid ran, the slack around the allocations they
// point into is checked for out-of-bounds writes.
cudaError_t enqueue_launch(const void* kernel, const char* name, dim3 grid, dim3 block, size_t shared_bytes,
                           cudaStream_t stream, void (*body)(void*), std::shared_ptr<void> ctx,
                           std::vector<const void*> pointers);

template <class T>
void collect_pointer(std::vector<const void*>& out, const T& v) {
    if constexpr (std::is_pointer_v<T>) out.push_back((const void*)v);
}

template <class Kernel, class Params>
struct Call {
    Kernel kernel;
    Params params;
    // Every CUDA thread gets its own copy of the by-value parameters, as on the device.
    static void run(void* self) {
        auto* c = static_cast<Call*>(self);
        std::apply(c->kernel, c->params);
    }
};
}  // namespace detail

// Launch `kernel` like kernel<<<grid, block, shared_bytes, stream>>>(args...): the arguments are converted to the
// kernel's parameter types now, the grid runs when the stream scheduler reaches it. A configuration the device
// refuses (too many threads, more dynamic shared memory than the kernel's limit) is not run: the launch reports it
// and returns the driver's error code, which cudaGetLastError then returns too.
template <class... P, class... A>
cudaError_t launch_named(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes,
                  cudaStream_t stream, A&&... args) {
    static_assert(sizeof...(P) == sizeof...(A), "cudasim::launch: wrong number of kernel arguments");
    using Params = std::tuple<std::decay_t<P>...>;
    using CallT = detail::Call<void (*)(P...), Params>;
    auto call = std::make_shared<CallT>(CallT{kernel, Params(std::forward<A>(args)...)});
    std::vector<const void*> pointers;
    std::apply([&](const auto&... p) { (detail::collect_pointer(pointers, p), ...); }, call->params);
    return detail::enqueue_launch(reinterpret_cast<const void*>(kernel), name, grid, block, shared_bytes, stream,
                                  &CallT::run, std::shared_ptr<void>(call), std::move(pointers));
}
template <class... P, class... A>
cudaError_t launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   A&&... args) {
    return launch_named(nullptr, kernel, grid, block, shared_bytes, stream, std::forward<A>(args)...);
}

// The simulated device: "sm_80" (A100), "sm_86" (A10), "sm_89" (L40S) or "sm_90" (H100, the default), with that
// architecture's limits (docs/cudasim.md). The initial profile comes from CUDASIM_DEVICE. Switching synchronises the
// device and forgets every cudaFuncSetAttribute setting (as a different GPU would); false for an unknown name.
bool set_device_profile(const char* arch);
const char* device_profile();

}  // namespace cudasim
