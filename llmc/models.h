// The one place that maps an architecture's name (ModelConfig::arch, llmc/architectures.h) to its model class:
// everything else holds a Model<Backend> (llmc/model.h) and never names an architecture.
#pragma once

#include <memory>
#include <vector>

#include "architectures.h"
#include "error.h"
#include "gpt2.h"
#include "model.h"
#include "speedrun.h"

namespace llmc {

template <class Backend>
std::unique_ptr<Model<Backend>> create_model(Backend& be, const ModelConfig& cfg, size_t B, size_t T,
                                             const ModelOptions& opt = ModelOptions()) {
    if (cfg.arch == gpt2_architecture.name) return std::make_unique<Gpt2<Backend>>(be, cfg, B, T, opt);
    if (cfg.arch == speedrun_architecture.name) return std::make_unique<Speedrun<Backend>>(be, cfg, B, T, opt);
    architecture(cfg.arch);  // fails naming the known ones
    fail("architecture '%s' has no model class (llmc/models.h)", cfg.arch.c_str());
}

// The buffers create_model's model allocates (its activation table), without allocating anything.
template <class Backend>
std::vector<BufferSize> activation_plan(const ModelConfig& cfg, size_t B, size_t T, const ModelOptions& opt) {
    if (cfg.arch == gpt2_architecture.name) return plan_activations<Gpt2<Backend>>(cfg, B, T, opt);
    if (cfg.arch == speedrun_architecture.name) return plan_activations<Speedrun<Backend>>(cfg, B, T, opt);
    architecture(cfg.arch);
    fail("architecture '%s' has no model class (llmc/models.h)", cfg.arch.c_str());
}

}  // namespace llmc
