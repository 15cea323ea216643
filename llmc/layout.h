// Parameter layout: the 16 GPT-2 tensors in llm.c's order, packed into one flat buffer.
//
// The flat buffer is the unit that everything else works on: the optimizer steps it, the gradients mirror it, the
// collectives reduce it, and checkpoints store it. Tensors are stacked over layers (all layers' ln1w, then all
// layers' ln1b, ...), exactly as in the model file, so loading a model is a single copy.
//
// Per-layer views (`params.layer(l).qkvw`) are computed here, in one place, for both the parameters and the
// gradients (the same ParamViews over a different base pointer and element type).
#pragma once

#include <array>
#include <cstddef>

#include "config.h"

namespace llmc {

enum ParamTensor : int {
    WTE = 0,    // (Vp, C)
    WPE,        // (maxT, C)
    LN1W,       // (L, C)
    LN1B,       // (L, C)
    QKVW,       // (L, 3C, C)
    QKVB,       // (L, 3C)
    ATTPROJW,   // (L, C, C)
    ATTPROJB,   // (L, C)
    LN2W,       // (L, C)
    LN2B,       // (L, C)
    FCW,        // (L, 4C, C)
    FCB,        // (L, 4C)
    FCPROJW,    // (L, C, 4C)
    FCPROJB,    // (L, C)
    LNFW,       // (C)
    LNFB,       // (C)
    NUM_PARAM_TENSORS
};

struct ParamLayout {
    GPT2Config cfg;
    std::array<size_t, NUM_PARAM_TENSORS> sizes{};    // elements of each tensor (all layers)
    std::array<size_t, NUM_PARAM_TENSORS> offsets{};  // element offset of each tensor in the flat buffer
    size_t total = 0;                                 // sum of sizes (unpadded)

    explicit ParamLayout(const GPT2Config& c);
    ParamLayout() = default;

    static const char* name(int t);          // "wte", "wpe", "ln1w", ...
    static bool is_per_layer(int t) { return t >= LN1W && t <= FCPROJB; }
    // AdamW weight decay applies to the 2-D matrices only: wte, wpe, qkvw, attprojw, fcw, fcprojw.
    static bool is_decayed(int t) {
        return t == WTE || t == WPE || t == QKVW || t == ATTPROJW || t == FCW || t == FCPROJW;
    }
    // Elements of one layer's slice of a per-layer tensor.
    size_t per_layer(int t) const { return sizes[t] / cfg.num_layers; }
    // Which tensor holds flat element `i` (i < total).
    int tensor_of(size_t i) const;
};

template <class T>
struct LayerParams {
    T *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

// Layer l's slices of the 12 per-layer tensors, each found by `at(flat offset of the slice's first element)`: the
// one place that knows where a layer's slices are (a flat buffer, or a packed gradient bucket, llmc/zero.h).
template <class T, class At>
LayerParams<T> layer_slices(const ParamLayout& layout, size_t l, At at) {
    auto slice = [&](int t) -> T* { return at(layout.offsets[t] + l * layout.per_layer(t)); };
    return LayerParams<T>{slice(LN1W), slice(LN1B), slice(QKVW),  slice(QKVB),  slice(ATTPROJW), slice(ATTPROJB),
                          slice(LN2W), slice(LN2B), slice(FCW),   slice(FCB),   slice(FCPROJW),  slice(FCPROJB)};
}

// Typed views into a flat buffer laid out by a ParamLayout. T is the element type (float gradients, bf16 or float
// parameters).
template <class T>
struct ParamViews {
    T* base = nullptr;
    const ParamLayout* layout = nullptr;

    ParamViews() = default;
    ParamViews(T* b, const ParamLayout& l) : base(b), layout(&l) {}

    T* tensor(int t) const { return base + layout->offsets[t]; }
    T* wte() const { return tensor(WTE); }
    T* wpe() const { return tensor(WPE); }
    T* lnfw() const { return tensor(LNFW); }
    T* lnfb() const { return tensor(LNFB); }

    LayerParams<T> layer(size_t l) const {
        return layer_slices<T>(*layout, l, [&](size_t flat) { return base + flat; });
    }
};

}  // namespace llmc
