// GELU, tanh approximation (as GPT-2 and cuBLASLt's GELU epilogue):
//
//   gelu(x)  = 0.5 x (1 + tanh(u)),   u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//
// forward:  out = gelu(inp)                      (also the recomputation path of -r: the model calls it again)
// backward: dout *= gelu'(pre_gelu), in place   (used by matmul_backward before the matmuls: dout becomes the
//           gradient with respect to the pre-activation)
// Element-wise in fp32, rounded to bf16 once.
#pragma once

#include "common.cuh"

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

__global__ void gelu_forward_kernel(bf16* out, const bf16* inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = to_bf16(gelu_f(to_float(inp[i])));
}

__global__ void gelu_backward_inplace_kernel(bf16* dout, const bf16* pre_gelu, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dout[i] = to_bf16(to_float(dout[i]) * gelu_grad_f(to_float(pre_gelu[i])));
}

inline void gelu_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LLMC_LAUNCH(gelu_forward_kernel, grid_size(n, 256), 256, 0, stream, out, inp, n);
}
inline void gelu_backward_inplace(bf16* dout, const bf16* pre_gelu, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LLMC_LAUNCH(gelu_backward_inplace_kernel, grid_size(n, 256), 256, 0, stream, dout, pre_gelu, n);
}

}  // namespace llmc
