// The speedrun recipe's CPU ops (RMSNorm, QK-norm + rotary, ReLU^2, the soft-capped classifier, the rotary table)
// against double-precision re-implementations written here from the published formulas, and their backward passes
// against central finite differences of those double references.
//
// Tolerances:
//   - forward: each output is a float computation over at most hs or C (<= 40) terms plus a sqrt, a tanh or an exp;
//     every float operation rounds by at most 2^-24 relative, so the error stays below ~50 x 6e-8 = 3e-6 of the
//     largest magnitude involved. Checked with rtol 1e-5 and an absolute floor of 1e-6 x the largest reference value.
//   - backward: finite differences of the double reference with h = 1e-5 on O(1) inputs are good to ~1e-9 (truncation
//     h^2 |f'''| / 6 ~ 1e-10, cancellation 1e-16 |L| / h ~ 1e-10), so the error seen is the op's float rounding, a
//     few dozen roundings of terms bounded by the largest gradient: rtol 1e-4 with a floor of 1e-5 x the largest
//     gradient. A wrong term in a formula moves an element by the order of the largest value and fails.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_classifier.h"
#include "llmc/cpu/cpu_qk_rotary.h"
#include "llmc/cpu/cpu_relu2.h"
#include "llmc/cpu/cpu_rmsnorm.h"
#include "llmc/error.h"
#include "llmc/rotary_table.h"
#include "test/fixtures/finite_diff.h"
#include "test/fixtures/testing.h"

using Vec = std::vector<float>;
using DVec = std::vector<double>;
using fd::check_fwd;
using fd::check_grad;
using fd::dot;
using fd::fd_grad;
using fd::to_d;

namespace {

std::mt19937 rng(4242);
constexpr int kThreads = 2;

Vec randn(size_t n, float scale = 1.0f, float offset = 0.0f) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    Vec v(n);
    for (auto& x : v) x = offset + scale * d(rng);
    return v;
}
DVec plus(const Vec& prefill, const DVec& g) {
    DVec r(g.size());
    for (size_t i = 0; i < g.size(); i++) r[i] = (double)prefill[i] + g[i];
    return r;
}

// ---- double references -------------------------------------------------------------------------------------------

constexpr double kEps = 1.1920928955078125e-07;  // 2^-23, PyTorch's rms_norm default for fp32

DVec ref_rmsnorm(const DVec& x, size_t N, size_t C, DVec* rstd = nullptr) {
    DVec out(N * C);
    for (size_t i = 0; i < N; i++) {
        double ss = 0;
        for (size_t c = 0; c < C; c++) ss += x[i * C + c] * x[i * C + c];
        const double r = 1.0 / std::sqrt(ss / C + kEps);
        for (size_t c = 0; c < C; c++) out[i * C + c] = x[i * C + c] * r;
        if (rstd) (*rstd)[i] = r;
    }
    return out;
}

// The records' attention prologue on q and k of every head: rms_norm, then apply_rotary_emb with x1 the first half
// of the head and x2 the second: y1 = x1 cos + x2 sin, y2 = x1 (-sin) + x2 cos, angle t * 10000^(-2i/hs). v copied.
DVec ref_qk_rotary(const DVec& qkv, size_t B, size_t T, size_t C, size_t NH, DVec* rstd = nullptr) {
    const size_t hs = C / NH, h = hs / 2;
    DVec out = qkv;
    for (size_t n = 0; n < B * T; n++)
        for (size_t head = 0; head < 2 * NH; head++) {
            const size_t off = n * 3 * C + head * hs;
            double ss = 0;
            for (size_t i = 0; i < hs; i++) ss += qkv[off + i] * qkv[off + i];
            const double r = 1.0 / std::sqrt(ss / hs + kEps);
            for (size_t i = 0; i < h; i++) {
                const double angle = (double)(n % T) * std::pow(10000.0, -2.0 * i / hs);
                const double x1 = qkv[off + i] * r, x2 = qkv[off + h + i] * r;
                out[off + i] = x1 * std::cos(angle) + x2 * std::sin(angle);
                out[off + h + i] = x1 * -std::sin(angle) + x2 * std::cos(angle);
            }
            if (rstd) (*rstd)[n * 2 * NH + head] = r;
        }
    return out;
}

DVec ref_relu2(const DVec& x) {
    DVec out(x.size());
    for (size_t i = 0; i < x.size(); i++) out[i] = x[i] > 0 ? x[i] * x[i] : 0.0;
    return out;
}

// Mean over rows of the cross-entropy of cap * tanh(z / cap) (cap 0: no cap), the first V of Vp columns.
DVec ref_softcap_losses(const DVec& z, const std::vector<int>& tgt, size_t N, size_t V, size_t Vp, double cap) {
    DVec loss(N);
    for (size_t i = 0; i < N; i++) {
        DVec c(V);
        double mx = -1e300, s = 0;
        for (size_t j = 0; j < V; j++) {
            c[j] = cap > 0 ? cap * std::tanh(z[i * Vp + j] / cap) : z[i * Vp + j];
            mx = std::max(mx, c[j]);
        }
        for (size_t j = 0; j < V; j++) s += std::exp(c[j] - mx);
        loss[i] = std::log(s) + mx - c[tgt[i]];
    }
    return loss;
}

// ---- tests ---------------------------------------------------------------------------------------------------------

void test_rotary_table() {
    const size_t T = 9, hs = 10;
    const Vec table = llmc::rotary_table(T, hs);
    DVec want(T * hs);
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < hs / 2; i++) {
            const double angle = (double)t / std::pow(10000.0, (2.0 * i) / hs);
            want[t * hs + i] = std::cos(angle);
            want[t * hs + hs / 2 + i] = std::sin(angle);
        }
    // One double computation rounded once to fp32: within half an ulp, 2^-24 relative.
    testing::check_close("rotary table: cos, sin of t 10000^(-2i/hs) in rows of hs", table.data(), want.data(),
                         want.size(), 0x1p-24, 0x1p-25);
    testing::check("rotary table: position 0 is the identity (cos 1, sin 0)",
                   table[0] == 1.0f && table[hs / 2] == 0.0f && table[hs / 2 - 1] == 1.0f && table[hs - 1] == 0.0f);
    testing::check("rotary table: the first pair turns by t radians", table[3 * hs] == (float)std::cos(3.0) &&
                   table[3 * hs + hs / 2] == (float)std::sin(3.0));
    testing::check("rotary table refuses an odd head size",
                   testing::throws_with([] { llmc::rotary_table(4, 7); }, "head size 7"));
}

void test_rmsnorm(size_t N, size_t C) {
    const std::string tag = "rmsnorm N=" + std::to_string(N) + " C=" + std::to_string(C);
    Vec x = randn(N * C, 1.5f, 0.5f), out(N * C), rstd(N);
    llmc::rmsnorm_forward(out.data(), rstd.data(), x.data(), N, C, kThreads);
    DVec r_ref(N);
    const DVec want = ref_rmsnorm(to_d(x), N, C, &r_ref);
    check_fwd(tag + " forward out", out.data(), want);
    check_fwd(tag + " forward rstd", rstd.data(), r_ref);

    const Vec W = randn(N * C), dx0 = randn(N * C);
    Vec dx = dx0, dx_only(N * C, 0.0f);
    llmc::rmsnorm_backward(dx.data(), W.data(), x.data(), rstd.data(), N, C, kThreads);
    llmc::rmsnorm_backward(dx_only.data(), W.data(), x.data(), rstd.data(), N, C, kThreads);
    const DVec gx = fd_grad(to_d(x), [&](const DVec& v) { return dot(ref_rmsnorm(v, N, C), W); });
    check_grad(tag + " backward dinp (+= residual)", dx.data(), plus(dx0, gx));
    check_grad(tag + " backward dinp alone", dx_only.data(), gx);
}

void test_qk_rotary(size_t B, size_t T, size_t C, size_t NH) {
    const std::string tag = "qk_norm_rotary B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" +
                            std::to_string(C) + " NH=" + std::to_string(NH);
    const size_t hs = C / NH, n3 = B * T * 3 * C;
    const Vec table = llmc::rotary_table(T, hs);
    const Vec qkv0 = randn(n3, 0.8f, 0.2f);
    Vec qkv = qkv0, rstd(llmc::qk_rotary_rstd_floats(B, T, NH));
    llmc::qk_norm_rotary_forward(qkv.data(), rstd.data(), table.data(), B, T, C, NH, kThreads);
    DVec r_ref(rstd.size());
    const DVec want = ref_qk_rotary(to_d(qkv0), B, T, C, NH, &r_ref);
    check_fwd(tag + " forward q, k normalised and rotated in place", qkv.data(), want);
    check_fwd(tag + " forward rstd per position and head", rstd.data(), r_ref);
    bool v_same = true;
    for (size_t n = 0; n < B * T; n++)
        v_same = v_same && std::memcmp(&qkv[n * 3 * C + 2 * C], &qkv0[n * 3 * C + 2 * C], C * sizeof(float)) == 0;
    testing::check(tag + " forward leaves v untouched", v_same);

    // Backward: dqkv holds dL/dy for y = the forward's output (all 3C columns); afterwards dL/dqkv, v's part unchanged
    // (the op is the identity on v).
    const Vec W = randn(n3);
    Vec dqkv = W;
    llmc::qk_norm_rotary_backward(dqkv.data(), qkv.data(), rstd.data(), table.data(), B, T, C, NH, kThreads);
    const DVec g = fd_grad(to_d(qkv0), [&](const DVec& v) { return dot(ref_qk_rotary(v, B, T, C, NH), W); });
    check_grad(tag + " backward dqkv in place", dqkv.data(), g);
}

// Scores of one query against one key, both rotated by the op at positions t and s, depend on t - s only: q and k
// turn the same way. The same q and k vectors at every position.
void test_qk_rotary_relative() {
    const size_t T = 12, C = 8, NH = 1, hs = 8;
    const Vec table = llmc::rotary_table(T, hs);
    const Vec q = randn(hs), k = randn(hs);
    Vec qkv(T * 3 * C, 0.0f), rstd(2 * T);
    for (size_t t = 0; t < T; t++) {
        std::copy(q.begin(), q.end(), qkv.begin() + t * 3 * C);
        std::copy(k.begin(), k.end(), qkv.begin() + t * 3 * C + C);
    }
    llmc::qk_norm_rotary_forward(qkv.data(), rstd.data(), table.data(), 1, T, C, NH, kThreads);
    auto score = [&](size_t t, size_t s) {
        double d = 0;
        for (size_t i = 0; i < hs; i++) d += (double)qkv[t * 3 * C + i] * qkv[s * 3 * C + C + i];
        return d;
    };
    // Each score is a float rotation of unit-RMS vectors (|y| <= sqrt(hs)): error <= ~10 x 6e-8 x hs per element.
    double worst = 0;
    for (size_t t = 1; t < T; t++)
        for (size_t s = 0; s < t; s++) worst = std::max(worst, std::fabs(score(t, s) - score(t - s, 0)));
    testing::check("qk_norm_rotary: q . k depends on the relative position only", worst < 1e-5,
                   "largest difference %.3g", worst);
}

void test_relu2() {
    const size_t n = 1001;
    Vec x = randn(n);
    x[0] = 0.0f, x[1] = -0.0f, x[2] = 1e-20f, x[3] = -3.0f;
    Vec out(n);
    llmc::relu2_forward(out.data(), x.data(), n, kThreads);
    check_fwd("relu2 forward", out.data(), ref_relu2(to_d(x)));
    const Vec W = randn(n);
    Vec dout = W;
    llmc::relu2_backward_inplace(dout.data(), x.data(), n, kThreads);
    DVec want(n);
    for (size_t i = 0; i < n; i++) want[i] = x[i] > 0 ? 2.0 * x[i] * W[i] : 0.0;
    check_fwd("relu2 backward: dout *= 2 max(x, 0) in place", dout.data(), want);
    // Finite differences away from the kink at 0, where the one-sided slopes differ by h.
    Vec xs = randn(64);
    for (auto& v : xs) v = v > 0 ? v + 0.1f : v - 0.1f;
    Vec ds = randn(64), d = ds;
    llmc::relu2_backward_inplace(d.data(), xs.data(), xs.size(), kThreads);
    check_grad("relu2 backward against finite differences", d.data(),
               fd_grad(to_d(xs), [&](const DVec& v) { return dot(ref_relu2(v), ds); }));
}

void test_softcap_classifier(float cap) {
    const size_t N = 6, V = 37, Vp = 48;
    const std::string tag = "softcap classifier cap=" + std::to_string((int)cap);
    // Logits up to ~+-80: beyond the cap, where tanh saturates and its slope is far from 1.
    Vec z = randn(N * Vp, 25.0f);
    std::vector<int> tgt(N);
    for (size_t i = 0; i < N; i++) tgt[i] = (int)((i * 7 + 3) % V);
    Vec losses(N), logits = z;
    llmc::softcap_classifier(logits.data(), losses.data(), tgt.data(), 1.0f, N, V, Vp, false, cap, kThreads);
    check_fwd(tag + " losses", losses.data(), ref_softcap_losses(to_d(z), tgt, N, V, Vp, cap));
    testing::check(tag + " without dlogits leaves the logits", std::memcmp(logits.data(), z.data(), z.size() * 4) == 0);

    const float dloss = 0.25f;
    llmc::softcap_classifier(logits.data(), losses.data(), tgt.data(), dloss, N, V, Vp, true, cap, kThreads);
    DVec g = fd_grad(to_d(z), [&](const DVec& v) {
        DVec l = ref_softcap_losses(v, tgt, N, V, Vp, cap);
        double s = 0;
        for (double e : l) s += dloss * e;
        return s;
    });
    check_grad(tag + " dlogits = dloss (softmax - onehot) dcap/dz, 0 in padded columns", logits.data(), g);
    bool pad_zero = true;
    for (size_t i = 0; i < N; i++)
        for (size_t j = V; j < Vp; j++) pad_zero = pad_zero && logits[i * Vp + j] == 0.0f;
    testing::check(tag + " padded columns of dlogits are exactly 0", pad_zero);
}

void test_softcap_classifier_refusals() {
    Vec z(16, 0.0f), l(1);
    std::vector<int> bad = {16};
    testing::check("softcap classifier refuses a target outside the vocabulary", testing::throws_with([&] {
        llmc::softcap_classifier(z.data(), l.data(), bad.data(), 1.0f, 1, 16, 16, true, 30.0f, 1);
    }, "outside the vocabulary"));
    std::vector<int> ok = {3};
    testing::check("softcap classifier refuses a negative cap", testing::throws_with([&] {
        llmc::softcap_classifier(z.data(), l.data(), ok.data(), 1.0f, 1, 16, 16, true, -1.0f, 1);
    }, "soft-cap"));
}

}  // namespace

int main() {
    try {
        test_rotary_table();
        test_rmsnorm(10, 12);
        test_rmsnorm(3, 33);
        test_qk_rotary(2, 5, 12, 3);   // hs = 4
        test_qk_rotary(1, 7, 32, 2);   // hs = 16
        test_qk_rotary_relative();
        test_relu2();
        test_softcap_classifier(30.0f);
        test_softcap_classifier(0.0f);
        test_softcap_classifier_refusals();
    } catch (const std::exception& e) {
        testing::fail("speedrun ops", "exception: %s", e.what());
    }
    return testing::finish();
}
