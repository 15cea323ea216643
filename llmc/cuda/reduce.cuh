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
#pragma once

#include "common.cuh"

namespace llmc {

constexpr size_t kReduceBlock = 512;
constexpr size_t kMaxReducePartials = 1024;  // the backend allocates this many floats for `partials`

template <bool Square>
__global__ void __launch_bounds__(512) sum_partials_kernel(float* partials, const float* x, size_t n) {
    __shared__ float scratch[32];
    float acc = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        acc += Square ? v * v : v;
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

// *acc += scale * sum(x) (or the sum of squares). `partials` holds kMaxReducePartials floats.
template <bool Square>
inline void reduce_into(float* acc, const float* x, size_t n, float scale, float* partials, cudaStream_t stream) {
    size_t blocks = ceil_div(n, kReduceBlock);
    if (blocks > kMaxReducePartials) blocks = kMaxReducePartials;
    if (blocks == 0) blocks = 1;
    LLMC_LAUNCH(sum_partials_kernel<Square>, (unsigned)blocks, kReduceBlock, 0, stream, partials, x, n);
    LLMC_LAUNCH(sum_final_kernel, 1, kReduceBlock, 0, stream, acc, (const float*)partials, blocks, scale);
}

__global__ void add_into_kernel(float* dst, const float* src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] += src[i];
}

inline void add_into(float* dst, const float* src, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    const size_t block = 256;
    LLMC_LAUNCH(add_into_kernel, grid_size(n, block), block, 0, stream, dst, src, n);
}

// out[c] += sum over g < G of partials[g*C + c]. Block b covers the 32 columns [32b, 32b + 32): lane = column (each
// warp load is 128 contiguous bytes), warp w sums rows g = w, w + 32, w + 64, ... in order, then warp 0 adds the 32
// warp sums in warp order: a fixed tree, so the result is deterministic. (One thread per column looping over all G
// rows gave only C / 256 blocks, 3 for C = 768, each thread with up to 512 loads in a row: latency-bound, and there
// are ~100 such calls per micro-step of GPT-2 124M. The cost on a GPU is an estimate until measured.)
constexpr size_t kColumnSumWarps = 32;
__global__ void __launch_bounds__(1024) column_sums_into_kernel(float* out, const float* partials, size_t G,
                                                                size_t C) {
    __shared__ float warp_sums[kColumnSumWarps][32];
    const size_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t c = (size_t)blockIdx.x * 32 + lane;
    float acc = 0.0f;
    if (c < C)
        for (size_t g = warp; g < G; g += kColumnSumWarps) acc += partials[g * C + c];
    warp_sums[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && c < C) {
        float s = 0.0f;
        for (size_t w = 0; w < kColumnSumWarps; w++) s += warp_sums[w][lane];
        out[c] += s;
    }
}

inline void column_sums_into(float* out, const float* partials, size_t G, size_t C, cudaStream_t stream) {
    if (C == 0) return;
    LLMC_LAUNCH(column_sums_into_kernel, grid_size(C, 32), 32 * kColumnSumWarps, 0, stream, out, partials, G, C);
}

__global__ void float_to_bf16_kernel(bf16* dst, const float* src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = to_bf16(src[i]);
}
__global__ void bf16_to_float_kernel(float* dst, const bf16* src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = to_float(src[i]);
}

inline void floats_to_bf16(bf16* dst, const float* src, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LLMC_LAUNCH(float_to_bf16_kernel, grid_size(n, 256), 256, 0, stream, dst, src, n);
}
inline void bf16_to_floats(float* dst, const bf16* src, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LLMC_LAUNCH(bf16_to_float_kernel, grid_size(n, 256), 256, 0, stream, dst, src, n);
}

}  // namespace llmc
