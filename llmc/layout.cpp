#include "layout.h"

#include <algorithm>

#include "architectures.h"
#include "error.h"

namespace llmc {

size_t ParamSpec::elements() const {
    size_t n = 1;
    for (size_t d : shape) n *= d;
    return n;
}

ParamLayout::ParamLayout(const ModelConfig& c) : ParamLayout(c, architecture(c.arch).params(c)) {}

ParamLayout::ParamLayout(const ModelConfig& c, std::vector<ParamSpec> table) : cfg(c), specs_(std::move(table)) {
    size_t off = 0;
    for (const ParamSpec& s : specs_) {
        const size_t n = s.elements() * (s.per_layer ? c.num_layers : 1);
        offsets.push_back(off);
        sizes.push_back(n);
        off += n;
    }
    total = off;
}

const char* ParamLayout::name(int t) const {
    return t >= 0 && t < num_tensors() ? specs_[(size_t)t].name.c_str() : "?";
}

int ParamLayout::tensor_of(size_t i) const {
    if (i >= total) fail("parameter index %zu out of range (total %zu)", i, total);
    for (int t = num_tensors() - 1; t >= 0; t--)
        if (i >= offsets[(size_t)t]) return t;
    return 0;
}

size_t ParamLayout::num_buckets() const {
    int last = -1;  // the highest bucket index of a tensor that is not per layer
    for (const ParamSpec& s : specs_)
        if (!s.per_layer) last = std::max(last, s.bucket);
    return cfg.num_layers + (size_t)(last + 1);
}

std::vector<FlatRange> ParamLayout::bucket_ranges(size_t bucket) const {
    const size_t L = cfg.num_layers;
    if (bucket >= num_buckets())
        fail("gradient bucket %zu, expected 0 .. %zu (L layers + %zu)", bucket, num_buckets() - 1, num_buckets() - L);
    std::vector<FlatRange> slices;
    for (int t = 0; t < num_tensors(); t++) {
        const ParamSpec& s = spec(t);
        if (bucket < L && s.per_layer) slices.push_back({slice(t, bucket), slice(t, bucket) + per_layer(t)});
        if (bucket >= L && !s.per_layer && (size_t)s.bucket == bucket - L)
            slices.push_back({offsets[(size_t)t], offsets[(size_t)t] + sizes[(size_t)t]});
    }
    // Tensors are listed in flat order, so the slices are sorted: merge the adjacent ones, drop empty ones.
    std::vector<FlatRange> ranges;
    for (const FlatRange& r : slices) {
        if (r.begin == r.end) continue;
        if (!ranges.empty() && ranges.back().end == r.begin) ranges.back().end = r.end;
        else ranges.push_back(r);
    }
    return ranges;
}

size_t bucket_elements(const ParamLayout& layout, size_t bucket) {
    size_t n = 0;
    for (const FlatRange& r : layout.bucket_ranges(bucket)) n += r.end - r.begin;
    return n;
}

size_t max_bucket_elements(const ParamLayout& layout) {
    size_t most = 0;
    for (size_t b = 0; b < layout.num_buckets(); b++) most = std::max(most, bucket_elements(layout, b));
    return most;
}

std::vector<TensorSegment> range_segments(const ParamLayout& layout, size_t begin, size_t end) {
    std::vector<TensorSegment> segs;
    for (int t = 0; t < layout.num_tensors(); t++) {
        const size_t lo = std::max(begin, layout.offsets[(size_t)t]);
        const size_t hi = std::min(end, layout.offsets[(size_t)t] + layout.sizes[(size_t)t]);
        if (lo >= hi) continue;
        segs.push_back(TensorSegment{t, lo, lo - begin, lo - layout.offsets[(size_t)t], hi - lo});
    }
    return segs;
}

}  // namespace llmc
