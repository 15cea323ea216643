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

ZeroFootprint zero_footprint(const ShardPlan& plan, int stage, size_t act_bytes, int accum_steps) {
    validate_zero_stage(stage);
    if (accum_steps < 1) fail("ZeRO footprint: %d micro-steps, expected at least 1", accum_steps);
    const double N = (double)plan.padded, W = (double)plan.world_size, frac = (W - 1) / W;
    const size_t state = stage == 0 ? plan.padded : plan.shard_size;
    ZeroFootprint f;
    f.params = plan.padded * act_bytes;
    f.grads = plan.padded * 4;
    f.grad_shard = stage == 0 ? 0 : plan.shard_size * 4 * (stage == 2 && accum_steps > 1 ? 2 : 1);
    f.master = state * 4;
    f.adam_state = 2 * state * 4;
    const double norm = 2 * frac * 4;  // the squared norm's one-float all_reduce
    if (stage == 0) {
        f.reductions = 2;
        f.gathers = 0;
        f.wire_bytes = 2 * frac * N * 4 + norm;
    } else {
        const int rs = stage == 1 ? 1 : accum_steps;
        f.reductions = (size_t)rs + 1;
        f.gathers = 1;
        f.wire_bytes = rs * frac * N * 4 + frac * N * (double)act_bytes + norm;
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

std::string zero_summary(const ShardPlan& plan, int stage, size_t act_bytes, int accum_steps) {
    ZeroFootprint f = zero_footprint(plan, stage, act_bytes, accum_steps);
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "ZeRO stage %d over %d rank%s: %zu parameters padded to %zu (multiple of %d x %zu), shard %zu "
                  "elements, this rank [%zu, %zu)\n"
                  "  memory per rank: params %s, grads %s%s%s, master %s, AdamW m+v %s, total %s\n"
                  "  per optimizer step (%d micro-step%s): %zu reduction%s, %zu all_gather%s, ~%s sent per rank "
                  "(ring)",
                  stage, plan.world_size, plan.world_size == 1 ? "" : "s", plan.num_params, plan.padded,
                  plan.world_size, plan.align, plan.shard_size, plan.begin(), plan.end(), mib(f.params).c_str(),
                  mib(f.grads).c_str(), f.grad_shard ? " + shard " : "",
                  f.grad_shard ? mib(f.grad_shard).c_str() : "", mib(f.master).c_str(), mib(f.adam_state).c_str(),
                  mib(f.total()).c_str(), accum_steps, accum_steps == 1 ? "" : "s", f.reductions,
                  f.reductions == 1 ? "" : "s", f.gathers, f.gathers == 1 ? "" : "s", mib(f.wire_bytes).c_str());
    return buf;
}

}  // namespace llmc
