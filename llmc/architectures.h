// The architectures this program trains, by name (ModelConfig::arch). An architecture is data and one model class:
//   its parameter table   the tensors, as ParamSpecs (llmc/layout.h): layout, initialisation, weight decay,
//                         optimizer groups, gradient buckets, names, the Hugging Face mapping all follow from it
//   its model class       activation table and forward/backward over the backend ops (llmc/model.h)
// and a few facts the trainer reports. GPT-2 (llmc/gpt2_params.h) is the default; docs/architecture.md says how to add
// one.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "config.h"
#include "layout.h"

namespace llmc {

struct Architecture {
    const char* name;   // ModelConfig::arch, the model file's header
    const char* title;  // in messages: "GPT-2"
    std::vector<ParamSpec> (*params)(const ModelConfig& cfg);
    // Model FLOPs per token of one training step (forward + backward), for MFU, and the formula as the log states it.
    double (*flops_per_token)(const ModelConfig& cfg, size_t num_params, size_t T);
    std::string (*describe_flops)(const ModelConfig& cfg, size_t num_params, size_t T);
    unsigned known_flags;  // the ModelConfig::arch_flags it has (0: none)
    // Fails on a config the architecture cannot build beyond validate_config's common limits (null: none).
    void (*check_config)(const ModelConfig& cfg);
};

// Fails naming the known architectures when `name` is not one of them.
const Architecture& architecture(const std::string& name);

inline double flops_per_token(const ModelConfig& c, size_t num_params, size_t T) {
    return architecture(c.arch).flops_per_token(c, num_params, T);
}
inline std::string describe_flops_per_token(const ModelConfig& c, size_t num_params, size_t T) {
    return architecture(c.arch).describe_flops(c, num_params, T);
}

}  // namespace llmc
