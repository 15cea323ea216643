// CPU: Muon's update of one matrix (the math is in cpu_muon.h).
#include "cpu_muon.h"

#include "../speedrun_recipe.h"
#include "cpu_newton_schulz.h"

namespace llmc {

size_t muon_workspace_floats(size_t rows, size_t cols) {
    return rows * cols + newton_schulz_workspace_floats(rows, cols);
}

void muon_update(float* param, float* momentum_buf, const float* grad, size_t rows, size_t cols, float lr, float mu,
                 bool nesterov, float grad_scale, float* workspace, int num_threads) {
    const size_t n = rows * cols;
    float* u = workspace;
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (size_t i = 0; i < n; i++) {
        const float g = grad_scale * grad[i];
        const float buf = mu * momentum_buf[i] + g;
        momentum_buf[i] = buf;
        u[i] = nesterov ? g + mu * buf : buf;
    }
    newton_schulz(u, rows, cols, workspace + n);
    const float step = lr * muon_update_scale(rows, cols);
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (size_t i = 0; i < n; i++) param[i] -= step * u[i];
}

}  // namespace llmc
