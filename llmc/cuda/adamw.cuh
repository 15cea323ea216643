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

// A thread updates W consecutive elements: W = 8 on the vector path (16-byte accesses: one for the bf16 params, two
// for each fp32 array), W = 1 on the scalar path.
template <int W>
__global__ void adamw_kernel(bf16* __restrict__ params, float* __restrict__ master, const float* __restrict__ grads,
                             float* __restrict__ m, float* __restrict__ v, size_t n, float lr, float beta1,
                             float beta2, float eps, float weight_decay, float grad_scale, float bias_correction1,
                             float bias_correction2, uint32_t seed, size_t seed_offset) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    float g[W], mi[W], vi[W], w[W];
    load_floats(g, grads + i);
    load_floats(mi, m + i);
    load_floats(vi, v + i);
    load_floats(w, master + i);
    Pack<bf16, W> p;  // the updated parameters, stochastically rounded
LLMC_UNROLL
    for (int e = 0; e < W; e++) {
        const float ge = grad_scale * g[e];
        mi[e] = beta1 * mi[e] + (1.0f - beta1) * ge;
        vi[e] = beta2 * vi[e] + (1.0f - beta2) * ge * ge;
        const float mhat = mi[e] / bias_correction1, vhat = vi[e] / bias_correction2;
        w[e] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * w[e]);
        p[e] = stochastic_round_bf16(w[e], hash_index(seed, seed_offset + i + e));
    }
    store_floats(m + i, mi);
    store_floats(v + i, vi);
    store_floats(master + i, w);
    p.store(params + i);
}

// Returns true when the vector path ran.
inline bool adamw_update(bf16* params, float* master, const float* grads, float* m, float* v, size_t n, float lr,
                         float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t,
                         uint32_t seed, size_t seed_offset, cudaStream_t stream) {
    if (n == 0) return true;
    if (t < 1) fail("adamw_update: step t=%d must be >= 1", t);
    // Bias corrections in double on the host: 1 - beta^t loses digits in fp32 for beta2 = 0.999 and small t.
    float bc1 = (float)(1.0 - std::pow((double)beta1, t)), bc2 = (float)(1.0 - std::pow((double)beta2, t));
    return launch_elementwise(vector_ok(n, kPackBf16, params, master, grads, m, v), adamw_kernel<kPackBf16>,
                              adamw_kernel<1>, kPackBf16, n, stream, params, master, grads, m, v, n, lr, beta1, beta2,
                              eps, weight_decay, grad_scale, bc1, bc2, seed, seed_offset);
}

}  // namespace llmc
