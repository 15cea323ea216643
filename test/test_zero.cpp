// The ZeRO sharding plan (llmc/zero.h): padding, equal aligned shards, tensor segments of each shard for every
// world size 1..8, the memory/traffic footprint formulas, and bad arguments.
#include <functional>
#include <string>
#include <vector>

#include "llmc/error.h"
#include "llmc/zero.h"
#include "testing.h"

using namespace llmc;
using testing::check;

namespace {

void expect_error(const std::string& name, const std::function<void()>& fn, const std::string& want) {
    try {
        fn();
        testing::fail(name, "no error (expected one mentioning '%s')", want.c_str());
    } catch (const Error& e) {
        check(name, std::string(e.what()).find(want) != std::string::npos, "message '%s' lacks '%s'", e.what(),
              want.c_str());
    }
}

// A tiny GPT-2 whose tensor sizes are not multiples of anything in particular.
ParamLayout tiny_layout() {
    GPT2Config c;
    c.max_seq_len = 5, c.vocab_size = 11, c.padded_vocab_size = 16, c.num_layers = 2, c.num_heads = 2,
    c.channels = 6;
    return ParamLayout(c);
}

void test_plan_shapes() {
    ShardPlan p = make_shard_plan(1000, 3, 2, 128);
    check("plan 1000 params / 3 ranks / align 128: padded 1152", p.padded == 1152 && p.shard_size == 384,
          "padded %zu shard %zu", p.padded, p.shard_size);
    check("plan: rank 2 owns [768, 1152)", p.begin() == 768 && p.end() == 1152);
    check("plan: rank 2's logical range is [768, 1000)", p.logical_begin(2) == 768 && p.logical_end(2) == 1000);
    ShardPlan q = make_shard_plan(100, 3, 0, 128);
    check("plan: a shard entirely in the padding has an empty logical range at its start",
          q.logical_begin(1) == 128 && q.logical_end(1) == 128 && q.logical_begin(2) == 256 && q.logical_end(2) == 256,
          "rank 1 [%zu,%zu) rank 2 [%zu,%zu)", q.logical_begin(1), q.logical_end(1), q.logical_begin(2),
          q.logical_end(2));
    ShardPlan e = make_shard_plan(768, 3, 1, 128);
    check("plan: no padding when already a multiple", e.padded == 768 && e.shard_size == 256);
    ShardPlan s = make_shard_plan(1000, 7, 6, 1);
    check("plan: world 7, align 1: padded 1001, shard 143", s.padded == 1001 && s.shard_size == 143 &&
                                                                  s.begin() == 858 && s.logical_end(6) == 1000);
    ShardPlan one = make_shard_plan(123, 1, 0, 128);
    check("plan: one rank owns everything", one.begin() == 0 && one.end() == one.padded && one.padded == 128);
    check("zero_pad_multiple(8) = 1024", zero_pad_multiple(8) == 1024);

    // Every world size and alignment: equal, disjoint, aligned shards that tile [0, padded).
    bool ok = true;
    std::string why;
    for (size_t n : {(size_t)1, (size_t)127, (size_t)128, (size_t)1000, (size_t)124475904}) {
        for (int W = 1; W <= 9; W++) {
            for (size_t align : {(size_t)1, (size_t)128}) {
                ShardPlan a = make_shard_plan(n, W, 0, align);
                bool good = a.padded >= n && a.padded % ((size_t)W * align) == 0 && a.padded - n < (size_t)W * align &&
                            a.shard_size * (size_t)W == a.padded;
                for (int r = 0; r < W; r++) {
                    ShardPlan b = make_shard_plan(n, W, r, align);
                    good = good && b.begin() % align == 0 && b.begin() == (size_t)r * a.shard_size &&
                           b.end() - b.begin() == a.shard_size && b.padded == a.padded;
                }
                if (!good && ok) why = "n=" + std::to_string(n) + " W=" + std::to_string(W) + " align=" +
                                       std::to_string(align);
                ok = ok && good;
            }
        }
    }
    check("plan: equal aligned shards tile the padded buffer (n, W 1..9, align 1/128)", ok, "%s", why.c_str());
}

void test_segments() {
    ParamLayout L = tiny_layout();
    bool ok = true;
    std::string why;
    for (int W = 1; W <= 8; W++) {
        for (size_t align : {(size_t)1, (size_t)8, (size_t)128}) {
            std::vector<int> covered(L.total, 0);
            ShardPlan plan = make_shard_plan(L.total, W, 0, align);
            for (int r = 0; r < W; r++) {
                size_t expect_next = plan.shard_begin(r);
                for (const ShardSegment& s : shard_segments(plan, L, r)) {
                    bool good = s.length > 0 && s.flat_offset == expect_next &&
                                s.flat_offset == L.offsets[s.tensor] + s.offset_in_tensor &&
                                s.offset_in_tensor + s.length <= L.sizes[s.tensor] &&
                                s.offset_in_range == s.flat_offset - plan.shard_begin(r) &&
                                s.flat_offset + s.length <= plan.shard_end(r);
                    if (!good && ok) why = "W=" + std::to_string(W) + " rank " + std::to_string(r) + " tensor " +
                                           ParamLayout::name(s.tensor);
                    ok = ok && good;
                    for (size_t i = 0; i < s.length; i++) covered[s.flat_offset + i]++;
                    expect_next = s.flat_offset + s.length;
                }
                // The segments end where the real parameters of the shard end.
                if (expect_next != std::max(plan.shard_begin(r), plan.logical_end(r)) && ok) {
                    ok = false;
                    why = "W=" + std::to_string(W) + " rank " + std::to_string(r) + " segments end at " +
                          std::to_string(expect_next);
                }
            }
            for (size_t i = 0; i < L.total; i++)
                if (covered[i] != 1 && ok) {
                    ok = false;
                    why = "W=" + std::to_string(W) + " element " + std::to_string(i) + " covered " +
                          std::to_string(covered[i]) + " times";
                }
        }
    }
    check("segments cover every parameter exactly once, in order, inside their tensors (W 1..8)", ok, "%s",
          why.c_str());

    // A hand-checked case: the range [100, 130) of the tiny layout. wte is 16x6 = 96 elements, wpe 5x6 = 30
    // (offset 96), ln1w 2x6 = 12 (offset 126).
    std::vector<ShardSegment> segs = range_segments(L, 100, 130);
    check("range [100,130): wpe piece then ln1w piece",
          segs.size() == 2 && segs[0].tensor == WPE && segs[0].offset_in_tensor == 4 && segs[0].length == 26 &&
              segs[0].offset_in_range == 0 && segs[1].tensor == LN1W && segs[1].offset_in_tensor == 0 &&
              segs[1].length == 4 && segs[1].offset_in_range == 26,
          "got %zu segments", segs.size());
    check("range past the parameters has no segments", range_segments(L, L.total, L.total + 50).empty());
}

void test_footprint() {
    // 4 ranks, 4096 padded parameters (shard 1024), bf16 params.
    ShardPlan p = make_shard_plan(4000, 4, 1, 256);
    const double N = 4096, frac = 0.75;
    ZeroFootprint f0 = zero_footprint(p, 0, 2, 4);
    check("footprint ZeRO 0: full master and m+v", f0.params == 4096 * 2 && f0.grads == 4096 * 4 &&
                                                       f0.grad_shard == 0 && f0.master == 4096 * 4 &&
                                                       f0.adam_state == 2 * 4096 * 4);
    check("footprint ZeRO 0: 2 all-reduces (grads, norm), 2(W-1)/W x 4N bytes",
          f0.reductions == 2 && f0.gathers == 0 && f0.wire_bytes == 2 * frac * N * 4 + 2 * frac * 4,
          "%zu %zu %.1f", f0.reductions, f0.gathers, f0.wire_bytes);
    ZeroFootprint f1 = zero_footprint(p, 1, 2, 4);
    check("footprint ZeRO 1: shard master and m+v, one grad shard",
          f1.master == 1024 * 4 && f1.adam_state == 2 * 1024 * 4 && f1.grad_shard == 1024 * 4);
    check("footprint ZeRO 1: reduce_scatter + norm, 1 all_gather",
          f1.reductions == 2 && f1.gathers == 1 && f1.wire_bytes == frac * N * 4 + frac * N * 2 + 2 * frac * 4);
    ZeroFootprint f2 = zero_footprint(p, 2, 2, 4);
    check("footprint ZeRO 2: one reduce_scatter per micro-step", f2.reductions == 5 && f2.gathers == 1 &&
                                                                     f2.wire_bytes ==
                                                                         4 * frac * N * 4 + frac * N * 2 + 2 * frac * 4);
    check("footprint ZeRO 2: accumulator + receive shard", f2.grad_shard == 2 * 1024 * 4);
    check("footprint ZeRO 2 with one micro-step: accumulator only", zero_footprint(p, 2, 2, 1).grad_shard == 1024 * 4);
    check("footprint total", f1.total() == f1.params + f1.grads + f1.grad_shard + f1.master + f1.adam_state);

    std::string s = zero_summary(p, 1, 2, 4);
    check("summary names the stage, padding and range",
          s.find("ZeRO stage 1 over 4 ranks") != std::string::npos && s.find("padded to 4096") != std::string::npos &&
              s.find("[1024, 2048)") != std::string::npos && s.find("1 all_gather") != std::string::npos,
          "%s", s.c_str());
}

void test_errors() {
    expect_error("world size 0", [] { make_shard_plan(10, 0, 0); }, "world size 0");
    expect_error("rank past the world", [] { make_shard_plan(10, 2, 2); }, "rank 2");
    expect_error("negative rank", [] { make_shard_plan(10, 2, -1); }, "rank -1");
    expect_error("align 0", [] { make_shard_plan(10, 2, 0, 0); }, "alignment 0");
    expect_error("no parameters", [] { make_shard_plan(0, 2, 0); }, "no parameters");
    expect_error("ZeRO stage 3", [] { validate_zero_stage(3); }, "ZeRO stage 3");
    expect_error("ZeRO stage -1", [] { validate_zero_stage(-1); }, "expected 0, 1 or 2");
    ShardPlan p = make_shard_plan(10, 1, 0);
    expect_error("footprint with 0 micro-steps", [&] { zero_footprint(p, 0, 4, 0); }, "micro-steps");
}

}  // namespace

int main() {
    try {
        test_plan_shapes();
        test_segments();
        test_footprint();
        test_errors();
    } catch (const Error& e) {
        testing::fail("unexpected error", "%s", e.what());
    }
    return testing::finish();
}
