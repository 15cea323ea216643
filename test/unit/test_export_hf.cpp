// HuggingFace export (llmc/export_hf.h), read back independently: a GPT-2 with perturbed weights (biases and
// layernorm weights away from 0 and 1, so a mixed-up tensor shows) is exported; test/helpers/export_hf_check.py parses the
// safetensors file by hand, runs HF's GPT-2 forward (Conv1D: x @ W + b with W stored (in, out)) in PyTorch, and
// compares its logits with this program's CPU-backend logits on a batch. Skipped (not passed) without torch.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/export_hf.h"
#include "llmc/gpt2.h"
#include "llmc/rng.h"
#include "test/fixtures/testing.h"

using namespace llmc;

int main() {
    try {
        const std::string dir = "build/test-tmp/export_hf";
        if (std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) != 0) return 1;
        ModelConfig cfg;
        if (!parse_model_descriptor("L=2,NH=4,C=32,T=16,V=100", &cfg)) return 1;
        const size_t B = 2, T = 16;
        CpuBackend be;
        Gpt2<CpuBackend> model(be, cfg, B, T);
        model.init(7);
        std::vector<float> p = model.get_params();
        const ParamLayout& lay = model.layout();
        NormalRng rng(11, 0);
        for (int t = 0; t < lay.num_tensors(); t++) {
            if (lay.is_decayed(t)) continue;  // biases and layernorm weights
            const bool ln_weight = t == LN1W || t == LN2W || t == LNFW;
            for (size_t i = 0; i < lay.sizes[t]; i++) p[lay.offsets[t] + i] += (ln_weight ? 0.2f : 0.05f) * rng.next();
        }
        model.set_params(p);
        std::vector<int> tokens(B * T);
        Rng tr(5);
        for (int& x : tokens) x = (int)tr.below(cfg.vocab_size);
        model.forward(tokens.data(), nullptr, B, T, 0.0f);
        std::vector<float> logits = model.get_logits();

        export_hf(cfg, p, dir + "/hf");
        testing::check("hf_tensors: 2 + 12 L + 2 tensors", hf_tensors(cfg, p).size() == 2 + 12 * cfg.num_layers + 2);
        FILE* f = std::fopen((dir + "/batch.bin").c_str(), "wb");
        const int dims[4] = {(int)B, (int)T, (int)cfg.vocab_size, (int)cfg.padded_vocab_size};
        std::fwrite(dims, sizeof(int), 4, f);
        std::fwrite(tokens.data(), sizeof(int), tokens.size(), f);
        std::fwrite(logits.data(), sizeof(float), logits.size(), f);
        std::fclose(f);

        if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
            testing::skip("HF export read back in PyTorch", "/usr/bin/python3 with torch not found");
        } else {
            std::string cmd = "/usr/bin/python3 test/helpers/export_hf_check.py " + dir + "/hf " + dir + "/batch.bin";
            int rc = std::system(cmd.c_str());
            testing::check("HF export read back by hand, HF GPT-2 forward in PyTorch matches our logits", rc == 0,
                           "export_hf_check.py exited with %d", rc);
        }
    } catch (const std::exception& e) {
        testing::fail("unexpected exception", "%s", e.what());
    }
    return testing::finish();
}
