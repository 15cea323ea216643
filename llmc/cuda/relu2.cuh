// ReLU squared, the speedrun MLP's activation (the CPU op is llmc/cpu/cpu_relu2.h):
//
//   forward:  out = max(x, 0)^2
//   backward: dout *= 2 max(pre, 0), in place (dout becomes the gradient with respect to the pre-activation, as the
//             GELU backward of gelu.cuh)
//
// The element-wise kernels are activation.cuh's, as GELU's. cuBLASLt has no epilogue for it: its activation
// epilogues are RELU (with a bit mask as AUX, and DRELU multiplying by that mask) and GELU; none squares, and the
// backward needs the factor 2 max(x, 0), not a 0/1 mask. So the matmul writes the pre-activation (kept for the
// backward) and this pass follows, as on GELU's fallback path (matmul.cuh).
#pragma once

#include "activation.cuh"

namespace llmc {

struct Relu2 {
    static __device__ __forceinline__ float value(float x) {
        const float r = fmaxf(x, 0.0f);
        return r * r;
    }
    static __device__ __forceinline__ float grad(float x) { return 2.0f * fmaxf(x, 0.0f); }
};

// Both return true when the vector path ran (activation.cuh).
inline bool relu2_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {
    return activation_forward<Relu2>(out, inp, n, stream);
}
inline bool relu2_backward_inplace(bf16* dout, const bf16* pre, size_t n, cudaStream_t stream) {
    return activation_backward_inplace<Relu2>(dout, pre, n, stream);
}

}  // namespace llmc
