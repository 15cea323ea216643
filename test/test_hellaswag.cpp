// HellaSwag evaluation (llmc/hellaswag.h): the file format round trip and its validation, and the accuracy of
// evaluate_hellaswag against an independent scoring of every completion (one forward per completion, log-softmax
// of the logits on the host). Labels are set from that independent scoring: the right one for the even examples,
// a wrong one for the odd ones, so the accuracy must be exactly 1/2, and any slip in which positions are scored,
// the batching (B = 3 < 4 completions), the padding or the left truncation of long contexts moves it.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llmc/comm.h"
#include "llmc/cpu/cpu_backend.h"
#include "llmc/hellaswag.h"
#include "llmc/model.h"
#include "llmc/rng.h"
#include "test/testing.h"

using namespace llmc;

// Mean loss of completion c computed directly: the whole (truncated) row, B = 1, logits -> log-softmax on the host.
static double direct_score(GPT2<CpuBackend>& model, const McExample& ex, size_t c) {
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

static void expect_error(const std::string& name, const std::string& path, const std::string& want) {
    try {
        read_hellaswag(path);
        testing::check(name, false, "accepted");
    } catch (const Error& e) {
        testing::check(name, std::string(e.what()).find(want) != std::string::npos, "%s", e.what());
    }
}

int main() {
    try {
        const std::string dir = "build/test-tmp/hellaswag";
        if (std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) != 0) return 1;
        GPT2Config cfg;
        parse_model_descriptor("L=2,NH=2,C=32,T=16,V=50", &cfg);
        CpuBackend be;
        GPT2<CpuBackend> model(be, cfg, 3, 16);  // B = 3: four completions need two batches
        model.init_gpt2(3);
        std::vector<float> p = model.get_params();
        NormalRng nr(5, 1);
        for (float& x : p) x += 0.1f * nr.next();  // larger weights: completions score clearly apart
        model.set_params(p);

        Rng rng(9);
        std::vector<McExample> ex(24);
        for (size_t i = 0; i < ex.size(); i++) {
            ex[i].index = (int)i;
            const size_t nctx = i % 3 == 0 ? 14 + rng.below(10) : 1 + rng.below(8);  // some longer than T
            for (size_t k = 0; k < nctx; k++) ex[i].context.push_back((int)rng.below(cfg.vocab_size));
            for (int c = 0; c < 4; c++) {
                ex[i].completions.emplace_back();
                for (size_t k = 0, n = 1 + rng.below(6); k < n; k++)
                    ex[i].completions.back().push_back((int)rng.below(cfg.vocab_size));
            }
            double best = 1e30;
            int arg = 0;
            for (int c = 0; c < 4; c++) {
                double s = direct_score(model, ex[i], (size_t)c);
                if (s < best) best = s, arg = c;
            }
            ex[i].label = i % 2 == 0 ? arg : (arg + 1) % 4;
        }
        write_hellaswag(dir + "/eval.bin", ex);
        std::vector<McExample> back = read_hellaswag(dir + "/eval.bin");
        bool same = back.size() == ex.size();
        for (size_t i = 0; same && i < ex.size(); i++)
            same = back[i].index == ex[i].index && back[i].label == ex[i].label &&
                   back[i].context == ex[i].context && back[i].completions == ex[i].completions;
        testing::check("file round trip (magic 20240522, uint16 example streams)", same);

        std::unique_ptr<Comm> comm = make_single_comm();
        const double acc = evaluate_hellaswag(model, *comm, back);
        testing::check("accuracy is exactly 1/2 (labels from an independent scoring)", acc == 0.5, "acc %g", acc);

        // Malformed files: each refused with the file and what is wrong.
        FILE* f = std::fopen((dir + "/eval.bin").c_str(), "rb");
        std::vector<unsigned char> bytes;
        for (int c; (c = std::fgetc(f)) != EOF;) bytes.push_back((unsigned char)c);
        std::fclose(f);
        auto variant = [&](const std::string& name, auto mutate) {
            std::vector<unsigned char> b = bytes;
            mutate(b);
            FILE* g = std::fopen((dir + "/" + name).c_str(), "wb");
            std::fwrite(b.data(), 1, b.size(), g);
            std::fclose(g);
            return dir + "/" + name;
        };
        expect_error("bad magic refused", variant("magic.bin", [](auto& b) { b[0] ^= 1; }), "bad magic");
        expect_error("truncated file refused", variant("trunc.bin", [](auto& b) { b.resize(b.size() - 3); }),
                     "truncated inside example 23");
        expect_error("missing delimiter refused", variant("delim.bin", [](auto& b) { b[1024] = 0; }),
                     "does not start with the delimiter");
        expect_error("label out of range refused", variant("label.bin", [](auto& b) { b[1024 + 6] = 7; }),
                     "label 7");
    } catch (const std::exception& e) {
        testing::fail("unexpected exception", "%s", e.what());
    }
    return testing::finish();
}
