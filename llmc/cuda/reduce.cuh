// Reductions and element-wise helpers on fp32 buffers, plus the fp32 <-> bf16 casts.
//
//   sum_into:           *acc += scale * sum_i x[i]
//   norm_squared_into:  *acc += sum_i g[i]^2
//   add_into:           dst[i] += src[i]
//   column_sums_into:   out[c] += sum_g partials[g, c]     (second stage of the layernorm / bias gradients)
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

__global__ void __launch_bounds__(512) sum_final_kernel(float* acc, const float* partials, size_t num_partials,
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

// out[c] += sum over g < G of partials[g*C + c]. Block b covers the 32 W columns [32 W b, 32 W (b + 1)): lane l the
// W columns from 32 W b + l W (each warp load is 32 W contiguous floats), warp w sums rows g = w, w + 32, w + 64,
// ... in order (kReduceUnroll loads in flight), then warp 0 adds the 32 warp sums in warp order: a fixed tree, so the
// result is deterministic. (One thread per column looping over all G rows gave only C / 256 blocks, 3 for C = 768:
// latency-bound, and there are ~100 such calls per micro-step of GPT-2 124M.)
constexpr size_t kColumnSumWarps = 32;
template <int W>
__global__ void __launch_bounds__(1024) column_sums_into_kernel(float* out, const float* __restrict__ partials,
                                                                size_t G, size_t C) {
    __shared__ float warp_sums[kColumnSumWarps][32 * W];
    const size_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t c = ((size_t)blockIdx.x * 32 + lane) * W;
    float acc[W] = {};
    if (c < C) {
        const float* p = partials + warp * C + c;
        const size_t rows = warp < G ? (G - warp + kColumnSumWarps - 1) / kColumnSumWarps : 0;
        sum_rows(acc, rows, [&](size_t q) { return p + q * (kColumnSumWarps * C); });
    }
LLMC_UNROLL
    for (int e = 0; e < W; e++) warp_sums[warp][lane * W + e] = acc[e];
    __syncthreads();
    if (warp == 0 && c < C) {
        float s[W] = {};
LLMC_UNROLL
        for (int e = 0; e < W; e++)
            for (size_t w = 0; w < kColumnSumWarps; w++) s[e] += warp_sums[w][lane * W + e];
        add_floats(out + c, s);
    }
}

inline bool column_sums_into(float* out, const float* partials, size_t G, size_t C, cudaStream_t stream) {
    if (C == 0) return true;
    const size_t block = 32 * kColumnSumWarps;
    if (vector_ok(C, kPackF32, out, partials)) {
        LLMC_LAUNCH(column_sums_into_kernel<kPackF32>, grid_size(C, 32 * kPackF32), block, 0, stream, out, partials,
                    G, C);
        return true;
    }
    LLMC_LAUNCH(column_sums_into_kernel<1>, grid_size(C, 32), block, 0, stream, out, partials, G, C);
    return false;
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
