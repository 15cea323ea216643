// The chunked classifier (llmc/model.h, classifier_forward): a training step with the classifier split into chunks of
// rows gives the same losses and gradients as with one chunk, on the CUDA backend under the simulator and on the CPU
// backend, for chunk sizes that divide B*T and that do not (odd row counts included), and a second run gives the
// same bits (deterministic).
//
// Why the tolerances are what they are: every row's logits, loss, dlogits and dlnf are computed from that row alone
// (the lm_head GEMM, the fused classifier and the dX GEMM are row-wise), so the losses and every gradient that flows
// through dlnf (all but wte's) can differ only where a GEMM's blocking depends on the row count M. The simulator's
// cuBLASLt sums each dot product in a fixed order whatever M, so the simulated CUDA backend is compared bit for bit.
// OpenBLAS blocks by M: there the same sums are formed in another fp32 order, |difference| <= K * 2^-24 * sum|terms|
// per GEMM with K <= max(4C, Vp) = 128 here (8e-6 of the magnitudes), a few GEMMs deep: each CPU tensor is compared
// within 1e-4 of its largest magnitude, 40x inside bf16's resolution 2^-8 (what a real GPU's cuBLASLt, whose tiling
// may depend on M, can change by one bf16 rounding of a logit or dlnf). The wte gradient is the fp32 sum over chunks
// (one GEMM per chunk, accumulated in chunk order) instead of one GEMM over all N rows: the same N products per
// element (bf16 x bf16 products are exact in fp32) added in another order, so |difference| <= N * 2^-24 * N *
// max|term|; with N <= 15 rows that is below 1.4e-5 * max|term|, and the test allows 2e-5 * N of the largest wte
// gradient magnitude on both backends. A chunk that lost or doubled rows fails all of these by orders of magnitude.
#include <cmath>
#include <string>
#include <vector>

#include "llmc/config.h"
#include "llmc/cpu/cpu_backend.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/error.h"
#include "llmc/gpt2.h"
#include "llmc/grad_sink.h"
#include "test/fixtures/testing.h"

namespace {

struct StepResult {
    std::vector<float> losses, grads, logits_row;
};

template <class Backend>
StepResult train_step(const llmc::ModelConfig& cfg, size_t B, size_t T, size_t chunk_rows) {
    Backend be{llmc::BackendOptions()};
    llmc::ModelOptions mo;
    mo.classifier_chunk_rows = chunk_rows;
    llmc::Gpt2<Backend> model(be, cfg, B, T, mo);
    model.init(11);
    std::vector<int> in(B * T), tg(B * T);
    for (size_t i = 0; i < in.size(); i++) {
        in[i] = (int)((i * 13 + 5) % cfg.vocab_size);
        tg[i] = (int)((i * 29 + 7 + i / 4) % cfg.vocab_size);
    }
    llmc::FlatGrads<Backend> grads(be, model.layout(), model.padded_params());
    StepResult r;
    model.forward(in.data(), tg.data(), B, T, 1.0f);
    r.losses = model.get_losses();
    model.backward(grads);
    r.grads = grads.download();
    model.forward(in.data(), nullptr, 1, T, 0.0f);  // one sequence without targets keeps its logits (sampling)
    r.logits_row = model.get_logits_row(0, T - 1);
    return r;
}

float max_abs(const std::vector<float>& v, size_t begin, size_t end) {
    float m = 0.0f;
    for (size_t i = begin; i < end; i++) m = std::fmax(m, std::fabs(v[i]));
    return m;
}

// Elements of `c` farther from `ref` than tol x (the largest |ref| of their tensor); wte excluded (checked apart).
size_t gradients_apart(const std::vector<float>& c, const std::vector<float>& ref, const llmc::ParamLayout& layout,
                       float tol, size_t* first) {
    size_t bad = 0;
    for (int t = 0; t < layout.num_tensors(); t++) {
        if (t == llmc::WTE) continue;
        const size_t b = layout.offsets[t], e = b + layout.sizes[t];
        const float limit = tol * max_abs(ref, b, e);
        for (size_t i = b; i < e; i++)
            if (!(std::fabs(c[i] - ref[i]) <= limit) && bad++ == 0) *first = i;
    }
    return bad;
}

// bitwise: the backend's GEMMs sum in an order independent of the row count (the simulator), else 1e-4 (header).
template <class Backend>
void compare_chunks(const char* backend, bool bitwise, const llmc::ModelConfig& cfg, size_t B, size_t T) {
    const size_t N = B * T;
    const StepResult one = train_step<Backend>(cfg, B, T, N);
    const llmc::ParamLayout layout(cfg);
    const size_t wte0 = layout.offsets[llmc::WTE], wte1 = wte0 + layout.sizes[llmc::WTE];
    const float wte_tol = 2e-5f * (float)N * max_abs(one.grads, wte0, wte1);
    const float tol = bitwise ? 0.0f : 1e-4f;
    for (size_t chunk : {T, T + 2, N - 1}) {  // divides N; leaves a remainder; two chunks, the last of one row
        const StepResult c = train_step<Backend>(cfg, B, T, chunk);
        const std::string name = std::string(backend) + " B=" + std::to_string(B) + " T=" + std::to_string(T) +
                                 " chunks of " + std::to_string(chunk) + " rows: ";
        float worst_loss = 0.0f, worst_wte = 0.0f;
        for (size_t i = 0; i < N; i++) worst_loss = std::fmax(worst_loss, std::fabs(c.losses[i] - one.losses[i]));
        for (size_t i = wte0; i < wte1; i++) worst_wte = std::fmax(worst_wte, std::fabs(c.grads[i] - one.grads[i]));
        testing::check(name + (bitwise ? "the losses are those of one chunk, bit for bit"
                                        : "the losses are those of one chunk within 1e-4 of their largest"),
                       worst_loss <= tol * max_abs(one.losses, 0, N), "max |difference| %g", worst_loss);
        size_t first = 0;
        const size_t bad = gradients_apart(c.grads, one.grads, layout, tol, &first);
        testing::check(name + (bitwise ? "every gradient but wte's is that of one chunk, bit for bit"
                                       : "every gradient but wte's is that of one chunk within 1e-4 of its tensor"),
                       bad == 0, "%zu differ, the first at flat index %zu (%.9g vs %.9g)", bad, first,
                       bad ? c.grads[first] : 0.0, bad ? one.grads[first] : 0.0);
        testing::check(name + "the wte gradient is within the fp32 reordering bound", worst_wte <= wte_tol,
                       "max |difference| %g > %g", worst_wte, wte_tol);
        testing::check(name + "a forward without targets keeps the logits", c.logits_row == one.logits_row,
                       "the last position's logits differ");
        const StepResult again = train_step<Backend>(cfg, B, T, chunk);
        testing::check(name + "deterministic (a second run gives the same losses and gradients)",
                       again.losses == c.losses && again.grads == c.grads, "the second run differs");
    }
}

void refuses_logits_it_does_not_keep() {
    llmc::ModelConfig cfg;
    llmc::parse_model_descriptor("L=1,NH=2,C=32,T=8,V=40", &cfg);
    llmc::CpuBackend be{llmc::BackendOptions()};
    llmc::ModelOptions mo;
    mo.classifier_chunk_rows = 8;
    llmc::Gpt2<llmc::CpuBackend> model(be, cfg, 3, 8, mo);
    model.init(1);
    std::vector<int> tok(24, 3);
    std::string msg;
    try {
        model.forward(tok.data(), nullptr, 3, 8, 0.0f);
    } catch (const llmc::Error& e) {
        msg = e.what();
    }
    testing::check("a forward without targets over more rows than one chunk is refused with a message",
                   msg.find("at most 8 rows") != std::string::npos, "got '%s'", msg.c_str());
    model.forward(tok.data(), tok.data(), 3, 8, 0.0f);
    msg.clear();
    try {
        model.get_logits();
    } catch (const llmc::Error& e) {
        msg = e.what();
    }
    testing::check("get_logits after a forward of several chunks is refused with a message",
                   msg.find("more than one classifier chunk") != std::string::npos, "got '%s'", msg.c_str());
}

}  // namespace

int main() {
    try {
        llmc::ModelConfig cfg;
        // Vp = 72 (a multiple of 8: the classifier's vector path) and V = 67 real columns.
        if (!llmc::parse_model_descriptor("L=1,NH=2,C=32,T=8,V=67", &cfg)) llmc::fail("bad test descriptor");
        compare_chunks<llmc::CudaBackend>("cuda (simulated)", true, cfg, 3, 5);
        compare_chunks<llmc::CpuBackend>("cpu", false, cfg, 3, 5);
        compare_chunks<llmc::CpuBackend>("cpu", false, cfg, 2, 7);
        refuses_logits_it_does_not_keep();
    } catch (const llmc::Error& e) {
        testing::fail("chunked classifier", "%s", e.what());
    }
    return testing::finish();
}
