// CPU backend: the AdamW update (PyTorch semantics: decoupled weight decay, bias corrections with the 1-based step t).
//
//   g = grad_scale * grad;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   master -= lr * (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * master);  params = master
//
// Each element is read before it is written, so params may alias master (act_t = float).
#include "cpu_backend.h"

#include <cmath>

#include "../error.h"

namespace llmc {

void CpuBackend::adamw_update(act_t* params, float* master, const float* grads, float* m, float* v, size_t n,
                              float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                              int t, uint32_t seed, size_t seed_offset) {
    if (t < 1) fail("adamw_update: step t=%d must be >= 1 (it is 1-based)", t);
    const float bc1 = (float)(1.0 - std::pow((double)beta1, t));
    const float bc2 = (float)(1.0 - std::pow((double)beta2, t));
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < n; i++) {
        const float g = grad_scale * grads[i];
        const float mi = beta1 * m[i] + (1.0f - beta1) * g;
        const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        const float mhat = mi / bc1, vhat = vi / bc2;
        const float p = master[i];
        const float updated = p - lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * p);
        m[i] = mi;
        v[i] = vi;
        master[i] = updated;
        params[i] = updated;
    }
}

}  // namespace llmc
