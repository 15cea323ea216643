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

namespace {
// zero_memory for a given plan (its padding and shard size) in a model of `model_padded` elements (0: plan.padded).
ZeroMemory memory_of(const ShardPlan& plan, const ParamLayout& layout, int stage, size_t act_bytes,
                     size_t model_padded = 0) {
    validate_zero_stage(stage);
    if (model_padded == 0) model_padded = plan.padded;
    if (model_padded < plan.padded)
        fail("ZeRO memory: the model's flat buffers have %zu elements, fewer than the plan over %d ranks pads to (%zu)",
             model_padded, plan.world_size, plan.padded);
    const size_t state = zero_state_elements(plan, stage);  // elements of master, m and v
    ZeroMemory m;
    m.params = model_padded * act_bytes;
    if (stage == 2) {
        const size_t L = layout.cfg.num_layers;
        m.accumulator = plan.shard_size * 4;
        size_t pool = std::min(L, ZERO2_LAYER_BUFFERS) * bucket_elements(layout, 0);  // the layers' shared buffers
        for (size_t b = L; b < num_grad_buckets(layout); b++) pool += bucket_elements(layout, b);  // one each
        m.bucket_pool = 4 * pool;
    } else {
        m.grads = model_padded * 4;
    }
    m.master = m.adam_m = m.adam_v = state * 4;
    return m;
}
}  // namespace

ZeroMemory zero_memory(const ParamLayout& layout, int world_size, int stage, size_t act_bytes, size_t align,
                       size_t reduce_bytes) {
    if (reduce_bytes != 4 && reduce_bytes != 2) fail("zero_memory: reduce_bytes %zu, expected 4 or 2", reduce_bytes);
    ZeroMemory m = memory_of(make_shard_plan(layout.total, world_size, 0, align), layout, stage, act_bytes);
    if (reduce_bytes == 2) m.wire = 2 * max_bucket_elements(layout);
    return m;
}

ZeroMemory zero_memory(const ParamLayout& layout, size_t model_padded, const ShardPlan& plan, int stage,
                       size_t act_bytes, size_t reduce_bytes) {
    if (reduce_bytes != 4 && reduce_bytes != 2) fail("zero_memory: reduce_bytes %zu, expected 4 or 2", reduce_bytes);
    if (layout.total != plan.num_params)
        fail("zero_memory: the layout has %zu parameters but the plan %zu", layout.total, plan.num_params);
    ZeroMemory m = memory_of(plan, layout, stage, act_bytes, model_padded);
    if (reduce_bytes == 2) m.wire = 2 * max_bucket_elements(layout);
    return m;
}

ZeroFootprint zero_footprint(const ShardPlan& plan, const ParamLayout& layout, int stage, size_t act_bytes,
                             int accum_steps, size_t model_padded) {
    validate_zero_stage(stage);
    if (accum_steps < 1) fail("ZeRO footprint: %d micro-steps, expected at least 1", accum_steps);
    if (layout.total != plan.num_params)
        fail("ZeRO footprint: the layout has %zu parameters but the plan %zu", layout.total, plan.num_params);
    const double N = (double)plan.num_params, P = (double)plan.padded, W = (double)plan.world_size;
    const double frac = (W - 1) / W;
    ZeroFootprint f;
    f.memory = memory_of(plan, layout, stage, act_bytes, model_padded);
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
                         int accum_steps, size_t model_padded) {
    const ZeroFootprint f = zero_footprint(plan, layout, stage, act_bytes, accum_steps, model_padded);
    const ZeroMemory& m = f.memory;
    char grads[256];
    if (stage == 2)
        std::snprintf(grads, sizeof grads, "grad accumulator %s + bucket buffers %s (wte/wpe/lnf + %zu layers)",
                      mib(m.accumulator).c_str(), mib(m.bucket_pool).c_str(),
                      std::min((size_t)layout.cfg.num_layers, ZERO2_LAYER_BUFFERS));
    else
        std::snprintf(grads, sizeof grads, "grads %s", mib(m.grads).c_str());
    std::string by_stage;
    for (int s = 0; s <= 2; s++)
        by_stage += (s ? ", " : "") + std::string("ZeRO-") + std::to_string(s) + " " +
                    mib((double)memory_of(plan, layout, s, act_bytes, model_padded).total());
    char buf[1536];
    std::snprintf(buf, sizeof buf,
                  "ZeRO stage %d over %d rank%s: %zu parameters padded to %zu (multiple of %d x %zu), shard %zu "
                  "elements, this rank [%zu, %zu)\n"
                  "  memory per rank: params %s, %s, master %s, AdamW m+v %s, total %s (%s; activations excluded)\n"
                  "  per optimizer step (%d micro-step%s): %zu reduction%s (%zu buckets, issued during backward), "
                  "%zu all_gather%s, ~%s sent per rank (ring)",
                  stage, plan.world_size, plan.world_size == 1 ? "" : "s", plan.num_params, plan.padded,
                  plan.world_size, plan.align, plan.shard_size, plan.begin(), plan.end(), mib(m.params).c_str(), grads,
                  mib(m.master).c_str(), mib(m.adam_m + m.adam_v).c_str(), mib(m.total()).c_str(), by_stage.c_str(),
                  accum_steps, accum_steps == 1 ? "" : "s", f.reductions, f.reductions == 1 ? "" : "s", f.buckets,
                  f.gathers, f.gathers == 1 ? "" : "s", mib(f.wire_bytes).c_str());
    return buf;
}

}  // namespace llmc
