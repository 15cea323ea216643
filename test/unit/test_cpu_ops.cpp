// Every CPU backend op against a straightforward double-precision re-implementation written here.
//
// Forward ops: the op's float output is compared with the double reference evaluated on the same float inputs.
// Backward ops: for a scalar loss L = sum(out * W) with random W, the op's backward is called with dout = W and its
// gradients are compared with central finite differences of the DOUBLE reference, dL/dx ~ (L(x+h) - L(x-h)) / 2h.
//
// Tolerances (why they are what they are):
//   - finite differences in double with h = 1e-5 on O(1) inputs: truncation error h^2/6 |L'''| ~ 1e-10 and rounding
//     error ~ 1e-16 |L| / h ~ 1e-10, so the reference gradient is good to ~1e-9 and the error we see is the op's
//     float rounding.
//   - a float op on these shapes sums at most a few dozen terms per output; each rounding is <= 2^-24 ~ 6e-8 relative
//     to the running sum, so its error is below ~40 * 6e-8 ~ 2.4e-6 of the magnitude of the terms, which are bounded by
//     the largest value of the output (or gradient) being compared. Hence forward checks use rtol 1e-5 with an
//     absolute floor of 1e-6 x (largest reference value), and gradient checks rtol 1e-4 with a floor of 1e-5 x
//     (largest reference gradient): a margin of about 4x over that bound, while any wrong term in a formula gives an
//     error of order 1 x the largest value and fails.
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/error.h"
#include "test/fixtures/testing.h"

using llmc::CpuBackend;
using Vec = std::vector<float>;
using DVec = std::vector<double>;

namespace {

std::mt19937 rng(12345);

Vec randn(size_t n, float scale = 1.0f, float offset = 0.0f) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    Vec v(n);
    for (auto& x : v) x = offset + scale * d(rng);
    return v;
}
DVec to_d(const Vec& v) { return DVec(v.begin(), v.end()); }
double max_abs(const DVec& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::fabs(x));
    return m;
}
double dot(const DVec& a, const Vec& w) {
    double s = 0;
    for (size_t i = 0; i < a.size(); i++) s += a[i] * (double)w[i];
    return s;
}

// Central finite differences of f at x, in double.
DVec fd_grad(DVec x, const std::function<double(const DVec&)>& f) {
    const double h = 1e-5;
    DVec g(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        double x0 = x[i];
        x[i] = x0 + h;
        double lp = f(x);
        x[i] = x0 - h;
        double lm = f(x);
        x[i] = x0;
        g[i] = (lp - lm) / (2 * h);
    }
    return g;
}

// Tolerances: see the header comment. A comment line gives the observed error relative to the largest value.
bool check_scaled(const std::string& name, const float* got, const DVec& want, double rtol, double floor) {
    double scale = max_abs(want);
    testing::ErrorStats e = testing::compare(got, want.data(), want.size(), 0.0);
    std::printf("# %s: max abs err / max |ref| = %.2e\n", name.c_str(), scale > 0 ? e.max_abs / scale : e.max_abs);
    return testing::check_close(name, got, want.data(), want.size(), rtol, floor * scale);
}
bool check_fwd(const std::string& name, const float* got, const DVec& want) {
    return check_scaled(name, got, want, 1e-5, 1e-6);
}
bool check_grad(const std::string& name, const float* got, const DVec& want) {
    return check_scaled(name, got, want, 1e-4, 1e-5);
}
// want = prefill + grad (for gradients the op must accumulate into).
DVec plus(const Vec& prefill, const DVec& g) {
    DVec r(g.size());
    for (size_t i = 0; i < g.size(); i++) r[i] = (double)prefill[i] + g[i];
    return r;
}

// ---- double-precision references --------------------------------------------------------------------------------

DVec ref_encoder(const std::vector<int>& tok, const DVec& wte, const DVec& wpe, size_t B, size_t T, size_t C) {
    DVec out(B * T * C);
    for (size_t bt = 0; bt < B * T; bt++)
        for (size_t c = 0; c < C; c++) out[bt * C + c] = wte[tok[bt] * C + c] + wpe[(bt % T) * C + c];
    return out;
}

DVec ref_layernorm(const DVec& x, const DVec& w, const DVec& b, size_t N, size_t C, DVec* mean = nullptr,
                   DVec* rstd = nullptr) {
    DVec out(N * C);
    for (size_t i = 0; i < N; i++) {
        double m = 0, v = 0;
        for (size_t c = 0; c < C; c++) m += x[i * C + c];
        m /= C;
        for (size_t c = 0; c < C; c++) v += (x[i * C + c] - m) * (x[i * C + c] - m);
        v /= C;
        double r = 1.0 / std::sqrt(v + 1e-5);
        for (size_t c = 0; c < C; c++) out[i * C + c] = (x[i * C + c] - m) * r * w[c] + b[c];
        if (mean) (*mean)[i] = m;
        if (rstd) (*rstd)[i] = r;
    }
    return out;
}

double ref_gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double ref_gelu_grad(double x) {  // by finite differences of ref_gelu: independent of the op's closed form
    const double h = 1e-6;
    return (ref_gelu(x + h) - ref_gelu(x - h)) / (2 * h);
}

// out = x @ w^T + b (b may be empty), optionally gelu.
DVec ref_matmul(const DVec& x, const DVec& w, const DVec& b, size_t N, size_t C, size_t OC, bool gelu) {
    DVec out(N * OC);
    for (size_t i = 0; i < N; i++)
        for (size_t o = 0; o < OC; o++) {
            double s = b.empty() ? 0.0 : b[o];
            for (size_t c = 0; c < C; c++) s += x[i * C + c] * w[o * C + c];
            out[i * OC + o] = gelu ? ref_gelu(s) : s;
        }
    return out;
}

DVec ref_attention(const DVec& qkv, size_t B, size_t T, size_t C, size_t NH, DVec* att = nullptr) {
    size_t hs = C / NH;
    DVec out(B * T * C, 0.0);
    if (att) att->assign(B * NH * T * T, 0.0);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++)
            for (size_t t = 0; t < T; t++) {
                DVec p(t + 1);
                double mx = -1e300;
                for (size_t t2 = 0; t2 <= t; t2++) {
                    double s = 0;
                    for (size_t i = 0; i < hs; i++)
                        s += qkv[(b * T + t) * 3 * C + h * hs + i] * qkv[(b * T + t2) * 3 * C + C + h * hs + i];
                    p[t2] = s / std::sqrt((double)hs);
                    mx = std::max(mx, p[t2]);
                }
                double sum = 0;
                for (auto& e : p) sum += (e = std::exp(e - mx));
                for (size_t t2 = 0; t2 <= t; t2++) {
                    p[t2] /= sum;
                    if (att) (*att)[((b * NH + h) * T + t) * T + t2] = p[t2];
                    for (size_t i = 0; i < hs; i++)
                        out[(b * T + t) * C + h * hs + i] += p[t2] * qkv[(b * T + t2) * 3 * C + 2 * C + h * hs + i];
                }
            }
    return out;
}

DVec ref_losses(const DVec& logits, const std::vector<int>& tgt, size_t N, size_t V, size_t Vp) {
    DVec loss(N);
    for (size_t i = 0; i < N; i++) {
        double mx = -1e300, s = 0;
        for (size_t c = 0; c < V; c++) mx = std::max(mx, logits[i * Vp + c]);
        for (size_t c = 0; c < V; c++) s += std::exp(logits[i * Vp + c] - mx);
        loss[i] = std::log(s) + mx - logits[i * Vp + tgt[i]];
    }
    return loss;
}

// ---- tests --------------------------------------------------------------------------------------------------------

constexpr size_t B = 2, T = 5, C = 12, NH = 3, OC = 7, V = 11, Vp = 16, N = B * T;

void test_memory(CpuBackend& be) {
    const size_t bytes = 1000;
    auto* p = static_cast<unsigned char*>(be.alloc(bytes));
    bool zero = true;
    for (size_t i = 0; i < bytes; i++) zero = zero && p[i] == 0;
    testing::check("alloc zero-initialised", zero);
    testing::check("alloc 64-byte aligned", reinterpret_cast<uintptr_t>(p) % 64 == 0, "address %p", (void*)p);
    Vec src = randn(bytes / 4), back(bytes / 4);
    be.copy_to_device(p, src.data(), bytes);
    be.copy_to_host(back.data(), p, bytes);
    testing::check("copy round trip", back == src);
    be.memset_zero(p, bytes);
    zero = true;
    for (size_t i = 0; i < bytes; i++) zero = zero && p[i] == 0;
    testing::check("memset_zero", zero);
    be.free(p);
    // 3 MiB: the parallel path of memset_zero
    const size_t big = (size_t(3) << 20) + 12;
    auto* q = static_cast<unsigned char*>(be.alloc(big));
    std::memset(q, 0xab, big);
    be.memset_zero(q, big);
    size_t nonzero = 0;
    for (size_t i = 0; i < big; i++) nonzero += q[i] != 0;
    testing::check("memset_zero large", nonzero == 0, "%zu nonzero bytes", nonzero);
    be.free(q);
    bool threw = false;
    try {
        be.alloc(SIZE_MAX / 2);
    } catch (const llmc::Error&) {
        threw = true;
    }
    testing::check("alloc failure throws llmc::Error", threw);
}

void test_encoder() {
    CpuBackend be;
    std::vector<int> tok = {3, 0, 10, 3, 7, 7, 1, 3, 10, 0};  // duplicates: the scatter must add them all
    Vec wte = randn(Vp * C), wpe = randn(T * C), out(N * C);
    be.encoder_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
    // one float add per element: correctly rounded, |err| <= 6e-8 relative
    DVec want = ref_encoder(tok, to_d(wte), to_d(wpe), B, T, C);
    testing::check_close("encoder_forward", out.data(), want.data(), want.size(), 1e-7, 0.0);

    Vec W = randn(N * C);
    Vec dwte0 = randn(Vp * C), dwpe0 = randn(T * C);
    Vec dwte = dwte0, dwpe = dwpe0;
    be.encoder_backward(dwte.data(), dwpe.data(), W.data(), tok.data(), B, T, C);
    DVec wpe_d = to_d(wpe), wte_d = to_d(wte);
    DVec g_wte = fd_grad(wte_d, [&](const DVec& x) { return dot(ref_encoder(tok, x, wpe_d, B, T, C), W); });
    DVec g_wpe = fd_grad(wpe_d, [&](const DVec& x) { return dot(ref_encoder(tok, wte_d, x, B, T, C), W); });
    check_grad("encoder_backward dwte (+=)", dwte.data(), plus(dwte0, g_wte));
    check_grad("encoder_backward dwpe (+=)", dwpe.data(), plus(dwpe0, g_wpe));

    // Determinism: many repeated tokens, 1, 2, 3 and 7 threads give bit-identical gradients.
    const size_t B2 = 4, T2 = 64, C2 = 72, V2 = 5;
    std::vector<int> tok2(B2 * T2);
    for (auto& t : tok2) t = (int)(rng() % V2);
    Vec dout2 = randn(B2 * T2 * C2);
    std::vector<Vec> results;
    for (int threads : {1, 2, 3, 7}) {
        llmc::BackendOptions opt;
        opt.num_threads = threads;
        CpuBackend b2(opt);
        Vec d_wte(V2 * C2, 0.25f), d_wpe(T2 * C2, 0.5f);
        b2.encoder_backward(d_wte.data(), d_wpe.data(), dout2.data(), tok2.data(), B2, T2, C2);
        d_wte.insert(d_wte.end(), d_wpe.begin(), d_wpe.end());
        results.push_back(d_wte);
    }
    bool same = true;
    for (auto& r : results) same = same && std::memcmp(r.data(), results[0].data(), r.size() * 4) == 0;
    testing::check("encoder_backward deterministic across thread counts", same);
}

void test_layernorm() {
    CpuBackend be;
    Vec x = randn(N * C, 1.5f, 2.0f), w = randn(C, 0.5f, 1.0f), b = randn(C, 0.3f), out(N * C), mean(N), rstd(N);
    be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    DVec m_ref(N), r_ref(N);
    DVec want = ref_layernorm(to_d(x), to_d(w), to_d(b), N, C, &m_ref, &r_ref);
    check_fwd("layernorm_forward out", out.data(), want);
    check_fwd("layernorm_forward mean", mean.data(), m_ref);
    check_fwd("layernorm_forward rstd", rstd.data(), r_ref);

    Vec W = randn(N * C);
    Vec dx0 = randn(N * C), dw0 = randn(C), db0 = randn(C);
    Vec dx = dx0, dw = dw0, db = db0;
    be.layernorm_backward(dx.data(), dw.data(), db.data(), W.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
    DVec xd = to_d(x), wd = to_d(w), bd = to_d(b);
    DVec gx = fd_grad(xd, [&](const DVec& v) { return dot(ref_layernorm(v, wd, bd, N, C), W); });
    DVec gw = fd_grad(wd, [&](const DVec& v) { return dot(ref_layernorm(xd, v, bd, N, C), W); });
    DVec gb = fd_grad(bd, [&](const DVec& v) { return dot(ref_layernorm(xd, wd, v, N, C), W); });
    check_grad("layernorm_backward dinp (+= residual)", dx.data(), plus(dx0, gx));
    check_grad("layernorm_backward dweight (+=)", dw.data(), plus(dw0, gw));
    check_grad("layernorm_backward dbias (+=)", db.data(), plus(db0, gb));
    // The prefills above are O(1); check the gradient alone too, so a small error in it is not hidden by them.
    Vec dx_only(N * C, 0.0f), dw_only(C, 0.0f), db_only(C, 0.0f);
    be.layernorm_backward(dx_only.data(), dw_only.data(), db_only.data(), W.data(), x.data(), w.data(), mean.data(),
                          rstd.data(), N, C);
    check_grad("layernorm_backward dinp alone", dx_only.data(), gx);
    check_grad("layernorm_backward dweight alone", dw_only.data(), gw);

    // fused residual + layernorm
    Vec x1 = randn(N * C, 1.0f, 1.0f), x2 = randn(N * C), res(N * C), out2(N * C), mean2(N), rstd2(N);
    be.fused_residual_layernorm_forward(res.data(), out2.data(), mean2.data(), rstd2.data(), x1.data(), x2.data(),
                                        w.data(), b.data(), N, C);
    DVec res_ref(N * C);
    for (size_t i = 0; i < N * C; i++) res_ref[i] = (double)x1[i] + (double)x2[i];
    testing::check_close("fused_residual_layernorm residual", res.data(), res_ref.data(), N * C, 1e-7, 0.0);
    DVec m2(N), r2(N);
    check_fwd("fused_residual_layernorm out", out2.data(), ref_layernorm(res_ref, to_d(w), to_d(b), N, C, &m2, &r2));
    check_fwd("fused_residual_layernorm mean", mean2.data(), m2);
    check_fwd("fused_residual_layernorm rstd", rstd2.data(), r2);
}

void test_matmul_case(const std::string& name, bool with_bias, bool with_gelu, size_t N_, size_t C_, size_t OC_,
                      bool grads) {
    CpuBackend be;
    Vec x = randn(N_ * C_), w = randn(OC_ * C_, 0.3f), b = with_bias ? randn(OC_) : Vec(), out(N_ * OC_),
        pre(with_gelu ? N_ * OC_ : 0);
    be.matmul_forward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N_, C_, OC_,
                      with_gelu ? pre.data() : nullptr);
    DVec xd = to_d(x), wd = to_d(w), bd = to_d(b);
    check_fwd(name + " forward", out.data(), ref_matmul(xd, wd, bd, N_, C_, OC_, with_gelu));
    if (with_gelu) check_fwd(name + " forward pre_gelu", pre.data(), ref_matmul(xd, wd, bd, N_, C_, OC_, false));
    if (!grads) return;

    Vec W = randn(N_ * OC_);
    Vec dout = W;
    Vec dx(N_ * C_, 1e3f);  // garbage: dinp must be overwritten
    Vec dw0 = randn(OC_ * C_), db0 = randn(OC_);
    Vec dw = dw0, db = db0;
    be.matmul_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), x.data(), w.data(), N_, C_,
                       OC_, with_gelu ? pre.data() : nullptr);
    auto L = [&](const DVec& xv, const DVec& wv, const DVec& bv) {
        return dot(ref_matmul(xv, wv, bv, N_, C_, OC_, with_gelu), W);
    };
    DVec gx = fd_grad(xd, [&](const DVec& v) { return L(v, wd, bd); });
    DVec gw = fd_grad(wd, [&](const DVec& v) { return L(xd, v, bd); });
    check_grad(name + " backward dinp (=)", dx.data(), gx);
    check_grad(name + " backward dweight (+=)", dw.data(), plus(dw0, gw));
    if (with_bias) {
        DVec gb = fd_grad(bd, [&](const DVec& v) { return L(xd, wd, v); });
        check_grad(name + " backward dbias (+=)", db.data(), plus(db0, gb));
    }
    if (with_gelu) {
        DVec want(N_ * OC_);
        for (size_t i = 0; i < want.size(); i++) want[i] = (double)W[i] * ref_gelu_grad(pre[i]);
        check_grad(name + " backward dout *= gelu'(pre_gelu) in place", dout.data(), want);
    }
}

void test_gelu() {
    CpuBackend be;
    const size_t n = 1001;
    Vec x(n), out(n);
    for (size_t i = 0; i < n; i++) x[i] = -6.0f + 12.0f * (float)i / (float)(n - 1);
    be.gelu_forward(out.data(), x.data(), n);
    DVec want(n);
    for (size_t i = 0; i < n; i++) want[i] = ref_gelu(x[i]);
    check_fwd("gelu_forward", out.data(), want);
}

void test_attention_case(const std::string& name, size_t B_, size_t T_, size_t C_, size_t NH_, CpuBackend& be) {
    Vec qkv = randn(B_ * T_ * 3 * C_), out(B_ * T_ * C_), att(B_ * NH_ * T_ * T_, 7.0f);
    be.attention_forward(out.data(), att.data(), qkv.data(), B_, T_, C_, NH_);
    DVec att_ref;
    DVec qd = to_d(qkv);
    check_fwd(name + " forward out", out.data(), ref_attention(qd, B_, T_, C_, NH_, &att_ref));
    check_fwd(name + " forward att", att.data(), att_ref);
    size_t above = 0;
    for (size_t bh = 0; bh < B_ * NH_; bh++)
        for (size_t t = 0; t < T_; t++)
            for (size_t t2 = t + 1; t2 < T_; t2++) above += att[(bh * T_ + t) * T_ + t2] != 0.0f;
    testing::check(name + " att zero above the diagonal", above == 0, "%zu nonzero entries", above);

    // Causality: change every q, k, v at positions >= t0; outputs and probabilities before t0 stay bit-identical.
    const size_t t0 = T_ / 2;
    Vec qkv2 = qkv, out2(out.size()), att2(att.size());
    for (size_t b = 0; b < B_; b++)
        for (size_t t = t0; t < T_; t++)
            for (size_t i = 0; i < 3 * C_; i++) qkv2[(b * T_ + t) * 3 * C_ + i] += 1.0f;
    be.attention_forward(out2.data(), att2.data(), qkv2.data(), B_, T_, C_, NH_);
    bool past_same = true, future_changed = false;
    for (size_t b = 0; b < B_; b++)
        for (size_t t = 0; t < T_; t++)
            for (size_t i = 0; i < C_; i++) {
                size_t k = (b * T_ + t) * C_ + i;
                if (t < t0) past_same = past_same && out2[k] == out[k];
                else future_changed = future_changed || out2[k] != out[k];
            }
    testing::check(name + " causal: future tokens do not change the past", past_same && future_changed,
                   "past unchanged %d, future changed %d", (int)past_same, (int)future_changed);

    Vec W = randn(B_ * T_ * C_);
    Vec dqkv(qkv.size(), 1e3f);  // garbage: dqkv must be written
    be.attention_backward(dqkv.data(), W.data(), qkv.data(), out.data(), att.data(), B_, T_, C_, NH_);
    DVec g = fd_grad(qd, [&](const DVec& v) { return dot(ref_attention(v, B_, T_, C_, NH_), W); });
    check_grad(name + " backward dqkv (=)", dqkv.data(), g);
}

void test_classifier() {
    CpuBackend be;
    Vec logits = randn(N * Vp, 3.0f);
    for (size_t i = 0; i < N; i++)
        for (size_t c = V; c < Vp; c++) logits[i * Vp + c] = 30.0f;  // padded columns: must be ignored
    for (size_t c = 0; c < V; c++) logits[3 * Vp + c] += 1000.0f;   // a row that overflows a naive exp
    std::vector<int> tgt = {0, 10, 5, 3, 3, 9, 1, 10, 2, 7};
    DVec ld = to_d(logits);
    DVec want = ref_losses(ld, tgt, N, V, Vp);

    Vec lg = logits, losses(N, -1.0f);
    be.fused_classifier(lg.data(), losses.data(), tgt.data(), 0.5f, N, V, Vp, false);
    check_fwd("fused_classifier losses", losses.data(), want);
    testing::check("fused_classifier without dlogits leaves logits", lg == logits);

    const float dloss = 1.0f / (float)N;
    losses.assign(N, -1.0f);
    lg = logits;
    be.fused_classifier(lg.data(), losses.data(), tgt.data(), dloss, N, V, Vp, true);
    check_fwd("fused_classifier losses (with dlogits)", losses.data(), want);
    // dL/dlogits for L = dloss * sum_i losses_i, by finite differences (the row shifted by 1000 is fine: the
    // reference subtracts the row maximum too).
    DVec g = fd_grad(ld, [&](const DVec& v) {
        DVec l = ref_losses(v, tgt, N, V, Vp);
        double s = 0;
        for (double x : l) s += x;
        return (double)dloss * s;
    });
    check_grad("fused_classifier dlogits", lg.data(), g);  // padded columns: FD gradient is exactly 0
    size_t pad_nonzero = 0;
    for (size_t i = 0; i < N; i++)
        for (size_t c = V; c < Vp; c++) pad_nonzero += lg[i * Vp + c] != 0.0f;
    testing::check("fused_classifier padded dlogits are 0", pad_nonzero == 0, "%zu nonzero", pad_nonzero);

    for (int bad : {-1, (int)V, (int)Vp - 1}) {
        std::vector<int> t2 = tgt;
        t2[4] = bad;
        lg = logits;
        std::string msg;
        try {
            be.fused_classifier(lg.data(), losses.data(), t2.data(), dloss, N, V, Vp, true);
        } catch (const llmc::Error& e) {
            msg = e.what();
        }
        testing::check("fused_classifier rejects target " + std::to_string(bad),
                       msg.find("target") != std::string::npos && msg.find(std::to_string(bad)) != std::string::npos,
                       "message: '%s'", msg.c_str());
    }
}

void test_reductions() {
    CpuBackend be;
    const size_t n = (size_t(1) << 20) + 7;
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    Vec x(n);
    for (auto& v : x) v = u(rng);
    double s = 0, s2 = 0;
    for (float v : x) {
        s += v;
        s2 += (double)v * v;
    }
    // The op sums in double and rounds once when adding into the float: within 2 roundings (2^-23 relative) of the
    // exact value. Plain float accumulation of 1M terms is off by ~1e-4 relative and fails here.
    float acc = 1.5f;
    be.sum_into(&acc, x.data(), n, 0.25f);
    double want = 1.5 + 0.25 * s;
    testing::check("sum_into", std::fabs(acc - want) <= 1.2e-7 * want, "got %.9g want %.9g", acc, want);
    float acc2 = 2.0f;
    be.norm_squared_into(&acc2, x.data(), n);
    double want2 = 2.0 + s2;
    testing::check("norm_squared_into", std::fabs(acc2 - want2) <= 1.2e-7 * want2, "got %.9g want %.9g", acc2, want2);
    float acc3 = 3.0f;
    be.sum_into(&acc3, x.data(), 0, 1.0f);
    testing::check("sum_into n=0 leaves acc", acc3 == 3.0f);

    Vec a = randn(1003), b = randn(1003), c = a;
    be.add_into(c.data(), b.data(), c.size());
    bool exact = true;
    for (size_t i = 0; i < c.size(); i++) exact = exact && c[i] == a[i] + b[i];
    testing::check("add_into", exact);
}

}  // namespace

int main() {
    try {
        CpuBackend be;
        test_memory(be);
        test_encoder();
        test_layernorm();
        test_matmul_case("matmul bias", true, false, N, C, OC, true);
        test_matmul_case("matmul no bias", false, false, N, C, OC, true);
        test_matmul_case("matmul bias+gelu", true, true, N, C, OC, true);
        test_matmul_case("matmul no bias+gelu", false, true, N, C, OC, true);
        test_matmul_case("matmul larger", true, false, 67, 96, 80, false);  // OpenBLAS's blocked/threaded paths
        test_gelu();
        // The second shape has a longer T: the backend's scratch must grow.
        test_attention_case("attention B2 T5 C12 NH3", B, T, C, NH, be);
        test_attention_case("attention B1 T9 C8 NH2", 1, 9, 8, 2, be);
        // T=70 > 64: the sgemm path works in 64-row causal blocks; this crosses a block boundary.
        test_attention_case("attention B1 T70 C4 NH2", 1, 70, 4, 2, be);
        test_classifier();
        test_reductions();
    } catch (const std::exception& e) {
        testing::fail("unexpected exception", "%s", e.what());
    }
    return testing::finish();
}
