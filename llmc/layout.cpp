#include "layout.h"

#include "error.h"

namespace llmc {

ParamLayout::ParamLayout(const GPT2Config& c) : cfg(c) {
    const size_t L = c.num_layers, C = c.channels, Vp = c.padded_vocab_size, maxT = c.max_seq_len;
    sizes = {Vp * C,        maxT * C,  L * C,         L * C,     L * 3 * C * C, L * 3 * C,
             L * C * C,     L * C,     L * C,         L * C,     L * 4 * C * C, L * 4 * C,
             L * C * 4 * C, L * C,     C,             C};
    size_t off = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        offsets[t] = off;
        off += sizes[t];
    }
    total = off;
}

const char* ParamLayout::name(int t) {
    static const char* names[NUM_PARAM_TENSORS] = {"wte",  "wpe",  "ln1w", "ln1b",     "qkvw",    "qkvb",
                                                   "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb",
                                                   "fcprojw",  "fcprojb",  "lnfw", "lnfb"};
    return t >= 0 && t < NUM_PARAM_TENSORS ? names[t] : "?";
}

int ParamLayout::tensor_of(size_t i) const {
    if (i >= total) fail("parameter index %zu out of range (total %zu)", i, total);
    for (int t = NUM_PARAM_TENSORS - 1; t >= 0; t--)
        if (i >= offsets[t]) return t;
    return 0;
}

}  // namespace llmc
