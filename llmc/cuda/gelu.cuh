// GELU, tanh approximation (as GPT-2 and cuBLASLt's GELU epilogue):
//
//   gelu(x)  = 0.5 x (1 + tanh(u)),   u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//
// forward:  out = gelu(inp)                      (also the recomputation path of -r: the model calls it again)
// backward: dout *= gelu'(pre_gelu), in place   (used by matmul_backward before the matmuls: dout becomes the
//           gradient with respect to the pre-activation)
// The element-wise kernels are activation.cuh's.
#pragma once

#include "activation.cuh"

namespace llmc {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

__device__ __forceinline__ float gelu_f(float x) {
    float u = kGeluScale * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
__device__ __forceinline__ float gelu_grad_f(float x) {
    float u = kGeluScale * (x + 0.044715f * x * x * x);
    float t = tanhf(u);
    float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

struct Gelu {
    static __device__ __forceinline__ float value(float x) { return gelu_f(x); }
    static __device__ __forceinline__ float grad(float x) { return gelu_grad_f(x); }
};

// Both return true when the vector path ran (activation.cuh).
inline bool gelu_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {
    return activation_forward<Gelu>(out, inp, n, stream);
}
inline bool gelu_backward_inplace(bf16* dout, const bf16* pre_gelu, size_t n, cudaStream_t stream) {
    return activation_backward_inplace<Gelu>(dout, pre_gelu, n, stream);
}

}  // namespace llmc
