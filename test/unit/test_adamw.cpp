// CpuBackend::adamw_update against a hand computation and a double-precision reference, for 3 steps, with weight decay
// and grad_scale, with params aliasing the master weights (act_t = float) and with a separate master copy.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/error.h"
#include "test/fixtures/testing.h"

using llmc::CpuBackend;

namespace {

struct Hyper {
    float lr, beta1, beta2, eps, wd, grad_scale;
};

// One parameter, worked by hand: p0 = 1, lr = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, wd = 0.1, grad_scale = 0.5,
// raw gradients 1, -1, 2 (so g = 0.5, -0.5, 1).
//   t=1: m = 0.1*0.5 = 0.05;               v = 0.05*0.25 = 0.0125
//        mhat = 0.05/0.1 = 0.5;            vhat = 0.0125/0.05 = 0.25;   sqrt = 0.5
//        p = 1 - 0.1 (0.5/(0.5+1e-8) + 0.1*1) = 0.890000002
//   t=2: m = 0.045 - 0.05 = -0.005;        v = 0.011875 + 0.0125 = 0.024375
//        mhat = -0.005/0.19 = -0.0263157895; vhat = 0.024375/0.0975 = 0.25
//        p = 0.890000002 - 0.1 (-0.0263157895/0.50000001 + 0.0890000002) = 0.88636315977
//   t=3: m = -0.0045 + 0.1 = 0.0955;       v = 0.02315625 + 0.05 = 0.07315625
//        mhat = 0.0955/0.271 = 0.3523985240; vhat = 0.07315625/0.142625 = 0.5129272568
//        p = 0.88636315977 - 0.1 (0.3523985240/(0.7161894...+1e-8) + 0.088636316) = 0.82829487379
// Float arithmetic (with the float constants 0.9f, 0.95f, which differ from 0.9, 0.95 by ~3e-8 relative): a handful
// of roundings per step, ~6e-8 each relative to the terms involved, so after 3 steps 5e-7 relative to the terms
// bounds the error. For p the terms are O(1) (rtol 5e-7); m and v are sums of terms of size <= 0.1 that can cancel
// (m at t=2 is 0.045 - 0.05), so their floor is 5e-7 x 0.1 = 5e-8 absolute. A wrong bias correction or a missing
// term changes these values at the 1e-3 level or more.
void test_hand(bool aliased) {
    const std::string tag = aliased ? " (aliased)" : " (separate master)";
    CpuBackend be;
    const Hyper h{0.1f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f};
    float master = 1.0f, param = aliased ? 0.0f : -7.0f, m = 0.0f, v = 0.0f;
    float* params = aliased ? &master : &param;
    const float grads[3] = {1.0f, -1.0f, 2.0f};
    const double want_p[3] = {0.890000002, 0.88636315977, 0.82829487379};
    const double want_m[3] = {0.05, -0.005, 0.0955};
    const double want_v[3] = {0.0125, 0.024375, 0.07315625};
    for (int t = 1; t <= 3; t++) {
        be.adamw_update(params, &master, &grads[t - 1], &m, &v, 1, h.lr, h.beta1, h.beta2, h.eps, h.wd, h.grad_scale, t,
                        42);
        const std::string s = "hand step " + std::to_string(t);
        testing::check_close(s + " master" + tag, &master, &want_p[t - 1], 1, 5e-7, 0.0);
        testing::check_close(s + " m" + tag, &m, &want_m[t - 1], 1, 5e-7, 5e-8);
        testing::check_close(s + " v" + tag, &v, &want_v[t - 1], 1, 5e-7, 5e-8);
        if (!aliased) testing::check(s + " params = master" + tag, param == master, "%.9g vs %.9g", param, master);
    }
}

// Many elements against the formula evaluated in double. Gradients have |g| in [0.1, 2] so that sqrt(vhat) is not
// tiny; then each step's float error is a few roundings relative to |p|, |m|, |v| (|m| can cancel towards 0: an
// absolute floor of 1e-7 covers the ~2 roundings of its O(1) terms), and after 3 steps rtol 1e-6 bounds it.
// A large eps (0.05) checks where eps enters: sqrt(vhat) + eps, not sqrt(vhat + eps).
void test_reference(bool aliased, float eps) {
    const std::string tag = std::string(aliased ? " (aliased" : " (separate master") + ", eps " +
                            (eps < 1e-3f ? "1e-8)" : "0.05)");
    CpuBackend be;
    const size_t n = 1037;
    const Hyper h{3e-3f, 0.9f, 0.999f, eps, 0.05f, 0.25f};
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> mag(0.1f, 2.0f), pu(-1.0f, 1.0f);
    std::vector<float> master(n), params(n, 123.0f), m(n, 0.0f), v(n, 0.0f);
    std::vector<double> dp(n), dm(n, 0.0), dv(n, 0.0);
    for (size_t i = 0; i < n; i++) dp[i] = master[i] = pu(rng);
    float* pp = aliased ? master.data() : params.data();
    for (int t = 1; t <= 3; t++) {
        std::vector<float> raw(n);
        for (auto& g : raw) g = (rng() & 1 ? 1.0f : -1.0f) * mag(rng) / h.grad_scale;
        be.adamw_update(pp, master.data(), raw.data(), m.data(), v.data(), n, h.lr, h.beta1, h.beta2, h.eps, h.wd,
                        h.grad_scale, t, 42);
        for (size_t i = 0; i < n; i++) {
            double g = (double)h.grad_scale * raw[i];
            dm[i] = (double)h.beta1 * dm[i] + (1.0 - (double)h.beta1) * g;
            dv[i] = (double)h.beta2 * dv[i] + (1.0 - (double)h.beta2) * g * g;
            double mhat = dm[i] / (1.0 - std::pow((double)h.beta1, t));
            double vhat = dv[i] / (1.0 - std::pow((double)h.beta2, t));
            dp[i] -= (double)h.lr * (mhat / (std::sqrt(vhat) + (double)h.eps) + (double)h.wd * dp[i]);
        }
        const std::string s = "reference step " + std::to_string(t);
        testing::check_close(s + " master" + tag, master.data(), dp.data(), n, 1e-6, 1e-7);
        testing::check_close(s + " m" + tag, m.data(), dm.data(), n, 1e-6, 1e-7);
        testing::check_close(s + " v" + tag, v.data(), dv.data(), n, 1e-6, 1e-7);
        if (!aliased)
            testing::check(s + " params = master" + tag, std::memcmp(params.data(), master.data(), n * 4) == 0);
    }
}

}  // namespace

int main() {
    try {
        test_hand(true);
        test_hand(false);
        test_reference(true, 1e-8f);
        test_reference(false, 1e-8f);
        test_reference(true, 0.05f);
        test_reference(false, 0.05f);
        CpuBackend be;
        float p = 1, g = 1, m = 0, v = 0;
        std::string msg;
        try {
            be.adamw_update(&p, &p, &g, &m, &v, 1, 0.1f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 0, 42);
        } catch (const llmc::Error& e) {
            msg = e.what();
        }
        testing::check("step t=0 is rejected (t is 1-based)", msg.find("t=0") != std::string::npos, "message: '%s'",
                       msg.c_str());
    } catch (const std::exception& e) {
        testing::fail("unexpected exception", "%s", e.what());
    }
    return testing::finish();
}
