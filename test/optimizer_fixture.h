// The tiny model and deterministic parameters shared by the optimizer tests (one process and MPI).
#pragma once

#include <vector>

#include "llmc/config.h"
#include "llmc/model.h"
#include "llmc/rng.h"
#include "llmc/zero.h"

namespace optimizer_fixture {

// L=2, C=6, NH=2, maxT=5, V=11 (Vp=16): every tensor is small, several are not multiples of anything.
inline llmc::GPT2Config tiny_config() {
    llmc::GPT2Config c;
    c.max_seq_len = 5, c.vocab_size = 11, c.padded_vocab_size = 16, c.num_layers = 2, c.num_heads = 2,
    c.channels = 6;
    return c;
}

// The model padding ZeRO needs for `world` ranks.
inline llmc::ModelOptions padded_for(int world) {
    llmc::ModelOptions o;
    o.pad_to = llmc::zero_pad_multiple(world);
    return o;
}

// Deterministic values in (-0.5, 0.5) for parameters.
inline std::vector<float> initial_params(size_t n) {
    std::vector<float> p(n);
    llmc::Rng rng(7, 1);
    for (auto& x : p) x = (float)rng.uniform() - 0.5f;
    return p;
}

}  // namespace optimizer_fixture
