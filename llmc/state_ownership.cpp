#include "state_ownership.h"

#include <algorithm>

#include "error.h"

namespace llmc {

namespace {

GroupSharding sharding_of(const std::vector<GroupSharding>& sharding, int group) {
    return group >= 0 && (size_t)group < sharding.size() ? sharding[(size_t)group] : GroupSharding::FlatRanges;
}

void append(std::vector<OwnedRange>& out, size_t begin, size_t end, int owner) {
    if (begin == end) return;
    if (!out.empty() && out.back().owner == owner && out.back().end == begin)
        out.back().end = end;
    else
        out.push_back({begin, end, owner});
}

}  // namespace

std::vector<OwnedRange> state_ownership(const ParamLayout& layout, const ShardPlan& plan,
                                        const std::vector<GroupSharding>& sharding) {
    if (plan.world_size < 1 || plan.shard_size == 0) fail("state_ownership: an empty shard plan");
    // The matrices of the whole-matrix groups, dealt largest first (flat order on ties) to the least loaded rank.
    struct Matrix {
        size_t begin, end;
    };
    std::vector<Matrix> matrices;
    for (int t = 0; t < layout.num_tensors(); t++) {
        if (sharding_of(sharding, layout.spec(t).group) != GroupSharding::WholeMatrices) continue;
        const size_t layers = layout.is_per_layer(t) ? layout.cfg.num_layers : 1;
        const size_t each = layout.sizes[(size_t)t] / layers;
        for (size_t l = 0; l < layers; l++)
            matrices.push_back({layout.offsets[(size_t)t] + l * each, layout.offsets[(size_t)t] + (l + 1) * each});
    }
    std::vector<size_t> order(matrices.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return matrices[a].end - matrices[a].begin > matrices[b].end - matrices[b].begin;
    });
    std::vector<size_t> load((size_t)plan.world_size, 0);
    std::vector<int> matrix_owner(matrices.size(), 0);
    for (size_t i : order) {
        const int r = (int)(std::min_element(load.begin(), load.end()) - load.begin());
        matrix_owner[i] = r;
        load[(size_t)r] += matrices[i].end - matrices[i].begin;
    }
    // Every element in flat order: a whole matrix's owner, or the shard plan's.
    std::vector<std::pair<size_t, int>> starts;  // (begin of a whole matrix, its index)
    for (size_t i = 0; i < matrices.size(); i++) starts.push_back({matrices[i].begin, (int)i});
    std::sort(starts.begin(), starts.end());
    std::vector<OwnedRange> out;
    size_t next = 0;  // the first element not yet placed
    auto flat = [&](size_t begin, size_t end) {
        for (size_t b = begin; b < end;) {
            const int root = (int)(b / plan.shard_size);
            const size_t e = std::min(end, plan.shard_end(root));
            append(out, b, e, root);
            b = e;
        }
    };
    for (const auto& s : starts) {
        const Matrix& m = matrices[(size_t)s.second];
        flat(next, m.begin);
        append(out, m.begin, m.end, matrix_owner[(size_t)s.second]);
        next = m.end;
    }
    flat(next, layout.total);
    return out;
}

std::vector<BucketPiece> ownership_pieces(const std::vector<OwnedRange>& owners, const ParamLayout& layout,
                                          size_t bucket) {
    std::vector<BucketPiece> pieces;
    for (const FlatRange& r : bucket_ranges(layout, bucket)) {
        // The first owned range that ends after r.begin (owners are in flat order and tile [0, total)).
        auto it = std::upper_bound(owners.begin(), owners.end(), r.begin,
                                   [](size_t v, const OwnedRange& o) { return v < o.end; });
        for (size_t b = r.begin; b < r.end; ++it) {
            if (it == owners.end()) fail("ownership_pieces: element %zu has no owner", b);
            const size_t e = std::min(r.end, it->end);
            pieces.push_back({b, e, it->owner});
            b = e;
        }
    }
    return pieces;
}

std::vector<size_t> owned_elements(const std::vector<OwnedRange>& owners, int ranks) {
    std::vector<size_t> n((size_t)ranks, 0);
    for (const OwnedRange& o : owners) {
        if (o.owner < 0 || o.owner >= ranks) fail("owned_elements: owner %d outside 0 .. %d", o.owner, ranks - 1);
        n[(size_t)o.owner] += o.end - o.begin;
    }
    return n;
}

}  // namespace llmc
