// Muon on the CPU (llmc/cpu/cpu_newton_schulz.h, llmc/cpu/cpu_muon.h), the recipe's helpers (llmc/speedrun_recipe.h)
// and Adam as AdamW with weight decay 0.
//
// Newton-Schulz: each iteration of the CPU's fp32 sgemm chain, from its own previous iterate, against the iteration in
// double with the elementwise bound of test/fixtures/newton_schulz_bound.h (U = 0: fp32 storage); the normalisation;
// and the five iterations against the records' literal iteration in double, within the Lipschitz bound of the same
// file. With --ref FILE (test/e2e/speedrun_reference_test.sh) also against the float64 Newton-Schulz that the PyTorch
// reference wrote.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/cpu/cpu_muon.h"
#include "llmc/cpu/cpu_newton_schulz.h"
#include "llmc/error.h"
#include "llmc/speedrun_recipe.h"
#include "test/fixtures/newton_schulz_bound.h"
#include "test/fixtures/tensor_file.h"
#include "test/fixtures/testing.h"

using Vec = std::vector<float>;
using DVec = std::vector<double>;

namespace {

std::mt19937_64 rng(777);
constexpr double u32 = 0x1p-24;

Vec randn(size_t n, float scale = 1.0f) { return nsref::random_matrix(rng, n, scale); }
DVec to_d(const Vec& v) { return DVec(v.begin(), v.end()); }

// |got - want| <= bound elementwise, reporting the largest error / bound.
bool check_bound(const std::string& name, const Vec& got, const DVec& want, const DVec& bound) {
    size_t bad = 0, first = 0;
    double ratio = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double e = std::fabs((double)got[i] - want[i]);
        if (!(e <= bound[i])) {
            if (!bad) first = i;
            bad++;
        }
        if (bound[i] > 0) ratio = std::max(ratio, e / bound[i]);
    }
    if (bad)
        return testing::check(name, false, "%zu of %zu outside; first at %zu: got %.9g want %.9g bound %.3g", bad,
                              got.size(), first, (double)got[first], want[first], bound[first]);
    return testing::check(name + " (max err/bound " + std::to_string(ratio) + ")", true);
}

// The CPU's iterate after `steps` iterations (0: the normalised input).
Vec cpu_iterate(const Vec& G, size_t rows, size_t cols, int steps) {
    Vec X = G, ws(llmc::newton_schulz_workspace_floats(rows, cols));
    llmc::newton_schulz(X.data(), rows, cols, ws.data(), steps);
    return X;
}

// Per-iteration checks and the chain bound; returns the Frobenius distance of the fifth iterate from double.
void test_newton_schulz(const Vec& G, size_t rows, size_t cols, const std::string& tag,
                        const DVec* want64 = nullptr) {
    // Normalisation: the norm in double, 1 / (norm + eps) rounded once, each product rounded once: <= 2 u32 |x|
    // (plus the norm's own double error, ~1e-16).
    const Vec X0 = cpu_iterate(G, rows, cols, 0);
    double norm = 0;
    for (float g : G) norm += (double)g * g;
    norm = std::sqrt(norm);
    DVec want0(G.size()), b0(G.size());
    for (size_t i = 0; i < G.size(); i++) {
        want0[i] = G[i] / (norm + (double)llmc::kNewtonSchulzEps);
        b0[i] = 2.5 * u32 * std::fabs(want0[i]);
    }
    check_bound(tag + " normalised by ||X||_F + eps", X0, want0, b0);

    // Each iteration from the CPU's own previous iterate; d: the chain's distance bound from the double iteration.
    double d = nsref::frobenius(b0);
    DVec exact = want0;
    Vec prev = X0;
    for (int k = 1; k <= llmc::kNewtonSchulzSteps; k++) {
        const Vec Xk = cpu_iterate(G, rows, cols, k);
        const nsref::StepResult s = nsref::step(to_d(prev), rows, cols, 0.0);
        check_bound(tag + " iteration " + std::to_string(k) + " from its own input", Xk, s.y, s.bound);
        d = nsref::lipschitz(nsref::kMaxIterateSingularValue + d) * d + nsref::frobenius(s.bound);
        exact = nsref::step(exact, rows, cols, 0.0).y;
        prev = Xk;
    }
    // The five iterations against the records' form in double (X = aX + bB + cAB with B = AX): within d.
    const DVec literal = nsref::newton_schulz(to_d(G), rows, cols, llmc::kNewtonSchulzSteps, llmc::kNewtonSchulzEps);
    DVec diff(prev.size());
    for (size_t i = 0; i < prev.size(); i++) diff[i] = prev[i] - literal[i];
    const double dist = nsref::frobenius(diff), scale = nsref::frobenius(literal);
    testing::check(tag + " five iterations within the chain bound of the records' iteration in double",
                   dist <= d && scale > 0.3, "distance %.3g, bound %.3g, ||X||_F %.3g", dist, d, scale);
    std::printf("# %s: fp32 vs double after 5 iterations %.3g (bound %.3g), ||X||_F %.3g\n", tag.c_str(), dist, d,
                scale);
    if (want64) {
        for (size_t i = 0; i < prev.size(); i++) diff[i] = prev[i] - (*want64)[i];
        const double dref = nsref::frobenius(diff);
        testing::check(tag + " against the PyTorch reference's float64 Newton-Schulz, within the chain bound",
                       dref <= d, "distance %.3g, bound %.3g", dref, d);
    }
    // The regrouped double iteration agrees with the literal one to double rounding.
    double worst = 0;
    for (size_t i = 0; i < exact.size(); i++) worst = std::max(worst, std::fabs(exact[i] - literal[i]));
    testing::check(tag + " (b A + c A A) X equals b (A X) + c A (A X) in double", worst < 1e-12, "%.3g", worst);
}

// The output is near-orthogonal: the records' coefficients leave every singular value s in about [0.68, 1.2] (not
// at 1), so the eigenvalues s^2 of the Gram matrix X X^T (X^T X when tall) lie in about [0.46, 1.45]. Its extreme
// eigenvalues by power iteration in double (S, then 2 I - S for the smallest; 2000 iterations on a 48 x 48 matrix
// converge far below the margins checked, [0.4, 1.5]).
double top_eigenvalue(const DVec& S, size_t m, double shift) {
    DVec x(m, 1.0), y(m);
    double lambda = 0;
    for (int it = 0; it < 2000; it++) {
        for (size_t i = 0; i < m; i++) {
            double s = shift * x[i];
            for (size_t j = 0; j < m; j++) s -= (shift != 0 ? 1.0 : -1.0) * S[i * m + j] * x[j];
            y[i] = s;
        }
        lambda = nsref::frobenius(y) / nsref::frobenius(x);
        for (size_t i = 0; i < m; i++) x[i] = y[i] / nsref::frobenius(y);
    }
    return lambda;
}

void test_orthogonalises(size_t rows, size_t cols) {
    const Vec G = randn(rows * cols);
    const Vec X = cpu_iterate(G, rows, cols, 5);
    const size_t m = std::min(rows, cols), n = std::max(rows, cols);
    const DVec Xd = rows > cols ? nsref::transpose(to_d(X), rows, cols) : to_d(X);
    const DVec S = nsref::matmul(Xd, false, Xd, true, m, m, n);
    const double hi = top_eigenvalue(S, m, 0.0), lo = 2.0 - top_eigenvalue(S, m, 2.0);
    testing::check("newton_schulz " + std::to_string(rows) + "x" + std::to_string(cols) +
                       ": eigenvalues of the Gram matrix in [0.4, 1.5] (near-orthogonal)",
                   lo > 0.4 && hi < 1.5, "range [%.3f, %.3f]", lo, hi);
    std::printf("# newton_schulz %zux%zu: squared singular values in [%.3f, %.3f]\n", rows, cols, lo, hi);
}

void test_zero_matrix() {
    Vec X(6 * 4, 0.0f), ws(llmc::newton_schulz_workspace_floats(6, 4));
    llmc::newton_schulz(X.data(), 6, 4, ws.data());
    bool zero = true;
    for (float x : X) zero = zero && x == 0.0f;
    testing::check("newton_schulz of a zero matrix is zero (eps keeps the normalisation finite)", zero);
}

// muon_update: momentum and Nesterov in fp32 (two roundings per element), then param -= lr scale O with O the CPU's
// Newton-Schulz of that update (checked above): one product and one subtraction, 2 u32 of the terms.
void test_muon_update(size_t rows, size_t cols, bool nesterov) {
    const std::string tag = "muon_update " + std::to_string(rows) + "x" + std::to_string(cols) +
                            (nesterov ? " nesterov" : " plain");
    const size_t n = rows * cols;
    const float lr = 0.02f, mu = 0.9f, gs = 0.5f;
    const Vec p0 = randn(n), buf0 = randn(n, 0.1f), g = randn(n);
    Vec p = p0, buf = buf0, ws(llmc::muon_workspace_floats(rows, cols));
    llmc::muon_update(p.data(), buf.data(), g.data(), rows, cols, lr, mu, nesterov, gs, ws.data(), 2);
    DVec want_buf(n), bb(n);
    Vec u(n);
    for (size_t i = 0; i < n; i++) {
        const double gi = (double)gs * g[i], bi = (double)mu * buf0[i] + gi;
        want_buf[i] = bi;
        bb[i] = 3 * u32 * (std::fabs((double)mu * buf0[i]) + std::fabs(gi));
        const float gf = gs * g[i], bf = mu * buf0[i] + gf;
        u[i] = nesterov ? gf + mu * bf : bf;  // the update, as fp32 computes it
    }
    check_bound(tag + ": momentum buffer = mu buf + g", buf, want_buf, bb);
    const Vec O = cpu_iterate(u, rows, cols, llmc::kNewtonSchulzSteps);
    const double step = (double)lr * std::sqrt(std::max(1.0, (double)rows / cols));
    DVec want_p(n), bp(n);
    for (size_t i = 0; i < n; i++) {
        want_p[i] = p0[i] - step * O[i];
        bp[i] = 3 * u32 * (std::fabs(p0[i]) + std::fabs(step * O[i]));
    }
    check_bound(tag + ": param -= lr sqrt(max(1, rows/cols)) NS(update)", p, want_p, bp);
}

// PyTorch's Adam (weight_decay 0): denom = sqrt(v) / sqrt(1 - b2^t) + eps; p -= lr / (1 - b1^t) m / denom. AdamW
// with wd 0 is the same update written as lr mhat / (sqrt(vhat) + eps). Five steps in double against the backend's
// float: a few roundings per step relative to |p| and to the step lr |mhat / (sqrt(vhat) + eps)| <= ~lr.
void test_adam_is_adamw_without_decay() {
    llmc::CpuBackend be;
    const size_t n = 257;
    const float lr = 0.3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
    Vec p = randn(n), m(n, 0.0f), v(n, 0.0f);
    DVec pd = to_d(p), md(n, 0.0), vd(n, 0.0), bound(n, 0.0);
    for (int t = 1; t <= 5; t++) {
        const Vec g = randn(n);
        be.adamw_update(p.data(), p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, 0.0f, 1.0f, t, 1);
        for (size_t i = 0; i < n; i++) {
            md[i] = b1 * md[i] + (1.0 - b1) * g[i];
            vd[i] = b2 * vd[i] + (1.0 - b2) * (double)g[i] * g[i];
            const double denom = std::sqrt(vd[i]) / std::sqrt(1.0 - std::pow((double)b2, t)) + eps;
            const double upd = lr / (1.0 - std::pow((double)b1, t)) * md[i] / denom;
            pd[i] -= upd;
            bound[i] += 10 * u32 * (std::fabs(pd[i]) + std::fabs(upd));
        }
    }
    check_bound("adam: AdamW with weight decay 0 is torch.optim.Adam's update (5 steps, lr 0.3)", p, pd, bound);
}

void test_recipe_helpers() {
    testing::check("muon scale: sqrt(max(1, rows/cols)): 3072x768 -> 2, 768x3072 -> 1, 768x768 -> 1",
                   llmc::muon_update_scale(3072, 768) == 2.0f && llmc::muon_update_scale(768, 3072) == 1.0f &&
                       llmc::muon_update_scale(768, 768) == 1.0f);
    const float a = llmc::muon_momentum_at(0, 500), b = llmc::muon_momentum_at(250, 500),
                c = llmc::muon_momentum_at(500, 500), d = llmc::muon_momentum_at(3000, 500),
                e = llmc::muon_momentum_at(0, 0);
    testing::check("muon momentum warm-up: 0.85 at step 0, 0.90 halfway, 0.95 from the end on, 0.95 without",
                   std::fabs(a - 0.85f) < 1e-7f && std::fabs(b - 0.90f) < 1e-7f && c == 0.95f && d == 0.95f &&
                       e == 0.95f, "%.9g %.9g %.9g %.9g %.9g", a, b, c, d, e);
}

// The PyTorch reference's float64 Newton-Schulz cases: ns_input_<k> (fp32) and ns_output_<k> (float64).
void test_reference(const std::string& path) {
    const auto t = tensor_file::read(path);
    int cases = 0;
    for (int k = 0;; k++) {
        const auto in = t.find("ns_input_" + std::to_string(k)), out = t.find("ns_output_" + std::to_string(k));
        if (in == t.end() || out == t.end()) break;
        const size_t rows = (size_t)in->second.shape[0], cols = (size_t)in->second.shape[1];
        const DVec g = in->second.values(), want = out->second.values();
        const Vec G(g.begin(), g.end());
        const std::string tag = "reference ns case " + std::to_string(k) + " (" + std::to_string(rows) + "x" +
                                std::to_string(cols) + ")";
        test_newton_schulz(G, rows, cols, tag, &want);
        // The same iteration written here in double against PyTorch's float64: two double computations of one
        // formula in different orders, ~1e-15 of the values apart; 1e-12 of the largest leaves room and catches any
        // difference of convention (which side a tall matrix is multiplied on, the coefficients, the eps).
        const DVec mine = nsref::newton_schulz(g, rows, cols, llmc::kNewtonSchulzSteps, llmc::kNewtonSchulzEps);
        double worst = 0, top = 0;
        for (size_t i = 0; i < want.size(); i++)
            worst = std::max(worst, std::fabs(mine[i] - want[i])), top = std::max(top, std::fabs(want[i]));
        testing::check(tag + ": this file's double iteration equals PyTorch's float64 one", worst <= 1e-12 * top,
                       "max difference %.3g of max %.3g", worst, top);
        cases++;
    }
    testing::check("reference file holds Newton-Schulz cases", cases >= 3, "%d cases in %s", cases, path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc == 3 && std::string(argv[1]) == "--ref") {
            test_reference(argv[2]);
            return testing::finish();
        }
        test_newton_schulz(randn(24 * 40), 24, 40, "newton_schulz 24x40 (wide)");
        test_newton_schulz(randn(40 * 24), 40, 24, "newton_schulz 40x24 (tall)");
        test_newton_schulz(randn(32 * 32), 32, 32, "newton_schulz 32x32");
        test_newton_schulz(randn(7 * 13, 3.0f), 7, 13, "newton_schulz 7x13");
        test_newton_schulz(randn(9), 1, 9, "newton_schulz 1x9 (a row)");
        test_orthogonalises(48, 80);
        test_orthogonalises(80, 48);
        test_zero_matrix();
        test_muon_update(24, 40, true);
        test_muon_update(40, 24, true);
        test_muon_update(16, 16, false);
        test_adam_is_adamw_without_decay();
        test_recipe_helpers();
    } catch (const std::exception& e) {
        testing::fail("muon", "exception: %s", e.what());
    }
    return testing::finish();
}
