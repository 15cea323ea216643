// Hugging Face GPT-2 import (see import_hf.h).
#include "import_hf.h"

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "error.h"
#include "export_hf.h"
#include "gpt2_params.h"
#include "layout.h"

namespace llmc {

namespace {

size_t positive_field(const nlohmann::json& j, const char* key, const std::string& path) {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<long long>() <= 0)
        fail("%s: \"%s\" is missing or not a positive integer", path.c_str(), key);
    return j[key].get<size_t>();
}

// Fails unless j[key] is absent (HF's default applies) or equals `want`.
template <class T>
void require_default(const nlohmann::json& j, const char* key, const T& want, const char* why, const std::string& path) {
    if (j.contains(key) && !j[key].is_null() && j[key] != nlohmann::json(want))
        fail("%s: \"%s\" is %s, this model supports only %s (%s)", path.c_str(), key, j[key].dump().c_str(),
             nlohmann::json(want).dump().c_str(), why);
}

std::string shape_text(const std::vector<size_t>& s) {
    std::string out = "(";
    for (size_t i = 0; i < s.size(); i++) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + ")";
}

// Reads tensor `name` (checked to have `shape`) into dst; a 2-D (in, out) Conv1D weight is stored transposed.
void read_into(const SafetensorsFile& st, const std::string& name, const std::vector<size_t>& shape, bool transpose,
               float* dst) {
    const SafetensorsEntry& e = st.entry(name);
    if (e.shape != shape)
        fail("%s: tensor %s has shape %s, config.json implies %s", st.path().c_str(), name.c_str(),
             shape_text(e.shape).c_str(), shape_text(shape).c_str());
    std::vector<float> v = st.read_f32(name);
    if (!transpose) {
        std::memcpy(dst, v.data(), v.size() * sizeof(float));
        return;
    }
    const size_t in = shape[0], out = shape[1];
    for (size_t r = 0; r < in; r++)
        for (size_t c = 0; c < out; c++) dst[c * in + r] = v[r * out + c];
}

}  // namespace

ModelConfig hf_config_from_json(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail("%s: cannot open (%s)", path.c_str(), std::strerror(errno));
    nlohmann::json j;
    try {
        in >> j;
    } catch (const std::exception&) {
        fail("%s: not valid JSON", path.c_str());
    }
    if (!j.is_object()) fail("%s: not a JSON object", path.c_str());
    if (j.value("model_type", std::string()) != "gpt2")
        fail("%s: model_type is %s (expected \"gpt2\")", path.c_str(),
             j.contains("model_type") ? j["model_type"].dump().c_str() : "missing");
    ModelConfig c;
    c.num_layers = positive_field(j, "n_layer", path);
    c.num_heads = positive_field(j, "n_head", path);
    c.channels = positive_field(j, "n_embd", path);
    c.max_seq_len = positive_field(j, "n_positions", path);
    c.vocab_size = positive_field(j, "vocab_size", path);
    c.padded_vocab_size = pad_vocab(c.vocab_size);
    require_default(j, "activation_function", std::string("gelu_new"), "GELU with the tanh approximation", path);
    require_default(j, "n_inner", 4 * c.channels, "an MLP of width 4 n_embd", path);
    require_default(j, "tie_word_embeddings", true, "lm_head tied to wte", path);
    require_default(j, "scale_attn_by_inverse_layer_idx", false, "plain 1/sqrt(head size) attention", path);
    require_default(j, "reorder_and_upcast_attn", false, "plain attention", path);
    if (j.contains("layer_norm_epsilon") && std::fabs(j["layer_norm_epsilon"].get<double>() - 1e-5) > 1e-12)
        fail("%s: layer_norm_epsilon is %g, this model's layernorm uses 1e-5", path.c_str(),
             j["layer_norm_epsilon"].get<double>());
    try {
        validate_config(c);
    } catch (const std::exception& e) {
        fail("%s: %s", path.c_str(), e.what());
    }
    return c;
}

std::vector<float> params_from_hf(const ModelConfig& cfg, const SafetensorsFile& st) {
    const std::string pre = st.has("transformer.wte.weight") ? "transformer." : "";
    const ParamLayout lay(cfg);
    std::vector<float> p(lay.total, 0.0f);  // wte's padded rows stay zero
    const size_t C = cfg.channels, V = cfg.vocab_size;
    std::set<std::string> used;
    auto get = [&](const std::string& name, std::vector<size_t> shape, bool transpose, float* dst) {
        read_into(st, pre + name, shape, transpose, dst);
        used.insert(pre + name);
    };
    float* base = p.data();
    for (const HfTensorPlace& t : hf_tensor_places(lay)) get(t.name, t.shape, t.transposed, base + t.flat);
    for (const auto& [name, e] : st.tensors()) {
        if (used.count(name)) continue;
        const bool mask = name.size() > 10 && (name.compare(name.size() - 10, 10, ".attn.bias") == 0 ||
                                               name.find(".attn.masked_bias") != std::string::npos);
        if (mask) continue;  // causal-mask buffers, not parameters
        if (name == "lm_head.weight") {
            std::vector<float> head = st.read_f32(name);
            if (e.shape != std::vector<size_t>{V, C} ||
                std::memcmp(head.data(), base + lay.offsets[WTE], V * C * sizeof(float)) != 0)
                fail("%s: lm_head.weight differs from wte: this model ties the two (untied heads are not supported)",
                     st.path().c_str());
            continue;
        }
        fail("%s: unexpected tensor %s (not part of a GPT-2 with the shape in config.json)", st.path().c_str(),
             name.c_str());
    }
    for (size_t i = 0; i < p.size(); i++)
        if (!std::isfinite(p[i])) {
            const int t = lay.tensor_of(i);
            fail("%s: parameter %s element %zu is %g", st.path().c_str(), lay.name(t), i - lay.offsets[t], p[i]);
        }
    return p;
}

ImportedModel import_hf(const std::string& dir) {
    struct stat s;
    if (stat(dir.c_str(), &s) == 0 && !S_ISDIR(s.st_mode))
        fail("%s: not a directory (expected a Hugging Face checkpoint directory: config.json + model.safetensors)",
             dir.c_str());
    const std::string st_path = dir + "/model.safetensors";
    if (stat(st_path.c_str(), &s) != 0) {
        if (stat((dir + "/model.safetensors.index.json").c_str(), &s) == 0)
            fail("%s: sharded checkpoint (model.safetensors.index.json): only a single model.safetensors is read",
                 dir.c_str());
        if (stat((dir + "/pytorch_model.bin").c_str(), &s) == 0)
            fail("%s: has pytorch_model.bin but no model.safetensors: download model.safetensors (every GPT-2 size on "
                 "the hub has one)", dir.c_str());
        fail("%s: cannot open (%s)", st_path.c_str(), std::strerror(errno));
    }
    ImportedModel m;
    m.config = hf_config_from_json(dir + "/config.json");
    SafetensorsFile st(st_path);
    m.params = params_from_hf(m.config, st);
    return m;
}

}  // namespace llmc
