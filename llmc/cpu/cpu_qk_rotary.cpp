// CPU: QK-norm + rotary embeddings in place on qkv (formulas in cpu_qk_rotary.h). Positions in parallel; each
// iteration handles the 2 NH head vectors (q and k) of one position.
#include "cpu_qk_rotary.h"

#include <vector>

#include "../error.h"
#include "cpu_rmsnorm.h"

namespace llmc {

namespace {
void check_shape(const char* op, size_t C, size_t NH) {
    if (NH == 0 || C % NH != 0 || (C / NH) % 2 != 0)
        fail("%s: C=%zu must split into NH=%zu heads of an even size", op, C, NH);
}

// (a, b) <- (a cos + b sin, -a sin + b cos) for the pairs (i, i + h) of one head: the rotation by +t theta_i
// (forward) or, with sign = -1, its inverse R^T.
void rotate(float* x, const float* cos_row, const float* sin_row, size_t h, float sign) {
    for (size_t i = 0; i < h; i++) {
        const float a = x[i], b = x[i + h], c = cos_row[i], s = sign * sin_row[i];
        x[i] = a * c + b * s;
        x[i + h] = b * c - a * s;
    }
}
}  // namespace

void qk_norm_rotary_forward(float* qkv, float* rstd, const float* table, size_t B, size_t T, size_t C, size_t NH,
                            int num_threads) {
    check_shape("qk_norm_rotary_forward", C, NH);
    const size_t hs = C / NH, h = hs / 2;
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (size_t n = 0; n < B * T; n++) {
        const float* row = table + (n % T) * hs;
        for (size_t head = 0; head < 2 * NH; head++) {  // q heads, then k heads: contiguous in qkv
            float* x = qkv + n * 3 * C + head * hs;
            const float r = rms_rstd(x, hs);
            for (size_t i = 0; i < hs; i++) x[i] *= r;
            rotate(x, row, row + h, h, 1.0f);
            rstd[n * 2 * NH + head] = r;
        }
    }
}

void qk_norm_rotary_backward(float* dqkv, const float* qkv, const float* rstd, const float* table, size_t B,
                             size_t T, size_t C, size_t NH, int num_threads) {
    check_shape("qk_norm_rotary_backward", C, NH);
    const size_t hs = C / NH, h = hs / 2;
#pragma omp parallel num_threads(num_threads)
    {
        std::vector<float> normed(hs);
#pragma omp for schedule(static)
        for (size_t n = 0; n < B * T; n++) {
            const float* row = table + (n % T) * hs;
            for (size_t head = 0; head < 2 * NH; head++) {
                const size_t off = n * 3 * C + head * hs;
                float* g = dqkv + off;
                for (size_t i = 0; i < hs; i++) normed[i] = qkv[off + i];
                rotate(normed.data(), row, row + h, h, -1.0f);
                rotate(g, row, row + h, h, -1.0f);
                const float r = rstd[n * 2 * NH + head], proj = rms_mean_dot(g, normed.data(), hs);
                for (size_t i = 0; i < hs; i++) g[i] = r * (g[i] - normed[i] * proj);
            }
        }
    }
}

}  // namespace llmc
