// The speedrun architecture's parameters as data (the NanoGPT speedrun's records: docs/speedrun.md): a token
// embedding without position embedding, per layer the four block matrices without biases, an untied head; no norm
// gains. Its optimizer groups say which optimizer steps each tensor (llmc/recipe.h): Adam for the embedding and the
// head, Muon for the block matrices.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "architectures.h"
#include "layout.h"

namespace llmc {

// Indices into the speedrun's table.
enum SpeedrunTensor : int {
    SR_WTE = 0,    // (Vp, C)
    SR_QKVW,       // (L, 3C, C)
    SR_ATTPROJW,   // (L, C, C)
    SR_FCW,        // (L, 4C, C)
    SR_FCPROJW,    // (L, C, 4C)
    SR_LM_HEAD,    // (Vp, C)
    NUM_SPEEDRUN_TENSORS  // the tensors every speedrun model has; then, by its flags:
    // with SR_FLAG_VALUE_RESIDUAL: (L) the value residual's lam per layer (layer 0's unused)
    // with SR_FLAG_EMBED_SKIP: (L) each, the embedding skip's weights of x and of x0 per layer
    // (their indices follow: speedrun_tensor_index)
};

// Its optimizer groups (ParamSpec::group).
enum SpeedrunGroup : int {
    SR_GROUP_EMBED = 0, SR_GROUP_MATRICES = 1, SR_GROUP_HEAD = 2, SR_GROUP_SCALARS = 3, NUM_SPEEDRUN_GROUPS
};

// ModelConfig::arch_flags of the speedrun architecture: the options of the ShortcutsTweaks record that change the
// model's function.
constexpr unsigned SR_FLAG_SOFTCAP = 1u;         // logits c = 30 tanh(z / 30) before the softmax
constexpr unsigned SR_FLAG_VALUE_RESIDUAL = 2u;  // v = (1 - lam) v + lam v1 in layers >= 1 (v1: layer 0's v)
constexpr unsigned SR_FLAG_EMBED_SKIP = 4u;      // each layer's input x = l0 x + l1 x0 (x0: the normalised embedding)
constexpr unsigned SR_KNOWN_FLAGS = SR_FLAG_SOFTCAP | SR_FLAG_VALUE_RESIDUAL | SR_FLAG_EMBED_SKIP;

// The table index of "vlambda", "skip_x" or "skip_x0" in a config's layout; -1 when its flag is off.
int speedrun_tensor_index(const ModelConfig& c, const char* name);

std::vector<ParamSpec> speedrun_params(const ModelConfig& c);
extern const Architecture speedrun_architecture;

// The logit soft-cap of a speedrun config (0: none).
float speedrun_softcap(const ModelConfig& c);

template <class T>
struct SpeedrunLayerParams {
    T *qkvw, *attprojw, *fcw, *fcprojw;
    T *vlambda, *skip_x, *skip_x0;  // null when the flag is off
};

// Typed views into a flat buffer laid out by the speedrun's ParamLayout (parameters or gradients).
template <class T>
struct SpeedrunViews : LayoutViews<T> {
    using LayoutViews<T>::LayoutViews;

    T* wte() const { return this->tensor(SR_WTE); }
    T* lm_head() const { return this->tensor(SR_LM_HEAD); }
    SpeedrunLayerParams<T> layer(size_t l) const {
        return layer_at(*this->layout, l, [&](size_t f) { return this->base + f; });
    }

    // Layer l's slices, each found by at(flat offset of the slice's first element).
    template <class At>
    static SpeedrunLayerParams<T> layer_at(const ParamLayout& lay, size_t l, At at) {
        const auto opt = [&](const char* name) -> T* {
            const int t = speedrun_tensor_index(lay.cfg, name);
            return t < 0 ? nullptr : at(lay.slice(t, l));
        };
        return {at(lay.slice(SR_QKVW, l)), at(lay.slice(SR_ATTPROJW, l)), at(lay.slice(SR_FCW, l)),
                at(lay.slice(SR_FCPROJW, l)), opt("vlambda"), opt("skip_x"), opt("skip_x0")};
    }
};

}  // namespace llmc
