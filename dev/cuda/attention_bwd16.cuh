// The attention backward as it was with 16 rows per warp (MT = 1) in both kernels: one block of 64 query rows
// (dQ) or 64 keys (dK/dV, query tiles of 64, 16 at hs = 128). A copy of llmc/cuda/attention.cuh's two backward
// kernels at that point, in namespace llmc::bwd16, built from the same building blocks (warp_mma_abt, warp_mma_pb,
// mask_tile, store_rows of llmc/cuda/attention.cuh). Not part of the trainer: dev/cuda/attention.cu times it
// against the current kernels in the same call, and test/sim/test_attention.cpp checks under the simulator that the
// current kernels produce the same bits (the fp32 order of every sum is unchanged, docs/cuda.md).
#pragma once

#include "llmc/cuda/attention.cuh"

namespace llmc {
namespace bwd16 {

template <int HS>
struct Bwd16Tiles {
    static constexpr int kStride = AttentionTiles<HS>::kStride;
    static constexpr int kBwdWarps = 4;
    static constexpr int kBwdRows = 16 * kBwdWarps;
    static constexpr int kBwdQueries = HS == 128 ? 16 : 64;
    static constexpr int kDqMinBlocks = HS == 128 ? 2 : 3;
    static constexpr int kDkvMinBlocks = HS >= 64 ? 2 : 3;
    static constexpr size_t dq_smem(int keys) { return (size_t)(2 * kBwdRows + 4 * keys) * kStride * 2; }
    static constexpr size_t dkv_smem() {
        return (size_t)(2 * kBwdRows + 4 * kBwdQueries) * kStride * 2 + 4 * kBwdQueries * sizeof(float);
    }
};

// ---- backward ----------------------------------------------------------------------------------------------------
// Kernel 1: dQ, and D_i = dO_i . O_i for kernel 2 (rowdot, (B, NH, T)). Grid: (B NH) x ceil(T / 64), head-major as
// the forward, heavy tiles first within a head. BC keys per streamed tile (double-buffered).
template <int HS, int BC>
__global__ void __launch_bounds__(Bwd16Tiles<HS>::kBwdWarps * 32, Bwd16Tiles<HS>::kDqMinBlocks)
    attention_backward_dq_kernel(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                                 const float* lse, int T, int NH, float c_log2, float scale) {
    using Tiles = Bwd16Tiles<HS>;
    static_assert(BC % 16 == 0, "key tiles of whole k16 steps");
    constexpr int BR = Tiles::kBwdRows, S = Tiles::kStride;
    constexpr int NTHREADS = Tiles::kBwdWarps * 32, NTK = BC / 8, NTD = HS / 8;
    bf16* sQ = reinterpret_cast<bf16*>(shmem);  // BR x S
    bf16* sdO = sQ + BR * S;                     // BR x S
    bf16* sK = sdO + BR * S;                     // 2 x BC x S
    bf16* sV = sK + 2 * BC * S;                  // 2 x BC x S
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int nq = (T + BR - 1) / BR, qt = nq - 1 - (int)(blockIdx.x % nq), bh = (int)(blockIdx.x / nq);
    const HeadOffsets at(bh, T, NH, HS);
    const size_t C = at.C;
    const bf16 *q = qkv + at.in_qkv, *k = q + C, *v = q + 2 * C, *dO = dout + at.in_rows, *O = out + at.in_rows;
    const int q0 = qt * BR, r0 = q0 + warp * 16;
    const int num_kt = (min(T, q0 + BR) + BC - 1) / BC;

    load_tile_async<HS, BR, NTHREADS>(sQ, q, 3 * C, q0, T, tid);
    load_tile_async<HS, BR, NTHREADS>(sdO, dO, C, q0, T, tid);
    load_tile_async<HS, BC, NTHREADS>(sK, k, 3 * C, 0, T, tid);
    load_tile_async<HS, BC, NTHREADS>(sV, v, 3 * C, 0, T, tid);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    // D and L of the lane's two rows (g and g + 8 of the warp's 16); rows past T get 0 (they are masked below).
    float D[2], L[2];
    LLMC_UNROLL
    for (int hh = 0; hh < 2; hh++) {
        const int rl = warp * 16 + g + 8 * hh, row = q0 + rl;
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
        D[hh] = row_sum4(d);
        L[hh] = row < T ? lse[(size_t)bh * T + row] : 0.0f;
        if (t4 == 0 && row < T) rowdot[(size_t)bh * T + row] = D[hh];
    }

    float dq[1][NTD][4];
    zero(dq);
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
        if (r0 >= T || k0 > r0 + 15) continue;
        const bf16* sKt = sK + (kt % 2) * BC * S;
        const bf16* sVt = sV + (kt % 2) * BC * S;
        float s[1][NTK][4], dp[1][NTK][4];
        zero(s);
        zero(dp);
        warp_mma_abt<1, HS / 16, NTK>(s, sQ + warp * 16 * S, sKt, S, lane);
        warp_mma_abt<1, HS / 16, NTK>(dp, sdO + warp * 16 * S, sVt, S, lane);
        LLMC_UNROLL
        for (int nt = 0; nt < NTK; nt++)
            LLMC_UNROLL
            for (int i = 0; i < 4; i++) s[0][nt][i] = exp2_approx(fmaf(s[0][nt][i], c_log2, -L[i / 2]));  // P
        if (k0 + BC - 1 > r0 || k0 + BC > T || r0 + 15 >= T)
            mask_tile(s, r0, k0, lane, 0.0f, [T](int row, int key) { return key <= row && key < T && row < T; });
        LLMC_UNROLL
        for (int nt = 0; nt < NTK; nt++)
            LLMC_UNROLL
            for (int i = 0; i < 4; i++) s[0][nt][i] *= dp[0][nt][i] - D[i / 2];  // dS = P (dP - D)
        warp_mma_pb<1, BC / 16, NTD>(dq, s, sKt, S, lane);
    }
    const float mul[1][2] = {{scale, scale}};
    if (r0 < T) store_rows<HS, 1>(dqkv + at.in_qkv, 3 * C, dq, mul, sQ + warp * 16 * S, r0, T, lane);
}

// Kernel 2: dK and dV. Grid: (B NH) x ceil(T / 64), head-major, within a head the key tiles with the most queries
// (the first) first.
template <int HS>
__global__ void __launch_bounds__(Bwd16Tiles<HS>::kBwdWarps * 32, Bwd16Tiles<HS>::kDkvMinBlocks)
    attention_backward_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                  const float* rowdot, int T, int NH, float c_log2, float scale) {
    using Tiles = Bwd16Tiles<HS>;
    constexpr int BK = Tiles::kBwdRows, BQ = Tiles::kBwdQueries, S = Tiles::kStride;
    constexpr int NTHREADS = Tiles::kBwdWarps * 32, NTQ = BQ / 8, NTD = HS / 8;
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
    const int k0 = kt * BK, kw0 = k0 + warp * 16;  // the block's and the warp's first key
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

    float dk[1][NTD][4], dv[1][NTD][4];
    zero(dk);
    zero(dv);
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
        float st[1][NTQ][4], dpt[1][NTQ][4];
        zero(st);
        zero(dpt);
        warp_mma_abt<1, HS / 16, NTQ>(st, sK + warp * 16 * S, sQt, S, lane);    // S^T = K Q^T
        warp_mma_abt<1, HS / 16, NTQ>(dpt, sV + warp * 16 * S, sdOt, S, lane);  // dP^T = V dO^T
        LLMC_UNROLL
        for (int nt = 0; nt < NTQ; nt++)
            LLMC_UNROLL
            for (int i = 0; i < 4; i++) {
                const int ql = nt * 8 + 2 * t4 + (i & 1);
                st[0][nt][i] = exp2_approx(fmaf(st[0][nt][i], c_log2, -sLt[ql]));  // P^T
            }
        if (qbase < kw0 + 15 || qbase + BQ > T || kw0 + 15 >= T)
            mask_tile(st, kw0, qbase, lane, 0.0f,
                      [T](int key, int query) { return query >= key && query < T && key < T; });
        LLMC_UNROLL
        for (int nt = 0; nt < NTQ; nt++)
            LLMC_UNROLL
            for (int i = 0; i < 4; i++) dpt[0][nt][i] = st[0][nt][i] * (dpt[0][nt][i] - sDt[nt * 8 + 2 * t4 + (i & 1)]);
        warp_mma_pb<1, BQ / 16, NTD>(dv, st, sdOt, S, lane);   // dV += P^T dO
        warp_mma_pb<1, BQ / 16, NTD>(dk, dpt, sQt, S, lane);   // dK += dS^T Q
    }
    if (kw0 < T) {
        bf16* dk_dst = dqkv + at.in_qkv + C;
        const float mul_k[1][2] = {{scale, scale}}, mul_v[1][2] = {{1.0f, 1.0f}};
        store_rows<HS, 1>(dk_dst, 3 * C, dk, mul_k, sK + warp * 16 * S, kw0, T, lane);
        store_rows<HS, 1>(dk_dst + C, 3 * C, dv, mul_v, sV + warp * 16 * S, kw0, T, lane);
    }
}

template <int HS, int BC>
void launch_attention_backward(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                               const float* lse, size_t B, size_t T, size_t NH, cudaStream_t st) {
    using Tiles = Bwd16Tiles<HS>;
    constexpr size_t dq_smem = Tiles::dq_smem(BC), dkv_smem = Tiles::dkv_smem();
    allow_dynamic_shared(attention_backward_dq_kernel<HS, BC>, dq_smem);
    allow_dynamic_shared(attention_backward_dkv_kernel<HS>, dkv_smem);
    const size_t grid = B * NH * ceil_div(T, Tiles::kBwdRows);
    LLMC_LAUNCH((attention_backward_dq_kernel<HS, BC>), grid_size(grid, 1), Tiles::kBwdWarps * 32, dq_smem, st, dqkv,
                rowdot, dout, qkv, out, lse, (int)T, (int)NH, attention_c_log2(HS), attention_scale(HS));
    LLMC_LAUNCH(attention_backward_dkv_kernel<HS>, grid_size(grid, 1), Tiles::kBwdWarps * 32, dkv_smem, st, dqkv,
                dout, qkv, lse, (const float*)rowdot, (int)T, (int)NH, attention_c_log2(HS), attention_scale(HS));
}

template <int HS>
void attention_backward_hs(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                           const float* lse, size_t B, size_t T, size_t NH, int dq_keys, cudaStream_t st) {
    if (dq_keys == 64) launch_attention_backward<HS, 64>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, st);
    else if (dq_keys == 32) bwd16::launch_attention_backward<HS, 32>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, st);
    else fail("attention_backward: no compiled dQ variant with %d keys", dq_keys);
}

// dqkv from the 16-row kernels with a dQ key tile of dq_keys (64 or 32; each must fit the device's shared memory).
inline void attention_backward(bf16* dqkv, float* rowdot, const bf16* dout, const bf16* qkv, const bf16* out,
                               const float* lse, size_t B, size_t T, size_t C, size_t NH, int dq_keys,
                               cudaStream_t st) {
    check_attention_args("bwd16::attention_backward", dqkv, dout, B, T, C, NH);
    switch (C / NH) {
        case 16: bwd16::attention_backward_hs<16>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, dq_keys, st); break;
        case 32: bwd16::attention_backward_hs<32>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, dq_keys, st); break;
        case 64: bwd16::attention_backward_hs<64>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, dq_keys, st); break;
        default: bwd16::attention_backward_hs<128>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, dq_keys, st); break;
    }
}

}  // namespace bwd16
}  // namespace llmc
