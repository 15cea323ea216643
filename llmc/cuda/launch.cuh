// Kernel launches go through LLMC_LAUNCH so that the same sources run on a GPU (nvcc) and under the CUDA simulator
// (g++ with -DLLMC_CUDASIM, dev/cudasim): see docs/cudasim.md, "Execution model".
//
//   LLMC_LAUNCH(kernel, grid, block, shared_bytes, stream, args...)
//
// nvcc: kernel<<<grid, block, shared_bytes, stream>>>(args...) followed by a launch-error check (cudaGetLastError,
// which reports bad configurations immediately; faults inside the kernel surface at the next synchronising call).
// Simulator: cudasim::launch runs the grid synchronously on the CPU in the simulator's current thread order.
//
// Also: grid_size(), which computes a 1-D grid in size_t and checks that it fits CUDA's limit.
#pragma once

#include <cstddef>

#include "cuda_check.h"

#ifdef LLMC_CUDASIM
#include "cudasim.h"
#define LLMC_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
    ::cudasim::launch(kernel, dim3(grid), dim3(block), (shared_bytes), (stream), __VA_ARGS__)
#else
#define LLMC_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)         \
    do {                                                                     \
        kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__);  \
        CUDA_CHECK(cudaGetLastError());                                      \
    } while (0)
#endif

namespace llmc {

inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Number of blocks of `block` threads covering `n` work items (at least 1), checked against gridDim.x's limit.
inline unsigned grid_size(size_t n, size_t block) {
    size_t g = ceil_div(n, block);
    if (g == 0) g = 1;
    if (g > 2147483647u) fail("kernel grid of %zu blocks exceeds the CUDA limit 2^31-1 (n=%zu, block=%zu)", g, n, block);
    return (unsigned)g;
}

}  // namespace llmc
