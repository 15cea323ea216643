// The speedrun recipe's CUDA kernels under the simulator (llmc/cuda/speedrun_ops.h: RMSNorm, the fused residual +
// RMSNorm, QK-norm + rotary, ReLU^2, the soft-capped classifier) against the CPU ops (llmc/cpu/), under every thread
// order (bitwise equal results), on the vector path and the scalar path (sizes not a multiple of the pack width, a
// misaligned pointer), rows longer than the registers hold, and within error bounds derived from the arithmetic (U, G:
// see test/fixtures/sim_check.h). Inputs are rounded to bf16 first, so both sides see the same values. Then the
// CudaBackend's members of the recipe against these free functions, and its scalar mixes (the embedding skip and the
// value residual) against CpuBackend's members.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cudasim.h"
#include "llmc/cpu/cpu_backend.h"
#include "llmc/cpu/cpu_classifier.h"
#include "llmc/cpu/cpu_qk_rotary.h"
#include "llmc/cpu/cpu_relu2.h"
#include "llmc/cpu/cpu_rmsnorm.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/softcap_classifier.cuh"
#include "llmc/cuda/speedrun_ops.h"
#include "llmc/error.h"
#include "llmc/rotary_table.h"
#include "test/fixtures/sim_check.h"
#include "test/fixtures/testing.h"

using llmc::CpuBackend;
using llmc::CudaBackend;
using namespace simcheck;

namespace {

std::mt19937_64 rng(20241106);

// Random values already representable in bf16, so both sides start from identical inputs.
Vec random_bf16(std::mt19937_64& gen, size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    Vec v(n);
    for (auto& x : v) x = d(gen);
    return round_bf16(v);
}

bool same_bits(const Vec& a, const Vec& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- RMSNorm -----------------------------------------------------------------------------------------------------
// rstd = (ss / C + eps)^-1/2 with ss an fp32 sum of C squares on each side (G(C) relative, the terms being positive),
// halved by the square root, plus rsqrtf's 2 ulp (2^-22) and the CPU's sqrt and division (2^-23) and the division by C
// and the eps addition (2 u32): rel_r = G(C) / 2 + 2^-21. out = round(x r): U |out| + |x r| (rel_r + 2 u32).
// Backward (both sides given the CPU's rstd): proj = mean(g x r), an fp32 sum of C products of two roundings each:
// err_proj <= (G(C) + 4 u32) mean|g xhat|; dinp = round(dinp0 + r (g - xhat proj)): r (|xhat| err_proj + 4 u32 (|g| +
// |xhat proj|)) + (U + u32) |want|.
void check_rmsnorm_forward(const std::string& tag, const Outputs& f, const Vec& x, const Vec& out_ref,
                           const Vec& rstd_ref, size_t N, size_t C) {
    const double rel_r = G(C) / 2 + 0x1p-21;
    Bound bo(N * C), br(N);
    for (size_t n = 0; n < N; n++) {
        br[n] = rel_r * rstd_ref[n];
        for (size_t c = 0; c < C; c++)
            bo[n * C + c] =
                U * std::fabs(out_ref[n * C + c]) + std::fabs(x[n * C + c] * rstd_ref[n]) * (rel_r + 2 * u32);
    }
    check_bound(tag + " forward out", f[0], out_ref, bo);
    check_bound(tag + " forward rstd", f[1], rstd_ref, br);
}

void test_rmsnorm(CudaBackend& gpu, size_t N, size_t C, size_t offset = 0) {
    const std::string tag = "rmsnorm N=" + std::to_string(N) + " C=" + std::to_string(C) +
                            (offset ? " misaligned" : "");
    const bool vector = C % 8 == 0 && offset == 0;
    Arena a(gpu);
    const Vec x = random_bf16(rng, N * C, -2.0f, 2.6f);
    Vec out_ref(N * C), rstd_ref(N);
    llmc::rmsnorm_forward(out_ref.data(), rstd_ref.data(), x.data(), N, C, 1);
    bf16 *d_x = a.bf(N * C + offset) + offset, *d_out = a.bf(N * C + offset) + offset;
    float* d_rstd = a.f32(N);
    put(gpu, d_x, x);
    const Outputs f = run_orders_on_path(tag + " forward", vector, [&](bool& vec) {
        vec = llmc::speedrun::rmsnorm_forward(d_out, d_rstd, d_x, N, C, gpu.stream());
        return Outputs{get(gpu, d_out, N * C), get(gpu, d_rstd, N)};
    });
    check_rmsnorm_forward(tag, f, x, out_ref, rstd_ref, N, C);

    const Vec dout = random_bf16(rng, N * C, -1, 1), dinp0 = random_bf16(rng, N * C, -1, 1);
    Vec dinp_ref = dinp0;
    llmc::rmsnorm_backward(dinp_ref.data(), dout.data(), x.data(), rstd_ref.data(), N, C, 1);
    bf16 *d_dout = a.bf(N * C + offset) + offset, *d_dinp = a.bf(N * C + offset) + offset;
    put(gpu, d_dout, dout);
    const Outputs b = run_orders_on_path(tag + " backward", vector, [&](bool& vec) {
        put(gpu, d_dinp, dinp0);
        put(gpu, d_rstd, rstd_ref);
        vec = llmc::speedrun::rmsnorm_backward(d_dinp, d_dout, d_x, d_rstd, N, C, gpu.stream());
        return Outputs{get(gpu, d_dinp, N * C)};
    });
    Bound bd(N * C);
    for (size_t n = 0; n < N; n++) {
        const double r = rstd_ref[n];
        double proj = 0, mabs = 0;
        for (size_t c = 0; c < C; c++) {
            proj += (double)dout[n * C + c] * x[n * C + c] * r / C;
            mabs += std::fabs((double)dout[n * C + c] * x[n * C + c] * r) / C;
        }
        const double err_proj = (G(C) + 4 * u32) * mabs;
        for (size_t c = 0; c < C; c++) {
            const size_t i = n * C + c;
            const double xh = std::fabs(x[i] * r);
            bd[i] = r * (xh * err_proj + 4 * u32 * (std::fabs(dout[i]) + xh * std::fabs(proj))) +
                    (U + u32) * std::fabs(dinp_ref[i]);
        }
    }
    check_bound(tag + " backward dinp (+=)", b[0], dinp_ref, bd);
}

// ---- fused residual + RMSNorm ------------------------------------------------------------------------------------
// residual = round(inp1 + inp2): one fp32 addition and one rounding to nearest even on both sides, so the host's
// round_bf16(a + b) is the same bits (bound 0). The norm is of that rounded residual: the CPU's RMSNorm of it with the
// bounds above, and bit for bit rmsnorm_forward run on the fused op's own residual on the same path (the same lanes,
// packs and order of the sum of squares). `misalign`: which buffer starts one element off (0: none; 1 residual,
// 2 out, 3 inp1, 4 inp2), each alone sending the launch to the scalar path.
void test_fused_residual_rmsnorm(CudaBackend& gpu, size_t N, size_t C, int misalign = 0) {
    const std::string tag = "fused_residual_rmsnorm N=" + std::to_string(N) + " C=" + std::to_string(C) +
                            (misalign ? " buffer " + std::to_string(misalign) + " misaligned" : "");
    const bool vector = C % 8 == 0 && misalign == 0;
    Arena a(gpu);
    const Vec x1 = random_bf16(rng, N * C, -2.0f, 2.6f), x2 = random_bf16(rng, N * C, -1.5f, 1.0f);
    Vec res_ref(N * C);
    for (size_t i = 0; i < N * C; i++) res_ref[i] = x1[i] + x2[i];
    res_ref = round_bf16(res_ref);
    Vec out_ref(N * C), rstd_ref(N);
    llmc::rmsnorm_forward(out_ref.data(), rstd_ref.data(), res_ref.data(), N, C, 1);
    auto buffer = [&](int k) { return a.bf(N * C + 1) + (misalign == k ? 1 : 0); };
    bf16 *d_res = buffer(1), *d_out = buffer(2), *d_x1 = buffer(3), *d_x2 = buffer(4);
    bf16 *d_res2 = a.bf(N * C + 1) + (vector ? 0 : 1), *d_out2 = a.bf(N * C);
    float *d_rstd = a.f32(N), *d_rstd2 = a.f32(N);
    put(gpu, d_x1, x1);
    put(gpu, d_x2, x2);
    const Outputs f = run_orders_on_path(tag, vector, [&](bool& vec) {
        vec = llmc::speedrun::fused_residual_rmsnorm_forward(d_res, d_out, d_rstd, d_x1, d_x2, N, C, gpu.stream());
        return Outputs{get(gpu, d_out, N * C), get(gpu, d_rstd, N), get(gpu, d_res, N * C)};
    });
    check_bound(tag + " residual = round(inp1 + inp2)", f[2], res_ref, Bound(N * C, 0.0));
    check_rmsnorm_forward(tag, f, res_ref, out_ref, rstd_ref, N, C);
    put(gpu, d_res2, f[2]);
    const bool vec2 = llmc::speedrun::rmsnorm_forward(d_out2, d_rstd2, d_res2, N, C, gpu.stream());
    testing::check(tag + ": out and rstd bitwise those of rmsnorm_forward on its residual",
                   vec2 == vector && same_bits(get(gpu, d_out2, N * C), f[0]) && same_bits(get(gpu, d_rstd2, N), f[1]));
}

// ---- QK-norm + rotary ------------------------------------------------------------------------------------------
// Forward, per head: rel_r = G(hs) / 2 + 2^-21 as for RMSNorm; y1 = (x1 r) cos + (x2 r) sin is three roundings per
// side of terms bounded by r (|x1 cos| + |x2 sin|) (the same fp32 table on both sides): U |y| + r (|x1 c| + |x2 s|)
// (rel_r + 6 u32). Backward (both sides given the forward's stored bf16 output and the CPU's rstd): g = R^T dy and
// n = R^T y carry 3 u32 per side of |g|a = |dy1 c| + |dy2 s| and |n|a (likewise); proj = mean(g n):
// err_proj <= (G(hs) + 12 u32) mean(|g|a |n|a); dx = round(r (g - n proj)): r (6 u32 (|g|a + |n|a |proj|) + |n|a
// err_proj + 4 u32 (|g| + |n proj|)) + U |want|. v and dv are untouched: bound 0.
struct HeadRef {
    std::vector<double> g, n, ga, na;  // R^T dy, R^T y, and their magnitude sums, one per channel
};
HeadRef turn_back(const Vec& dy, const Vec& y, const Vec& table, size_t off, size_t t, size_t hs) {
    const size_t h = hs / 2;
    HeadRef r{std::vector<double>(hs), std::vector<double>(hs), std::vector<double>(hs), std::vector<double>(hs)};
    for (size_t i = 0; i < h; i++) {
        const double c = table[t * hs + i], s = table[t * hs + h + i];
        const double d1 = dy[off + i], d2 = dy[off + h + i], y1 = y[off + i], y2 = y[off + h + i];
        r.g[i] = d1 * c - d2 * s, r.g[h + i] = d2 * c + d1 * s;
        r.n[i] = y1 * c - y2 * s, r.n[h + i] = y2 * c + y1 * s;
        r.ga[i] = std::fabs(d1 * c) + std::fabs(d2 * s), r.ga[h + i] = std::fabs(d2 * c) + std::fabs(d1 * s);
        r.na[i] = std::fabs(y1 * c) + std::fabs(y2 * s), r.na[h + i] = std::fabs(y2 * c) + std::fabs(y1 * s);
    }
    return r;
}

void test_qk_rotary(CudaBackend& gpu, size_t B, size_t T, size_t C, size_t NH) {
    const size_t hs = C / NH, h = hs / 2, n3 = B * T * 3 * C, nr = llmc::qk_rotary_rstd_floats(B, T, NH);
    const std::string tag = "qk_norm_rotary B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" +
                            std::to_string(C) + " NH=" + std::to_string(NH);
    const bool vector = hs % 16 == 0;
    Arena a(gpu);
    const Vec qkv = random_bf16(rng, n3, -1.5f, 2.0f), table = llmc::rotary_table(T, hs);
    Vec ref = qkv, rstd_ref(nr);
    llmc::qk_norm_rotary_forward(ref.data(), rstd_ref.data(), table.data(), B, T, C, NH, 1);
    bf16* d_qkv = a.bf(n3);
    float *d_rstd = a.f32(nr), *d_table = a.f32(table.size());
    put(gpu, d_table, table);
    const Outputs f = run_orders_on_path(tag + " forward", vector, [&](bool& vec) {
        put(gpu, d_qkv, qkv);
        vec = llmc::speedrun::qk_norm_rotary_forward(d_qkv, d_rstd, d_table, B, T, C, NH, gpu.stream());
        return Outputs{get(gpu, d_qkv, n3), get(gpu, d_rstd, nr)};
    });
    const double rel_r = G(hs) / 2 + 0x1p-21;
    Bound by(n3, 0.0), br(nr);
    for (size_t p = 0; p < B * T; p++)
        for (size_t head = 0; head < 2 * NH; head++) {
            const size_t off = p * 3 * C + head * hs, t = p % T;
            const double r = rstd_ref[p * 2 * NH + head];
            br[p * 2 * NH + head] = rel_r * r;
            for (size_t i = 0; i < h; i++) {
                const double c = std::fabs(table[t * hs + i]), s = std::fabs(table[t * hs + h + i]);
                const double x1 = std::fabs(qkv[off + i]), x2 = std::fabs(qkv[off + h + i]);
                by[off + i] = U * std::fabs(ref[off + i]) + r * (x1 * c + x2 * s) * (rel_r + 6 * u32);
                by[off + h + i] = U * std::fabs(ref[off + h + i]) + r * (x2 * c + x1 * s) * (rel_r + 6 * u32);
            }
        }
    check_bound(tag + " forward q, k in place (v untouched)", f[0], ref, by);
    check_bound(tag + " forward rstd", f[1], rstd_ref, br);

    const Vec y = f[0], dy = random_bf16(rng, n3, -1, 1);
    Vec dref = dy;
    llmc::qk_norm_rotary_backward(dref.data(), y.data(), rstd_ref.data(), table.data(), B, T, C, NH, 1);
    bf16* d_dqkv = a.bf(n3);
    const Outputs b = run_orders_on_path(tag + " backward", vector, [&](bool& vec) {
        put(gpu, d_qkv, y);
        put(gpu, d_dqkv, dy);
        put(gpu, d_rstd, rstd_ref);
        vec = llmc::speedrun::qk_norm_rotary_backward(d_dqkv, d_qkv, d_rstd, d_table, B, T, C, NH, gpu.stream());
        return Outputs{get(gpu, d_dqkv, n3)};
    });
    Bound bd(n3, 0.0);
    for (size_t p = 0; p < B * T; p++)
        for (size_t head = 0; head < 2 * NH; head++) {
            const size_t off = p * 3 * C + head * hs;
            const double r = rstd_ref[p * 2 * NH + head];
            const HeadRef e = turn_back(dy, y, table, off, p % T, hs);
            double proj = 0, mabs = 0;
            for (size_t i = 0; i < hs; i++) proj += e.g[i] * e.n[i] / hs, mabs += e.ga[i] * e.na[i] / hs;
            const double err_proj = (G(hs) + 12 * u32) * mabs;
            for (size_t i = 0; i < hs; i++)
                bd[off + i] = r * (6 * u32 * (e.ga[i] + e.na[i] * std::fabs(proj)) + e.na[i] * err_proj +
                                   4 * u32 * (std::fabs(e.g[i]) + std::fabs(e.n[i] * proj))) +
                              U * std::fabs(dref[off + i]);
        }
    check_bound(tag + " backward dqkv in place (dv untouched)", b[0], dref, bd);
}

// ---- ReLU^2 -----------------------------------------------------------------------------------------------------
// out = round(r r): one fp32 rounding per side and the bf16 one: (U + 2 u32) |want|. dout *= 2 max(x, 0): two fp32
// roundings per side: (U + 4 u32) |want|.
void test_relu2(CudaBackend& gpu, size_t n, size_t offset = 0) {
    const std::string tag = "relu2 n=" + std::to_string(n) + (offset ? " misaligned" : "");
    const bool vector = n % 8 == 0 && offset == 0;
    Arena a(gpu);
    Vec x = random_bf16(rng, n, -3, 3);
    x[0] = 0.0f, x[n / 2] = -0.0f;
    const Vec dy = random_bf16(rng, n, -1, 1);
    Vec out_ref(n), d_ref = dy;
    llmc::relu2_forward(out_ref.data(), x.data(), n, 1);
    llmc::relu2_backward_inplace(d_ref.data(), x.data(), n, 1);
    bf16 *d_x = a.bf(n + offset) + offset, *d_out = a.bf(n + offset) + offset, *d_d = a.bf(n + offset) + offset;
    put(gpu, d_x, x);
    const Outputs f = run_orders_on_path(tag, vector, [&](bool& vec) {
        put(gpu, d_d, dy);
        vec = llmc::speedrun::relu2_forward(d_out, d_x, n, gpu.stream());
        vec = llmc::speedrun::relu2_backward_inplace(d_d, d_x, n, gpu.stream()) && vec;
        return Outputs{get(gpu, d_out, n), get(gpu, d_d, n)};
    });
    Bound bo(n), bd(n);
    for (size_t i = 0; i < n; i++) {
        bo[i] = (U + 2 * u32) * std::fabs(out_ref[i]);
        bd[i] = (U + 4 * u32) * std::fabs(d_ref[i]);
    }
    check_bound(tag + " forward", f[0], out_ref, bo);
    check_bound(tag + " backward: dout *= 2 max(x, 0) in place", f[1], d_ref, bd);
}

// ---- the soft-capped classifier -----------------------------------------------------------------------------------
// The plain classifier's bound (test/sim/test_kernels.cpp: rel_s = G(V) + (r + 11) 2^-22 for the online softmax's
// rescalings and tree, the loss, dlogits) on the capped logits c, plus the cap's own error per logit:
//   dc = 3 u32 |z| (1 - t^2)  (z / cap on the CPU against z * (1/cap) on the GPU: 3 roundings of the argument)
//      + 2^-21 |c|            (tanhf's 2 ulp and the CPU's tanh's 1 ulp)  + 2 u32 |c|   (the products by cap)
// The loss moves by at most max_j dc_j + dc_target (log-sum-exp is 1-Lipschitz in the max norm); p_j relatively by
// dc_j + max dc; the slope 1 - (c / cap)^2 by 2 |c| dc / cap^2 + 4 u32.
void test_softcap_classifier(CudaBackend& gpu, size_t N, size_t V, size_t Vp, float zmax) {
    const std::string tag = "softcap_classifier N=" + std::to_string(N) + " V=" + std::to_string(V) + " Vp=" +
                            std::to_string(Vp) + " |z|<=" + std::to_string((int)zmax);
    const float cap = llmc::kLogitSoftCap;
    const bool vector = Vp % 8 == 0;
    Arena a(gpu);
    Vec z = random_bf16(rng, N * Vp, -zmax, zmax);
    for (size_t i = 0; i < N; i++)
        for (size_t j = V; j < Vp; j++) z[i * Vp + j] = 100.0f;  // padded columns must be ignored
    std::vector<int> tgt(N);
    for (size_t i = 0; i < N; i++) tgt[i] = (int)((i * 131 + 7) % V);
    const float dloss = 1.0f / (float)(3 * N);
    Vec loss_ref(N), dl_ref = z;
    llmc::softcap_classifier(dl_ref.data(), loss_ref.data(), tgt.data(), dloss, N, V, Vp, true, cap, 1);
    bf16* d_z = a.bf(N * Vp);
    float* d_loss = a.f32(N);
    int* d_tgt = a.i32(tgt);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const Outputs f = run_orders_on_path(tag, vector, [&](bool& vec) {
        put(gpu, d_z, z);
        vec = llmc::speedrun::softcap_classifier(d_z, d_loss, d_tgt, dloss, N, V, Vp, false, cap,
                                                 gpu.device_limits(), sms, gpu.stream());
        const Vec l1 = get(gpu, d_loss, N), untouched = get(gpu, d_z, N * Vp);
        vec = llmc::speedrun::softcap_classifier(d_z, d_loss, d_tgt, dloss, N, V, Vp, true, cap,
                                                 gpu.device_limits(), sms, gpu.stream()) && vec;
        return Outputs{get(gpu, d_loss, N), get(gpu, d_z, N * Vp), l1, untouched};
    });
    const size_t packs = vector ? Vp / 8 : Vp, block = std::min<size_t>(1024, (packs + 31) / 32 * 32);
    const double rel_s = G(V) + (double)((packs + block - 1) / block + 11) * 0x1p-22;
    Bound bl(N), bd(N * Vp, 0.0);
    for (size_t n = 0; n < N; n++) {
        std::vector<double> c(V), dc(V);
        double mx = -1e300, S = 0, dmax = 0;
        for (size_t j = 0; j < V; j++) {
            const double zz = z[n * Vp + j], t = std::tanh(zz / cap);
            c[j] = cap * t;
            dc[j] = 3 * u32 * std::fabs(zz) * (1 - t * t) + (0x1p-21 + 2 * u32) * std::fabs(c[j]);
            mx = std::max(mx, c[j]), dmax = std::max(dmax, dc[j]);
        }
        for (size_t j = 0; j < V; j++) S += std::exp(c[j] - mx);
        const size_t y = (size_t)tgt[n];
        bl[n] = rel_s + 0x1p-23 * (std::fabs(std::log(S)) + std::fabs(mx) + std::fabs(c[y])) + dmax + dc[y];
        for (size_t j = 0; j < V; j++) {
            const double p = std::exp(c[j] - mx) / S, slope = 1 - (c[j] / cap) * (c[j] / cap);
            const double pe = p * (rel_s + 0x1p-21 + dc[j] + dmax) + 0x1p-24;
            bd[n * Vp + j] = U * std::fabs(dl_ref[n * Vp + j]) +
                             dloss * (pe * slope + std::fabs(p - (j == y)) * (2 * std::fabs(c[j]) * dc[j] /
                                                                              (cap * cap) + 4 * u32));
        }
    }
    check_bound(tag + " losses", f[0], loss_ref, bl);
    check_bound(tag + " dlogits in place (padded columns 0)", f[1], dl_ref, bd);
    check_bound(tag + " losses without dlogits", f[2], loss_ref, bl);
    check_bound(tag + " without dlogits the logits are untouched", f[3], z, Bound(N * Vp, 0.0));
}

// The soft-capped prefetch kernel against the soft-capped one-block-per-row kernel, bit for bit (the same packs, the
// same threads, the same arithmetic: anything else is a bug), at persistent grids that walk several rows per block.
void test_softcap_prefetch_bits(CudaBackend& gpu, size_t N, size_t V, size_t Vp, size_t grid) {
    const std::string tag = "softcap prefetch kernel N=" + std::to_string(N) + " Vp=" + std::to_string(Vp) +
                            " grid=" + std::to_string(grid);
    Arena a(gpu);
    const Vec z = random_bf16(rng, N * Vp, -60, 60);
    std::vector<int> tgt(N);
    for (size_t i = 0; i < N; i++) tgt[i] = (int)((i * 17 + 1) % V);
    bf16* d_z = a.bf(N * Vp);
    float* d_loss = a.f32(N);
    int* d_tgt = a.i32(tgt);
    llmc::ClassifierLaunch rows;
    rows.vector = true;
    rows.block = std::min<size_t>(1024, (Vp / 8 + 31) / 32 * 32);
    rows.grid = N;
    llmc::ClassifierLaunch pre = rows;
    pre.prefetch = true, pre.grid = grid, pre.smem = llmc::classifier_prefetch_bytes(Vp / 8, rows.block);
    auto run = [&](const llmc::ClassifierLaunch& L) {
        put(gpu, d_z, z);
        llmc::softcap_classifier(d_z, d_loss, d_tgt, 0.5f, N, V, Vp, true, 30.0f, L, gpu.stream());
        return Outputs{get(gpu, d_loss, N), get(gpu, d_z, N * Vp)};
    };
    const Outputs want = run(rows);
    bool same = true;
    cudasim::for_each_order([&](cudasim::Order) {
        const Outputs got = run(pre);
        for (size_t k = 0; k < 2; k++)
            same = same && std::memcmp(got[k].data(), want[k].data(), want[k].size() * sizeof(float)) == 0;
    });
    testing::check(tag + ": bitwise equal to one block per row, every thread order", same);
}

// ---- the scalar mixes (scalar_mix.cuh): CudaBackend's members against CpuBackend's ---------------------------------
// Both backends get the same bf16 inputs and scalars; the CUDA members run under every thread order (bitwise equal,
// the scalar gradients' sums included) and are counted on the expected path. A product of two bf16 values is exact
// in fp32 (8 + 8 significant bits), so l0 dout, l1 dout, l0 x, l1 x0 and lam dv are the same fp32 numbers on both
// sides, and one fp32 addition of two of them, or of one to an fp32 value, rounds the same (nvcc's fused
// multiply-add rounds the same exact sum once): out, dx, dx0 and dv + dv1 are the CPU's values rounded to bf16 bit
// for bit, v_pre is v, dv1 (fp32) is the CPU's (bound 0). (1 - lam) v and (1 - lam) dv may round in fp32 on one side
// only (1 - lam can carry up to 24 significant bits; a fused multiply-add skips that rounding): with the sum's
// roundings and bf16's, (U + 3 u32) |want| + 2 u32 |(1 - lam) v|.
// The scalar gradients: an fp32 sum of n terms in a fixed tree on the GPU (within (n - 1) u32 sum |t| in any order),
// in double then rounded to fp32 on the CPU, added to the accumulator once on each side: G(n) sum |t| + 2 u32 |want|.
// The terms dout x are exact; dv (v1 - v_pre) rounds the difference identically on both sides and the product on
// the GPU only: u32 sum |t| more. That bound is loose at these sizes, so the `exact` cases draw every input as a
// multiple of 1/8: the terms are multiples of 2^-6 and every partial sum below 2^18 is exact in fp32, in any order,
// as is the accumulator's start value: the GPU's sums must be the CPU's bit for bit (bound 0).

// The path a CudaBackend member was counted on (the other one, a mismatch, when it was not counted exactly once).
bool counted_path(CudaBackend& gpu, bool expect_vector, const std::function<void()>& member) {
    const size_t v0 = gpu.vector_path_calls(), s0 = gpu.scalar_path_calls();
    member();
    const size_t dv = gpu.vector_path_calls() - v0, ds = gpu.scalar_path_calls() - s0;
    if (dv + ds != 1) return !expect_vector;
    return dv == 1;
}

Bound zero_bound(size_t n) { return Bound(n, 0.0); }

// Random multiples of 1/8 in [lo, hi] (exact in bf16 for |x| < 32), or random bf16 values.
Vec random_inputs(bool eighths, size_t n, float lo, float hi) {
    if (!eighths) return random_bf16(rng, n, lo, hi);
    std::uniform_int_distribution<int> d((int)std::ceil(lo * 8), (int)std::floor(hi * 8));
    Vec v(n);
    for (auto& x : v) x = (float)d(rng) / 8.0f;
    return v;
}

// A scalar gradient's bound (above): the sum's terms' magnitudes, and the accumulator after the call.
void check_scalar_grad(const std::string& name, float got, float want, double sum_abs, size_t n, double extra,
                       bool exact) {
    if (exact) testing::check(name + ": every partial sum exact", sum_abs < 0x1p18, "sum |t| = %g", sum_abs);
    const double bound = exact ? 0.0 : (G(n) + extra) * sum_abs + 2 * u32 * std::fabs(want);
    check_bound(name + (exact ? " (exact)" : ""), Vec{got}, Vec{want}, Bound{bound});
}

// misalign: which buffer starts one element off (0: none; 1 out, 2 x, 3 x0, 4 dout, 5 dx0, 6 dx when not in place),
// each alone sending the launches that use it to the scalar path.
void test_embed_skip(CudaBackend& gpu, CpuBackend& cpu, size_t n, bool in_place = true, int misalign = 0,
                     bool exact = false) {
    const std::string tag = "embed_skip n=" + std::to_string(n) + (in_place ? " dx = dout" : " dx apart") +
                            (misalign ? " buffer " + std::to_string(misalign) + " misaligned" : "");
    const bool vec_n = n % 8 == 0;
    Arena a(gpu);
    const Vec x = random_inputs(exact, n, -2, 2), x0 = random_inputs(exact, n, -1.5f, 1.5f);
    const Vec dout = random_inputs(exact, n, -1, 1), dx00 = random_bf16(rng, n, -0.5f, 0.5f);
    const Vec garbage = random_bf16(rng, n, 5, 9);
    const Vec lam = round_bf16({0.8731f, -0.2913f}), dl_init = {0.625f, -1.25f};
    auto buffer = [&](int k) { return a.bf(n + 1) + (misalign == k ? 1 : 0); };
    bf16 *d_out = buffer(1), *d_x = buffer(2), *d_x0 = buffer(3), *d_dout = buffer(4), *d_dx0 = buffer(5);
    bf16* d_dx = in_place ? d_dout : buffer(6);
    bf16 *d_l0 = a.bf(1), *d_l1 = a.bf(1);
    float* d_dl = a.f32(2);
    put(gpu, d_x, x), put(gpu, d_x0, x0), put(gpu, d_l0, Vec{lam[0]}), put(gpu, d_l1, Vec{lam[1]});

    Vec out_ref(n), dx_ref = dout, dx0_ref = dx00, dl_ref = dl_init;
    cpu.embed_skip_forward(out_ref.data(), x.data(), x0.data(), &lam[0], &lam[1], n);
    cpu.embed_skip_backward(dx_ref.data(), dx0_ref.data(), &dl_ref[0], &dl_ref[1], dx_ref.data(), x.data(), x0.data(),
                            &lam[0], &lam[1], n);
    double abs0 = 0, abs1 = 0;
    for (size_t i = 0; i < n; i++) abs0 += std::fabs(dout[i] * x[i]), abs1 += std::fabs(dout[i] * x0[i]);

    const bool vf = vec_n && (misalign == 0 || misalign > 3);
    const Outputs f = run_orders_on_path(tag + " forward", vf, [&](bool& vec) {
        vec = counted_path(gpu, vf, [&] { gpu.embed_skip_forward(d_out, d_x, d_x0, d_l0, d_l1, n); });
        return Outputs{get(gpu, d_out, n)};
    });
    check_bound(tag + " forward out = l0 x + l1 x0 (the CPU's rounded to bf16)", f[0], round_bf16(out_ref),
                zero_bound(n));

    const bool vb = vec_n && (misalign == 0 || misalign == 1);
    const Outputs b = run_orders_on_path(tag + " backward", vb, [&](bool& vec) {
        put(gpu, d_dout, dout), put(gpu, d_dx0, dx00), put(gpu, d_dl, dl_init);
        if (!in_place) put(gpu, d_dx, garbage);
        vec = counted_path(gpu, vb, [&] {
            gpu.embed_skip_backward(d_dx, d_dx0, d_dl, d_dl + 1, d_dout, d_x, d_x0, d_l0, d_l1, n);
        });
        return Outputs{get(gpu, d_dx, n), get(gpu, d_dx0, n), get(gpu, d_dl, 2), get(gpu, d_dout, n)};
    });
    check_bound(tag + " backward dx = l0 dout", b[0], round_bf16(dx_ref), zero_bound(n));
    check_bound(tag + " backward dx0 += l1 dout", b[1], round_bf16(dx0_ref), zero_bound(n));
    check_scalar_grad(tag + " backward dl0 += sum(dout x)", b[2][0], dl_ref[0], abs0, n, 0.0, exact);
    check_scalar_grad(tag + " backward dl1 += sum(dout x0)", b[2][1], dl_ref[1], abs1, n, 0.0, exact);
    if (!in_place) check_bound(tag + " backward leaves dout as it was", b[3], dout, zero_bound(n));
}

// misalign: which buffer starts one element off (0: none; 1 qkv and dqkv, 2 v_pre, 3 qkv1, 4 dv1), each alone sending
// the launches that use it to the scalar path.
void test_value_residual(CudaBackend& gpu, CpuBackend& cpu, size_t N, size_t C, float lam_value, int misalign = 0,
                         bool exact = false) {
    const std::string tag = "value_residual N=" + std::to_string(N) + " C=" + std::to_string(C) + " lam=" +
                            std::to_string(lam_value) +
                            (misalign ? " buffer " + std::to_string(misalign) + " misaligned" : "");
    const size_t n = N * C, n3 = 3 * n;
    const bool vec_c = C % 8 == 0;
    Arena a(gpu);
    const Vec qkv = random_inputs(exact, n3, -2, 2), qkv1 = random_inputs(exact, n3, -2, 2);
    const Vec dqkv = random_inputs(exact, n3, -1, 1), dv10 = random_bf16(rng, n, -0.5f, 0.5f);
    const Vec lam = round_bf16({lam_value}), dlam_init = {0.375f};
    auto buffer = [&](int k, size_t m) { return a.bf(m + 1) + (misalign == k ? 1 : 0); };
    bf16 *d_qkv = buffer(1, n3), *d_dqkv = buffer(1, n3), *d_vpre = buffer(2, n), *d_qkv1 = buffer(3, n3);
    bf16* d_lam = a.bf(1);
    float *d_dv1 = a.f32(n + 1) + (misalign == 4 ? 1 : 0), *d_dlam = a.f32(1);
    put(gpu, d_qkv1, qkv1), put(gpu, d_lam, lam);

    Vec qkv_ref = qkv, vpre_ref(n), dqkv_ref = dqkv, dv1_ref = dv10, dlam_ref = dlam_init;
    cpu.value_residual_forward(qkv_ref.data(), vpre_ref.data(), qkv1.data(), lam.data(), N, C);
    cpu.value_residual_backward(dqkv_ref.data(), dv1_ref.data(), dlam_ref.data(), vpre_ref.data(), qkv1.data(),
                                lam.data(), N, C);
    // Outside v (columns < 2C) nothing moves (bound 0); in v the bound above, p = (1 - lam) times the input.
    const double l = lam[0];
    auto v_bound = [&](const Vec& want, const Vec& in) {
        Bound bd(n3, 0.0);
        for (size_t r = 0; r < N; r++)
            for (size_t c = 2 * C; c < 3 * C; c++) {
                const size_t j = r * 3 * C + c;
                bd[j] = (U + 3 * u32) * std::fabs(want[j]) + 2 * u32 * std::fabs((1.0 - l) * in[j]);
            }
        return bd;
    };
    const bool vf = vec_c && (misalign == 0 || misalign == 4);
    const Outputs f = run_orders_on_path(tag + " forward", vf, [&](bool& vec) {
        put(gpu, d_qkv, qkv);
        vec = counted_path(gpu, vf, [&] { gpu.value_residual_forward(d_qkv, d_vpre, d_qkv1, d_lam, N, C); });
        return Outputs{get(gpu, d_qkv, n3), get(gpu, d_vpre, n)};
    });
    check_bound(tag + " forward v = (1 - lam) v + lam v1 (q, k untouched)", f[0], qkv_ref, v_bound(qkv_ref, qkv));
    check_bound(tag + " forward v_pre = v", f[1], vpre_ref, zero_bound(n));

    double sum_abs = 0;
    for (size_t r = 0; r < N; r++)
        for (size_t c = 0; c < C; c++) {
            const size_t j = r * 3 * C + 2 * C + c;
            sum_abs += std::fabs((double)dqkv[j] * ((double)qkv1[j] - vpre_ref[r * C + c]));
        }
    const bool vb = vec_c && misalign == 0;
    const Outputs b = run_orders_on_path(tag + " backward", vb, [&](bool& vec) {
        put(gpu, d_dqkv, dqkv), put(gpu, d_dv1, dv10), put(gpu, d_dlam, dlam_init);
        vec = counted_path(gpu, vb, [&] {
            gpu.value_residual_backward(d_dqkv, d_dv1, d_dlam, d_vpre, d_qkv1, d_lam, N, C);
        });
        return Outputs{get(gpu, d_dqkv, n3), get(gpu, d_dv1, n), get(gpu, d_dlam, 1)};
    });
    check_bound(tag + " backward dv = (1 - lam) dv (dq, dk untouched)", b[0], dqkv_ref, v_bound(dqkv_ref, dqkv));
    check_bound(tag + " backward dv1 += lam dv", b[1], dv1_ref, zero_bound(n));
    check_scalar_grad(tag + " backward dlam += sum(dv (v1 - v_pre))", b[2][0], dlam_ref[0], sum_abs, n, u32, exact);

    // The first layer's share, from the backward's own outputs on both sides.
    Vec add_ref = b[0];
    cpu.value_residual_add(add_ref.data(), b[1].data(), N, C);
    const bool va = vec_c && misalign != 1 && misalign != 4;
    const Outputs s = run_orders_on_path(tag + " add", va, [&](bool& vec) {
        put(gpu, d_dqkv, b[0]), put(gpu, d_dv1, b[1]);
        vec = counted_path(gpu, va, [&] { gpu.value_residual_add(d_dqkv, d_dv1, N, C); });
        return Outputs{get(gpu, d_dqkv, n3), get(gpu, d_dv1, n)};
    });
    check_bound(tag + " add: dv += dv1 (the CPU's rounded to bf16; dq, dk untouched)", s[0], round_bf16(add_ref),
                zero_bound(n3));
    check_bound(tag + " add leaves dv1 as it was", s[1], b[1], zero_bound(n));
}

// ---- the CudaBackend's members -----------------------------------------------------------------------------------
// Each member of the recipe (llmc/backend.h) runs its free function of speedrun_ops.h on the main stream: from the
// same inputs (`reset`) the member's outputs are the free function's bit for bit, and the backend counts the call on
// the path the free function reports. Every buffer holds different values, so arguments passed in the wrong slot show.
void check_member(CudaBackend& gpu, const std::string& name, const std::function<void()>& reset,
                  const std::function<void()>& member, const std::function<bool()>& free_fn,
                  const std::function<Outputs()>& outputs) {
    reset();
    const bool vec = free_fn();
    const Outputs want = outputs();
    reset();
    const size_t v0 = gpu.vector_path_calls(), s0 = gpu.scalar_path_calls();
    member();
    const Outputs got = outputs();
    const size_t dv = gpu.vector_path_calls() - v0, ds = gpu.scalar_path_calls() - s0;
    bool same = got.size() == want.size();
    for (size_t k = 0; same && k < got.size(); k++) same = same_bits(got[k], want[k]);
    testing::check(name + ": the member gives the free function's bits", same);
    testing::check(name + (vec ? ": counted on the vector path" : ": counted on the scalar path"),
                   dv == (vec ? 1u : 0u) && ds == (vec ? 0u : 1u), "%zu vector, %zu scalar calls counted", dv, ds);
}

void test_backend_members(CudaBackend& gpu, size_t B, size_t T, size_t C, size_t NH, size_t V, size_t Vp) {
    namespace sr = llmc::speedrun;
    const std::string shape = " B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
                              " NH=" + std::to_string(NH) + " Vp=" + std::to_string(Vp);
    const size_t N = B * T, n = N * C, n3 = 3 * n, nr = llmc::qk_rotary_rstd_floats(B, T, NH);
    cudaStream_t st = gpu.stream();
    Arena a(gpu);
    const Vec x = random_bf16(rng, n, -2, 2), y = random_bf16(rng, n, -2, 2), g = random_bf16(rng, n, -1, 1);
    const Vec qkv = random_bf16(rng, n3, -1.5f, 2), dqkv = random_bf16(rng, n3, -1, 1);
    const Vec table = llmc::rotary_table(T, C / NH), rstd0 = random_bf16(rng, std::max(N, nr), 0.5f, 2);
    bf16 *d_x = a.bf(n), *d_y = a.bf(n), *d_g = a.bf(n), *d_o = a.bf(n), *d_r = a.bf(n);
    bf16 *d_qkv = a.bf(n3), *d_dqkv = a.bf(n3), *d_q0 = a.bf(n3);
    float *d_rstd = a.f32(rstd0.size()), *d_table = a.f32(table.size());
    put(gpu, d_x, x), put(gpu, d_y, y), put(gpu, d_table, table), put(gpu, d_q0, qkv);
    auto reset = [&] {
        put(gpu, d_g, g), put(gpu, d_o, y), put(gpu, d_r, x), put(gpu, d_rstd, rstd0);
        put(gpu, d_qkv, qkv), put(gpu, d_dqkv, dqkv);
    };
    auto rows = [&] { return Outputs{get(gpu, d_o, n), get(gpu, d_r, n), get(gpu, d_g, n), get(gpu, d_rstd, N)}; };
    auto heads = [&] { return Outputs{get(gpu, d_qkv, n3), get(gpu, d_dqkv, n3), get(gpu, d_rstd, nr)}; };
    check_member(gpu, "rmsnorm_forward" + shape, reset, [&] { gpu.rmsnorm_forward(d_o, d_rstd, d_x, N, C); },
                 [&] { return sr::rmsnorm_forward(d_o, d_rstd, d_x, N, C, st); }, rows);
    check_member(gpu, "fused_residual_rmsnorm_forward" + shape, reset,
                 [&] { gpu.fused_residual_rmsnorm_forward(d_r, d_o, d_rstd, d_x, d_y, N, C); },
                 [&] { return sr::fused_residual_rmsnorm_forward(d_r, d_o, d_rstd, d_x, d_y, N, C, st); }, rows);
    check_member(gpu, "rmsnorm_backward" + shape, reset, [&] { gpu.rmsnorm_backward(d_g, d_y, d_x, d_rstd, N, C); },
                 [&] { return sr::rmsnorm_backward(d_g, d_y, d_x, d_rstd, N, C, st); }, rows);
    check_member(gpu, "relu2_forward" + shape, reset, [&] { gpu.relu2_forward(d_o, d_x, n); },
                 [&] { return sr::relu2_forward(d_o, d_x, n, st); }, rows);
    check_member(gpu, "relu2_backward_inplace" + shape, reset, [&] { gpu.relu2_backward_inplace(d_g, d_x, n); },
                 [&] { return sr::relu2_backward_inplace(d_g, d_x, n, st); }, rows);
    check_member(gpu, "qk_norm_rotary_forward" + shape, reset,
                 [&] { gpu.qk_norm_rotary_forward(d_qkv, d_rstd, d_table, B, T, C, NH); },
                 [&] { return sr::qk_norm_rotary_forward(d_qkv, d_rstd, d_table, B, T, C, NH, st); }, heads);
    check_member(gpu, "qk_norm_rotary_backward" + shape, reset,
                 [&] { gpu.qk_norm_rotary_backward(d_dqkv, d_q0, d_rstd, d_table, B, T, C, NH); },
                 [&] { return sr::qk_norm_rotary_backward(d_dqkv, d_q0, d_rstd, d_table, B, T, C, NH, st); }, heads);

    const Vec z = random_bf16(rng, N * Vp, -40, 40);
    std::vector<int> tgt(N);
    for (size_t i = 0; i < N; i++) tgt[i] = (int)((i * 29 + 3) % V);
    bf16* d_z = a.bf(N * Vp);
    float* d_loss = a.f32(N);
    int* d_tgt = a.i32(tgt);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    auto reset_z = [&] { put(gpu, d_z, z), put(gpu, d_loss, Vec(N, -1.0f)); };
    auto logits = [&] { return Outputs{get(gpu, d_z, N * Vp), get(gpu, d_loss, N)}; };
    const float dloss = 0.25f;
    check_member(gpu, "softcap_classifier (cap 30)" + shape, reset_z,
                 [&] { gpu.softcap_classifier(d_z, d_loss, d_tgt, dloss, N, V, Vp, true, 30.0f); },
                 [&] {
                     return sr::softcap_classifier(d_z, d_loss, d_tgt, dloss, N, V, Vp, true, 30.0f,
                                                   gpu.device_limits(), sms, st);
                 }, logits);
    check_member(gpu, "softcap_classifier (cap 0: the plain classifier)" + shape, reset_z,
                 [&] { gpu.softcap_classifier(d_z, d_loss, d_tgt, dloss, N, V, Vp, true, 0.0f); },
                 [&] {
                     return llmc::fused_classifier(d_z, d_loss, d_tgt, dloss, N, V, Vp, true, gpu.device_limits(),
                                                   sms, st);
                 }, logits);

    // The scalar mixes: the members reduce into the backend's reduction partials, the free functions into d_part.
    // The embedding skip's backward in place (dx = dout), as the model calls it.
    const Vec lams = round_bf16({0.8125f, -0.3671875f}), dv1 = random_bf16(rng, n, -1, 1);
    bf16* d_lam = a.bf(2);
    float *d_part = a.f32(sr::kScalarMixPartials), *d_dl = a.f32(2), *d_dv1 = a.f32(n);
    put(gpu, d_lam, lams);
    auto reset_mix = [&] { reset(), put(gpu, d_dl, Vec{0.5f, -0.25f}), put(gpu, d_dv1, dv1); };
    auto mixes = [&] {
        return Outputs{get(gpu, d_o, n), get(gpu, d_r, n), get(gpu, d_g, n), get(gpu, d_dl, 2), get(gpu, d_qkv, n3),
                       get(gpu, d_dqkv, n3), get(gpu, d_dv1, n)};
    };
    const bf16 *l0 = d_lam, *l1 = d_lam + 1;
    check_member(gpu, "embed_skip_forward" + shape, reset_mix,
                 [&] { gpu.embed_skip_forward(d_o, d_x, d_y, l0, l1, n); },
                 [&] { return sr::embed_skip_forward(d_o, d_x, d_y, l0, l1, n, st); }, mixes);
    check_member(gpu, "embed_skip_backward (dx = dout)" + shape, reset_mix,
                 [&] { gpu.embed_skip_backward(d_g, d_r, d_dl, d_dl + 1, d_g, d_x, d_y, l0, l1, n); },
                 [&] {
                     return sr::embed_skip_backward(d_g, d_r, d_dl, d_dl + 1, d_g, d_x, d_y, l0, l1, n, d_part, st);
                 },
                 mixes);
    check_member(gpu, "value_residual_forward" + shape, reset_mix,
                 [&] { gpu.value_residual_forward(d_qkv, d_o, d_q0, l1, N, C); },
                 [&] { return sr::value_residual_forward(d_qkv, d_o, d_q0, l1, N, C, st); }, mixes);
    check_member(gpu, "value_residual_backward" + shape, reset_mix,
                 [&] { gpu.value_residual_backward(d_dqkv, d_dv1, d_dl + 1, d_x, d_q0, l0, N, C); },
                 [&] { return sr::value_residual_backward(d_dqkv, d_dv1, d_dl + 1, d_x, d_q0, l0, N, C, d_part, st); },
                 mixes);
    check_member(gpu, "value_residual_add" + shape, reset_mix, [&] { gpu.value_residual_add(d_dqkv, d_dv1, N, C); },
                 [&] { return sr::value_residual_add(d_dqkv, d_dv1, N, C, st); }, mixes);
}

void test_refusals(CudaBackend& gpu) {
    Arena a(gpu);
    bf16* q = a.bf(3 * 10);
    float *r = a.f32(4), *t = a.f32(10);
    testing::check("qk_norm_rotary refuses an odd head size", testing::throws_with([&] {
        llmc::speedrun::qk_norm_rotary_forward(q, r, t, 1, 1, 10, 2, gpu.stream());
    }, "even size"));
    float* l = a.f32(1);
    int* tg = a.i32({0});
    testing::check("softcap_classifier refuses a cap <= 0", testing::throws_with([&] {
        llmc::speedrun::softcap_classifier(q, l, tg, 1.0f, 1, 8, 8, true, 0.0f, gpu.device_limits(), 1,
                                           gpu.stream());
    }, "cap"));
}

}  // namespace

int main() {
    try {
        CudaBackend gpu;
        test_rmsnorm(gpu, 13, 20);         // scalar
        test_rmsnorm(gpu, 9, 64);          // vector
        test_rmsnorm(gpu, 3, 8);
        test_rmsnorm(gpu, 5, 300);         // scalar, beyond the 128 elements in registers
        test_rmsnorm(gpu, 4, 1032);        // vector, beyond the 1024 in registers
        test_rmsnorm(gpu, 6, 64, 1);       // a misaligned row: the scalar path
        test_qk_rotary(gpu, 2, 5, 64, 4);  // hs 16: vector
        test_qk_rotary(gpu, 1, 9, 256, 2);   // hs 128, the records' head size
        test_qk_rotary(gpu, 1, 7, 48, 2);  // hs 24: scalar
        test_qk_rotary(gpu, 2, 3, 12, 3);  // hs 4: scalar, one pair pack per thread of a head of 2
        test_qk_rotary(gpu, 1, 2, 1200, 12);  // hs 100, scalar: 1200 pair packs, several per thread
        test_qk_rotary(gpu, 1, 2, 2304, 18);  // hs 128, vector: 288 pair packs over 256 threads
        test_relu2(gpu, 1000);
        test_relu2(gpu, 1001);
        test_relu2(gpu, 8);
        test_relu2(gpu, 64, 1);
        test_softcap_classifier(gpu, 5, 77, 80, 75.0f);      // vector, the last pack masked
        test_softcap_classifier(gpu, 4, 77, 77, 75.0f);      // scalar
        test_softcap_classifier(gpu, 3, 1500, 1536, 8.0f);   // vector, logits below the cap
        test_softcap_classifier(gpu, 2, 7450, 7450, 75.0f);  // scalar, beyond the registers
        test_softcap_classifier(gpu, 2, 50257, 50304, 75.0f);  // GPT-2's row: the device's prefetch choice
        test_softcap_prefetch_bits(gpu, 11, 77, 80, 1);
        test_softcap_prefetch_bits(gpu, 11, 77, 80, 3);
        test_softcap_prefetch_bits(gpu, 9, 1000, 1536, 4);
        test_fused_residual_rmsnorm(gpu, 13, 20);     // scalar; 13 rows: a partial block of 8 warps
        test_fused_residual_rmsnorm(gpu, 9, 64);      // vector
        test_fused_residual_rmsnorm(gpu, 3, 8);
        test_fused_residual_rmsnorm(gpu, 5, 300);     // scalar, beyond the 128 elements in registers
        test_fused_residual_rmsnorm(gpu, 4, 1032);    // vector, beyond the 1024 in registers: residual re-read
        for (int k = 1; k <= 4; k++) test_fused_residual_rmsnorm(gpu, 6, 64, k);  // each pointer alone: scalar
        CpuBackend cpu;
        test_embed_skip(gpu, cpu, 16408);         // vector: 2051 packs in 5 blocks (with the grid capped, a loop)
        test_embed_skip(gpu, cpu, 2501);          // scalar: a tail, 5 blocks
        test_embed_skip(gpu, cpu, 8);
        test_embed_skip(gpu, cpu, 262145);        // scalar: 513 blocks capped at 512 (two rows of 1024 partials)
        test_embed_skip(gpu, cpu, 16408, true, 0, true);  // the scalar gradients exact: bit for bit the CPU's
        test_embed_skip(gpu, cpu, 2501, true, 0, true);
        test_embed_skip(gpu, cpu, 1000, false);   // dx apart from dout: written, dout kept
        test_embed_skip(gpu, cpu, 1001, false);
        for (int k = 1; k <= 6; k++) test_embed_skip(gpu, cpu, 64, k != 6, k);  // each buffer alone: scalar
        test_value_residual(gpu, cpu, 72, 128, 0.3f);    // vector: 1152 packs in 3 blocks
        test_value_residual(gpu, cpu, 50, 45, 0.3f);     // odd C: scalar, 5 blocks
        test_value_residual(gpu, cpu, 4, 12, -0.6f);     // N C a multiple of 8, C not: scalar (no pack across rows)
        test_value_residual(gpu, cpu, 3, 8, 1.7f);
        test_value_residual(gpu, cpu, 72, 128, 0.3f, 0, true);  // dlam exact: bit for bit the CPU's
        test_value_residual(gpu, cpu, 50, 45, 0.3f, 0, true);
        test_value_residual(gpu, cpu, 9, 64, 0.00123f);  // 1 - lam needs all of fp32's bits
        for (int k = 1; k <= 4; k++) test_value_residual(gpu, cpu, 5, 64, 0.45f, k);  // each buffer alone
        test_backend_members(gpu, 2, 3, 64, 4, 77, 80);  // vector
        test_backend_members(gpu, 1, 5, 36, 3, 77, 77);  // scalar
        test_refusals(gpu);
    } catch (const std::exception& e) {
        testing::fail("speedrun kernels", "exception: %s", e.what());
    }
    return testing::finish();
}
