// Element-wise activations on bf16, written once for every activation function Act (gelu.cuh, relu2.cuh):
//
//   forward:  out = Act::value(inp)
//   backward: dout *= Act::grad(pre), in place (dout becomes the gradient with respect to the pre-activation)
//
// In fp32, rounded to bf16 once. A thread handles W = 8 elements (16-byte loads and stores) on the vector path, W = 1
// on the scalar path (common.cuh).
#pragma once

#include "common.cuh"

namespace llmc {

template <int W, class Act>
__global__ void activation_forward_kernel(bf16* __restrict__ out, const bf16* __restrict__ inp, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    float x[W];
    load_floats(x, inp + i);
LLMC_UNROLL
    for (int e = 0; e < W; e++) x[e] = Act::value(x[e]);
    store_floats(out + i, x);
}

template <int W, class Act>
__global__ void activation_backward_inplace_kernel(bf16* dout, const bf16* __restrict__ pre, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    float d[W], x[W];
    load_floats(d, dout + i);
    load_floats(x, pre + i);
LLMC_UNROLL
    for (int e = 0; e < W; e++) d[e] *= Act::grad(x[e]);
    store_floats(dout + i, d);
}

// Both return true when the vector path ran (W = 8: every pointer 16-byte aligned and n a multiple of 8).
template <class Act>
inline bool activation_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {
    if (n == 0) return true;
    return launch_elementwise(vector_ok(n, kPackBf16, out, inp), activation_forward_kernel<kPackBf16, Act>,
                              activation_forward_kernel<1, Act>, kPackBf16, n, stream, out, inp, n);
}
template <class Act>
inline bool activation_backward_inplace(bf16* dout, const bf16* pre, size_t n, cudaStream_t stream) {
    if (n == 0) return true;
    return launch_elementwise(vector_ok(n, kPackBf16, dout, pre), activation_backward_inplace_kernel<kPackBf16, Act>,
                              activation_backward_inplace_kernel<1, Act>, kPackBf16, n, stream, dout, pre, n);
}

}  // namespace llmc
