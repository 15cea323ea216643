// GELU, tanh approximation (as GPT-2 and cuBLASLt's GELU epilogue):
//
//   gelu(x)  = 0.5 x (1 + tanh(u)),   u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//
// forward:  out = gelu(inp)                      (also the recomputation path of -r: the model calls it again)
// backward: dout *= gelu'(pre_gelu), in place   (used by matmul_backward before the matmuls: dout becomes the
//           gradient with respect to the pre-activation)
// Element-wise in fp32, rounded to bf16 once. A thread handles W = 8 elements (16-byte loads and stores) on the
// vector path, W = 1 on the scalar path (common.cuh).
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

template <int W>
__global__ void gelu_forward_kernel(bf16* __restrict__ out, const bf16* __restrict__ inp, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    float x[W];
    load_floats(x, inp + i);
LLMC_UNROLL
    for (int e = 0; e < W; e++) x[e] = gelu_f(x[e]);
    store_floats(out + i, x);
}

template <int W>
__global__ void gelu_backward_inplace_kernel(bf16* dout, const bf16* __restrict__ pre_gelu, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    float d[W], x[W];
    load_floats(d, dout + i);
    load_floats(x, pre_gelu + i);
LLMC_UNROLL
    for (int e = 0; e < W; e++) d[e] *= gelu_grad_f(x[e]);
    store_floats(dout + i, d);
}

// Both return true when the vector path ran (W = 8: every pointer 16-byte aligned and n a multiple of 8).
inline bool gelu_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {
    if (n == 0) return true;
    return launch_elementwise(vector_ok(n, kPackBf16, out, inp), gelu_forward_kernel<kPackBf16>,
                              gelu_forward_kernel<1>, kPackBf16, n, stream, out, inp, n);
}
inline bool gelu_backward_inplace(bf16* dout, const bf16* pre_gelu, size_t n, cudaStream_t stream) {
    if (n == 0) return true;
    return launch_elementwise(vector_ok(n, kPackBf16, dout, pre_gelu), gelu_backward_inplace_kernel<kPackBf16>,
                              gelu_backward_inplace_kernel<1>, kPackBf16, n, stream, dout, pre_gelu, n);
}

}  // namespace llmc
