// Reductions and element-wise helpers on fp32 buffers, plus the fp32 <-> bf16 casts.
//
//   sum_into:           *acc += scale * sum_i x[i]
//   norm_squared_into:  *acc += sum_i g[i]^2
//   add_into:           dst[i] += src[i]
//   column_sums_into:   out[c] += sum_g partials[g, c]     (the layernorm / bias gradients' column sums)
//   cast kernels:       fp32 -> bf16 rounds to nearest even; bf16 -> fp32 is exact.
//
// Deterministic: the scalar reductions run in two stages with a grid that depends only on n: each block writes the
// fp32 sum of a fixed strided subset of the elements to partials[block], then one block adds the partials in a fixed
// tree. No float atomics.
//
// Vector access (common.cuh): every kernel here is a template over W, the elements a thread moves per access
// (4 fp32 or 8 bf16 = 16 bytes; 1 on the scalar path, chosen on the host by vector_ok). The reductions keep
// kReduceUnroll loads in flight per thread (they are issued together, then added in index order).
#pragma once

#include "common.cuh"
#include "loop_cap.h"

namespace llmc {

constexpr size_t kReduceBlock = 512;
constexpr size_t kMaxReducePartials = 1024;  // the backend allocates this many floats for `partials`

// partials[block] = the sum of (x or x^2) over the packs i = block * 512 + thread + k * (grid * 512), k = 0, 1, ...;
// a thread adds its packs in order of i and the elements of a pack in order.
template <bool Square, int W>
__global__ void __launch_bounds__(512) sum_partials_kernel(float* partials, const float* __restrict__ x, size_t n) {
    __shared__ float scratch[32];
    const size_t packs = n / W, stride = (size_t)gridDim.x * blockDim.x;
    float acc = 0.0f;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (kReduceUnroll - 1) * stride < packs; i += kReduceUnroll * stride) {
        float v[kReduceUnroll][W];
LLMC_UNROLL
        for (int u = 0; u < kReduceUnroll; u++) load_floats(v[u], x + (i + u * stride) * W);
LLMC_UNROLL
        for (int u = 0; u < kReduceUnroll; u++)
LLMC_UNROLL
            for (int e = 0; e < W; e++) acc += Square ? v[u][e] * v[u][e] : v[u][e];
    }
    for (; i < packs; i += stride) {
        float v[W];
        load_floats(v, x + i * W);
LLMC_UNROLL
        for (int e = 0; e < W; e++) acc += Square ? v[e] * v[e] : v[e];
    }
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// static: the one kernel here that is not a template, and more than one translation unit includes this file
// (cuda_backend.cu, speedrun_ops.cu): each gets its own copy instead of two definitions of one symbol.
static __global__ void __launch_bounds__(512) sum_final_kernel(float* acc, const float* partials, size_t num_partials,
                                                               float scale) {
    __shared__ float scratch[32];
    float s = 0.0f;
    for (size_t i = threadIdx.x; i < num_partials; i += blockDim.x) s += partials[i];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) *acc += scale * s;
}

// Blocks of the first stage: one per 512 packs, at most kMaxReducePartials (a function of n only).
inline size_t reduce_blocks(size_t packs) {
    size_t blocks = ceil_div(packs, kReduceBlock);
    const size_t cap = loop_blocks_cap(kMaxReducePartials);
    if (blocks > cap) blocks = cap;
    return blocks == 0 ? 1 : blocks;
}

// *acc += scale * sum(x) (or the sum of squares). `partials` holds kMaxReducePartials floats.
template <bool Square>
inline bool reduce_into(float* acc, const float* x, size_t n, float scale, float* partials, cudaStream_t stream) {
    const bool vec = vector_ok(n, kPackF32, x);
    const size_t blocks = reduce_blocks(vec ? n / kPackF32 : n);
    auto kernel = vec ? sum_partials_kernel<Square, kPackF32> : sum_partials_kernel<Square, 1>;
    LLMC_LAUNCH(kernel, (unsigned)blocks, kReduceBlock, 0, stream, partials, x, n);
    LLMC_LAUNCH(sum_final_kernel, 1, kReduceBlock, 0, stream, acc, (const float*)partials, blocks, scale);
    return vec;
}

// out[c] += sum over g < G of partials[g*C + c], in two deterministic stages when G > kColumnSumSegmentRows:
//   stage 1 (column_segment_sums_kernel): the G rows are cut into S = ceil(G / 32) segments of 32 rows; block
//     (segment s, 32 W columns) sums its segment's rows and overwrites the segment's first row with the sum (in
//     place: the partials are scratch, and no other block reads that segment);
//   stage 2 (column_sums_into_kernel): out[c] += the S segment sums, rows 0, 32, 64, ... of the partials.
// In both, lane l owns W columns (each warp load is 32 W contiguous floats), warp w sums its rows w, w + warps, ...
// in order (kReduceUnroll loads in flight), then warp 0 adds the warp sums in warp order: a fixed tree that depends
// on G and C only. One stage with one block per 32 W columns gave C / (32 W) blocks, 6 for C = 768, each looping
// over all G rows (1024 for GPT-2 124M's layernorm and bias gradients, ~100 calls per micro-step): latency-bound on
// 6 of the GPU's SMs. Two stages launch S x 6 = 192 blocks (each warp 4 rows), then 6 blocks of one row per warp.
constexpr size_t kColumnSumWarps = 32;          // stage 2: warps per block
constexpr size_t kColumnSegmentWarps = 8;       // stage 1: warps per block
constexpr size_t kColumnSumSegmentRows = 32;    // stage 1: rows per segment

// Sums, for each lane's W columns from c, `rows` rows spaced `stride` floats apart from p, split over the block's
// warps (warp w: rows w, w + WARPS, ...), and returns the total in warp 0 (warp order: deterministic).
template <int W, size_t WARPS>
__device__ __forceinline__ void block_column_sum(float (&s)[W], float (*warp_sums)[32 * W], const float* p,
                                                size_t rows, size_t stride, bool active) {
    const size_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float acc[W] = {};
    if (active && warp < rows) {
        const size_t mine = (rows - warp + WARPS - 1) / WARPS;
        sum_rows(acc, mine, [&](size_t q) { return p + (warp + q * WARPS) * stride; });
    }
LLMC_UNROLL
    for (int e = 0; e < W; e++) warp_sums[warp][lane * W + e] = acc[e];
    __syncthreads();
LLMC_UNROLL
    for (int e = 0; e < W; e++) {
        s[e] = 0.0f;
        if (warp == 0)
            for (size_t w = 0; w < WARPS; w++) s[e] += warp_sums[w][lane * W + e];
    }
}

template <int W>
__global__ void __launch_bounds__(kColumnSegmentWarps * 32) column_segment_sums_kernel(float* partials, size_t G,
                                                                                      size_t C) {
    __shared__ float warp_sums[kColumnSegmentWarps][32 * W];
    const size_t col_chunks = (C + 32 * W - 1) / (32 * W);
    const size_t seg = blockIdx.x / col_chunks, chunk = blockIdx.x % col_chunks;
    const size_t c = (chunk * 32 + threadIdx.x % 32) * W, r0 = seg * kColumnSumSegmentRows;
    const size_t rows = G - r0 < kColumnSumSegmentRows ? G - r0 : kColumnSumSegmentRows;
    float s[W];
    block_column_sum<W, kColumnSegmentWarps>(s, warp_sums, partials + r0 * C + c, rows, C, c < C);
    if (threadIdx.x < 32 && c < C) store_floats(partials + r0 * C + c, s);  // every read of the block is done
}

// out[c] += the sum of G rows of partials, `row_stride` rows apart (1: all rows; kColumnSumSegmentRows: the
// segment sums of stage 1).
template <int W>
__global__ void __launch_bounds__(1024) column_sums_into_kernel(float* out, const float* __restrict__ partials,
                                                                size_t G, size_t C, size_t row_stride) {
    __shared__ float warp_sums[kColumnSumWarps][32 * W];
    const size_t c = ((size_t)blockIdx.x * 32 + threadIdx.x % 32) * W;
    float s[W];
    block_column_sum<W, kColumnSumWarps>(s, warp_sums, partials + c, G, row_stride * C, c < C);
    if (threadIdx.x < 32 && c < C) add_floats(out + c, s);
}

// `partials` (G x C floats) is scratch: stage 1 overwrites rows of it.
inline bool column_sums_into(float* out, float* partials, size_t G, size_t C, cudaStream_t stream) {
    if (C == 0 || G == 0) return true;
    const bool vec = vector_ok(C, kPackF32, out, partials);
    const size_t W = vec ? kPackF32 : 1, col_chunks = ceil_div(C, 32 * W);
    size_t rows = G, stride = 1;
    if (G > kColumnSumSegmentRows) {
        const size_t segments = ceil_div(G, kColumnSumSegmentRows);
        auto stage1 = vec ? column_segment_sums_kernel<kPackF32> : column_segment_sums_kernel<1>;
        LLMC_LAUNCH(stage1, grid_size(segments * col_chunks, 1), 32 * kColumnSegmentWarps, 0, stream, partials, G, C);
        rows = segments, stride = kColumnSumSegmentRows;
    }
    auto stage2 = vec ? column_sums_into_kernel<kPackF32> : column_sums_into_kernel<1>;
    LLMC_LAUNCH(stage2, grid_size(col_chunks, 1), 32 * kColumnSumWarps, 0, stream, out, (const float*)partials, rows,
                C, stride);
    return vec;
}

// Element-wise dst = src converted (fp32 -> bf16 rounds to nearest even, bf16 -> fp32 is exact), or dst += src
// (Accumulate, fp32 only). W elements per thread: on the vector path 8 for the casts (two 16-byte fp32 accesses, one
// 16-byte bf16 access) and 4 for add_into.
template <int W, bool Accumulate, class To, class From>
__global__ void convert_kernel(To* dst, const From* __restrict__ src, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    float v[W];
    load_floats(v, src + i);
    if constexpr (Accumulate)
        add_floats(dst + i, v);
    else
        store_floats(dst + i, v);
}

inline bool add_into(float* dst, const float* src, size_t n, cudaStream_t stream) {
    if (n == 0) return true;
    return launch_elementwise(vector_ok(n, kPackF32, dst, src), convert_kernel<kPackF32, true, float, float>,
                              convert_kernel<1, true, float, float>, kPackF32, n, stream, dst, src, n);
}
inline bool floats_to_bf16(bf16* dst, const float* src, size_t n, cudaStream_t stream) {
    if (n == 0) return true;
    return launch_elementwise(vector_ok(n, kPackBf16, dst, src), convert_kernel<kPackBf16, false, bf16, float>,
                              convert_kernel<1, false, bf16, float>, kPackBf16, n, stream, dst, src, n);
}
inline bool bf16_to_floats(float* dst, const bf16* src, size_t n, cudaStream_t stream) {
    if (n == 0) return true;
    return launch_elementwise(vector_ok(n, kPackBf16, dst, src), convert_kernel<kPackBf16, false, float, bf16>,
                              convert_kernel<1, false, float, bf16>, kPackBf16, n, stream, dst, src, n);
}

}  // namespace llmc
