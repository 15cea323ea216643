// ReLU squared, the speedrun MLP's activation (the CPU op is llmc/cpu/cpu_relu2.h):
//
//   forward:  out = max(x, 0)^2
//   backward: dout *= 2 max(pre, 0), in place (dout becomes the gradient with respect to the pre-activation, as the
//             GELU backward of gelu.cuh)
//
// Element-wise in fp32, rounded to bf16 once; W = 8 elements per thread (16-byte accesses) on the vector path, W = 1
// on the scalar path (common.cuh). cuBLASLt has no epilogue for it: its activation epilogues are RELU (with a bit
// mask as AUX, and DRELU multiplying by that mask) and GELU; none squares, and the backward needs the factor
// 2 max(x, 0), not a 0/1 mask. So the matmul writes the pre-activation (kept for the backward) and this pass
// follows, as on GELU's fallback path (matmul.cuh).
#pragma once

#include "common.cuh"

namespace llmc {

template <int W>
__global__ void relu2_forward_kernel(bf16* __restrict__ out, const bf16* __restrict__ inp, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    float x[W];
    load_floats(x, inp + i);
LLMC_UNROLL
    for (int e = 0; e < W; e++) {
        const float r = fmaxf(x[e], 0.0f);
        x[e] = r * r;
    }
    store_floats(out + i, x);
}

template <int W>
__global__ void relu2_backward_inplace_kernel(bf16* dout, const bf16* __restrict__ pre, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    float d[W], x[W];
    load_floats(d, dout + i);
    load_floats(x, pre + i);
LLMC_UNROLL
    for (int e = 0; e < W; e++) d[e] *= 2.0f * fmaxf(x[e], 0.0f);
    store_floats(dout + i, d);
}

// Both return true when the vector path ran (W = 8: every pointer 16-byte aligned and n a multiple of 8).
inline bool relu2_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {
    if (n == 0) return true;
    return launch_elementwise(vector_ok(n, kPackBf16, out, inp), relu2_forward_kernel<kPackBf16>,
                              relu2_forward_kernel<1>, kPackBf16, n, stream, out, inp, n);
}
inline bool relu2_backward_inplace(bf16* dout, const bf16* pre, size_t n, cudaStream_t stream) {
    if (n == 0) return true;
    return launch_elementwise(vector_ok(n, kPackBf16, dout, pre), relu2_backward_inplace_kernel<kPackBf16>,
                              relu2_backward_inplace_kernel<1>, kPackBf16, n, stream, dout, pre, n);
}

}  // namespace llmc
