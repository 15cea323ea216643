// Who holds the optimizer state of each parameter, group by group (llmc/state_ownership.h): with every group in flat
// ranges the owners are the shard plan's and the bucket pieces bucket_pieces' (llmc/zero.h), for GPT-2 tiny and 124M
// on 1 to 8 ranks; with GPT-2's 2-D matrices in a whole-matrix group (as Muon's), each matrix has exactly one owner,
// the other tensors keep the shard plan's owners, the ranges tile the buffer, the matrix loads are balanced within
// one matrix, each bucket piece lies in one owner's range, and the plan hands out the same ownership.
#include <algorithm>
#include <string>
#include <vector>

#include "llmc/config.h"
#include "llmc/gpt2_params.h"
#include "llmc/parallel_plan.h"
#include "llmc/state_ownership.h"
#include "llmc/zero.h"
#include "test/fixtures/testing.h"

using namespace llmc;
using testing::check;

namespace {

ModelConfig tiny_config() {
    ModelConfig c;
    c.max_seq_len = 5, c.vocab_size = 11, c.padded_vocab_size = 16, c.num_layers = 2, c.num_heads = 2,
    c.channels = 6;
    return c;
}

ModelConfig d12_config() {
    ModelConfig c;
    c.max_seq_len = 1024, c.vocab_size = 50257, c.padded_vocab_size = 50304, c.num_layers = 12, c.num_heads = 12,
    c.channels = 768;
    return c;
}

// GPT-2's table with its 2-D block matrices (decayed, per layer) in optimizer group 1.
ParamLayout matrices_in_group_1(const ModelConfig& c) {
    std::vector<ParamSpec> t = gpt2_params(c);
    for (ParamSpec& s : t)
        if (s.per_layer && s.shape.size() == 2) s.group = 1;
    return ParamLayout(c, t);
}

bool tiles(const std::vector<OwnedRange>& o, size_t total) {
    size_t next = 0;
    for (const OwnedRange& r : o) {
        if (r.begin != next || r.end <= r.begin) return false;
        next = r.end;
    }
    return next == total;
}

int owner_at(const std::vector<OwnedRange>& o, size_t i) {
    for (const OwnedRange& r : o)
        if (i >= r.begin && i < r.end) return r.owner;
    return -1;
}

bool same_pieces(const std::vector<BucketPiece>& a, const std::vector<BucketPiece>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++)
        if (a[i].begin != b[i].begin || a[i].end != b[i].end || a[i].root != b[i].root) return false;
    return true;
}

void test_flat_ranges_are_the_shard_plan(const std::string& what, const ModelConfig& c) {
    const ParamLayout layout(c);
    for (int world = 1; world <= 8; world++) {
        const ShardPlan plan = make_shard_plan(layout.total, world, 0, 128);
        const std::vector<OwnedRange> o = state_ownership(layout, plan, {});
        const std::string tag = what + " on " + std::to_string(world) + " rank(s): ";
        check(tag + "the ranges tile the parameters", tiles(o, layout.total), "gap or overlap");
        bool owners = true;
        for (const OwnedRange& r : o)
            owners = owners && (int)(r.begin / plan.shard_size) == r.owner &&
                     (int)((r.end - 1) / plan.shard_size) == r.owner;
        check(tag + "each range lies in its owner's shard", owners, "a range crosses a shard boundary");
        bool pieces = true;
        for (size_t b = 0; b < num_grad_buckets(layout); b++)
            pieces = pieces && same_pieces(ownership_pieces(o, layout, b), bucket_pieces(plan, layout, b));
        check(tag + "every bucket's pieces are bucket_pieces'", pieces, "the pieces differ");
        const std::vector<size_t> n = owned_elements(o, world);
        bool sizes = true;
        for (int r = 0; r < world; r++) sizes = sizes && n[(size_t)r] == plan.logical_end(r) - plan.logical_begin(r);
        check(tag + "each rank owns its shard's logical range", sizes, "sizes differ");
    }
}

void test_whole_matrices(const std::string& what, const ModelConfig& c) {
    const ParamLayout layout = matrices_in_group_1(c);
    const std::vector<GroupSharding> sharding = {GroupSharding::FlatRanges, GroupSharding::WholeMatrices};
    for (int world = 1; world <= 8; world++) {
        const ShardPlan plan = make_shard_plan(layout.total, world, 0, 128);
        const std::vector<OwnedRange> o = state_ownership(layout, plan, sharding);
        const std::string tag = what + ", matrices whole, on " + std::to_string(world) + " rank(s): ";
        check(tag + "the ranges tile the parameters", tiles(o, layout.total), "gap or overlap");
        check(tag + "the same ownership a second time", [&] {
            const std::vector<OwnedRange> again = state_ownership(layout, plan, sharding);
            if (again.size() != o.size()) return false;
            for (size_t i = 0; i < o.size(); i++)
                if (again[i].begin != o[i].begin || again[i].end != o[i].end || again[i].owner != o[i].owner)
                    return false;
            return true;
        }(), "differs");
        std::vector<size_t> load((size_t)world, 0);
        size_t largest = 0;
        bool whole = true, flat = true;
        for (int t = 0; t < layout.num_tensors(); t++) {
            const size_t layers = layout.is_per_layer(t) ? c.num_layers : 1, each = layout.sizes[(size_t)t] / layers;
            for (size_t l = 0; l < layers; l++) {
                const size_t b = layout.offsets[(size_t)t] + l * each, e = b + each;
                if (layout.spec(t).group == 1) {
                    // one range holds the whole matrix
                    const int r = owner_at(o, b);
                    bool inside = false;
                    for (const OwnedRange& x : o) inside = inside || (x.begin <= b && e <= x.end);
                    whole = whole && inside && r >= 0;
                    if (r >= 0) load[(size_t)r] += each;
                    largest = std::max(largest, each);
                } else {
                    for (size_t i = b; i < e; i += std::max<size_t>(1, each / 7))
                        flat = flat && owner_at(o, i) == (int)(i / plan.shard_size);
                }
            }
        }
        check(tag + "each matrix of group 1 lies in one owner's range", whole, "a matrix is split");
        check(tag + "group 0 keeps the shard plan's owners", flat, "an owner differs");
        const auto mm = std::minmax_element(load.begin(), load.end());
        check(tag + "the matrices' loads differ by at most the largest matrix", *mm.second - *mm.first <= largest,
              "loads %zu .. %zu, largest matrix %zu", *mm.first, *mm.second, largest);
        bool pieces = true;
        size_t covered = 0;
        for (size_t b = 0; b < num_grad_buckets(layout); b++)
            for (const BucketPiece& p : ownership_pieces(o, layout, b)) {
                bool in_one = false;
                for (const OwnedRange& x : o) in_one = in_one || (x.begin <= p.begin && p.end <= x.end && x.owner == p.root);
                pieces = pieces && in_one;
                covered += p.end - p.begin;
            }
        check(tag + "each bucket piece lies in its root's range", pieces, "a piece crosses owners");
        check(tag + "the pieces cover the parameters once", covered == layout.total, "%zu of %zu", covered,
              layout.total);
        size_t owned = 0;
        for (size_t n : owned_elements(o, world)) owned += n;
        check(tag + "owned elements add up to the parameters", owned == layout.total, "%zu of %zu", owned,
              layout.total);
    }
}

void test_plan_hands_it_out() {
    const ModelConfig c = tiny_config();
    const ParamLayout layout = matrices_in_group_1(c);
    DpMesh mesh;
    mesh.world_size = mesh.shard_size = 4, mesh.replicas = 1;
    ParallelOptions po;
    po.zero_stage = 1;
    ParallelPlan plan = make_parallel_plan(po, mesh);
    check("the plan: every group in flat ranges unless told", plan.sharding_of(0) == GroupSharding::FlatRanges &&
                                                                  plan.sharding_of(1) == GroupSharding::FlatRanges,
          "a group is not in flat ranges");
    plan.group_sharding = {GroupSharding::FlatRanges, GroupSharding::WholeMatrices};
    const std::vector<OwnedRange> a = plan.ownership(layout);
    const std::vector<OwnedRange> b =
        state_ownership(layout, plan.shard_plan(layout.total), plan.group_sharding);
    bool same = a.size() == b.size();
    for (size_t i = 0; same && i < a.size(); i++) same = a[i].begin == b[i].begin && a[i].end == b[i].end &&
                                                         a[i].owner == b[i].owner;
    check("the plan's ownership is state_ownership over its state ranks", same, "differs");
}

}  // namespace

int main() {
    try {
        test_flat_ranges_are_the_shard_plan("GPT-2 tiny", tiny_config());
        test_flat_ranges_are_the_shard_plan("GPT-2 124M", d12_config());
        test_whole_matrices("GPT-2 tiny", tiny_config());
        test_whole_matrices("GPT-2 124M", d12_config());
        test_plan_hands_it_out();
    } catch (const std::exception& e) {
        testing::fail("state ownership", "error: %s", e.what());
    }
    return testing::finish();
}
