// The communicators of hybrid sharding (--shard-group N; the mesh and the rank formula: llmc/dp_mesh.h):
//   shard    the N ranks of this rank's sharding group, numbered by shard_rank: ZeRO's reductions to the shard
//            owners, the gradient norm and the parameter all-gather (the world comm itself when there is one group)
//   replica  the R ranks that own the same shard in the R groups, numbered by replica_rank: the all-reduce of each
//            gradient shard across groups; null with one group. A periodic synchronisation across replicas uses it.
// The world comm keeps everything that spans every rank: the losses, the host channel, the agreement, checkpoints.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm.h"
#include "dp_mesh.h"
#include "error.h"

namespace llmc {

struct DpGroups {
    DpMesh mesh;
    Comm* shard = nullptr;    // never null
    Comm* replica = nullptr;  // null with one group
    std::unique_ptr<Comm> shard_owned, replica_owned;
};

// Collective over `world` (its host channel, then the splits): every rank's layout and --shard-group value are
// gathered, so every rank resolves the same N and stops with the same message on a bad value, or when the ranks
// were given different values.
inline DpGroups make_dp_groups(Comm& world, const std::string& spec, int zero_stage) {
    std::vector<uint64_t> mine = layout_words(world.info());
    uint64_t spec_digest = 1469598103934665603ull;  // FNV-1a of the flag's text: the ranks must agree on it
    for (char c : spec) spec_digest = (spec_digest ^ (uint8_t)c) * 1099511628211ull;
    mine.push_back(spec_digest);
    const size_t row = mine.size();
    const std::vector<uint64_t> words = world.all_gather_host(mine);
    std::vector<DistInfo> all;
    for (size_t r = 0; r < (size_t)world.world_size(); r++) {
        all.push_back(layout_from_words(words.data() + r * row, world.info()));
        if (words[r * row + row - 1] != spec_digest)
            fail("the ranks disagree on --shard-group: rank %d has '%s', rank %zu another value; every rank must be "
                 "started with the same flags",
                 world.rank(), spec.c_str(), r);
    }
    DpGroups g;
    g.mesh = make_dp_mesh(all, world.rank(), resolve_shard_group(spec, all, zero_stage));
    g.shard = &world;
    if (!g.mesh.hybrid()) return g;
    g.shard_owned = world.split(g.mesh.replica_rank, g.mesh.shard_rank);
    g.replica_owned = world.split(g.mesh.shard_rank, g.mesh.replica_rank);
    if (g.shard_owned->rank() != g.mesh.shard_rank || g.shard_owned->world_size() != g.mesh.shard_size ||
        g.replica_owned->rank() != g.mesh.replica_rank || g.replica_owned->world_size() != g.mesh.replicas)
        fail("--shard-group: the split communicators do not match the mesh (rank %d: shard rank %d of %d, replica "
             "rank %d of %d)",
             world.rank(), g.mesh.shard_rank, g.mesh.shard_size, g.mesh.replica_rank, g.mesh.replicas);
    g.shard = g.shard_owned.get();
    g.replica = g.replica_owned.get();
    return g;
}

}  // namespace llmc
