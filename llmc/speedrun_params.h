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
    NUM_SPEEDRUN_TENSORS
};

// Its optimizer groups (ParamSpec::group).
enum SpeedrunGroup : int { SR_GROUP_EMBED = 0, SR_GROUP_MATRICES = 1, SR_GROUP_HEAD = 2, NUM_SPEEDRUN_GROUPS };

// ModelConfig::arch_flags of the speedrun architecture: the options of the ShortcutsTweaks record that change the
// model's function.
constexpr unsigned SR_FLAG_SOFTCAP = 1u;  // logits c = 30 tanh(z / 30) before the softmax
constexpr unsigned SR_KNOWN_FLAGS = SR_FLAG_SOFTCAP;

std::vector<ParamSpec> speedrun_params(const ModelConfig& c);
extern const Architecture speedrun_architecture;

// The logit soft-cap of a speedrun config (0: none).
float speedrun_softcap(const ModelConfig& c);

template <class T>
struct SpeedrunLayerParams {
    T *qkvw, *attprojw, *fcw, *fcprojw;
};

// Typed views into a flat buffer laid out by the speedrun's ParamLayout (parameters or gradients).
template <class T>
struct SpeedrunViews {
    T* base = nullptr;
    const ParamLayout* layout = nullptr;

    SpeedrunViews() = default;
    SpeedrunViews(T* b, const ParamLayout& l) : base(b), layout(&l) {}

    T* tensor(int t) const { return base + layout->offsets[(size_t)t]; }
    T* wte() const { return tensor(SR_WTE); }
    T* lm_head() const { return tensor(SR_LM_HEAD); }
    SpeedrunLayerParams<T> layer(size_t l) const { return layer_at(*layout, l, [&](size_t f) { return base + f; }); }

    // Layer l's slices, each found by at(flat offset of the slice's first element).
    template <class At>
    static SpeedrunLayerParams<T> layer_at(const ParamLayout& lay, size_t l, At at) {
        return {at(lay.slice(SR_QKVW, l)), at(lay.slice(SR_ATTPROJW, l)), at(lay.slice(SR_FCW, l)),
                at(lay.slice(SR_FCPROJW, l))};
    }
};

}  // namespace llmc
