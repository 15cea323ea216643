#include "gpt2_params.h"

#include <cmath>
#include <cstdio>

namespace llmc {

std::vector<ParamSpec> gpt2_params(const ModelConfig& c) {
    const size_t L = c.num_layers, C = c.channels;
    // weights ~ N(0, 0.02), the residual projections ~ N(0, 0.02 / sqrt(2L)), biases 0, layernorm weights 1;
    // wte's padded rows stay zero
    const ParamInit normal{ParamInit::Normal, 0.02f, 0}, ones{ParamInit::Ones, 0, 0}, zeros;
    const ParamInit residual{ParamInit::Normal, 0.02f / std::sqrt(2.0f * (float)L), 0};
    const ParamInit vocab{ParamInit::Normal, 0.02f, c.vocab_size};
    // name, shape (one layer's), per layer, weight decay, group, bucket, init, Hugging Face name (GPT2LMHeadModel)
    return {
        {"wte", {c.padded_vocab_size, C}, false, true, 0, 0, vocab, {"wte.weight", false, c.vocab_size}},
        {"wpe", {c.max_seq_len, C}, false, true, 0, 0, normal, {"wpe.weight"}},
        {"ln1w", {C}, true, false, 0, 0, ones, {"h.{l}.ln_1.weight"}},
        {"ln1b", {C}, true, false, 0, 0, zeros, {"h.{l}.ln_1.bias"}},
        {"qkvw", {3 * C, C}, true, true, 0, 0, normal, {"h.{l}.attn.c_attn.weight", true}},
        {"qkvb", {3 * C}, true, false, 0, 0, zeros, {"h.{l}.attn.c_attn.bias"}},
        {"attprojw", {C, C}, true, true, 0, 0, residual, {"h.{l}.attn.c_proj.weight", true}},
        {"attprojb", {C}, true, false, 0, 0, zeros, {"h.{l}.attn.c_proj.bias"}},
        {"ln2w", {C}, true, false, 0, 0, ones, {"h.{l}.ln_2.weight"}},
        {"ln2b", {C}, true, false, 0, 0, zeros, {"h.{l}.ln_2.bias"}},
        {"fcw", {4 * C, C}, true, true, 0, 0, normal, {"h.{l}.mlp.c_fc.weight", true}},
        {"fcb", {4 * C}, true, false, 0, 0, zeros, {"h.{l}.mlp.c_fc.bias"}},
        {"fcprojw", {C, 4 * C}, true, true, 0, 0, residual, {"h.{l}.mlp.c_proj.weight", true}},
        {"fcprojb", {C}, true, false, 0, 0, zeros, {"h.{l}.mlp.c_proj.bias"}},
        {"lnfw", {C}, false, false, 0, 0, ones, {"ln_f.weight"}},
        {"lnfb", {C}, false, false, 0, 0, zeros, {"ln_f.bias"}},
    };
}

namespace {

// llm.c's formula, so that the figures compare directly: 6 N + 6 L C T, N = every parameter (the padded vocabulary,
// the position table, layernorms and biases included: llm.c's num_parameters), 6 L C T = the attention score and
// value products under the causal mask (half of the 12 L C T of the full T x T products). GPT-2 124M at T = 1024:
// 803.5 MFLOP per token.
double gpt2_flops_per_token(const ModelConfig& c, size_t num_params, size_t T) {
    return 6.0 * (double)num_params + 6.0 * (double)c.num_layers * (double)c.channels * (double)T;
}

std::string gpt2_describe_flops(const ModelConfig& c, size_t num_params, size_t T) {
    char s[160];
    std::snprintf(s, sizeof s, "MFU counts 6 N + 6 L C T = %.1f MFLOP per token (llm.c's formula: N = %zu parameters, "
                  "causal attention)", gpt2_flops_per_token(c, num_params, T) / 1e6, num_params);
    return s;
}

}  // namespace

const Architecture gpt2_architecture = {"gpt2", "GPT-2", gpt2_params, gpt2_flops_per_token, gpt2_describe_flops, 0,
                                        nullptr};

}  // namespace llmc
