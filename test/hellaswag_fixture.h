// The model and the examples shared by the HellaSwag tests (one process: test_hellaswag.cpp; mpirun:
// test_hellaswag_mpi.cpp): a tiny GPT-2 with weights large enough that completions score clearly apart, and examples
// whose labels come from an independent scoring of every completion (one forward per completion, log-softmax of the
// logits on the host): the right completion for the even examples, a wrong one for the odd ones.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/hellaswag.h"
#include "llmc/model.h"
#include "llmc/rng.h"

namespace hellaswag_fixture {

using namespace llmc;

// Mean loss of completion c computed directly: the whole (truncated) row, B = 1, logits -> log-softmax on the host.
inline double direct_score(GPT2<CpuBackend>& model, const McExample& ex, size_t c) {
    const size_t T = model.max_seq_len(), V = model.config().vocab_size, Vp = model.config().padded_vocab_size;
    std::vector<int> seq(ex.context);
    seq.insert(seq.end(), ex.completions[c].begin(), ex.completions[c].end());
    if (seq.size() > T + 1) seq.erase(seq.begin(), seq.end() - (std::ptrdiff_t)(T + 1));
    const size_t len = seq.size() - 1, ncomp = ex.completions[c].size();
    model.forward(seq.data(), nullptr, 1, len, 0.0f);
    std::vector<float> logits = model.get_logits();
    double sum = 0;
    for (size_t t = len - ncomp; t < len; t++) {
        const float* row = logits.data() + t * Vp;
        double mx = row[0], z = 0;
        for (size_t v = 1; v < V; v++) mx = std::max(mx, (double)row[v]);
        for (size_t v = 0; v < V; v++) z += std::exp((double)row[v] - mx);
        sum += -((double)row[seq[t + 1]] - mx - std::log(z));
    }
    return sum / (double)ncomp;
}

// L=2, C=32, T=16, V=50, B = 3 (four completions need two batches), weights GPT-2-initialised plus N(0, 0.1).
inline std::unique_ptr<GPT2<CpuBackend>> make_model(CpuBackend& be) {
    GPT2Config cfg;
    parse_model_descriptor("L=2,NH=2,C=32,T=16,V=50", &cfg);
    auto model = std::make_unique<GPT2<CpuBackend>>(be, cfg, 3, 16);
    model->init_gpt2(3);
    std::vector<float> p = model->get_params();
    NormalRng nr(5, 1);
    for (float& x : p) x += 0.1f * nr.next();
    model->set_params(p);
    return model;
}

// `count` examples with 4 completions; every third context is longer than T (left-truncated). Example i is right
// (its label is the best-scoring completion) when i is even, so the accuracy is exactly ceil(count / 2) / count.
inline std::vector<McExample> make_examples(GPT2<CpuBackend>& model, size_t count) {
    const size_t V = model.config().vocab_size;
    Rng rng(9);
    std::vector<McExample> ex(count);
    for (size_t i = 0; i < ex.size(); i++) {
        ex[i].index = (int)i;
        const size_t nctx = i % 3 == 0 ? 14 + rng.below(10) : 1 + rng.below(8);
        for (size_t k = 0; k < nctx; k++) ex[i].context.push_back((int)rng.below(V));
        for (int c = 0; c < 4; c++) {
            ex[i].completions.emplace_back();
            for (size_t k = 0, n = 1 + rng.below(6); k < n; k++) ex[i].completions.back().push_back((int)rng.below(V));
        }
        double best = 1e30;
        int arg = 0;
        for (int c = 0; c < 4; c++) {
            double s = direct_score(model, ex[i], (size_t)c);
            if (s < best) best = s, arg = c;
        }
        ex[i].label = i % 2 == 0 ? arg : (arg + 1) % 4;
    }
    return ex;
}

}  // namespace hellaswag_fixture
