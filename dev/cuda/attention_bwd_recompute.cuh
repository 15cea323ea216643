// The attention backward as it was before dS went through memory: two kernels that both recompute S and P (7
// T x T x hs products instead of 5). Kernel 1 computes D and dQ (S, P, dP, dS recomputed per key tile), kernel 2 dK
// and dV (S^T, P^T, dP^T, dS^T). A copy of llmc/cuda/attention.cuh's backward at that point, in namespace
// llmc::recompute, built from the same building blocks (warp_mma_abt, warp_mma_pb, mask_tile, store_rows). Not part
// of the trainer: dev/cuda/attention.cu times it against the current backward in the same call and compares their
// bits, and test/sim/test_attention.cpp checks under the simulator that the current backward gives the same bits
// (docs/cuda.md, "dS through memory").
#pragma once

#include "llmc/cuda/attention.cuh"

namespace llmc {
namespace recompute {

// The tile sizes of the two kernels (those of llmc/cuda/attention.cuh then; the dK/dV kernel's are unchanged).
template <int HS>
struct RecomputeTiles {
    static constexpr int kStride = AttentionTiles<HS>::kStride;
    static constexpr int kBwdWarps = 4;
    static constexpr int kDqMTiles = HS == 128 ? 1 : 2;
    static constexpr int kDqRows = 16 * kBwdWarps * kDqMTiles;
    static constexpr int kDkvMTiles = HS == 128 ? 1 : 2;
    static constexpr int kDkvKeys = 16 * kBwdWarps * kDkvMTiles;
    static constexpr int kBwdQueries = HS == 128 ? 16 : 32;
    static constexpr int kDqDpKeys = HS == 64 ? 32 : 64;  // at most: min(this, the dQ kernel's key tile)
    static constexpr int kDkvDpQueries = HS == 64 ? 16 : kBwdQueries;
    static constexpr int kDqMinBlocks = HS == 16 ? 3 : 2;
    static constexpr int kDkvMinBlocks = HS == 16 ? 3 : 2;
    // Q and dO tiles + two buffers of K and V tiles of `keys` rows
    static constexpr size_t dq_smem(int keys) { return (size_t)(2 * kDqRows + 4 * keys) * kStride * 2; }
    // K and V tiles + two buffers of Q and dO tiles of kBwdQueries rows, and of their L and D
    static constexpr size_t dkv_smem() {
        return (size_t)(2 * kDkvKeys + 4 * kBwdQueries) * kStride * 2 + 4 * kBwdQueries * sizeof(float);
    }
};

// Kernel 1: dQ, and D_i = dO_i . O_i for kernel 2 (rowdot, (B, NH, T)). Grid: (B NH) x ceil(T / kDqRows), head-major
// as the forward, heavy tiles first within a head. BC keys per streamed tile (double-buffered). Each warp owns 16 MT
// query rows; a key tile that is above the diagonal for the warp's first m16 tile but not its second is masked for
// the first: its dS there is exactly 0, so dQ gets the same fp32 sums in the same k16 order as with 16 rows per warp.
template <int HS, int BC>
__global__ void __launch_bounds__(RecomputeTiles<HS>::kBwdWarps * 32, RecomputeTiles<HS>::kDqMinBlocks)
    attention_backward_dq_kernel(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                                 const float* lse, int T, int NH, float c_log2, float scale) {
    using Tiles = RecomputeTiles<HS>;
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
        LLMC_UNROLL
        for (int mt = 0; mt < MT; mt++)
            LLMC_UNROLL
            for (int nt = 0; nt < NTK; nt++)
                LLMC_UNROLL
                for (int i = 0; i < 4; i++) s[mt][nt][i] = exp2_approx(fmaf(s[mt][nt][i], c_log2, -L[mt][i / 2]));  // P
        if (k0 + BC - 1 > r0 || k0 + BC > T || r0 + 16 * MT - 1 >= T)
            mask_tile(s, r0, k0, lane, 0.0f, [T](int row, int key) { return key <= row && key < T && row < T; });
        LLMC_UNROLL
        for (int c = 0; c < BC / DPK; c++) {  // dP = dO V^T, DPK keys at a time;  dS = P (dP - D) in place of P
            float dp[MT][DPK / 8][4];
            zero(dp);
            warp_mma_abt<MT, HS / 16, DPK / 8>(dp, sdOw, sVt + c * DPK * S, S, lane);
            LLMC_UNROLL
            for (int mt = 0; mt < MT; mt++)
                LLMC_UNROLL
                for (int nt = 0; nt < DPK / 8; nt++)
                    LLMC_UNROLL
                    for (int i = 0; i < 4; i++) s[mt][c * DPK / 8 + nt][i] *= dp[mt][nt][i] - D[mt][i / 2];
        }
        warp_mma_pb<MT, BC / 16, NTD>(dq, s, sKt, S, lane);  // dQ += dS K
    }
    float mul[MT][2];
    LLMC_UNROLL
    for (int mt = 0; mt < MT; mt++) mul[mt][0] = mul[mt][1] = scale;
    if (r0 < T) store_rows<HS, MT>(dqkv + at.in_qkv, 3 * C, dq, mul, sQ + warp * 16 * MT * S, r0, T, lane);
}

// Kernel 2: dK and dV. Grid: (B NH) x ceil(T / kDkvKeys), head-major, within a head the key tiles with the most
// queries (the first) first. Each warp owns 16 MT keys. Every dK / dV element sums the 16-query chunks from the
// block's first key on in ascending order, whatever the query tile; the chunks below a warp's keys contribute exact
// zeros (P masked to 0), so the sums are the same bits as with 16 keys per warp and 64-query tiles.
template <int HS>
__global__ void __launch_bounds__(RecomputeTiles<HS>::kBwdWarps * 32, RecomputeTiles<HS>::kDkvMinBlocks)
    attention_backward_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                  const float* rowdot, int T, int NH, float c_log2, float scale) {
    using Tiles = RecomputeTiles<HS>;
    constexpr int MT = Tiles::kDkvMTiles, BK = Tiles::kDkvKeys, BQ = Tiles::kBwdQueries, S = Tiles::kStride;
    constexpr int NTHREADS = Tiles::kBwdWarps * 32, NTQ = BQ / 8, NTD = HS / 8, DPQ = Tiles::kDkvDpQueries;
    static_assert(BK % BQ == 0, "the block's first key starts a query tile");
    static_assert(BQ % DPQ == 0 && DPQ % 16 == 0, "dP^T chunks of whole k16 steps");
    bf16* sK = reinterpret_cast<bf16*>(shmem);  // BK x S
    bf16* sV = sK + BK * S;                      // BK x S
    bf16* sQ = sV + BK * S;                      // 2 x BQ x S
    bf16* sdO = sQ + 2 * BQ * S;                 // 2 x BQ x S
    float* sL = reinterpret_cast<float*>(sdO + 2 * BQ * S);  // 2 x BQ
    float* sD = sL + 2 * BQ;                                  // 2 x BQ
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, t4 = lane % 4;
    const int nk = (T + BK - 1) / BK, kt = (int)(blockIdx.x % nk), bh = (int)(blockIdx.x / nk);
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
        for (int i = tid; i < BQ; i += NTHREADS) {
            const int row = qt * BQ + i;
            sL[nb * BQ + i] = row < T ? Lg[row] : 0.0f;
            sD[nb * BQ + i] = row < T ? Dg[row] : 0.0f;
        }
    };
    load_tile_async<HS, BK, NTHREADS>(sK, k, 3 * C, k0, T, tid);
    load_tile_async<HS, BK, NTHREADS>(sV, v, 3 * C, k0, T, tid);
    load_queries(qt0, 0);
    cp_async_commit();

    float dk[MT][NTD][4], dv[MT][NTD][4];
    zero(dk);
    zero(dv);
    const bf16* sKw = sK + warp * 16 * MT * S;
    const bf16* sVw = sV + warp * 16 * MT * S;
    for (int qt = qt0; qt < num_qt; qt++) {
        const int cur = (qt - qt0) % 2;
        cp_async_wait<0>();
        __syncthreads();
        if (qt + 1 < num_qt) load_queries(qt + 1, 1 - cur);
        cp_async_commit();
        const int qbase = qt * BQ;
        if (kw0 >= T || qbase + BQ - 1 < kw0) continue;  // no query of the tile sees the warp's keys
        const bf16* sQt = sQ + cur * BQ * S;
        const bf16* sdOt = sdO + cur * BQ * S;
        const float* sLt = sL + cur * BQ;
        const float* sDt = sD + cur * BQ;
        float st[MT][NTQ][4];
        zero(st);
        warp_mma_abt<MT, HS / 16, NTQ>(st, sKw, sQt, S, lane);  // S^T = K Q^T
        LLMC_UNROLL
        for (int mt = 0; mt < MT; mt++)
            LLMC_UNROLL
            for (int nt = 0; nt < NTQ; nt++)
                LLMC_UNROLL
                for (int i = 0; i < 4; i++) {
                    const int ql = nt * 8 + 2 * t4 + (i & 1);
                    st[mt][nt][i] = exp2_approx(fmaf(st[mt][nt][i], c_log2, -sLt[ql]));  // P^T
                }
        if (qbase < kw0 + 16 * MT - 1 || qbase + BQ > T || kw0 + 16 * MT - 1 >= T)
            mask_tile(st, kw0, qbase, lane, 0.0f,
                      [T](int key, int query) { return query >= key && query < T && key < T; });
        // per chunk of DPQ queries (ascending, so every sum keeps its k16 order): dV += P^T dO, dP^T = V dO^T,
        // dS^T = P^T (dP^T - D), dK += dS^T Q
        LLMC_UNROLL
        for (int c = 0; c < BQ / DPQ; c++) {
            float pc[MT][DPQ / 8][4], dpt[MT][DPQ / 8][4];
            LLMC_UNROLL
            for (int mt = 0; mt < MT; mt++)
                LLMC_UNROLL
                for (int nt = 0; nt < DPQ / 8; nt++)
                    LLMC_UNROLL
                    for (int i = 0; i < 4; i++) pc[mt][nt][i] = st[mt][c * DPQ / 8 + nt][i];
            warp_mma_pb<MT, DPQ / 16, NTD>(dv, pc, sdOt + c * DPQ * S, S, lane);
            zero(dpt);
            warp_mma_abt<MT, HS / 16, DPQ / 8>(dpt, sVw, sdOt + c * DPQ * S, S, lane);
            LLMC_UNROLL
            for (int mt = 0; mt < MT; mt++)
                LLMC_UNROLL
                for (int nt = 0; nt < DPQ / 8; nt++)
                    LLMC_UNROLL
                    for (int i = 0; i < 4; i++) pc[mt][nt][i] *= dpt[mt][nt][i] - sDt[c * DPQ + nt * 8 + 2 * t4 + (i & 1)];
            warp_mma_pb<MT, DPQ / 16, NTD>(dk, pc, sQt + c * DPQ * S, S, lane);
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

template <int HS, int BC>
void launch_attention_backward(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                               const float* lse, size_t B, size_t T, size_t NH, cudaStream_t st) {
    using Tiles = RecomputeTiles<HS>;
    constexpr size_t dq_smem = Tiles::dq_smem(BC), dkv_smem = Tiles::dkv_smem();
    allow_dynamic_shared(attention_backward_dq_kernel<HS, BC>, dq_smem);
    allow_dynamic_shared(attention_backward_dkv_kernel<HS>, dkv_smem);
    const size_t dq_grid = B * NH * ceil_div(T, Tiles::kDqRows), dkv_grid = B * NH * ceil_div(T, Tiles::kDkvKeys);
    LLMC_LAUNCH((attention_backward_dq_kernel<HS, BC>), grid_size(dq_grid, 1), Tiles::kBwdWarps * 32, dq_smem, st,
                dqkv, rowdot, dout, qkv, out, lse, (int)T, (int)NH, attention_c_log2(HS), attention_scale(HS));
    LLMC_LAUNCH(attention_backward_dkv_kernel<HS>, grid_size(dkv_grid, 1), Tiles::kBwdWarps * 32, dkv_smem, st, dqkv,
                dout, qkv, lse, (const float*)rowdot, (int)T, (int)NH, attention_c_log2(HS), attention_scale(HS));
}

template <int HS>
bool fits_hs(int dq_keys, const DeviceLimits& d) {
    using Tiles = RecomputeTiles<HS>;
    return std::max(Tiles::dq_smem(dq_keys), Tiles::dkv_smem()) <= d.smem_per_block;
}

// Whether the two kernels with a dQ key tile of dq_keys (64 or 32) fit device d's shared memory per block.
inline bool fits(size_t hs, int dq_keys, const DeviceLimits& d) {
    switch (hs) {
        case 16: return fits_hs<16>(dq_keys, d);
        case 32: return fits_hs<32>(dq_keys, d);
        case 64: return fits_hs<64>(dq_keys, d);
        default: return fits_hs<128>(dq_keys, d);
    }
}

template <int HS>
void attention_backward_hs(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                           const float* lse, size_t B, size_t T, size_t NH, int dq_keys, cudaStream_t st) {
    if (dq_keys == 64) launch_attention_backward<HS, 64>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, st);
    else if (dq_keys == 32) launch_attention_backward<HS, 32>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, st);
    else fail("recompute::attention_backward: no compiled dQ variant with %d keys", dq_keys);
}

// dqkv (B, T, 3C) written from dout, qkv, out and lse of the forward, by the two recomputing kernels with a dQ key
// tile of dq_keys; rowdot: attention_rowdot_elems floats of scratch (D, written by kernel 1, read by kernel 2).
inline void attention_backward(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                               const float* lse, size_t B, size_t T, size_t C, size_t NH, int dq_keys,
                               cudaStream_t st) {
    check_attention_args("recompute::attention_backward", dqkv, dout, B, T, C, NH);
    check_attention_args("recompute::attention_backward", qkv, out, B, T, C, NH);
    switch (C / NH) {
        case 16: attention_backward_hs<16>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, dq_keys, st); break;
        case 32: attention_backward_hs<32>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, dq_keys, st); break;
        case 64: attention_backward_hs<64>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, dq_keys, st); break;
        default: attention_backward_hs<128>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, dq_keys, st); break;
    }
}

}  // namespace recompute
}  // namespace llmc
