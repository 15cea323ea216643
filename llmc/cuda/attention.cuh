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
// backward (dqkv written, =), D_i = sum_d dO_id O_id (= sum_j p_ij dP_ij), dS = P o (dP - D): two kernels that each
// recompute S and P (7 T x T x hs products; storing dS for a second kernel measured slower: docs/cuda.md):
//   dQ kernel, per block of 128 query rows (64 at hs = 128), over key tiles j up to the diagonal:
//     D_i = dO_i . O_i (written to rowdot, (B, NH, T) fp32, for the other kernel);  S = Q K_j^T, P = 2^(S c - L),
//     dP = dO V_j^T, dS = P o (dP - D), dQ += dS K_j;   dq = scale dQ
//   dK/dV kernel, after it, per block of 128 keys (64 at hs = 128), over query tiles i from the diagonal on:
//     S^T = K Q_i^T, P^T = 2^(S^T c - L_i), dV += P^T dO_i, dP^T = V dO_i^T, dS^T = P^T o (dP^T - D_i),
//     dK += dS^T Q_i;   dk = scale dK, dv = dV
//   Each warp owns 32 rows (16 at hs = 128) of its kernel. Each output row is written by exactly one warp, once: no
//   atomics, so the result is the same bits on every run.
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

// Tile sizes per head size (docs/cuda.md explains the choice: registers, shared memory, occupancy). The key tiles of
// the forward and of the dQ kernel and the forward's cp.async depth are template parameters chosen on the host from
// the device's shared memory (attention_kernels_for); fwd_smem, dq_smem and dkv_smem give each kernel's bytes.
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
    // block), K and V streamed in tiles of 64 or 32 keys (the device's choice), dP computed kDqDpKeys keys at a time
    // (fewer live registers at hs = 64).
    static constexpr int kBwdWarps = 4;
    static constexpr int kDqMTiles = HS == 128 ? 1 : 2;
    static constexpr int kDqRows = 16 * kBwdWarps * kDqMTiles;
    static constexpr int kDqDpKeys = HS == 64 ? 32 : 64;  // at most: min(this, the dQ kernel's key tile)
    static constexpr int kDkvMTiles = HS == 128 ? 1 : 2;
    static constexpr int kDkvKeys = 16 * kBwdWarps * kDkvMTiles;
    static constexpr int kBwdQueries = HS == 128 ? 16 : 32;
    // Blocks per SM each kernel is compiled for (__launch_bounds__): the register budget ptxas may use, 65536 /
    // (threads x blocks). Chosen as the most blocks whose budget holds the kernel without spilling on sm_80 and
    // sm_90 (docs/cuda.md lists the resulting register counts).
    static constexpr int kFwdMinBlocks = HS == 128 ? 1 : HS == 64 ? 2 : 3;
    static constexpr int kDqMinBlocks = HS == 16 ? 3 : 2;
    static constexpr int kDkvMinBlocks = HS == 16 ? 3 : 2;
    // Q tile + `stages` buffers of K and V tiles of `keys` rows
    static constexpr size_t fwd_smem(int keys, int stages) {
        return (size_t)(kFwdRows + 2 * stages * keys) * kStride * 2;
    }
    // Q and dO tiles + two buffers of K and V tiles of `keys` rows
    static constexpr size_t dq_smem(int keys) { return (size_t)(2 * kDqRows + 4 * keys) * kStride * 2; }
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

// f(mt, nt, i) for every element acc[mt][nt][i] of a lane's MT x NT accumulator tiles (m16n8 fragments: element i of
// a tile is at the fragment's row g + 8 (i / 2) and column 2 t + (i & 1)).
template <int MT, int NT, class F>
__device__ __forceinline__ void for_each_acc(const float (&acc)[MT][NT][4], F&& f) {
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++)
        LLMC_UNROLL
        for (int nt = 0; nt < NT; nt++)
            LLMC_UNROLL
            for (int i = 0; i < 4; i++) f(mt, nt, i);
}

// Sets acc[mt][nt][i] to `value` where keep(row, col) is false, for the element's row = row0 + 16 mt + g + 8 (i / 2)
// and column col0 + 8 nt + 2 t + (i & 1) (g = lane / 4, t = lane % 4): the causal and end-of-sequence masks.
template <int MT, int NT, class Keep>
__device__ __forceinline__ void mask_tile(float (&acc)[MT][NT][4], int row0, int col0, int lane, float value,
                                          Keep keep) {
    for_each_acc(acc, [&](int mt, int nt, int i) {
        if (!keep(row0 + mt * 16 + lane / 4 + 8 * (i / 2), col0 + nt * 8 + 2 * (lane % 4) + (i & 1)))
            acc[mt][nt][i] = value;
    });
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
    for_each_acc(acc, [&](int mt, int nt, int i) { acc[mt][nt][i] = 0.0f; });
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
// dQ, and D_i = dO_i . O_i for the dK/dV kernel (rowdot, (B, NH, T)). Grid: (B NH) x ceil(T / kDqRows), head-major
// as the forward, heavy tiles first within a head. BC keys per streamed tile (double-buffered). Each warp owns 16 MT
// query rows; a key tile that is above the diagonal for the warp's first m16 tile but not its second is masked for
// the first: its dS there is exactly 0, so dQ gets the same fp32 sums in the same k16 order as with 16 rows per warp.
template <int HS, int BC>
__global__ void __launch_bounds__(AttentionTiles<HS>::kBwdWarps * 32, AttentionTiles<HS>::kDqMinBlocks)
    attention_backward_dq_kernel(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                                 const float* lse, int T, int NH, float c_log2, float scale) {
    using Tiles = AttentionTiles<HS>;
    static_assert(BC % 16 == 0, "key tiles of whole k16 steps");
    constexpr int MT = Tiles::kDqMTiles, BR = Tiles::kDqRows, S = Tiles::kStride, DPK = BC < Tiles::kDqDpKeys ? BC : Tiles::kDqDpKeys;
    constexpr int NTHREADS = Tiles::kBwdWarps * 32, NTK = BC / 8, NTD = HS / 8;
    static_assert(BC % DPK == 0 && DPK % 16 == 0, "dP chunks of whole k16 steps");
    bf16* sQ = reinterpret_cast<bf16*>(shmem);  // BR x S
    bf16* sdO = sQ + BR * S;                     // BR x S
    bf16* sK = sdO + BR * S;                     // 2 x BC x S
    bf16* sV = sK + 2 * BC * S;                  // 2 x BC x S
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int nq = (T + BR - 1) / BR, qt = nq - 1 - (int)(blockIdx.x % nq), bh = (int)(blockIdx.x / nq);
    const HeadOffsets at(bh, T, NH, HS);
    const size_t C = at.C;
    const bf16 *q = qkv + at.in_qkv, *k = q + C, *v = q + 2 * C, *dO = dout + at.in_rows, *O = out + at.in_rows;
    const int q0 = qt * BR, r0 = q0 + warp * 16 * MT;  // the block's and the warp's first query row
    const int num_kt = (min(T, q0 + BR) + BC - 1) / BC;

    load_tile_async<HS, BR, NTHREADS>(sQ, q, 3 * C, q0, T, tid);
    load_tile_async<HS, BR, NTHREADS>(sdO, dO, C, q0, T, tid);
    load_tile_async<HS, BC, NTHREADS>(sK, k, 3 * C, 0, T, tid);
    load_tile_async<HS, BC, NTHREADS>(sV, v, 3 * C, 0, T, tid);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    // D and L of the lane's rows (g and g + 8 of each of the warp's m16 tiles); rows past T get 0 (masked below).
    float D[MT][2], L[MT][2];
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++)
        LLMC_UNROLL
        for (int hh = 0; hh < 2; hh++) {
            const int rl = warp * 16 * MT + mt * 16 + g + 8 * hh, row = q0 + rl;
            float d = 0.0f;
            if (row < T) {
                LLMC_UNROLL
                for (int nt = 0; nt < NTD; nt++) {
                    const int col = nt * 8 + 2 * t4;
                    const __nv_bfloat162 o2 = *reinterpret_cast<const __nv_bfloat162*>(O + (size_t)row * C + col);
                    const __nv_bfloat162 g2 = *reinterpret_cast<const __nv_bfloat162*>(sdO + rl * S + col);
                    d += to_float(g2.x) * to_float(o2.x);
                    d += to_float(g2.y) * to_float(o2.y);
                }
            }
            D[mt][hh] = row_sum4(d);
            L[mt][hh] = row < T ? lse[(size_t)bh * T + row] : 0.0f;
            if (t4 == 0 && row < T) rowdot[(size_t)bh * T + row] = D[mt][hh];
        }

    float dq[MT][NTD][4];
    zero(dq);
    const bf16* sQw = sQ + warp * 16 * MT * S;
    const bf16* sdOw = sdO + warp * 16 * MT * S;
    for (int kt = 0; kt < num_kt; kt++) {
        cp_async_wait<0>();
        __syncthreads();
        if (kt + 1 < num_kt) {
            const int nb = (kt + 1) % 2;
            load_tile_async<HS, BC, NTHREADS>(sK + nb * BC * S, k, 3 * C, (kt + 1) * BC, T, tid);
            load_tile_async<HS, BC, NTHREADS>(sV + nb * BC * S, v, 3 * C, (kt + 1) * BC, T, tid);
        }
        cp_async_commit();
        const int k0 = kt * BC;
        if (r0 >= T || k0 > r0 + 16 * MT - 1) continue;  // warp-uniform: no row of this warp sees these keys
        const bf16* sKt = sK + (kt % 2) * BC * S;
        const bf16* sVt = sV + (kt % 2) * BC * S;
        float s[MT][NTK][4];
        zero(s);
        warp_mma_abt<MT, HS / 16, NTK>(s, sQw, sKt, S, lane);  // S = Q K^T
        for_each_acc(s, [&](int mt, int nt, int i) {  // P
            s[mt][nt][i] = exp2_approx(fmaf(s[mt][nt][i], c_log2, -L[mt][i / 2]));
        });
        if (k0 + BC - 1 > r0 || k0 + BC > T || r0 + 16 * MT - 1 >= T)
            mask_tile(s, r0, k0, lane, 0.0f, [T](int row, int key) { return key <= row && key < T && row < T; });
        LLMC_UNROLL
        for (int c = 0; c < BC / DPK; c++) {  // dP = dO V^T, DPK keys at a time;  dS = P (dP - D) in place of P
            float dp[MT][DPK / 8][4];
            zero(dp);
            warp_mma_abt<MT, HS / 16, DPK / 8>(dp, sdOw, sVt + c * DPK * S, S, lane);
            for_each_acc(dp, [&](int mt, int nt, int i) {
                s[mt][c * DPK / 8 + nt][i] *= dp[mt][nt][i] - D[mt][i / 2];
            });
        }
        warp_mma_pb<MT, BC / 16, NTD>(dq, s, sKt, S, lane);  // dQ += dS K
    }
    float mul[MT][2];
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++) mul[mt][0] = mul[mt][1] = scale;
    if (r0 < T) store_rows<HS, MT>(dqkv + at.in_qkv, 3 * C, dq, mul, sQ + warp * 16 * MT * S, r0, T, lane);
}

// dK and dV, after the dQ kernel (which wrote D). Grid: x the ceil(T / kDkvKeys) key tiles, y the heads of the
// launch (bh = head0 + y, bh = b NH + h; a launch covers at most 65535 heads, gridDim.y's limit); blocks are numbered
// x fastest, so the grid is head-major, within a head the key tiles with the most queries (the first) first.
// Each warp owns 16 MT keys. Every dK / dV element sums the 16-query k16 steps from the block's first key on in
// ascending order, whatever the query tile; the steps below a warp's keys contribute exact zeros (P masked to 0), so
// the sums are the same bits as with 16 keys per warp and 64-query tiles.
template <int HS>
__global__ void __launch_bounds__(AttentionTiles<HS>::kBwdWarps * 32, AttentionTiles<HS>::kDkvMinBlocks)
    attention_backward_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
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
    const int kt = (int)blockIdx.x, bh = head0 + (int)blockIdx.y;  // key tile, head (blockIdx.y: of the launch)
    const HeadOffsets at(bh, T, NH, HS);
    const size_t C = at.C;
    const bf16 *q = qkv + at.in_qkv, *k = q + C, *v = q + 2 * C, *dO = dout + at.in_rows;
    const float* Lg = lse + (size_t)bh * T;
    const float* Dg = rowdot + (size_t)bh * T;
    const int k0 = kt * BK, kw0 = k0 + warp * 16 * MT;  // the block's and the warp's first key
    const int qt0 = k0 / BQ, num_qt = (T + BQ - 1) / BQ;

    // Query tile qt into buffer nb, all by cp.async: Q and dO, and L and D (4-byte copies: a head's rows start at
    // bh T floats, 16-byte aligned only when T is a multiple of 4; zero-filled past T, where they are masked). Plain
    // loads of L and D would stall each of their threads for a global load right before its shared store.
    auto load_queries = [&](int qt, int nb) {
        load_tile_async<HS, BQ, NTHREADS>(sQ + nb * BQ * S, q, 3 * C, qt * BQ, T, tid);
        load_tile_async<HS, BQ, NTHREADS>(sdO + nb * BQ * S, dO, C, qt * BQ, T, tid);
        if (tid < BQ) {
            const int row = qt * BQ + tid;
            const bool ok = row < T;
            cp_async_4(sL + nb * BQ + tid, ok ? Lg + row : Lg, ok);
            cp_async_4(sD + nb * BQ + tid, ok ? Dg + row : Dg, ok);
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
        for_each_acc(st, [&](int mt, int nt, int i) {  // P^T
            st[mt][nt][i] = exp2_approx(fmaf(st[mt][nt][i], c_log2, -sLl[nt * 8 + (i & 1)]));
        });
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
        for_each_acc(dpt, [&](int mt, int nt, int i) {  // dS^T = P^T (dP^T - D)
            st[mt][nt][i] *= dpt[mt][nt][i] - sLl[2 * BQ + nt * 8 + (i & 1)];
        });
        LLMC_UNROLL
        for (int ks = 0; ks < BQ / 16; ks++) {  // dK += dS^T Q
            uint32_t dsf[MT][4];
            pack_a_fragment(dsf, st, ks);
            lane_mma_fb_step<MT, NTD, S>(dk, dsf, sQl, ks);
        }
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
// The variants one device runs at one head size: the forward's key tile and cp.async depth, and the dQ kernel's key
// tile. Forward, compiled per head size in order of preference: (keys, stages) (64, 3), (64, 2), (32, 2);
// attention_kernels_for picks the variant with the most blocks resident per SM as far as shared memory goes
// (DeviceLimits: per block with the opt-in, per SM; capped at the occupancy the kernel is compiled for), the earliest
// in the list among equals. Results are bitwise reproducible on one device; another forward key tile adds the same
// terms in another order (as cuBLASLt's choice of algorithm does for the matmuls on another GPU). The dQ kernel
// streams 64 keys per tile where its shared memory fits a block, else 32: its sums run over the keys in k16 steps
// in ascending order either way, so the backward's bits do not depend on the device.
struct AttentionKernels {
    int fwd_keys = 0, fwd_stages = 0, dq_keys = 0;
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
    k->dq_keys = resident_blocks(Tiles::dq_smem(64), 1, d) > 0 ? 64 : 32;
    if (best == 0 || resident_blocks(Tiles::dq_smem(k->dq_keys), 1, d) == 0 ||
        resident_blocks(Tiles::dkv_smem(), 1, d) == 0)
        return false;
    k->fwd_smem = Tiles::fwd_smem(k->fwd_keys, k->fwd_stages);
    k->dq_smem = Tiles::dq_smem(k->dq_keys);
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
    return std::max(std::max(Tiles::fwd_smem(32, 2), Tiles::dq_smem(32)), Tiles::dkv_smem());
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

// f(head0, n) for consecutive runs of at most `most` of BH heads: the dK/dV kernel's launches, whose grid has the
// heads as y (at most 65535 on every GPU).
constexpr size_t kAttentionMaxGridY = 65535;
template <class F>
void for_each_head_chunk(size_t BH, size_t most, F f) {
    for (size_t head0 = 0; head0 < BH; head0 += most) f(head0, std::min(BH - head0, most));
}

// The backward's two launches: dQ with D (into rowdot) for every head, then dK and dV, which read D.
template <int HS, int BC>
void launch_attention_dq(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                         const float* lse, size_t B, size_t T, size_t NH, cudaStream_t st) {
    using Tiles = AttentionTiles<HS>;
    constexpr size_t smem = Tiles::dq_smem(BC);
    allow_dynamic_shared(attention_backward_dq_kernel<HS, BC>, smem);
    LLMC_LAUNCH((attention_backward_dq_kernel<HS, BC>), grid_size(B * NH * ceil_div(T, Tiles::kDqRows), 1),
                Tiles::kBwdWarps * 32, smem, st, dqkv, rowdot, dout, qkv, out, lse, (int)T, (int)NH,
                attention_c_log2(HS), attention_scale(HS));
}
template <int HS>
void launch_attention_dkv(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* rowdot,
                          size_t B, size_t T, size_t NH, cudaStream_t st) {
    using Tiles = AttentionTiles<HS>;
    allow_dynamic_shared(attention_backward_dkv_kernel<HS>, Tiles::dkv_smem());
    for_each_head_chunk(B * NH, kAttentionMaxGridY, [&](size_t head0, size_t n) {
        LLMC_LAUNCH(attention_backward_dkv_kernel<HS>, dim3(grid_size(T, Tiles::kDkvKeys), (unsigned)n),
                    Tiles::kBwdWarps * 32, Tiles::dkv_smem(), st, dqkv, dout, qkv, lse, rowdot, (int)T, (int)NH,
                    (int)head0, attention_c_log2(HS), attention_scale(HS));
    });
}

template <int HS>
void attention_backward_hs(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                           const float* lse, size_t B, size_t T, size_t NH, const AttentionKernels& k,
                           cudaStream_t st) {
    if (k.dq_keys == 64) launch_attention_dq<HS, 64>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, st);
    else if (k.dq_keys == 32) launch_attention_dq<HS, 32>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, st);
    else fail("attention_backward: no compiled dQ variant with %d keys", k.dq_keys);
    launch_attention_dkv<HS>(dqkv, dout, qkv, lse, rowdot, B, T, NH, st);
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

// dqkv (B, T, 3C) written from dout (B, T, C), qkv, out and lse of the forward, with the variants k; rowdot:
// attention_rowdot_elems floats of scratch (D).
inline void attention_backward(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                               const float* lse, size_t B, size_t T, size_t C, size_t NH, const AttentionKernels& k,
                               cudaStream_t st) {
    check_attention_args("attention_backward", dqkv, dout, B, T, C, NH);
    check_attention_args("attention_backward", qkv, out, B, T, C, NH);
    if (B * T == 0) return;  // no rows: nothing to launch (an empty grid is a launch error)
    switch (C / NH) {
        case 16: attention_backward_hs<16>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, k, st); break;
        case 32: attention_backward_hs<32>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, k, st); break;
        case 64: attention_backward_hs<64>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, k, st); break;
        default: attention_backward_hs<128>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, k, st); break;
    }
}

}  // namespace llmc
