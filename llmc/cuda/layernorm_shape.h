// The layernorm backward's launch shape (host only; llmc/cuda/layernorm.cuh has the kernel): blocks, rows per block,
// warps per block from the device's shared memory, and the partial-sum scratch it needs.
#pragma once

#include <cstddef>

#include "../error.h"
#include "device_limits.h"
#include "loop_cap.h"

namespace llmc {

// Shape of the backward: at most 1024 blocks of at least 8 rows, a function of N only; 8 warps per block, fewer when
// their shared slices (8 C bytes per warp) would exceed what the device allows one block (DeviceLimits, read from
// cudaDevAttrMaxSharedMemoryPerBlockOptin: 99 KiB on sm_86 / sm_89 gives 7 warps at GPT-2 1.5B's C = 1600). The
// summation order is fixed by (N, C, warps): bitwise reproducible on one device.
constexpr size_t kLayerNormBackwardMaxBlocks = 1024;
constexpr size_t kLayerNormBackwardMinRows = 8;
constexpr size_t kLayerNormBackwardMaxWarps = 8;
inline size_t layernorm_backward_rows_per_block(size_t N) {
    const size_t max_blocks = loop_blocks_cap(kLayerNormBackwardMaxBlocks);
    size_t rows = (N + max_blocks - 1) / max_blocks;
    return rows < kLayerNormBackwardMinRows ? kLayerNormBackwardMinRows : rows;
}
inline size_t layernorm_backward_blocks(size_t N) {
    const size_t rows = layernorm_backward_rows_per_block(N);
    return (N + rows - 1) / rows;
}
// 0 when not even one warp's slice fits (the device cannot run the backward at this C).
inline size_t layernorm_backward_warps(size_t C, const DeviceLimits& d) {
    const size_t warps = d.smem_per_block / (8 * C);
    return warps > kLayerNormBackwardMaxWarps ? kLayerNormBackwardMaxWarps : warps;
}
// Refuses, with the reason, a C whose backward does not fit device d.
inline void check_layernorm_fits(size_t C, const DeviceLimits& d) {
    if (C > 0 && layernorm_backward_warps(C, d) == 0)
        fail("layernorm_backward: C=%zu needs %zu bytes of shared memory per warp; this GPU (sm_%d) allows %zu per "
             "block", C, 8 * C, d.cc, d.smem_per_block);
}
// Floats of scratch the backward needs for its partial sums.
inline size_t layernorm_backward_scratch_floats(size_t N, size_t C) { return 2 * layernorm_backward_blocks(N) * C; }

}  // namespace llmc
