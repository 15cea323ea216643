// Parameter layout: an architecture's parameter tensors, described as data (one ParamSpec each), packed into one
// flat buffer.
//
// The flat buffer is the unit that everything else works on: the optimizer steps it, the gradients mirror it, the
// collectives reduce it, and checkpoints store it. Tensors follow the architecture's table; a per-layer tensor is
// stacked over layers (all layers' ln1w, then all layers' ln1b, ...), exactly as in llm.c's model file, so loading a
// model is a single copy. Everything about a tensor that other code needs is derived from its ParamSpec: its place
// in the buffer, its initialisation, AdamW's weight decay, its optimizer group, the gradient bucket it completes
// in, its name in messages and its Hugging Face name.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "config.h"

namespace llmc {

// How a tensor is initialised (the model's init(seed)): zeros, ones, normal(0, std), uniform(-std, std) (then `std`
// is the bound: PyTorch's nn.Linear draws U(+-1/sqrt(fan_in))) or the constant `std`, over its first `rows` rows (0:
// all of them; the rest stay zero, e.g. wte's padded vocabulary rows).
struct ParamInit {
    enum Kind { Zeros, Ones, Normal, Uniform, Constant } kind = Zeros;
    float std = 0;
    size_t rows = 0;
};

// A tensor's name in a Hugging Face checkpoint: `pattern` with "{l}" replaced by the layer, stored transposed
// (Conv1D's (in, out)) or not, `rows` of its first dimension (0: all; wte keeps only the real vocabulary).
struct HfName {
    std::string pattern;
    bool transposed = false;
    size_t rows = 0;
};

// One parameter tensor of an architecture. `shape` is one layer's slice for a per-layer tensor, else the whole
// tensor; weights are (out, in). Gradient buckets (the units the gradients are reduced in while backward runs):
// bucket l < L holds layer l's slices of every per-layer tensor; a tensor that is not per layer is in bucket
// L + `bucket`, which the architecture's backward announces when that tensor's gradient is complete.
struct ParamSpec {
    std::string name;            // "qkvw": messages, checkpoints, the file format's table
    std::vector<size_t> shape;
    bool per_layer = false;
    bool decayed = false;        // AdamW applies weight decay (GPT-2: the 2-D matrices)
    int group = 0;               // optimizer group: which optimizer steps it (a recipe maps groups to optimizers)
    int bucket = 0;              // tensors that are not per layer: which bucket after the layers'
    ParamInit init;
    HfName hf;
    // Matrices stacked by rows in one (layer's) tensor, each its own matrix for an optimizer that transforms whole
    // matrices (Muon): a fused qkv weight is q, k and v.
    size_t row_blocks = 1;
    size_t elements() const;     // of `shape`
};

// A range [begin, end) of the flat buffer.
struct FlatRange {
    size_t begin, end;
};

class ParamLayout {
public:
    ParamLayout() = default;
    explicit ParamLayout(const ModelConfig& c);  // the table of c.arch (llmc/architectures.h)
    ParamLayout(const ModelConfig& c, std::vector<ParamSpec> table);

    ModelConfig cfg;
    std::vector<size_t> sizes;    // elements of each tensor (all layers)
    std::vector<size_t> offsets;  // element offset of each tensor in the flat buffer
    size_t total = 0;             // sum of sizes (unpadded)

    int num_tensors() const { return (int)specs_.size(); }
    const ParamSpec& spec(int t) const { return specs_[(size_t)t]; }
    const char* name(int t) const;  // "wte", "wpe", "ln1w", ... ("?" outside the table)
    bool is_per_layer(int t) const { return spec(t).per_layer; }
    bool is_decayed(int t) const { return spec(t).decayed; }
    // Elements of one layer's slice of a per-layer tensor, and the flat offset of layer l's slice.
    size_t per_layer(int t) const { return sizes[(size_t)t] / cfg.num_layers; }
    size_t slice(int t, size_t l) const { return offsets[(size_t)t] + l * per_layer(t); }
    // Which tensor holds flat element `i` (i < total).
    int tensor_of(size_t i) const;
    // Gradient buckets (see ParamSpec): each a list of flat ranges in flat order, adjacent slices merged; together
    // they cover [0, total) exactly once.
    size_t num_buckets() const;
    std::vector<FlatRange> bucket_ranges(size_t bucket) const;

private:
    std::vector<ParamSpec> specs_;
};

// A flat buffer (parameters or gradients) seen through a layout: the base of the architectures' typed views
// (llmc/gpt2_params.h, llmc/speedrun_params.h), which name the tensors.
template <class T>
struct LayoutViews {
    T* base = nullptr;
    const ParamLayout* layout = nullptr;

    LayoutViews() = default;
    LayoutViews(T* b, const ParamLayout& l) : base(b), layout(&l) {}

    T* tensor(int t) const { return base + layout->offsets[(size_t)t]; }
};

inline size_t num_grad_buckets(const ParamLayout& layout) { return layout.num_buckets(); }
inline std::vector<FlatRange> bucket_ranges(const ParamLayout& layout, size_t bucket) {
    return layout.bucket_ranges(bucket);
}
size_t bucket_elements(const ParamLayout& layout, size_t bucket);
size_t max_bucket_elements(const ParamLayout& layout);

// One tensor's piece inside a range of the flat buffer.
struct TensorSegment {
    int tensor;               // index in the layout's table
    size_t flat_offset;       // first element in the flat buffer
    size_t offset_in_range;   // first element relative to the range's start
    size_t offset_in_tensor;  // first element relative to the tensor's start
    size_t length;
};
// The pieces of each tensor inside the flat range [begin, end), in flat order; padding (>= layout.total) is not
// covered. Every element of [begin, min(end, layout.total)) is in exactly one segment.
std::vector<TensorSegment> range_segments(const ParamLayout& layout, size_t begin, size_t end);

}  // namespace llmc
