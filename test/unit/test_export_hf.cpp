// HuggingFace export (llmc/export_hf.h), read back independently: a GPT-2 with perturbed weights (biases and
// layernorm weights away from 0 and 1, so a mixed-up tensor shows) is exported; test/helpers/export_hf_check.py parses the
// safetensors file by hand, runs HF's GPT-2 forward (Conv1D: x @ W + b with W stored (in, out)) in PyTorch, and
// compares its logits with this program's CPU-backend logits on a batch. Skipped (not passed) without torch.
#include <sys/stat.h>
#include <unistd.h>

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

static bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The two files are a pair: when config.json cannot be written (here its temporary name is taken by a directory, as a
// full disk would refuse it), model.safetensors is not left behind alone, and no temporary remains.
static void check_pair_written_together(const ModelConfig& cfg, const std::vector<float>& p, const std::string& dir) {
    const std::string out = dir + "/pair";
    mkdir(out.c_str(), 0755);
    const std::string blocker = out + "/config.json.tmp." + std::to_string(getpid());
    mkdir(blocker.c_str(), 0755);
    bool refused = false;
    try {
        export_hf(cfg, p, out);
    } catch (const Error&) {
        refused = true;
    }
    rmdir(blocker.c_str());
    const bool temps_left = std::system(("ls " + out + " | grep -q tmp").c_str()) == 0;
    testing::check("export_hf: config.json failing leaves no model.safetensors (and no temporary) behind",
                   refused && !exists(out + "/model.safetensors") && !exists(out + "/config.json") && !temps_left,
                   "refused %d, model.safetensors %d, temporaries %d", refused, exists(out + "/model.safetensors"),
                   temps_left);
}

// bos/eos: byte 0 for the byte-level vocabulary (prepare_data --bytes), 50256 for GPT-2's.
static void check_eot_ids() {
    ModelConfig bytes, bpe;
    parse_model_descriptor("L=1,NH=1,C=8,T=8,V=256", &bytes);
    parse_model_descriptor("L=1,NH=1,C=8,T=8,V=50257", &bpe);
    const std::string b = hf_config_json(bytes), g = hf_config_json(bpe);
    testing::check("config.json of a byte-level model: bos/eos = 0 (the byte vocabulary's EOT)",
                   b.find("\"bos_token_id\": 0,") != std::string::npos &&
                       b.find("\"eos_token_id\": 0,") != std::string::npos, "%s", b.c_str());
    testing::check("config.json of a GPT-2 vocabulary model: bos/eos = 50256",
                   g.find("\"bos_token_id\": 50256,") != std::string::npos &&
                       g.find("\"eos_token_id\": 50256,") != std::string::npos, "%s", g.c_str());
}

int main() {
    try {
        const std::string dir = testing::tmp_dir("export_hf");
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
        check_pair_written_together(cfg, p, dir);
        check_eot_ids();
    } catch (const std::exception& e) {
        testing::fail("unexpected exception", "%s", e.what());
    }
    return testing::finish();
}
