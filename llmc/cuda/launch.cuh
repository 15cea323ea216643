// Kernel launches go through LLMC_LAUNCH (llmc/cuda/platform.cuh) so that the same sources run on a GPU (nvcc) and
// under the CUDA simulator (g++ with -DLLMC_CUDASIM, dev/cudasim): see docs/cudasim.md, "Execution model".
//
//   LLMC_LAUNCH(kernel, grid, block, shared_bytes, stream, args...)
//
// Also: grid_size(), which computes a 1-D grid in size_t and checks that it fits CUDA's limit.
#pragma once

#include <cstddef>

#include "cuda_check.h"
#include "platform.cuh"

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
