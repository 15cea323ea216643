// Every CudaBackend op, run under the CUDA simulator, against the same op of the CpuBackend (fp32 reference).
//
// Inputs are random and rounded to bf16 first, so both backends see exactly the same values; the differences come
// only from the CUDA side's bf16 storage of results and from fp32 rounding in both. Each op runs under every thread
// order of the simulator (forward, reverse, shuffled, warp-serial, warp-serial reverse): the results must be bitwise
// identical (the kernels are deterministic, and a missing barrier shows up as a difference or an error) and within a
// per-element error bound.
//
// Error bounds (derived per op next to each test; all in double on the host):
//   U    = 2^-8: bf16 unit roundoff. bf16 keeps 8 significant bits (7 stored + the implicit one), so rounding to
//          nearest changes a value by at most half an ulp = 2^-8 relative.
//   G(n) = 2 (n + 2) 2^-24: an fp32 sum of n products differs from the exact one by at most (n + 2) u32 times the
//          sum of the magnitudes of its terms (u32 = 2^-24, the standard bound for recursive summation plus the final
//          scaling); the factor 2 covers both implementations, since the CPU reference is fp32 too.
// A bound is "U |want| + (fp32 error) + (propagated input error)"; nothing is widened beyond what the math gives.
// Shapes are tiny and odd (T, C not multiples of 32) so that the partial warps and block-stride loops are exercised.
//
// Vector and scalar paths: every memory-bound kernel has a 16-byte vector path (sizes a multiple of 8 bf16 / 4 fp32,
// aligned pointers) and a scalar path for everything else, chosen on the host (llmc/cuda/common.cuh). Each op is run
// at shapes of both kinds, and the test checks from the backend's path counters which path each call took (so a
// vector-shaped case cannot silently run the scalar code, nor the reverse). The simulator aborts on a misaligned
// 16-byte access, as a GPU would fault.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cudasim.h"
#include "llmc/bf16.h"
#include "llmc/cpu/cpu_backend.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/encoder_groups.h"
#include "llmc/error.h"
#include "test/fixtures/sim_check.h"
#include "test/fixtures/testing.h"

using llmc::CpuBackend;
using llmc::CudaBackend;
using bf16 = __nv_bfloat16;
using Vec = std::vector<float>;
using Bound = std::vector<double>;

namespace {

using simcheck::Arena;
using simcheck::check_bound;
using simcheck::G;
using simcheck::get;
using simcheck::put;
using simcheck::round_bf16;
using simcheck::U;
constexpr double kGeluSlope = 1.13;                           // max |gelu'(x)| of the tanh GELU (1.1289 at x ~ 1.5)

// Whether the simulated cuBLASLt was told to decline this fused epilogue (CUDASIM_CUBLASLT_DECLINE="BIAS,DGELU,..." or
// "all", docs/cudasim.md): the linear-layer ops then take their fallback passes, whose roundings the bounds follow.
bool declined(const std::string& epilogue) {
    const char* env = std::getenv("CUDASIM_CUBLASLT_DECLINE");
    if (!env) return false;
    const std::string list = std::string(",") + env + ",";
    return list == ",all," || list.find("," + epilogue + ",") != std::string::npos;
}

std::mt19937_64 rng(20240521);

Vec random_vec(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    Vec v(n);
    for (auto& x : v) x = d(rng);
    return v;
}
// Random values already representable in bf16 (so both backends start from identical inputs).
Vec random_bf16(size_t n, float lo, float hi) {
    Vec v = random_vec(n, lo, hi);
    for (auto& x : v) x = llmc::bf16_to_float(llmc::float_to_bf16(x));
    return v;
}
// Which path the memory-bound kernels of an op must take (Any: not checked).
enum class Path { Vector, Scalar, Any };
Path path_for(bool vector) { return vector ? Path::Vector : Path::Scalar; }

// Runs `op` (which resets its inputs, runs the CUDA op and returns its outputs) under every thread order of the
// simulator; checks that the results are bitwise identical and returns the first. With a CudaBackend and a Path,
// also checks that the op calls took that path (CudaBackend::vector_path_calls / scalar_path_calls).
using Outputs = std::vector<Vec>;
Outputs run_all_orders(const std::string& name, const std::function<Outputs()>& op, CudaBackend* gpu = nullptr,
                       Path expect = Path::Any) {
    std::vector<Outputs> res;
    const size_t vec0 = gpu ? gpu->vector_path_calls() : 0, sca0 = gpu ? gpu->scalar_path_calls() : 0;
    cudasim::for_each_order([&](cudasim::Order) { res.push_back(op()); });
    if (gpu && expect != Path::Any) {
        const size_t vec = gpu->vector_path_calls() - vec0, sca = gpu->scalar_path_calls() - sca0;
        const bool ok = expect == Path::Vector ? vec > 0 && sca == 0 : sca > 0 && vec == 0;
        testing::check(name + (expect == Path::Vector ? "/vector path" : "/scalar path"), ok,
                       "%zu op calls took the vector path, %zu the scalar path", vec, sca);
    }
    bool same = true;
    for (size_t o = 1; o < res.size(); o++)
        for (size_t k = 0; k < res[0].size(); k++)
            if (res[o][k].size() != res[0][k].size() ||
                std::memcmp(res[o][k].data(), res[0][k].data(), res[0][k].size() * sizeof(float)) != 0)
                same = false;
    testing::check(name + "/identical under every thread order", same,
                   "results differ between thread orders");
    return res[0];
}

// The host grouping of the dwte gather: every position exactly once, each bucket's positions ascending, no chunk
// longer than kEncoderChunk, a token's chunks consecutive and covering its bucket, multi-chunk tokens' slots in
// chunk order; the counting-sort scratch is left all zero.
void test_encoder_grouping(const std::vector<int>& tok, size_t V, const std::string& tag) {
    const size_t N = tok.size();
    std::vector<int> packed(llmc::encoder_max_group_ints(N), -7), count(V, 0), next(V, 0);
    const llmc::EncoderGroupSizes s = llmc::encoder_group_positions(packed.data(), tok.data(), N, count.data(),
                                                                    next.data(), V);
    const llmc::EncoderGroups g = llmc::encoder_group_views(packed.data(), s);
    bool ok = s.ints() <= packed.size() && g.chunk_start[0] == 0 && (size_t)g.chunk_start[s.num_chunks] == N &&
              std::all_of(count.begin(), count.end(), [](int c) { return c == 0; });
    std::vector<int> seen(N, 0), per_token(V, 0);
    size_t slots = 0, multi = 0, longest = 0;
    for (size_t k = 0; k < s.num_chunks && ok; k++) {
        const int b = g.chunk_start[k], e = g.chunk_start[k + 1], t = g.chunk_token[k];
        ok = b < e && (size_t)(e - b) <= llmc::kEncoderChunk;
        longest = std::max(longest, (size_t)(e - b));
        for (int p = b; p < e && ok; p++) {
            ok = tok[g.positions[p]] == t && ++seen[g.positions[p]] == 1;
            if (p > b) ok = ok && g.positions[p] > g.positions[p - 1];
        }
        per_token[t] += e - b;
        if (g.chunk_slot[k] >= 0) ok = ok && (size_t)g.chunk_slot[k] == slots++;
    }
    for (size_t m = 0; m < s.num_multi && ok; m++) {
        multi++;
        const int t = g.multi_token[m];
        const size_t want = (per_token[t] + llmc::kEncoderChunk - 1) / llmc::kEncoderChunk;
        ok = want > 1 && (size_t)(g.multi_slot_start[m + 1] - g.multi_slot_start[m]) == want;
    }
    ok = ok && slots == s.num_slots && (size_t)g.multi_slot_start[s.num_multi] == slots &&
         std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; });
    testing::check(tag + " grouping: chunks of at most " + std::to_string(llmc::kEncoderChunk) +
                   " positions cover every position once", ok, "inconsistent grouping (%zu chunks, %zu multi-chunk "
                   "tokens, longest chunk %zu)", s.num_chunks, multi, longest);
}

// ---- encoder --------------------------------------------------------------------------------------------------
// forward: out = round(wte + wpe): the fp32 sum of two bf16 values in [-1, 1] is exact, so only the final
// rounding remains: |err| <= U |want|.
// backward: fp32 sums of at most B*T terms: |err| <= G(B*T) (|initial| + sum of |terms|); the sums of magnitudes are
// obtained by running the CPU op on |dout| from zero.
// Uniform random tokens (some repeated), or with zipf: a skewed batch where token 0 is 30% of the positions and
// the others follow a Zipf law (frequency ~ 1 / rank), as in real text: token 0 needs several chunks of the
// balanced dwte gather (llmc/cuda/encoder.cuh).
std::vector<int> random_tokens(size_t N, size_t V, bool zipf) {
    std::vector<int> tok(N);
    if (!zipf) {
        std::uniform_int_distribution<int> dt(0, (int)V - 1);
        for (auto& t : tok) t = dt(rng);
        tok[0] = tok[N - 1] = tok[N / 2];  // make sure some token repeats
        return tok;
    }
    std::vector<double> w(V - 1);
    for (size_t r = 0; r + 1 < V; r++) w[r] = 1.0 / (double)(r + 1);
    std::discrete_distribution<int> dz(w.begin(), w.end());
    for (auto& t : tok) t = 1 + dz(rng);
    std::vector<size_t> order(N);
    for (size_t n = 0; n < N; n++) order[n] = n;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < (3 * N + 9) / 10; i++) tok[order[i]] = 0;  // 30% of the positions, scattered
    return tok;
}

void test_encoder(CudaBackend& gpu, CpuBackend& cpu, size_t B, size_t T, size_t C, size_t V, bool zipf = false) {
    const std::string tag = "encoder B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
                            (zipf ? " zipf" : "");
    const size_t N = B * T;
    const Path path = path_for(C % 8 == 0);
    Arena a(gpu);
    Vec wte = random_bf16(V * C, -1, 1), wpe = random_bf16(T * C, -1, 1), dout = random_bf16(N * C, -1, 1);
    const std::vector<int> tok = random_tokens(N, V, zipf);
    Vec dwte0 = random_vec(V * C, -1, 1), dwpe0 = random_vec(T * C, -1, 1);

    Vec out_ref(N * C);
    cpu.encoder_forward(out_ref.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
    Vec dwte_ref = dwte0, dwpe_ref = dwpe0;
    cpu.encoder_backward(dwte_ref.data(), dwpe_ref.data(), dout.data(), tok.data(), B, T, C);
    Vec absd(N * C), swte(V * C, 0.0f), swpe(T * C, 0.0f);
    for (size_t i = 0; i < N * C; i++) absd[i] = std::fabs(dout[i]);
    cpu.encoder_backward(swte.data(), swpe.data(), absd.data(), tok.data(), B, T, C);

    bf16 *d_wte = a.bf(V * C), *d_wpe = a.bf(T * C), *d_out = a.bf(N * C), *d_dout = a.bf(N * C);
    float *d_dwte = a.f32(V * C), *d_dwpe = a.f32(T * C);
    int* d_tok = a.i32(tok);
    put(gpu, d_wte, wte);
    put(gpu, d_wpe, wpe);
    put(gpu, d_dout, dout);

    Outputs f = run_all_orders(tag + " forward", [&] {
        gpu.encoder_forward(d_out, d_tok, d_wte, d_wpe, B, T, C);
        return Outputs{get(gpu, d_out, N * C)};
    }, &gpu, path);
    Bound bo(N * C);
    for (size_t i = 0; i < N * C; i++) bo[i] = U * std::fabs(out_ref[i]);
    check_bound(tag + " forward out", f[0], out_ref, bo);

    Outputs b = run_all_orders(tag + " backward", [&] {
        put(gpu, d_dwte, dwte0);
        put(gpu, d_dwpe, dwpe0);
        gpu.encoder_backward(d_dwte, d_dwpe, d_dout, d_tok, B, T, C);
        return Outputs{get(gpu, d_dwte, V * C), get(gpu, d_dwpe, T * C)};
    }, &gpu, path);
    Bound bw(V * C), bp(T * C);
    for (size_t i = 0; i < V * C; i++) bw[i] = G(N) * (std::fabs(dwte0[i]) + swte[i]);
    for (size_t i = 0; i < T * C; i++) bp[i] = G(B) * (std::fabs(dwpe0[i]) + swpe[i]);
    check_bound(tag + " backward dwte", b[0], dwte_ref, bw);
    check_bound(tag + " backward dwpe", b[1], dwpe_ref, bp);

    // The model's path: the tokens uploaded with upload_tokens are grouped from the host copy the backend kept (no
    // read-back of the tokens); it must give exactly what the read-back path gives.
    Outputs p = run_all_orders(tag + " backward (prepared)", [&] {
        put(gpu, d_dwte, dwte0);
        put(gpu, d_dwpe, dwpe0);
        gpu.upload_tokens(d_tok, tok.data(), N);
        gpu.encoder_backward(d_dwte, d_dwpe, d_dout, d_tok, B, T, C);
        return Outputs{get(gpu, d_dwte, V * C), get(gpu, d_dwpe, T * C)};
    });
    testing::check(tag + " backward with a prepared grouping is bit-identical",
                   std::memcmp(p[0].data(), b[0].data(), V * C * sizeof(float)) == 0 &&
                       std::memcmp(p[1].data(), b[1].data(), T * C * sizeof(float)) == 0);
    test_encoder_grouping(tok, V, tag);
}

// Without a position embedding (wpe and dwpe null): out = round(wte[token]) is a copy of bf16 values (bound 0), and the
// kernels never touch the null pointers (the simulator would fault). dwte is bitwise what the call with a dwpe gives
// (its kernels do not depend on dwpe), and within the bound above against the CPU.
void test_encoder_no_wpe(CudaBackend& gpu, CpuBackend& cpu, size_t B, size_t T, size_t C, size_t V) {
    const std::string tag = "encoder without wpe B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" +
                            std::to_string(C);
    const size_t N = B * T;
    const Path path = path_for(C % 8 == 0);
    Arena a(gpu);
    const Vec wte = random_bf16(V * C, -1, 1), dout = random_bf16(N * C, -1, 1), dwte0 = random_vec(V * C, -1, 1);
    const std::vector<int> tok = random_tokens(N, V, false);
    Vec out_ref(N * C), dwte_ref = dwte0, absd(N * C), swte(V * C, 0.0f);
    cpu.encoder_forward(out_ref.data(), tok.data(), wte.data(), nullptr, B, T, C);
    cpu.encoder_backward(dwte_ref.data(), nullptr, dout.data(), tok.data(), B, T, C);
    for (size_t i = 0; i < N * C; i++) absd[i] = std::fabs(dout[i]);
    cpu.encoder_backward(swte.data(), nullptr, absd.data(), tok.data(), B, T, C);

    bf16 *d_wte = a.bf(V * C), *d_out = a.bf(N * C), *d_dout = a.bf(N * C);
    float *d_dwte = a.f32(V * C), *d_dwpe = a.f32(T * C);
    int* d_tok = a.i32(tok);
    put(gpu, d_wte, wte);
    put(gpu, d_dout, dout);
    const Outputs f = run_all_orders(tag + " forward", [&] {
        gpu.encoder_forward(d_out, d_tok, d_wte, nullptr, B, T, C);
        return Outputs{get(gpu, d_out, N * C)};
    }, &gpu, path);
    check_bound(tag + " forward out = wte[token]", f[0], out_ref, Bound(N * C, 0.0));

    const Outputs b = run_all_orders(tag + " backward", [&] {
        put(gpu, d_dwte, dwte0);
        gpu.encoder_backward(d_dwte, nullptr, d_dout, d_tok, B, T, C);
        return Outputs{get(gpu, d_dwte, V * C)};
    }, &gpu, path);
    Bound bw(V * C);
    for (size_t i = 0; i < V * C; i++) bw[i] = G(N) * (std::fabs(dwte0[i]) + swte[i]);
    check_bound(tag + " backward dwte", b[0], dwte_ref, bw);
    put(gpu, d_dwte, dwte0);
    gpu.encoder_backward(d_dwte, d_dwpe, d_dout, d_tok, B, T, C);
    testing::check(tag + " backward: dwte bitwise the one of a call with dwpe",
                   std::memcmp(get(gpu, d_dwte, V * C).data(), b[0].data(), V * C * sizeof(float)) == 0);
}

// ---- layernorm --------------------------------------------------------------------------------------------------
// Statistics: mean is an fp32 sum of C terms: |err| <= G(C) mean|x|. rstd = (var + eps)^-1/2 with var an fp32 sum
// of C squares: relative error <= G(C)/2 from var, plus 2^-22 for rsqrt (2 ulp on the GPU) -> G(C) + 2^-21.
// out = xhat w + b with xhat = (x - mean) rstd: |err(xhat)| <= (|err(mean)| + |x - mean| rel_err(rstd)) rstd, plus
// 4 u32 for the subtract / multiply / fma steps; then the bf16 rounding U |out|.
double xhat_error(double x, double m, double r, double mabs, size_t C) {
    return (G(C) * mabs + std::fabs(x - m) * (G(C) + 0x1p-21)) * r + 4 * 0x1p-24 * std::fabs(x - m) * r;
}

void layernorm_forward_bounds(const Vec& x, const Vec& w, const Vec& b, const Vec& out, const Vec& mean,
                              const Vec& rstd, size_t N, size_t C, Bound& bo, Bound& bm, Bound& br) {
    bo.assign(N * C, 0);
    bm.assign(N, 0);
    br.assign(N, 0);
    for (size_t n = 0; n < N; n++) {
        double mabs = 0;
        for (size_t c = 0; c < C; c++) mabs += std::fabs(x[n * C + c]) / (double)C;
        bm[n] = G(C) * mabs;
        br[n] = (G(C) + 0x1p-21) * rstd[n];
        for (size_t c = 0; c < C; c++) {
            double ex = xhat_error(x[n * C + c], mean[n], rstd[n], mabs, C);
            bo[n * C + c] = U * std::fabs(out[n * C + c]) + ex * std::fabs(w[c]) +
                            4 * 0x1p-24 * (std::fabs(out[n * C + c]) + std::fabs(b[c]));
        }
    }
}

void test_layernorm(CudaBackend& gpu, CpuBackend& cpu, size_t N, size_t C) {
    const std::string tag = "layernorm N=" + std::to_string(N) + " C=" + std::to_string(C);
    const Path path = path_for(C % 8 == 0);
    Arena a(gpu);
    Vec x = random_bf16(N * C, -2.0f, 2.6f), w = random_bf16(C, 0.5f, 1.5f), bias = random_bf16(C, -0.5f, 0.5f);
    Vec out_ref(N * C), mean_ref(N), rstd_ref(N);
    cpu.layernorm_forward(out_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), w.data(), bias.data(), N, C);

    bf16 *d_x = a.bf(N * C), *d_w = a.bf(C), *d_b = a.bf(C), *d_out = a.bf(N * C);
    float *d_mean = a.f32(N), *d_rstd = a.f32(N);
    put(gpu, d_x, x);
    put(gpu, d_w, w);
    put(gpu, d_b, bias);
    Outputs f = run_all_orders(tag + " forward", [&] {
        gpu.layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C);
        return Outputs{get(gpu, d_out, N * C), get(gpu, d_mean, N), get(gpu, d_rstd, N)};
    }, &gpu, path);
    Bound bo, bm, br;
    layernorm_forward_bounds(x, w, bias, out_ref, mean_ref, rstd_ref, N, C, bo, bm, br);
    check_bound(tag + " forward out", f[0], out_ref, bo);
    check_bound(tag + " forward mean", f[1], mean_ref, bm);
    check_bound(tag + " forward rstd", f[2], rstd_ref, br);

    // Fused residual: residual = round(inp1 + inp2) (exact fp32 sum of two bf16 values, then one rounding: U), and
    // the layernorm of the stored residual, compared with the CPU layernorm of that same stored residual.
    Vec x2 = random_bf16(N * C, -1.0f, 1.0f);
    Vec res_ref(N * C), out2_ref(N * C), m2(N), r2(N);
    cpu.fused_residual_layernorm_forward(res_ref.data(), out2_ref.data(), m2.data(), r2.data(), x.data(), x2.data(),
                                         w.data(), bias.data(), N, C);
    bf16 *d_x2 = a.bf(N * C), *d_res = a.bf(N * C);
    put(gpu, d_x2, x2);
    Outputs fr = run_all_orders(tag + " fused residual forward", [&] {
        gpu.fused_residual_layernorm_forward(d_res, d_out, d_mean, d_rstd, d_x, d_x2, d_w, d_b, N, C);
        return Outputs{get(gpu, d_res, N * C), get(gpu, d_out, N * C), get(gpu, d_mean, N), get(gpu, d_rstd, N)};
    }, &gpu, path);
    Bound bres(N * C);
    for (size_t i = 0; i < N * C; i++) bres[i] = U * std::fabs(res_ref[i]);
    check_bound(tag + " fused residual", fr[0], res_ref, bres);
    cpu.layernorm_forward(out2_ref.data(), m2.data(), r2.data(), fr[0].data(), w.data(), bias.data(), N, C);
    layernorm_forward_bounds(fr[0], w, bias, out2_ref, m2, r2, N, C, bo, bm, br);
    check_bound(tag + " fused residual out", fr[1], out2_ref, bo);
    check_bound(tag + " fused residual mean", fr[2], m2, bm);
    check_bound(tag + " fused residual rstd", fr[3], r2, br);

    // Backward, with the CPU's mean / rstd given to both. With dnorm = dout w, A = mean(dnorm), Bm = mean(dnorm xhat):
    //   d = (dnorm - A - xhat Bm) rstd: fp32 error <= (G(C) (mean|dnorm| + |xhat| mean|dnorm xhat|) + 4 u32 (|dnorm|
    //   + |A| + |xhat Bm|)) rstd + |err(xhat)| (|Bm| rstd), and dinp = round(dinp0 + d): + U |want| + u32 |want|.
    //   dweight[c] = w0 + sum_n dout xhat: G(N) (|w0| + sum |dout xhat|) + sum |dout| |err(xhat)|.
    //   dbias[c]   = b0 + sum_n dout: G(N) (|b0| + sum |dout|).
    Vec dout = random_bf16(N * C, -1, 1), dinp0 = random_bf16(N * C, -1, 1);
    Vec dw0 = random_vec(C, -1, 1), db0 = random_vec(C, -1, 1);
    Vec dinp_ref = dinp0, dw_ref = dw0, db_ref = db0;
    cpu.layernorm_backward(dinp_ref.data(), dw_ref.data(), db_ref.data(), dout.data(), x.data(), w.data(),
                           mean_ref.data(), rstd_ref.data(), N, C);
    bf16 *d_dout = a.bf(N * C), *d_dinp = a.bf(N * C);
    float *d_dw = a.f32(C), *d_db = a.f32(C);
    put(gpu, d_dout, dout);
    Outputs bk = run_all_orders(tag + " backward", [&] {
        put(gpu, d_dinp, dinp0);
        put(gpu, d_dw, dw0);
        put(gpu, d_db, db0);
        put(gpu, d_mean, mean_ref);
        put(gpu, d_rstd, rstd_ref);
        gpu.layernorm_backward(d_dinp, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, N, C);
        return Outputs{get(gpu, d_dinp, N * C), get(gpu, d_dw, C), get(gpu, d_db, C)};
    }, &gpu, path);
    Bound bdi(N * C), bdw(C), bdb(C);
    std::vector<double> sw(C, 0), sb(C, 0), sxe(C, 0);
    for (size_t n = 0; n < N; n++) {
        const double m = mean_ref[n], r = rstd_ref[n];
        double mabs = 0, A = 0, Bm = 0, adn = 0, adnx = 0;
        for (size_t c = 0; c < C; c++) {
            double xh = (x[n * C + c] - m) * r, dn = (double)dout[n * C + c] * w[c];
            mabs += std::fabs(x[n * C + c]) / C;
            A += dn / C;
            Bm += dn * xh / C;
            adn += std::fabs(dn) / C;
            adnx += std::fabs(dn * xh) / C;
        }
        for (size_t c = 0; c < C; c++) {
            const size_t i = n * C + c;
            double xh = (x[i] - m) * r, dn = (double)dout[i] * w[c];
            double exh = xhat_error(x[i], m, r, mabs, C);
            double ed = (G(C) * (adn + std::fabs(xh) * adnx) + 4 * 0x1p-24 * (std::fabs(dn) + std::fabs(A) +
                         std::fabs(xh * Bm))) * r + exh * std::fabs(Bm) * r;
            bdi[i] = (U + 0x1p-24) * std::fabs(dinp_ref[i]) + ed;
            sw[c] += std::fabs(dout[i] * xh);
            sb[c] += std::fabs(dout[i]);
            sxe[c] += std::fabs(dout[i]) * exh;
        }
    }
    for (size_t c = 0; c < C; c++) {
        bdw[c] = G(N) * (std::fabs(dw0[c]) + sw[c]) + sxe[c];
        bdb[c] = G(N) * (std::fabs(db0[c]) + sb[c]);
    }
    check_bound(tag + " backward dinp (+=)", bk[0], dinp_ref, bdi);
    check_bound(tag + " backward dweight (+=)", bk[1], dw_ref, bdw);
    check_bound(tag + " backward dbias (+=)", bk[2], db_ref, bdb);
}

// ---- matmul (+bias, +GELU) --------------------------------------------------------------------------------------
// z = inp w^T + bias in fp32: |err(z)| <= G(C) S, S = sum_c |inp||w| + |bias|.
// out (no GELU) = round(z): U |want| + G(C) S.
// GELU: pre_gelu = round(z): U |want| + G(C) S; out = round(gelu(z~)) with z~ the input of the GELU, which is z in
// the fused cuBLASLt epilogue, and the stored round(z) in the fallback (OC not a multiple of 8): |z~ - z| <=
// G(C) S + U |z| <= G(C) S + 2U S (the 2U also covers a declined BIAS epilogue: round(round(z - bias) + bias)). Then |err(out)| <= U |want| + 1.13 |z~ - z| + 2^-20 (1 + |z|^3) (fp32 evaluation of the tanh form:
// a few ulps of terms up to 0.05 |z|^3).
// Backward: GELU backward in place: dout' = round(dout gelu'(pre)): U |want| + 2^-20 |dout| (1 + |pre|^3) =: e'.
// dinp = round(dout' w): U |want| + G(OC) sum |dout'||w| + sum_o e' |w|.
// dweight = w0 + dout'^T inp: G(N) (|w0| + sum |dout'||inp|) + sum_n e' |inp|.  dbias: G(N) (|b0| + sum |dout'|) + sum e'.
void test_matmul(CudaBackend& gpu, CpuBackend& cpu, size_t N, size_t C, size_t OC, bool has_bias, bool gelu) {
    const std::string tag = "matmul N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                            (has_bias ? " bias" : "") + (gelu ? " gelu" : "");
    Arena a(gpu);
    Vec inp = random_bf16(N * C, -1, 1), w = random_bf16(OC * C, -1, 1), bias = random_bf16(OC, -1, 1);
    const float* bias_p = has_bias ? bias.data() : nullptr;
    Vec out_ref(N * OC), pre_ref(N * OC);
    cpu.matmul_forward(out_ref.data(), inp.data(), w.data(), bias_p, N, C, OC, gelu ? pre_ref.data() : nullptr);
    std::vector<double> S(N * OC);
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < OC; o++) {
            double s = has_bias ? std::fabs(bias[o]) : 0.0;
            for (size_t c = 0; c < C; c++) s += std::fabs(inp[n * C + c] * w[o * C + c]);
            S[n * OC + o] = s;
        }

    bf16 *d_inp = a.bf(N * C), *d_w = a.bf(OC * C), *d_b = a.bf(OC), *d_out = a.bf(N * OC), *d_pre = a.bf(N * OC);
    put(gpu, d_inp, inp);
    put(gpu, d_w, w);
    put(gpu, d_b, bias);
    Outputs f = run_all_orders(tag + " forward", [&] {
        gpu.matmul_forward(d_out, d_inp, d_w, has_bias ? d_b : nullptr, N, C, OC, gelu ? d_pre : nullptr);
        return gelu ? Outputs{get(gpu, d_out, N * OC), get(gpu, d_pre, N * OC)} : Outputs{get(gpu, d_out, N * OC)};
    });
    // A declined BIAS epilogue adds the bias to the rounded product: round(round(z - bias) + bias), one more rounding
    // of a value of magnitude <= S.
    const double bias_fallback = has_bias && declined("BIAS") ? U : 0.0;
    Bound bo(N * OC), bpre(N * OC);
    for (size_t i = 0; i < N * OC; i++) {
        double ez = G(C) * S[i];
        if (gelu) {
            double z = pre_ref[i];
            bpre[i] = U * std::fabs(z) + ez + bias_fallback * S[i];
            bo[i] = U * std::fabs(out_ref[i]) + kGeluSlope * (ez + 2 * U * S[i]) + 0x1p-20 * (1 + std::pow(std::fabs(z), 3));
        } else {
            bo[i] = U * std::fabs(out_ref[i]) + ez + bias_fallback * S[i];
        }
    }
    check_bound(tag + " forward out", f[0], out_ref, bo);
    if (gelu) check_bound(tag + " forward pre_gelu", f[1], pre_ref, bpre);

    Vec dout = random_bf16(N * OC, -1, 1), pre = round_bf16(pre_ref);
    Vec dw0 = random_vec(OC * C, -1, 1), db0 = random_vec(OC, -1, 1);
    Vec dout_ref = dout, dinp_ref(N * C), dw_ref = dw0, db_ref = db0;
    cpu.matmul_backward(dinp_ref.data(), dw_ref.data(), has_bias ? db_ref.data() : nullptr, dout_ref.data(),
                        inp.data(), w.data(), N, C, OC, gelu ? pre.data() : nullptr);
    bf16 *d_dout = a.bf(N * OC), *d_dinp = a.bf(N * C);
    float *d_dw = a.f32(OC * C), *d_db = a.f32(OC);
    Outputs bk = run_all_orders(tag + " backward", [&] {
        put(gpu, d_dout, dout);
        put(gpu, d_pre, pre);
        put(gpu, d_dw, dw0);
        put(gpu, d_db, db0);
        gpu.matmul_backward(d_dinp, d_dw, has_bias ? d_db : nullptr, d_dout, d_inp, d_w, N, C, OC,
                            gelu ? d_pre : nullptr);
        return Outputs{get(gpu, d_dinp, N * C), get(gpu, d_dw, OC * C), get(gpu, d_db, OC), get(gpu, d_dout, N * OC)};
    }, &gpu, path_for((!gelu || (N * OC) % 8 == 0) && (!has_bias || OC % 8 == 0)));
    Bound edo(N * OC, 0.0);
    if (gelu) {
        for (size_t i = 0; i < N * OC; i++)
            edo[i] = U * std::fabs(dout_ref[i]) + 0x1p-20 * std::fabs(dout[i]) * (1 + std::pow(std::fabs(pre[i]), 3));
        check_bound(tag + " backward dout *= gelu'(pre_gelu) in place", bk[3], dout_ref, edo);
    } else {
        check_bound(tag + " backward dout untouched", bk[3], dout, Bound(N * OC, 0.0));
    }
    Bound bdi(N * C), bdw(OC * C), bdb(OC);
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < C; c++) {
            double s = 0, e = 0;
            for (size_t o = 0; o < OC; o++) {
                s += std::fabs(dout_ref[n * OC + o] * w[o * C + c]);
                e += edo[n * OC + o] * std::fabs(w[o * C + c]);
            }
            bdi[n * C + c] = U * std::fabs(dinp_ref[n * C + c]) + G(OC) * s + e;
        }
    for (size_t o = 0; o < OC; o++) {
        double sb = 0, eb = 0;
        for (size_t n = 0; n < N; n++) {
            sb += std::fabs(dout_ref[n * OC + o]);
            eb += edo[n * OC + o];
        }
        bdb[o] = G(N) * (std::fabs(db0[o]) + sb) + eb;
        for (size_t c = 0; c < C; c++) {
            double s = 0, e = 0;
            for (size_t n = 0; n < N; n++) {
                s += std::fabs(dout_ref[n * OC + o] * inp[n * C + c]);
                e += edo[n * OC + o] * std::fabs(inp[n * C + c]);
            }
            bdw[o * C + c] = G(N) * (std::fabs(dw0[o * C + c]) + s) + e;
        }
    }
    check_bound(tag + " backward dinp", bk[0], dinp_ref, bdi);
    check_bound(tag + " backward dweight (+=)", bk[1], dw_ref, bdw);
    if (has_bias) check_bound(tag + " backward dbias (+=)", bk[2], db_ref, bdb);
    else check_bound(tag + " backward without bias leaves dbias alone", bk[2], db0, Bound(OC, 0.0));
}

// ---- matmul backward into a GELU input (dinp_pre_gelu: DGELU epilogue, or GEMM + GELU backward) ------------------
// The layer's input is gelu(pre) (N, C); dinp = (dout w) * gelu'(pre). z = dout w in fp32: |err(z)| <= G(OC) S,
// S = sum_o |dout||w|. The fused DGELU epilogue multiplies the fp32 z and rounds once; the fallback (C not a multiple
// of 8) rounds z first (+ U |z|). gelu' is evaluated in fp32 on both sides: a few ulps of terms up to 0.05 |pre|^3
// times |z|, 2^-20 |z| (1 + |pre|^3). |gelu'| <= 1.13 carries z's error:
// |err(dinp)| <= U |want| + 1.13 (G(OC) S + U |z|) + 2^-20 |z| (1 + |pre|^3). dweight and dbias see dout unchanged.
void test_matmul_dgelu(CudaBackend& gpu, CpuBackend& cpu, size_t N, size_t C, size_t OC) {
    const std::string tag = "matmul backward into gelu N=" + std::to_string(N) + " C=" + std::to_string(C) +
                            " OC=" + std::to_string(OC) + (C % 8 == 0 ? " (DGELU epilogue)" : " (GEMM + GELU backward)");
    Arena a(gpu);
    Vec inp = random_bf16(N * C, -1, 1), w = random_bf16(OC * C, -1, 1), pre = random_bf16(N * C, -3, 3);
    Vec dout = random_bf16(N * OC, -1, 1), dw0 = random_vec(OC * C, -1, 1), db0 = random_vec(OC, -1, 1);
    Vec dinp_ref(N * C), dw_ref = dw0, db_ref = db0, dout_ref = dout;
    cpu.matmul_backward(dinp_ref.data(), dw_ref.data(), db_ref.data(), dout_ref.data(), inp.data(), w.data(), N, C, OC,
                        nullptr, pre.data());
    bf16 *d_inp = a.bf(N * C), *d_w = a.bf(OC * C), *d_pre = a.bf(N * C), *d_dout = a.bf(N * OC), *d_dinp = a.bf(N * C);
    float *d_dw = a.f32(OC * C), *d_db = a.f32(OC);
    put(gpu, d_inp, inp);
    put(gpu, d_w, w);
    put(gpu, d_pre, pre);
    Outputs bk = run_all_orders(tag, [&] {
        put(gpu, d_dout, dout);
        put(gpu, d_dw, dw0);
        put(gpu, d_db, db0);
        gpu.matmul_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC, nullptr, d_pre);
        return Outputs{get(gpu, d_dinp, N * C), get(gpu, d_dw, OC * C), get(gpu, d_db, OC)};
    }, &gpu, path_for(((C % 8 == 0 && !declined("DGELU")) || (N * C) % 8 == 0) &&
                      (declined("BGRADB") ? OC % 8 == 0 : OC % 4 == 0)));
    Bound bdi(N * C), bdw(OC * C), bdb(OC);
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < C; c++) {
            double s = 0, z = 0;
            for (size_t o = 0; o < OC; o++) {
                s += std::fabs(dout[n * OC + o] * w[o * C + c]);
                z += (double)dout[n * OC + o] * w[o * C + c];
            }
            const double p = std::fabs(pre[n * C + c]);
            bdi[n * C + c] = U * std::fabs(dinp_ref[n * C + c]) + kGeluSlope * (G(OC) * s + U * std::fabs(z)) +
                             0x1p-20 * std::fabs(z) * (1 + p * p * p);
        }
    for (size_t o = 0; o < OC; o++) {
        double sb = 0;
        for (size_t n = 0; n < N; n++) sb += std::fabs(dout[n * OC + o]);
        bdb[o] = G(N) * (std::fabs(db0[o]) + sb);
        for (size_t c = 0; c < C; c++) {
            double s = 0;
            for (size_t n = 0; n < N; n++) s += std::fabs(dout[n * OC + o] * inp[n * C + c]);
            bdw[o * C + c] = G(N) * (std::fabs(dw0[o * C + c]) + s);
        }
    }
    check_bound(tag + " dinp", bk[0], dinp_ref, bdi);
    check_bound(tag + " dweight (+=)", bk[1], dw_ref, bdw);
    check_bound(tag + " dbias (+=, BGRADB)", bk[2], db_ref, bdb);
}

// ---- -r 1: gelu(fch) recomputed in backward (llmc/model.h, ModelOptions::recompute_gelu) ---------------------------
// What the model states: the forward's fused GELU_AUX(_BIAS) epilogue rounds g0 = bf16(gelu(z)) from the fp32
// accumulator z and stores fch = bf16(z); -r 1 recomputes g1 = bf16(gelu(fch)) from the stored fch. Per element
// |g1 - g0| <= 1.01 U (|g0| + |g1| + 1.13 |fch|) + 2^-20 (1 + |fch|^3): the two output roundings (U |.| each), z's
// rounding to fch (|z - fch| <= U |fch| (1 + U)) carried by |gelu'| <= 1.13, the fp32 evaluation of the tanh form
// (2^-20 (1 + |x|^3)), and 1.01 for the second-order terms. Where the forward is not fused (OC not a multiple of 8),
// the forward itself applies the same GELU kernel to the stored fch: bit-identical.
void test_recompute_gelu(CudaBackend& gpu, size_t N, size_t C, size_t OC) {
    const bool fused = OC % 8 == 0 && !declined("GELU_AUX_BIAS");
    const std::string tag = "-r 1 recompute N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" +
                            std::to_string(OC) + (fused ? " (fused GELU_AUX_BIAS forward)" : " (unfused forward)");
    Arena a(gpu);
    Vec inp = random_bf16(N * C, -1, 1), w = random_bf16(OC * C, -1, 1), bias = random_bf16(OC, -1, 1);
    bf16 *d_inp = a.bf(N * C), *d_w = a.bf(OC * C), *d_b = a.bf(OC), *d_out = a.bf(N * OC), *d_pre = a.bf(N * OC);
    bf16* d_re = a.bf(N * OC);
    put(gpu, d_inp, inp);
    put(gpu, d_w, w);
    put(gpu, d_b, bias);
    Outputs r = run_all_orders(tag, [&] {
        gpu.matmul_forward(d_out, d_inp, d_w, d_b, N, C, OC, d_pre);
        gpu.gelu_forward(d_re, d_pre, N * OC);
        return Outputs{get(gpu, d_out, N * OC), get(gpu, d_re, N * OC), get(gpu, d_pre, N * OC)};
    });
    const Vec &g0 = r[0], &g1 = r[1], &fch = r[2];
    size_t differ = 0, outside = 0;
    double worst = 0;
    for (size_t i = 0; i < N * OC; i++) {
        const double x = std::fabs(fch[i]), d = std::fabs(g1[i] - g0[i]);
        const double bound = 1.01 * U * (std::fabs(g0[i]) + std::fabs(g1[i]) + kGeluSlope * x) + 0x1p-20 * (1 + x * x * x);
        differ += g1[i] != g0[i];
        outside += d > bound;
        worst = std::max(worst, d / bound);
    }
    std::printf("  %s: %zu of %zu elements differ, largest difference / bound %.3f\n", tag.c_str(), differ, N * OC,
                worst);
    if (fused) {
        testing::check(tag + ": the recomputed gelu(fch) is within the stated bound of the forward's", outside == 0,
              "%zu of %zu outside", outside, N * OC);
        testing::check(tag + ": and not bit-identical (the bound is needed)", differ > 0, "no element differs");
    } else {
        testing::check(tag + ": bit-identical to the forward's", differ == 0, "%zu of %zu differ", differ, N * OC);
    }
}

// ---- GELU -------------------------------------------------------------------------------------------------------
// out = round(gelu(x)) in fp32: U |want| + 2^-20 (1 + |x|^3) (a few ulps of the tanh form's terms).
void test_gelu(CudaBackend& gpu, CpuBackend& cpu, size_t n) {
    const std::string tag = "gelu n=" + std::to_string(n);
    Arena a(gpu);
    Vec x = random_bf16(n, -5, 5), ref(n);
    cpu.gelu_forward(ref.data(), x.data(), n);
    bf16 *d_x = a.bf(n), *d_y = a.bf(n);
    put(gpu, d_x, x);
    Outputs f = run_all_orders(tag + " forward", [&] {
        gpu.gelu_forward(d_y, d_x, n);
        return Outputs{get(gpu, d_y, n)};
    }, &gpu, path_for(n % 8 == 0));
    Bound b(n);
    for (size_t i = 0; i < n; i++) b[i] = U * std::fabs(ref[i]) + 0x1p-20 * (1 + std::pow(std::fabs(x[i]), 3));
    check_bound(tag + " forward", f[0], ref, b);
}

// Attention (flash kernels, tensor cores) has its own program: test/sim/test_attention.cpp.

// ---- fused classifier ----------------------------------------------------------------------------------------
// The kernel (llmc/cuda/classifier.cuh) sums S = sum_j exp(x_j - mx) online: each term exp(x_j - m) is taken with
// the running max m of its thread (x_j - m is exact: a difference of two bf16 values in [-4, 4]), and the running sum
// is multiplied by exp(m_old - m_new) whenever a pack raises the max (at most r = ceil(packs / blockDim) times per
// thread, packs = Vp / W), then by one such factor per level of the 10-level (max, sum) combining tree. Each exp is
// within 2^-22 relative (2 ulp), so every term of S carries at most (r + 11) 2^-22 relative error from the
// exponentials, plus G(V) from the fp32 additions: rel(S) <= G(V) + (r + 11) 2^-22.
// loss = log S + max - x_t in fp32: rel(S) absolute in log S, and the three fp32 operations 2^-23 (|log S| + |max| +
// |x_t|).
// dlogits = round(dloss (p - onehot)) with p = exp(x - mx) / S: U |want| + |dloss| (p (rel(S) + 2^-21) + 2^-24)
// (2^-21: the exp of pass 2 and the division); padded columns exactly 0.
void test_classifier(CudaBackend& gpu, CpuBackend& cpu, size_t N, size_t V, size_t Vp) {
    const std::string tag = "fused_classifier N=" + std::to_string(N) + " V=" + std::to_string(V) + " Vp=" +
                            std::to_string(Vp);
    Arena a(gpu);
    Vec logits = random_bf16(N * Vp, -4, 4);
    for (size_t n = 0; n < N; n++)
        for (size_t j = V; j < Vp; j++) logits[n * Vp + j] = 100.0f;  // padded columns must be ignored
    std::vector<int> tgt(N);
    std::uniform_int_distribution<int> dt(0, (int)V - 1);
    for (auto& t : tgt) t = dt(rng);
    tgt[0] = (int)V - 1;
    const float dloss = 1.0f / (float)(3 * N);
    Vec loss_ref(N), dl_ref = logits, loss_only(N), nochange = logits;
    cpu.fused_classifier(dl_ref.data(), loss_ref.data(), tgt.data(), dloss, N, V, Vp, true);
    bf16* d_logits = a.bf(N * Vp);
    float* d_loss = a.f32(N);
    int* d_tgt = a.i32(tgt);
    const bool vector = Vp % 8 == 0;
    const size_t packs = vector ? Vp / 8 : Vp, block = std::min<size_t>(1024, (packs + 31) / 32 * 32);
    const double rel_s = G(V) + (double)((packs + block - 1) / block + 11) * 0x1p-22;
    Outputs f = run_all_orders(tag, [&] {
        put(gpu, d_logits, logits);
        gpu.fused_classifier(d_logits, d_loss, d_tgt, dloss, N, V, Vp, false);
        Vec l1 = get(gpu, d_loss, N), unchanged = get(gpu, d_logits, N * Vp);
        gpu.fused_classifier(d_logits, d_loss, d_tgt, dloss, N, V, Vp, true);
        return Outputs{get(gpu, d_loss, N), get(gpu, d_logits, N * Vp), l1, unchanged};
    }, &gpu, path_for(vector));
    Bound bl(N), bd(N * Vp, 0.0);
    for (size_t n = 0; n < N; n++) {
        const float* x = logits.data() + n * Vp;
        double mx = *std::max_element(x, x + V), S = 0;
        for (size_t j = 0; j < V; j++) S += std::exp((double)x[j] - mx);
        bl[n] = rel_s + 0x1p-23 * (std::fabs(std::log(S)) + std::fabs(mx) + std::fabs(x[tgt[n]]));
        for (size_t j = 0; j < V; j++) {
            double p = std::exp((double)x[j] - mx) / S;
            bd[n * Vp + j] = U * std::fabs(dl_ref[n * Vp + j]) + dloss * (p * (rel_s + 0x1p-21) + 0x1p-24);
        }
    }
    check_bound(tag + " losses", f[0], loss_ref, bl);
    check_bound(tag + " dlogits in place (padded columns 0)", f[1], dl_ref, bd);
    check_bound(tag + " losses without dlogits", f[2], loss_ref, bl);
    check_bound(tag + " without dlogits the logits are untouched", f[3], nochange, Bound(N * Vp, 0.0));
}

// ---- AdamW ------------------------------------------------------------------------------------------------------
// m, v, master: the same fp32 formula on both sides; the GPU may contract a*b+c into one fma (<= 1 ulp per step), so
// the bound is 4 u32 of the magnitudes involved. params: stochastic rounding gives one of the two bf16 neighbours of
// the (CUDA) master value; its mean is the master value (checked statistically on 4096 equal elements).
void test_adamw(CudaBackend& gpu, CpuBackend& cpu, size_t n) {
    const std::string tag = "adamw n=" + std::to_string(n);
    Arena a(gpu);
    Vec master = random_vec(n, -1, 1), grads = random_vec(n, -0.1f, 0.1f), m = random_vec(n, -0.01f, 0.01f),
        v = random_vec(n, 0.0f, 1e-4f);
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    const int t = 3;
    const uint32_t seed = 12345;
    Vec p_ref = master, ma_ref = master, m_ref = m, v_ref = v;
    cpu.adamw_update(p_ref.data(), ma_ref.data(), grads.data(), m_ref.data(), v_ref.data(), n, lr, b1, b2, eps, wd,
                     gs, t, seed);
    bf16* d_p = a.bf(n);
    float *d_ma = a.f32(n), *d_g = a.f32(n), *d_m = a.f32(n), *d_v = a.f32(n);
    put(gpu, d_g, grads);
    Outputs f = run_all_orders(tag, [&] {
        put(gpu, d_ma, master);
        put(gpu, d_m, m);
        put(gpu, d_v, v);
        gpu.adamw_update(d_p, d_ma, d_g, d_m, d_v, n, lr, b1, b2, eps, wd, gs, t, seed);
        return Outputs{get(gpu, d_p, n), get(gpu, d_ma, n), get(gpu, d_m, n), get(gpu, d_v, n)};
    }, &gpu, path_for(n % 8 == 0));
    Bound bma(n), bm(n), bv(n);
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < n; i++) {
        double g = gs * grads[i];
        bm[i] = 4 * 0x1p-24 * (std::fabs(b1 * m[i]) + std::fabs((1 - b1) * g));
        bv[i] = 4 * 0x1p-24 * (std::fabs(b2 * v[i]) + std::fabs((1 - b2) * g * g));
        double upd = (m_ref[i] / bc1) / (std::sqrt(v_ref[i] / bc2) + eps);
        bma[i] = 4 * 0x1p-24 * (std::fabs(master[i]) + lr * (std::fabs(upd) * 4 + wd * std::fabs(master[i])));
    }
    check_bound(tag + " m", f[2], m_ref, bm);
    check_bound(tag + " v", f[3], v_ref, bv);
    check_bound(tag + " master", f[1], ma_ref, bma);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float x = f[1][i];
        uint32_t u;
        std::memcpy(&u, &x, 4);
        float lo = llmc::bf16_to_float((uint16_t)(u >> 16));                // truncation toward zero
        float hi = llmc::bf16_to_float((uint16_t)((u >> 16) + 1));          // next bf16 away from zero
        float p = f[0][i];
        if (!(p == lo || ((u & 0xffffu) != 0 && p == hi))) bad++;
    }
    testing::check(tag + " params are a bf16 neighbour of master (stochastic rounding)", bad == 0,
                   "%zu of %zu params are not a bf16 neighbour of their master weight", bad, n);

    // Unbiasedness: 4096 elements at x = 1 + 0.3 ulp (ulp = 2^-7 at 1) with lr = 0 (master unchanged) must round up
    // with frequency 0.3; the standard deviation of the fraction is sqrt(0.3 * 0.7 / 4096) = 0.0072, so 4 sigma = 0.029.
    const size_t k = 4096;
    const float x0 = 1.0f + 0.3f * 0x1p-7f;
    Vec mk(k, x0), zero(k, 0.0f);
    bf16* d_pk = a.bf(k);
    float *d_mk = a.f32(k), *d_zk = a.f32(k), *d_m2 = a.f32(k), *d_v2 = a.f32(k);
    put(gpu, d_mk, mk);
    put(gpu, d_zk, zero);
    gpu.adamw_update(d_pk, d_mk, d_zk, d_m2, d_v2, k, 0.0f, b1, b2, eps, 0.0f, 1.0f, 1, 777);
    Vec pk = get(gpu, d_pk, k);
    gpu.adamw_update(d_pk, d_mk, d_zk, d_m2, d_v2, k, 0.0f, b1, b2, eps, 0.0f, 1.0f, 1, 777);
    Vec pk_again = get(gpu, d_pk, k);
    gpu.adamw_update(d_pk, d_mk, d_zk, d_m2, d_v2, k, 0.0f, b1, b2, eps, 0.0f, 1.0f, 1, 778);
    Vec pk_other = get(gpu, d_pk, k);
    size_t up = 0, neighbours = 0;
    for (float p : pk) {
        up += p == 1.0f + 0x1p-7f;
        neighbours += p == 1.0f || p == 1.0f + 0x1p-7f;
    }
    double frac = (double)up / k;
    testing::check(tag + " stochastic rounding is unbiased (round-up frequency 0.3 +- 4 sigma)",
                   neighbours == k && std::fabs(frac - 0.3) <= 0.029, "round-up fraction %.4f, %zu of %zu neighbours",
                   frac, neighbours, k);
    testing::check(tag + " stochastic rounding: same seed, same bits; another seed, other bits",
                   pk == pk_again && pk != pk_other, "seed dependence wrong");
}

// ---- reductions, casts, memory ----------------------------------------------------------------------------------
// sum_into / norm_squared_into: the CPU sums in double (its error is negligible); the CUDA side is a fixed fp32 tree:
// each thread adds k = W ceil(p / (G * 512)) elements in sequence (packs of W = 4 on the vector path, 1 on the scalar
// path; p = n / W packs, G = min(ceil(p / 512), 1024) blocks of 512), 5 + 5 levels of warp and block tree, then one block adds ceil(G / 512) partials per thread and 10 more levels, then the scale and
// the += (2 more): depth d = k + ceil(G / 512) + 22 roundings of at most u32 = 2^-24 relative to the magnitudes:
// |err| <= d 2^-24 (|acc0| + |scale| sum |x|) (sum of x^2 for the norm). add_into: one fp32 addition per element
// on both sides: exact equality.
void test_reductions(CudaBackend& gpu, CpuBackend& cpu, size_t n) {
    const std::string tag = "reductions n=" + std::to_string(n);
    Arena a(gpu);
    Vec x = random_vec(n, -1, 1), y = random_vec(n, -1, 1);
    const float acc0 = 0.5f, scale = 0.25f;
    float s_ref = acc0, q_ref = acc0;
    cpu.sum_into(&s_ref, x.data(), n, scale);
    cpu.norm_squared_into(&q_ref, x.data(), n);
    Vec add_ref = y;
    cpu.add_into(add_ref.data(), x.data(), n);
    double sa = 0, sq = 0;
    for (float v : x) {
        sa += std::fabs(v);
        sq += (double)v * v;
    }
    float *d_x = a.f32(n), *d_y = a.f32(n), *d_acc = a.f32(2);
    put(gpu, d_x, x);
    Outputs f = run_all_orders(tag, [&] {
        put(gpu, d_acc, Vec{acc0, acc0});
        put(gpu, d_y, y);
        gpu.sum_into(d_acc, d_x, n, scale);
        gpu.norm_squared_into(d_acc + 1, d_x, n);
        gpu.add_into(d_y, d_x, n);
        return Outputs{get(gpu, d_acc, 2), get(gpu, d_y, n)};
    }, &gpu, path_for(n % 4 == 0));
    const size_t W = n % 4 == 0 ? 4 : 1, packs = n / W, blocks = std::min<size_t>((packs + 511) / 512, 1024);
    const double depth = (double)(W * ((packs + blocks * 512 - 1) / (blocks * 512)) + (blocks + 511) / 512 + 22);
    check_bound(tag + " sum_into", Vec{f[0][0]}, Vec{s_ref}, Bound{depth * 0x1p-24 * (acc0 + scale * sa)});
    check_bound(tag + " norm_squared_into", Vec{f[0][1]}, Vec{q_ref}, Bound{depth * 0x1p-24 * (acc0 + sq)});
    check_bound(tag + " add_into", f[1], add_ref, Bound(n, 0.0));
}

// floats_to_act rounds to nearest even (must equal llmc::float_to_bf16 bit for bit); act_to_floats is exact;
// alloc returns zeroed memory (the simulator fills fresh memory with 0xFF, so this is a real check); copies round-trip.
void test_casts_memory(CudaBackend& gpu, size_t n) {
    const std::string tag = "n=" + std::to_string(n) + " ";
    Arena a(gpu);
    Vec x = random_vec(n, -3, 3);
    x[0] = 1.0f + 0x1p-8f;  // a tie: rounds to even (1.0)
    x[1] = 1.0f + 3 * 0x1p-8f;  // a tie: rounds to even (1 + 2^-6)
    float *d_x = a.f32(n), *d_back = a.f32(n), *d_copy = a.f32(n);
    bf16* d_b = a.bf(n);
    Vec zeros = get(gpu, d_back, n);
    testing::check(tag + "alloc returns zeroed memory", std::all_of(zeros.begin(), zeros.end(), [](float v) { return v == 0; }),
                   "fresh allocation not zero");
    put(gpu, d_x, x);
    Outputs f = run_all_orders(tag + "casts", [&] {
        gpu.floats_to_act(d_b, d_x, n);
        gpu.act_to_floats(d_back, d_b, n);
        return Outputs{get(gpu, d_back, n)};
    }, &gpu, path_for(n % 8 == 0));
    check_bound(tag + "floats_to_act / act_to_floats round to nearest even", f[0], round_bf16(x), Bound(n, 0.0));
    gpu.copy_on_device(d_copy, d_x, n * sizeof(float));
    check_bound(tag + "copy_on_device", get(gpu, d_copy, n), x, Bound(n, 0.0));
    gpu.memset_zero(d_copy, n * sizeof(float));
    check_bound(tag + "memset_zero", get(gpu, d_copy, n), Vec(n, 0.0f), Bound(n, 0.0));
    put(gpu, d_b, x);  // upload_floats rounds to nearest even on the host
    check_bound(tag + "upload_floats / download_floats", get(gpu, d_b, n), round_bf16(x), Bound(n, 0.0));
}

}  // namespace

int main() {
    try {
        CudaBackend gpu;
        CpuBackend cpu;
        std::printf("# CudaBackend under cudasim: %d SMs, sm_%d, peak %.1f TFLOP/s (formula)\n", gpu.sm_count(),
                    gpu.compute_capability(), gpu.peak_flops() * 1e-12);
        // Scalar path: sizes not a multiple of the pack width (8 bf16 / 4 fp32); vector path: multiples.
        test_casts_memory(gpu, 1001);
        test_casts_memory(gpu, 1000);
        test_encoder(gpu, cpu, 2, 7, 300, 5);   // scalar; C > 256: two channel chunks; repeated tokens
        test_encoder(gpu, cpu, 3, 37, 20, 50);  // scalar
        test_encoder(gpu, cpu, 2, 5, 2056, 7);  // vector; 257 packs: two channel chunks
        test_encoder(gpu, cpu, 4, 80, 24, 64, true);  // vector; Zipf batch, token 0 = 30%: 3 chunks of <= 32
        test_encoder(gpu, cpu, 4, 80, 20, 64, true);  // scalar; the same skew
        test_gelu(gpu, cpu, 1003);
        test_gelu(gpu, cpu, 1008);
        test_layernorm(gpu, cpu, 13, 300);      // scalar; row beyond the 4 x 32 elements kept in registers
        test_layernorm(gpu, cpu, 1100, 40);     // vector; several rows per backward block and warp
        test_layernorm(gpu, cpu, 1000, 33);     // scalar
        test_layernorm(gpu, cpu, 257, 64);      // vector; one row more than 32 backward blocks of 8
        test_layernorm(gpu, cpu, 5, 1032);      // vector; 129 packs: beyond the 128 kept in registers
        test_layernorm(gpu, cpu, 8200, 16);     // vector; 9 rows per backward block: a warp does two rows
        test_matmul(gpu, cpu, 13, 33, 40, true, false);
        test_matmul(gpu, cpu, 13, 33, 40, true, true);    // OC % 8 == 0: the fused GELU_AUX_BIAS epilogue
        test_matmul(gpu, cpu, 13, 33, 36, true, true);    // OC % 8 != 0: the fallback bias + GELU kernel
        test_matmul(gpu, cpu, 7, 20, 24, false, false);   // no bias
        test_matmul(gpu, cpu, 7, 20, 24, false, true);    // GELU_AUX without bias
        test_matmul(gpu, cpu, 1000, 8, 16, true, true);   // N = 1000: 63 row blocks of 16 for the bias gradient
        test_matmul_dgelu(gpu, cpu, 13, 40, 24);          // C % 8 == 0: the DGELU epilogue; odd N
        test_matmul_dgelu(gpu, cpu, 9, 33, 20);           // C = 33: the GEMM + GELU backward fallback (scalar)
        test_matmul_dgelu(gpu, cpu, 7, 16, 36);           // odd N, OC not a multiple of 8
        test_recompute_gelu(gpu, 13, 33, 40);             // fused forward: within the stated bound
        test_recompute_gelu(gpu, 13, 33, 36);             // unfused forward: bit-identical
        test_classifier(gpu, cpu, 5, 77, 80);      // vector; V not a multiple of 8: the last pack is masked
        test_classifier(gpu, cpu, 5, 77, 77);      // scalar
        test_classifier(gpu, cpu, 3, 1500, 1536);  // vector
        test_classifier(gpu, cpu, 2, 7450, 7450);  // scalar; beyond the 7 x 1024 elements kept in registers
        test_classifier(gpu, cpu, 2, 60000, 60008);  // vector; beyond the 7 x 8 x 1024 kept in registers
        test_adamw(gpu, cpu, 1000);
        test_adamw(gpu, cpu, 1001);
        test_reductions(gpu, cpu, 37);
        test_reductions(gpu, cpu, 1000);
        test_reductions(gpu, cpu, 530000);  // more than 1024 blocks x 512 threads: the grid-stride loop
        test_encoder_no_wpe(gpu, cpu, 2, 5, 64, 11);  // vector
        test_encoder_no_wpe(gpu, cpu, 3, 7, 20, 9);   // scalar
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        testing::fail("sim_kernels", "%s", e.what());
    }
    return testing::finish();
}
