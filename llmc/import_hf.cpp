// Hugging Face GPT-2 import (see import_hf.h).
#include "import_hf.h"

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <new>
#include <set>

#include <nlohmann/json.hpp>

#include "error.h"
#include "file_util.h"
#include "export_hf.h"
#include "gpt2_params.h"
#include "layout.h"

namespace llmc {

namespace {

// A JSON value as an error line shows it: a scalar as written (a long string cut short), an array or an object by its
// kind and size only. Never dump() a value from the file: one nested 100,000 deep overflows dump()'s recursion, and
// a line of 60 KB of brackets says nothing.
std::string shown(const nlohmann::json& v) {
    if (v.is_array()) return "an array of " + std::to_string(v.size()) + " element(s)";
    if (v.is_object()) return "an object of " + std::to_string(v.size()) + " key(s)";
    const std::string s = v.dump();
    return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

size_t positive_field(const nlohmann::json& j, const char* key, const std::string& path) {
    if (!j.contains(key)) fail("%s: \"%s\" is missing (expected a positive integer)", path.c_str(), key);
    const nlohmann::json& v = j[key];
    if (!v.is_number_unsigned() || v.get<unsigned long long>() == 0 || v.get<unsigned long long>() > (1ull << 40))
        fail("%s: \"%s\" is %s, expected a positive integer", path.c_str(), key, shown(v).c_str());
    return v.get<size_t>();
}

// Fails unless j[key] is absent (HF's default applies) or equals `want`.
template <class T>
void require_default(const nlohmann::json& j, const char* key, const T& want, const char* why, const std::string& path) {
    if (j.contains(key) && !j[key].is_null() && j[key] != nlohmann::json(want))
        fail("%s: \"%s\" is %s, this model supports only %s (%s)", path.c_str(), key, shown(j[key]).c_str(),
             nlohmann::json(want).dump().c_str(), why);
}

// The whole file as one JSON value: text after it (a second object, a stray character) is refused, not ignored.
nlohmann::json read_json_file(const std::string& path) {
    const size_t bytes = file_size_or_fail(path);
    if (bytes > (16u << 20)) fail("%s: %zu bytes, more than a config.json (at most 16 MiB)", path.c_str(), bytes);
    std::string text(bytes, '\0');
    FILE* f = open_or_fail(path, "rb");
    try {
        read_exact(f, text.data(), bytes, path);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    std::fclose(f);
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        fail("%s: not valid JSON (syntax error at byte %zu of %zu)", path.c_str(), e.byte, bytes);
    }
}

std::string shape_text(const std::vector<size_t>& s) {
    std::string out = "(";
    for (size_t i = 0; i < s.size(); i++) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + ")";
}

// Tensor `name` of the file, which must have `shape` (a missing one fails naming it).
void check_shape(const SafetensorsFile& st, const std::string& name, const std::vector<size_t>& shape) {
    const SafetensorsEntry& e = st.entry(name);
    if (e.shape != shape)
        fail("%s: tensor %s has shape %s, config.json implies %s", st.path().c_str(), name.c_str(),
             shape_text(e.shape).c_str(), shape_text(shape).c_str());
}

// Reads tensor `name` (checked to have `shape`) into dst; a 2-D (in, out) Conv1D weight is stored transposed.
void read_into(const SafetensorsFile& st, const std::string& name, const std::vector<size_t>& shape, bool transpose,
               float* dst) {
    check_shape(st, name, shape);
    std::vector<float> v = st.read_f32(name);
    if (!transpose) {
        std::memcpy(dst, v.data(), v.size() * sizeof(float));
        return;
    }
    const size_t in = shape[0], out = shape[1];
    for (size_t r = 0; r < in; r++)
        for (size_t c = 0; c < out; c++) dst[c * in + r] = v[r * out + c];
}

// Zeroed room for the parameters (wte's padded rows stay zero), allocated only once every tensor config.json implies
// is in the file with its shape: a config.json of a far larger model (n_embd 262144) is refused here, naming the
// file and the tensor, instead of zero-filling gigabytes first.
std::vector<float> allocate_params(const ModelConfig& cfg, const ParamLayout& lay, const SafetensorsFile& st,
                                   const std::string& pre) {
    for (const HfTensorPlace& t : hf_tensor_places(lay)) check_shape(st, pre + t.name, t.shape);
    try {
        return std::vector<float>(lay.total, 0.0f);
    } catch (const std::bad_alloc&) {
        fail("%s: not enough memory for the %zu parameters of %s (%.1f GiB)", st.path().c_str(), lay.total,
             cfg.describe().c_str(), (double)lay.total * 4 / (1 << 30));
    }
}

}  // namespace

ModelConfig hf_config_from_json(const std::string& path) {
    const nlohmann::json j = read_json_file(path);
    if (!j.is_object()) fail("%s: not a JSON object", path.c_str());
    if (!j.contains("model_type") || j["model_type"] != "gpt2")
        fail("%s: model_type is %s (expected \"gpt2\")", path.c_str(),
             j.contains("model_type") ? shown(j["model_type"]).c_str() : "missing");
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
    if (j.contains("layer_norm_epsilon") && !j["layer_norm_epsilon"].is_null()) {
        const nlohmann::json& eps = j["layer_norm_epsilon"];
        if (!eps.is_number() || std::fabs(eps.get<double>() - 1e-5) > 1e-12)
            fail("%s: \"layer_norm_epsilon\" is %s, this model's layernorm uses 1e-5", path.c_str(), shown(eps).c_str());
    }
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
    std::vector<float> p = allocate_params(cfg, lay, st, pre);
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
