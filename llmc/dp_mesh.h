// The data-parallel mesh of hybrid sharding (--shard-group N, docs/distributed.md "Hybrid sharding"): the W ranks
// form R = W / N sharding groups of N ranks. ZeRO shards the optimizer state and the gradient reduction within a
// group; the groups hold replicas of the same state, and each gradient shard is all-reduced across the groups.
//
//   replica_rank   which group (0 .. R-1)
//   shard_rank     the rank's place in its group (0 .. N-1): the ZeRO shard it owns
//   dp_rank        replica_rank * N + shard_rank: the global data-parallel rank, which block of B sequences of each
//                  micro-step the rank reads, and which optimizer-state file it writes (replica 0 writes them)
//
// The groups are formed from the ranks ordered by (node, local rank), N consecutive ones per group, so the ranks of
// one node form whole groups when N divides the ranks per node, however the launcher numbered the ranks (round-robin
// placements included). With one group (N = W, the default) the mesh is the flat layout of plain ZeRO: dp_rank and
// shard_rank are the global rank, in the world communicator's order.
//
// The one formula is dp_rank_of(); everything that needs a data-parallel rank takes DpMesh::dp_rank. A test build can
// plant the transposed formula (LLMC_PLANTED_TRANSPOSED_DP_RANK) to show that test/unit/test_dp_mesh.cpp's checks
// catch it (test/unit/test_dp_mesh_planted.cpp).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "dist_info.h"

namespace llmc {

struct DpMesh {
    int world_size = 1;
    int shard_size = 1;  // N: ranks per sharding group
    int replicas = 1;    // R = world_size / N: sharding groups
    int replica_rank = 0, shard_rank = 0, dp_rank = 0;
    bool hybrid() const { return replicas > 1; }
};

// A planted build gives the two functions below internal linkage, so its definitions never meet the real ones.
#ifdef LLMC_PLANTED_TRANSPOSED_DP_RANK
#define LLMC_DP_MESH_INLINE static inline
#else
#define LLMC_DP_MESH_INLINE inline
#endif

// The global data-parallel rank of the rank at (replica_rank, shard_rank) of a mesh of `replicas` groups of
// `shard_size` ranks.
LLMC_DP_MESH_INLINE int dp_rank_of(int replica_rank, int shard_rank, int shard_size, int replicas) {
#ifdef LLMC_PLANTED_TRANSPOSED_DP_RANK
    (void)shard_size;
    return shard_rank * replicas + replica_rank;  // the planted bug: the mesh transposed (a permutation, but wrong)
#else
    (void)replicas;
    return replica_rank * shard_size + shard_rank;
#endif
}

// Rank `rank`'s place in the mesh of groups of `shard_size` ranks; all[r] is rank r's layout (gathered). The caller
// checked that shard_size divides the world size (resolve_shard_group).
LLMC_DP_MESH_INLINE DpMesh make_dp_mesh(const std::vector<DistInfo>& all, int rank, int shard_size) {
    DpMesh m;
    m.world_size = (int)all.size();
    m.shard_size = shard_size;
    m.replicas = m.world_size / shard_size;
    int position = rank;  // one group: the world's own order (flat ZeRO, unchanged)
    if (m.replicas > 1) {
        position = 0;  // among the ranks ordered by (node, local rank)
        for (const DistInfo& d : all)
            if (d.node < all[rank].node || (d.node == all[rank].node && d.local_rank < all[rank].local_rank))
                position++;
    }
    m.replica_rank = position / shard_size;
    m.shard_rank = position % shard_size;
    m.dp_rank = dp_rank_of(m.replica_rank, m.shard_rank, m.shard_size, m.replicas);
    return m;
}

// --shard-group's value: "" (every rank: one group), "node" (the ranks of one node), or a number of ranks.
// Fails naming the value and what was expected on anything else (syntax only; resolve_shard_group checks it
// against the layout).
void check_shard_group_syntax(const std::string& spec);

// N for this layout (all[r] is rank r's): every rank when spec is "", the ranks per node for "node" (every node
// must have as many), else the number. Fails with one line naming the value when N < 1, N does not divide the world
// size, the nodes are uneven for "node", or ZeRO 0 (which shards nothing) is asked for groups smaller than the world.
int resolve_shard_group(const std::string& spec, const std::vector<DistInfo>& all, int zero_stage);

}  // namespace llmc
