// Where a model's backward puts the parameter gradients. The model knows its gradient buckets (llmc/layout.h: which
// flat ranges complete together) and nothing of what becomes of them: before backward's first op on a bucket it asks
// the sink for that bucket's memory, and once the ops that complete the bucket are enqueued it says so. The
// data-parallel gradient reduction (llmc/grad_reducer.h) is a sink that reduces each bucket as it completes; FlatGrads, below,
// keeps them in one flat buffer of its own.
//
// Parameter gradients accumulate with += (over micro-steps, and over ops within one backward).
#pragma once

#include <cstddef>
#include <vector>

#include "error.h"
#include "layout.h"

namespace llmc {

// The index in a buffer that holds the ranges back to back (in their order) of flat element `flat`. Fails when
// `flat` lies in none of them.
inline size_t packed_offset(const std::vector<FlatRange>& ranges, size_t flat) {
    size_t before = 0;  // elements of the ranges preceding the one that holds `flat`
    for (const FlatRange& r : ranges) {
        if (flat >= r.begin && flat < r.end) return before + (flat - r.begin);
        before += r.end - r.begin;
    }
    fail("packed_offset: flat element %zu lies in none of the bucket's %zu ranges", flat, ranges.size());
}

// The memory of one bucket's gradients: at(flat) is where the gradient of flat parameter `flat` accumulates, in a
// buffer laid out like the whole flat buffer, or in one that holds only the bucket's ranges back to back (packed).
class BucketGrads {
public:
    explicit BucketGrads(float* flat_buffer) : base_(flat_buffer) {}
    BucketGrads(float* packed, const std::vector<FlatRange>& ranges) : base_(packed), ranges_(&ranges) {}
    float* at(size_t flat) const { return ranges_ ? base_ + packed_offset(*ranges_, flat) : base_ + flat; }

private:
    float* base_;
    const std::vector<FlatRange>* ranges_ = nullptr;
};

class GradSink {
public:
    virtual ~GradSink() = default;
    // Bucket `bucket`'s memory, zero or holding the earlier micro-steps' sums, free for the main stream's next op.
    // Called once per bucket and backward, before the first op that writes it, in the architecture's order.
    virtual BucketGrads open_bucket(size_t bucket) = 0;
    // Bucket `bucket` is complete: the ops that finish it are ENQUEUED on the main stream, and no later op of this
    // backward reads or writes it.
    virtual void bucket_done(size_t bucket) = 0;
};

// Gradients kept in one flat fp32 buffer of `padded` elements (the model's padded parameter count), nothing reduced:
// a backward of one process (the reference test, the tools, the tests).
template <class Backend>
class FlatGrads : public GradSink {
public:
    FlatGrads(Backend& be, const ParamLayout& layout, size_t padded)
        : be_(be), total_(layout.total), padded_(padded), grads_(static_cast<float*>(be.alloc(padded * 4))) {
        zero();
    }
    ~FlatGrads() override { be_.free(grads_); }
    FlatGrads(const FlatGrads&) = delete;
    FlatGrads& operator=(const FlatGrads&) = delete;

    BucketGrads open_bucket(size_t) override { return BucketGrads(grads_); }
    void bucket_done(size_t) override {}

    float* get() { return grads_; }
    size_t padded() const { return padded_; }
    void zero() { be_.memset_zero(grads_, padded_ * sizeof(float)); }
    // The gradients of the real parameters (not the padding), fp32, on the host (synchronises).
    std::vector<float> download() {
        std::vector<float> host(total_);
        be_.copy_to_host(host.data(), grads_, total_ * sizeof(float));
        return host;
    }

private:
    Backend& be_;
    size_t total_, padded_;
    float* grads_;
};

}  // namespace llmc
