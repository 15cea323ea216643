// The tiny model, deterministic parameters and the stand-in for backward shared by the optimizer tests (one process
// and MPI).
#pragma once

#include <vector>

#include "llmc/config.h"
#include "llmc/model.h"
#include "llmc/rng.h"
#include "llmc/zero.h"

namespace optimizer_fixture {

// L=2 (or `layers`), C=6, NH=2, maxT=5, V=11 (Vp=16): every tensor is small, several are not multiples of anything.
// With L > ZERO2_LAYER_BUFFERS, ZeRO 2 reuses its layer-bucket buffers within a backward.
inline llmc::GPT2Config tiny_config(size_t layers = 2) {
    llmc::GPT2Config c;
    c.max_seq_len = 5, c.vocab_size = 11, c.padded_vocab_size = 16, c.num_layers = layers, c.num_heads = 2,
    c.channels = 6;
    return c;
}

// The model ZeRO needs for `world` ranks at `stage`: padded to the shards, without a full gradient buffer for ZeRO 2.
inline llmc::ModelOptions padded_for(int world, int stage = 0) {
    llmc::ModelOptions o;
    o.pad_to = llmc::zero_pad_multiple(world);
    o.gradient_buffer = stage != 2;
    return o;
}

// Deterministic values in (-0.5, 0.5) for parameters.
inline std::vector<float> initial_params(size_t n) {
    std::vector<float> p(n);
    llmc::Rng rng(7, 1);
    for (auto& x : p) x = (float)rng.uniform() - 0.5f;
    return p;
}

// What GPT2::backward does with the optimizer's hooks, with the gradients given: host values `g` (flat order,
// num_params) are added bucket by bucket where the hooks say (ZeRO 2's bucket buffers, packed; otherwise the model's
// flat buffer), in backward's order (bucket L handed out first, then L-1 .. 0, each announced once written when
// `announce`, bucket L announced last). The CPU backend's "device" memory is host memory.
template <class Model, class Opt>
void backward_with(Model& model, Opt& opt, const std::vector<float>& g, bool last_micro_step, bool announce) {
    const llmc::ParamLayout& layout = model.layout();
    const size_t L = layout.cfg.num_layers;
    llmc::BackwardHooks hooks = opt.backward_hooks(last_micro_step);
    auto write = [&](size_t b) {
        float* packed = hooks.bucket_buffer ? hooks.bucket_buffer(b) : nullptr;
        const std::vector<llmc::FlatRange> ranges = llmc::bucket_ranges(layout, b);
        for (const llmc::FlatRange& r : ranges)
            for (size_t i = r.begin; i < r.end; i++)
                (packed ? packed[llmc::packed_offset(ranges, i)] : model.grads()[i]) += g[i];
    };
    write(L);
    for (size_t l = L; l-- > 0;) {
        write(l);
        if (announce) hooks.bucket_ready(l);
    }
    if (announce) hooks.bucket_ready(L);
}

}  // namespace optimizer_fixture
