// Where the CUDA sources meet their platform: nvcc and a GPU, or g++ and the CUDA simulator (-DLLMC_CUDASIM,
// dev/cudasim; docs/cudasim.md, "Execution model"). Everything that differs between the two is here and nowhere else
// in llmc/cuda (and this is the one file of llmc/ that includes the simulator's headers):
//   LLMC_LAUNCH(kernel, grid, block, shared, stream, args...)
//        nvcc: kernel<<<...>>>(args...); the simulator: cudasim::launch checks the configuration against the
//        simulated device's limits (the same error codes) and enqueues the grid. Either way a launch-error check
//        follows (faults inside the kernel surface at the next synchronising call).
//   load_vector / store_vector   one 16-byte (or smaller) access; the simulator checks its alignment and aborts on a
//        misaligned one, which a GPU would fault on ("misaligned address") and the simulator's memory would not notice
//   keep_in_register             hides a register from nvcc's optimiser (the simulator has none to hide it from)
//   the PTX operand kinds        the primitives of llmc/cuda/mma.cuh are written once, in its instruction text and
//        operand order: nvcc compiles them (asm), the simulator parses and executes them (cudasim::ptx,
//        dev/cudasim/ptx.cpp), so the two cannot diverge; only what an operand is differs (the LLMC_ASM macros)
//   test_grid_cap()              CUDASIM_GRID_CAP under the simulator (llmc/cuda/loop_cap.h), 0 on a GPU
//   kSimulator                   true under the simulator (GEMM candidates are ranked by modelled cost there, not
//        timed: llmc/cuda/matmul.cuh)
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "cuda_check.h"

#ifdef LLMC_CUDASIM
#include "cudasim.h"
#include "cudasim_mma.h"
namespace cudasim {
size_t grid_cap();  // CUDASIM_GRID_CAP, or 0 when unset (dev/cudasim/device_profile.cpp)
}
#endif

// The operand list of each PTX primitive (llmc/cuda/mma.cuh) is written once, with one macro per operand kind: a
// 32-bit register output or input (R: integer, F: float), a shared or global address, a compile-time constant. nvcc
// turns each into an asm constraint; the simulator into the pointer its ptx() reads (the value's address; for an
// address operand, the address itself). LLMC_ASM(text, (outputs...), (inputs...)) is a plain asm statement;
// LLMC_ASM_MEM the same, volatile and clobbering memory (loads, copies, waits), with _IN / _NONE for the forms without
// outputs / operands.
#define LLMC_UNPAREN(...) __VA_ARGS__

#ifdef LLMC_CUDASIM

#define LLMC_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                                    \
    do {                                                                                                \
        ::cudasim::launch(kernel, dim3(grid), dim3(block), (shared_bytes), (stream), __VA_ARGS__);      \
        CUDA_CHECK(cudaGetLastError());                                                                 \
    } while (0)

#define LLMC_OUT_R(x) static_cast<const void*>(&(x))
#define LLMC_OUT_F(x) static_cast<const void*>(&(x))
#define LLMC_IN_R(x) static_cast<const void*>(&(x))
#define LLMC_IN_F(x) static_cast<const void*>(&(x))
#define LLMC_SHARED_ADDR(p) static_cast<const void*>(p)
#define LLMC_GLOBAL_ADDR(p) static_cast<const void*>(p)
#define LLMC_CONST(x) static_cast<const void*>(&(x))
#define LLMC_ASM(text, outs, ins) cudasim::ptx(text, {LLMC_UNPAREN outs, LLMC_UNPAREN ins})
#define LLMC_ASM_MEM(text, outs, ins) cudasim::ptx(text, {LLMC_UNPAREN outs, LLMC_UNPAREN ins})
#define LLMC_ASM_MEM_IN(text, ins) cudasim::ptx(text, {LLMC_UNPAREN ins})
#define LLMC_ASM_MEM_NONE(text) cudasim::ptx(text, {})

namespace llmc {

constexpr bool kSimulator = true;
inline size_t test_grid_cap() { return cudasim::grid_cap(); }

template <class P>
__device__ __forceinline__ void check_vector_alignment(const void* p) {
    if ((uintptr_t)p % sizeof(P) != 0) {
        std::fprintf(stderr, "cudasim: misaligned %zu-byte access at %p\n", sizeof(P), p);
        std::abort();
    }
}
template <class P>
__device__ __forceinline__ P load_vector(const void* p) {
    check_vector_alignment<P>(p);
    P r;
    memcpy((void*)&r, p, sizeof r);
    return r;
}
template <class P>
__device__ __forceinline__ void store_vector(void* p, const P& v) {
    check_vector_alignment<P>(p);
    memcpy(p, (const void*)&v, sizeof v);
}
__device__ __forceinline__ void keep_in_register(uint32_t&) {}

}  // namespace llmc

#else

#define LLMC_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)         \
    do {                                                                     \
        kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__);  \
        CUDA_CHECK(cudaGetLastError());                                      \
    } while (0)

#define LLMC_OUT_R(x) "=r"(x)
#define LLMC_OUT_F(x) "=f"(x)
#define LLMC_IN_R(x) "r"(x)
#define LLMC_IN_F(x) "f"(x)
#define LLMC_SHARED_ADDR(p) "r"(llmc::shared_address(p))
#define LLMC_GLOBAL_ADDR(p) "l"(p)
#define LLMC_CONST(x) "n"(x)
#define LLMC_ASM(text, outs, ins) asm(text : LLMC_UNPAREN outs : LLMC_UNPAREN ins)
#define LLMC_ASM_MEM(text, outs, ins) asm volatile(text : LLMC_UNPAREN outs : LLMC_UNPAREN ins : "memory")
#define LLMC_ASM_MEM_IN(text, ins) asm volatile(text : : LLMC_UNPAREN ins : "memory")
#define LLMC_ASM_MEM_NONE(text) asm volatile(text : : : "memory")

namespace llmc {

constexpr bool kSimulator = false;
inline size_t test_grid_cap() { return 0; }

template <class P>
__device__ __forceinline__ P load_vector(const void* p) {
    return *reinterpret_cast<const P*>(p);
}
template <class P>
__device__ __forceinline__ void store_vector(void* p, const P& v) {
    *reinterpret_cast<P*>(p) = v;
}
__device__ __forceinline__ void keep_in_register(uint32_t& r) { asm volatile("" : "+r"(r)); }
// The 32-bit shared-window address the PTX instructions' shared operands take.
__device__ __forceinline__ uint32_t shared_address(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

}  // namespace llmc

#endif
