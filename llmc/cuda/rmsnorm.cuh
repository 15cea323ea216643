// RMSNorm without a gain over the last dimension (C) of N rows (the speedrun's norm; the CPU op is
// llmc/cpu/cpu_rmsnorm.h):
//
//   forward:  rstd = 1 / sqrt(mean_c(x^2) + eps);  out = x rstd                  (rstd saved in fp32, eps = kRmsNormEps)
//   fused residual forward: residual = inp1 + inp2 (fp32, stored rounded to bf16), then the above on the stored
//             residual, as the fused residual layernorm (layernorm.cuh)
//   backward: xhat = x rstd;  dinp += rstd (dout - xhat mean_c(dout xhat))        (residual stream: +=)
//
// One warp per row, as the layernorm kernels (layernorm.cuh): lane l handles the packs l, l + 32, ... of W elements
// (W = 8: 16-byte accesses; W = 1: the scalar path for C not a multiple of 8 or unaligned pointers, chosen on the
// host) and keeps the first P in registers (RowSlice), so a row of up to 32 P W elements is read once. Statistics in
// fp32, one bf16 rounding per stored value. No parameter gradient, hence no shared memory and no second kernel.
#pragma once

#include "common.cuh"
#include "../speedrun_recipe.h"

namespace llmc {

constexpr int kRmsNormRegPacks = 4;  // rows up to 32 x 4 x 8 = 1024 (vector) or 128 (scalar) elements in registers
constexpr size_t kRmsNormRowsPerBlock = 8;

// Normalises the row held in `x` (one warp; rstd written by lane 0).
template <int W, int P>
__device__ __forceinline__ void rmsnorm_row(bf16* __restrict__ out, float* __restrict__ rstd, RowSlice<bf16, W, P>& x,
                                            size_t row, size_t C, int lane) {
    float ss = 0.0f;
    x.for_each([&](int, unsigned, const Pack<bf16, W>& p) {
LLMC_UNROLL
        for (int e = 0; e < W; e++) ss += to_float(p[e]) * to_float(p[e]);
    });
    x.keep_packed();
    const float r = rsqrtf(warp_sum(ss) / (float)C + kRmsNormEps);
    x.for_each([&](int, unsigned j, const Pack<bf16, W>& p) {
        float v[W];
LLMC_UNROLL
        for (int e = 0; e < W; e++) v[e] = to_float(p[e]) * r;
        store_floats(out + j * W, v);
    });
    if (lane == 0) rstd[row] = r;
}

template <int W, int P>
__global__ void rmsnorm_forward_kernel(bf16* __restrict__ out, float* __restrict__ rstd, const bf16* __restrict__ inp,
                                       size_t N, size_t C) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;  // whole warps leave together
    RowSlice<bf16, W, P> x(inp + row * C, (unsigned)(C / W), lane, 32);
    rmsnorm_row(out + row * C, rstd, x, row, C, lane);
}

template <int W, int P>
__global__ void fused_residual_rmsnorm_forward_kernel(bf16* __restrict__ residual, bf16* __restrict__ out,
                                                      float* __restrict__ rstd, const bf16* __restrict__ inp1,
                                                      const bf16* __restrict__ inp2, size_t N, size_t C) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    auto x = residual_sum_row<W, P>(residual + row * C, inp1 + row * C, inp2 + row * C, (unsigned)(C / W), lane);
    rmsnorm_row(out + row * C, rstd, x, row, C, lane);
}

template <int W, int P>
__global__ void rmsnorm_backward_kernel(bf16* __restrict__ dinp, const bf16* __restrict__ dout,
                                        const bf16* __restrict__ inp, const float* __restrict__ rstd, size_t N,
                                        size_t C) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    const unsigned packs = (unsigned)(C / W);
    RowSlice<bf16, W, P> dy(dout + row * C, packs, lane, 32), x(inp + row * C, packs, lane, 32);
    const float r = rstd[row];
    float s = 0.0f;
    dy.for_each([&](int k, unsigned j, const Pack<bf16, W>& g) {
        const Pack<bf16, W> xp = x.get(k, j);
LLMC_UNROLL
        for (int e = 0; e < W; e++) s += to_float(g[e]) * to_float(xp[e]) * r;
    });
    dy.keep_packed();
    x.keep_packed();
    const float proj = warp_sum(s) / (float)C;
    bf16* dx = dinp + row * C;
    dy.for_each([&](int k, unsigned j, const Pack<bf16, W>& g) {
        const Pack<bf16, W> xp = x.get(k, j);
        float d[W];
        load_floats(d, dx + j * W);
LLMC_UNROLL
        for (int e = 0; e < W; e++) d[e] += r * (to_float(g[e]) - to_float(xp[e]) * r * proj);
        store_floats(dx + j * W, d);
    });
}

// Each returns true when the vector path ran (false: the scalar path).
inline bool rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, size_t N, size_t C, cudaStream_t stream) {
    if (N == 0 || C == 0) return true;
    check_row_length("rmsnorm", C);
    const bool vec = vector_ok(C, kPackBf16, out, inp);
    auto kernel = vec ? rmsnorm_forward_kernel<kPackBf16, kRmsNormRegPacks>
                      : rmsnorm_forward_kernel<1, kRmsNormRegPacks>;
    LLMC_LAUNCH(kernel, grid_size(N, kRmsNormRowsPerBlock), 32 * kRmsNormRowsPerBlock, 0, stream, out, rstd, inp, N, C);
    return vec;
}

inline bool fused_residual_rmsnorm_forward(bf16* residual, bf16* out, float* rstd, const bf16* inp1,
                                           const bf16* inp2, size_t N, size_t C, cudaStream_t stream) {
    if (N == 0 || C == 0) return true;
    check_row_length("rmsnorm", C);
    const bool vec = vector_ok(C, kPackBf16, residual, out, inp1, inp2);
    auto kernel = vec ? fused_residual_rmsnorm_forward_kernel<kPackBf16, kRmsNormRegPacks>
                      : fused_residual_rmsnorm_forward_kernel<1, kRmsNormRegPacks>;
    LLMC_LAUNCH(kernel, grid_size(N, kRmsNormRowsPerBlock), 32 * kRmsNormRowsPerBlock, 0, stream, residual, out, rstd,
                inp1, inp2, N, C);
    return vec;
}

inline bool rmsnorm_backward(bf16* dinp, const bf16* dout, const bf16* inp, const float* rstd, size_t N, size_t C,
                             cudaStream_t stream) {
    if (N == 0 || C == 0) return true;
    check_row_length("rmsnorm_backward", C);
    const bool vec = vector_ok(C, kPackBf16, dinp, dout, inp);
    auto kernel = vec ? rmsnorm_backward_kernel<kPackBf16, kRmsNormRegPacks>
                      : rmsnorm_backward_kernel<1, kRmsNormRegPacks>;
    LLMC_LAUNCH(kernel, grid_size(N, kRmsNormRowsPerBlock), 32 * kRmsNormRowsPerBlock, 0, stream, dinp, dout, inp,
                rstd, N, C);
    return vec;
}

}  // namespace llmc
