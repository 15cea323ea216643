// The ShortcutsTweaks record's scalar mixes (the CPU ops are CpuBackend's, llmc/cpu/cpu_speedrun.cpp):
//
//   embed_skip forward:      out = l0 x + l1 x0
//   embed_skip backward:     dx = l0 dout (dx may alias dout), dx0 += l1 dout,
//                            *dl0 += sum(dout x), *dl1 += sum(dout x0)
//   value_residual forward:  on v, the columns 2C..3C of N rows of 3C: v_pre = v, v = (1 - lam) v + lam v1
//   value_residual backward: dv1 += lam dv (fp32), *dlam += sum(dv (v1 - v_pre)), dv = (1 - lam) dv
//   value_residual_add:      dv += dv1
//
// The scalars are bf16 parameters read on the device (no host round trip). Element-wise in fp32, one bf16 rounding
// per stored value; W = 8 elements per thread (16-byte accesses) on the vector path, 1 on the scalar path, chosen on
// the host (common.cuh). The scalar gradients are deterministic as reduce.cuh's sums: a grid that depends on the
// element count only, each block writing the fp32 sum of its fixed strided packs to partials, then reduce.cuh's
// sum_final_kernel adding each scalar's partials in a fixed tree into *dl. No float atomics.
#pragma once

#include "common.cuh"
#include "loop_cap.h"
#include "reduce.cuh"

namespace llmc {

constexpr size_t kScalarMixBlock = 512;

// The v element of row-major qkv (rows of 3C) for element i of the N x C v part: row i / C, column 2C + i % C. A
// pack of W elements stays in one row: the vector path needs C % W == 0.
__device__ __forceinline__ size_t value_index(size_t i, size_t C) { return i + 2 * C * (i / C + 1); }

template <int W>
__global__ void embed_skip_forward_kernel(bf16* __restrict__ out, const bf16* __restrict__ x,
                                          const bf16* __restrict__ x0, const bf16* __restrict__ l0,
                                          const bf16* __restrict__ l1, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    const float a = to_float(*l0), b = to_float(*l1);
    float u[W], v[W];
    load_floats(u, x + i);
    load_floats(v, x0 + i);
LLMC_UNROLL
    for (int e = 0; e < W; e++) u[e] = a * u[e] + b * v[e];
    store_floats(out + i, u);
}

// Grid-stride over the packs (the grid is capped: scalar_mix_blocks); partials[blockIdx] and
// partials[gridDim + blockIdx]: the block's sums of dout x and dout x0. No __restrict__ on dx and dout: they may alias.
template <int W>
__global__ void __launch_bounds__(kScalarMixBlock)
    embed_skip_backward_kernel(bf16* dx, bf16* __restrict__ dx0, float* __restrict__ partials, const bf16* dout,
                               const bf16* __restrict__ x, const bf16* __restrict__ x0, const bf16* __restrict__ l0,
                               const bf16* __restrict__ l1, size_t n) {
    __shared__ float scratch[32];
    const float a = to_float(*l0), b = to_float(*l1);
    const size_t packs = n / W, stride = (size_t)gridDim.x * blockDim.x;
    float s0 = 0.0f, s1 = 0.0f;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += stride) {
        const size_t i = p * W;
        float g[W], u[W], v[W], d0[W];
        load_floats(g, dout + i);  // read before dx (the same elements, when in place) is written
        load_floats(u, x + i);
        load_floats(v, x0 + i);
        load_floats(d0, dx0 + i);
LLMC_UNROLL
        for (int e = 0; e < W; e++) {
            s0 += g[e] * u[e];
            s1 += g[e] * v[e];
            d0[e] += b * g[e];
            g[e] *= a;
        }
        store_floats(dx0 + i, d0);
        store_floats(dx + i, g);
    }
    s0 = block_sum(s0, scratch);
    s1 = block_sum(s1, scratch);
    if (threadIdx.x == 0) partials[blockIdx.x] = s0, partials[gridDim.x + blockIdx.x] = s1;
}

// v_pre gets the bf16 values of v unchanged (a copy, no rounding).
template <int W>
__global__ void value_residual_forward_kernel(bf16* __restrict__ qkv, bf16* __restrict__ v_pre,
                                              const bf16* __restrict__ qkv1, const bf16* __restrict__ lam, size_t N,
                                              size_t C) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= N * C) return;
    const size_t j = value_index(i, C);
    const float l = to_float(*lam);
    float v[W], v1[W];
    load_floats(v, qkv + j);
    load_floats(v1, qkv1 + j);
    store_floats(v_pre + i, v);
LLMC_UNROLL
    for (int e = 0; e < W; e++) v[e] = (1.0f - l) * v[e] + l * v1[e];
    store_floats(qkv + j, v);
}

// As embed_skip_backward_kernel, one sum: partials[blockIdx] = the block's sum of dv (v1 - v_pre).
template <int W>
__global__ void __launch_bounds__(kScalarMixBlock)
    value_residual_backward_kernel(bf16* __restrict__ dqkv, float* __restrict__ dv1, float* __restrict__ partials,
                                   const bf16* __restrict__ v_pre, const bf16* __restrict__ qkv1,
                                   const bf16* __restrict__ lam, size_t N, size_t C) {
    __shared__ float scratch[32];
    const float l = to_float(*lam);
    const size_t packs = N * C / W, stride = (size_t)gridDim.x * blockDim.x;
    float s = 0.0f;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += stride) {
        const size_t i = p * W, j = value_index(i, C);
        float dv[W], acc[W], v0[W], v1[W];
        load_floats(dv, dqkv + j);
        load_floats(acc, dv1 + i);
        load_floats(v0, v_pre + i);
        load_floats(v1, qkv1 + j);
LLMC_UNROLL
        for (int e = 0; e < W; e++) {
            s += dv[e] * (v1[e] - v0[e]);
            acc[e] += l * dv[e];
            dv[e] *= 1.0f - l;
        }
        store_floats(dv1 + i, acc);
        store_floats(dqkv + j, dv);
    }
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

template <int W>
__global__ void value_residual_add_kernel(bf16* __restrict__ dqkv, const float* __restrict__ dv1, size_t N,
                                          size_t C) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= N * C) return;
    const size_t j = value_index(i, C);
    float d[W], a[W];
    load_floats(d, dqkv + j);
    load_floats(a, dv1 + i);
LLMC_UNROLL
    for (int e = 0; e < W; e++) d[e] += a[e];
    store_floats(dqkv + j, d);
}

// The backward kernels' blocks: one per kScalarMixBlock packs, at most kMaxReducePartials / sums, so that each of
// the `sums` scalars has a row of partials in the reduction's buffer. A function of the size only: deterministic.
inline size_t scalar_mix_blocks(size_t packs, size_t sums) {
    size_t blocks = ceil_div(packs, kScalarMixBlock);
    const size_t cap = loop_blocks_cap(kMaxReducePartials / sums);
    if (blocks > cap) blocks = cap;
    return blocks == 0 ? 1 : blocks;
}

// Each returns true when the vector path ran. `partials`: kMaxReducePartials floats of scratch.
inline bool embed_skip_forward(bf16* out, const bf16* x, const bf16* x0, const bf16* l0, const bf16* l1, size_t n,
                               cudaStream_t stream) {
    if (n == 0) return true;
    return launch_elementwise(vector_ok(n, kPackBf16, out, x, x0), embed_skip_forward_kernel<kPackBf16>,
                              embed_skip_forward_kernel<1>, kPackBf16, n, stream, out, x, x0, l0, l1, n);
}

inline bool embed_skip_backward(bf16* dx, bf16* dx0, float* dl0, float* dl1, const bf16* dout, const bf16* x,
                                const bf16* x0, const bf16* l0, const bf16* l1, size_t n, float* partials,
                                cudaStream_t stream) {
    if (n == 0) return true;
    const bool vec = vector_ok(n, kPackBf16, dx, dx0, dout, x, x0);
    const size_t blocks = scalar_mix_blocks(vec ? n / kPackBf16 : n, 2);
    auto kernel = vec ? embed_skip_backward_kernel<kPackBf16> : embed_skip_backward_kernel<1>;
    LLMC_LAUNCH(kernel, (unsigned)blocks, kScalarMixBlock, 0, stream, dx, dx0, partials, dout, x, x0, l0, l1, n);
    LLMC_LAUNCH(sum_final_kernel, 1, kReduceBlock, 0, stream, dl0, (const float*)partials, blocks, 1.0f);
    LLMC_LAUNCH(sum_final_kernel, 1, kReduceBlock, 0, stream, dl1, (const float*)partials + blocks, blocks, 1.0f);
    return vec;
}

inline bool value_residual_forward(bf16* qkv, bf16* v_pre, const bf16* qkv1, const bf16* lam, size_t N, size_t C,
                                   cudaStream_t stream) {
    if (N * C == 0) return true;
    return launch_elementwise(vector_ok(C, kPackBf16, qkv, v_pre, qkv1), value_residual_forward_kernel<kPackBf16>,
                              value_residual_forward_kernel<1>, kPackBf16, N * C, stream, qkv, v_pre, qkv1, lam, N,
                              C);
}

inline bool value_residual_backward(bf16* dqkv, float* dv1, float* dlam, const bf16* v_pre, const bf16* qkv1,
                                    const bf16* lam, size_t N, size_t C, float* partials, cudaStream_t stream) {
    if (N * C == 0) return true;
    const bool vec = vector_ok(C, kPackBf16, dqkv, dv1, v_pre, qkv1);
    const size_t blocks = scalar_mix_blocks(vec ? N * C / kPackBf16 : N * C, 1);
    auto kernel = vec ? value_residual_backward_kernel<kPackBf16> : value_residual_backward_kernel<1>;
    LLMC_LAUNCH(kernel, (unsigned)blocks, kScalarMixBlock, 0, stream, dqkv, dv1, partials, v_pre, qkv1, lam, N, C);
    LLMC_LAUNCH(sum_final_kernel, 1, kReduceBlock, 0, stream, dlam, (const float*)partials, blocks, 1.0f);
    return vec;
}

inline bool value_residual_add(bf16* dqkv, const float* dv1, size_t N, size_t C, cudaStream_t stream) {
    if (N * C == 0) return true;
    return launch_elementwise(vector_ok(C, kPackBf16, dqkv, dv1), value_residual_add_kernel<kPackBf16>,
                              value_residual_add_kernel<1>, kPackBf16, N * C, stream, dqkv, dv1, N, C);
}

}  // namespace llmc
