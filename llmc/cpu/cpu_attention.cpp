// CPU backend: causal multi-head self-attention with OpenBLAS sgemm.
//
// qkv (B,T,3C): at each position q, k, v side by side, each C wide with the NH heads of hs = C/NH channels contiguous.
// Per batch row b and head h, Q, K, V are (T,hs) matrices with row stride 3C inside qkv, and P = att[b,h] is (T,T):
//   forward   S = Q K^T / sqrt(hs);  P = row softmax of S over t2 <= t (0 above the diagonal);  out = P V
//   backward  dV = P^T dO;  dP = dO V^T;  dS[t,t2] = P[t,t2] (dP[t,t2] - sum_j P[t,j] dP[t,j])   (softmax backward)
//             dQ = dS K / sqrt(hs);  dK = dS^T Q / sqrt(hs)
//
// Causality: rows are taken in blocks of kBlock; the rows t0..t1 of a block only see columns 0..t1, so each product is
// an sgemm over that width and the work above the diagonal blocks is skipped (the part of the diagonal block above the
// diagonal is computed, and overwritten by the softmax's zeros).
//
// Threads: one (b,h) per OpenMP task, each calling single-threaded sgemm on its own slices (the q, k, v columns of
// dqkv that a task writes belong to its head only: no race). The installed OpenBLAS is the pthread build, whose own
// threads must not be started from several OpenMP threads at once; so, as in cpu_matmul.cpp, sgemm is never called
// with more than one BLAS thread from inside a parallel region: the BLAS thread count is set to 1 for the parallel
// loop and restored afterwards. The backward's per-thread scratch holds one block of dS rows (kBlock x T floats).
#include "cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "../error.h"

namespace llmc {

namespace {
constexpr size_t kBlock = 64;  // rows per causal block (sgemm M); a multiple of 16 keeps rows aligned

void check_shape(const char* op, size_t B, size_t T, size_t C, size_t NH) {
    if (NH == 0 || C % NH != 0) fail("%s: C=%zu is not a multiple of the number of heads NH=%zu", op, C, NH);
    if (T > INT_MAX || 3 * C > INT_MAX) fail("%s: shape T=%zu C=%zu exceeds BLAS's int dimensions", op, T, C);
}

// Runs body(b, h) for every (b, h) in parallel, with OpenBLAS single-threaded for the duration (see the top).
template <class F>
void for_each_head(size_t B, size_t NH, int num_threads, F body) {
    const int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
#pragma omp parallel for collapse(2) num_threads(num_threads) schedule(dynamic, 1)
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++) body(b, h);
    openblas_set_num_threads(blas_threads);
}
}  // namespace

void CpuBackend::check_attention_shape(size_t C, size_t NH) {
    if (NH == 0 || C % NH != 0) fail("attention: C=%zu is not a multiple of the number of heads NH=%zu", C, NH);
}

std::vector<BufferSize> CpuBackend::scratch_plan(size_t B, size_t T, size_t C, size_t NH, const BackendOptions& opt) {
    const size_t threads = opt.num_threads > 0 ? (size_t)opt.num_threads : (size_t)omp_get_max_threads();
    return {{"attention backward rows", "threads x 64 x T (" + std::to_string(threads) + " threads)",
             threads * kBlock * T, sizeof(float)}};
}

void CpuBackend::attention_forward(act_t* out, float* att, const act_t* qkv, size_t B, size_t T, size_t C,
                                   size_t NH) {
    check_shape("attention_forward", B, T, C, NH);
    const size_t hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt((float)hs);
    for_each_head(B, NH, num_threads_, [&](size_t b, size_t h) {
        const float* Q = qkv + b * T * C3 + h * hs;
        const float* K = Q + C;
        const float* V = Q + 2 * C;
        float* P = att + (b * NH + h) * T * T;
        float* O = out + b * T * C + h * hs;
        for (size_t t0 = 0; t0 < T; t0 += kBlock) {
            const size_t m = std::min(kBlock, T - t0), n = t0 + m;  // rows t0..n-1 see columns 0..n-1
            // S = scale Q K^T for this block of rows
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)hs, scale, Q + t0 * C3, (int)C3,
                        K, (int)C3, 0.0f, P + t0 * T, (int)T);
            // softmax over t2 <= t; zeros above the diagonal
            for (size_t t = t0; t < n; t++) {
                float* a = P + t * T;
                float maxv = -INFINITY;
                for (size_t t2 = 0; t2 <= t; t2++) maxv = std::max(maxv, a[t2]);
                float sum = 0.0f;
                for (size_t t2 = 0; t2 <= t; t2++) {
                    const float e = std::exp(a[t2] - maxv);
                    a[t2] = e;
                    sum += e;
                }
                const float inv = 1.0f / sum;
                for (size_t t2 = 0; t2 <= t; t2++) a[t2] *= inv;
                std::fill(a + t + 1, a + T, 0.0f);
            }
            // out = P V for this block of rows
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)hs, (int)n, 1.0f, P + t0 * T, (int)T,
                        V, (int)C3, 0.0f, O + t0 * C, (int)C);
        }
    });
}

void CpuBackend::attention_backward(act_t* dqkv, const act_t* dout, const act_t* qkv, const act_t* out,
                                    const float* att, size_t B, size_t T, size_t C, size_t NH) {
    check_shape("attention_backward", B, T, C, NH);
    const size_t hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt((float)hs);
    float* rows = scratch((size_t)num_threads_ * kBlock * T);  // as scratch_plan() counts it
    for_each_head(B, NH, num_threads_, [&](size_t b, size_t h) {
        float* dS = rows + (size_t)omp_get_thread_num() * kBlock * T;  // (m, n) with row stride n
        const float* Q = qkv + b * T * C3 + h * hs;
        const float* K = Q + C;
        const float* V = Q + 2 * C;
        const float* P = att + (b * NH + h) * T * T;
        const float* dO = dout + b * T * C + h * hs;
        float* dQ = dqkv + b * T * C3 + h * hs;
        float* dK = dQ + C;
        float* dV = dQ + 2 * C;
        // The row blocks in reverse: the last one spans all T columns, so its dK, dV products (beta = 0) write every
        // row of dK and dV, and the earlier blocks add to them.
        const size_t nblocks = (T + kBlock - 1) / kBlock;
        for (size_t ib = nblocks; ib-- > 0;) {
            const size_t t0 = ib * kBlock, m = std::min(kBlock, T - t0), n = t0 + m;
            const float beta = ib + 1 == nblocks ? 0.0f : 1.0f;
            // dV[0..n) += P[t0..n, 0..n)^T dO[t0..n)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)hs, (int)m, 1.0f, P + t0 * T, (int)T,
                        dO + t0 * C, (int)C, beta, dV, (int)C3);
            // dP = dO V^T for this block of rows
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)hs, 1.0f, dO + t0 * C, (int)C,
                        V, (int)C3, 0.0f, dS, (int)n);
            // dS = P (dP - rowsum(P dP)) scale, in place; zeros above the diagonal
            for (size_t t = t0; t < n; t++) {
                const float* a = P + t * T;
                float* d = dS + (t - t0) * n;
                float s = 0.0f;
                for (size_t t2 = 0; t2 <= t; t2++) s += a[t2] * d[t2];
                for (size_t t2 = 0; t2 <= t; t2++) d[t2] = a[t2] * (d[t2] - s) * scale;
                std::fill(d + t + 1, d + n, 0.0f);
            }
            // dQ[t0..n) = dS K[0..n)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)hs, (int)n, 1.0f, dS, (int)n, K,
                        (int)C3, 0.0f, dQ + t0 * C3, (int)C3);
            // dK[0..n) += dS^T Q[t0..n)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)hs, (int)m, 1.0f, dS, (int)n,
                        Q + t0 * C3, (int)C3, beta, dK, (int)C3);
        }
    });
}

}  // namespace llmc
