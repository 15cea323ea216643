// Import a Hugging Face GPT-2 checkpoint (a GPT2LMHeadModel / GPT2Model directory: config.json + model.safetensors,
// as on the hub for gpt2, gpt2-medium, gpt2-large, gpt2-xl) into this project's parameters; the inverse of
// llmc/export_hf.h, whose name mapping it uses.
//
// Accepted: tensor names with or without the "transformer." prefix (the hub's gpt2 files have none); F32, F16 or
// BF16 values; the attention-mask buffers ("h.N.attn.bias", "h.N.attn.masked_bias") some files carry, ignored;
// an "lm_head.weight" only if it equals wte (this model ties them). HF's Conv1D weights are stored (in, out) and
// transposed to (out, in); wte's padded rows V..Vp-1 are zero.
// Refused, with one line naming the file: a config this model cannot express (another model_type or activation,
// n_inner other than 4 n_embd, layer_norm_epsilon other than 1e-5, untied lm_head), a missing or unexpected
// tensor, a shape that does not follow from config.json, a dtype other than F32/F16/BF16, a truncated file.
#pragma once

#include <string>
#include <vector>

#include "config.h"
#include "safetensors.h"

namespace llmc {

// The model shape from a GPT-2 config.json (n_layer, n_head, n_embd, n_positions, vocab_size); Vp = pad_vocab(V).
ModelConfig hf_config_from_json(const std::string& path);
// The parameters in ParamLayout order (llmc/layout.h) from an open safetensors file, checked against `cfg`.
std::vector<float> params_from_hf(const ModelConfig& cfg, const SafetensorsFile& st);

struct ImportedModel {
    ModelConfig config;
    std::vector<float> params;
};
// dir/config.json + dir/model.safetensors -> config and parameters.
ImportedModel import_hf(const std::string& dir);

}  // namespace llmc
