// AdamW on fp32 master weights, writing the bf16 parameters by stochastic rounding (PyTorch semantics, decoupled
// weight decay; t is the 1-based step):
//   g = grad_scale * grad
//   m = beta1 m + (1 - beta1) g;          v = beta2 v + (1 - beta2) g^2
//   master -= lr * ( (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay * master )
//   param = stochastic_round_bf16(master, hash(seed, seed_offset + i))
// The random bits depend only on (seed, seed_offset + element index), so the result is reproducible and the same on
// every rank; the caller derives the seed from the step and the tensor and passes the element's offset inside its
// tensor, so the bits do not depend on how the tensor is cut into shards (any world size rounds alike). Stochastic rounding keeps small updates from being lost to
// bf16's 8-bit mantissa on average (round to nearest would drop any update below half an ulp every time).
#pragma once

#include <cmath>

#include "common.cuh"

namespace llmc {

__global__ void adamw_kernel(bf16* params, float* master, const float* grads, float* m, float* v, size_t n, float lr,
                             float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                             float bias_correction1, float bias_correction2, uint32_t seed, size_t seed_offset) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = grad_scale * grads[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / bias_correction1, vhat = vi / bias_correction2;
    float w = master[i];
    w -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * w);
    master[i] = w;
    params[i] = stochastic_round_bf16(w, hash_index(seed, seed_offset + i));
}

inline void adamw_update(bf16* params, float* master, const float* grads, float* m, float* v, size_t n, float lr,
                         float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t,
                         uint32_t seed, size_t seed_offset, cudaStream_t stream) {
    if (n == 0) return;
    if (t < 1) fail("adamw_update: step t=%d must be >= 1", t);
    // Bias corrections in double on the host: 1 - beta^t loses digits in fp32 for beta2 = 0.999 and small t.
    float bc1 = (float)(1.0 - std::pow((double)beta1, t)), bc2 = (float)(1.0 - std::pow((double)beta2, t));
    LLMC_LAUNCH(adamw_kernel, grid_size(n, 256), 256, 0, stream, params, master, grads, m, v, n, lr, beta1, beta2, eps,
                weight_decay, grad_scale, bc1, bc2, seed, seed_offset);
}

}  // namespace llmc
