// The ZeRO sharding plan (llmc/zero.h): padding, equal aligned shards, tensor segments of each shard for every
// world size 1..8, the gradient buckets, their pieces and their packed layout (ZeRO 2's bucket buffers), the
// memory/traffic footprint formulas (ZeRO 2 below ZeRO 1 for GPT-2 124M and 1.5B on 8 ranks), and bad arguments.
#include <functional>
#include <string>
#include <vector>

#include "llmc/config.h"
#include "llmc/error.h"
#include "llmc/gpt2_params.h"
#include "llmc/grad_sink.h"
#include "llmc/zero.h"
#include "test/fixtures/testing.h"

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
    ModelConfig c;
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
    check("plan: a shard entirely in the padding has the empty logical range [num_params, num_params)",
          q.logical_begin(1) == 100 && q.logical_end(1) == 100 && q.logical_begin(2) == 100 && q.logical_end(2) == 100,
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
                for (const TensorSegment& s : shard_segments(plan, L, r)) {
                    bool good = s.length > 0 && s.flat_offset == expect_next &&
                                s.flat_offset == L.offsets[s.tensor] + s.offset_in_tensor &&
                                s.offset_in_tensor + s.length <= L.sizes[s.tensor] &&
                                s.offset_in_range == s.flat_offset - plan.shard_begin(r) &&
                                s.flat_offset + s.length <= plan.shard_end(r);
                    if (!good && ok) why = "W=" + std::to_string(W) + " rank " + std::to_string(r) + " tensor " +
                                           L.name(s.tensor);
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
    std::vector<TensorSegment> segs = range_segments(L, 100, 130);
    check("range [100,130): wpe piece then ln1w piece",
          segs.size() == 2 && segs[0].tensor == WPE && segs[0].offset_in_tensor == 4 && segs[0].length == 26 &&
              segs[0].offset_in_range == 0 && segs[1].tensor == LN1W && segs[1].offset_in_tensor == 0 &&
              segs[1].length == 4 && segs[1].offset_in_range == 26,
          "got %zu segments", segs.size());
    check("range past the parameters has no segments", range_segments(L, L.total, L.total + 50).empty());
}

// Buckets: for every world size and alignment, the bucket ranges tile [0, total) exactly once (no padding), bucket
// l < L holds exactly layer l's slices, and each bucket's pieces tile its ranges, each inside its root's shard.
void test_buckets() {
    ParamLayout L = tiny_layout();
    const size_t nb = num_grad_buckets(L);
    check("L + 1 buckets", nb == 3);
    std::vector<int> covered(L.total, 0);
    bool layer_ok = true;
    for (size_t b = 0; b < nb; b++)
        for (const FlatRange& r : bucket_ranges(L, b))
            for (size_t i = r.begin; i < r.end; i++) {
                covered[i]++;
                const int t = L.tensor_of(i);
                const bool want = b < 2 ? L.is_per_layer(t) && (i - L.offsets[t]) / L.per_layer(t) == b
                                        : !L.is_per_layer(t);
                layer_ok = layer_ok && want;
            }
    bool once = true;
    for (int c : covered) once = once && c == 1;
    check("bucket ranges cover every parameter exactly once", once);
    check("bucket l holds layer l's slices, bucket L wte/wpe/lnfw/lnfb", layer_ok);
    // 12 slices per layer, none adjacent with 2 layers; bucket L: wte+wpe and lnfw+lnfb merged.
    check("bucket ranges: 12, 12 and 2 (adjacent slices merged)", bucket_ranges(L, 0).size() == 12 &&
                                                                       bucket_ranges(L, 1).size() == 12 &&
                                                                       bucket_ranges(L, 2).size() == 2);
    ModelConfig one = L.cfg;
    one.num_layers = 1;
    check("one layer: its 12 slices are one range", bucket_ranges(ParamLayout(one), 0).size() == 1);

    bool ok = true;
    std::string why;
    for (int W = 1; W <= 8; W++)
        for (size_t align : {(size_t)1, (size_t)8, (size_t)128}) {
            ShardPlan plan = make_shard_plan(L.total, W, 0, align);
            for (size_t b = 0; b < nb; b++) {
                std::vector<FlatRange> ranges = bucket_ranges(L, b);
                std::vector<BucketPiece> pieces = bucket_pieces(plan, L, b);
                size_t k = 0;
                for (const FlatRange& r : ranges) {
                    size_t next = r.begin;
                    while (k < pieces.size() && pieces[k].begin < r.end) {
                        const BucketPiece& p = pieces[k++];
                        bool good = p.begin == next && p.end > p.begin && p.end <= r.end && p.root >= 0 &&
                                    p.root < W && p.begin >= plan.shard_begin(p.root) &&
                                    p.end <= plan.shard_end(p.root);
                        if (!good && ok) why = "W=" + std::to_string(W) + " bucket " + std::to_string(b);
                        ok = ok && good;
                        next = p.end;
                    }
                    if (next != r.end && ok) {
                        ok = false;
                        why = "W=" + std::to_string(W) + " bucket " + std::to_string(b) + ": a range not covered";
                    }
                }
                if (k != pieces.size() && ok) ok = false, why = "extra pieces";
            }
        }
    check("bucket pieces tile their ranges, each inside its owner's shard (W 1..8)", ok, "%s", why.c_str());
    expect_error("bucket past L", [&] { bucket_ranges(L, 3); }, "bucket 3");
}

void test_footprint() {
    // The tiny layout (1158 parameters) over 4 ranks, align 64: padded 1280, shard 320; rank 1 owns [320, 640).
    ParamLayout L = tiny_layout();
    ShardPlan p = make_shard_plan(L.total, 4, 1, 64);
    const double N = 1158, P = 1280, frac = 0.75;
    check("footprint plan", L.total == 1158 && p.padded == 1280 && p.shard_size == 320);
    ZeroFootprint f0 = zero_footprint(p, L, 0, 2, 4);
    const ZeroMemory& m0 = f0.memory;
    check("footprint ZeRO 0: full grads, master and m, v", m0.params == 1280 * 2 && m0.grads == 1280 * 4 &&
                                                              m0.accumulator == 0 && m0.bucket_pool == 0 &&
                                                              m0.master == 1280 * 4 && m0.adam_m == 1280 * 4 &&
                                                              m0.adam_v == 1280 * 4 && f0.buckets == 3);
    // One all_reduce per bucket range (12 + 12 + 2) + the norm; 2(W-1)/W x 4N bytes (no padding).
    check("footprint ZeRO 0: 27 all-reduces, 2(W-1)/W x 4N bytes",
          f0.reductions == 27 && f0.gathers == 0 && f0.wire_bytes == 2 * frac * N * 4 + 2 * frac * 4,
          "%zu %zu %.1f", f0.reductions, f0.gathers, f0.wire_bytes);
    // Pieces at shard boundaries 320, 640, 960: layer 0's fcw [510, 654) and fcprojw [846, 990) are cut in two
    // (14 pieces), layer 1's qkvw [258, 366) (13 pieces), bucket L's 2 ranges lie in shards 0 and 3: 29 reduces.
    ZeroFootprint f1 = zero_footprint(p, L, 1, 2, 4);
    const ZeroMemory& m1 = f1.memory;
    check("footprint ZeRO 1: full grads, shard master and m, v, reduced in place (no accumulator)",
          m1.grads == 1280 * 4 && m1.master == 320 * 4 && m1.adam_m == 320 * 4 && m1.adam_v == 320 * 4 &&
              m1.accumulator == 0 && m1.bucket_pool == 0);
    check("footprint ZeRO 1: 29 reduces + norm, 1 all_gather, sends the 4(N - own) bytes it does not own",
          f1.reductions == 30 && f1.gathers == 1 &&
              f1.wire_bytes == (N - 320) * 4 + frac * P * 2 + 2 * frac * 4,
          "%zu %zu %.1f", f1.reductions, f1.gathers, f1.wire_bytes);
    ZeroFootprint f2 = zero_footprint(p, L, 2, 2, 4);
    check("footprint ZeRO 2: the pieces reduced every micro-step",
          f2.reductions == 4 * 29 + 1 && f2.gathers == 1 &&
              f2.wire_bytes == 4 * (N - 320) * 4 + frac * P * 2 + 2 * frac * 4,
          "%zu %.1f", f2.reductions, f2.wire_bytes);
    // Buckets: layer 0 and 1 hold 12 x 36 + 13 x 6 = 510 elements each, bucket L wte 96 + wpe 30 + lnf 12 = 138.
    const ZeroMemory& m2 = f2.memory;
    check("footprint ZeRO 2: no full gradient buffer; accumulator shard; bucket L + 2 layer-bucket buffers",
          m2.grads == 0 && m2.accumulator == 320 * 4 && m2.bucket_pool == (138 + 2 * 510) * 4 &&
              m2.master == 320 * 4 && zero_footprint(p, L, 2, 2, 1).memory.accumulator == 320 * 4,
          "grads %zu accumulator %zu pool %zu", m2.grads, m2.accumulator, m2.bucket_pool);
    check("footprint total", m1.total() == m1.params + m1.grads + m1.master + m1.adam_m + m1.adam_v &&
                                 m2.total() == m2.params + m2.accumulator + m2.bucket_pool + m2.master + m2.adam_m +
                                                   m2.adam_v);
    check("zero_memory is the footprint's memory (align 64)",
          zero_memory(L, 4, 2, 2, 64).total() == m2.total() && zero_memory(L, 4, 0, 2, 64).total() == m0.total());
    // Rank 3 owns [960, 1280) of which [960, 1158) is real: it sends the other 960 elements.
    ZeroFootprint last = zero_footprint(make_shard_plan(L.total, 4, 3, 64), L, 1, 2, 1);
    check("footprint ZeRO 1, last rank: sends the 960 elements it does not own",
          last.wire_bytes == 960.0 * 4 + frac * P * 2 + 2 * frac * 4, "%.1f", last.wire_bytes);

    std::string s = zero_summary(p, L, 1, 2, 4);
    check("summary names the stage, padding, range and buckets",
          s.find("ZeRO stage 1 over 4 ranks") != std::string::npos && s.find("padded to 1280") != std::string::npos &&
              s.find("[320, 640)") != std::string::npos && s.find("1 all_gather") != std::string::npos &&
              s.find("30 reductions (3 buckets") != std::string::npos,
          "%s", s.c_str());
    const std::string s2 = zero_summary(p, L, 2, 2, 4);
    check("ZeRO 2 summary names the accumulator, the bucket buffers and every stage's total",
          s2.find("grad accumulator 0.0 MiB + bucket buffers 0.0 MiB (wte/wpe/lnf + 2 layers)") != std::string::npos &&
              s2.find("ZeRO-0 ") != std::string::npos && s2.find("ZeRO-1 ") != std::string::npos &&
              s2.find("ZeRO-2 ") != std::string::npos,
          "%s", s2.c_str());
}

// The memory per rank of GPT-2 124M (d12) and 1.5B (d48) on 8 ranks, bf16 parameters (docs/distributed.md's table):
// ZeRO 2 needs less than ZeRO 1, which needs less than ZeRO 0, with the formulas of zero.h.
void test_memory_gpt2_8_ranks() {
    for (const char* d : {"d12", "d48"}) {
        ModelConfig c;
        parse_model_descriptor(d, &c);
        const ParamLayout L(c);
        const size_t P = make_shard_plan(L.total, 8, 0).padded, S = P / 8, layers = c.num_layers;
        const ZeroMemory z0 = zero_memory(L, 8, 0, 2), z1 = zero_memory(L, 8, 1, 2), z2 = zero_memory(L, 8, 2, 2);
        const size_t pool = 4 * (bucket_elements(L, layers) + 2 * bucket_elements(L, 0));
        const bool formulas = z0.total() == 2 * P + 16 * P && z1.total() == 2 * P + 4 * P + 12 * S &&
                              z2.total() == 2 * P + 16 * S + pool && z2.bucket_pool == pool;
        check(std::string(d) + ", 8 ranks: ZeRO 2 < ZeRO 1 < ZeRO 0 (" + std::to_string(z2.total() >> 20) + " < " +
                  std::to_string(z1.total() >> 20) + " < " + std::to_string(z0.total() >> 20) + " MiB)",
              formulas && z2.total() < z1.total() && z1.total() < z0.total());
    }
    // Shapes of the table: 124M's bucket L is wte (50304 x 768) + wpe (1024 x 768) + lnf (2 x 768) elements.
    ModelConfig c;
    parse_model_descriptor("d12", &c);
    const ParamLayout L(c);
    check("d12 bucket sizes: L = 39,421,440, a layer 7,087,872",
          bucket_elements(L, 12) == 50304 * 768 + 1024 * 768 + 2 * 768 &&
              bucket_elements(L, 0) == 12 * 768 * 768 + 13 * 768);
}

// ZeRO 2's packed bucket layout: the ranges back to back, in flat order.
void test_packed_offsets() {
    ParamLayout L = tiny_layout();
    bool ok = true;
    for (size_t b = 0; b < num_grad_buckets(L); b++) {
        const std::vector<FlatRange> ranges = bucket_ranges(L, b);
        size_t next = 0;
        for (const FlatRange& r : ranges)
            for (size_t i = r.begin; i < r.end; i++) ok = ok && packed_offset(ranges, i) == next++;
        ok = ok && next == bucket_elements(L, b);
    }
    check("packed offsets number each bucket's elements 0 .. bucket_elements-1 in flat order", ok);
    expect_error("packed offset of an element outside the bucket",
                 [&] { packed_offset(bucket_ranges(L, 0), L.offsets[WTE]); }, "none of the bucket's");
}

void test_errors() {
    expect_error("world size 0", [] { make_shard_plan(10, 0, 0); }, "world size 0");
    expect_error("rank past the world", [] { make_shard_plan(10, 2, 2); }, "rank 2");
    expect_error("negative rank", [] { make_shard_plan(10, 2, -1); }, "rank -1");
    expect_error("align 0", [] { make_shard_plan(10, 2, 0, 0); }, "alignment 0");
    expect_error("no parameters", [] { make_shard_plan(0, 2, 0); }, "no parameters");
    expect_error("ZeRO stage 3", [] { validate_zero_stage(3); }, "ZeRO stage 3");
    expect_error("ZeRO stage -1", [] { validate_zero_stage(-1); }, "expected 0, 1 or 2");
    ParamLayout L = tiny_layout();
    ShardPlan p = make_shard_plan(L.total, 1, 0);
    expect_error("footprint with 0 micro-steps", [&] { zero_footprint(p, L, 0, 4, 0); }, "micro-steps");
    expect_error("footprint of a plan for another layout", [&] { zero_footprint(make_shard_plan(10, 1, 0), L, 0, 4, 1); },
                 "parameters");
}

}  // namespace

int main() {
    try {
        test_plan_shapes();
        test_segments();
        test_buckets();
        test_footprint();
        test_memory_gpt2_8_ranks();
        test_packed_offsets();
        test_errors();
    } catch (const Error& e) {
        testing::fail("unexpected error", "%s", e.what());
    }
    return testing::finish();
}
