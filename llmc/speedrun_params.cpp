#include "speedrun_params.h"

#include <cmath>
#include <cstdio>

#include "error.h"
#include "speedrun_recipe.h"

namespace llmc {

std::vector<ParamSpec> speedrun_params(const ModelConfig& c) {
    const size_t C = c.channels;
    // As the records: the embedding ~ N(0, 1) (nn.Embedding), qkvw and fcw ~ U(+-1/sqrt(C)) (nn.Linear), the two
    // projections and the head zero; the padded vocabulary rows zero. No Hugging Face class matches the
    // architecture: every HfName is empty (import and export refuse it).
    const ParamInit embedding{ParamInit::Normal, 1.0f, c.vocab_size};
    const ParamInit linear{ParamInit::Uniform, 1.0f / std::sqrt((float)C), 0}, zeros;
    // name, shape (one layer's), per layer, weight decay, group, bucket, init, Hugging Face name, row blocks
    std::vector<ParamSpec> t = {
        {"wte", {c.padded_vocab_size, C}, false, false, SR_GROUP_EMBED, 0, embedding, {}},
        {"qkvw", {3 * C, C}, true, false, SR_GROUP_MATRICES, 0, linear, {}, 3},  // q, k, v: three matrices
        {"attprojw", {C, C}, true, false, SR_GROUP_MATRICES, 0, zeros, {}},
        {"fcw", {4 * C, C}, true, false, SR_GROUP_MATRICES, 0, linear, {}},
        {"fcprojw", {C, 4 * C}, true, false, SR_GROUP_MATRICES, 0, zeros, {}},
        {"lm_head", {c.padded_vocab_size, C}, false, false, SR_GROUP_HEAD, 0, zeros, {}},
    };
    // The ShortcutsTweaks record's scalars: lam 0.5, the skip weights (1, 0) (the layer's input unchanged at first).
    const ParamInit half{ParamInit::Constant, 0.5f, 0}, ones{ParamInit::Ones, 0, 0};
    if (c.arch_flags & SR_FLAG_VALUE_RESIDUAL) t.push_back({"vlambda", {1}, true, false, SR_GROUP_SCALARS, 0, half, {}});
    if (c.arch_flags & SR_FLAG_EMBED_SKIP) {
        t.push_back({"skip_x", {1}, true, false, SR_GROUP_SCALARS, 0, ones, {}});
        t.push_back({"skip_x0", {1}, true, false, SR_GROUP_SCALARS, 0, zeros, {}});
    }
    return t;
}

int speedrun_tensor_index(const ModelConfig& c, const char* name) {
    int next = NUM_SPEEDRUN_TENSORS;
    const bool vr = c.arch_flags & SR_FLAG_VALUE_RESIDUAL, es = c.arch_flags & SR_FLAG_EMBED_SKIP;
    const int vlambda = vr ? next++ : -1, skip_x = es ? next++ : -1, skip_x0 = es ? next++ : -1;
    const std::string n = name;
    return n == "vlambda" ? vlambda : n == "skip_x" ? skip_x : n == "skip_x0" ? skip_x0 : -1;
}

float speedrun_softcap(const ModelConfig& c) { return (c.arch_flags & SR_FLAG_SOFTCAP) ? kLogitSoftCap : 0.0f; }

namespace {

// 6 N + 6 L C T as for GPT-2 (llmc/gpt2_params.cpp), with N = the parameters that take part in a matrix product:
// all but the embedding, which is a lookup (the untied head is a product over the padded vocabulary).
double speedrun_flops_per_token(const ModelConfig& c, size_t num_params, size_t T) {
    const double n = (double)num_params - (double)(c.padded_vocab_size * c.channels);
    return 6.0 * n + 6.0 * (double)c.num_layers * (double)c.channels * (double)T;
}

std::string speedrun_describe_flops(const ModelConfig& c, size_t num_params, size_t T) {
    char s[200];
    std::snprintf(s, sizeof s, "MFU counts 6 N + 6 L C T = %.1f MFLOP per token (N = %zu parameters without the "
                  "embedding, causal attention)", speedrun_flops_per_token(c, num_params, T) / 1e6,
                  num_params - c.padded_vocab_size * c.channels);
    return s;
}

// The rotary embedding turns pairs of a head's channels: an even head size.
void speedrun_check_config(const ModelConfig& c) {
    if (c.head_size() % 2 != 0)
        fail("the speedrun architecture's rotary embeddings need an even head size, got C/NH = %zu/%zu = %zu",
             c.channels, c.num_heads, c.head_size());
}

}  // namespace

const Architecture speedrun_architecture = {"speedrun", "speedrun", speedrun_params,
                                            speedrun_flops_per_token, speedrun_describe_flops,
                                            SR_KNOWN_FLAGS, speedrun_check_config};

}  // namespace llmc
