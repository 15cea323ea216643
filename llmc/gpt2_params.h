// GPT-2's parameters as data: the 16 tensors of llm.c's model file, in its order (the table in gpt2_params.cpp),
// and the typed per-layer views the model's forward and backward read (`params.layer(l).qkvw`), computed here, in
// one place, for the parameters and the gradients alike.
#pragma once

#include <cstddef>
#include <vector>

#include "architectures.h"
#include "layout.h"

namespace llmc {

// Indices into GPT-2's table (llm.c's tensor order).
enum Gpt2Tensor : int {
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
    NUM_GPT2_TENSORS
};

std::vector<ParamSpec> gpt2_params(const ModelConfig& c);
extern const Architecture gpt2_architecture;

template <class T>
struct LayerParams {
    T *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

// Layer l's slices of the 12 per-layer tensors, each found by `at(flat offset of the slice's first element)` (a flat
// buffer, or a gradient bucket's own memory).
template <class T, class At>
LayerParams<T> layer_slices(const ParamLayout& layout, size_t l, At at) {
    auto slice = [&](int t) -> T* { return at(layout.slice(t, l)); };
    return LayerParams<T>{slice(LN1W), slice(LN1B), slice(QKVW),  slice(QKVB),  slice(ATTPROJW), slice(ATTPROJB),
                          slice(LN2W), slice(LN2B), slice(FCW),   slice(FCB),   slice(FCPROJW),  slice(FCPROJB)};
}

// Typed views into a flat buffer laid out by GPT-2's ParamLayout. T is the element type (float gradients, bf16 or
// float parameters).
template <class T>
struct ParamViews : LayoutViews<T> {
    using LayoutViews<T>::LayoutViews;

    T* wte() const { return this->tensor(WTE); }
    T* wpe() const { return this->tensor(WPE); }
    T* lnfw() const { return this->tensor(LNFW); }
    T* lnfb() const { return this->tensor(LNFB); }

    LayerParams<T> layer(size_t l) const {
        return layer_slices<T>(*this->layout, l, [&](size_t flat) { return this->base + flat; });
    }
};

}  // namespace llmc
