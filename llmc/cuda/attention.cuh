// Causal multi-head self-attention, fused, on tensor cores (the FlashAttention-2 algorithm, Dao 2023): no (T, T)
// matrix is ever stored, Q, K, V are read straight from qkv and the results written straight into out / dqkv.
//
// Shapes: qkv (B, T, 3C) = [q | k | v] per position, each C = NH * hs wide with the heads contiguous inside; out and
// dout (B, T, C); per (b, h) Q, K, V, O, dO are (T, hs) matrices with row stride 3C (C for O, dO). scale = 1/sqrt(hs),
// c = scale * log2(e) (exponentials are exp2). The saved state is L (B, NH, T) fp32, the base-2 log-sum-exp of each
// row's scaled scores: L_i = log2 sum_{j <= i} 2^(c q_i.k_j), so that p_ij = 2^(c q_i.k_j - L_i).
//
// forward, per block of BR query rows (one (b, h)); each warp owns 16 MT of them:
//   for each key tile j of BC keys with j BC <= the block's last row (tiles wholly above the diagonal are skipped;
//   a warp also skips a tile that lies wholly above its own rows):
//     S = Q K_j^T (fp32, mma m16n8k16), masked to -inf where key > query or key >= T
//     m_new = max(m, rowmax(S) c);  P = 2^(S c - m_new);  l = 2^(m - m_new) l + rowsum(P);  O = 2^(m - m_new) O + P V_j
//   out = O / l (bf16),  L = m + log2(l)
//   Scores, probabilities and the running statistics stay in fp32 registers; P is rounded to bf16 only as the MMA's
//   A operand (l sums the fp32 values). K_j, V_j stream through shared memory, STAGES tiles in flight with cp.async.
// Grids are head-major (the tiles of one (b, h) are consecutive blocks: K / V, or Q / dO, are read from L2 after the
// first); the forward's key tile and depth are chosen per device from its shared memory (attention_kernels_for).
// backward (dqkv written, =), D_i = sum_d dO_id O_id (= sum_j p_ij dP_ij), dS = P o (dP - D): 5 T x T x hs products,
// dS through memory, heads in passes (the workspace holds the dS of a pass's heads: attention_heads_per_pass):
//   D kernel, every row of every head:  D_i = dO_i . O_i  (rowdot, (B, NH, T) fp32)
//   per pass:
//   dK/dV kernel, per block of 128 keys (64 at hs = 128), over query tiles i from the diagonal on:
//     S^T = K Q_i^T, P^T = 2^(S^T c - L_i), dV += P^T dO_i, dP^T = V dO_i^T, dS^T = P^T o (dP^T - D_i),
//     dK += dS^T Q_i;   dk = scale dK, dv = dV;   dS^T of every causal tile stored (bf16, store_ds_fragments)
//   dQ kernel, per block of 128 query rows (64 at hs = 128), over key blocks j up to the diagonal:
//     dQ += dS_j K_j  (dS^T and K streamed through shared memory);   dq = scale dQ
//   Each warp owns 32 rows (16 at hs = 128); every fp32 sum is added in the order of the recomputing backward
//   (dev/cuda/attention_bwd_recompute.cuh: its dQ kernel recomputed S, P, dP and dS, 7 products), so the bits are
//   the same (docs/cuda.md). Each output row is written by exactly one warp, once: no atomics, so the result is
//   the same bits on every run, whatever the passes.
// Fragment conventions (llmc/cuda/mma.cuh): an accumulator tile acc[nt][4] of a warp covers 16 rows x 8 NT columns;
// lane (g = lane / 4, t = lane % 4) holds rows g (acc[..][0..1]) and g + 8 (acc[..][2..3]), columns nt 8 + 2t + {0,1}.
// Two adjacent accumulator tiles of P (or dS) are exactly the A fragment of the next product (pack_bf16x2), so P never
// leaves registers. Row sums and maxima combine the 4 lanes of a row with xor-shuffles 1 and 2 (a fixed order).
//
// Shared memory tiles are row-major with rows padded to hs + 8 elements (16 extra bytes): the 8 row addresses of one
// ldmatrix (and the 8 rows of an output staging store) then fall in 8 different 16-byte bank groups: no conflicts.
// Head sizes: 16, 32, 64, 128 (template parameter; anything else is refused by check_attention_shape). Any T >= 1:
// rows and keys past T are zero-filled by cp.async, masked, and never stored.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common.cuh"
#include "cuda_check.h"
#include "device_limits.h"
#include "launch.cuh"
#include "mma.cuh"

namespace llmc {

// The kernels' dynamic shared memory. Declared here, at namespace scope, rather than inside each kernel: g++ (which
// compiles these sources for the simulator, where __shared__ is thread_local) calls the TLS init hook of a block-scope
// extern thread_local inside a template without checking that it exists.
extern __shared__ __align__(16) unsigned char shmem[];

// Tile sizes per head size (docs/cuda.md explains the choice: registers, shared memory, occupancy). The key tile of
// the forward and its cp.async depth are template parameters chosen on the host from the device's shared memory
// (attention_kernels_for); fwd_smem, dq_smem and dkv_smem give each kernel's bytes.
template <int HS>
struct AttentionTiles {
    static_assert(HS % 16 == 0 && HS <= 128, "head size must be a multiple of 16, at most 128");
    static constexpr int kStride = HS + 8;  // shared-memory row stride in elements (16 bytes of padding)
    // forward: kFwdWarps warps x kFwdMTiles m16 tiles of query rows
    static constexpr int kFwdWarps = HS == 128 ? 8 : 4;
    static constexpr int kFwdMTiles = HS == 128 ? 1 : 2;
    static constexpr int kFwdRows = 16 * kFwdWarps * kFwdMTiles;
    // backward: 4 warps each. dK/dV kernel: kDkvMTiles m16 tiles of keys per warp (kDkvKeys per block), kBwdQueries
    // query rows streamed; 32 keys per warp (MT = 2) let every B fragment loaded by ldmatrix serve two MMAs (shared
    // memory bandwidth bounds it, docs/cuda.md). At hs = 128 it keeps 16 keys per warp: the dK and dV accumulators
    // alone would be 256 registers at 32 keys. dQ kernel: kDqMTiles m16 tiles of query rows per warp (kDqRows per
    // block), the stored dS^T and K streamed kDqKeys keys at a time. A dQ warp's rows lie inside one query tile of
    // the dK/dV kernel, so every dS value it reads was stored (attention_backward_dq_kernel).
    static constexpr int kBwdWarps = 4;
    static constexpr int kDqMTiles = HS == 128 ? 1 : 2;
    static constexpr int kDqRows = 16 * kBwdWarps * kDqMTiles;
    static constexpr int kDqKeys = 32;
    static constexpr int kDsStride = kDqRows + 8;  // the dQ kernel's shared dS^T tile: kDqKeys rows of kDqRows queries
    static constexpr int kDkvMTiles = HS == 128 ? 1 : 2;
    static constexpr int kDkvKeys = 16 * kBwdWarps * kDkvMTiles;
    static constexpr int kBwdQueries = HS == 128 ? 16 : 32;
    static_assert(kBwdQueries % (16 * kDqMTiles) == 0, "a dQ warp's rows lie inside one dK/dV query tile");
    // Blocks per SM each kernel is compiled for (__launch_bounds__): the register budget ptxas may use, 65536 /
    // (threads x blocks). Chosen as the most blocks whose budget holds the kernel without spilling on sm_80 and
    // sm_90 (docs/cuda.md lists the resulting register counts).
    static constexpr int kFwdMinBlocks = HS == 128 ? 1 : HS == 64 ? 2 : 3;
    static constexpr int kDqMinBlocks = 4;
    static constexpr int kDkvMinBlocks = HS == 16 ? 3 : 2;
    // Q tile + `stages` buffers of K and V tiles of `keys` rows
    static constexpr size_t fwd_smem(int keys, int stages) {
        return (size_t)(kFwdRows + 2 * stages * keys) * kStride * 2;
    }
    // two buffers of a K tile and a dS^T tile of kDqKeys keys (the output is staged in the same memory afterwards)
    static constexpr size_t dq_smem() { return (size_t)2 * kDqKeys * (kStride + kDsStride) * 2; }
    // K and V tiles + two buffers of Q and dO tiles of kBwdQueries rows, and of their L and D
    static constexpr size_t dkv_smem() {
        return (size_t)(2 * kDkvKeys + 4 * kBwdQueries) * kStride * 2 + 4 * kBwdQueries * sizeof(float);
    }
};

// ---- building blocks ---------------------------------------------------------------------------------------------

// ROWS x HS elements of a (T, HS) matrix with row stride `stride`, rows row0.. (zero-filled past T), into a padded
// shared tile; all NTHREADS threads of the block take part, each copying 16-byte chunks of fixed columns in rows
// NTHREADS / (HS / 8) apart (so its addresses advance by one constant step). The caller commits the group.
template <int HS, int ROWS, int NTHREADS>
__device__ __forceinline__ void load_tile_async(bf16* tile, const bf16* base, size_t stride, int row0, int T,
                                                int tid) {
    constexpr int kChunks = HS / 8, kRowStep = NTHREADS / kChunks;
    static_assert(NTHREADS % kChunks == 0 && (ROWS % kRowStep == 0 || ROWS < kRowStep),
                  "tile rows must split evenly over the threads");
    const int r = tid / kChunks, cc = tid % kChunks;
    if (ROWS < kRowStep && r >= ROWS) return;  // a tile smaller than one pass of the block: the other threads idle
    const bf16* src = base + (size_t)(row0 + r) * stride + cc * 8;
    bf16* dst = tile + r * AttentionTiles<HS>::kStride + cc * 8;
    LLMC_UNROLL
    for (int i = 0; i < (ROWS + kRowStep - 1) / kRowStep; i++) {
        const bool ok = row0 + r + i * kRowStep < T;
        cp_async_16(dst + i * kRowStep * AttentionTiles<HS>::kStride, ok ? src : base, ok);
        src += (size_t)kRowStep * stride;
    }
}

// Where head h of sequence b (bh = b NH + h) starts: in a (B, T, 3C) tensor (its q; k follows at + C, v at + 2C)
// and in a (B, T, C) tensor.
struct HeadOffsets {
    size_t C, in_qkv, in_rows;
    __device__ HeadOffsets(int bh, int T, int NH, int hs)
        : C((size_t)NH * hs), in_qkv((size_t)(bh / NH) * T * 3 * C + (size_t)(bh % NH) * hs),
          in_rows((size_t)(bh / NH) * T * C + (size_t)(bh % NH) * hs) {}
};

// Sets acc[mt][nt][i] to `value` where keep(row, col) is false, for the element's row = row0 + 16 mt + g + 8 (i / 2)
// and column col0 + 8 nt + 2 t + (i & 1) (g = lane / 4, t = lane % 4): the causal and end-of-sequence masks.
template <int MT, int NT, class Keep>
__device__ __forceinline__ void mask_tile(float (&acc)[MT][NT][4], int row0, int col0, int lane, float value,
                                          Keep keep) {
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++)
        LLMC_UNROLL
        for (int nt = 0; nt < NT; nt++)
            LLMC_UNROLL
            for (int i = 0; i < 4; i++)
                if (!keep(row0 + mt * 16 + lane / 4 + 8 * (i / 2), col0 + nt * 8 + 2 * (lane % 4) + (i & 1)))
                    acc[mt][nt][i] = value;
}

// acc[mt][nt] += A_mt B^T for a warp: A_mt = 16 rows (mt 16 ..) x 16 KS columns of the shared tile `a`, B^T from the
// shared tile `b` stored as [n][k] (NT 8 rows of 16 KS columns). Each B fragment pair is loaded once for all MT.
template <int MT, int KS, int NT>
__device__ __forceinline__ void warp_mma_abt(float (&acc)[MT][NT][4], const bf16* a, const bf16* b, int stride,
                                             int lane) {
    static_assert(NT % 2 == 0, "B is loaded two n8 tiles at a time");
    LLMC_UNROLL
    for (int ks = 0; ks < KS; ks++) {
        uint32_t af[MT][4];
        LLMC_UNROLL
        for (int mt = 0; mt < MT; mt++)
            ldmatrix_x4(af[mt], a + (mt * 16 + lane % 16) * stride + ks * 16 + (lane / 16) * 8);
        LLMC_UNROLL
        for (int np = 0; np < NT / 2; np++) {
            uint32_t bf[4];
            ldmatrix_x4(bf, b + (np * 16 + (lane / 16) * 8 + lane % 8) * stride + ks * 16 + (lane / 8 % 2) * 8);
            LLMC_UNROLL
            for (int mt = 0; mt < MT; mt++) {
                mma_bf16_16816(acc[mt][2 * np], af[mt], bf, acc[mt][2 * np]);
                mma_bf16_16816(acc[mt][2 * np + 1], af[mt], bf + 2, acc[mt][2 * np + 1]);
            }
        }
    }
}

// The bf16 A fragment of k16 step ks of a warp's accumulator tile p (16 MT rows): two adjacent 16x8 accumulator
// tiles are one 16x16 A fragment (mma.cuh), each value rounded to bf16.
template <int MT, int NTP>
__device__ __forceinline__ void pack_a_fragment(uint32_t (&af)[MT][4], const float (&p)[MT][NTP][4], int ks) {
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++) {
        af[mt][0] = pack_bf16x2(p[mt][2 * ks][0], p[mt][2 * ks][1]);
        af[mt][1] = pack_bf16x2(p[mt][2 * ks][2], p[mt][2 * ks][3]);
        af[mt][2] = pack_bf16x2(p[mt][2 * ks + 1][0], p[mt][2 * ks + 1][1]);
        af[mt][3] = pack_bf16x2(p[mt][2 * ks + 1][2], p[mt][2 * ks + 1][3]);
    }
}

// acc[mt][nt] += P_mt B for a warp: P_mt is 16 x 16 KS in accumulator layout (registers, rounded to bf16 here),
// B the shared tile `b` stored as [k][n] (16 KS rows of 8 NT columns), read transposed by ldmatrix.
template <int MT, int KS, int NT>
__device__ __forceinline__ void warp_mma_pb(float (&acc)[MT][NT][4], const float (&p)[MT][2 * KS][4], const bf16* b,
                                            int stride, int lane) {
    static_assert(NT % 2 == 0, "B is loaded two n8 tiles at a time");
    LLMC_UNROLL
    for (int ks = 0; ks < KS; ks++) {
        uint32_t af[MT][4];
        pack_a_fragment(af, p, ks);
        LLMC_UNROLL
        for (int np = 0; np < NT / 2; np++) {
            uint32_t bf[4];
            ldmatrix_x4_trans(bf, b + (ks * 16 + (lane / 8 % 2) * 8 + lane % 8) * stride + np * 16 + (lane / 16) * 8);
            LLMC_UNROLL
            for (int mt = 0; mt < MT; mt++) {
                mma_bf16_16816(acc[mt][2 * np], af[mt], bf, acc[mt][2 * np]);
                mma_bf16_16816(acc[mt][2 * np + 1], af[mt], bf + 2, acc[mt][2 * np + 1]);
            }
        }
    }
}

// ---- the dK/dV kernel's products: every operand addressed at one lane offset -----------------------------------
// ldmatrix_lane_offset: lane l addresses row l % 16, columns 8 (l / 16) .. + 7 of a 16 x 16 block of a padded tile,
// so matrix m of an x4 load is rows 8 (m % 2) .., columns 8 (m / 2) ... Read as an A fragment that is a[0..3];
// as the B fragments of two n8 tiles of a [n][k] tile, {r[0], r[2]} (rows 0-7) and {r[1], r[3]} (rows 8-15); with
// .trans, of a [k][n] tile, {r[0], r[1]} (columns 0-7) and {r[2], r[3]} (columns 8-15). One offset for every tile
// keeps one address register per tile in the kernel's loop instead of one per access pattern.
template <int STRIDE>
__device__ __forceinline__ int ldmatrix_lane_offset(int lane) { return (lane % 16) * STRIDE + (lane / 16) * 8; }

// acc[mt][nt] += A_mt B^T (as warp_mma_abt), a and b already offset by ldmatrix_lane_offset.
template <int MT, int KS, int NT, int STRIDE>
__device__ __forceinline__ void lane_mma_abt(float (&acc)[MT][NT][4], const bf16* a, const bf16* b) {
    static_assert(NT % 2 == 0, "B is loaded two n8 tiles at a time");
    LLMC_UNROLL
    for (int ks = 0; ks < KS; ks++) {
        uint32_t af[MT][4];
        LLMC_UNROLL
        for (int mt = 0; mt < MT; mt++) ldmatrix_x4(af[mt], a + mt * 16 * STRIDE + ks * 16);
        LLMC_UNROLL
        for (int np = 0; np < NT / 2; np++) {
            uint32_t r[4];
            ldmatrix_x4(r, b + np * 16 * STRIDE + ks * 16);
            const uint32_t b0[2] = {r[0], r[2]}, b1[2] = {r[1], r[3]};
            LLMC_UNROLL
            for (int mt = 0; mt < MT; mt++) {
                mma_bf16_16816(acc[mt][2 * np], af[mt], b0, acc[mt][2 * np]);
                mma_bf16_16816(acc[mt][2 * np + 1], af[mt], b1, acc[mt][2 * np + 1]);
            }
        }
    }
}

// acc[mt][nt] += A_mt B for the k16 step ks: A as bf16 fragments af[mt], B rows 16 ks .. of the [k][n] tile b
// (already offset by ldmatrix_lane_offset), read transposed.
template <int MT, int NT, int STRIDE>
__device__ __forceinline__ void lane_mma_fb_step(float (&acc)[MT][NT][4], const uint32_t (&af)[MT][4], const bf16* b,
                                                 int ks) {
    static_assert(NT % 2 == 0, "B is loaded two n8 tiles at a time");
    LLMC_UNROLL
    for (int np = 0; np < NT / 2; np++) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, b + ks * 16 * STRIDE + np * 16);
        LLMC_UNROLL
        for (int mt = 0; mt < MT; mt++) {
            mma_bf16_16816(acc[mt][2 * np], af[mt], bf, acc[mt][2 * np]);
            mma_bf16_16816(acc[mt][2 * np + 1], af[mt], bf + 2, acc[mt][2 * np + 1]);
        }
    }
}

template <int MT, int NT>
__device__ __forceinline__ void zero(float (&acc)[MT][NT][4]) {
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++)
        LLMC_UNROLL
        for (int nt = 0; nt < NT; nt++)
            LLMC_UNROLL
            for (int i = 0; i < 4; i++) acc[mt][nt][i] = 0.0f;
}

// Sum / max over the 4 lanes that share a row of an accumulator tile (xor 1, then xor 2).
__device__ __forceinline__ float row_sum4(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float row_max4(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// Writes a warp's accumulator rows (16 MT rows starting at `row0`, HS columns), each multiplied by mul[mt][half],
// as bf16 to dst + row * stride for rows < T: staged through the warp's own 16 MT rows of the shared tile `stage`
// (which no other warp reads), then copied out in 16-byte chunks.
template <int HS, int MT>
__device__ __forceinline__ void store_rows(bf16* dst, size_t stride, const float (&acc)[MT][HS / 8][4],
                                           const float (&mul)[MT][2], bf16* stage, int row0, int T, int lane) {
    constexpr int S = AttentionTiles<HS>::kStride, kChunks = HS / 8;
    __syncwarp();  // every lane's last ldmatrix of `stage` is done
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++)
        LLMC_UNROLL
        for (int nt = 0; nt < HS / 8; nt++)
            LLMC_UNROLL
            for (int h = 0; h < 2; h++) {
                const int r = mt * 16 + lane / 4 + 8 * h, c = nt * 8 + 2 * (lane % 4);
                *reinterpret_cast<__nv_bfloat162*>(stage + r * S + c) =
                    __floats2bfloat162_rn(acc[mt][nt][2 * h] * mul[mt][h], acc[mt][nt][2 * h + 1] * mul[mt][h]);
            }
    __syncwarp();
    for (int c = lane; c < 16 * MT * kChunks; c += 32) {
        const int r = c / kChunks, cc = c % kChunks;
        if (row0 + r < T)
            *reinterpret_cast<uint4*>(dst + (size_t)(row0 + r) * stride + cc * 8) =
                *reinterpret_cast<const uint4*>(stage + r * S + cc * 8);
    }
}

// ---- forward -----------------------------------------------------------------------------------------------------
// Grid: (B NH) x ceil(T / BR) blocks, head-major: the query tiles of one (b, h) are consecutive block indices, so they
// run together and read the same K and V from L2 (docs/cuda.md); within a head the tiles with the most keys first.
// BC keys per streamed tile, STAGES buffers of them in flight (cp.async: STAGES - 1 tiles ahead of the one in use).
template <int HS, int BC, int STAGES>
__global__ void __launch_bounds__(AttentionTiles<HS>::kFwdWarps * 32, AttentionTiles<HS>::kFwdMinBlocks)
    attention_forward_kernel(bf16* out, float* lse, const bf16* qkv, int T, int NH, float c_log2) {
    using Tiles = AttentionTiles<HS>;
    static_assert(STAGES >= 2 && BC % 16 == 0, "at least double-buffered; key tiles of whole k16 steps");
    constexpr int MT = Tiles::kFwdMTiles, BR = Tiles::kFwdRows, S = Tiles::kStride;
    constexpr int NTHREADS = Tiles::kFwdWarps * 32, NTK = BC / 8, NTD = HS / 8;
    bf16* sQ = reinterpret_cast<bf16*>(shmem);  // BR x S
    bf16* sK = sQ + BR * S;                      // STAGES x BC x S
    bf16* sV = sK + STAGES * BC * S;             // STAGES x BC x S
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int nq = (T + BR - 1) / BR, qt = nq - 1 - (int)(blockIdx.x % nq), bh = (int)(blockIdx.x / nq);
    const HeadOffsets at(bh, T, NH, HS);
    const size_t C = at.C;
    const bf16 *q = qkv + at.in_qkv, *k = q + C, *v = q + 2 * C;
    const int q0 = qt * BR;
    const int num_kt = (min(T, q0 + BR) + BC - 1) / BC;  // key tiles that meet the block's rows
    auto load_keys = [&](int kt) {  // key tile kt into buffer kt % STAGES; one commit group per tile, even if empty
        if (kt < num_kt) {
            load_tile_async<HS, BC, NTHREADS>(sK + (kt % STAGES) * BC * S, k, 3 * C, kt * BC, T, tid);
            load_tile_async<HS, BC, NTHREADS>(sV + (kt % STAGES) * BC * S, v, 3 * C, kt * BC, T, tid);
        }
        cp_async_commit();
    };

    load_tile_async<HS, BR, NTHREADS>(sQ, q, 3 * C, q0, T, tid);
    LLMC_UNROLL
    for (int kt = 0; kt < STAGES - 1; kt++) load_keys(kt);  // the Q tile joins tile 0's group

    float o[MT][NTD][4], m[MT][2], l[MT][2];
    zero(o);
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
    const int r0 = q0 + warp * 16 * MT;  // the warp's first query row
    const bf16* sQw = sQ + warp * 16 * MT * S;

    for (int kt = 0; kt < num_kt; kt++) {
        cp_async_wait<STAGES - 2>();  // tile kt has landed (at most the STAGES - 2 later groups still pending)
        __syncthreads();  // tile kt visible to all; every warp is done with tile kt - 1, whose buffer is refilled next
        load_keys(kt + STAGES - 1);
        const int k0 = kt * BC;
        if (r0 >= T || k0 > r0 + 16 * MT - 1) continue;  // warp-uniform: no row of this warp sees these keys
        const bf16* sKt = sK + (kt % STAGES) * BC * S;
        const bf16* sVt = sV + (kt % STAGES) * BC * S;

        float s[MT][NTK][4];
        zero(s);
        warp_mma_abt<MT, HS / 16, NTK>(s, sQw, sKt, S, lane);

        if (k0 + BC - 1 > r0 || k0 + BC > T)  // the diagonal tile, or past the end: not every key is visible
            mask_tile(s, r0, k0, lane, -INFINITY, [T](int row, int key) { return key <= row && key < T; });
        LLMC_UNROLL
        for (int mt = 0; mt < MT; mt++)
            LLMC_UNROLL
            for (int hh = 0; hh < 2; hh++) {
                float mx = -INFINITY;
                LLMC_UNROLL
                for (int nt = 0; nt < NTK; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hh], s[mt][nt][2 * hh + 1]));
                mx = row_max4(mx);
                const float m_new = fmaxf(m[mt][hh], mx * c_log2);
                const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet: keep it at 0
                const float alpha = exp2_approx(m[mt][hh] - m_use);
                float sum = 0.0f;
                LLMC_UNROLL
                for (int nt = 0; nt < NTK; nt++)
                    LLMC_UNROLL
                    for (int j = 0; j < 2; j++) {
                        float& x = s[mt][nt][2 * hh + j];
                        x = exp2_approx(fmaf(x, c_log2, -m_use));
                        sum += x;
                    }
                l[mt][hh] = l[mt][hh] * alpha + sum;  // this lane's part of the row sum
                m[mt][hh] = m_new;
                LLMC_UNROLL
                for (int nt = 0; nt < NTD; nt++) o[mt][nt][2 * hh] *= alpha, o[mt][nt][2 * hh + 1] *= alpha;
            }
        warp_mma_pb<MT, BC / 16, NTD>(o, s, sVt, S, lane);
    }

    float inv[MT][2];
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++)
        LLMC_UNROLL
        for (int hh = 0; hh < 2; hh++) {
            const float sum = row_sum4(l[mt][hh]);
            inv[mt][hh] = 1.0f / sum;
            const int row = r0 + mt * 16 + lane / 4 + 8 * hh;
            if (lane % 4 == 0 && row < T) lse[(size_t)bh * T + row] = m[mt][hh] + log2f(sum);
        }
    if (r0 < T) store_rows<HS, MT>(out + at.in_rows, C, o, inv, sQ + warp * 16 * MT * S, r0, T, lane);
}

// ---- backward ----------------------------------------------------------------------------------------------------
// D_i = dO_i . O_i, (B, NH, T) fp32 (rowdot). One thread per row of one head, threads in the order of (b, t, h), so a
// warp reads consecutive head rows of dout and out. The sum is formed exactly as by 4 lanes of an MMA row and
// row_sum4: lane t sums the pairs at columns 8 nt + 2t, +1 in ascending nt, then (v0 + v1) + (v2 + v3) (the bits of
// the recomputing dQ kernel, dev/cuda/attention_bwd_recompute.cuh, that used to compute D).
template <int HS>
__global__ void __launch_bounds__(256)
    attention_rowdot_kernel(float* rowdot, const bf16* dout, const bf16* out, int T, int NH, size_t rows) {
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;  // (b T + t) NH + h
    if (i >= rows) return;
    const size_t bt = i / NH, h = i % NH, b = bt / T, t = bt % T;
    const bf16 *g = dout + i * HS, *o = out + i * HS;  // (B, T, C) with C = NH HS: row (b, t), head h
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    LLMC_UNROLL
    for (int nt = 0; nt < HS / 8; nt++) {
        const uint4 g8 = *reinterpret_cast<const uint4*>(g + nt * 8), o8 = *reinterpret_cast<const uint4*>(o + nt * 8);
        const uint32_t gw[4] = {g8.x, g8.y, g8.z, g8.w}, ow[4] = {o8.x, o8.y, o8.z, o8.w};
        LLMC_UNROLL
        for (int l = 0; l < 4; l++) {  // a word holds columns 8 nt + 2 l (low half) and + 1; bf16 -> fp32 is exact
            v[l] += __uint_as_float(gw[l] << 16) * __uint_as_float(ow[l] << 16);
            v[l] += __uint_as_float(gw[l] & 0xffff0000u) * __uint_as_float(ow[l] & 0xffff0000u);
        }
    }
    rowdot[(b * NH + h) * T + t] = (v[0] + v[1]) + (v[2] + v[3]);
}

// dS through memory. The dK/dV kernel stores, per head, the dS of the causal tiles of kDsTile x kDsTile (query tile
// qi, key tile kj <= qi) as bf16, each tile row-major over (key, query), i.e. dS^T, at tile index qi (qi + 1) / 2 +
// kj of the head's run of tiles; the dQ kernel reads them. A head holds ds_head_elems(T) elements; the heads of one
// pass of the backward follow each other in the workspace (the pass's first head first).
constexpr int kDsTile = 64;
__host__ __device__ inline size_t attention_ds_head_elems(size_t T) {
    const size_t n = (T + kDsTile - 1) / kDsTile;
    return n * (n + 1) / 2 * kDsTile * kDsTile;
}
__device__ __forceinline__ size_t ds_tile_offset(int qi, int kj) {
    return ((size_t)qi * (qi + 1) / 2 + kj) * kDsTile * kDsTile;
}

// The dK/dV kernel's hook: stores a warp's dS^T, already rounded to bf16 as the dK MMA's A fragments (mma.cuh's A
// layout): a[ks][mt][r] holds dS^T(key0 + 16 mt + g + 8 (r % 2), query0 + 16 ks + 2 t + 8 (r / 2) + {0, 1}) (g =
// lane / 4, t = lane % 4), into the stored tiles of head `head` of the pass (ds: the pass's workspace). The 16 MT
// keys and NQ queries must lie in one kDsTile tile with query tile >= key tile (the dK/dV kernel's warp tiles do).
// Masked elements are stored as the (zero) values the kernel holds.
template <int MT, int NQ>
__device__ __forceinline__ void store_ds_fragments(bf16* ds, int T, int head, const uint32_t (&a)[NQ / 16][MT][4],
                                                   int key0, int query0, int lane) {
    bf16* tile = ds + ds_tile_offset(query0 / kDsTile, key0 / kDsTile) + (size_t)head * attention_ds_head_elems(T);
    const int kl = key0 % kDsTile + lane / 4, ql = query0 % kDsTile + 2 * (lane % 4);
    LLMC_UNROLL
    for (int ks = 0; ks < NQ / 16; ks++)
        LLMC_UNROLL
        for (int mt = 0; mt < MT; mt++)
            LLMC_UNROLL
            for (int r = 0; r < 4; r++)
                *reinterpret_cast<uint32_t*>(tile + (kl + 16 * mt + 8 * (r % 2)) * kDsTile + ql + 16 * ks +
                                             8 * (r / 2)) = a[ks][mt][r];
}

// dK and dV, and dS stored for the dQ kernel. Grid: x the ceil(T / kDkvKeys) key tiles, y the heads of the pass (bh =
// head0 + y, bh = b NH + h; their dS go to ds, attention_ds_head_elems(T) elements per head, head y at y of them);
// blocks are numbered x fastest, so the grid is head-major, within a head the key tiles with the most queries (the
// first) first. (The head as blockIdx.y costs the dS store no register: at hs = 64 the kernel uses 252 of 255.)
// Each warp owns 16 MT keys. Every dK / dV element sums the 16-query k16 steps from the block's first key on in
// ascending order, whatever the query tile; the steps below a warp's keys contribute exact zeros (P masked to 0), so
// the sums are the same bits as with 16 keys per warp and 64-query tiles.
template <int HS>
__global__ void __launch_bounds__(AttentionTiles<HS>::kBwdWarps * 32, AttentionTiles<HS>::kDkvMinBlocks)
    attention_backward_dkv_kernel(bf16* dqkv, bf16* ds, const bf16* dout, const bf16* qkv, const float* lse,
                                  const float* rowdot, int T, int NH, int head0, float c_log2, float scale) {
    using Tiles = AttentionTiles<HS>;
    constexpr int MT = Tiles::kDkvMTiles, BK = Tiles::kDkvKeys, BQ = Tiles::kBwdQueries, S = Tiles::kStride;
    constexpr int NTHREADS = Tiles::kBwdWarps * 32, NTQ = BQ / 8, NTD = HS / 8;
    static_assert(BK % BQ == 0 && BQ % 16 == 0, "the block's first key starts a query tile of whole k16 steps");
    static_assert(BQ <= NTHREADS, "one thread per query row loads L and D");
    bf16* sK = reinterpret_cast<bf16*>(shmem);  // BK x S
    bf16* sV = sK + BK * S;                      // BK x S
    bf16* sQ = sV + BK * S;                      // 2 x BQ x S
    bf16* sdO = sQ + 2 * BQ * S;                 // 2 x BQ x S
    float* sL = reinterpret_cast<float*>(sdO + 2 * BQ * S);  // 2 x BQ
    float* sD = sL + 2 * BQ;                                  // 2 x BQ
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, t4 = lane % 4;
    const int kt = (int)blockIdx.x, bh = head0 + (int)blockIdx.y;  // key tile, head (blockIdx.y: of the pass)
    const HeadOffsets at(bh, T, NH, HS);
    const size_t C = at.C;
    const bf16 *q = qkv + at.in_qkv, *k = q + C, *v = q + 2 * C, *dO = dout + at.in_rows;
    const float* Lg = lse + (size_t)bh * T;
    const float* Dg = rowdot + (size_t)bh * T;
    const int k0 = kt * BK, kw0 = k0 + warp * 16 * MT;  // the block's and the warp's first key
    const int qt0 = k0 / BQ, num_qt = (T + BQ - 1) / BQ;

    // Query tile qt into buffer nb: Q and dO by cp.async, L and D by plain loads (0 past T, where they are masked).
    auto load_queries = [&](int qt, int nb) {
        load_tile_async<HS, BQ, NTHREADS>(sQ + nb * BQ * S, q, 3 * C, qt * BQ, T, tid);
        load_tile_async<HS, BQ, NTHREADS>(sdO + nb * BQ * S, dO, C, qt * BQ, T, tid);
        if (tid < BQ) {
            const int row = qt * BQ + tid;
            sL[nb * BQ + tid] = row < T ? Lg[row] : 0.0f;
            sD[nb * BQ + tid] = row < T ? Dg[row] : 0.0f;
        }
    };
    load_tile_async<HS, BK, NTHREADS>(sK, k, 3 * C, k0, T, tid);
    load_tile_async<HS, BK, NTHREADS>(sV, v, 3 * C, k0, T, tid);
    load_queries(qt0, 0);
    cp_async_commit();

    float dk[MT][NTD][4], dv[MT][NTD][4];
    zero(dk);
    zero(dv);
    // Every ldmatrix of the loop addresses its tile at the lane's offset (ldmatrix_lane_offset): the warp's K rows
    // (V at + BK S), the current buffer's Q rows (dO at + 2 BQ S), and the lane's L and D (D at + 2 BQ).
    const bf16* sKl = sK + warp * 16 * MT * S + ldmatrix_lane_offset<S>(lane);
    for (int qt = qt0, cur = 0; qt < num_qt; qt++, cur ^= 1) {
        cp_async_wait<0>();
        __syncthreads();
        if (qt + 1 < num_qt) load_queries(qt + 1, 1 - cur);
        cp_async_commit();
        const int qbase = qt * BQ;
        if (kw0 >= T || qbase + BQ - 1 < kw0) continue;  // no query of the tile sees the warp's keys
        const bf16* sQl = sQ + cur * BQ * S + ldmatrix_lane_offset<S>(lane);
        const float* sLl = sL + cur * BQ + 2 * t4;
        float st[MT][NTQ][4];
        zero(st);
        lane_mma_abt<MT, HS / 16, NTQ, S>(st, sKl, sQl);  // S^T = K Q^T
        LLMC_UNROLL
        for (int mt = 0; mt < MT; mt++)
            LLMC_UNROLL
            for (int nt = 0; nt < NTQ; nt++)
                LLMC_UNROLL
                for (int i = 0; i < 4; i++)
                    st[mt][nt][i] = exp2_approx(fmaf(st[mt][nt][i], c_log2, -sLl[nt * 8 + (i & 1)]));  // P^T
        if (qbase < kw0 + 16 * MT - 1 || qbase + BQ > T || kw0 + 16 * MT - 1 >= T)
            mask_tile(st, kw0, qbase, lane, 0.0f,
                      [T](int key, int query) { return query >= key && query < T && key < T; });
        LLMC_UNROLL
        for (int ks = 0; ks < BQ / 16; ks++) {  // dV += P^T dO
            uint32_t pf[MT][4];
            pack_a_fragment(pf, st, ks);
            lane_mma_fb_step<MT, NTD, S>(dv, pf, sQl + 2 * BQ * S, ks);
        }
        float dpt[MT][NTQ][4];
        zero(dpt);
        lane_mma_abt<MT, HS / 16, NTQ, S>(dpt, sKl + BK * S, sQl + 2 * BQ * S);  // dP^T = V dO^T
        LLMC_UNROLL
        for (int mt = 0; mt < MT; mt++)
            LLMC_UNROLL
            for (int nt = 0; nt < NTQ; nt++)
                LLMC_UNROLL
                for (int i = 0; i < 4; i++) st[mt][nt][i] *= dpt[mt][nt][i] - sLl[2 * BQ + nt * 8 + (i & 1)];
        uint32_t ds_frag[BQ / 16][MT][4];
        LLMC_UNROLL
        for (int ks = 0; ks < BQ / 16; ks++) pack_a_fragment(ds_frag[ks], st, ks);
        // dS^T point: ds_frag[ks][mt] is this warp's dS^T as bf16 A fragments (mma.cuh's A layout): register r holds
        // key kw0 + 16 mt + g + 8 (r % 2), queries qbase + 16 ks + 2 t4 + 8 (r / 2) + (0 low half, 1 high half),
        // g = lane / 4; zero where masked (query < key, or past T). S^T, P^T and dP^T are dead here. Exactly these
        // values, the A operand of the dK MMA below, are stored for the dQ kernel (dS through memory).
        store_ds_fragments<MT, BQ>(ds, T, blockIdx.y, ds_frag, kw0, qbase, lane);
        LLMC_UNROLL
        for (int ks = 0; ks < BQ / 16; ks++) lane_mma_fb_step<MT, NTD, S>(dk, ds_frag[ks], sQl, ks);  // dK += dS^T Q
    }
    if (kw0 < T) {
        bf16* dk_dst = dqkv + at.in_qkv + C;
        float mul_k[MT][2], mul_v[MT][2];
        LLMC_UNROLL
        for (int mt = 0; mt < MT; mt++) mul_k[mt][0] = mul_k[mt][1] = scale, mul_v[mt][0] = mul_v[mt][1] = 1.0f;
        store_rows<HS, MT>(dk_dst, 3 * C, dk, mul_k, sK + warp * 16 * MT * S, kw0, T, lane);
        store_rows<HS, MT>(dk_dst + C, 3 * C, dv, mul_v, sV + warp * 16 * MT * S, kw0, T, lane);
    }
}

// dQ = scale dS K from the stored dS, after the dK/dV kernel of the same pass. Grid: (heads of the pass) x
// ceil(T / kDqRows), head-major, heavy tiles first within a head; head0 and ds as for the dK/dV kernel. The block
// streams kDqKeys keys at a time (double-buffered cp.async): K, and the dS^T rows of those keys for its query tiles.
// Each warp owns 16 MT query rows and adds, for each m16 tile, the k16 steps of keys 0 .. up to its last row in
// ascending order: the fp32 order of the recomputing dQ kernel, whose extra steps above the diagonal added exact
// zeros (the accumulator starts at +0 and never holds -0, so x + 0 = x): the same bits. The warp reads only dS that
// the dK/dV kernel stored: its rows lie in one of that kernel's query tiles (AttentionTiles), which stores every key
// tile of 16 MT keys up to it; keys past T are zero-filled.
template <int HS>
__global__ void __launch_bounds__(AttentionTiles<HS>::kBwdWarps * 32, AttentionTiles<HS>::kDqMinBlocks)
    attention_backward_dq_kernel(bf16* dqkv, const bf16* ds, const bf16* qkv, int T, int NH, int head0,
                                 float scale) {
    using Tiles = AttentionTiles<HS>;
    constexpr int MT = Tiles::kDqMTiles, BR = Tiles::kDqRows, BK = Tiles::kDqKeys, S = Tiles::kStride;
    constexpr int SD = Tiles::kDsStride, NTHREADS = Tiles::kBwdWarps * 32, NTD = HS / 8, QTILES = BR / kDsTile;
    static_assert(BR % kDsTile == 0 && kDsTile % BK == 0 && BK % 16 == 0, "whole dS tiles per block, k16 steps");
    static_assert(BR * S <= 2 * BK * (S + SD), "the output's staging rows fit the tiles' memory");
    bf16* sK = reinterpret_cast<bf16*>(shmem);  // 2 x BK x S
    bf16* sDs = sK + 2 * BK * S;                 // 2 x BK x SD: dS^T, (key, query)
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int nq = (T + BR - 1) / BR, qt = nq - 1 - (int)(blockIdx.x % nq), hp = (int)(blockIdx.x / nq);
    const HeadOffsets at(head0 + hp, T, NH, HS);
    const size_t C = at.C;
    const bf16* k = qkv + at.in_qkv + C;
    const bf16* ds_head = ds + (size_t)hp * attention_ds_head_elems(T);
    const int q0 = qt * BR, r0 = q0 + warp * 16 * MT;  // the block's and the warp's first query row
    const int num_kb = (min(T, q0 + BR) + BK - 1) / BK;
    const int last_step = (min(r0 + 16 * MT, T) - 1) / 16;  // the warp's last k16 step (when r0 < T)

    // Keys kb BK .. into buffer nb: K, and the dS^T rows of those keys of each stored (query tile, key tile).
    auto load_keys = [&](int kb, int nb) {
        const int key0 = kb * BK, kj = key0 / kDsTile;
        load_tile_async<HS, BK, NTHREADS>(sK + nb * BK * S, k, 3 * C, key0, T, tid);
        LLMC_UNROLL
        for (int i = 0; i < QTILES; i++) {
            const int qi = q0 / kDsTile + i;
            if (qi * kDsTile >= T || kj > qi) continue;  // no such tile: none of its rows is read
            const bf16* src = ds_head + ds_tile_offset(qi, kj) + (key0 % kDsTile) * kDsTile;
            for (int c = tid; c < BK * (kDsTile / 8); c += NTHREADS) {
                const int r = c / (kDsTile / 8), cc = c % (kDsTile / 8);
                const bool ok = key0 + r < T;
                cp_async_16(sDs + nb * BK * SD + r * SD + i * kDsTile + cc * 8, ok ? src + r * kDsTile + cc * 8 : src,
                            ok);
            }
        }
    };
    load_keys(0, 0);
    cp_async_commit();

    float dq[MT][NTD][4];
    zero(dq);
    for (int kb = 0; kb < num_kb; kb++) {
        cp_async_wait<0>();
        __syncthreads();  // buffer kb % 2 landed for all; every warp is done with the other, refilled next
        if (kb + 1 < num_kb) load_keys(kb + 1, (kb + 1) % 2);
        cp_async_commit();
        if (r0 >= T) continue;  // warp-uniform
        const bf16* sKt = sK + (kb % 2) * BK * S;
        const bf16* sDt = sDs + (kb % 2) * BK * SD + warp * 16 * MT;  // the warp's query columns
        LLMC_UNROLL
        for (int ks = 0; ks < BK / 16; ks++) {
            if (kb * (BK / 16) + ks > last_step) break;  // keys past the warp's last row (or past T): dS = 0
            uint32_t af[MT][4];
            LLMC_UNROLL
            for (int mt = 0; mt < MT; mt++)  // A = dS (query, key), read transposed from dS^T
                ldmatrix_x4_trans(af[mt], sDt + (ks * 16 + (lane / 16) * 8 + lane % 8) * SD + mt * 16 +
                                              (lane / 8 % 2) * 8);
            LLMC_UNROLL
            for (int np = 0; np < NTD / 2; np++) {
                uint32_t bf[4];
                ldmatrix_x4_trans(bf, sKt + (ks * 16 + (lane / 8 % 2) * 8 + lane % 8) * S + np * 16 + (lane / 16) * 8);
                LLMC_UNROLL
                for (int mt = 0; mt < MT; mt++) {
                    mma_bf16_16816(dq[mt][2 * np], af[mt], bf, dq[mt][2 * np]);
                    mma_bf16_16816(dq[mt][2 * np + 1], af[mt], bf + 2, dq[mt][2 * np + 1]);
                }
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the tiles: the output is staged in their memory
    float mul[MT][2];
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++) mul[mt][0] = mul[mt][1] = scale;
    if (r0 < T) store_rows<HS, MT>(dqkv + at.in_qkv, 3 * C, dq, mul, sK + warp * 16 * MT * S, r0, T, lane);
}

// ---- host side ---------------------------------------------------------------------------------------------------

inline bool attention_head_size_supported(size_t hs) { return hs == 16 || hs == 32 || hs == 64 || hs == 128; }

// Refuses a shape the kernels cannot serve, with the reason (called when the model is created, before any step).
inline void check_attention_shape(size_t C, size_t NH) {
    if (NH == 0 || C % NH != 0) fail("attention: C=%zu is not a multiple of the number of heads NH=%zu", C, NH);
    if (!attention_head_size_supported(C / NH))
        fail("attention: head size C/NH = %zu/%zu = %zu is not supported by the CUDA attention kernels (supported: "
             "16, 32, 64, 128)", C, NH, C / NH);
}

// Elements of the saved state (the log-sum-exp L, fp32) and of the backward's D scratch (fp32): B NH T each.
inline size_t attention_lse_elems(size_t B, size_t T, size_t NH) { return B * NH * T; }
inline size_t attention_rowdot_elems(size_t B, size_t T, size_t NH) { return B * NH * T; }

// Host constants: c = log2(e) / sqrt(hs) and scale = 1 / sqrt(hs), computed in double and rounded once.
inline float attention_c_log2(size_t hs) { return (float)(1.4426950408889634 / std::sqrt((double)hs)); }
inline float attention_scale(size_t hs) { return (float)(1.0 / std::sqrt((double)hs)); }

inline void check_attention_args(const char* op, const void* a, const void* b, size_t B, size_t T, size_t C,
                                 size_t NH) {
    check_attention_shape(C, NH);
    if (T > (size_t)INT32_MAX / 2 || B * NH > (size_t)INT32_MAX)
        fail("%s: B=%zu T=%zu NH=%zu exceeds the kernels' 32-bit row indices", op, B, T, NH);
    if ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % 16 != 0)
        fail("%s: qkv and out must be 16-byte aligned (cp.async, 16-byte stores)", op);
}

// ---- kernel variants per device ----------------------------------------------------------------------------------
// The variants one device runs at one head size: the forward's key tile and cp.async depth. Compiled, per head size,
// in order of preference: (keys, stages) (64, 3), (64, 2), (32, 2). attention_kernels_for picks the variant with the
// most blocks resident per SM as far as shared memory goes (DeviceLimits: per block with the opt-in, per SM; capped
// at the occupancy the kernel is compiled for), the earliest in the list among equals. Results are bitwise
// reproducible on one device; another key tile adds the same terms in another order (as cuBLASLt's choice of
// algorithm does for the matmuls on another GPU). The backward has one variant per head size (its bits do not
// depend on the device); it must fit too.
struct AttentionKernels {
    int fwd_keys = 0, fwd_stages = 0;
    size_t fwd_smem = 0, dq_smem = 0, dkv_smem = 0;  // dynamic shared memory of each kernel, bytes
};

template <int HS>
bool attention_kernels_hs(const DeviceLimits& d, AttentionKernels* k) {
    using Tiles = AttentionTiles<HS>;
    static constexpr int kFwd[3][2] = {{64, 3}, {64, 2}, {32, 2}};
    int best = 0;
    for (const auto& f : kFwd) {
        const int r = resident_blocks(Tiles::fwd_smem(f[0], f[1]), Tiles::kFwdMinBlocks, d);
        if (r > best) best = r, k->fwd_keys = f[0], k->fwd_stages = f[1];
    }
    if (best == 0 || resident_blocks(Tiles::dq_smem(), 1, d) == 0 || resident_blocks(Tiles::dkv_smem(), 1, d) == 0)
        return false;
    k->fwd_smem = Tiles::fwd_smem(k->fwd_keys, k->fwd_stages);
    k->dq_smem = Tiles::dq_smem();
    k->dkv_smem = Tiles::dkv_smem();
    return true;
}

// The variants for head size hs on device d; false when no variant of some kernel fits (hs unsupported, or a device
// with less shared memory per block than the smallest variant needs).
inline bool attention_kernels_for(size_t hs, const DeviceLimits& d, AttentionKernels* k) {
    switch (hs) {
        case 16: return attention_kernels_hs<16>(d, k);
        case 32: return attention_kernels_hs<32>(d, k);
        case 64: return attention_kernels_hs<64>(d, k);
        case 128: return attention_kernels_hs<128>(d, k);
        default: return false;
    }
}

// The shared memory per block the smallest variant of every kernel needs together (the most of the three).
template <int HS>
size_t attention_min_smem() {
    using Tiles = AttentionTiles<HS>;
    return std::max(std::max(Tiles::fwd_smem(32, 2), Tiles::dq_smem()), Tiles::dkv_smem());
}

// Refuses, with the reason, a head size device d cannot run (none of the variants of some kernel fits).
inline AttentionKernels attention_kernels_or_fail(size_t hs, const DeviceLimits& d) {
    AttentionKernels k;
    if (!attention_kernels_for(hs, d, &k))
        fail("attention: no kernel for head size %zu fits this GPU (sm_%d): it allows %zu bytes of shared memory per "
             "block; the smallest variants at this head size need %zu", hs, d.cc, d.smem_per_block,
             hs == 128 ? attention_min_smem<128>() : hs == 64 ? attention_min_smem<64>()
                       : hs == 32 ? attention_min_smem<32>() : attention_min_smem<16>());
    return k;
}

template <int HS, int BC, int STAGES>
void launch_attention_forward(bf16* out, float* lse, const bf16* qkv, size_t B, size_t T, size_t NH,
                              cudaStream_t st) {
    using Tiles = AttentionTiles<HS>;
    constexpr size_t smem = Tiles::fwd_smem(BC, STAGES);
    allow_dynamic_shared(attention_forward_kernel<HS, BC, STAGES>, smem);  // per launch: ~1 us, any device
    const size_t grid = B * NH * ceil_div(T, Tiles::kFwdRows);
    LLMC_LAUNCH((attention_forward_kernel<HS, BC, STAGES>), grid_size(grid, 1), Tiles::kFwdWarps * 32, smem, st, out,
                lse, qkv, (int)T, (int)NH, attention_c_log2(HS));
}

template <int HS>
void attention_forward_hs(bf16* out, float* lse, const bf16* qkv, size_t B, size_t T, size_t NH,
                          const AttentionKernels& k, cudaStream_t st) {
    if (k.fwd_keys == 64 && k.fwd_stages == 3) launch_attention_forward<HS, 64, 3>(out, lse, qkv, B, T, NH, st);
    else if (k.fwd_keys == 64 && k.fwd_stages == 2) launch_attention_forward<HS, 64, 2>(out, lse, qkv, B, T, NH, st);
    else if (k.fwd_keys == 32 && k.fwd_stages == 2) launch_attention_forward<HS, 32, 2>(out, lse, qkv, B, T, NH, st);
    else fail("attention_forward: no compiled variant with %d keys x %d stages", k.fwd_keys, k.fwd_stages);
}

// The least workspace attention_backward accepts: the stored dS of one head. More lets a pass hold more heads.
inline size_t attention_backward_min_workspace(size_t T) { return attention_ds_head_elems(T) * sizeof(bf16); }

// Heads per pass of the backward with a workspace of `bytes`: as many as it holds (at most 65535, the dK/dV grid's
// y), evened out over the passes (768 heads in 361-head room: 3 passes of 256). 0 when not even one head fits.
inline size_t attention_heads_per_pass(size_t B, size_t T, size_t NH, size_t bytes) {
    const size_t fit = std::min(std::min(B * NH, (size_t)65535), bytes / attention_backward_min_workspace(T));
    if (fit == 0) return 0;
    const size_t passes = ceil_div(B * NH, fit);
    return ceil_div(B * NH, passes);
}

// D for every head, then per pass of `per_pass` heads: dK/dV (storing dS into ds), dQ (reading it). Stream order
// keeps a pass's dQ before the next pass overwrites ds.
template <int HS>
void attention_backward_hs(bf16* dqkv, float* rowdot, bf16* ds, size_t per_pass, const bf16* dout, const bf16* qkv,
                           const bf16* out, const float* lse, size_t B, size_t T, size_t NH, cudaStream_t st) {
    using Tiles = AttentionTiles<HS>;
    constexpr size_t dq_smem = Tiles::dq_smem(), dkv_smem = Tiles::dkv_smem();
    allow_dynamic_shared(attention_backward_dq_kernel<HS>, dq_smem);
    allow_dynamic_shared(attention_backward_dkv_kernel<HS>, dkv_smem);
    const size_t BH = B * NH, rows = BH * T;
    LLMC_LAUNCH(attention_rowdot_kernel<HS>, grid_size(rows, 256), 256, 0, st, rowdot, dout, out, (int)T, (int)NH,
                rows);
    for (size_t head0 = 0; head0 < BH; head0 += per_pass) {
        const size_t n = std::min(per_pass, BH - head0);
        LLMC_LAUNCH(attention_backward_dkv_kernel<HS>, dim3(grid_size(T, Tiles::kDkvKeys), (unsigned)n),
                    Tiles::kBwdWarps * 32, dkv_smem, st, dqkv, ds, dout, qkv, lse, (const float*)rowdot, (int)T,
                    (int)NH, (int)head0, attention_c_log2(HS), attention_scale(HS));
        LLMC_LAUNCH(attention_backward_dq_kernel<HS>, grid_size(n * ceil_div(T, Tiles::kDqRows), 1),
                    Tiles::kBwdWarps * 32, dq_smem, st, dqkv, (const bf16*)ds, qkv, (int)T, (int)NH, (int)head0,
                    attention_scale(HS));
    }
}

// out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C), with the variants k (attention_kernels_for).
inline void attention_forward(bf16* out, float* lse, const bf16* qkv, size_t B, size_t T, size_t C, size_t NH,
                              const AttentionKernels& k, cudaStream_t st) {
    check_attention_args("attention_forward", out, qkv, B, T, C, NH);
    switch (C / NH) {
        case 16: attention_forward_hs<16>(out, lse, qkv, B, T, NH, k, st); break;
        case 32: attention_forward_hs<32>(out, lse, qkv, B, T, NH, k, st); break;
        case 64: attention_forward_hs<64>(out, lse, qkv, B, T, NH, k, st); break;
        default: attention_forward_hs<128>(out, lse, qkv, B, T, NH, k, st); break;
    }
}

// dqkv (B, T, 3C) written from dout (B, T, C), qkv, out and lse of the forward; rowdot: attention_rowdot_elems floats
// of scratch (D); workspace: `workspace_bytes` bytes (16-byte aligned) the backward may overwrite, at least
// attention_backward_min_workspace(T): the stored dS of the heads of one pass.
inline void attention_backward(bf16* dqkv, float* rowdot, void* workspace, size_t workspace_bytes, const bf16* dout,
                               const bf16* qkv, const bf16* out, const float* lse, size_t B, size_t T, size_t C,
                               size_t NH, cudaStream_t st) {
    check_attention_args("attention_backward", dqkv, dout, B, T, C, NH);
    check_attention_args("attention_backward", qkv, out, B, T, C, NH);
    if (B * T == 0) return;  // no rows (and no head's dS to size a pass by: attention_backward_min_workspace(0) = 0)
    const size_t per_pass = attention_heads_per_pass(B, T, NH, workspace_bytes);
    if (per_pass == 0)
        fail("attention_backward: the workspace of %zu bytes cannot hold the dS of one head (T=%zu: %zu bytes)",
             workspace_bytes, T, attention_backward_min_workspace(T));
    if (reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
        fail("attention_backward: the workspace must be 16-byte aligned");
    bf16* ds = static_cast<bf16*>(workspace);
    switch (C / NH) {
        case 16: attention_backward_hs<16>(dqkv, rowdot, ds, per_pass, dout, qkv, out, lse, B, T, NH, st); break;
        case 32: attention_backward_hs<32>(dqkv, rowdot, ds, per_pass, dout, qkv, out, lse, B, T, NH, st); break;
        case 64: attention_backward_hs<64>(dqkv, rowdot, ds, per_pass, dout, qkv, out, lse, B, T, NH, st); break;
        default: attention_backward_hs<128>(dqkv, rowdot, ds, per_pass, dout, qkv, out, lse, B, T, NH, st); break;
    }
}

}  // namespace llmc
