// Fused classifier: softmax cross-entropy over the vocabulary and its gradient, one block per row, in place.
//
// For row i (logits x, V real columns, Vp >= V stored columns, target y):
//   mx = max_{j<V} x_j;   S = sum_{j<V} exp(x_j - mx)
//   losses[i] = log(S) + mx - x_y                                        (written, =)
//   if write_dlogits:  x_j <- dloss * (exp(x_j - mx) / S - [j == y])  for j < V;   x_j <- 0 for V <= j < Vp
// The row is read twice (pass 1: an online max / sum in fp32, each thread rescaling its running sum when its max
// grows; pass 2: the gradient, which overwrites each element after its thread has read it). The probabilities are
// computed once, in pass 2, and never stored. The block reduction combines (max, sum) pairs in a fixed tree.
#pragma once

#include <cmath>

#include "common.cuh"

namespace llmc {

// Combine two partial (max, sum of exp(x - max)) pairs. Maxima start at -FLT_MAX (not -inf), so an empty partial
// contributes exp(-huge) = 0 and never produces inf - inf.
__device__ __forceinline__ void softmax_combine(float& m, float& s, float m2, float s2) {
    float mm = fmaxf(m, m2);
    s = s * expf(m - mm) + s2 * expf(m2 - mm);
    m = mm;
}

__global__ void __launch_bounds__(1024) fused_classifier_kernel(bf16* logits, float* losses, const int* targets,
                                                                float dloss, size_t V, size_t Vp, bool write_dlogits) {
    __shared__ float smax[32], ssum[32];
    const size_t row = blockIdx.x;
    bf16* x = logits + row * Vp;
    float m = -3.402823466e38f, s = 0.0f;
    for (size_t j = threadIdx.x; j < V; j += blockDim.x) {
        float v = to_float(x[j]);
        if (v > m) {
            s *= expf(m - v);
            m = v;
        }
        s += expf(v - m);
    }
    // Warp tree, then the per-warp partials in shared memory, then warp tree again (every warp computes the total).
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, off), s2 = __shfl_xor_sync(0xffffffffu, s, off);
        softmax_combine(m, s, m2, s2);
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    if (lane == 0) {
        smax[warp] = m;
        ssum[warp] = s;
    }
    __syncthreads();
    m = lane < num_warps ? smax[lane] : -3.402823466e38f;
    s = lane < num_warps ? ssum[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, off), s2 = __shfl_xor_sync(0xffffffffu, s, off);
        softmax_combine(m, s, m2, s2);
    }
    const int target = targets[row];
    const bool valid = target >= 0 && (size_t)target < V;  // an invalid target gives a NaN loss, not a wild read
    if (threadIdx.x == 0) losses[row] = valid ? logf(s) + m - to_float(x[target]) : NAN;
    if (!write_dlogits) return;
    // Thread 0 read x[target] above; make sure that read happened before anyone overwrites the row.
    __syncthreads();
    const float inv = 1.0f / s;
    for (size_t j = threadIdx.x; j < Vp; j += blockDim.x) {
        float g = 0.0f;
        if (j < V) g = dloss * (expf(to_float(x[j]) - m) * inv - (j == (size_t)target ? 1.0f : 0.0f));
        x[j] = to_bf16(g);
    }
}

inline void fused_classifier(bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V,
                             size_t Vp, bool write_dlogits, cudaStream_t stream) {
    if (N == 0) return;
    if (V == 0 || V > Vp) fail("fused_classifier: need 0 < V <= Vp (V=%zu, Vp=%zu)", V, Vp);
    const size_t block = V >= 1024 ? 1024 : 32 * ceil_div(V, 32);
    LLMC_LAUNCH(fused_classifier_kernel, grid_size(N, 1), block, 0, stream, logits, losses, targets, dloss, V, Vp,
                write_dlogits);
}

}  // namespace llmc
