// CPU backend: layernorm and the fused residual + layernorm.
//
//   forward   mean = sum(x)/C,  var = sum((x-mean)^2)/C (biased),  rstd = 1/sqrt(var + 1e-5)
//             norm = (x - mean) * rstd,  out = norm * w + b;  mean and rstd are saved per row for the backward.
//   backward  with dnorm = dout * w:
//             dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))   ADDED into dinp (residual stream)
//             dw += sum over rows of dout * norm,   db += sum over rows of dout
//
// Rows are independent, so the forward and dinp run in parallel over rows. dw and db are reductions over rows: they
// run in parallel over blocks of channels, each summing all rows in order in double (deterministic, and accurate for
// the tens of thousands of rows of a large batch).
#include "cpu_backend.h"

#include <algorithm>
#include <cmath>

namespace llmc {

namespace {
constexpr float kEps = 1e-5f;

inline void layernorm_row(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                          size_t C) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t c = 0; c < C; c++) s += x[c];
    float m = s / (float)C;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (size_t c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    float r = 1.0f / std::sqrt(v / (float)C + kEps);
    for (size_t c = 0; c < C; c++) out[c] = (x[c] - m) * r * w[c] + b[c];
    *mean = m;
    *rstd = r;
}
}  // namespace

void CpuBackend::layernorm_forward(act_t* out, float* mean, float* rstd, const act_t* inp, const act_t* w,
                                   const act_t* b, size_t N, size_t C) {
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < N; i++) layernorm_row(out + i * C, mean + i, rstd + i, inp + i * C, w, b, C);
}

void CpuBackend::fused_residual_layernorm_forward(act_t* residual, act_t* out, float* mean, float* rstd,
                                                  const act_t* inp1, const act_t* inp2, const act_t* w,
                                                  const act_t* b, size_t N, size_t C) {
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < N; i++) {
        float* r = residual + i * C;
        const float* x1 = inp1 + i * C;
        const float* x2 = inp2 + i * C;
        for (size_t c = 0; c < C; c++) r[c] = x1[c] + x2[c];
        layernorm_row(out + i * C, mean + i, rstd + i, r, w, b, C);
    }
}

void CpuBackend::layernorm_backward(act_t* dinp, float* dweight, float* dbias, const act_t* dout, const act_t* inp,
                                    const act_t* w, const float* mean, const float* rstd, size_t N, size_t C) {
    // dinp, one row at a time.
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < N; i++) {
        const float* g = dout + i * C;
        const float* x = inp + i * C;
        float* dx = dinp + i * C;
        const float m = mean[i], r = rstd[i];
        float sum_dnorm = 0.0f, sum_dnorm_norm = 0.0f;
#pragma omp simd reduction(+ : sum_dnorm, sum_dnorm_norm)
        for (size_t c = 0; c < C; c++) {
            float dnorm = g[c] * w[c];
            sum_dnorm += dnorm;
            sum_dnorm_norm += dnorm * (x[c] - m) * r;
        }
        const float mean_dnorm = sum_dnorm / (float)C, mean_dnorm_norm = sum_dnorm_norm / (float)C;
        for (size_t c = 0; c < C; c++) {
            float norm = (x[c] - m) * r;
            dx[c] += r * (g[c] * w[c] - mean_dnorm - norm * mean_dnorm_norm);
        }
    }
    // dweight, dbias: blocks of 16 channels, all rows in order, double accumulators.
    const size_t blk = 16, nblk = (C + blk - 1) / blk;
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t ib = 0; ib < nblk; ib++) {
        size_t c0 = ib * blk, c1 = std::min(C, c0 + blk);
        double dw[blk] = {}, db[blk] = {};
        for (size_t i = 0; i < N; i++) {
            const float* g = dout + i * C;
            const float* x = inp + i * C;
            const float m = mean[i], r = rstd[i];
            for (size_t c = c0; c < c1; c++) {
                dw[c - c0] += (double)(g[c] * ((x[c] - m) * r));
                db[c - c0] += (double)g[c];
            }
        }
        for (size_t c = c0; c < c1; c++) {
            dweight[c] += (float)dw[c - c0];
            dbias[c] += (float)db[c - c0];
        }
    }
}

}  // namespace llmc
