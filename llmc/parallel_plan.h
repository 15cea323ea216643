// The parallel plan: how the ranks of a run train together, decided once from the options and the launch layout,
// and read by everything that depends on it: the trainer builds its data-parallel strategy from it
// (llmc/data_parallel.h), the dry run prints its memory (llmc/memory_plan.h), the checkpointer writes the files its
// strategy names. Plain data: no comm, no backend.
//
//   ZeRO stage       0: every rank holds the whole optimizer state; 1: the state is sharded, gradients reduced to
//                    their owners at the last micro-step; 2: also reduced at every micro-step into the shard, no
//                    full gradient buffer (llmc/zero.h has the memory and traffic of each)
//   sharding group   --shard-group: the state is sharded within groups of N ranks (llmc/dp_mesh.h), the groups
//                    replicas of one another, each gradient shard all-reduced across them
//   wire dtype       --reduce-dtype: the type gradients cross the ranks in
//   sync period      --sync-every H: every replica (a rank, or a sharding group) trains on its own for H steps, then
//                    an outer step averages them (llmc/outer_sync.h); no gradient crosses replicas
// and what follows from them: the ranks that share one copy of the optimizer state (state_ranks), this rank's part
// of it (shard_plan), the replicas, the padding of the flat buffers, the memory per rank.
//
// Optimizer groups (ParamSpec::group, llmc/layout.h): each group's state is sharded its own way (group_sharding,
// llmc/state_ownership.h): in flat ranges of the shard plan (AdamW's elementwise state: any cut works), or in whole
// matrices, each with one owner rank (an optimizer such as Muon, whose Newton-Schulz needs a whole matrix:
// docs/architecture.md, "Adding an optimizer"). GPT-2's one group, AdamW's, is in flat ranges.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "backend.h"
#include "dp_mesh.h"
#include "layout.h"
#include "state_ownership.h"
#include "zero.h"

namespace llmc {

// --sync-every's outer optimizer (llmc/outer_sync.h).
struct OuterSyncConfig {
    int every = 0;          // H: steps per period (0: periodic synchronisation is off)
    float lr = 0.7f;        // outer learning rate
    float momentum = 0.9f;  // outer Nesterov momentum, in [0, 1)
};

// The parallel options of the command line (llmc/cli.h: -z, --shard-group, --reduce-dtype, --sync-every, ...).
struct ParallelOptions {
    int zero_stage = -1;        // -1: 1 with several ranks, 0 with one
    std::string shard_group;    // "" (every rank), N, or "node"
    DType wire = DType::F32;
    OuterSyncConfig outer;
    std::vector<GroupSharding> group_sharding;  // per optimizer group (the recipe's, llmc/recipe.h)
};

// ZeRO stage of a run of `world` ranks: `requested`, or 1 with several ranks and 0 with one.
inline int zero_stage_for(int requested, int world) { return requested >= 0 ? requested : (world > 1 ? 1 : 0); }

struct ParallelPlan {
    DpMesh mesh;              // where this rank sits: its data-parallel rank, sharding group and replica
    int zero_stage = 0;
    DType wire = DType::F32;
    OuterSyncConfig outer;
    std::string shard_group;  // as given (for messages)
    size_t align = 128;       // elements: every shard starts on such a boundary
    std::vector<GroupSharding> group_sharding;  // per optimizer group (a group past the end: FlatRanges)

    int world() const { return mesh.world_size; }
    bool periodic() const { return outer.every > 0; }
    // The ranks that share one copy of the optimizer state, and this rank's place among them: the sharding group,
    // or this rank alone when every rank is a replica of its own (--sync-every without --shard-group).
    bool rank_is_replica() const { return periodic() && shard_group.empty(); }
    int state_ranks() const { return rank_is_replica() ? 1 : mesh.shard_size; }
    int state_rank() const { return rank_is_replica() ? 0 : mesh.shard_rank; }
    // Where this rank sits among the replicas of --sync-every: the sharding groups, or one replica per rank (in rank
    // order). Without --sync-every: the sharding groups.
    DpMesh replica_mesh() const;
    // The flat buffers are padded to a multiple of this (ModelOptions::pad_to): every rank's shard the same size
    // for any grouping.
    size_t pad_to() const { return zero_pad_multiple(world(), align); }
    // This rank's shard of the optimizer state of num_params parameters.
    ShardPlan shard_plan(size_t num_params) const {
        return make_shard_plan(num_params, state_ranks(), state_rank(), align);
    }
    // How optimizer group g's state is sharded, and which state rank owns each part of the flat buffer.
    bool has_whole_matrices() const {
        for (GroupSharding g : group_sharding)
            if (g == GroupSharding::WholeMatrices) return true;
        return false;
    }
    GroupSharding sharding_of(int group) const {
        return group >= 0 && (size_t)group < group_sharding.size() ? group_sharding[(size_t)group]
                                                                    : GroupSharding::FlatRanges;
    }
    std::vector<OwnedRange> ownership(const ParamLayout& layout) const {
        return state_ownership(layout, shard_plan(layout.total), group_sharding);
    }
    // The memory per rank of the training state (parameters, gradients, optimizer state): what the strategy
    // allocates, and what the dry run prints. act_bytes: 2 (bf16, CUDA) or 4 (fp32, CPU).
    ZeroMemory memory(const ParamLayout& layout, size_t act_bytes) const;
    // --sync-every's outer state in host memory (theta_last, momentum and a staging copy of the state range), floats.
    size_t outer_host_floats(const ParamLayout& layout) const;
    // One line: "ZeRO-1 within 2 group(s) of 8 rank(s) (--shard-group 8)", ...
    std::string describe() const;
};

// The plan of a run with these options on the ranks of `mesh` (llmc/dp_groups.h makes it for a launched run,
// dry_run_mesh for a dry run). Fails naming the option on a ZeRO stage outside 0 .. 2.
ParallelPlan make_parallel_plan(const ParallelOptions& o, const DpMesh& mesh);

}  // namespace llmc
