// cudasim: run CUDA kernels on the CPU, one fiber per CUDA thread (see docs/cudasim.md).
//
//   cudasim::launch(kernel, grid, block, shared_bytes, stream, args...)   // what LLMC_LAUNCH expands to
//   cudasim::set_thread_order(cudasim::Order::Shuffled, seed)             // scheduling order of the fibers
//   cudasim::for_each_order([&](cudasim::Order o) { ... })                // run a test under every order
//
// A launch runs synchronously: blocks one after another (in the order's block order), and inside a block every
// thread as a fiber. Fibers yield only at __syncthreads, __syncwarp and warp collectives; between yield points the
// scheduler resumes the runnable fibers in the current order (Forward: thread 0 first; Reverse: last thread first;
// Shuffled: a fresh pseudo-random permutation each round), or runs one warp at a time up to the next __syncthreads
// (WarpSerial: warp 0 first; WarpSerialReverse: last warp first). A kernel that lacks a barrier reads data another
// thread has not written yet, or has already overwritten, in at least one of the orders.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

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

// Number of kernel launches and of fiber context switches so far (for tests and speed checks).
uint64_t launch_count();
uint64_t switch_count();

namespace detail {
// Runs the grid. body(ctx) is the kernel call of one CUDA thread. `kernel` identifies the function for
// cudaFuncSetAttribute limits; `name` (may be null) is used in error messages.
void run_grid(const void* kernel, const char* name, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
              void (*body)(void*), void* ctx);

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

// Launch `kernel` like kernel<<<grid, block, shared_bytes, stream>>>(args...), synchronously.
template <class... P, class... A>
void launch_named(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes,
                  cudaStream_t stream, A&&... args) {
    static_assert(sizeof...(P) == sizeof...(A), "cudasim::launch: wrong number of kernel arguments");
    using Params = std::tuple<std::decay_t<P>...>;
    detail::Call<void (*)(P...), Params> call{kernel, Params(std::forward<A>(args)...)};
    detail::run_grid(reinterpret_cast<const void*>(kernel), name, grid, block, shared_bytes, stream,
                     &detail::Call<void (*)(P...), Params>::run, &call);
}
template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, A&&... args) {
    launch_named(nullptr, kernel, grid, block, shared_bytes, stream, std::forward<A>(args)...);
}

}  // namespace cudasim
