// Causal multi-head self-attention, first version: the T x T scores are materialised.
//
// Shapes: qkv (B,T,3C) = [q | k | v] per position, each C = NH*hs wide, heads contiguous. att (B,NH,T,T).
// forward:
//   q, k, v  <- permute qkv to (B,NH,T,hs) each                                      (kernel)
//   att      <- scale * q @ k^T,  scale = 1/sqrt(hs)                                   (batched GEMM, bf16 scores)
//   att      <- causal softmax of each row: p[t,j] = exp(s_j - max) / sum, j <= t; 0 for j > t      (kernel)
//   y        <- att @ v   (B,NH,T,hs)                                                  (batched GEMM)
//   out      <- y permuted back to (B,T,C)                                             (kernel)
// backward (dqkv written, =):
//   dy   <- dout permuted to (B,NH,T,hs)
//   datt <- dy @ v^T;   dv <- att^T @ dy                                               (batched GEMMs)
//   ds   <- scale * p * (datt - sum_j p_j datt_j)   (softmax backward, in place; 0 above the diagonal)
//   dq   <- ds @ k;     dk <- ds^T @ q                                                 (batched GEMMs)
//   dqkv <- [dq | dk | dv] permuted back to (B,T,3C)
// Softmax statistics are fp32 (one warp per row); scores, probabilities and their gradients are stored in bf16.
//
// cuBLASLt mapping (column-major; per batch entry b*NH + h; a row-major (T, hs) matrix X is column-major X^T, ld hs):
//   S^T = k q^T:      m=T,  n=T,  k=hs, A = k (T-major, transposed), B = q
//   Y^T = v^T P^T:    m=hs, n=T,  k=T,  A = v, B = att (row-major P is column-major P^T)
//   dP^T = v dy^T:    like S with (v, dy)
//   dV^T = dy^T P:    m=hs, n=T,  k=T,  A = dy, B = att transposed
//   dQ^T = k^T dS^T:  like Y with (k, ds);     dK^T = q^T dS: like dV with (q, ds)
#pragma once

#include <cmath>

#include "common.cuh"
#include "matmul.cuh"

namespace llmc {

// (B,T,3,NH,hs) -> three (B,NH,T,hs) tensors.
__global__ void attention_permute_kernel(bf16* q, bf16* k, bf16* v, const bf16* qkv, size_t B, size_t T, size_t NH,
                                         size_t hs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * NH * T * hs) return;
    size_t d = i % hs, t = (i / hs) % T, h = (i / (hs * T)) % NH, b = i / (hs * T * NH);
    size_t C = NH * hs;
    const bf16* src = qkv + (b * T + t) * 3 * C + h * hs + d;
    q[i] = src[0];
    k[i] = src[C];
    v[i] = src[2 * C];
}

// The reverse: three (B,NH,T,hs) tensors -> (B,T,3C) (written).
__global__ void attention_unpermute_qkv_kernel(bf16* dqkv, const bf16* dq, const bf16* dk, const bf16* dv, size_t B,
                                               size_t T, size_t NH, size_t hs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * NH * T * hs) return;
    size_t d = i % hs, t = (i / hs) % T, h = (i / (hs * T)) % NH, b = i / (hs * T * NH);
    size_t C = NH * hs;
    bf16* dst = dqkv + (b * T + t) * 3 * C + h * hs + d;
    dst[0] = dq[i];
    dst[C] = dk[i];
    dst[2 * C] = dv[i];
}

// Index helpers for (B,NH,T,hs) <-> (B,T,C): i indexes (B,NH,T,hs); returns the matching (B,T,C) index.
__device__ __forceinline__ size_t heads_to_rows_index(size_t i, size_t T, size_t NH, size_t hs) {
    size_t d = i % hs, t = (i / hs) % T, h = (i / (hs * T)) % NH, b = i / (hs * T * NH);
    return (b * T + t) * NH * hs + h * hs + d;
}
// out (B,T,C) <- y (B,NH,T,hs)
__global__ void attention_unpermute_kernel(bf16* out, const bf16* y, size_t B, size_t T, size_t NH, size_t hs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < B * NH * T * hs) out[heads_to_rows_index(i, T, NH, hs)] = y[i];
}
// dy (B,NH,T,hs) <- dout (B,T,C)
__global__ void attention_permute_grad_kernel(bf16* dy, const bf16* dout, size_t B, size_t T, size_t NH, size_t hs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < B * NH * T * hs) dy[i] = dout[heads_to_rows_index(i, T, NH, hs)];
}

// One warp per row r of (B*NH*T) rows of T; t = r % T. Scores are already scaled.
__global__ void causal_softmax_forward_kernel(bf16* att, size_t rows, size_t T) {
    const size_t r = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const size_t t = r % T;
    bf16* row = att + r * T;
    float mx = -3.402823466e38f;
    for (size_t j = lane; j <= t; j += 32) mx = fmaxf(mx, to_float(row[j]));
    mx = warp_max(mx);
    float sum = 0.0f;
    for (size_t j = lane; j <= t; j += 32) sum += expf(to_float(row[j]) - mx);
    const float inv = 1.0f / warp_sum(sum);
    for (size_t j = lane; j < T; j += 32) row[j] = to_bf16(j <= t ? expf(to_float(row[j]) - mx) * inv : 0.0f);
}

// In place over datt: ds = scale * p * (dp - sum_j p_j dp_j) for j <= t, 0 above the diagonal.
__global__ void causal_softmax_backward_kernel(bf16* datt, const bf16* att, size_t rows, size_t T, float scale) {
    const size_t r = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const size_t t = r % T;
    bf16* dp = datt + r * T;
    const bf16* p = att + r * T;
    float dot = 0.0f;
    for (size_t j = lane; j <= t; j += 32) dot += to_float(p[j]) * to_float(dp[j]);
    dot = warp_sum(dot);
    for (size_t j = lane; j < T; j += 32)
        dp[j] = to_bf16(j <= t ? scale * to_float(p[j]) * (to_float(dp[j]) - dot) : 0.0f);
}

// bf16 elements of scratch the attention ops need: forward uses q, k, v, y; backward q, k, v, dy, dq, dk, dv and
// the T x T gradient.
inline size_t attention_scratch_elems(size_t B, size_t T, size_t C, size_t NH) {
    return 7 * B * T * C + B * NH * T * T;
}

struct AttentionGemms {
    size_t B, T, NH, hs;
    GemmArgs base() const {
        GemmArgs g;
        g.batch = B * NH;
        return g;
    }
    // D (T,T) = alpha * X (T,hs) @ Y (T,hs)^T, row-major; in column-major terms D^T = Y X^T.
    GemmArgs scores(bf16* d, const bf16* x, const bf16* y, float alpha) const {
        GemmArgs g = base();
        g.d = d; g.a = y; g.b = x;
        g.trans_a = true;
        g.m = T; g.n = T; g.k = hs;
        g.lda = hs; g.ldb = hs; g.ldd = T;
        g.stride_a = T * hs; g.stride_b = T * hs; g.stride_d = T * T;
        g.alpha = alpha;
        return g;
    }
    // D (T,hs) = P (T,T) @ X (T,hs)  (P row-major; with trans_p, P^T @ X)
    GemmArgs apply(bf16* d, const bf16* p, const bf16* x, bool trans_p) const {
        GemmArgs g = base();
        g.d = d; g.a = x; g.b = p;
        g.trans_b = trans_p;
        g.m = hs; g.n = T; g.k = T;
        g.lda = hs; g.ldb = T; g.ldd = hs;
        g.stride_a = T * hs; g.stride_b = T * T; g.stride_d = T * hs;
        return g;
    }
};

inline void attention_forward(GemmRunner& gemm, bf16* out, bf16* att, const bf16* qkv, bf16* scratch, size_t B,
                              size_t T, size_t C, size_t NH, cudaStream_t stream) {
    if (NH == 0 || C % NH != 0) fail("attention_forward: C=%zu is not a multiple of NH=%zu", C, NH);
    const size_t hs = C / NH, n = B * T * C;
    bf16 *q = scratch, *k = q + n, *v = k + n, *y = v + n;
    LLMC_LAUNCH(attention_permute_kernel, grid_size(n, 256), 256, 0, stream, q, k, v, qkv, B, T, NH, hs);
    AttentionGemms ag{B, T, NH, hs};
    gemm.run(ag.scores(att, q, k, 1.0f / sqrtf((float)hs)), stream);
    const size_t rows = B * NH * T;
    LLMC_LAUNCH(causal_softmax_forward_kernel, grid_size(rows, 8), 256, 0, stream, att, rows, T);
    gemm.run(ag.apply(y, att, v, false), stream);
    LLMC_LAUNCH(attention_unpermute_kernel, grid_size(n, 256), 256, 0, stream, out, (const bf16*)y, B, T, NH, hs);
}

inline void attention_backward(GemmRunner& gemm, bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* att,
                               bf16* scratch, size_t B, size_t T, size_t C, size_t NH, cudaStream_t stream) {
    if (NH == 0 || C % NH != 0) fail("attention_backward: C=%zu is not a multiple of NH=%zu", C, NH);
    const size_t hs = C / NH, n = B * T * C;
    bf16 *q = scratch, *k = q + n, *v = k + n, *dy = v + n, *dq = dy + n, *dk = dq + n, *dv = dk + n;
    bf16* datt = dv + n;
    LLMC_LAUNCH(attention_permute_kernel, grid_size(n, 256), 256, 0, stream, q, k, v, qkv, B, T, NH, hs);
    LLMC_LAUNCH(attention_permute_grad_kernel, grid_size(n, 256), 256, 0, stream, dy, dout, B, T, NH, hs);
    AttentionGemms ag{B, T, NH, hs};
    gemm.run(ag.scores(datt, dy, v, 1.0f), stream);          // dP = dy @ v^T
    gemm.run(ag.apply(dv, att, dy, true), stream);           // dV = P^T @ dy
    const size_t rows = B * NH * T;
    LLMC_LAUNCH(causal_softmax_backward_kernel, grid_size(rows, 8), 256, 0, stream, datt, att, rows, T,
                1.0f / sqrtf((float)hs));
    gemm.run(ag.apply(dq, datt, k, false), stream);          // dQ = dS @ k
    gemm.run(ag.apply(dk, datt, q, true), stream);           // dK = dS^T @ q
    LLMC_LAUNCH(attention_unpermute_qkv_kernel, grid_size(n, 256), 256, 0, stream, dqkv, dq, dk, dv, B, T, NH, hs);
}

}  // namespace llmc
