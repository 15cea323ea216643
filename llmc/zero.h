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
// Stages (docs/distributed.md has the formulas):
//   0  every rank keeps everything; the gradients are all-reduced at the last micro-step
//   1  AdamW m, v and the fp32 master weights exist only for the rank's shard; at the last micro-step each
//      gradient piece is reduced to the rank that owns it; the updated parameters are all-gathered
//   2  as 1, but the gradients are reduced during every micro-step's backward, bucket by bucket, and the rank's
//      pieces added into a sharded fp32 accumulator; there is no full gradient buffer: backward accumulates each
//      bucket into a small pool of bucket buffers that are reused once their reduction has completed (below)
// The reductions go bucket by bucket (one layer's gradients at a time) while backward runs: see below.
#pragma once

#include <cstddef>
#include <functional>
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
    // stores for that rank, so a run on N ranks can resume on M. Both ends are clamped to num_params, so the ranges
    // of ranks 0 .. W-1 tile [0, num_params) in order: a shard that lies entirely in the padding (a small model on
    // many ranks) has the empty range [num_params, num_params), which a checkpoint reader accepts as the next tile.
    size_t logical_begin(int r) const { return shard_begin(r) < num_params ? shard_begin(r) : num_params; }
    size_t logical_end(int r) const { return shard_end(r) < num_params ? shard_end(r) : num_params; }
};

// The multiple the flat buffers are padded to (ModelOptions::pad_to): world_size * align.
size_t zero_pad_multiple(int world_size, size_t align = 128);

// Fails on world_size < 1, rank outside [0, world_size), align 0 or num_params 0.
ShardPlan make_shard_plan(size_t num_params, int world_size, int rank, size_t align = 128);

// The pieces inside rank r's shard.
inline std::vector<TensorSegment> shard_segments(const ShardPlan& plan, const ParamLayout& layout, int r) {
    return range_segments(layout, plan.shard_begin(r), plan.shard_end(r));
}

// A bucket range cut at the shard boundaries: [begin, end) lies in rank `root`'s shard (ZeRO >= 1 reduces each
// piece to the rank that owns it). In flat order; only non-empty pieces.
struct BucketPiece {
    size_t begin, end;
    int root;
};
std::vector<BucketPiece> bucket_pieces(const ShardPlan& plan, const ParamLayout& layout, size_t bucket);

// ZeRO 2's bucket buffers. Backward accumulates bucket b into a buffer that holds the bucket's ranges back to back
// in flat order ("packed": bucket_elements() floats; packed_offset() maps a flat element to its place). Bucket L
// (wte, wpe, lnfw, lnfb) has a buffer of its own: the classifier writes wte's gradient first and the encoder last,
// so it lives through the whole backward. The layer buckets share ZERO2_LAYER_BUFFERS buffers, bucket l taking
// buffer (L-1-l) mod ZERO2_LAYER_BUFFERS: before layer l's backward reuses a buffer, the reduction of the bucket
// that held it (layer l + ZERO2_LAYER_BUFFERS) must have completed, so that reduction has the backward of the
// ZERO2_LAYER_BUFFERS - 1 layers in between to hide behind (llmc/grad_bucket_pool.h).
constexpr size_t ZERO2_LAYER_BUFFERS = 2;
// Bytes of training state one rank holds (activations excluded): exactly what the model (params, grads) and the
// optimizer (the rest) allocate for a stage. A pure function of the shapes, for start-up summaries and memory plans:
//   zero_memory(ParamLayout(cfg), world_size, stage, act_bytes)   act_bytes: 2 (bf16, CUDA) or 4 (fp32, CPU)
// P = the padded parameter count (a multiple of world_size x align), S = P / world_size:
//   stage 0:  params aP, grads 4P,                                   master 4P,  m 4P,  v 4P
//   stage 1:  params aP, grads 4P,                                   master 4S,  m 4S,  v 4S
//   stage 2:  params aP, accumulator 4S, bucket pool 4 x (bucket L + min(L, ZERO2_LAYER_BUFFERS) layer buckets),
//                                                                    master 4S,  m 4S,  v 4S
//   reduce_bytes 2 (--reduce-dtype bf16), every stage: a bf16 staging buffer of the largest bucket, 2 x max(B_L, B_l)
struct ZeroMemory {
    size_t params = 0;       // the full parameters (act_t), every stage
    size_t grads = 0;        // stages 0, 1: the full fp32 gradient buffer backward accumulates into (0 at stage 2)
    size_t accumulator = 0;  // stage 2: the fp32 sum over micro-steps of this rank's shard of the reduced gradients
    size_t bucket_pool = 0;  // stage 2: the fp32 bucket buffers backward accumulates into (see above)
    size_t master = 0;       // fp32 master weights: everything at stage 0, the rank's shard at 1 and 2
    size_t adam_m = 0, adam_v = 0;  // AdamW's moments, the same extent as master
    size_t wire = 0;         // --reduce-dtype bf16: the staging buffer the gradients are reduced in (see above)
    size_t total() const { return params + grads + accumulator + bucket_pool + master + adam_m + adam_v + wire; }
};
ZeroMemory zero_memory(const ParamLayout& layout, int world_size, int stage, size_t act_bytes, size_t align = 128,
                       size_t reduce_bytes = 4);
// The same for an optimizer that shards over `plan` (its comm: a sharding group of --shard-group, or one rank with
// --sync-every alone) in a model whose flat buffers have `model_padded` elements (ModelOptions::pad_to, a multiple
// of the world size x align, >= plan.padded): params and grads follow the model, the rest the plan. The dry run's
// memory plan (llmc/memory_plan.h) takes this form.
ZeroMemory zero_memory(const ParamLayout& layout, size_t model_padded, const ShardPlan& plan, int stage,
                       size_t act_bytes, size_t reduce_bytes = 4);
// Elements of m, v and the master weights (ZeroOptimizer::state_count()): the whole padded buffer at stage 0, the shard
// at 1 and 2.
inline size_t zero_state_elements(const ShardPlan& plan, int stage) { return stage == 0 ? plan.padded : plan.shard_size; }

// Per-rank memory of the training state and the collective traffic of one optimizer step.
struct ZeroFootprint {
    ZeroMemory memory;  // bytes held by one rank
    // Collective calls per optimizer step with `accum` micro-steps: `reductions` counts the gradient reductions
    // (stage 0: one all_reduce per bucket range; stage 1: one reduce per bucket piece; stage 2: one reduce per
    // piece and micro-step) plus the norm's 4-byte all_reduce; `gathers` the parameter all_gathers.
    size_t buckets = 0, reductions = 0, gathers = 0;
    // Bytes this rank sends per step with ring algorithms: an all_reduce of n bytes 2(W-1)/W n, an all_gather
    // (W-1)/W n, a reduce n on every rank but the root (each piece passes once along the ring to its owner, so a
    // rank sends every gradient byte it does not own). Padding is never reduced (it is zero everywhere).
    double wire_bytes = 0;
};
// model_padded: the model's flat buffer length (0: plan.padded, the flat layout).
ZeroFootprint zero_footprint(const ShardPlan& plan, const ParamLayout& layout, int stage, size_t act_bytes,
                             int accum_steps, size_t model_padded = 0);

// Multi-line summary printed at start-up: stage, padding, shard, per-rank memory (with the other stages' totals, to
// compare) and traffic per step.
std::string zero_summary(const ShardPlan& plan, const ParamLayout& layout, int stage, size_t act_bytes,
                         int accum_steps, size_t model_padded = 0);

// Fails unless 0 <= stage <= 2.
void validate_zero_stage(int stage);

}  // namespace llmc
