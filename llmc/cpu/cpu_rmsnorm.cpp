// CPU: RMSNorm without a gain (formulas in cpu_rmsnorm.h). One row per loop iteration, rows in parallel.
#include "cpu_rmsnorm.h"

#include <vector>

namespace llmc {

void rmsnorm_forward(float* out, float* rstd, const float* inp, size_t N, size_t C, int num_threads) {
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (size_t i = 0; i < N; i++) {
        const float* x = inp + i * C;
        const float r = rms_rstd(x, C);
        for (size_t c = 0; c < C; c++) out[i * C + c] = x[c] * r;
        rstd[i] = r;
    }
}

void rmsnorm_backward(float* dinp, const float* dout, const float* inp, const float* rstd, size_t N, size_t C,
                      int num_threads) {
#pragma omp parallel num_threads(num_threads)
    {
        std::vector<float> xhat(C);
#pragma omp for schedule(static)
        for (size_t i = 0; i < N; i++) {
            const float* x = inp + i * C;
            const float* g = dout + i * C;
            const float r = rstd[i];
            for (size_t c = 0; c < C; c++) xhat[c] = x[c] * r;
            const float proj = rms_mean_dot(g, xhat.data(), C);
            for (size_t c = 0; c < C; c++) dinp[i * C + c] += r * (g[c] - xhat[c] * proj);
        }
    }
}

}  // namespace llmc
