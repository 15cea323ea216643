// Fused classifier: softmax cross-entropy over the vocabulary and its gradient, one row per block at a time, in place.
//
// For row i (logits x, V real columns, Vp >= V stored columns, target y):
//   mx = max_{j<V} x_j;   S = sum_{j<V} exp(x_j - mx)
//   losses[i] = log(S) + mx - x_y                                        (written, =)
//   if write_dlogits:  x_j <- dloss * (exp(x_j - mx) / S - [j == y])  for j < V;   x_j <- 0 for V <= j < Vp
// Thread t handles the packs t, t + blockDim, ... of W columns (W = 8: 16-byte loads and stores, when Vp is a
// multiple of 8 and the row aligned; W = 1: the scalar path, chosen on the host) and keeps the first P in registers
// (RowSlice): rows up to 7 x 8 x 1024 = 57344 columns (GPT-2's 50304 included) are read from memory once and
// written once. Pass 1 is an online softmax: per pack, the max of its real columns; if it exceeds the thread's
// running max, the running sum is rescaled once by exp(old - new); then the pack's exponentials are added. The block
// combines the (max, sum) pairs in a fixed tree. Pass 2 computes the probabilities from the registers and overwrites
// the row (columns >= V, in the last packs, are masked). The probabilities are never stored.
//
// Two kernels run that per-row code (classifier_row), chosen on the host (classifier_launch):
// - fused_classifier_prefetch_kernel (the vector path when its buffer fits the device): one persistent block per SM
//   walks the rows r, r + grid, ... Its register packs arrive by cp.async in a shared-memory buffer; as soon as a
//   thread has moved row r's packs from there into registers it issues the copies of row r + grid into the same
//   slots, so the next row's 100 KB load overlaps this row's exponentials, reduction and stores (docs/cuda.md,
//   "Classifier"). Each thread copies and reads only its own slots, so the buffer needs no barrier.
// - fused_classifier_kernel: one block per row, the row loaded straight into registers (the scalar path, whose
//   2-byte elements cp.async cannot copy, and rows whose buffer exceeds the device's shared memory).
// Both give the same bits: the same threads hold the same packs and do the same arithmetic in the same order.
// The row code takes the logits through a transform (Logits): PlainLogits here, the identity, which compiles to the
// code without it; the speedrun's soft-cap (softcap_classifier.cuh) runs the same kernels' bodies with its own.
#pragma once

#include <cmath>

#include "common.cuh"
#include "device_limits.h"
#include "loop_cap.h"
#include "mma.cuh"

namespace llmc {

// Combine two partial (max, sum of exp(x - max)) pairs. Maxima start at -FLT_MAX (not -inf), so an empty partial
// contributes exp(-huge) = 0 and never produces inf - inf.
__device__ __forceinline__ void softmax_combine(float& m, float& s, float m2, float s2) {
    float mm = fmaxf(m, m2);
    s = s * expf(m - mm) + s2 * expf(m2 - mm);
    m = mm;
}

// The identity transform of the logits: c = z, dc/dz = 1 (llmc/backend.h's fused_classifier).
struct PlainLogits {
    __device__ __forceinline__ float operator()(float z) const { return z; }
    __device__ __forceinline__ float slope(float) const { return 1.0f; }
};

constexpr int kClassifierBlock = 1024;
constexpr int kClassifierRegPacks = 7;  // rows up to 7 x 8 x 1024 = 57344 columns in registers (64 registers at most)

// One row, once `slice` holds this thread's first P packs and reads any further ones from the row x in memory:
// pass 1, the block's (max, sum), the loss, pass 2. x_target (thread 0 only) is the transformed x[target], read
// before the block's first barrier of this row, so before any thread overwrites the row. smax / ssum: this row's
// __shared__ float[32] pair (the per-warp partials). The softmax is over c = logits(z); the gradient is taken back
// through it: dz = dc logits.slope(c).
template <int W, int P, class Logits>
__device__ __forceinline__ void classifier_row(RowSlice<bf16, W, P>& slice, bf16* x, float* loss, int target,
                                               float x_target, float dloss, size_t V, bool write_dlogits,
                                               const Logits& logits, float* smax, float* ssum) {
    const bool valid = target >= 0 && (size_t)target < V;  // an invalid target gives a NaN loss, not a wild read
    const unsigned num_real = (unsigned)V;
    float m = -3.402823466e38f, s = 0.0f;
    slice.for_each([&](int, unsigned j, const Pack<bf16, W>& p) {
        const unsigned col = j * W;
        float pm = -3.402823466e38f, c[W];
LLMC_UNROLL
        for (int e = 0; e < W; e++) {
            c[e] = logits(to_float(p[e]));
            if (col + e < num_real) pm = fmaxf(pm, c[e]);
        }
        if (pm > m) {
            s *= expf(m - pm);
            m = pm;
        }
LLMC_UNROLL
        for (int e = 0; e < W; e++)
            if (col + e < num_real) s += expf(c[e] - m);
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
    if (threadIdx.x == 0) *loss = valid ? logf(s) + m - x_target : NAN;
    if (!write_dlogits) return;
    const float inv = 1.0f / s;
    const unsigned tgt = (unsigned)target;
    slice.for_each([&](int, unsigned j, const Pack<bf16, W>& p) {
        Pack<bf16, W> d;
LLMC_UNROLL
        for (int e = 0; e < W; e++) {
            const unsigned col = j * W + e;
            const float c = logits(to_float(p[e]));
            float g = 0.0f;
            if (col < num_real) g = dloss * (expf(c - m) * inv - (col == tgt ? 1.0f : 0.0f)) * logits.slope(c);
            d[e] = to_bf16(g);
        }
        d.store(x + j * W);
    });
}

// The body of the one-block-per-row kernels (fused_classifier_kernel, and the soft-capped one).
template <int W, int P, class Logits>
__device__ __forceinline__ void classifier_block_row(bf16* logits, float* losses, const int* targets, float dloss,
                                                     size_t V, size_t Vp, bool write_dlogits, const Logits& lg) {
    __shared__ float smax[32], ssum[32];
    const size_t row = blockIdx.x;
    bf16* x = logits + row * Vp;
    const int target = targets[row];
    const bool valid = target >= 0 && (size_t)target < V;
    // Thread 0 reads x[target] before the reduction's barrier, so before anyone overwrites the row.
    const float x_target = threadIdx.x == 0 && valid ? lg(to_float(x[target])) : 0.0f;
    RowSlice<bf16, W, P> slice(x, (unsigned)(Vp / W), threadIdx.x, blockDim.x);
    classifier_row(slice, x, losses + row, target, x_target, dloss, V, write_dlogits, lg, smax, ssum);
}

template <int W, int P>
__global__ void __launch_bounds__(kClassifierBlock) fused_classifier_kernel(bf16* logits, float* losses, const int* targets,
                                                                float dloss, size_t V, size_t Vp, bool write_dlogits,
                                                                PlainLogits lg) {
    classifier_block_row<W, P>(logits, losses, targets, dloss, V, Vp, write_dlogits, lg);
}

// The copies of row x's register packs of this thread (packs threadIdx.x + k blockDim, k < P) into their slots of
// the buffer (slot j at buffer + j W), as one cp.async group.
template <int P>
__device__ __forceinline__ void classifier_prefetch(bf16* buffer, const bf16* x, unsigned packs) {
LLMC_UNROLL
    for (int k = 0; k < P; k++) {
        const unsigned j = threadIdx.x + k * blockDim.x;
        if (j < packs) cp_async_16(buffer + j * kPackBf16, x + j * kPackBf16, true);
    }
    cp_async_commit();
}

// Persistent blocks (grid <= N): block b does the rows b, b + grid, ... The buffer (dynamic shared memory) holds the
// register packs of one row: min(packs, P blockDim) slots of 16 bytes. Row r's packs beyond the registers (rows over
// P 8 blockDim columns) come from memory as in fused_classifier_kernel. One pair of (max, sum) partial slots serves
// every row: the barrier at the top of each row (below) also keeps a fast warp from writing row r + grid's partials
// before a slower warp has read row r's.
// The body of the persistent kernels (fused_classifier_prefetch_kernel, and the soft-capped one).
template <int P, class Logits>
__device__ __forceinline__ void classifier_prefetch_rows(bf16* logits, float* losses, const int* targets, float dloss,
                                                         size_t N, size_t V, size_t Vp, bool write_dlogits,
                                                         const Logits& lg) {
    constexpr int W = kPackBf16;
    __shared__ float smax[32], ssum[32];
    bf16* buffer = reinterpret_cast<bf16*>(dynamic_shared_floats());
    const unsigned packs = (unsigned)(Vp / W);
    size_t row = blockIdx.x;
    classifier_prefetch<P>(buffer, logits + row * Vp, packs);
    int target = targets[row];
    float x_target =
        threadIdx.x == 0 && target >= 0 && (size_t)target < V ? lg(to_float(logits[row * Vp + target])) : 0.0f;
    while (row < N) {
        const size_t next = row + gridDim.x;
        bf16* x = logits + row * Vp;
        cp_async_wait<0>();  // this thread's copies of row `row` have landed (it reads only its own slots)
        RowSlice<bf16, W, P> slice(buffer, packs, threadIdx.x, blockDim.x);
        slice.src = x;  // packs beyond the registers: from the row in memory
        // The slots just read are refilled with the next row. cp.async is not ordered after the thread's earlier
        // shared loads of the same slots (PTX: asynchronous copies are weak operations, ordered only by waits and
        // barriers), so the barrier makes those loads complete before any refill is issued. It also ends every
        // warp's reads of the previous row's partials before any warp writes this row's. One barrier per row of
        // several microseconds.
        __syncthreads();
        int target_next = 0;
        if (next < N) {
            classifier_prefetch<P>(buffer, logits + next * Vp, packs);
            target_next = targets[next];
        }
        classifier_row(slice, x, losses + row, target, x_target, dloss, V, write_dlogits, lg, smax, ssum);
        // The next row is untouched until this block reaches it: x[target] read now, used after its first barrier.
        if (next < N && threadIdx.x == 0 && target_next >= 0 && (size_t)target_next < V)
            x_target = lg(to_float(logits[next * Vp + target_next]));
        target = target_next;
        row = next;
    }
}

template <int P>
__global__ void __launch_bounds__(kClassifierBlock) fused_classifier_prefetch_kernel(
    bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V, size_t Vp, bool write_dlogits,
    PlainLogits lg) {
    classifier_prefetch_rows<P>(logits, losses, targets, dloss, N, V, Vp, write_dlogits, lg);
}

// The kernels of one transform: the plain ones here, the soft-capped ones in softcap_classifier.cuh.
template <class Logits>
struct ClassifierKernels;
template <>
struct ClassifierKernels<PlainLogits> {
    template <int W>
    static auto row() { return fused_classifier_kernel<W, kClassifierRegPacks>; }
    static auto prefetch() { return fused_classifier_prefetch_kernel<kClassifierRegPacks>; }
};

// Host: how fused_classifier runs on a device, chosen from the shape, the logits' alignment and the device's limits.
struct ClassifierLaunch {
    bool vector = false;    // W = 8 (16-byte packs); else the scalar path
    bool prefetch = false;  // fused_classifier_prefetch_kernel; else fused_classifier_kernel (one block per row)
    size_t block = 0;       // threads per block
    size_t grid = 0;        // blocks: N, or the persistent blocks of the prefetch kernel
    size_t smem = 0;        // dynamic shared memory of the prefetch kernel (its buffer), bytes
};

// Static shared memory of the prefetch kernel (two pairs of per-warp partials), counted against the same limits.
constexpr size_t kClassifierPrefetchStatic = 2 * 2 * 32 * sizeof(float);

// The buffer of one row's register packs: min(packs, P block) slots of 16 bytes (100,608 bytes at Vp = 50304).
inline size_t classifier_prefetch_bytes(size_t packs, size_t block) {
    const size_t slots = packs < kClassifierRegPacks * block ? packs : kClassifierRegPacks * block;
    return slots * 16;
}

// The launch for N rows of Vp logits at `logits` on a device with `sm_count` SMs and limits d: the prefetch kernel on
// the vector path when its buffer fits (grid: the blocks resident at once, at most N), else one block per row.
inline ClassifierLaunch classifier_launch(size_t N, size_t Vp, const bf16* logits, const DeviceLimits& d,
                                          int sm_count) {
    ClassifierLaunch L;
    L.vector = vector_ok(Vp, kPackBf16, logits);
    const size_t packs = L.vector ? Vp / kPackBf16 : Vp;
    L.block = packs >= kClassifierBlock ? kClassifierBlock : 32 * ceil_div(packs, 32);
    L.grid = N;
    if (!L.vector) return L;
    // Registers: __launch_bounds__(1024) gives at most 64 per thread, so 1024 threads per SM at least.
    const int by_registers = (int)(kClassifierBlock / L.block);
    const size_t smem = classifier_prefetch_bytes(packs, L.block);
    const int resident = resident_blocks(smem + kClassifierPrefetchStatic, by_registers, d);
    if (resident == 0 || sm_count <= 0) return L;
    const size_t blocks = loop_blocks_cap((size_t)sm_count * (size_t)resident);
    L.prefetch = true;
    L.grid = N < blocks ? N : blocks;
    L.smem = smem;
    return L;
}

// Runs `L` (from classifier_launch, or a test's variant of it) with the kernels of the transform lg; returns true when
// the vector path ran.
template <class Logits>
inline bool run_classifier(bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V, size_t Vp,
                           bool write_dlogits, const Logits& lg, const ClassifierLaunch& L, cudaStream_t stream) {
    if (N == 0) return true;
    if (V == 0 || V > Vp) fail("fused_classifier: need 0 < V <= Vp (V=%zu, Vp=%zu)", V, Vp);
    check_row_length("fused_classifier", Vp);
    if (L.prefetch) {
        if (!L.vector || L.grid == 0 || L.grid > N)
            fail("fused_classifier: the prefetch kernel needs the vector path and 0 < grid <= N (grid=%zu, N=%zu)",
                 L.grid, N);
        auto kernel = ClassifierKernels<Logits>::prefetch();
        allow_dynamic_shared(kernel, L.smem);
        LLMC_LAUNCH(kernel, grid_size(L.grid, 1), L.block, L.smem, stream, logits, losses, targets, dloss, N, V, Vp,
                    write_dlogits, lg);
        return true;
    }
    auto kernel = L.vector ? ClassifierKernels<Logits>::template row<kPackBf16>()
                           : ClassifierKernels<Logits>::template row<1>();
    LLMC_LAUNCH(kernel, grid_size(N, 1), L.block, 0, stream, logits, losses, targets, dloss, V, Vp, write_dlogits, lg);
    return L.vector;
}

inline bool fused_classifier(bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V,
                             size_t Vp, bool write_dlogits, const ClassifierLaunch& L, cudaStream_t stream) {
    return run_classifier(logits, losses, targets, dloss, N, V, Vp, write_dlogits, PlainLogits(), L, stream);
}

// The launch classifier_launch chooses for this device.
inline bool fused_classifier(bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V,
                             size_t Vp, bool write_dlogits, const DeviceLimits& d, int sm_count, cudaStream_t stream) {
    return fused_classifier(logits, losses, targets, dloss, N, V, Vp, write_dlogits,
                            classifier_launch(N, Vp, logits, d, sm_count), stream);
}

}  // namespace llmc
