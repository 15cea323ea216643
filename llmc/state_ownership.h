// Which rank holds the optimizer state of each part of the flat parameter buffer, decided per optimizer group
// (ParamSpec::group, llmc/layout.h) by the parallel plan (ParallelPlan::ownership, llmc/parallel_plan.h).
//
//   FlatRanges     the group's elements belong to the rank whose shard of the shard plan holds them (llmc/zero.h):
//                  any cut works for an elementwise optimizer such as AdamW, so a rank's range crosses tensors
//   WholeMatrices  each matrix of the group (one layer's slice of a per-layer tensor, or a tensor that is not per
//                  layer) belongs to one rank, so an optimizer that transforms a whole matrix (Muon's Newton-Schulz)
//                  finds it on one rank; matrices are dealt largest first to the least loaded rank (lowest on ties),
//                  the same on every rank
//
// The result tiles [0, total) in flat order. Gradient reduction reduces each bucket piece to its owner
// (ownership_pieces: the bucket's ranges cut where the owner changes), which is ZeRO 1's reduce for either kind;
// with every group in FlatRanges the pieces are bucket_pieces' (llmc/zero.h).
#pragma once

#include <cstddef>
#include <vector>

#include "layout.h"
#include "zero.h"

namespace llmc {

enum class GroupSharding { FlatRanges, WholeMatrices };

// [begin, end) of the flat buffer, whose optimizer state rank `owner` (a state rank: 0 .. shard plan's world) holds.
struct OwnedRange {
    size_t begin, end;
    int owner;
};

// The owner of every element of [0, layout.total): group g is sharded as sharding[g] (a group past the end of
// `sharding`: FlatRanges) over the ranks of `plan` (its world size; FlatRanges also its shard boundaries). Adjacent
// ranges of one owner are merged.
std::vector<OwnedRange> state_ownership(const ParamLayout& layout, const ShardPlan& plan,
                                        const std::vector<GroupSharding>& sharding);

// Bucket `bucket`'s ranges cut where the owner changes: each piece is reduced to its owner (root).
std::vector<BucketPiece> ownership_pieces(const std::vector<OwnedRange>& owners, const ParamLayout& layout,
                                          size_t bucket);

// Elements each rank owns (the sizes its optimizer state is counted from), indexed by rank.
std::vector<size_t> owned_elements(const std::vector<OwnedRange>& owners, int ranks);

}  // namespace llmc
