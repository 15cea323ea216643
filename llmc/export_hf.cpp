// HuggingFace export (see export_hf.h).
#include "export_hf.h"

#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "checkpoint.h"
#include "error.h"
#include "file_util.h"
#include "layout.h"
#include "tokenizer.h"

namespace llmc {

namespace {

// rows x cols (row-major) -> cols x rows
std::vector<float> transposed(const float* src, size_t rows, size_t cols) {
    std::vector<float> out(rows * cols);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) out[c * rows + r] = src[r * cols + c];
    return out;
}

}  // namespace

std::vector<HfTensor> hf_tensors(const GPT2Config& cfg, const std::vector<float>& params) {
    const ParamLayout lay(cfg);
    if (params.size() != lay.total)
        fail("export: %zu parameter values, the model %s has %zu", params.size(), cfg.describe().c_str(), lay.total);
    const size_t C = cfg.channels, L = cfg.num_layers, V = cfg.vocab_size, T = cfg.max_seq_len;
    auto at = [&](int t) { return params.data() + lay.offsets[t]; };
    auto copy = [](const float* p, size_t n) { return std::vector<float>(p, p + n); };
    std::vector<HfTensor> out;
    out.push_back({"transformer.wte.weight", {V, C}, copy(at(WTE), V * C)});  // real rows only
    out.push_back({"transformer.wpe.weight", {T, C}, copy(at(WPE), T * C)});
    for (size_t l = 0; l < L; l++) {
        const std::string h = "transformer.h." + std::to_string(l) + ".";
        out.push_back({h + "ln_1.weight", {C}, copy(at(LN1W) + l * C, C)});
        out.push_back({h + "ln_1.bias", {C}, copy(at(LN1B) + l * C, C)});
        out.push_back({h + "attn.c_attn.weight", {C, 3 * C}, transposed(at(QKVW) + l * 3 * C * C, 3 * C, C)});
        out.push_back({h + "attn.c_attn.bias", {3 * C}, copy(at(QKVB) + l * 3 * C, 3 * C)});
        out.push_back({h + "attn.c_proj.weight", {C, C}, transposed(at(ATTPROJW) + l * C * C, C, C)});
        out.push_back({h + "attn.c_proj.bias", {C}, copy(at(ATTPROJB) + l * C, C)});
        out.push_back({h + "ln_2.weight", {C}, copy(at(LN2W) + l * C, C)});
        out.push_back({h + "ln_2.bias", {C}, copy(at(LN2B) + l * C, C)});
        out.push_back({h + "mlp.c_fc.weight", {C, 4 * C}, transposed(at(FCW) + l * 4 * C * C, 4 * C, C)});
        out.push_back({h + "mlp.c_fc.bias", {4 * C}, copy(at(FCB) + l * 4 * C, 4 * C)});
        out.push_back({h + "mlp.c_proj.weight", {4 * C, C}, transposed(at(FCPROJW) + l * C * 4 * C, C, 4 * C)});
        out.push_back({h + "mlp.c_proj.bias", {C}, copy(at(FCPROJB) + l * C, C)});
    }
    out.push_back({"transformer.ln_f.weight", {C}, copy(at(LNFW), C)});
    out.push_back({"transformer.ln_f.bias", {C}, copy(at(LNFB), C)});
    return out;
}

std::string hf_config_json(const GPT2Config& cfg) {
    // <|endoftext|>: GPT-2's id 50256, or byte 0 of the byte-level vocabulary (prepare_data --bytes); another
    // vocabulary's is unknown here, and its last id is the usual guess.
    const int eot = cfg.vocab_size == (size_t)BYTE_VOCAB_SIZE ? BYTE_EOT
                    : cfg.vocab_size > 50256                  ? 50256
                                                              : (int)cfg.vocab_size - 1;
    nlohmann::ordered_json j = {
        {"architectures", {"GPT2LMHeadModel"}},
        {"model_type", "gpt2"},
        {"vocab_size", cfg.vocab_size},
        {"n_positions", cfg.max_seq_len},
        {"n_ctx", cfg.max_seq_len},
        {"n_embd", cfg.channels},
        {"n_layer", cfg.num_layers},
        {"n_head", cfg.num_heads},
        {"n_inner", nullptr},                   // 4 * n_embd
        {"activation_function", "gelu_new"},    // the tanh approximation, as trained
        {"layer_norm_epsilon", 1e-5},
        {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0},  // trained without dropout
        {"initializer_range", 0.02},
        {"scale_attn_weights", true},
        {"tie_word_embeddings", true},
        {"bos_token_id", eot},
        {"eos_token_id", eot},
        {"torch_dtype", "float32"},
        {"use_cache", true},
    };
    return j.dump(2) + "\n";
}

void export_hf(const GPT2Config& cfg, const std::vector<float>& params, const std::string& dir) {
    make_dirs(dir);  // and its parents: `export_hf model.bin out/hf` works on a fresh clone
    std::vector<HfTensor> tensors = hf_tensors(cfg, params);
    nlohmann::ordered_json header;
    header["__metadata__"] = {{"format", "pt"}};
    size_t offset = 0;
    for (const HfTensor& t : tensors) {
        const size_t bytes = t.data.size() * sizeof(float);
        header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    while (text.size() % 8 != 0) text += ' ';
    const std::string st = dir + "/model.safetensors", cj = dir + "/config.json";
    const std::string cfg_text = hf_config_json(cfg);
    // Both or neither: a disk that fills after the first would leave a safetensors file without its config.json.
    write_files_atomically({{st, [&](FILE* f) {
                                 const uint64_t n = text.size();  // little-endian hosts only, as every format here
                                 write_exact(f, &n, sizeof n, st);
                                 write_exact(f, text.data(), text.size(), st);
                                 for (const HfTensor& t : tensors)
                                     write_exact(f, t.data.data(), t.data.size() * sizeof(float), st);
                             }},
                            {cj, [&](FILE* f) { write_exact(f, cfg_text.data(), cfg_text.size(), cj); }}});
}

}  // namespace llmc
