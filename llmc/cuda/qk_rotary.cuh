// The speedrun attention's QK-norm and rotary embeddings, in place on the q and k parts of qkv (B, T, 3C) (the CPU op,
// with the formulas, is llmc/cpu/cpu_qk_rotary.h). For every head vector x (hs channels) of q and k at position t:
//
//   forward:  r = 1 / sqrt(mean(x^2) + eps);  n = x r;  y_i = n_i cos + n_{i+h} sin,  y_{i+h} = n_{i+h} cos - n_i sin
//             (i < h = hs/2, angle t theta_i from the fp32 table of llmc/rotary_table.h); x <- y; rstd[b t, head] = r
//   backward: g = R^T dy, n = R^T y (the stored output turned back), dx = r (g - n mean(g n)), in place on dqkv
//
// One block per position (b, t). Its threads take the position's "pair packs": W channels of the first half of a
// head with the W channels hs/2 further on that they turn with, 2 NH hs / (2 W) = C / W of them for q and k together
// (W = 8: 16-byte accesses when hs is a multiple of 16 and the pointers are aligned; W = 1: the scalar path). Thread
// j has pair packs j, j + blockDim, ... (one for every GPT-2 shape on the vector path: 96 threads at C = 768, 200 at
// 1600) and keeps its first in registers; blocks of at most 256 threads, so that a thread may use up to 255 registers
// (the backward holds four packs and eight W-wide rows of floats). The per-head sums go through shared memory: each
// pair pack writes its partial sum, and after the barrier every thread of a head adds that head's hs / (2 W)
// partials in index order, so all of them get the same sum and the result does not depend on the thread order. The
// position's rotary row is read from the table (L2-resident: T hs floats, 512 KB at T = 1024, hs = 128).
#pragma once

#include "common.cuh"
#include "../speedrun_recipe.h"

namespace llmc {

constexpr int kQkRotaryMaxBlock = 256;  // one pass for C <= 2048 on the vector path; registers to spare
constexpr size_t kQkRotaryMaxPairPacks = 12288;  // 48 KiB of partial sums (the scalar path at C <= 12288)

// The geometry of one position's pair packs.
struct QkPairs {
    unsigned hs, half, per_head;  // channels per head, half of them, pair packs per head
    __device__ __forceinline__ unsigned head(unsigned j) const { return j / per_head; }
    // Offset of pair pack j's first pack inside the position's qkv row (q heads then k heads, contiguous).
    __device__ __forceinline__ unsigned offset(unsigned j, int W) const {
        return head(j) * hs + (j % per_head) * W;
    }
    // The head's sum of the partials, in index order (the same for every thread of the head).
    __device__ __forceinline__ float head_sum(const float* partial, unsigned j) const {
        float s = 0.0f;
        const unsigned first = head(j) * per_head;
        for (unsigned q = first; q < first + per_head; q++) s += partial[q];
        return s;
    }
};

template <int W>
__global__ void __launch_bounds__(kQkRotaryMaxBlock)
    qk_norm_rotary_forward_kernel(bf16* qkv, float* __restrict__ rstd, const float* __restrict__ table, size_t T,
                                  size_t C, size_t NH) {
    float* partial = dynamic_shared_floats();
    const QkPairs g{(unsigned)(C / NH), (unsigned)(C / NH / 2), (unsigned)(C / NH / 2 / W)};
    const unsigned pairs = (unsigned)(C / W);
    bf16* row = qkv + (size_t)blockIdx.x * 3 * C;
    const float* angles = table + ((size_t)blockIdx.x % T) * g.hs;
    Pack<bf16, W> first_a, first_b;
    for (unsigned j = threadIdx.x; j < pairs; j += blockDim.x) {
        const bf16* x = row + g.offset(j, W);
        const Pack<bf16, W> a = Pack<bf16, W>::load(x), b = Pack<bf16, W>::load(x + g.half);
        if (j == threadIdx.x) first_a = a, first_b = b;
        float s = 0.0f;
LLMC_UNROLL
        for (int e = 0; e < W; e++) s += to_float(a[e]) * to_float(a[e]) + to_float(b[e]) * to_float(b[e]);
        partial[j] = s;
    }
    __syncthreads();
    for (unsigned j = threadIdx.x; j < pairs; j += blockDim.x) {
        bf16* x = row + g.offset(j, W);
        const bool held = j == threadIdx.x;
        const Pack<bf16, W> a = held ? first_a : Pack<bf16, W>::load(x),
                            b = held ? first_b : Pack<bf16, W>::load(x + g.half);
        const float r = rsqrtf(g.head_sum(partial, j) / (float)g.hs + kRmsNormEps);
        float c[W], s[W], y1[W], y2[W];
        load_floats(c, angles + (j % g.per_head) * W);
        load_floats(s, angles + g.half + (j % g.per_head) * W);
LLMC_UNROLL
        for (int e = 0; e < W; e++) {
            const float n1 = to_float(a[e]) * r, n2 = to_float(b[e]) * r;
            y1[e] = n1 * c[e] + n2 * s[e];
            y2[e] = n2 * c[e] - n1 * s[e];
        }
        store_floats(x, y1);
        store_floats(x + g.half, y2);
        if (j % g.per_head == 0) rstd[(size_t)blockIdx.x * 2 * NH + g.head(j)] = r;
    }
}

// g = R^T dy and n = R^T y for one pair pack (R^T: the rotation by -t theta).
template <int W>
__device__ __forceinline__ void turn_back(float (&g1)[W], float (&g2)[W], float (&n1)[W], float (&n2)[W],
                                          const Pack<bf16, W>& dy1, const Pack<bf16, W>& dy2,
                                          const Pack<bf16, W>& y1, const Pack<bf16, W>& y2, const float* angles,
                                          unsigned half, unsigned p) {
    float c[W], s[W];
    load_floats(c, angles + p * W);
    load_floats(s, angles + half + p * W);
LLMC_UNROLL
    for (int e = 0; e < W; e++) {
        g1[e] = to_float(dy1[e]) * c[e] - to_float(dy2[e]) * s[e];
        g2[e] = to_float(dy2[e]) * c[e] + to_float(dy1[e]) * s[e];
        n1[e] = to_float(y1[e]) * c[e] - to_float(y2[e]) * s[e];
        n2[e] = to_float(y2[e]) * c[e] + to_float(y1[e]) * s[e];
    }
}

template <int W>
__global__ void __launch_bounds__(kQkRotaryMaxBlock)
    qk_norm_rotary_backward_kernel(bf16* dqkv, const bf16* __restrict__ qkv, const float* __restrict__ rstd,
                                   const float* __restrict__ table, size_t T, size_t C, size_t NH) {
    float* partial = dynamic_shared_floats();
    const QkPairs g{(unsigned)(C / NH), (unsigned)(C / NH / 2), (unsigned)(C / NH / 2 / W)};
    const unsigned pairs = (unsigned)(C / W);
    const size_t base = (size_t)blockIdx.x * 3 * C;
    const float* angles = table + ((size_t)blockIdx.x % T) * g.hs;
    Pack<bf16, W> held[4];  // dy1, dy2, y1, y2 of the thread's first pair pack
    for (unsigned j = threadIdx.x; j < pairs; j += blockDim.x) {
        const size_t o = base + g.offset(j, W);
        const Pack<bf16, W> d1 = Pack<bf16, W>::load(dqkv + o), d2 = Pack<bf16, W>::load(dqkv + o + g.half),
                            v1 = Pack<bf16, W>::load(qkv + o), v2 = Pack<bf16, W>::load(qkv + o + g.half);
        if (j == threadIdx.x) held[0] = d1, held[1] = d2, held[2] = v1, held[3] = v2;
        float g1[W], g2[W], n1[W], n2[W];
        turn_back(g1, g2, n1, n2, d1, d2, v1, v2, angles, g.half, j % g.per_head);
        float s = 0.0f;
LLMC_UNROLL
        for (int e = 0; e < W; e++) s += g1[e] * n1[e] + g2[e] * n2[e];
        partial[j] = s;
    }
    __syncthreads();
    for (unsigned j = threadIdx.x; j < pairs; j += blockDim.x) {
        const size_t o = base + g.offset(j, W);
        const bool first = j == threadIdx.x;
        const Pack<bf16, W> d1 = first ? held[0] : Pack<bf16, W>::load(dqkv + o),
                            d2 = first ? held[1] : Pack<bf16, W>::load(dqkv + o + g.half),
                            v1 = first ? held[2] : Pack<bf16, W>::load(qkv + o),
                            v2 = first ? held[3] : Pack<bf16, W>::load(qkv + o + g.half);
        float g1[W], g2[W], n1[W], n2[W];
        turn_back(g1, g2, n1, n2, d1, d2, v1, v2, angles, g.half, j % g.per_head);
        const float proj = g.head_sum(partial, j) / (float)g.hs;
        const float r = rstd[(size_t)blockIdx.x * 2 * NH + g.head(j)];
LLMC_UNROLL
        for (int e = 0; e < W; e++) {
            g1[e] = r * (g1[e] - n1[e] * proj);
            g2[e] = r * (g2[e] - n2[e] * proj);
        }
        store_floats(dqkv + o, g1);
        store_floats(dqkv + o + g.half, g2);
    }
}

// Host: how a position's pair packs are launched.
struct QkRotaryLaunch {
    bool vector = false;
    size_t block = 0, smem = 0;
};

inline QkRotaryLaunch qk_rotary_launch(size_t C, size_t NH, const bf16* a, const void* b, const float* table) {
    if (NH == 0 || C % NH != 0 || (C / NH) % 2 != 0)
        fail("qk_norm_rotary: C=%zu must split into NH=%zu heads of an even size", C, NH);
    QkRotaryLaunch L;
    L.vector = (C / NH) % (2 * kPackBf16) == 0 && aligned16(a) && aligned16(b) && aligned16(table);
    const size_t pairs = C / (L.vector ? kPackBf16 : 1);
    if (pairs > kQkRotaryMaxPairPacks)
        fail("qk_norm_rotary: C=%zu on the %s path needs %zu partial sums (at most %zu)", C,
             L.vector ? "vector" : "scalar", pairs, kQkRotaryMaxPairPacks);
    L.block = pairs >= (size_t)kQkRotaryMaxBlock ? (size_t)kQkRotaryMaxBlock : 32 * ceil_div(pairs, 32);
    L.smem = pairs * sizeof(float);
    return L;
}

// Both return true when the vector path ran. table: the rotary table with at least T rows for hs = C / NH.
inline bool qk_norm_rotary_forward(bf16* qkv, float* rstd, const float* table, size_t B, size_t T, size_t C,
                                   size_t NH, cudaStream_t stream) {
    if (B * T == 0) return true;
    const QkRotaryLaunch L = qk_rotary_launch(C, NH, qkv, qkv, table);
    auto kernel = L.vector ? qk_norm_rotary_forward_kernel<kPackBf16> : qk_norm_rotary_forward_kernel<1>;
    LLMC_LAUNCH(kernel, grid_size(B * T, 1), L.block, L.smem, stream, qkv, rstd, table, T, C, NH);
    return L.vector;
}

inline bool qk_norm_rotary_backward(bf16* dqkv, const bf16* qkv, const float* rstd, const float* table, size_t B,
                                    size_t T, size_t C, size_t NH, cudaStream_t stream) {
    if (B * T == 0) return true;
    const QkRotaryLaunch L = qk_rotary_launch(C, NH, dqkv, qkv, table);
    auto kernel = L.vector ? qk_norm_rotary_backward_kernel<kPackBf16> : qk_norm_rotary_backward_kernel<1>;
    LLMC_LAUNCH(kernel, grid_size(B * T, 1), L.block, L.smem, stream, dqkv, qkv, rstd, table, T, C, NH);
    return L.vector;
}

}  // namespace llmc
