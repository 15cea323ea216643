// CudaBackend attention (the flash kernels of llmc/cuda/attention.cuh, tensor-core MMAs emulated by the simulator)
// against CpuBackend attention (fp32 reference with the (T, T) probabilities), forward and backward, at shapes that
// cover T = 1, T not a multiple of any tile, several key and query tiles, B and NH > 1, and every supported head
// size (16, 32, 64, 128). Each op runs under every thread order of the simulator; the results must be bitwise
// identical across orders (and the backward across two more runs into a buffer refilled with garbage), and every
// element within a bound derived from the arithmetic below; D (the dQ kernel's rowdot) too. The backward must give
// the same bits with either dQ key tile (64 or 32, whichever the device holds): its sums run over the keys in the
// same k16 order (docs/cuda.md). A head size the kernels do not serve is refused.
//
// Notation (all bounds computed in double on the host): U = 2^-8 (bf16 unit roundoff), u = 2^-24 (fp32),
// G(n) = 2 (n + 2) u bounds an fp32 sum of n terms relative to the sum of their magnitudes, counted for both the
// CUDA and the CPU side. scale = 1/sqrt(hs), s_ij = q_i.k_j (inputs are bf16 values, so both sides start equal).
//
// Forward. The CUDA side keeps scores in fp32 (MMA accumulation: G(hs) scale sum_d |q k| after scaling) and forms
// 2^(fma(s, c, -m)) with c = log2(e) scale rounded once: the exponent is off by at most u (c |s| + |m|) in base 2,
// i.e. u scale (|s_ij| + max_j |s_ij|) in natural units, which we count twice (2^-23). So per row
//   D_i = max_j [ G(hs) scale sum_d |q_d k_d| + 2^-23 scale (|s_ij| + max_j |s_ij|) ]
// and a probability computed from shifted exponents is off by p (e^(2 D) - 1) <= p 2D (1 + 2D); the fp32 row sum
// adds G(T) p; the exponential (the GPU's ex2.approx: 2 ulp from the rounded result, 5 u) and 1/l times P (2 u),
// the CPU's exp and division (2 u): 9 u p; the per-tile rescaling 2 u per key tile. The CUDA side rounds P to bf16
// for the P V product (U p) but sums l in fp32:
//   |dp_ij| <= p_ij (2 D_i (1 + 2 D_i) + G(T) + 9 u + 2 u ntiles) =: p_ij E_i,   (+ U p_ij in P V)
//   out: U |out| + sum_j p_ij (E_i + U) |v_jd| + G(T) sum_j p_ij |v_jd|
//   L_i (base 2, against log2 sum_j exp(scale s_ij) in double): (D_i (1 + D_i) + G(T) + 2^-21) / ln 2
//                                                               + 2^-22 (|L_i| + max_j c |s_ij|)
// Backward. The CPU gets its own fp32 P; the CUDA side recomputes P from s and L: |P^ - P| <= p (E_i + ln2 bL_i).
//   dP = dO v^T, fp32 on both sides: e_dP = G(hs) sum_d |dO_d v_d|
//   D_i: CUDA dO_i . O_i with the stored bf16 O (|O - O_cpu| <= bout), CPU sum_j P dP:
//        eD_i = sum_d |dO_id| bout_id + G(hs) sum_d |dO O| + sum_j p (E |dP| + e_dP) + G(T) sum_j p |dP|
//   dS = P (dP - D): edS = ep |dP - D| + p (e_dP + eD) + U |dS| (bf16 MMA operand) + 4 u p (|dP| + |D|)
//   dQ = scale sum_j dS k_j:  U |dQ| + scale sum_j edS |k| + G(T) scale sum_j |dS k| + 2 u |dQ|;  dK likewise with q
//   dV = sum_i P dO_i:        U |dV| + sum_i p (E_i + ln2 bL_i + U) |dO| + G(T) sum_i p |dO|
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cudasim.h"
#include "llmc/bf16.h"
#include "llmc/cpu/cpu_backend.h"
#include "llmc/cuda/attention.cuh"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/layernorm_shape.h"
#include "llmc/error.h"
#include "test/fixtures/testing.h"

using llmc::CpuBackend;
using llmc::CudaBackend;
using bf16 = __nv_bfloat16;

namespace {

constexpr double U = 0x1p-8, u32 = 0x1p-24, LN2 = 0.69314718055994531;
double G(size_t n) { return 2.0 * (double)(n + 2) * u32; }

std::mt19937_64 rng(1011);

// n random values in [lo, hi], rounded to bf16 (so both backends see identical inputs).
std::vector<float> bf16_values(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = llmc::bf16_to_float(llmc::float_to_bf16(d(rng)));
    return v;
}

// Device buffers of one test case, returned to the backend when the case ends.
struct CaseBuffers {
    CudaBackend& gpu;
    std::vector<std::shared_ptr<void>> held;
    template <class X>
    X* make(size_t n) {
        held.emplace_back(gpu.alloc(n * sizeof(X)), [this](void* p) { gpu.free(p); });
        return static_cast<X*>(held.back().get());
    }
};
std::vector<float> fetch_bf16(CudaBackend& gpu, const bf16* p, size_t n) {
    std::vector<float> h(n);
    gpu.download_floats(h.data(), p, n);
    return h;
}
std::vector<float> fetch_f32(CudaBackend& gpu, const float* p, size_t n) {
    std::vector<float> h(n);
    gpu.copy_to_host(h.data(), p, n * sizeof(float));
    return h;
}

// Every element within its bound (NaN fails); the PASS line reports the largest error and error / bound.
void expect_within(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<double>& bound) {
    size_t outside = 0, first = 0;
    double worst = 0, worst_ratio = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double err = std::fabs((double)got[i] - want[i]);
        const bool ok = err <= bound[i];
        if (!ok && outside++ == 0) first = i;
        if (ok) {
            worst = std::max(worst, err);
            if (bound[i] > 0) worst_ratio = std::max(worst_ratio, err / bound[i]);
        }
    }
    if (outside) {
        testing::fail(what, "%zu of %zu outside the bound; first [%zu]: got %.8g, want %.8g, bound %.3g", outside,
                      got.size(), first, (double)got[first], want[first], bound[first]);
        return;
    }
    std::printf("PASS %s (max abs err %.3g, max err/bound %.3f)\n", what.c_str(), worst, worst_ratio);
    testing::counts().passed++;
}

// Runs op() (which returns its outputs as float vectors) under every thread order; the outputs must be bitwise
// equal. Returns the first order's.
std::vector<std::vector<float>> each_order_identical(const std::string& what,
                                                     const std::function<std::vector<std::vector<float>>()>& op) {
    std::vector<std::vector<std::vector<float>>> runs;
    cudasim::for_each_order([&] { runs.push_back(op()); });
    bool same = true;
    for (const auto& r : runs)
        for (size_t k = 0; k < r.size(); k++)
            same = same && r[k].size() == runs[0][k].size() &&
                   std::memcmp(r[k].data(), runs[0][k].data(), r[k].size() * sizeof(float)) == 0;
    testing::check(what + ": bitwise identical under all " + std::to_string(runs.size()) + " thread orders", same,
                   "the outputs differ between thread orders");
    return runs[0];
}

// The kernel variants the tests run (llmc/cuda/attention.cuh compiles these): every forward (keys, stages) that the
// simulated device's shared memory holds, plus the backend's own choice for this device, each with the device's dQ
// key tile. The backward runs after each forward; the first forward's backward also with the other dQ key tile.
const int kFwdVariants[][2] = {{64, 3}, {64, 2}, {32, 2}};
const int kDqKeys[] = {64, 32};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Whether the dQ kernel with a key tile of dq_keys fits device d at head size hs.
bool dq_fits(size_t hs, int dq_keys, const llmc::DeviceLimits& d) {
    switch (hs) {
        case 16: return llmc::AttentionTiles<16>::dq_smem(dq_keys) <= d.smem_per_block;
        case 32: return llmc::AttentionTiles<32>::dq_smem(dq_keys) <= d.smem_per_block;
        case 64: return llmc::AttentionTiles<64>::dq_smem(dq_keys) <= d.smem_per_block;
        default: return llmc::AttentionTiles<128>::dq_smem(dq_keys) <= d.smem_per_block;
    }
}

std::string variant_name(const llmc::AttentionKernels& k) {
    return "[fwd " + std::to_string(k.fwd_keys) + " keys x " + std::to_string(k.fwd_stages) + " stages]";
}

template <int HS>
std::vector<llmc::AttentionKernels> variants_hs(const llmc::DeviceLimits& d, const llmc::AttentionKernels& chosen) {
    using Tiles = llmc::AttentionTiles<HS>;
    std::vector<llmc::AttentionKernels> out;
    bool has_chosen = false;
    for (const auto& f : kFwdVariants)
        if (Tiles::fwd_smem(f[0], f[1]) <= d.smem_per_block) {
            llmc::AttentionKernels k = chosen;
            k.fwd_keys = f[0], k.fwd_stages = f[1];
            has_chosen = has_chosen || (k.fwd_keys == chosen.fwd_keys && k.fwd_stages == chosen.fwd_stages);
            out.push_back(k);
        }
    if (!has_chosen) out.push_back(chosen);
    return out;
}

std::vector<llmc::AttentionKernels> variants_to_run(size_t hs, const llmc::DeviceLimits& d,
                                                    const llmc::AttentionKernels& chosen) {
    switch (hs) {
        case 16: return variants_hs<16>(d, chosen);
        case 32: return variants_hs<32>(d, chosen);
        case 64: return variants_hs<64>(d, chosen);
        default: return variants_hs<128>(d, chosen);
    }
}

void test_attention(CudaBackend& gpu, CpuBackend& cpu, size_t B, size_t T, size_t NH, size_t hs) {
    const size_t C = NH * hs, C3 = 3 * C, BH = B * NH;
    const std::string shape = "attention B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" +
                              std::to_string(NH) + " hs=" + std::to_string(hs);
    const std::vector<float> qkv = bf16_values(B * T * C3, -2.0f, 2.0f), dout = bf16_values(B * T * C, -1.0f, 1.0f);
    std::vector<float> out_cpu(B * T * C), att(B * NH * T * T), dqkv_cpu(B * T * C3);
    cpu.attention_forward(out_cpu.data(), att.data(), qkv.data(), B, T, C, NH);
    cpu.attention_backward(dqkv_cpu.data(), dout.data(), qkv.data(), out_cpu.data(), att.data(), B, T, C, NH);

    CaseBuffers dev{gpu, {}};
    bf16 *d_qkv = dev.make<bf16>(B * T * C3), *d_out = dev.make<bf16>(B * T * C);
    bf16 *d_dout = dev.make<bf16>(B * T * C), *d_dqkv = dev.make<bf16>(B * T * C3);
    float* d_lse = dev.make<float>(CudaBackend::attention_state_elems(B, T, NH));
    float* d_rowdot = dev.make<float>(llmc::attention_rowdot_elems(B, T, NH));
    gpu.upload_floats(d_qkv, qkv.data(), qkv.size());
    gpu.upload_floats(d_dout, dout.data(), dout.size());
    // The backward through the library call with the variants k, or the backend's call (k == nullptr).
    auto backward_into = [&](const llmc::AttentionKernels* k) {
        std::vector<float> garbage(B * T * C3, 1e30f), garbage_d(BH * T, 1e30f);
        gpu.upload_floats(d_dqkv, garbage.data(), garbage.size());  // every element must be written
        gpu.copy_to_device(d_rowdot, garbage_d.data(), garbage_d.size() * sizeof(float));
        if (k) llmc::attention_backward(d_dqkv, d_rowdot, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, *k, gpu.stream());
        else gpu.attention_backward(d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH);
        // D: the library call's rowdot (the backend keeps its own scratch, not inspected)
        return std::vector<std::vector<float>>{fetch_bf16(gpu, d_dqkv, B * T * C3),
                                               k ? fetch_f32(gpu, d_rowdot, BH * T) : std::vector<float>()};
    };
    // Runs one forward variant (through the backend's own choice when k is null), then the backward; returns out,
    // lse, dqkv and D. The first variant's backward also runs with the other dQ key tile (on its inputs: the other
    // forwards differ only in the forward's bits).
    bool first = true;
    auto run = [&](const llmc::AttentionKernels* k, const std::string& tag) {
        const std::vector<std::vector<float>> fwd = each_order_identical(tag + " forward", [&] {
            if (k) llmc::attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, *k, gpu.stream());
            else gpu.attention_forward(d_out, d_lse, d_qkv, B, T, C, NH);
            return std::vector<std::vector<float>>{fetch_bf16(gpu, d_out, B * T * C), fetch_f32(gpu, d_lse, BH * T)};
        });
        const std::vector<std::vector<float>> bwd =
            each_order_identical(tag + " backward", [&] { return backward_into(k); });
        const std::vector<float>& dqkv = bwd[0];
        const std::vector<float> again = backward_into(k)[0], third = backward_into(k)[0];
        testing::check(tag + " backward: bit-identical across two more runs", same_bits(again, dqkv) &&
                       same_bits(third, dqkv), "runs differ");
        if (k && first) {
            first = false;
            for (int dq_keys : kDqKeys) {
                if (dq_keys == k->dq_keys || !dq_fits(hs, dq_keys, gpu.device_limits())) continue;
                llmc::AttentionKernels other = *k;
                other.dq_keys = dq_keys;
                const std::vector<std::vector<float>> o = backward_into(&other);
                testing::check(tag + " backward with a dQ key tile of " + std::to_string(dq_keys) +
                               " instead of " + std::to_string(k->dq_keys) + ": the same bits, D included",
                               same_bits(o[0], dqkv) && same_bits(o[1], bwd[1]), "the results differ");
            }
        }
        return std::vector<std::vector<float>>{fwd[0], fwd[1], dqkv, bwd[1]};
    };
    llmc::AttentionKernels chosen;
    testing::check(shape + ": the device has a variant", llmc::attention_kernels_for(hs, gpu.device_limits(), &chosen),
                   "no variant fits");
    std::vector<std::pair<std::string, std::vector<std::vector<float>>>> results;
    for (const llmc::AttentionKernels& k : variants_to_run(hs, gpu.device_limits(), chosen)) {
        const std::string tag = shape + " " + variant_name(k);
        results.emplace_back(tag, run(&k, tag));
        if (k.fwd_keys == chosen.fwd_keys && k.fwd_stages == chosen.fwd_stages) {
            // The backend's own call for this device: the same bits as its variant launched directly.
            const std::string mine_tag = shape + " backend's choice " + variant_name(chosen);
            const std::vector<std::vector<float>> mine = run(nullptr, mine_tag);
            const auto& direct = results.back().second;
            testing::check(mine_tag + ": bitwise equal to the variant launched directly",
                           same_bits(direct[0], mine[0]) && same_bits(direct[1], mine[1]) &&
                               same_bits(direct[2], mine[2]),
                           "the backend's call differs from the direct launch");
        }
    }

    // ---- bounds, per (b, h) ---------------------------------------------------------------------------------------
    const double scale = 1.0 / std::sqrt((double)hs), c = scale / LN2;
    const size_t ntiles = (T + 31) / 32;  // key tiles of the smallest variant (32 keys): the most rescalings
    std::vector<double> want_out(out_cpu.begin(), out_cpu.end()), bout(B * T * C);
    std::vector<double> want_lse(BH * T), blse(BH * T);
    std::vector<double> want_dqkv(dqkv_cpu.begin(), dqkv_cpu.end()), bdqkv(B * T * C3);
    std::vector<double> want_rowdot(BH * T), browdot(BH * T);
    std::vector<double> S(T * T), Sabs(T * T), E(T), bL(T), dP(T * T), edP(T * T), dS(T * T), edS(T * T);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++) {
            auto at = [&](size_t t, size_t part, size_t d) { return (double)qkv[(b * T + t) * C3 + part * C + h * hs + d]; };
            auto p = [&](size_t i, size_t j) { return (double)att[((b * NH + h) * T + i) * T + j]; };
            auto dO = [&](size_t t, size_t d) { return (double)dout[(b * T + t) * C + h * hs + d]; };
            const size_t row_out = b * T * C + h * hs, row_qkv = b * T * C3 + h * hs, bh = b * NH + h;
            for (size_t i = 0; i < T; i++) {
                double smax = 0, D = 0, sum_e = 0, mx = -INFINITY;
                for (size_t j = 0; j <= i; j++) {
                    double s = 0, sa = 0;
                    for (size_t d = 0; d < hs; d++) s += at(i, 0, d) * at(j, 1, d), sa += std::fabs(at(i, 0, d) * at(j, 1, d));
                    S[i * T + j] = s, Sabs[i * T + j] = sa;
                    smax = std::max(smax, std::fabs(s));
                    mx = std::max(mx, s * scale);
                }
                for (size_t j = 0; j <= i; j++) {
                    D = std::max(D, G(hs) * scale * Sabs[i * T + j] + 0x1p-23 * scale * (std::fabs(S[i * T + j]) + smax));
                    sum_e += std::exp(S[i * T + j] * scale - mx);
                }
                E[i] = 2 * D * (1 + 2 * D) + G(T) + 9 * u32 + 2 * u32 * (double)ntiles;
                want_lse[bh * T + i] = (mx + std::log(sum_e)) / LN2;
                bL[i] = (D * (1 + D) + G(T) + 0x1p-21) / LN2 + 0x1p-22 * (std::fabs(want_lse[bh * T + i]) + c * smax);
                blse[bh * T + i] = bL[i];
                for (size_t d = 0; d < hs; d++) {
                    double e = 0, sp = 0;
                    for (size_t j = 0; j <= i; j++) {
                        e += p(i, j) * (E[i] + U) * std::fabs(at(j, 2, d));
                        sp += p(i, j) * std::fabs(at(j, 2, d));
                    }
                    bout[row_out + i * C + d] = U * std::fabs(want_out[row_out + i * C + d]) + e + G(T) * sp;
                }
            }
            // backward: dP, D and dS per row, then the three products
            for (size_t i = 0; i < T; i++) {
                double Dcpu = 0, eD = 0, sdp = 0;
                for (size_t j = 0; j <= i; j++) {
                    double s = 0, sa = 0;
                    for (size_t d = 0; d < hs; d++) s += dO(i, d) * at(j, 2, d), sa += std::fabs(dO(i, d) * at(j, 2, d));
                    dP[i * T + j] = s, edP[i * T + j] = G(hs) * sa;
                    Dcpu += p(i, j) * s;
                    eD += p(i, j) * (E[i] * std::fabs(s) + G(hs) * sa);
                    sdp += p(i, j) * std::fabs(s);
                }
                for (size_t d = 0; d < hs; d++)
                    eD += std::fabs(dO(i, d)) * bout[row_out + i * C + d] +
                          G(hs) * std::fabs(dO(i, d) * want_out[row_out + i * C + d]);
                eD += G(T) * sdp;
                want_rowdot[bh * T + i] = Dcpu, browdot[bh * T + i] = eD;
                for (size_t j = 0; j < T; j++) {
                    if (j > i) {
                        dS[i * T + j] = edS[i * T + j] = 0;
                        continue;
                    }
                    const double pij = p(i, j), ds = pij * (dP[i * T + j] - Dcpu), ep = pij * (E[i] + LN2 * bL[i]);
                    dS[i * T + j] = ds;
                    edS[i * T + j] = ep * std::fabs(dP[i * T + j] - Dcpu) + pij * (edP[i * T + j] + eD) +
                                     U * std::fabs(ds) + 4 * u32 * pij * (std::fabs(dP[i * T + j]) + std::fabs(Dcpu));
                }
            }
            for (size_t t = 0; t < T; t++)
                for (size_t d = 0; d < hs; d++) {
                    double eq = 0, sq = 0, ek = 0, sk = 0, ev = 0, sv = 0;
                    for (size_t j = 0; j <= t; j++) {  // dQ_t = scale sum_j dS[t, j] k_j
                        eq += edS[t * T + j] * std::fabs(at(j, 1, d));
                        sq += std::fabs(dS[t * T + j] * at(j, 1, d));
                    }
                    for (size_t i = t; i < T; i++) {  // dK_t = scale sum_i dS[i, t] q_i;  dV_t = sum_i P[i, t] dO_i
                        ek += edS[i * T + t] * std::fabs(at(i, 0, d));
                        sk += std::fabs(dS[i * T + t] * at(i, 0, d));
                        ev += p(i, t) * (E[i] + LN2 * bL[i] + U) * std::fabs(dO(i, d));
                        sv += p(i, t) * std::fabs(dO(i, d));
                    }
                    const size_t o = row_qkv + t * C3 + d;
                    bdqkv[o] = (U + 2 * u32) * std::fabs(want_dqkv[o]) + scale * (eq + G(T) * sq);
                    bdqkv[o + C] = (U + 2 * u32) * std::fabs(want_dqkv[o + C]) + scale * (ek + G(T) * sk);
                    bdqkv[o + 2 * C] = U * std::fabs(want_dqkv[o + 2 * C]) + ev + G(T) * sv;
                }
        }
    for (const auto& r : results) {
        expect_within(r.first + " forward out", r.second[0], want_out, bout);
        expect_within(r.first + " forward log-sum-exp (base 2)", r.second[1], want_lse, blse);
        expect_within(r.first + " backward dqkv", r.second[2], want_dqkv, bdqkv);
        expect_within(r.first + " backward D = dO . O (against sum_j P dP)", r.second[3], want_rowdot, browdot);
    }
}

// The variants and layernorm warps each GPU generation gets, from its limits (CUDA C++ Programming Guide, compute
// capabilities table: shared memory per block with the opt-in / per SM), at every GPT-2 width and head size 32 / 64 /
// 128: each kernel fits the block limit, the choices are the expected ones, and a device too small is refused.
void test_variant_choice() {
    struct Profile {
        const char* name;
        llmc::DeviceLimits d;
        int fwd_keys_hs128, fwd_stages_hs64, ln_warps_1600, dq_keys_hs128;
    };
    const Profile profiles[] = {{"sm_80", {80, 163 * 1024, 164 * 1024}, 64, 3, 8, 64},
                                {"sm_86", {86, 99 * 1024, 100 * 1024}, 32, 2, 7, 32},
                                {"sm_89", {89, 99 * 1024, 100 * 1024}, 32, 2, 7, 32},
                                {"sm_90", {90, 227 * 1024, 228 * 1024}, 64, 3, 8, 64}};
    for (const Profile& p : profiles) {
        bool all_fit = true;
        for (size_t hs : {16, 32, 64, 128}) {
            llmc::AttentionKernels k;
            all_fit = all_fit && llmc::attention_kernels_for(hs, p.d, &k) && k.fwd_smem <= p.d.smem_per_block &&
                      k.dq_smem <= p.d.smem_per_block && k.dkv_smem <= p.d.smem_per_block;
            if (hs == 128) testing::check(std::string(p.name) + ": forward key tile at hs = 128", k.fwd_keys == p.fwd_keys_hs128,
                                          "got %d keys, want %d", k.fwd_keys, p.fwd_keys_hs128);
            if (hs == 128) testing::check(std::string(p.name) + ": dQ key tile at hs = 128", k.dq_keys == p.dq_keys_hs128,
                                          "got %d keys, want %d", k.dq_keys, p.dq_keys_hs128);
            if (hs == 64) testing::check(std::string(p.name) + ": dQ key tile at hs = 64 (64 fits every profile)",
                                         k.dq_keys == 64, "got %d keys", k.dq_keys);
            if (hs == 64) testing::check(std::string(p.name) + ": forward cp.async stages at hs = 64",
                                         k.fwd_stages == p.fwd_stages_hs64, "got %d, want %d", k.fwd_stages,
                                         p.fwd_stages_hs64);
        }
        testing::check(std::string(p.name) + ": a variant of every attention kernel fits at hs = 16, 32, 64, 128",
                       all_fit, "a kernel exceeds the shared memory per block");
        bool ln_fits = true;
        for (size_t C : {768, 1024, 1280, 1600}) ln_fits = ln_fits && llmc::layernorm_backward_warps(C, p.d) >= 1;
        testing::check(std::string(p.name) + ": layernorm backward fits at C = 768 .. 1600", ln_fits, "no warp fits");
        testing::check(std::string(p.name) + ": layernorm backward warps at C = 1600",
                       llmc::layernorm_backward_warps(1600, p.d) == (size_t)p.ln_warps_1600, "got %zu, want %d",
                       llmc::layernorm_backward_warps(1600, p.d), p.ln_warps_1600);
    }
    const llmc::DeviceLimits small{75, 64 * 1024, 64 * 1024};  // a Turing-sized limit: hs = 128 cannot run
    testing::check("a device with 64 KiB per block is refused at hs = 128, with the sizes",
                   testing::throws_with([&] { llmc::attention_kernels_or_fail(128, small); },
                                        "allows 65536 bytes of shared memory per block"));
    llmc::AttentionKernels k;
    testing::check("... and still runs hs = 64", llmc::attention_kernels_for(64, small, &k), "refused");
}

// An empty batch (T = 0 or B = 0): nothing to launch, the backward returns at once.
void test_empty_batch(CudaBackend& gpu) {
    const size_t C = 32, NH = 1;
    CaseBuffers dev{gpu, {}};
    bf16 *buf = dev.make<bf16>(3 * C);
    float* f = dev.make<float>(4);
    const llmc::AttentionKernels k = llmc::attention_kernels_or_fail(C / NH, gpu.device_limits());
    auto runs_empty = [&](size_t b, size_t t) {
        try {
            llmc::attention_backward(buf, f, buf, buf, buf, f, b, t, C, NH, k, gpu.stream());
            gpu.synchronize();
            return true;
        } catch (const std::exception& e) {
            std::printf("  (threw: %s)\n", e.what());
            return false;
        }
    };
    testing::check("attention backward with T = 0 returns at once", runs_empty(1, 0), "it failed");
    testing::check("attention backward with B = 0 returns at once", runs_empty(0, 40), "it failed");
}

// The dK/dV kernel's grid has the heads as gridDim.y, at most 65535 on every GPU: more heads go in several launches.
// Host arithmetic only (a launch with 65536 heads is too slow to simulate).
void test_head_chunks() {
    auto chunks = [](size_t BH) {
        std::vector<std::pair<size_t, size_t>> out;
        llmc::for_each_head_chunk(BH, llmc::kAttentionMaxGridY, [&](size_t h0, size_t n) { out.push_back({h0, n}); });
        return out;
    };
    const std::vector<std::pair<size_t, size_t>> two = {{0, 65535}, {65535, 4465}}, one = {{0, 65535}};
    testing::check("dK/dV launches: 70000 heads as 65535 + 4465", chunks(70000) == two, "%zu launches",
                   chunks(70000).size());
    testing::check("dK/dV launches: 65535 heads in one", chunks(65535) == one, "%zu launches", chunks(65535).size());
    testing::check("dK/dV launches: 768 heads in one, none for 0", chunks(768).size() == 1 && chunks(0).empty());
}

}  // namespace

int main() {
    try {
        CudaBackend gpu;
        CpuBackend cpu;
        test_attention(gpu, cpu, 1, 1, 1, 32);     // T = 1: one row, one key
        test_attention(gpu, cpu, 2, 17, 2, 32);    // B, NH > 1; T not a multiple of 16
        test_attention(gpu, cpu, 1, 24, 2, 64);
        test_attention(gpu, cpu, 1, 100, 1, 64);   // two key tiles, two backward query tiles, partial last tiles
        test_attention(gpu, cpu, 1, 130, 1, 32);   // two forward query tiles of 128 rows
        test_attention(gpu, cpu, 1, 17, 1, 128);
        test_attention(gpu, cpu, 1, 100, 1, 128);  // hs = 128: 8 forward warps, 16-query backward tiles
        test_attention(gpu, cpu, 1, 9, 2, 16);     // hs = 16 (the simulator's tiny trainer models)
        test_attention(gpu, cpu, 1, 257, 2, 32);   // head-major grid with several heads and query tiles; 1-row tails
        test_attention(gpu, cpu, 2, 150, 1, 128);  // B > 1 with several tiles at hs = 128
        test_attention(gpu, cpu, 5, 70, 1, 32);    // five heads in one dK/dV launch (gridDim.y = 5)
        test_variant_choice();
        testing::check("attention refuses head size 48 with a message naming it",
                       testing::throws_with([] { CudaBackend::check_attention_shape(96, 2); }, "head size C/NH = 96/2 = 48"));
        testing::check("attention refuses C not divisible by NH",
                       testing::throws_with([] { CudaBackend::check_attention_shape(100, 3); }, "not a multiple"));
        test_empty_batch(gpu);
        test_head_chunks();
    } catch (const llmc::Error& e) {
        testing::fail("sim_attention", "%s", e.what());
    }
    return testing::finish();
}
