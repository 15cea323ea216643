// Encoder: token embedding + position embedding.
//
// forward:  out[b,t,c] = wte[inp[b,t], c] + wpe[t, c]                  out (B,T,C) bf16, sum in fp32, rounded once
//           (wpe null: no position embedding, out = wte[inp[b,t], c]; wpe is then never read)
// backward (parameter gradients, fp32, accumulated with +=):
//   dwpe[t, c] += sum_b dout[b,t,c]                                   (no kernel when dwpe is null)
//   dwte[v, c] += sum over positions n with inp[n] == v of dout[n, c]
//
// Every kernel moves W consecutive channels per access: W = 8 (16-byte bf16 loads / stores, two 16-byte fp32 ones)
// when C is a multiple of 8 and the pointers are aligned, W = 1 (the scalar path) otherwise; chosen on the host.
//
// dwpe: one thread per (t, pack of channels) sums over b in order (kReduceUnroll loads in flight).
// dwte, deterministic without float atomics and balanced for skewed token frequencies: the host groups the positions
// by token with a stable counting sort (buckets in order of first appearance, positions ascending) and cuts every
// bucket into chunks of at most kEncoderChunk positions. Stage 1: one thread per (chunk, pack of channels) sums its
// chunk's dout rows in position order. A token with a single chunk (almost every token) adds that sum straight into
// dwte; the chunks of a frequent token write their sums to a scratch slot each, and stage 2 (one thread per (such
// token, pack)) adds the slots in chunk order into dwte. So no thread walks more than kEncoderChunk positions, however
// frequent a token is (a token that is 30% of a 65536-token batch is 615 chunks working in parallel), and the
// summation order is a function of the batch only.
#pragma once

#include "common.cuh"
#include "encoder_groups.h"
#include "reduce.cuh"

namespace llmc {

template <int W>
__global__ void encoder_forward_kernel(bf16* __restrict__ out, const int* __restrict__ inp,
                                       const bf16* __restrict__ wte, const bf16* __restrict__ wpe, size_t N,
                                       size_t T, size_t C) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= N * C) return;
    const size_t n = i / C, c = i % C, t = n % T;
    const size_t tok = (size_t)inp[n];
    float a[W];
    load_floats(a, wte + tok * C + c);
    if (wpe) {
        float b[W];
        load_floats(b, wpe + t * C + c);
LLMC_UNROLL
        for (int e = 0; e < W; e++) a[e] += b[e];
    }
    store_floats(out + i, a);
}

template <int W>
__global__ void encoder_backward_wpe_kernel(float* __restrict__ dwpe, const bf16* __restrict__ dout, size_t B,
                                            size_t T, size_t C) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;  // over (t, c)
    if (i >= T * C) return;
    float acc[W] = {};
    sum_rows(acc, B, [&](size_t b) { return dout + b * T * C + i; });
    add_floats(dwpe + i, acc);
}

// The host picks the block size from C (at most this many threads): declared so that the resource check
// (test/e2e/resource_check_test.py) knows the largest block.
constexpr int kEncoderBackwardMaxBlock = 256;
// Stage 1: block (chunk, column chunk), thread = one pack of W channels of one chunk.
template <int W>
__global__ void __launch_bounds__(kEncoderBackwardMaxBlock, 1) encoder_backward_wte_chunks_kernel(float* dwte, float* __restrict__ slots,
                                                   const bf16* __restrict__ dout, EncoderGroups g, size_t C) {
    const size_t packs = C / W, col_chunks = (packs + blockDim.x - 1) / blockDim.x;
    const size_t k = blockIdx.x / col_chunks;
    const size_t j = (blockIdx.x % col_chunks) * blockDim.x + threadIdx.x;
    if (k >= g.num_chunks || j >= packs) return;
    const size_t c = j * W;
    const int* positions = g.positions + g.chunk_start[k];
    float acc[W] = {};
    sum_rows(acc, (size_t)(g.chunk_start[k + 1] - g.chunk_start[k]),
             [&](size_t q) { return dout + (size_t)positions[q] * C + c; });
    const int slot = g.chunk_slot[k];
    if (slot >= 0) {
        store_floats(slots + (size_t)slot * C + c, acc);
        return;
    }
    add_floats(dwte + (size_t)g.chunk_token[k] * C + c, acc);
}

// Stage 2: block (multi-chunk token, column chunk): dwte[token] += its slots, added in chunk order.
template <int W>
__global__ void __launch_bounds__(kEncoderBackwardMaxBlock, 1) encoder_backward_wte_slots_kernel(float* dwte, const float* __restrict__ slots, EncoderGroups g,
                                                  size_t C) {
    const size_t packs = C / W, col_chunks = (packs + blockDim.x - 1) / blockDim.x;
    const size_t m = blockIdx.x / col_chunks;
    const size_t j = (blockIdx.x % col_chunks) * blockDim.x + threadIdx.x;
    if (m >= g.num_multi || j >= packs) return;
    const size_t c = j * W;
    const float* first = slots + (size_t)g.multi_slot_start[m] * C + c;
    float acc[W] = {};
    sum_rows(acc, (size_t)(g.multi_slot_start[m + 1] - g.multi_slot_start[m]), [&](size_t q) { return first + q * C; });
    add_floats(dwte + (size_t)g.multi_token[m] * C + c, acc);
}

// The launchers return true when the vector path ran.
inline bool encoder_forward(bf16* out, const int* inp, const bf16* wte, const bf16* wpe, size_t B, size_t T,
                            size_t C, cudaStream_t stream) {
    return launch_elementwise(vector_ok(C, kPackBf16, out, wte, wpe), encoder_forward_kernel<kPackBf16>,
                              encoder_forward_kernel<1>, kPackBf16, B * T * C, stream, out, inp, wte, wpe, B * T, T, C);
}

inline bool encoder_backward_wpe(float* dwpe, const bf16* dout, size_t B, size_t T, size_t C, cudaStream_t stream) {
    if (!dwpe) return true;
    return launch_elementwise(vector_ok(C, kPackBf16, dwpe, dout), encoder_backward_wpe_kernel<kPackBf16>,
                              encoder_backward_wpe_kernel<1>, kPackBf16, T * C, stream, dwpe, dout, B, T, C);
}

// dwte += the grouped sums. `packed_device` holds the grouping of `s`, `slots` at least s.num_slots * C floats.
inline bool encoder_backward_wte(float* dwte, float* slots, const bf16* dout, const int* packed_device,
                                 const EncoderGroupSizes& s, size_t C, cudaStream_t stream) {
    const EncoderGroups g = encoder_group_views(packed_device, s);
    const bool vec = vector_ok(C, kPackBf16, dwte, slots, dout);
    const size_t packs = vec ? C / kPackBf16 : C;
    const size_t block = packs >= kEncoderBackwardMaxBlock ? kEncoderBackwardMaxBlock : 32 * ceil_div(packs, 32),
                 col_chunks = ceil_div(packs, block);
    auto chunks_kernel = vec ? encoder_backward_wte_chunks_kernel<kPackBf16> : encoder_backward_wte_chunks_kernel<1>;
    LLMC_LAUNCH(chunks_kernel, grid_size(s.num_chunks * col_chunks, 1), block, 0, stream, dwte, slots, dout, g, C);
    if (s.num_multi) {
        auto slots_kernel = vec ? encoder_backward_wte_slots_kernel<kPackBf16> : encoder_backward_wte_slots_kernel<1>;
        LLMC_LAUNCH(slots_kernel, grid_size(s.num_multi * col_chunks, 1), block, 0, stream, dwte, (const float*)slots,
                    g, C);
    }
    return vec;
}

}  // namespace llmc
