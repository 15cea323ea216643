// The speedrun recipe's CPU ops composed into its model, against the PyTorch reference
// (dev/reference/speedrun_reference.py; run by test/e2e/speedrun_reference_test.sh with --ref FILE): the logits, the
// loss and every parameter gradient at the initial weights, then the reference's optimizer steps (Muon on the block
// matrices, Adam as AdamW with weight decay 0 on the rest, the records' schedule as the WSD schedule) with their
// losses and the final parameters. The model here is the test's own sequence of op calls, the reference's forward
// written with this repository's ops (CpuBackend's matmuls, attention and encoder, llmc/cpu/'s recipe ops): it shows
// that the ops' conventions (rotary pairs and direction, where the norms sit, the soft-cap's gradient, Muon's scale
// and Nesterov form, each qkv block orthogonalised alone) are the reference's.
//
// Tolerances, from the reference's own measure of fp32 noise (its --float64 report, docs/reference.md): both sides
// compute the same fp32 function in different summation orders, so they differ by about the distance of either from
// float64, at most 5.1e-7 of the largest value for the logits and the matrices' gradients, 1.1e-7 for the step losses.
//   logits, matrix gradients: |d| <= 1e-5 |want| + 1e-5 max|want| (20 x that noise); loss, step losses: 1e-5 relative.
//   scalar gradients (vlambda, lambdas: sums over all B T C elements with cancellation, noise 4.0e-6 of the largest):
//     1e-5 |want| + 4e-5 max|want| (10 x).
//   parameters after the steps: Adam divides by each element's running RMS, so an element whose gradient is at the
//   noise level moves by up to lr per step either way (docs/reference.md explains it for GPT-2), and Muon moves a
//   matrix by lr sqrt(max(1, rows/cols)) |O| <= 1.25 lr scale per element and step: every element within 1e-5 |want|
//   + 2 such steps, and at most 0.1% of each tensor's elements beyond 1e-5 |want| + 1e-3 of a step.
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/cpu/cpu_classifier.h"
#include "llmc/cpu/cpu_muon.h"
#include "llmc/cpu/cpu_qk_rotary.h"
#include "llmc/cpu/cpu_relu2.h"
#include "llmc/cpu/cpu_rmsnorm.h"
#include "llmc/error.h"
#include "llmc/rotary_table.h"
#include "llmc/schedule.h"
#include "llmc/speedrun_recipe.h"
#include "test/fixtures/tensor_file.h"
#include "test/fixtures/testing.h"

using Vec = std::vector<float>;
using Tensors = std::map<std::string, Vec>;

namespace {

constexpr int kThreads = 1;
const char* const kMatrices[] = {"qkvw", "attprojw", "fcw", "fcprojw"};

struct Config {
    size_t L, NH, C, V, Vp, T, B, steps, warmdown, warmup;
    bool value_residual, embed_skip, softcap;
    size_t N() const { return B * T; }
};

Vec floats(const tensor_file::Tensor& t) {
    const std::vector<double> v = t.values();
    return Vec(v.begin(), v.end());
}

// Saved activations of one layer.
struct Layer {
    Vec xin, xs, h1, r1, qkv, vraw, rqk, att, atty, xmid, h2, r2, fch, fcr;
};

struct Model {
    Config c;
    llmc::CpuBackend be;
    std::vector<int> inputs, targets;
    Tensors p, g;
    Vec table, emb, r0, x0, xfinal, hf, rf, dlogits, v1;
    std::vector<Layer> layers;
    float loss = 0;

    float* block(Tensors& t, const char* name, size_t l, size_t rows, size_t cols) {
        return t[name].data() + l * rows * cols;
    }
    Vec matmul(const Vec& x, const float* w, size_t in, size_t out) {
        Vec y(c.N() * out);
        be.matmul_forward(y.data(), x.data(), w, nullptr, c.N(), in, out);
        return y;
    }
    Vec rmsnorm(const Vec& x, Vec& rstd) {
        Vec out(x.size());
        rstd.assign(c.N(), 0.0f);
        llmc::rmsnorm_forward(out.data(), rstd.data(), x.data(), c.N(), c.C, kThreads);
        return out;
    }
    void attention_block(Layer& a, size_t l);
    void mlp_block(Layer& a, Vec& x, size_t l);
    Vec forward();
    void backward();
    void attention_backward(Layer& a, Vec& dx, Vec& dv1, size_t l);
};

void Model::attention_block(Layer& a, size_t l) {
    const size_t N = c.N(), C = c.C;
    a.h1 = rmsnorm(a.xs, a.r1);
    a.qkv = matmul(a.h1, block(p, "qkvw", l, 3 * C, C), C, 3 * C);
    if (c.value_residual) {
        a.vraw.assign(N * C, 0.0f);
        for (size_t n = 0; n < N; n++) std::memcpy(&a.vraw[n * C], &a.qkv[n * 3 * C + 2 * C], C * sizeof(float));
        if (l == 0) v1 = a.vraw;
        const float lam = p["vlambda"][l];
        for (size_t n = 0; l > 0 && n < N; n++)
            for (size_t k = 0; k < C; k++) a.qkv[n * 3 * C + 2 * C + k] = (1 - lam) * a.vraw[n * C + k] + lam * v1[n * C + k];
    }
    a.rqk.assign(llmc::qk_rotary_rstd_floats(c.B, c.T, c.NH), 0.0f);
    llmc::qk_norm_rotary_forward(a.qkv.data(), a.rqk.data(), table.data(), c.B, c.T, C, c.NH, kThreads);
    a.att.assign(llmc::CpuBackend::attention_state_elems(c.B, c.T, c.NH), 0.0f);
    a.atty.assign(N * C, 0.0f);
    be.attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), c.B, c.T, C, c.NH);
    const Vec ap = matmul(a.atty, block(p, "attprojw", l, C, C), C, C);
    a.xmid = a.xs;
    for (size_t i = 0; i < N * C; i++) a.xmid[i] += ap[i];
}

void Model::mlp_block(Layer& a, Vec& x, size_t l) {
    const size_t C = c.C;
    a.h2 = rmsnorm(a.xmid, a.r2);
    a.fch = matmul(a.h2, block(p, "fcw", l, 4 * C, C), C, 4 * C);
    a.fcr.assign(a.fch.size(), 0.0f);
    llmc::relu2_forward(a.fcr.data(), a.fch.data(), a.fch.size(), kThreads);
    const Vec fp = matmul(a.fcr, block(p, "fcprojw", l, C, 4 * C), 4 * C, C);
    x = a.xmid;
    for (size_t i = 0; i < x.size(); i++) x[i] += fp[i];
}

// Returns the raw logits (N, Vp); sets loss and dlogits (the gradient of the mean loss).
Vec Model::forward() {
    const size_t N = c.N(), C = c.C;
    emb.assign(N * C, 0.0f);
    const Vec zero_wpe(c.T * C, 0.0f);
    be.encoder_forward(emb.data(), inputs.data(), p["wte"].data(), zero_wpe.data(), c.B, c.T, C);
    x0 = rmsnorm(emb, r0);
    Vec x = x0;
    layers.assign(c.L, Layer());
    for (size_t l = 0; l < c.L; l++) {
        Layer& a = layers[l];
        a.xin = x;
        if (c.embed_skip)
            for (size_t i = 0; i < N * C; i++) x[i] = p["lambdas"][2 * l] * x[i] + p["lambdas"][2 * l + 1] * x0[i];
        a.xs = x;
        attention_block(a, l);
        mlp_block(a, x, l);
    }
    xfinal = x;
    hf = rmsnorm(x, rf);
    const Vec logits = matmul(hf, p["lm_head"].data(), C, c.Vp);
    dlogits = logits;
    Vec losses(N);
    llmc::softcap_classifier(dlogits.data(), losses.data(), targets.data(), 1.0f / (float)N, N, c.V, c.Vp, true,
                             c.softcap ? llmc::kLogitSoftCap : 0.0f, kThreads);
    double sum = 0;
    for (float l : losses) sum += l;
    loss = (float)(sum / N);
    return logits;
}

// dx: the gradient at the block's output on entry, at its input (after the skip mix) on return; dv1 accumulates the
// gradient of block 0's v through the later blocks' value residual.
void Model::attention_backward(Layer& a, Vec& dx, Vec& dv1, size_t l) {
    const size_t N = c.N(), C = c.C;
    Vec datty(N * C), dqkv(N * 3 * C), dh1(N * C);
    be.matmul_backward(datty.data(), block(g, "attprojw", l, C, C), nullptr, dx.data(), a.atty.data(),
                       block(p, "attprojw", l, C, C), N, C, C);
    be.attention_backward(dqkv.data(), datty.data(), a.qkv.data(), a.atty.data(), a.att.data(), c.B, c.T, C, c.NH);
    llmc::qk_norm_rotary_backward(dqkv.data(), a.qkv.data(), a.rqk.data(), table.data(), c.B, c.T, C, c.NH, kThreads);
    if (c.value_residual) {
        const float lam = p["vlambda"][l];
        double dlam = 0;
        for (size_t n = 0; n < N; n++)
            for (size_t k = 0; k < C; k++) {
                float& dv = dqkv[n * 3 * C + 2 * C + k];
                if (l > 0) {
                    dlam += (double)dv * (v1[n * C + k] - a.vraw[n * C + k]);
                    dv1[n * C + k] += lam * dv;
                    dv *= 1 - lam;
                } else {
                    dv += dv1[n * C + k];
                }
            }
        g["vlambda"][l] += (float)dlam;
    }
    be.matmul_backward(dh1.data(), block(g, "qkvw", l, 3 * C, C), nullptr, dqkv.data(), a.h1.data(),
                       block(p, "qkvw", l, 3 * C, C), N, C, 3 * C);
    llmc::rmsnorm_backward(dx.data(), dh1.data(), a.xs.data(), a.r1.data(), N, C, kThreads);
}

void Model::backward() {
    const size_t N = c.N(), C = c.C;
    for (auto& kv : p) g[kv.first].assign(kv.second.size(), 0.0f);
    Vec dhf(N * C), dx(N * C, 0.0f), dx0(N * C, 0.0f), dv1(N * C, 0.0f);
    be.matmul_backward(dhf.data(), g["lm_head"].data(), nullptr, dlogits.data(), hf.data(), p["lm_head"].data(), N,
                       C, c.Vp);
    llmc::rmsnorm_backward(dx.data(), dhf.data(), xfinal.data(), rf.data(), N, C, kThreads);
    for (size_t l = c.L; l-- > 0;) {
        Layer& a = layers[l];
        Vec dfcr(N * 4 * C), dh2(N * C);
        be.matmul_backward(dfcr.data(), block(g, "fcprojw", l, C, 4 * C), nullptr, dx.data(), a.fcr.data(),
                           block(p, "fcprojw", l, C, 4 * C), N, 4 * C, C);
        llmc::relu2_backward_inplace(dfcr.data(), a.fch.data(), dfcr.size(), kThreads);
        be.matmul_backward(dh2.data(), block(g, "fcw", l, 4 * C, C), nullptr, dfcr.data(), a.h2.data(),
                           block(p, "fcw", l, 4 * C, C), N, C, 4 * C);
        llmc::rmsnorm_backward(dx.data(), dh2.data(), a.xmid.data(), a.r2.data(), N, C, kThreads);
        attention_backward(a, dx, dv1, l);
        if (c.embed_skip) {
            const float l0 = p["lambdas"][2 * l], l1 = p["lambdas"][2 * l + 1];
            double d0 = 0, d1 = 0;
            for (size_t i = 0; i < N * C; i++) {
                d0 += (double)dx[i] * a.xin[i], d1 += (double)dx[i] * x0[i];
                dx0[i] += l1 * dx[i];
                dx[i] *= l0;
            }
            g["lambdas"][2 * l] += (float)d0, g["lambdas"][2 * l + 1] += (float)d1;
        }
    }
    for (size_t i = 0; i < N * C; i++) dx0[i] += dx[i];
    Vec demb(N * C, 0.0f), dwpe(c.T * C, 0.0f);
    llmc::rmsnorm_backward(demb.data(), dx0.data(), emb.data(), r0.data(), N, C, kThreads);
    be.encoder_backward(g["wte"].data(), dwpe.data(), demb.data(), inputs.data(), c.B, c.T, C);
}

// |got - want| <= rtol |want| + atol_frac max|want|, elementwise.
bool check_tensor(const std::string& name, const Vec& got, const Vec& want, double rtol, double atol_frac) {
    if (got.size() != want.size()) return testing::check(name, false, "%zu elements, want %zu", got.size(), want.size());
    double top = 0;
    for (float w : want) top = std::max(top, (double)std::fabs(w));
    return testing::check_close(name, got.data(), want.data(), want.size(), rtol, atol_frac * top);
}

void load(Model& m, const std::map<std::string, tensor_file::Tensor>& t) {
    const std::vector<double> k = t.at("config").values();
    m.c = Config{(size_t)k[0], (size_t)k[1], (size_t)k[2], (size_t)k[3], (size_t)k[4], (size_t)k[5], (size_t)k[6],
                 (size_t)k[8], (size_t)k[9], (size_t)k[10], k[11] != 0, k[12] != 0, k[13] != 0};
    for (double v : t.at("inputs").values()) m.inputs.push_back((int)v);
    for (double v : t.at("targets").values()) m.targets.push_back((int)v);
    for (const auto& kv : t)
        if (kv.first.rfind("param.", 0) == 0) m.p[kv.first.substr(6)] = floats(kv.second);
    m.table = llmc::rotary_table(m.c.T, m.c.C / m.c.NH);
}

// One optimizer step as the reference takes it: Muon on each block matrix (qkvw's q, k, v separately), Adam (AdamW,
// weight decay 0) on the rest, every learning rate times the schedule's factor. Returns that factor and Muon's
// momentum.
struct Optim {
    Tensors m, v, buf;
    Vec ws;
};
std::pair<float, float> optimizer_step(Model& md, Optim& o, int step) {
    const Config& c = md.c;
    llmc::ScheduleConfig s;
    s.kind = llmc::LRSchedule::WSD;
    s.peak_lr = 1.0f, s.warmup_steps = 0, s.total_steps = (int)c.steps, s.final_fraction = 0.0f;
    s.decay_fraction = (float)c.warmdown / (float)c.steps;
    const float f = llmc::learning_rate(s, step), mu = llmc::muon_momentum_at(step, (int)c.warmup);
    const size_t C = c.C;
    for (const char* name : kMatrices) {
        const size_t rows = std::string(name) == "qkvw" ? C : std::string(name) == "fcw" ? 4 * C : C;
        const size_t cols = std::string(name) == "fcprojw" ? 4 * C : C;
        Vec& b = o.buf[name];
        b.resize(md.p[name].size(), 0.0f);
        o.ws.resize(llmc::muon_workspace_floats(rows, cols));
        for (size_t off = 0; off < md.p[name].size(); off += rows * cols)  // every layer, and q, k, v of qkvw
            llmc::muon_update(md.p[name].data() + off, b.data() + off, md.g[name].data() + off, rows, cols,
                              0.02f * f, mu, true, 1.0f, o.ws.data(), kThreads);
    }
    const std::map<std::string, float> adam_lr = {{"wte", 0.3f}, {"lm_head", 0.002f}, {"vlambda", 0.02f},
                                                  {"lambdas", 0.02f}};
    for (const auto& kv : adam_lr) {
        if (!md.p.count(kv.first)) continue;
        Vec &pp = md.p[kv.first], &mm = o.m[kv.first], &vv = o.v[kv.first];
        mm.resize(pp.size(), 0.0f), vv.resize(pp.size(), 0.0f);
        md.be.adamw_update(pp.data(), pp.data(), md.g[kv.first].data(), mm.data(), vv.data(), pp.size(),
                           kv.second * f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, step + 1, 1);
    }
    return {f, mu};
}

// The two-level bound of the header for one tensor after the steps; `step` is the largest per-element step.
void check_final(const std::string& name, const Vec& got, const Vec& want, double step) {
    size_t loose = 0, tight = 0;
    double worst = 0;
    for (size_t i = 0; i < want.size(); i++) {
        const double d = std::fabs((double)got[i] - want[i]), r = 1e-5 * std::fabs(want[i]);
        loose += !(d <= r + 2 * step);
        tight += !(d <= r + 1e-3 * step);
        worst = std::max(worst, d / step);
    }
    testing::check(name + ": every element within 2 steps, at most 0.1% beyond 1e-3 of a step (largest " +
                       std::to_string(worst) + " steps, " + std::to_string(tight) + " beyond 1e-3)",
                   loose == 0 && tight * 1000 <= want.size(), "%zu beyond 2 steps, %zu of %zu beyond 1e-3 step",
                   loose, tight, want.size());
}

void test_reference(const std::string& path) {
    const auto t = tensor_file::read(path);
    Model md;
    load(md, t);
    const std::string tag = "speedrun reference " + path + ": ";
    const Vec logits = md.forward();
    md.backward();
    check_tensor(tag + "logits", logits, floats(t.at("logits")), 1e-5, 1e-5);
    const float want_loss = (float)t.at("loss").values()[0];
    testing::check_close((tag + "loss").c_str(), &md.loss, &want_loss, 1, 1e-5, 0.0);
    for (const auto& kv : md.p) {
        const bool scalar = kv.first == "vlambda" || kv.first == "lambdas";
        check_tensor(tag + "gradient of " + kv.first, md.g[kv.first], floats(t.at("grad." + kv.first)), 1e-5,
                     scalar ? 4e-5 : 1e-5);
    }
    Optim o;
    Vec losses, factors, momenta;
    for (size_t s = 0; s < md.c.steps; s++) {
        md.forward();
        md.backward();
        losses.push_back(md.loss);
        const std::pair<float, float> fm = optimizer_step(md, o, (int)s);
        factors.push_back(fm.first);
        momenta.push_back(fm.second);
    }
    check_tensor(tag + "step losses", losses, floats(t.at("step_losses")), 1e-5, 0.0);
    check_tensor(tag + "learning-rate factors (WSD: decay fraction = warm-down / steps)", factors,
                 floats(t.at("lr_factors")), 1e-6, 0.0);
    check_tensor(tag + "Muon momenta (muon_momentum_at)", momenta, floats(t.at("muon_momenta")), 1e-6, 0.0);
    // The largest change of one element in one step: Adam's lr, Muon's 1.25 lr sqrt(max(1, rows / cols)).
    const std::map<std::string, double> step = {{"wte", 0.3}, {"lm_head", 0.002}, {"vlambda", 0.02},
                                                {"lambdas", 0.02}, {"qkvw", 1.25 * 0.02}, {"attprojw", 1.25 * 0.02},
                                                {"fcw", 1.25 * 0.02 * 2}, {"fcprojw", 1.25 * 0.02}};
    for (const auto& kv : md.p)
        check_final(tag + "parameters after the steps: " + kv.first, kv.second, floats(t.at("final." + kv.first)),
                    step.at(kv.first));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3 || std::string(argv[1]) != "--ref") {
        std::fprintf(stderr, "usage: %s --ref SPEEDRUN_REFERENCE_FILE (test/e2e/speedrun_reference_test.sh)\n", argv[0]);
        return 2;
    }
    try {
        test_reference(argv[2]);
    } catch (const std::exception& e) {
        testing::fail("speedrun reference", "exception: %s", e.what());
    }
    return testing::finish();
}
