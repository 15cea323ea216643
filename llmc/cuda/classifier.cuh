// Fused classifier: softmax cross-entropy over the vocabulary and its gradient, one block per row, in place.
//
// For row i (logits x, V real columns, Vp >= V stored columns, target y):
//   mx = max_{j<V} x_j;   S = sum_{j<V} exp(x_j - mx)
//   losses[i] = log(S) + mx - x_y                                        (written, =)
//   if write_dlogits:  x_j <- dloss * (exp(x_j - mx) / S - [j == y])  for j < V;   x_j <- 0 for V <= j < Vp
// Thread t handles the packs t, t + blockDim, ... of W columns (W = 8: 16-byte loads and stores, when Vp is a
// multiple of 8 and the row aligned; W = 1: the scalar path, chosen on the host) and keeps the first P in registers
// (RowSlice): rows up to 8 x 8 x 1024 = 65536 columns (GPT-2's 50304 included) are read from memory once and
// written once. Pass 1 is an online softmax: per pack, the max of its real columns; if it exceeds the thread's
// running max, the running sum is rescaled once by exp(old - new); then the pack's exponentials are added. The block
// combines the (max, sum) pairs in a fixed tree. Pass 2 computes the probabilities from the registers and overwrites
// the row (columns >= V, in the last packs, are masked). The probabilities are never stored.
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

constexpr int kClassifierBlock = 1024;
constexpr int kClassifierRegPacks = 7;  // rows up to 7 x 8 x 1024 = 57344 columns in registers (64 registers at most)

template <int W, int P>
__global__ void __launch_bounds__(kClassifierBlock) fused_classifier_kernel(bf16* logits, float* losses, const int* targets,
                                                                float dloss, size_t V, size_t Vp, bool write_dlogits) {
    __shared__ float smax[32], ssum[32];
    const size_t row = blockIdx.x;
    bf16* x = logits + row * Vp;
    const int target = targets[row];
    const bool valid = target >= 0 && (size_t)target < V;  // an invalid target gives a NaN loss, not a wild read
    // Thread 0 reads x[target] before the reduction's barrier, so before anyone overwrites the row.
    const float x_target = threadIdx.x == 0 && valid ? to_float(x[target]) : 0.0f;
    RowSlice<bf16, W, P> slice(x, (unsigned)(Vp / W), threadIdx.x, blockDim.x);
    const unsigned num_real = (unsigned)V;
    float m = -3.402823466e38f, s = 0.0f;
    slice.for_each([&](int, unsigned j, const Pack<bf16, W>& p) {
        const unsigned col = j * W;
        float pm = -3.402823466e38f;
LLMC_UNROLL
        for (int e = 0; e < W; e++)
            if (col + e < num_real) pm = fmaxf(pm, to_float(p[e]));
        if (pm > m) {
            s *= expf(m - pm);
            m = pm;
        }
LLMC_UNROLL
        for (int e = 0; e < W; e++)
            if (col + e < num_real) s += expf(to_float(p[e]) - m);
    });
    slice.keep_packed();
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
    if (threadIdx.x == 0) losses[row] = valid ? logf(s) + m - x_target : NAN;
    if (!write_dlogits) return;
    const float inv = 1.0f / s;
    const unsigned tgt = (unsigned)target;
    slice.for_each([&](int, unsigned j, const Pack<bf16, W>& p) {
        Pack<bf16, W> d;
LLMC_UNROLL
        for (int e = 0; e < W; e++) {
            const unsigned col = j * W + e;
            float g = 0.0f;
            if (col < num_real) g = dloss * (expf(to_float(p[e]) - m) * inv - (col == tgt ? 1.0f : 0.0f));
            d[e] = to_bf16(g);
        }
        d.store(x + j * W);
    });
}

// Returns true when the vector path ran (Vp a multiple of 8 and the logits 16-byte aligned).
inline bool fused_classifier(bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V,
                             size_t Vp, bool write_dlogits, cudaStream_t stream) {
    if (N == 0) return true;
    if (V == 0 || V > Vp) fail("fused_classifier: need 0 < V <= Vp (V=%zu, Vp=%zu)", V, Vp);
    check_row_length("fused_classifier", Vp);
    const bool vec = vector_ok(Vp, kPackBf16, logits);
    const size_t packs = vec ? Vp / kPackBf16 : Vp;
    const size_t block = packs >= kClassifierBlock ? kClassifierBlock : 32 * ceil_div(packs, 32);
    auto kernel = vec ? fused_classifier_kernel<kPackBf16, kClassifierRegPacks>
                      : fused_classifier_kernel<1, kClassifierRegPacks>;
    LLMC_LAUNCH(kernel, grid_size(N, 1), block, 0, stream, logits, losses, targets, dloss, V, Vp, write_dlogits);
    return vec;
}

}  // namespace llmc
