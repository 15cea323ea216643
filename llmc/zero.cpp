// ZeRO sharding plan, tensor segments of a shard, and the memory / traffic summary (see zero.h).
#include "zero.h"

#include <algorithm>
#include <cstdio>

#include "error.h"

namespace llmc {

void validate_zero_stage(int stage) {
    if (stage < 0 || stage > 2) fail("ZeRO stage %d: expected 0, 1 or 2", stage);
}

size_t zero_pad_multiple(int world_size, size_t align) {
    if (world_size < 1) fail("ZeRO plan: world size %d, expected at least 1", world_size);
    if (align == 0) fail("ZeRO plan: alignment 0, expected at least 1 element");
    return (size_t)world_size * align;
}

ShardPlan make_shard_plan(size_t num_params, int world_size, int rank, size_t align) {
    size_t multiple = zero_pad_multiple(world_size, align);
    if (rank < 0 || rank >= world_size) fail("ZeRO plan: rank %d, expected 0 <= rank < %d", rank, world_size);
    if (num_params == 0) fail("ZeRO plan: no parameters to shard");
    ShardPlan p;
    p.num_params = num_params;
    p.padded = (num_params + multiple - 1) / multiple * multiple;
    p.shard_size = p.padded / (size_t)world_size;
    p.align = align;
    p.world_size = world_size;
    p.rank = rank;
    return p;
}

std::vector<ShardSegment> range_segments(const ParamLayout& layout, size_t begin, size_t end) {
    std::vector<ShardSegment> segs;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t lo = std::max(begin, layout.offsets[t]);
        size_t hi = std::min(end, layout.offsets[t] + layout.sizes[t]);
        if (lo >= hi) continue;
        segs.push_back(ShardSegment{t, lo, lo - begin, lo - layout.offsets[t], hi - lo});
    }
    return segs;
}

std::vector<FlatRange> bucket_ranges(const ParamLayout& layout, size_t bucket) {
    const size_t L = layout.cfg.num_layers;
    if (bucket > L) fail("gradient bucket %zu, expected 0 .. %zu (L layers + 1)", bucket, L);
    std::vector<FlatRange> slices;
    if (bucket < L) {
        for (int t = 0; t < NUM_PARAM_TENSORS; t++)
            if (ParamLayout::is_per_layer(t)) {
                size_t b = layout.offsets[t] + bucket * layout.per_layer(t);
                slices.push_back({b, b + layout.per_layer(t)});
            }
    } else {
        for (int t : {WTE, WPE, LNFW, LNFB}) slices.push_back({layout.offsets[t], layout.offsets[t] + layout.sizes[t]});
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

std::vector<BucketPiece> bucket_pieces(const ShardPlan& plan, const ParamLayout& layout, size_t bucket) {
    std::vector<BucketPiece> pieces;
    for (const FlatRange& r : bucket_ranges(layout, bucket))
        for (size_t b = r.begin; b < r.end;) {
            const int root = (int)(b / plan.shard_size);
            const size_t e = std::min(r.end, plan.shard_end(root));
            pieces.push_back({b, e, root});
            b = e;
        }
    return pieces;
}

ZeroFootprint zero_footprint(const ShardPlan& plan, const ParamLayout& layout, int stage, size_t act_bytes,
                             int accum_steps) {
    validate_zero_stage(stage);
    if (accum_steps < 1) fail("ZeRO footprint: %d micro-steps, expected at least 1", accum_steps);
    if (layout.total != plan.num_params)
        fail("ZeRO footprint: the layout has %zu parameters but the plan %zu", layout.total, plan.num_params);
    const double N = (double)plan.num_params, P = (double)plan.padded, W = (double)plan.world_size;
    const double frac = (W - 1) / W;
    const size_t state = stage == 0 ? plan.padded : plan.shard_size;
    ZeroFootprint f;
    f.params = plan.padded * act_bytes;
    f.grads = plan.padded * 4;
    f.grad_shard = stage == 2 ? plan.shard_size * 4 : 0;
    f.master = state * 4;
    f.adam_state = 2 * state * 4;
    f.buckets = num_grad_buckets(layout);
    const double norm = 2 * frac * 4;  // the squared norm's one-float all_reduce
    size_t calls = 0;
    for (size_t b = 0; b < f.buckets; b++)
        calls += stage == 0 ? bucket_ranges(layout, b).size() : bucket_pieces(plan, layout, b).size();
    if (stage == 0) {
        f.reductions = calls + 1;
        f.gathers = 0;
        f.wire_bytes = 2 * frac * N * 4 + norm;
    } else {
        const int rounds = stage == 1 ? 1 : accum_steps;  // reductions of every piece per step
        const double own = (double)(plan.logical_end(plan.rank) - plan.logical_begin(plan.rank));
        f.reductions = (size_t)rounds * calls + 1;
        f.gathers = 1;
        f.wire_bytes = rounds * (N - own) * 4 + frac * P * (double)act_bytes + norm;
    }
    return f;
}

namespace {
std::string mib(double bytes) {
    char b[64];
    std::snprintf(b, sizeof b, "%.1f MiB", bytes / (1024.0 * 1024.0));
    return b;
}
}  // namespace

std::string zero_summary(const ShardPlan& plan, const ParamLayout& layout, int stage, size_t act_bytes,
                         int accum_steps) {
    ZeroFootprint f = zero_footprint(plan, layout, stage, act_bytes, accum_steps);
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "ZeRO stage %d over %d rank%s: %zu parameters padded to %zu (multiple of %d x %zu), shard %zu "
                  "elements, this rank [%zu, %zu)\n"
                  "  memory per rank: params %s, grads %s%s%s, master %s, AdamW m+v %s, total %s\n"
                  "  per optimizer step (%d micro-step%s): %zu reduction%s (%zu buckets, issued during backward), "
                  "%zu all_gather%s, ~%s sent per rank (ring)",
                  stage, plan.world_size, plan.world_size == 1 ? "" : "s", plan.num_params, plan.padded,
                  plan.world_size, plan.align, plan.shard_size, plan.begin(), plan.end(), mib(f.params).c_str(),
                  mib(f.grads).c_str(), f.grad_shard ? " + accumulator " : "",
                  f.grad_shard ? mib(f.grad_shard).c_str() : "", mib(f.master).c_str(), mib(f.adam_state).c_str(),
                  mib(f.total()).c_str(), accum_steps, accum_steps == 1 ? "" : "s", f.reductions,
                  f.reductions == 1 ? "" : "s", f.buckets, f.gathers, f.gathers == 1 ? "" : "s",
                  mib(f.wire_bytes).c_str());
    return buf;
}

}  // namespace llmc
