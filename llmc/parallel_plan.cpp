#include "parallel_plan.h"


#include <cstdio>

#include "error.h"

namespace llmc {

DpMesh ParallelPlan::replica_mesh() const {
    if (!periodic() || !shard_group.empty()) return mesh;
    DpMesh m;
    m.world_size = m.replicas = world();
    m.replica_rank = m.dp_rank = mesh.dp_rank;
    return m;
}

ZeroMemory ParallelPlan::memory(const ParamLayout& layout, size_t act_bytes) const {
    const size_t model_padded = (layout.total + pad_to() - 1) / pad_to() * pad_to();
    ZeroMemory m = zero_memory(layout, model_padded, shard_plan(layout.total), zero_stage, act_bytes,
                               dtype_size(wire));
    // Whole-matrix groups: the state covers what this rank owns (llmc/data_parallel_owned.h), not its flat shard.
    if (has_whole_matrices() && zero_stage >= 1) {
        const size_t own = owned_elements(ownership(layout), state_ranks())[(size_t)state_rank()];
        m.master = m.adam_m = m.adam_v = own * sizeof(float);
        if (zero_stage == 2) m.accumulator = own * sizeof(float);
    }
    return m;
}

size_t ParallelPlan::outer_host_floats(const ParamLayout& layout) const {
    return periodic() ? 3 * zero_state_elements(shard_plan(layout.total), zero_stage) : 0;
}

std::string ParallelPlan::describe() const {
    char s[256];
    if (rank_is_replica())
        std::snprintf(s, sizeof s, "--sync-every %d: every rank a replica, its optimizer state whole", outer.every);
    else if (mesh.hybrid())
        std::snprintf(s, sizeof s, "ZeRO-%d within %d group(s) of %d rank(s) (--shard-group %s)%s", zero_stage,
                      mesh.replicas, mesh.shard_size, shard_group.c_str(),
                      periodic() ? ", each group a replica of --sync-every" : "");
    else
        std::snprintf(s, sizeof s, "ZeRO-%d over %d rank(s)%s", zero_stage, mesh.shard_size,
                      periodic() ? ", one replica of --sync-every" : "");
    return s;
}

ParallelPlan make_parallel_plan(const ParallelOptions& o, const DpMesh& mesh) {
    ParallelPlan p;
    p.mesh = mesh;
    p.zero_stage = zero_stage_for(o.zero_stage, mesh.world_size);
    validate_zero_stage(p.zero_stage);
    p.wire = o.wire;
    p.outer = o.outer;
    p.shard_group = o.shard_group;
    p.group_sharding = o.group_sharding;
    return p;
}

}  // namespace llmc
