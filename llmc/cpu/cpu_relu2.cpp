// CPU: ReLU squared (formulas in cpu_relu2.h).
#include "cpu_relu2.h"

namespace llmc {

void relu2_forward(float* out, const float* inp, size_t n, int num_threads) {
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (size_t i = 0; i < n; i++) {
        const float r = inp[i] > 0.0f ? inp[i] : 0.0f;
        out[i] = r * r;
    }
}

void relu2_backward_inplace(float* dout, const float* pre, size_t n, int num_threads) {
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (size_t i = 0; i < n; i++) dout[i] *= pre[i] > 0.0f ? 2.0f * pre[i] : 0.0f;
}

}  // namespace llmc
