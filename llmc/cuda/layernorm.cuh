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
// Forward: one warp per row, fp32 statistics (two passes over the row: mean, then the centred variance).
// Backward: block g takes a fixed range of rows; for each row the two row sums come from a block reduction, and each
// thread keeps the dweight/dbias partial sums of its own channels in shared memory (no sharing, no atomics). The
// blocks write their partials to `partials` (2 x G x C floats) and a second kernel adds them over g in order:
// deterministic, and the same for every thread order.
#pragma once

#include "common.cuh"
#include "reduce.cuh"

namespace llmc {

constexpr float kLayerNormEps = 1e-5f;

// Normalises one row with one warp. `x` is the (already stored) input row.
__device__ __forceinline__ void layernorm_row(bf16* out, float* mean, float* rstd, const bf16* x, const bf16* w,
                                              const bf16* b, size_t row, size_t C, int lane) {
    float s = 0.0f;
    for (size_t c = lane; c < C; c += 32) s += to_float(x[c]);
    const float m = warp_sum(s) / (float)C;
    float v = 0.0f;
    for (size_t c = lane; c < C; c += 32) {
        float d = to_float(x[c]) - m;
        v += d * d;
    }
    const float r = rsqrtf(warp_sum(v) / (float)C + kLayerNormEps);
    for (size_t c = lane; c < C; c += 32)
        out[c] = to_bf16((to_float(x[c]) - m) * r * to_float(w[c]) + to_float(b[c]));
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = r;
    }
}

__global__ void layernorm_forward_kernel(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w,
                                         const bf16* b, size_t N, size_t C) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;  // whole warps leave together
    layernorm_row(out + row * C, mean, rstd, inp + row * C, w, b, row, C, lane);
}

__global__ void fused_residual_layernorm_forward_kernel(bf16* residual, bf16* out, float* mean, float* rstd,
                                                        const bf16* inp1, const bf16* inp2, const bf16* w,
                                                        const bf16* b, size_t N, size_t C) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    bf16* res = residual + row * C;
    // Each lane re-reads only the residual entries it wrote itself, so no barrier is needed.
    for (size_t c = lane; c < C; c += 32) res[c] = to_bf16(to_float(inp1[row * C + c]) + to_float(inp2[row * C + c]));
    layernorm_row(out + row * C, mean, rstd, res, w, b, row, C, lane);
}

__global__ void layernorm_backward_kernel(bf16* dinp, float* partials, const bf16* dout, const bf16* inp,
                                          const bf16* w, const float* mean, const float* rstd, size_t N, size_t C,
                                          size_t rows_per_block) {
    extern __shared__ float smem[];  // dweight partials (C) then dbias partials (C), channel c owned by thread c % blockDim
    __shared__ float scratch[32];
    float* dw = smem;
    float* db = smem + C;
    for (size_t c = threadIdx.x; c < C; c += blockDim.x) dw[c] = db[c] = 0.0f;

    const size_t row_begin = (size_t)blockIdx.x * rows_per_block;
    const size_t row_end = row_begin + rows_per_block < N ? row_begin + rows_per_block : N;
    for (size_t row = row_begin; row < row_end; row++) {
        const bf16* x = inp + row * C;
        const bf16* dy = dout + row * C;
        const float m = mean[row], r = rstd[row];
        float s1 = 0.0f, s2 = 0.0f;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            float xhat = (to_float(x[c]) - m) * r;
            float dnorm = to_float(w[c]) * to_float(dy[c]);
            s1 += dnorm;
            s2 += dnorm * xhat;
        }
        const float mean_dnorm = block_sum(s1, scratch) / (float)C;
        const float mean_dnorm_xhat = block_sum(s2, scratch) / (float)C;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            float xhat = (to_float(x[c]) - m) * r;
            float g = to_float(dy[c]);
            float dnorm = to_float(w[c]) * g;
            float d = (dnorm - mean_dnorm - xhat * mean_dnorm_xhat) * r;
            dinp[row * C + c] = to_bf16(to_float(dinp[row * C + c]) + d);
            dw[c] += g * xhat;
            db[c] += g;
        }
    }
    const size_t G = gridDim.x;
    for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
        partials[(size_t)blockIdx.x * C + c] = dw[c];
        partials[(G + blockIdx.x) * C + c] = db[c];
    }
}

inline void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w, const bf16* b,
                              size_t N, size_t C, cudaStream_t stream) {
    const size_t block = 256, rows_per_block = block / 32;
    LLMC_LAUNCH(layernorm_forward_kernel, grid_size(N, rows_per_block), block, 0, stream, out, mean, rstd, inp, w, b,
                N, C);
}

inline void fused_residual_layernorm_forward(bf16* residual, bf16* out, float* mean, float* rstd, const bf16* inp1,
                                             const bf16* inp2, const bf16* w, const bf16* b, size_t N, size_t C,
                                             cudaStream_t stream) {
    const size_t block = 256, rows_per_block = block / 32;
    LLMC_LAUNCH(fused_residual_layernorm_forward_kernel, grid_size(N, rows_per_block), block, 0, stream, residual,
                out, mean, rstd, inp1, inp2, w, b, N, C);
}

// Blocks of the backward: a fixed function of N (not of the device), so the summation order is reproducible.
constexpr size_t kLayerNormBackwardMaxBlocks = 512;
inline size_t layernorm_backward_blocks(size_t N) {
    size_t rows_per_block = ceil_div(N, kLayerNormBackwardMaxBlocks);
    return ceil_div(N, rows_per_block);
}
// Floats of scratch the backward needs for its partial sums.
inline size_t layernorm_backward_scratch_floats(size_t N, size_t C) { return 2 * layernorm_backward_blocks(N) * C; }

inline void layernorm_backward(bf16* dinp, float* dweight, float* dbias, float* partials, const bf16* dout,
                               const bf16* inp, const bf16* w, const float* mean, const float* rstd, size_t N,
                               size_t C, cudaStream_t stream) {
    if (N == 0) return;
    const size_t rows_per_block = ceil_div(N, kLayerNormBackwardMaxBlocks);
    const size_t G = ceil_div(N, rows_per_block);
    const size_t block = C >= 256 ? 256 : 32 * ceil_div(C, 32);
    const size_t smem = 2 * C * sizeof(float);
    if (smem > 48 * 1024) fail("layernorm_backward: C=%zu needs %zu bytes of shared memory (at most 49152)", C, smem);
    LLMC_LAUNCH(layernorm_backward_kernel, (unsigned)G, block, smem, stream, dinp, partials, dout, inp, w, mean, rstd,
                N, C, rows_per_block);
    column_sums_into(dweight, partials, G, C, stream);
    column_sums_into(dbias, partials + G * C, G, C, stream);
}

}  // namespace llmc
