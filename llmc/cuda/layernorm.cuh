// LayerNorm over the last dimension (C) of N rows, eps = 1e-5, biased variance (as PyTorch):
//
//   forward:  mean = sum_c x / C;  var = sum_c (x - mean)^2 / C;  rstd = 1 / sqrt(var + eps)
//             xhat = (x - mean) * rstd;  out = xhat * w + b        (mean, rstd saved in fp32 for the backward)
//   fused residual forward: residual = inp1 + inp2 (stored in bf16), then the above on the stored residual, so the
//             backward sees exactly the values that were normalised.
//   backward: dnorm = dout * w
//             dinp += rstd * (dnorm - mean_c(dnorm) - xhat * mean_c(dnorm * xhat))   (residual stream: +=)
//             dweight[c] += sum_n dout * xhat;   dbias[c] += sum_n dout             (parameter gradients: +=)
//
// Every kernel is a warp per row. Lane l handles the packs l, l + 32, l + 64, ... of W elements (W = 8: 16-byte
// loads and stores; W = 1: the scalar path for C not a multiple of 8 or unaligned pointers, chosen on the host), and
// keeps the first P of them in registers (RowSlice), so a row of up to 32 P W elements (2048 on the vector path) is
// read from memory once although the kernels pass over it two or three times.
//
// Forward: fp32 statistics, two passes over the registers (mean, then the centred variance), then the output.
// Backward: block g takes a fixed range of rows, its warps take every (number of warps)-th row of it; each warp
// keeps the dweight/dbias partial sums of its rows in its own slice of shared memory (a lane updates only the
// channels of its own packs: no sharing, no atomics, no barrier until the end). At the end the block adds its warps'
// slices in warp order into `partials` (2 x G x C floats) and a second kernel adds those over g in order
// (column_sums_into): deterministic, the same for every thread order, and the row-to-block map depends on N only.
#pragma once

#include "common.cuh"
#include "device_limits.h"
#include "layernorm_shape.h"
#include "reduce.cuh"

namespace llmc {

constexpr float kLayerNormEps = 1e-5f;
constexpr int kLayerNormRegPacks = 4;        // P of the vector path: rows up to 32 x 4 x 8 = 1024 stay in registers
constexpr int kLayerNormScalarRegPacks = 4;  // P of the scalar path (128 elements per row in registers)

// Normalises one row held in `x` (one warp; mean / rstd written by lane 0).
template <int W, int P>
__device__ __forceinline__ void layernorm_row(bf16* __restrict__ out, float* mean, float* rstd,
                                              RowSlice<bf16, W, P>& x, const bf16* __restrict__ w,
                                              const bf16* __restrict__ b, size_t row, size_t C, int lane) {
    float s = 0.0f;
    x.for_each([&](int, unsigned, const Pack<bf16, W>& p) {
LLMC_UNROLL
        for (int e = 0; e < W; e++) s += to_float(p[e]);
    });
    x.keep_packed();
    const float m = warp_sum(s) / (float)C;
    float v = 0.0f;
    x.for_each([&](int, unsigned, const Pack<bf16, W>& p) {
LLMC_UNROLL
        for (int e = 0; e < W; e++) {
            const float d = to_float(p[e]) - m;
            v += d * d;
        }
    });
    x.keep_packed();
    const float r = rsqrtf(warp_sum(v) / (float)C + kLayerNormEps);
    x.for_each([&](int, unsigned j, const Pack<bf16, W>& p) {
        float wf[W], bf[W], o[W];
        load_floats(wf, w + j * W);
        load_floats(bf, b + j * W);
LLMC_UNROLL
        for (int e = 0; e < W; e++) o[e] = (to_float(p[e]) - m) * r * wf[e] + bf[e];
        store_floats(out + j * W, o);
    });
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = r;
    }
}

template <int W, int P>
__global__ void layernorm_forward_kernel(bf16* __restrict__ out, float* mean, float* rstd,
                                         const bf16* __restrict__ inp, const bf16* __restrict__ w,
                                         const bf16* __restrict__ b, size_t N, size_t C) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;  // whole warps leave together
    RowSlice<bf16, W, P> x(inp + row * C, (unsigned)(C / W), lane, 32);
    layernorm_row(out + row * C, mean, rstd, x, w, b, row, C, lane);
}

template <int W, int P>
__global__ void fused_residual_layernorm_forward_kernel(bf16* __restrict__ residual, bf16* __restrict__ out,
                                                        float* mean, float* rstd, const bf16* __restrict__ inp1,
                                                        const bf16* __restrict__ inp2, const bf16* __restrict__ w,
                                                        const bf16* __restrict__ b, size_t N, size_t C) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    auto x = residual_sum_row<W, P>(residual + row * C, inp1 + row * C, inp2 + row * C, (unsigned)(C / W), lane);
    layernorm_row(out + row * C, mean, rstd, x, w, b, row, C, lane);
}

// The block size is chosen at run time (up to kLayerNormBackwardMaxWarps warps, fewer where shared memory is small):
// the bound lets the resource check (test/e2e/resource_check_test.py) verify every size the host may pick. Blocks
// per SM it is compiled for: 3 on sm_90, whose 85-register budget holds the vector kernel without spilling (at
// C = 768 shared memory allows 4 blocks of 8 warps; unbounded, ptxas took 98 registers: 2 blocks); 2 elsewhere,
// since sm_80's code spills at 3 (ptxas -v, CUDA 13.0).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr int kLayerNormBackwardMinBlocks = 3;
#else
constexpr int kLayerNormBackwardMinBlocks = 2;
#endif
template <int W, int P>
__global__ void __launch_bounds__(32 * kLayerNormBackwardMaxWarps, kLayerNormBackwardMinBlocks) layernorm_backward_kernel(bf16* __restrict__ dinp, float* __restrict__ partials,
                                          const bf16* __restrict__ dout, const bf16* __restrict__ inp,
                                          const bf16* __restrict__ w, const float* __restrict__ mean,
                                          const float* __restrict__ rstd, size_t N, size_t C,
                                          size_t rows_per_block) {
    // Warp q's slice: dweight partials smem[2 q C, 2 q C + C), dbias partials the next C floats.
    float* smem = dynamic_shared_floats();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    const unsigned packs = (unsigned)(C / W);
    float* dw = smem + 2 * (size_t)warp * C;
    float* db = dw + C;
    const float zero[W] = {};
    for (unsigned j = lane; j < packs; j += 32) {  // the same lanes own these packs below
        store_floats(dw + j * W, zero);
        store_floats(db + j * W, zero);
    }

    const size_t row_begin = (size_t)blockIdx.x * rows_per_block;
    const size_t row_end = row_begin + rows_per_block < N ? row_begin + rows_per_block : N;
    for (size_t row = row_begin + warp; row < row_end; row += num_warps) {
        RowSlice<bf16, W, P> dy(dout + row * C, packs, lane, 32), x(inp + row * C, packs, lane, 32);
        const float m = mean[row], r = rstd[row];
        float s1 = 0.0f, s2 = 0.0f;
        dy.for_each([&](int k, unsigned j, const Pack<bf16, W>& g) {
            const Pack<bf16, W> xp = x.get(k, j);
            float wf[W];
            load_floats(wf, w + j * W);
LLMC_UNROLL
            for (int e = 0; e < W; e++) {
                const float xhat = (to_float(xp[e]) - m) * r, dnorm = wf[e] * to_float(g[e]);
                s1 += dnorm;
                s2 += dnorm * xhat;
            }
        });
        dy.keep_packed();
        x.keep_packed();
        const float mean_dnorm = warp_sum(s1) / (float)C, mean_dnorm_xhat = warp_sum(s2) / (float)C;
        bf16* dx = dinp + row * C;
        dy.for_each([&](int k, unsigned j, const Pack<bf16, W>& g) {
            const Pack<bf16, W> xp = x.get(k, j);
            float wf[W], di[W], dwj[W], dbj[W];
            load_floats(wf, w + j * W);
            load_floats(di, dx + j * W);
            load_floats(dwj, dw + j * W);
            load_floats(dbj, db + j * W);
LLMC_UNROLL
            for (int e = 0; e < W; e++) {
                const float xhat = (to_float(xp[e]) - m) * r, gf = to_float(g[e]), dnorm = wf[e] * gf;
                di[e] += (dnorm - mean_dnorm - xhat * mean_dnorm_xhat) * r;
                dwj[e] += gf * xhat;
                dbj[e] += gf;
            }
            store_floats(dx + j * W, di);
            store_floats(dw + j * W, dwj);
            store_floats(db + j * W, dbj);
        });
    }
    __syncthreads();
    const size_t G = gridDim.x;
    for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
        float sw = 0.0f, sb = 0.0f;
        for (int q = 0; q < num_warps; q++) {
            sw += smem[2 * (size_t)q * C + c];
            sb += smem[2 * (size_t)q * C + C + c];
        }
        partials[(size_t)blockIdx.x * C + c] = sw;
        partials[(G + blockIdx.x) * C + c] = sb;
    }
}

constexpr size_t kLayerNormRowsPerBlock = 8;  // forward: 8 warps of 256 threads, one row each

// Returns true when the vector path ran (false: the scalar path).
inline bool layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w, const bf16* b,
                              size_t N, size_t C, cudaStream_t stream) {
    check_row_length("layernorm", C);
    const unsigned grid = grid_size(N, kLayerNormRowsPerBlock);
    const bool vec = vector_ok(C, kPackBf16, out, inp, w, b);
    auto kernel = vec ? layernorm_forward_kernel<kPackBf16, kLayerNormRegPacks>
                      : layernorm_forward_kernel<1, kLayerNormScalarRegPacks>;
    LLMC_LAUNCH(kernel, grid, 32 * kLayerNormRowsPerBlock, 0, stream, out, mean, rstd, inp, w, b, N, C);
    return vec;
}

inline bool fused_residual_layernorm_forward(bf16* residual, bf16* out, float* mean, float* rstd, const bf16* inp1,
                                             const bf16* inp2, const bf16* w, const bf16* b, size_t N, size_t C,
                                             cudaStream_t stream) {
    check_row_length("layernorm", C);
    const unsigned grid = grid_size(N, kLayerNormRowsPerBlock);
    const bool vec = vector_ok(C, kPackBf16, residual, out, inp1, inp2, w, b);
    auto kernel = vec ? fused_residual_layernorm_forward_kernel<kPackBf16, kLayerNormRegPacks>
                      : fused_residual_layernorm_forward_kernel<1, kLayerNormScalarRegPacks>;
    LLMC_LAUNCH(kernel, grid, 32 * kLayerNormRowsPerBlock, 0, stream, residual, out, mean, rstd, inp1, inp2, w, b,
                N, C);
    return vec;
}

inline bool layernorm_backward(bf16* dinp, float* dweight, float* dbias, float* partials, const bf16* dout,
                               const bf16* inp, const bf16* w, const float* mean, const float* rstd, size_t N,
                               size_t C, const DeviceLimits& dev, cudaStream_t stream) {
    if (N == 0 || C == 0) return true;
    check_row_length("layernorm_backward", C);
    check_layernorm_fits(C, dev);
    const size_t warps = layernorm_backward_warps(C, dev);
    const size_t rows_per_block = layernorm_backward_rows_per_block(N), G = layernorm_backward_blocks(N);
    const size_t smem = warps * 8 * C;
    const bool vec = vector_ok(C, kPackBf16, dinp, dout, inp, w);
    auto kernel = vec ? layernorm_backward_kernel<kPackBf16, kLayerNormRegPacks>
                      : layernorm_backward_kernel<1, kLayerNormScalarRegPacks>;
    allow_dynamic_shared(kernel, smem);
    LLMC_LAUNCH(kernel, (unsigned)G, 32 * warps, smem, stream, dinp, partials, dout, inp, w, mean, rstd, N, C,
                rows_per_block);
    const bool vec_w = column_sums_into(dweight, partials, G, C, stream);
    const bool vec_b = column_sums_into(dbias, partials + G * C, G, C, stream);
    return vec && vec_w && vec_b;
}

}  // namespace llmc
