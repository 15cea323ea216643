// CPU: RMSNorm without a learnable gain, over the last dimension of N rows of C channels (fp32, OpenMP).
//
//   forward:  rstd = 1 / sqrt(mean_c(x^2) + eps);   out = x * rstd        (rstd saved per row, eps = kRmsNormEps)
//   backward: xhat = x * rstd;   dinp += rstd * (dout - xhat * mean_c(dout * xhat))      (residual stream: +=)
//
// The backward formula is exact with eps included: d rstd / d x_j = -rstd^3 x_j / C, so
//   dL/dx_j = rstd dout_j - rstd^3 x_j sum_i(dout_i x_i) / C = rstd (dout_j - xhat_j mean_i(dout_i xhat_i)).
// The row helpers are shared with the per-head norm of the QK-norm (cpu_qk_rotary.cpp).
#pragma once

#include <cmath>
#include <cstddef>

#include "../speedrun_recipe.h"

namespace llmc {

// 1 / sqrt(mean(x^2) + eps) over n values.
inline float rms_rstd(const float* x, size_t n) {
    float ss = 0.0f;
    for (size_t i = 0; i < n; i++) ss += x[i] * x[i];
    return 1.0f / std::sqrt(ss / (float)n + kRmsNormEps);
}

// mean(g * xhat) over n values: the projection the backward removes.
inline float rms_mean_dot(const float* g, const float* xhat, size_t n) {
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += g[i] * xhat[i];
    return s / (float)n;
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, size_t N, size_t C, int num_threads);
void rmsnorm_backward(float* dinp, const float* dout, const float* inp, const float* rstd, size_t N, size_t C,
                      int num_threads);

}  // namespace llmc
