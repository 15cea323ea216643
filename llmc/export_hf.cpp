// HuggingFace export (see export_hf.h).
#include "export_hf.h"

#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

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

std::vector<HfTensorPlace> hf_tensor_places(const ParamLayout& lay) {
    std::vector<HfTensorPlace> out;
    auto add = [&](int t, size_t l) {
        const ParamSpec& s = lay.spec(t);
        HfTensorPlace p;
        p.name = s.hf.pattern;
        const size_t at = p.name.find("{l}");
        if (at != std::string::npos) p.name.replace(at, 3, std::to_string(l));
        p.flat = lay.slice(t, l);
        p.rows = s.hf.rows ? s.hf.rows : s.shape[0];
        p.row_elems = s.elements() / s.shape[0];
        p.transposed = s.hf.transposed;
        p.shape = s.shape;
        p.shape[0] = p.rows;
        if (p.transposed) p.shape = {s.shape[1], s.shape[0]};
        out.push_back(p);
    };
    // HF's order: the tensors before the layers, then layer by layer, then the rest
    int first = 0;
    while (first < lay.num_tensors() && !lay.is_per_layer(first)) add(first++, 0);
    for (size_t l = 0; l < lay.cfg.num_layers; l++)
        for (int t = first; t < lay.num_tensors(); t++)
            if (lay.is_per_layer(t)) add(t, l);
    for (int t = first; t < lay.num_tensors(); t++)
        if (!lay.is_per_layer(t)) add(t, 0);
    return out;
}

std::vector<HfTensor> hf_tensors(const ModelConfig& cfg, const std::vector<float>& params) {
    const ParamLayout lay(cfg);
    for (int t = 0; t < lay.num_tensors(); t++)
        if (lay.spec(t).hf.pattern.empty())
            fail("export: no Hugging Face class matches the %s architecture (%s): its tensor %s has no counterpart "
                 "in GPT2LMHeadModel; export_hf writes GPT-2 models", cfg.arch.c_str(), cfg.describe().c_str(),
                 lay.name(t));
    if (params.size() != lay.total)
        fail("export: %zu parameter values, the model %s has %zu", params.size(), cfg.describe().c_str(), lay.total);
    std::vector<HfTensor> out;
    for (const HfTensorPlace& p : hf_tensor_places(lay)) {
        const float* src = params.data() + p.flat;
        std::vector<float> data = p.transposed ? transposed(src, p.rows, p.row_elems)
                                               : std::vector<float>(src, src + p.rows * p.row_elems);
        out.push_back({"transformer." + p.name, p.shape, std::move(data)});
    }
    return out;
}

std::string hf_config_json(const ModelConfig& cfg) {
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

void export_hf(const ModelConfig& cfg, const std::vector<float>& params, const std::string& dir) {
    std::vector<HfTensor> tensors = hf_tensors(cfg, params);  // refuses an architecture without an HF class
    make_dirs(dir);  // and its parents: `export_hf model.bin out/hf` works on a fresh clone
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
