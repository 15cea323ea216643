// The device memory one rank of a training run allocates, computed without allocating anything (--dry-run).
//
// Exact by construction: every line comes from the function the allocating code itself uses, never from a second
// copy of a formula:
//   parameters, gradients, optimizer state   zero_memory() (llmc/zero.h), the ZeRO stage's per-rank memory, for the
//                                            model padded as the trainer pads it (model_options_for) and the shard
//                                            plan its optimizer builds (make_shard_plan over optimizer_shard_ranks():
//                                            the sharding group of --shard-group, one rank with --sync-every alone)
//   optimizer and trainer scalars            the optimizer's gradient-norm float and the trainer's loss accumulator
//   activations                              activation_plan<Backend>() (llmc/models.h), the table the model
//                                            allocates from
//   backend buffers                          Backend::scratch_plan(): its op-private scratch at the sizes one training
//                                            step grows it to, and (CUDA) the cuBLASLt workspace
// Not included (not ours to count, or not held during training): the CUDA context and its kernel images, NCCL's own
// buffers, the allocator's rounding of each request, and the short-lived buffers of checkpointing and HellaSwag.
// Listed apart, not in the device total: --sync-every's outer state, which lives in host memory (llmc/outer_sync.h).
//
// The ranks a dry run plans for: -pn (else the launcher's world size), placed node by node with -pg ranks per node
// (else the launcher's ranks per node when it started as many ranks, else all on one node), grouped by --shard-group
// with the run's own resolve_shard_group() and make_dp_mesh() (llmc/dp_mesh.h). `--shard-group node` needs to know
// the ranks per node: without -pg or a launcher of that many ranks the dry run refuses it.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "backend.h"
#include "cli.h"
#include "config.h"
#include "dist_info.h"
#include "dp_mesh.h"
#include "error.h"
#include "layout.h"
#include "model.h"
#include "models.h"
#include "zero.h"

namespace llmc {

// ZeRO stage of a run: -z, or 1 with several ranks and 0 with one.
inline int zero_stage_for(const TrainOptions& o, int world) { return o.zero_stage >= 0 ? o.zero_stage : (world > 1 ? 1 : 0); }

// The model options the trainer creates its model with.
inline ModelOptions model_options_for(const TrainOptions& o, int world) {
    ModelOptions mo;
    mo.pad_to = zero_pad_multiple(world);
    mo.recompute_gelu = o.recompute >= 1;
    mo.recompute_layernorm = o.recompute >= 2;
    mo.classifier_chunk_rows = (size_t)o.classifier_chunk;
    return mo;
}

// Whether every rank's AdamW state is its own, unsharded (--sync-every without --shard-group: every rank a replica);
// otherwise the optimizer shards over the rank's sharding group (one group of every rank by default).
inline bool optimizer_is_rank_local(const TrainOptions& o) { return o.sync_every > 0 && o.shard_group.empty(); }
// The ranks of the comm the trainer builds its optimizer over (llmc/trainer.h, make_optimizers), whose size its shard
// plan divides the parameters by.
inline int optimizer_shard_ranks(const TrainOptions& o, const DpMesh& mesh) {
    return optimizer_is_rank_local(o) ? 1 : mesh.shard_size;
}

// Ranks per node for a dry run's layout (see the top): -pg, else the launcher's when it started `world` ranks, else 0
// (unknown: every rank on one node, and --shard-group node refused).
inline int dry_run_ranks_per_node(const TrainOptions& o, int world, const DistInfo& launched) {
    if (o.gpus_per_node > 0) return o.gpus_per_node;
    if (o.gpus_per_node == 0) fail("-pg 0: the number of ranks per node must be at least 1");
    return launched.launcher != "single" && launched.world_size == world ? launched.local_size : 0;
}

// Rank 0's place in the data-parallel mesh of a dry run of `world` ranks, `per_node` to a node (0: unknown).
inline DpMesh dry_run_mesh(const TrainOptions& o, int world, int per_node) {
    if (world < 1) fail("-pn %d: the number of processes must be at least 1", world);
    if (per_node == 0 && o.shard_group == "node")
        fail("--shard-group node with --dry-run: the plan needs the ranks per node; give -pg N (ranks per node) or "
             "the group size as a number (--shard-group N)");
    const int local = per_node == 0 || per_node > world ? world : per_node;
    std::vector<DistInfo> all((size_t)world);
    for (int r = 0; r < world; r++) {
        DistInfo& d = all[(size_t)r];
        d.rank = r, d.world_size = world, d.local_size = local, d.local_rank = r % local;
        d.node = r / local, d.num_nodes = (world + local - 1) / local, d.launcher = "--dry-run";
    }
    return make_dp_mesh(all, 0, resolve_shard_group(o.shard_group, all, zero_stage_for(o, world)));
}

struct MemoryPlan {
    struct Group {
        std::string title;
        std::vector<BufferSize> items;
    };
    std::vector<Group> groups;
    std::vector<BufferSize> host;  // held in host memory, not counted in total(): --sync-every's outer state
    std::string heading;

    size_t total() const {
        size_t t = 0;
        for (const Group& g : groups)
            for (const BufferSize& b : g.items) t += b.bytes();
        return t;
    }
};

// How the optimizer's state is sharded, for the plan's heading.
inline std::string describe_sharding(const TrainOptions& o, const DpMesh& mesh, int stage) {
    char s[256];
    if (optimizer_is_rank_local(o))
        std::snprintf(s, sizeof s, "--sync-every %d: every rank a replica, its optimizer state whole", o.sync_every);
    else if (mesh.hybrid())
        std::snprintf(s, sizeof s, "ZeRO-%d within %d group(s) of %d rank(s) (--shard-group %s)%s", stage,
                      mesh.replicas, mesh.shard_size, o.shard_group.c_str(),
                      o.sync_every > 0 ? ", each group a replica of --sync-every" : "");
    else
        std::snprintf(s, sizeof s, "ZeRO-%d over %d rank(s)%s", stage, mesh.shard_size,
                      o.sync_every > 0 ? ", one replica of --sync-every" : "");
    return s;
}

// One rank's plan for a run with these options on the ranks of `mesh` (dry_run_mesh; every shard of a plan has the
// same size, so any rank's plan is every rank's).
template <class Backend>
MemoryPlan plan_training_memory(const TrainOptions& o, const ModelConfig& cfg, const DpMesh& mesh,
                                const BackendOptions& bo) {
    const size_t B = (size_t)o.batch_size, T = (size_t)o.seq_len;
    const int world = mesh.world_size, stage = zero_stage_for(o, world);
    validate_zero_stage(stage);
    const ModelOptions mo = model_options_for(o, world);
    const std::vector<BufferSize> acts = activation_plan<Backend>(cfg, B, T, mo);  // validates the shape
    const ParamLayout layout(cfg);
    const size_t A = sizeof(typename Backend::act_t), padded = Model<Backend>::padded_params(layout, mo);
    const ShardPlan plan = make_shard_plan(layout.total, optimizer_shard_ranks(o, mesh), 0, 128);  // the optimizer's
    const ZeroMemory z = zero_memory(layout, padded, plan, stage, A, o.reduce_dtype == "bf16" ? 2 : 4);

    MemoryPlan p;
    char head[640];
    std::snprintf(head, sizeof head, "device memory plan per rank: %s, B=%zu T=%zu, %s backend, %d rank%s, %s, -r %d",
                  cfg.describe().c_str(), B, T, Backend::name, world, world == 1 ? "" : "s",
                  describe_sharding(o, mesh, stage).c_str(), o.recompute);
    p.heading = head;
    const char* act_type = A == 2 ? "bf16" : "fp32";
    const std::string state = stage == 0           ? "fp32, full"
                              : plan.world_size == 1 ? "fp32, whole (a shard of 1 rank)"
                                                     : "fp32, shard of " + std::to_string(plan.world_size) + " ranks";
    p.groups.push_back({"training state", {
        {"parameters", std::string(act_type) + ", padded to " + std::to_string(padded), padded, A},
        {"gradients", stage == 2 ? "none (ZeRO-2: bucket buffers)" : "fp32, full buffer", z.grads / 4, 4},
        {"gradient accumulator", stage == 2 ? state + " (ZeRO-2)" : "none below ZeRO-2", z.accumulator / 4, 4},
        {"gradient bucket buffers", stage == 2 ? "fp32, wte/wpe/lnf + layer pool" : "none below ZeRO-2",
         z.bucket_pool / 4, 4},
        {"master weights", state, z.master / 4, 4},
        {"AdamW m and v", state, (z.adam_m + z.adam_v) / 4, 4},
        {"grad norm, loss accumulator", "fp32 scalars", 2, 4},
    }});
    if (z.wire)
        p.groups.back().items.push_back({"gradient reduction staging", "bf16, the largest bucket", z.wire / 2, 2});
    p.groups.push_back({"activations (model)", acts});
    p.groups.push_back({"backend buffers", Backend::scratch_plan(B, T, cfg.channels, cfg.num_heads, bo)});
    if (o.sync_every > 0)  // OuterSync: theta_last, momentum and a staging copy of the rank's state range
        p.host.push_back({"outer state (--sync-every)", "fp32 theta_last, momentum, staging",
                          3 * zero_state_elements(plan, stage), 4});
    return p;
}

// The plan as text, ending with the line "device memory per rank: X.XX GiB".
inline std::string render_memory_plan(const MemoryPlan& p) {
    auto mib = [](size_t bytes) {
        char b[32];
        std::snprintf(b, sizeof b, "%10.1f MiB", (double)bytes / (1 << 20));
        return std::string(b);
    };
    std::string s = p.heading + "\n";
    char line[256];
    for (const MemoryPlan::Group& g : p.groups) {
        size_t sum = 0;
        for (const BufferSize& b : g.items) sum += b.bytes();
        std::snprintf(line, sizeof line, "  %-65s %s\n", g.title.c_str(), mib(sum).c_str());
        s += line;
        for (const BufferSize& b : g.items) {
            std::snprintf(line, sizeof line, "    %-28s %-34s %s\n", b.name, b.shape.c_str(), mib(b.bytes()).c_str());
            s += line;
        }
    }
    if (!p.host.empty()) s += "  host memory, not in the device total:\n";
    for (const BufferSize& b : p.host) {
        std::snprintf(line, sizeof line, "    %-28s %-34s %s\n", b.name, b.shape.c_str(), mib(b.bytes()).c_str());
        s += line;
    }
    s += "  not included: the CUDA context, NCCL's buffers, allocator rounding, checkpoint/eval transients\n";
    std::snprintf(line, sizeof line, "device memory per rank: %.2f GiB\n", (double)p.total() / (1024.0 * 1024.0 * 1024.0));
    return s + line;
}

}  // namespace llmc
