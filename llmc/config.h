// The model configuration: the architecture (llmc/architectures.h) and the shape of the network, and how a shape is
// named on the command line.
//
// Every element count in the project is size_t; the config stores the shape as size_t so products such as
// B*T*C never overflow an int (a real bug at large batch sizes in earlier trainers).
#pragma once

#include <cstddef>
#include <string>

namespace llmc {

struct ModelConfig {
    std::string arch = "gpt2";        // the architecture: its parameter table and its forward/backward
    size_t max_seq_len = 1024;        // maxT: rows of the position embedding
    size_t vocab_size = 50257;        // V: real tokens
    size_t padded_vocab_size = 50304; // Vp: V rounded up to a multiple of 128 (extra wte rows are zero)
    size_t num_layers = 12;           // L
    size_t num_heads = 12;            // NH
    size_t channels = 768;            // C
    // Switches of the architecture that change its function (the speedrun's options, llmc/speedrun_params.h); kept
    // in the model file's header. 0 for GPT-2.
    unsigned arch_flags = 0;

    size_t head_size() const { return channels / num_heads; }
    bool operator==(const ModelConfig& o) const {
        return arch == o.arch && max_seq_len == o.max_seq_len && vocab_size == o.vocab_size &&
               padded_vocab_size == o.padded_vocab_size && num_layers == o.num_layers &&
               num_heads == o.num_heads && channels == o.channels && arch_flags == o.arch_flags;
    }
    std::string describe() const;  // "L=12 NH=12 C=768 maxT=1024 V=50257 Vp=50304" (other architectures: "arch=...")
};

// Round the vocabulary up to a multiple of 128 so the classifier matmul has friendly shapes.
inline size_t pad_vocab(size_t vocab_size) { return (vocab_size + 127) / 128 * 128; }

// Check that a config is usable (C divisible by NH, all sizes positive, Vp >= V). Throws std::runtime_error
// naming the offending value.
void validate_config(const ModelConfig& cfg);

// Build a config from a descriptor:
//   "d12", "d24", "d36", "d48"  GPT-2 124M / 350M / 774M / 1558M as published
//                               (C = 768 / 1024 / 1280 / 1600, NH = 12 / 16 / 20 / 25)
//   "dN" for any other N        L = N, C = 64*N, NH = N (head size 64, the d12 width rule)
//   "L=6,NH=6,C=384[,T=256][,V=50257]"   an explicit shape (keys in any order; maxT and V default to GPT-2's)
// Returns false if `spec` is not a descriptor (then it is treated as a model file path by the caller).
bool parse_model_descriptor(const std::string& spec, ModelConfig* out);

}  // namespace llmc
