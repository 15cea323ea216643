// The fused classifier with the speedrun's logit soft-cap: the kernels of classifier.cuh (the same rows, threads,
// registers, prefetch and launch choice) on the capped logits
//
//   c = cap tanh(z / cap)          softmax cross-entropy over c:  losses[i] = log sum_{j<V} exp(c_j - max) - (c_y - max)
//   with write_dlogits:  z_j <- dloss (softmax(c)_j - [j == y]) (1 - (c_j / cap)^2)   (dc/dz), 0 in padded columns
//
// The logits z arrive in bf16 (the lm_head GEMM's output); the cap, the softmax and the gradient are fp32, and only
// the gradient is rounded to bf16. The CPU op is llmc/cpu/cpu_classifier.h (softcap_classifier). tanhf is CUDA's
// accurate one (2 ulp): each logit costs two tanh (one per pass) besides the two exp of the plain classifier.
#pragma once

#include "classifier.cuh"

namespace llmc {

struct SoftCapLogits {
    float cap, inv_cap;
    __device__ __forceinline__ float operator()(float z) const { return cap * tanhf(z * inv_cap); }
    __device__ __forceinline__ float slope(float c) const {
        const float t = c * inv_cap;
        return 1.0f - t * t;
    }
};

template <int W, int P>
__global__ void __launch_bounds__(kClassifierBlock) softcap_classifier_kernel(bf16* logits, float* losses,
                                                                              const int* targets, float dloss,
                                                                              size_t V, size_t Vp, bool write_dlogits,
                                                                              SoftCapLogits lg) {
    classifier_block_row<W, P>(logits, losses, targets, dloss, V, Vp, write_dlogits, lg);
}

template <int P>
__global__ void __launch_bounds__(kClassifierBlock) softcap_classifier_prefetch_kernel(
    bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V, size_t Vp, bool write_dlogits,
    SoftCapLogits lg) {
    classifier_prefetch_rows<P>(logits, losses, targets, dloss, N, V, Vp, write_dlogits, lg);
}

template <>
struct ClassifierKernels<SoftCapLogits> {
    template <int W>
    static auto row() { return softcap_classifier_kernel<W, kClassifierRegPacks>; }
    static auto prefetch() { return softcap_classifier_prefetch_kernel<kClassifierRegPacks>; }
};

// Runs launch L (classifier_launch's choice, or a test's); returns true when the vector path ran. cap > 0.
inline bool softcap_classifier(bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V,
                               size_t Vp, bool write_dlogits, float cap, const ClassifierLaunch& L,
                               cudaStream_t stream) {
    if (!(cap > 0.0f)) fail("softcap_classifier: the cap %g must be > 0", cap);
    return run_classifier(logits, losses, targets, dloss, N, V, Vp, write_dlogits, SoftCapLogits{cap, 1.0f / cap}, L,
                          stream);
}

// The launch classifier_launch chooses for this device (the plain classifier's).
inline bool softcap_classifier(bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V,
                               size_t Vp, bool write_dlogits, float cap, const DeviceLimits& d, int sm_count,
                               cudaStream_t stream) {
    return softcap_classifier(logits, losses, targets, dloss, N, V, Vp, write_dlogits, cap,
                              classifier_launch(N, Vp, logits, d, sm_count), stream);
}

}  // namespace llmc
