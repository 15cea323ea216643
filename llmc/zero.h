// The ZeRO sharding plan: which contiguous range of the flat parameter buffer each rank owns.
//
// The flat buffers (params, grads, optimizer state; ParamLayout order) are padded to `padded` elements, a multiple
// of world_size * align, so every rank owns one shard of shard_size = padded / world_size elements that starts on an
// `align`-element boundary (128 elements = 256 bytes of bf16, 512 bytes of fp32: aligned vector loads, and NCCL's
// preferred alignment). No tensor has to be divisible by the world size: a tensor may straddle shards, and
// shard_segments() lists the pieces of each tensor inside a shard (AdamW applies weight decay per tensor).
// The padding past num_params is zero in every buffer and stays zero (a zero gradient and zero state give a zero
// AdamW update and nothing to decay).
//
// Stages (DESIGN.md, "Distributed semantics"; docs/distributed.md has the formulas):
//   0  every rank keeps everything; the gradients are all-reduced at the last micro-step
//   1  AdamW m, v and the fp32 master weights exist only for the rank's shard; at the last micro-step each
//      gradient piece is reduced to the rank that owns it; the updated parameters are all-gathered
//   2  as 1, but the gradients are reduced after every micro-step and added into a sharded fp32 accumulator
// The reductions go bucket by bucket (one layer's gradients at a time) while backward runs: see below.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "layout.h"

namespace llmc {

struct ShardPlan {
    size_t num_params = 0;  // logical elements (ParamLayout::total)
    size_t padded = 0;      // flat buffer length: a multiple of world_size * align, >= num_params
    size_t shard_size = 0;  // padded / world_size
    size_t align = 1;
    int world_size = 1, rank = 0;

    size_t shard_begin(int r) const { return (size_t)r * shard_size; }
    size_t shard_end(int r) const { return (size_t)(r + 1) * shard_size; }
    size_t begin() const { return shard_begin(rank); }  // this rank's [begin, end)
    size_t end() const { return shard_end(rank); }
    // The part of rank r's shard that holds real parameters, [logical_begin, logical_end): what a checkpoint
    // stores for that rank, so a run on N ranks can resume on M. It always starts at the shard's start; it is
    // empty (logical_end == logical_begin) for a shard that lies entirely in the padding.
    size_t logical_begin(int r) const { return shard_begin(r); }
    size_t logical_end(int r) const {
        size_t e = shard_end(r) < num_params ? shard_end(r) : num_params;
        return e > shard_begin(r) ? e : shard_begin(r);
    }
};

// The multiple the flat buffers are padded to (ModelOptions::pad_to): world_size * align.
size_t zero_pad_multiple(int world_size, size_t align = 128);

// Fails on world_size < 1, rank outside [0, world_size), align 0 or num_params 0.
ShardPlan make_shard_plan(size_t num_params, int world_size, int rank, size_t align = 128);

// One tensor's piece inside a range of the flat buffer.
struct ShardSegment {
    int tensor;               // ParamTensor index
    size_t flat_offset;       // first element in the flat buffer
    size_t offset_in_range;   // first element relative to the range's start (index into the shard's buffers)
    size_t offset_in_tensor;  // first element relative to the tensor's start
    size_t length;
};

// The pieces of each tensor inside the flat range [begin, end), in flat order; padding (>= layout.total) is not
// covered. Every element of [begin, min(end, layout.total)) is in exactly one segment.
std::vector<ShardSegment> range_segments(const ParamLayout& layout, size_t begin, size_t end);
// The pieces inside rank r's shard.
inline std::vector<ShardSegment> shard_segments(const ShardPlan& plan, const ParamLayout& layout, int r) {
    return range_segments(layout, plan.shard_begin(r), plan.shard_end(r));
}

// Gradient buckets: the units in which gradients are reduced while backward still runs (llmc/optimizer.h).
// Bucket l < L holds layer l's slice of each of the 12 per-layer tensors (complete once backward has passed layer
// l's ln1); bucket L holds wte, wpe, lnfw and lnfb (complete after the encoder's backward: wte is tied to the
// classifier, whose backward is the first op). A bucket is a list of flat ranges in flat order, adjacent slices
// merged (wte + wpe are one range, lnfw + lnfb another; with L = 1 a layer's 12 slices are one range). Together
// the buckets cover [0, layout.total) exactly once; the padding is in no bucket.
struct FlatRange {
    size_t begin, end;
};
inline size_t num_grad_buckets(const ParamLayout& layout) { return layout.cfg.num_layers + 1; }
std::vector<FlatRange> bucket_ranges(const ParamLayout& layout, size_t bucket);

// A bucket range cut at the shard boundaries: [begin, end) lies in rank `root`'s shard (ZeRO >= 1 reduces each
// piece to the rank that owns it). In flat order; only non-empty pieces.
struct BucketPiece {
    size_t begin, end;
    int root;
};
std::vector<BucketPiece> bucket_pieces(const ShardPlan& plan, const ParamLayout& layout, size_t bucket);

// Per-rank memory of the training state and the collective traffic of one optimizer step.
struct ZeroFootprint {
    // Bytes held by one rank.
    size_t params = 0;       // the full parameters (act_t), every stage
    size_t grads = 0;        // the full fp32 gradient buffer the backward pass accumulates into, every stage here
    size_t grad_shard = 0;   // stage 2: the fp32 accumulator of the rank's shard (stage 1 reduces in place: none)
    size_t master = 0;       // fp32 master weights: full for stage 0, shard for 1 and 2
    size_t adam_state = 0;   // m and v: full for stage 0, shard for 1 and 2
    size_t total() const { return params + grads + grad_shard + master + adam_state; }
    // Collective calls per optimizer step with `accum` micro-steps: `reductions` counts the gradient reductions
    // (stage 0: one all_reduce per bucket range; stage 1: one reduce per bucket piece; stage 2: one reduce per
    // piece and micro-step) plus the norm's 4-byte all_reduce; `gathers` the parameter all_gathers.
    size_t buckets = 0, reductions = 0, gathers = 0;
    // Bytes this rank sends per step with ring algorithms: an all_reduce of n bytes 2(W-1)/W n, an all_gather
    // (W-1)/W n, a reduce n on every rank but the root (each piece passes once along the ring to its owner, so a
    // rank sends every gradient byte it does not own). Padding is never reduced (it is zero everywhere).
    double wire_bytes = 0;
};
ZeroFootprint zero_footprint(const ShardPlan& plan, const ParamLayout& layout, int stage, size_t act_bytes,
                             int accum_steps);

// Multi-line summary printed at start-up: stage, padding, shard, per-rank memory and traffic per step.
std::string zero_summary(const ShardPlan& plan, const ParamLayout& layout, int stage, size_t act_bytes,
                         int accum_steps);

// Fails unless 0 <= stage <= 2.
void validate_zero_stage(int stage);

}  // namespace llmc
