// test_gpt2: the model (llmc/model.h) and the optimizer (llmc/optimizer.h) against the PyTorch reference.
//
//   /usr/bin/python3 dev/reference/gpt2_reference.py --out build/ref/small     (writes model.bin, reference.bin)
//   ./test_gpt2_cpu --ref build/ref/small
//
// One source, three builds (llmc/main_backend.h): g++ -x c++ -> ./test_gpt2_cpu (CpuBackend, fp32); g++ -DLLMC_CUDA
// (or nvcc) -> ./test_gpt2 (CudaBackend, bf16); g++ -DLLMC_CUDA -DLLMC_CUDASIM -> build/test_gpt2_sim (CudaBackend's
// real sources on the CUDA simulator).
//
// Checks, each printing a PASS/FAIL line (test/fixtures/testing.h) with the observed errors:
//   logits (B,T,Vp) and the mean loss of one forward pass at the initial weights;
//   each of the 16 parameter gradients of that loss;
//   10 AdamW steps on the same batch (weight decay on the 2-D tensors only, gradient clipping): the loss and the
//   global gradient norm of each step, and the parameters after the last step.
// --speedrun-ref FILE checks the speedrun architecture and its optimizers instead (test/fixtures/speedrun_model_check.h).
// The reference file format is documented in docs/reference.md. llm.c's own debug state (its train_gpt2.py's
// gpt2_124M_debug_state.bin, docs/formats.md) is read too: `--model gpt2_124M.bin --llmc-debug-state FILE`, or as a
// --ref directory's reference.bin (by its magic number); it has the logits, the loss and the gradients, no steps.
#include <cxxopts.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "llmc/comm.h"
#include "llmc/config.h"
#include "llmc/error.h"
#include "llmc/file_util.h"
#include "llmc/layout.h"
#include "llmc/grad_sink.h"
#include "llmc/model.h"
#include "llmc/models.h"
#include "llmc/model_file.h"
#include "llmc/zero_optimizer.h"
#include "llmc/zero.h"
#include "test/fixtures/testing.h"

#include "llmc/main_backend.h"
using Backend = llmc::MainBackend;
constexpr bool kBf16 = LLMC_MAIN_CUDA;  // the CUDA backend's activations and parameters are bf16
#include "test/fixtures/speedrun_model_check.h"  // after the backend: its strategies need the backend's comm

using llmc::fail;

// ---- the reference file (docs/reference.md) ----------------------------------------------------------------------
constexpr int32_t REF_MAGIC = 20240622;
constexpr int32_t REF_VERSION = 1;

struct Reference {
    llmc::ModelConfig cfg;
    size_t B = 0, T = 0, steps = 0, num_params = 0;
    uint64_t seed = 0;
    float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, grad_clip = 0;
    std::vector<int> inputs, targets;             // B*T each
    std::vector<float> logits;                    // B*T*Vp
    float loss = 0;
    std::vector<float> grads;                     // num_params, ParamLayout order
    std::vector<float> step_losses, grad_norms;   // steps each
    std::vector<float> final_params;              // num_params
};

static Reference read_reference(const std::string& path) {
    const size_t file_bytes = llmc::file_size_or_fail(path);
    if (file_bytes < 256 * sizeof(int32_t))
        fail("%s: %zu bytes is too short for a reference file header (1024 bytes)", path.c_str(), file_bytes);
    FILE* f = llmc::open_or_fail(path, "rb");
    Reference r;
    try {
        int32_t h[256];
        llmc::read_exact(f, h, sizeof h, path);
        if (h[0] != REF_MAGIC)
            fail("%s: bad magic number %d (expected %d for a reference file)", path.c_str(), h[0], REF_MAGIC);
        if (h[1] != REF_VERSION)
            fail("%s: unsupported reference file version %d (expected %d)", path.c_str(), h[1], REF_VERSION);
        for (int i = 2; i <= 11; i++)
            if (h[i] <= 0) fail("%s: header field %d is %d (expected a positive size)", path.c_str(), i, h[i]);
        r.B = (size_t)h[2], r.T = (size_t)h[3];
        r.cfg.max_seq_len = (size_t)h[4], r.cfg.vocab_size = (size_t)h[5], r.cfg.num_layers = (size_t)h[6];
        r.cfg.num_heads = (size_t)h[7], r.cfg.channels = (size_t)h[8], r.cfg.padded_vocab_size = (size_t)h[9];
        r.steps = (size_t)h[10], r.num_params = (size_t)h[11], r.seed = (uint64_t)(uint32_t)h[12];
        float hp[6];
        std::memcpy(hp, h + 16, sizeof hp);  // float32 bit patterns in slots 16..21
        r.lr = hp[0], r.beta1 = hp[1], r.beta2 = hp[2], r.eps = hp[3], r.weight_decay = hp[4], r.grad_clip = hp[5];
        try {
            llmc::validate_config(r.cfg);
        } catch (const std::exception& e) {
            fail("%s: %s", path.c_str(), e.what());
        }
        if (r.num_params != llmc::ParamLayout(r.cfg).total)
            fail("%s: header says %zu parameters but its shape (%s) has %zu", path.c_str(), r.num_params,
                 r.cfg.describe().c_str(), llmc::ParamLayout(r.cfg).total);
        const size_t N = r.B * r.T;
        const size_t want = sizeof h + 4 * (2 * N + N * r.cfg.padded_vocab_size + 1 + 2 * r.num_params + 2 * r.steps);
        if (file_bytes != want)
            fail("%s: file is %zu bytes but its header implies %zu bytes%s", path.c_str(), file_bytes, want,
                 file_bytes < want ? " (truncated?)" : "");
        auto read = [&](auto& v, size_t n) {
            v.resize(n);
            llmc::read_exact(f, v.data(), n * sizeof(v[0]), path);
        };
        read(r.inputs, N);
        read(r.targets, N);
        read(r.logits, N * r.cfg.padded_vocab_size);
        llmc::read_exact(f, &r.loss, sizeof(float), path);
        read(r.grads, r.num_params);
        read(r.step_losses, r.steps);
        read(r.grad_norms, r.steps);
        read(r.final_params, r.num_params);
        std::fclose(f);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    return r;
}

// ---- llm.c's debug state (docs/formats.md) ------------------------------------------------------------------------
// What llm.c's train_gpt2.py writes for its own test (gpt2_124M_debug_state.bin): the batch, the logits of its V real
// columns, the loss and every gradient (wte with its Vp padded rows), for the model in the accompanying model file.
// It holds no optimizer steps.
constexpr int32_t LLMC_STATE_MAGIC = 20240327;
constexpr int32_t LLMC_STATE_VERSION = 2;

static Reference read_llmc_debug_state(const std::string& path, const llmc::ModelConfig& cfg) {
    const size_t file_bytes = llmc::file_size_or_fail(path);
    if (file_bytes < 256 * sizeof(int32_t))
        fail("%s: %zu bytes is too short for a debug state header (1024 bytes)", path.c_str(), file_bytes);
    FILE* f = llmc::open_or_fail(path, "rb");
    Reference r;
    r.cfg = cfg, r.num_params = llmc::ParamLayout(cfg).total;
    try {
        int32_t h[256];
        llmc::read_exact(f, h, sizeof h, path);
        if (h[0] != LLMC_STATE_MAGIC) fail("%s: bad magic number %d (expected %d)", path.c_str(), h[0], LLMC_STATE_MAGIC);
        if (h[1] != LLMC_STATE_VERSION)
            fail("%s: llm.c debug state version %d (expected %d)", path.c_str(), h[1], LLMC_STATE_VERSION);
        if (h[2] <= 0 || h[3] <= 0 || (size_t)h[3] > cfg.max_seq_len)
            fail("%s: B=%d T=%d (expected B > 0 and 0 < T <= maxT = %zu)", path.c_str(), h[2], h[3], cfg.max_seq_len);
        r.B = (size_t)h[2], r.T = (size_t)h[3];
        const size_t N = r.B * r.T, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
        const size_t want = sizeof h + 4 * (2 * N + N * V + 1 + r.num_params);
        if (file_bytes != want)
            fail("%s: file is %zu bytes, but B=%zu T=%zu and the model %s imply %zu (another model's state%s?)",
                 path.c_str(), file_bytes, r.B, r.T, cfg.describe().c_str(), want, file_bytes < want ? ", or truncated" : "");
        r.inputs.resize(N), r.targets.resize(N), r.grads.resize(r.num_params);
        llmc::read_exact(f, r.inputs.data(), N * 4, path);
        llmc::read_exact(f, r.targets.data(), N * 4, path);
        std::vector<float> rows(N * V);
        llmc::read_exact(f, rows.data(), rows.size() * 4, path);
        r.logits.assign(N * Vp, 0.0f);  // the padded columns: wte's rows there are zero, so are their logits
        for (size_t i = 0; i < N; i++) std::memcpy(&r.logits[i * Vp], &rows[i * V], V * 4);
        llmc::read_exact(f, &r.loss, 4, path);
        llmc::read_exact(f, r.grads.data(), r.num_params * 4, path);
        std::fclose(f);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    return r;
}

// The file's first int32: which of the two formats it is.
static int32_t magic_of(const std::string& path) {
    FILE* f = llmc::open_or_fail(path, "rb");
    int32_t magic = 0;
    const bool got = std::fread(&magic, 4, 1, f) == 1;
    std::fclose(f);
    if (!got) fail("%s: empty file (expected a reference or an llm.c debug state)", path.c_str());
    return magic;
}

// Every input and target a token id of the model.
static void check_tokens(const Reference& r, const std::string& path) {
    for (size_t i = 0; i < r.inputs.size(); i++)
        if (r.inputs[i] < 0 || r.targets[i] < 0 || (size_t)r.inputs[i] >= r.cfg.vocab_size ||
            (size_t)r.targets[i] >= r.cfg.vocab_size)
            fail("%s: token %zu of the batch (input %d, target %d) is outside the vocabulary [0, %zu)", path.c_str(), i,
                 r.inputs[i], r.targets[i], r.cfg.vocab_size);
}

// ---- tolerances ------------------------------------------------------------------------------------------------
// Every comparison is elementwise: |got - want| <= rtol * |want| + atol, with atol a fraction of the largest |want|
// of the tensor (its scale). An absolute floor is needed because the reference values are sums of many terms of both
// signs: a sum that cancels to a small number carries the rounding error of its large terms, so its own relative
// error is unbounded while its error relative to the tensor's scale is not.
struct Tolerances {
    double logits_rtol, logits_atol;  // atol in units of max|logit|
    double loss_rtol;
    double loss_per_logit_err;        // plus this many times the observed max |logit error| (see bf16_tolerances)
    double grad_rtol, grad_atol;      // atol in units of max|grad| of each tensor
    double step_loss_rtol, norm_rtol;
    // Parameters after training (check_final_params): every element within param_rtol |want| + param_loose lr steps;
    // all but param_outlier_fraction of each tensor's elements within param_rtol |want| + param_atol_tight lr.
    double param_rtol, param_atol_tight, param_outlier_fraction, param_loose;
};

// fp32 (CpuBackend). PyTorch and the CPU backend both round every operation to fp32 (unit roundoff 2^-24 = 6e-8)
// but sum in different orders (BLAS blocking over C and 4C, OpenMP chunks over B*T, the loss mean over B*T). Each
// result is then off by a few units of 6e-8 times the magnitude of the terms it sums, amplified mildly through the
// depth. Measured with gpt2_reference.py --float64 (the fp32 run against a float64 run of the same model) on the
// test's shapes, the fp32 noise is at most 3.1e-7 of max|logit|, 8.7e-7 of each gradient tensor's max and 1.6e-7
// relative on the step losses. Two fp32 implementations differ by up to about twice that; 1e-5 leaves a 5-15x
// margin, while a wrong op (a dropped bias, a wrong scale, a transposed weight, erf GELU instead of tanh) is off by
// 1e-4 or more. The gradient norms of steps 2..10 also carry the parameters' drift (below): up to 4e-6 relative in
// fp32 vs float64, so 3e-5 (an eps misplaced in AdamW is off by 3e-4).
//
// After 10 AdamW steps most parameters still agree to ~1e-7 (1e-4 of lr): Adam's update is a smooth function of
// gradients far above eps. But Adam divides each gradient element by its own running RMS, so an element whose gradient
// is at the rounding-noise level moves by up to lr per step in a direction set by the noise. Such elements exist: the
// key bias (qkvb rows C..2C of each layer) has an exact gradient of zero (adding a constant vector to every key shifts
// all of a query's scores by the same amount, which softmax ignores), so its fp32 gradient is pure noise; and a few
// elements of the large matrices have gradients ~1e-8 that cross zero. Hence: every element within 2 lr per step (by
// Cauchy-Schwarz, |mhat| / sqrt(vhat) <= 1.01 for beta1 = 0.9, beta2 = 0.95 and t <= 10, so one step moves a parameter
// by at most ~lr and two runs differ by at most 2 lr per step), the key bias held to that alone, and in each tensor at most 0.1% of the other elements
// (observed: at most 7 of 110592 in fp32 vs float64) outside the tight bound rtol 1e-5 + 1e-3 lr. A real optimizer
// bug (weight decay on a bias or layernorm weight, wrong bias correction, no clipping) moves every element of a
// tensor by lr * wd * |p| * steps or more, >= 2e-5 (2e-2 lr) on the perturbed reference's biases.
constexpr Tolerances kFp32Tol{1e-5, 1e-5, 1e-5, 0.0, 1e-5, 1e-5, 1e-5, 3e-5, 1e-5, 1e-3, 1e-3, 2.0};

// bf16 (CudaBackend): parameters and activations are bf16, unit roundoff u = 2^-8 = 3.9e-3 (8 significand bits), and
// every stored activation is one rounding. Along the forward path a logit passes through ~6 roundings per layer
// (ln1, qkv, attention output, attproj, the residual, ln2, fc, gelu, fcproj, the residual: some are fused) plus the
// embedding, lnf, the weights and the logits buffer: D = 6L + 4 independent roundings of relative size <= u give an
// expected relative error ~ s = u sqrt(D), relative to the scale of the values being summed (max|logit|), not to each
// logit (which can cancel to 0). Gradients pass through as many roundings again (activation gradients are bf16):
// sqrt(2) s. gpt2_reference.py --bf16-noise emulates exactly this rounding (round to nearest at every stored
// activation, activation gradient and parameter; fp32 master weights) and measures, on L = 1..3: logits 0.36-0.43 s,
// gradients 0.33-0.36 sqrt(2) s of the tensor's max, step losses 0.03-0.04 s relative, and gradient norms
// 0.18-0.82 sqrt(2) s (steps 2..10 add the drift of the parameters to the gradients' own error).
// Tolerances: logits s, gradients sqrt(2) s, norms 2 sqrt(2) s: 2.3x or more above the emulated error, which a real
// kernel bug (a wrong index, a missing barrier, a dropped term: errors of order 1) exceeds by far.
// The loss: the cross-entropy's gradient with respect to one row of logits, softmax - onehot, has L1 norm <= 2, so
// |loss error| <= 2 max|logit error| (+ fp32 rounding): a bound computed from the run itself. The step losses are
// means over N positions whose errors partly cancel: s / 8 (3.5x above the emulated error).
// Parameters after training: the bf16 copy of the master weights is off by up to one ulp (2u relative; stochastic
// rounding), and Adam turns gradient noise of relative size ~sqrt(2) s into update differences of up to 2 lr per
// step (see kFp32Tol; emulated: up to 0.73 lr steps, rounding included): every element within 2u |want| + 2 lr steps.
// That bound only catches gross errors (NaN, a wrong learning rate, a lost update); the optimizer's arithmetic is held
// tight by the fp32 run of the same code path, and here by the step losses and norms.
static Tolerances bf16_tolerances(size_t L) {
    const double u = 1.0 / 256.0, s = u * std::sqrt(6.0 * (double)L + 4.0), s2 = std::sqrt(2.0) * s;
    return Tolerances{s, s, 1e-5, 2.0, s2, s2, s / 8, 2 * s2, 2 * u, 0.0, 0.0, 2.0};
}

// ---- comparisons -----------------------------------------------------------------------------------------------
struct Errors {
    double max_abs = 0, max_rel = 0;  // max |d|, and max |d|/|want| over elements with |want| >= 0.1 max|want|
    double used = 0;                  // max over elements of |d| / (rtol |want| + atol): pass iff <= 1
    size_t worst = 0, bad = 0;
};

static double max_abs_of(const float* x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = std::max(m, (double)std::fabs(x[i]));
    return m;
}

static Errors measure(const float* got, const float* want, size_t n, double rtol, double atol) {
    Errors e;
    const double rel_floor = 0.1 * max_abs_of(want, n);
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i], d = std::fabs(g - w);
        if (std::isnan(d)) d = INFINITY;
        double used = d / (rtol * std::fabs(w) + atol);
        if (!(used <= 1.0)) e.bad++;
        if (!(used <= e.used)) e.used = used, e.worst = i;
        e.max_abs = std::max(e.max_abs, d);
        if (std::fabs(w) >= rel_floor && w != 0) e.max_rel = std::max(e.max_rel, d / std::fabs(w));
    }
    return e;
}

// PASS/FAIL line: "PASS <name>: max abs err A, max rel err R, 23% of tolerance (rtol X, atol Y)"; the relative
// error is taken over the elements with |want| >= 0.1 max|want| (below that, atol is what applies).
static bool expect_close(const std::string& name, const float* got, const float* want, size_t n, double rtol,
                         double atol) {
    Errors e = measure(got, want, n, rtol, atol);
    char stats[256];
    std::snprintf(stats, sizeof stats, "max abs err %.3g, max rel err %.3g, %.0f%% of tolerance (rtol %.3g, atol %.3g)",
                  e.max_abs, e.max_rel, 100 * e.used, rtol, atol);
    if (e.bad == 0) {
        testing::pass(name + ": " + stats);
        return true;
    }
    testing::fail(name, "%zu of %zu elements outside; worst at %zu: got %.9g want %.9g; %s", e.bad, n, e.worst,
                  (double)got[e.worst], (double)want[e.worst], stats);
    return false;
}

// Parameters after training, per tensor: every element within param_rtol |want| + param_loose lr steps (the loose
// bound); unless param_atol_tight is 0, at most param_outlier_fraction of the elements outside param_rtol |want| +
// param_atol_tight lr (the tight bound), the key bias not counted (its gradient is exactly zero in exact arithmetic,
// see kFp32Tol, so only the loose bound applies to it).
static void check_final_params(const Reference& ref, const std::vector<float>& got, const Tolerances& tol) {
    const llmc::ParamLayout layout(ref.cfg);
    const size_t C = ref.cfg.channels;
    const double loose = tol.param_loose * ref.lr * (double)ref.steps, tight = tol.param_atol_tight * ref.lr;
    for (int t = 0; t < layout.num_tensors(); t++) {
        const size_t off = layout.offsets[t], n = layout.sizes[t];
        const float* g = got.data() + off;
        const float* w = ref.final_params.data() + off;
        const std::string name = "params after " + std::to_string(ref.steps) + " steps: " + layout.name(t);
        Errors all = measure(g, w, n, tol.param_rtol, loose);
        char stats[400];
        int len = std::snprintf(stats, sizeof stats, "max abs err %.3g = %.2g lr*steps (loose bound rtol %.3g + %.3g)",
                                all.max_abs, all.max_abs / (ref.lr * (double)ref.steps), tol.param_rtol, loose);
        size_t outliers = 0, allowed = 0;
        if (tol.param_atol_tight > 0) {
            size_t counted = 0;
            for (size_t i = 0; i < n; i++) {
                if (t == llmc::QKVB && i % (3 * C) >= C && i % (3 * C) < 2 * C) continue;  // key bias
                counted++;
                double d = std::fabs((double)g[i] - (double)w[i]);
                if (!(d <= tol.param_rtol * std::fabs((double)w[i]) + tight)) outliers++;
            }
            allowed = (size_t)(tol.param_outlier_fraction * (double)counted);
            std::snprintf(stats + len, sizeof stats - (size_t)len,
                          "; %zu of %zu%s outside the tight bound rtol %.3g + atol %.3g (allowed %zu)", outliers,
                          counted, t == llmc::QKVB ? " (key bias not counted)" : "", tol.param_rtol, tight, allowed);
        }
        if (all.bad == 0 && outliers <= allowed) testing::pass(name + ": " + stats);
        else testing::fail(name, "%s", stats);
    }
}

// ---- the test --------------------------------------------------------------------------------------------------
// ref_path: a reference file (docs/reference.md) or llm.c's debug state, told apart by their magic numbers.
static int run(const std::string& model_path, const std::string& ref_path) {
    llmc::ModelFile mf = llmc::read_model_file(model_path);
    const bool llmc_state = magic_of(ref_path) == LLMC_STATE_MAGIC;
    Reference ref = llmc_state ? read_llmc_debug_state(ref_path, mf.config) : read_reference(ref_path);
    if (!(mf.config == ref.cfg))
        fail("%s (%s) and %s (%s) describe different models", model_path.c_str(), mf.config.describe().c_str(),
             ref_path.c_str(), ref.cfg.describe().c_str());
    if (ref.T > ref.cfg.max_seq_len) fail("%s: T=%zu exceeds maxT=%zu", ref_path.c_str(), ref.T, ref.cfg.max_seq_len);
    check_tokens(ref, ref_path);
    const size_t B = ref.B, T = ref.T, N = B * T, Vp = ref.cfg.padded_vocab_size;
    const Tolerances tol = kBf16 ? bf16_tolerances(ref.cfg.num_layers) : kFp32Tol;
    std::printf("# %s backend, %s, B=%zu T=%zu, %zu parameters, %zu AdamW steps (lr %g, wd %g, clip %g)\n",
                Backend::name, ref.cfg.describe().c_str(), B, T, ref.num_params, ref.steps, ref.lr,
                ref.weight_decay, ref.grad_clip);

    Backend be{llmc::BackendOptions()};
    llmc::ModelOptions mo;
    mo.pad_to = llmc::zero_pad_multiple(1);  // the optimizer's flat shards (one rank)
    std::unique_ptr<llmc::Model<Backend>> created = llmc::create_model(be, ref.cfg, B, T, mo);
    llmc::Model<Backend>& model = *created;
    model.set_params(mf.params);

    // Forward only: the logits survive (grad_scale 0).
    model.forward(ref.inputs.data(), ref.targets.data(), B, T, 0.0f);
    std::vector<float> logits = model.get_logits();
    expect_close("logits", logits.data(), ref.logits.data(), N * Vp, tol.logits_rtol,
                 tol.logits_atol * max_abs_of(ref.logits.data(), ref.logits.size()));
    // The loss: relative, plus (bf16) the bound implied by the logits' own error (see bf16_tolerances).
    float loss = model.mean_loss();
    const double logit_err = measure(logits.data(), ref.logits.data(), N * Vp, 1.0, 1.0).max_abs;
    expect_close("loss", &loss, &ref.loss, 1, tol.loss_rtol, tol.loss_per_logit_err * logit_err);

    // Forward + backward: every gradient tensor.
    llmc::FlatGrads<Backend> sink(be, model.layout(), model.padded_params());
    model.forward(ref.inputs.data(), ref.targets.data(), B, T, 1.0f);
    model.backward(sink);
    std::vector<float> grads = sink.download();
    const llmc::ParamLayout& layout = model.layout();
    for (int t = 0; t < layout.num_tensors(); t++) {
        const float* want = ref.grads.data() + layout.offsets[t];
        const size_t n = layout.sizes[t];
        expect_close(std::string("grad ") + layout.name(t), grads.data() + layout.offsets[t], want, n,
                     tol.grad_rtol, tol.grad_atol * max_abs_of(want, n));
    }

    if (ref.steps == 0) {
        testing::skip("AdamW steps", ref_path + " is llm.c's debug state, which holds no optimizer steps");
        return testing::finish();
    }
    // Training on the same batch: AdamW with the reference's hyperparameters, ZeRO stage 0, one process.
    auto comm = llmc::make_single_comm();
    llmc::OptimConfig oc;
    oc.beta1 = ref.beta1, oc.beta2 = ref.beta2, oc.eps = ref.eps, oc.weight_decay = ref.weight_decay;
    oc.grad_clip = ref.grad_clip;
    llmc::ZeroOptimizer<Backend> opt(be, model, *comm, oc, 0, ref.seed);
    std::vector<float> losses(ref.steps), norms(ref.steps);
    for (size_t s = 0; s < ref.steps; s++) {
        model.forward(ref.inputs.data(), ref.targets.data(), B, T, 1.0f);
        losses[s] = model.mean_loss();
        model.backward(opt.grad_sink(true));
        opt.end_micro_step(true);
        norms[s] = opt.step(ref.lr, (int)s + 1);
        std::printf("# step %2zu: loss %.7f (reference %.7f), grad norm %.7f (reference %.7f)\n", s + 1, losses[s],
                    ref.step_losses[s], norms[s], ref.grad_norms[s]);
    }
    expect_close("step losses", losses.data(), ref.step_losses.data(), ref.steps, tol.step_loss_rtol, 0.0);
    expect_close("grad norms", norms.data(), ref.grad_norms.data(), ref.steps, tol.norm_rtol, 0.0);
    check_final_params(ref, model.get_params(), tol);
#if LLMC_MAIN_CUDA
    // Alignment by construction (docs/cuda.md, "Vector access"): with C and Vp multiples of 8 and B T of 4 (the loss
    // sum), every memory-bound kernel of the model, the optimizer and the casts took its 16-byte vector path.
    if (ref.cfg.channels % 8 == 0 && Vp % 8 == 0 && N % 4 == 0)
        testing::check("every memory-bound op took the 16-byte vector path", be.scalar_path_calls() == 0,
                       "%zu of %zu op calls took the scalar path", be.scalar_path_calls(),
                       be.scalar_path_calls() + be.vector_path_calls());
#endif
    return testing::finish();
}

int main(int argc, char** argv) {
    cxxopts::Options opts(argv[0], "Check the model, its gradients and AdamW against the PyTorch reference "
                                   "(dev/reference/gpt2_reference.py; format in docs/reference.md).");
    opts.add_options()("ref", "reference directory holding model.bin and reference.bin (a reference file, or llm.c's "
                              "debug state)", cxxopts::value<std::string>())
        ("model", "with --llmc-debug-state: the model file (llm.c's gpt2_124M.bin)", cxxopts::value<std::string>())
        ("llmc-debug-state", "llm.c's debug state for --model (its gpt2_124M_debug_state.bin): the logits, the loss "
                             "and every gradient are checked", cxxopts::value<std::string>())
        ("speedrun-ref", "the speedrun architecture and optimizer against dev/reference/speedrun_reference.py's "
                         "tensor file (test/fixtures/speedrun_model_check.h)", cxxopts::value<std::string>())
        ("h,help", "print this help");
    try {
        cxxopts::ParseResult r = opts.parse(argc, argv);
        if (r.count("help")) {
            std::printf("%s\n", opts.help().c_str());
            return 0;
        }
        if (!r.unmatched().empty()) fail("unexpected argument '%s' (usage: --ref DIR)", r.unmatched()[0].c_str());
        if (r.count("speedrun-ref")) return speedrun_check::run<Backend>(r["speedrun-ref"].as<std::string>(), kBf16);
        if (r.count("llmc-debug-state") || r.count("model")) {
            if (!r.count("llmc-debug-state") || !r.count("model") || r.count("ref"))
                fail("--llmc-debug-state FILE goes with --model FILE (and without --ref)");
            return run(r["model"].as<std::string>(), r["llmc-debug-state"].as<std::string>());
        }
        if (!r.count("ref")) fail("missing --ref DIR (the directory written by dev/reference/gpt2_reference.py)");
        const std::string dir = r["ref"].as<std::string>();
        return run(dir + "/model.bin", dir + "/reference.bin");
    } catch (const cxxopts::exceptions::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
    }
    return 1;
}
