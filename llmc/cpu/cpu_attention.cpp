// CPU backend: causal multi-head self-attention.
//
// qkv (B,T,3C): at each position q, k, v side by side, each C wide with the NH heads of hs = C/NH channels contiguous.
//   forward   preatt[t,t2] = q_t . k_t2 / sqrt(hs) for t2 <= t;  att[t,:] = softmax over t2 <= t (0 above the diagonal)
//             out_t = sum_{t2 <= t} att[t,t2] v_t2                      (per batch row b and head h)
//   backward  datt[t,t2] = dout_t . v_t2;  dv_t2 += att[t,t2] dout_t
//             dpreatt[t,t2] = att[t,t2] (datt[t,t2] - sum_j att[t,j] datt[t,j])      (softmax backward)
//             dq_t += dpreatt[t,t2] k_t2 / sqrt(hs);  dk_t2 += dpreatt[t,t2] q_t / sqrt(hs)
//
// Forward rows (b,h,t) are independent. The backward runs one (b,h) per task: the q, k, v slices of dqkv a task writes
// belong to its head only, so there is no race; datt for one row at a time lives in the backend's scratch (T floats
// per thread).
#include "cpu_backend.h"

#include <omp.h>

#include <cmath>

#include "../error.h"

namespace llmc {

void CpuBackend::attention_forward(act_t* out, act_t* att, const act_t* qkv, size_t B, size_t T, size_t C,
                                   size_t NH) {
    if (NH == 0 || C % NH != 0) fail("attention_forward: C=%zu is not a multiple of the number of heads NH=%zu", C, NH);
    const size_t hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt((float)hs);
#pragma omp parallel for collapse(3) num_threads(num_threads_) schedule(dynamic, 8)
    for (size_t b = 0; b < B; b++) {
        for (size_t h = 0; h < NH; h++) {
            for (size_t t = 0; t < T; t++) {
                const float* q = qkv + (b * T + t) * C3 + h * hs;
                float* a = att + ((b * NH + h) * T + t) * T;
                // scores and their maximum
                float maxv = -INFINITY;
                for (size_t t2 = 0; t2 <= t; t2++) {
                    const float* k = qkv + (b * T + t2) * C3 + C + h * hs;
                    float s = 0.0f;
#pragma omp simd reduction(+ : s)
                    for (size_t i = 0; i < hs; i++) s += q[i] * k[i];
                    s *= scale;
                    a[t2] = s;
                    if (s > maxv) maxv = s;
                }
                // softmax over t2 <= t; zeros above the diagonal
                float sum = 0.0f;
                for (size_t t2 = 0; t2 <= t; t2++) {
                    float e = std::exp(a[t2] - maxv);
                    a[t2] = e;
                    sum += e;
                }
                const float inv = 1.0f / sum;
                for (size_t t2 = 0; t2 <= t; t2++) a[t2] *= inv;
                for (size_t t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
                // out_t = sum att v
                float* o = out + (b * T + t) * C + h * hs;
                for (size_t i = 0; i < hs; i++) o[i] = 0.0f;
                for (size_t t2 = 0; t2 <= t; t2++) {
                    const float* v = qkv + (b * T + t2) * C3 + 2 * C + h * hs;
                    const float p = a[t2];
#pragma omp simd
                    for (size_t i = 0; i < hs; i++) o[i] += p * v[i];
                }
            }
        }
    }
}

void CpuBackend::attention_backward(act_t* dqkv, const act_t* dout, const act_t* qkv, const act_t* att,
                                    size_t B, size_t T, size_t C, size_t NH) {
    if (NH == 0 || C % NH != 0) fail("attention_backward: C=%zu is not a multiple of the number of heads NH=%zu", C, NH);
    const size_t hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt((float)hs);
    float* rows = scratch((size_t)num_threads_ * T);
#pragma omp parallel for collapse(2) num_threads(num_threads_) schedule(static)
    for (size_t b = 0; b < B; b++) {
        for (size_t h = 0; h < NH; h++) {
            float* datt = rows + (size_t)omp_get_thread_num() * T;
            // This task owns dq, dk, dv of head h at every position of row b: written, so zero them first.
            for (size_t t = 0; t < T; t++) {
                float* d = dqkv + (b * T + t) * C3 + h * hs;
                for (size_t i = 0; i < hs; i++) d[i] = d[C + i] = d[2 * C + i] = 0.0f;
            }
            for (size_t t = 0; t < T; t++) {
                const float* a = att + ((b * NH + h) * T + t) * T;
                const float* g = dout + (b * T + t) * C + h * hs;
                const float* q = qkv + (b * T + t) * C3 + h * hs;
                float* dq = dqkv + (b * T + t) * C3 + h * hs;
                // datt and dv, and sum_j att[t,j] datt[t,j] for the softmax backward
                float s = 0.0f;
                for (size_t t2 = 0; t2 <= t; t2++) {
                    const float* v = qkv + (b * T + t2) * C3 + 2 * C + h * hs;
                    float* dv = dqkv + (b * T + t2) * C3 + 2 * C + h * hs;
                    float d = 0.0f;
#pragma omp simd reduction(+ : d)
                    for (size_t i = 0; i < hs; i++) d += g[i] * v[i];
                    datt[t2] = d;
                    s += a[t2] * d;
                    const float p = a[t2];
#pragma omp simd
                    for (size_t i = 0; i < hs; i++) dv[i] += p * g[i];
                }
                // through the softmax and the scores
                for (size_t t2 = 0; t2 <= t; t2++) {
                    const float dpre = a[t2] * (datt[t2] - s) * scale;
                    const float* k = qkv + (b * T + t2) * C3 + C + h * hs;
                    float* dk = dqkv + (b * T + t2) * C3 + C + h * hs;
#pragma omp simd
                    for (size_t i = 0; i < hs; i++) {
                        dq[i] += dpre * k[i];
                        dk[i] += dpre * q[i];
                    }
                }
            }
        }
    }
}

}  // namespace llmc
