// Optimizer (llmc/optimizer.h) in one process on Gpt2<CpuBackend>: AdamW with clipping and weight decay on the 2-D
// tensors only, against a hand computation in double, for ZeRO 0/1/2 and 1/2/8 micro-steps (ZeRO 2 also with more
// layers than bucket buffers, so they are reused within a backward); the collectives each step issues (counted by
// SingleComm, buckets announced or not); the model's backward announcing each gradient bucket once it is final, and
// writing ZeRO 2's packed bucket buffers exactly as its flat buffer; the memory zero_memory() plans against what the
// model and the optimizer allocate; gradients zeroed; padding untouched; misuse refused.
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "llmc/comm.h"
#include "llmc/cpu/cpu_backend.h"
#include "llmc/cpu/cpu_comm.h"
#include "llmc/memory_plan.h"
#include "llmc/model.h"
#include "llmc/parallel.h"
#include "llmc/trainer_setup.h"
#include "llmc/zero_optimizer.h"
#include "test/fixtures/optimizer_fixture.h"
#include "test/fixtures/testing.h"

using namespace llmc;
using testing::check;
using TinyModel = Gpt2<CpuBackend>;
using Opt = ZeroOptimizer<CpuBackend>;

namespace {

using optimizer_fixture::backward_with;
using optimizer_fixture::initial_params;
using optimizer_fixture::padded_for;
using optimizer_fixture::tiny_config;

// Gradient of micro-step k of step s: magnitude in [0.05, 1) times `size`, random sign, so sqrt(vhat) stays far
// above eps and the update is well conditioned (the tolerances below rely on it).
std::vector<float> micro_grads(size_t n, int s, int k, float size) {
    std::vector<float> g(n);
    Rng rng(99, (uint64_t)(s * 100 + k));
    for (auto& x : g) {
        double mag = 0.05 + 0.95 * rng.uniform();
        x = (float)((rng.uniform() < 0.5 ? -mag : mag) * size);
    }
    return g;
}

// AdamW with clipping in double: PyTorch's clip_grad_norm_ then AdamW (decoupled weight decay on 2-D tensors).
struct RefAdamW {
    std::vector<double> p, m, v;
    std::vector<bool> decayed;
    OptimConfig cfg;
    double last_norm = 0, last_scale = 1;

    RefAdamW(const std::vector<float>& init, const ParamLayout& layout, const OptimConfig& c)
        : p(init.begin(), init.end()), m(init.size(), 0.0), v(init.size(), 0.0), decayed(init.size()), cfg(c) {
        for (size_t i = 0; i < init.size(); i++) decayed[i] = layout.is_decayed(layout.tensor_of(i));
    }
    void step(const std::vector<double>& grad, double lr, int t) {
        double ss = 0;
        for (double g : grad) ss += g * g;
        last_norm = std::sqrt(ss);
        last_scale = cfg.grad_clip > 0 ? std::min(1.0, cfg.grad_clip / (last_norm + 1e-6)) : 1.0;
        const double b1 = cfg.beta1, b2 = cfg.beta2;
        for (size_t i = 0; i < p.size(); i++) {
            double g = grad[i] * last_scale;
            m[i] = b1 * m[i] + (1 - b1) * g;
            v[i] = b2 * v[i] + (1 - b2) * g * g;
            double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
            double wd = decayed[i] ? cfg.weight_decay : 0.0;
            p[i] -= lr * (mhat / (std::sqrt(vhat) + cfg.eps) + wd * p[i]);
        }
    }
};

std::vector<float> download(CpuBackend& be, const float* src, size_t n) {
    std::vector<float> h(n);
    be.copy_to_host(h.data(), src, n * 4);
    return h;
}

// Three steps with `accum` micro-steps each; the first has a large gradient (clipped), the others small ones
// (not clipped, since their norm is below grad_clip). `announce`: the buckets are announced as backward does.
void test_against_reference(int stage, int accum, size_t layers = 2, bool announce = false) {
    const std::string tag = "ZeRO " + std::to_string(stage) + ", " + std::to_string(accum) + " micro-steps" +
                            (layers != 2 ? ", L=" + std::to_string(layers) : "") + (announce ? ", announced" : "") +
                            ": ";
    CpuBackend be;
    TinyModel model(be, tiny_config(layers), 1, 1, padded_for(1));
    const size_t n = model.num_params();
    std::vector<float> init = initial_params(n);
    model.set_params(init);
    auto comm = make_single_comm();
    OptimConfig cfg;
    cfg.weight_decay = 0.1f;
    cfg.grad_clip = 1.0f;
    Opt opt(be, model, *comm, cfg, stage, 1234);
    RefAdamW ref(init, model.layout(), cfg);

    const float lrs[3] = {1e-2f, 5e-3f, 2e-3f};
    const float sizes[3] = {0.5f, 0.002f, 0.003f};  // step 1: norm ~ 0.5 sqrt(n) >> 1; later: < 1
    bool norms_ok = true, clip_ok = true;
    std::string why;
    for (int s = 0; s < 3; s++) {
        std::vector<double> sum(n, 0.0);
        for (int k = 0; k < accum; k++) {
            std::vector<float> g = micro_grads(n, s, k, sizes[s]);
            backward_with(model, opt, g, k == accum - 1, announce);
            for (size_t i = 0; i < n; i++) sum[i] += g[i];
            opt.end_micro_step(k == accum - 1);
        }
        // The optimizer's gradient is the mean over the step's micro-batches (the sums divided by accum x ranks).
        for (double& x : sum) x /= accum;
        float norm = opt.step(lrs[s], s + 1);
        ref.step(sum, lrs[s], s + 1);
        // fp32 accumulation of n squares (the backend sums in double and rounds once) and one sqrt: a few ulps.
        if (std::fabs(norm - ref.last_norm) > 1e-6 * ref.last_norm) {
            norms_ok = false;
            why = "step " + std::to_string(s + 1) + ": norm " + std::to_string(norm) + " vs " +
                  std::to_string(ref.last_norm);
        }
        if (std::fabs(opt.last_grad_scale() - ref.last_scale) > 1e-6 * ref.last_scale) clip_ok = false;
        if ((s == 0) != (ref.last_scale < 1.0)) clip_ok = false;  // the setup clips step 1 only
    }
    check(tag + "global norm", norms_ok, "%s", why.c_str());
    check(tag + "clip scale (clipped at step 1 only)", clip_ok, "scale %g vs %g", opt.last_grad_scale(),
          ref.last_scale);
    // Tolerance: each fp32 AdamW step carries ~10 roundings (relative 6e-8 each) in an update of size
    // lr * |mhat / sqrt(vhat)| <= 1e-2 * 3, i.e. <= 2e-8 absolute, plus half an ulp of |p| < 1 (6e-8) for the
    // parameter itself; three steps stay below 3e-7, so 1e-6 leaves margin without hiding a wrong formula
    // (a missing bias correction or weight decay moves parameters by >= 1e-4 here).
    std::vector<float> got = model.get_params();
    testing::check_close(tag + "parameters match the hand computation", got.data(), ref.p.data(), n, 0.0, 1e-6);
    // m sums terms of either sign (the large clipped step-1 gradient, then small ones), so cancellation can make its
    // relative error large; its absolute error is a few ulps of the largest term, bounded by max |m| (~16 ulps =
    // 2e-6 max |m| allowed). v sums positive terms g^2, but each g is an fp32 sum over the micro-steps of terms of
    // random sign: its absolute error is up to (accum - 1) ulps of sum |g_k|, so where the micro-steps cancel, g^2
    // (and v) carries a relative error far above a few ulps while its absolute error stays below ~2 (accum - 1)
    // ulps of the largest v: rtol 1e-6 plus 2e-6 max v (16 ulps), as for m.
    std::vector<float> m = download(be, opt.m(), n), v = download(be, opt.v(), n);
    double max_m = 0;
    for (double x : ref.m) max_m = std::max(max_m, std::fabs(x));
    testing::check_close(tag + "AdamW m", m.data(), ref.m.data(), n, 1e-6, 2e-6 * max_m);
    double max_v = 0;
    for (double x : ref.v) max_v = std::max(max_v, x);
    testing::check_close(tag + "AdamW v", v.data(), ref.v.data(), n, 1e-6, 2e-6 * max_v);
    std::vector<float> master = download(be, opt.master(), n);
    check(tag + "master equals the parameters (fp32 backend)", master == got);

    if (stage < 2) {  // ZeRO 2 has no full buffer; it zeroes each bucket buffer as it hands it out
        std::vector<float> grads = download(be, opt.reducer().grads(), model.padded_params());
        bool zero = true;
        for (float x : grads) zero = zero && x == 0.0f;
        check(tag + "gradients zeroed after the step", zero);
    }
    if (model.padded_params() > n) {  // (L = 5 has 2688 = 21 x 128 parameters: no padding)
        std::vector<float> all(model.padded_params());
        be.download_floats(all.data(), model.params(), all.size());
        bool pad_zero = true;
        for (size_t i = n; i < all.size(); i++) pad_zero = pad_zero && all[i] == 0.0f;
        check(tag + "padding stays zero", pad_zero);
    }
}

// With zero gradients AdamW's adaptive term is 0/(0+eps) = 0, so only weight decay moves parameters: the 2-D
// matrices shrink by (1 - lr wd), everything else stays bit-identical.
void test_weight_decay_only_2d(int stage) {
    CpuBackend be;
    TinyModel model(be, tiny_config(), 1, 1, padded_for(1));
    std::vector<float> init = initial_params(model.num_params());
    model.set_params(init);
    auto comm = make_single_comm();
    OptimConfig cfg;
    cfg.weight_decay = 0.5f;
    Opt opt(be, model, *comm, cfg, stage, 1);
    opt.end_micro_step(true);
    float norm = opt.step(0.1f, 1);
    std::vector<float> p = model.get_params();
    const ParamLayout& L = model.layout();
    for (int t = 0; t < L.num_tensors(); t++) {
        bool ok = true;
        for (size_t i = L.offsets[t]; i < L.offsets[t] + L.sizes[t]; i++) {
            if (L.is_decayed(t)) {
                double want = (double)init[i] * (1.0 - 0.1 * 0.5);
                ok = ok && std::fabs(p[i] - want) <= 1e-7;  // one fp32 update of |p| < 0.5: an ulp or two
            } else {
                ok = ok && p[i] == init[i];
            }
        }
        check("ZeRO " + std::to_string(stage) + ": weight decay " +
                  (L.is_decayed(t) ? "shrinks " : "leaves alone ") + L.name(t),
              ok);
    }
    check("ZeRO " + std::to_string(stage) + ": zero gradients have norm 0", norm == 0.0f);
}

void test_clip_settings() {
    for (float clip : {0.0f, 1000.0f}) {
        CpuBackend be;
        TinyModel model(be, tiny_config(), 1, 1, padded_for(1));
        model.set_params(initial_params(model.num_params()));
        auto comm = make_single_comm();
        OptimConfig cfg;
        cfg.grad_clip = clip;
        Opt opt(be, model, *comm, cfg, 1, 1);
        backward_with(model, opt, micro_grads(model.num_params(), 0, 0, 0.5f), true, false);
        opt.end_micro_step(true);
        float norm = opt.step(1e-3f, 1);
        check(std::string("grad_clip ") + (clip == 0 ? "0 disables clipping" : "above the norm does not clip"),
              opt.last_grad_scale() == 1.0f && norm > 1.0f, "scale %g norm %g", opt.last_grad_scale(), norm);
    }
}

void expect_error(const std::string& name, const std::function<void()>& fn, const std::string& want) {
    try {
        fn();
        testing::fail(name, "no error (expected one mentioning '%s')", want.c_str());
    } catch (const Error& e) {
        check(name, std::string(e.what()).find(want) != std::string::npos, "message '%s' lacks '%s'", e.what(),
              want.c_str());
    }
}

// Collectives per optimizer step, counted from the plan: ZeRO 0 one all_reduce per bucket range; ZeRO 1 one reduce
// per bucket piece; ZeRO 2 one reduce per piece and micro-step; ZeRO >= 1 one all_gather; every stage one
// all_reduce of the squared norm; never a reduce_scatter. The same whether the buckets are announced during
// backward (bucket_ready) or left to end_micro_step.
void test_collective_counts() {
    for (bool announce : {false, true}) {
        for (int stage = 0; stage <= 2; stage++) {
            for (int accum : {1, 2, 8}) {
                CpuBackend be;
                TinyModel model(be, tiny_config(), 1, 1, padded_for(1));
                model.set_params(initial_params(model.num_params()));
                auto comm = make_single_comm();
                Opt opt(be, model, *comm, OptimConfig(), stage, 1);
                const int steps = 2;
                for (int s = 0; s < steps; s++) {
                    for (int k = 0; k < accum; k++) {
                        backward_with(model, opt, micro_grads(model.num_params(), s, k, 0.01f), k == accum - 1,
                                      announce);
                        opt.end_micro_step(k == accum - 1);
                    }
                    opt.step(1e-3f, s + 1);
                }
                const CommCounters& c = comm->counters;
                uint64_t ranges = 0, pieces = 0;
                for (size_t b = 0; b < num_grad_buckets(model.layout()); b++) {
                    ranges += bucket_ranges(model.layout(), b).size();
                    pieces += bucket_pieces(opt.plan(), model.layout(), b).size();
                }
                uint64_t ar = (uint64_t)steps * (stage == 0 ? ranges + 1 : 1);
                uint64_t red = (uint64_t)steps * (stage == 0 ? 0 : stage == 1 ? pieces : accum * pieces);
                uint64_t ag = (uint64_t)steps * (stage == 0 ? 0 : 1);
                ZeroFootprint f = zero_footprint(opt.plan(), model.layout(), stage, 4, accum);
                check(std::string(announce ? "announced buckets, " : "") + "ZeRO " + std::to_string(stage) + ", " +
                          std::to_string(accum) + " micro-steps: collectives per step",
                      ranges == 26 && c.all_reduce == ar && c.reduce == red && c.reduce_scatter == 0 &&
                          c.all_gather == ag && c.broadcast == 0 && c.barrier == 0 &&
                          c.all_reduce + c.reduce == steps * f.reductions && c.all_gather == steps * f.gathers,
                      "all_reduce %llu (want %llu) reduce %llu (want %llu) reduce_scatter %llu all_gather %llu "
                      "(want %llu)",
                      (unsigned long long)c.all_reduce, (unsigned long long)ar, (unsigned long long)c.reduce,
                      (unsigned long long)red, (unsigned long long)c.reduce_scatter,
                      (unsigned long long)c.all_gather, (unsigned long long)ag);
            }
        }
    }
}

// A sink that keeps what backward does: the buckets in the order they are opened and announced, each announced
// bucket's gradients at that moment (flat), and (packed) each bucket in a buffer of its own ranges back to back.
struct RecordingSink : GradSink {
    RecordingSink(CpuBackend& be, const ParamLayout& layout, bool packed)
        : flat(be, layout, TinyModel::padded_params(layout, ModelOptions())), layout(layout), packed(packed),
          buffers(num_grad_buckets(layout)), ranges(num_grad_buckets(layout)) {}
    BucketGrads open_bucket(size_t b) override {
        opened.push_back(b);
        if (!packed) return BucketGrads(flat.get());
        ranges[b] = bucket_ranges(layout, b);
        buffers[b].assign(bucket_elements(layout, b), 0.0f);
        return BucketGrads(buffers[b].data(), ranges[b]);
    }
    void bucket_done(size_t b) override {
        announced.push_back(b);
        std::vector<float> mine;
        for (const FlatRange& r : bucket_ranges(layout, b))
            for (size_t i = r.begin; i < r.end; i++) mine.push_back(packed ? buffers[b][packed_offset(ranges[b], i)]
                                                                            : flat.get()[i]);
        at_announcement.push_back(mine);
    }
    FlatGrads<CpuBackend> flat;
    const ParamLayout& layout;
    bool packed;
    std::vector<std::vector<float>> buffers;
    std::vector<std::vector<FlatRange>> ranges;
    std::vector<size_t> opened, announced;
    std::vector<std::vector<float>> at_announcement;
};

// The model's backward opens bucket L first, then L-1 .. 0, and announces bucket l exactly when layer l's gradients
// are final and bucket L after the encoder: on the CPU (ops run in order) the bucket's gradients at the announcement
// equal those after the whole backward. Into packed bucket buffers (ZeRO 2's) it writes exactly what it writes into a
// flat buffer (L = 3: every per-layer tensor slice and bucket L's two ranges at their packed offsets).
void test_backward_into_sinks() {
    CpuBackend be;
    TinyModel model(be, tiny_config(3), 2, 4, padded_for(1));
    model.init(3);
    const int in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, tg[8] = {2, 3, 4, 5, 6, 7, 8, 9};
    RecordingSink flat(be, model.layout(), false), packed(be, model.layout(), true);
    model.forward(in, tg, 2, 4, 1.0f);
    model.backward(flat);
    model.forward(in, tg, 2, 4, 1.0f);
    model.backward(packed);
    check("backward opens buckets L, L-1 .. 0 and announces L-1 .. 0, then L, once each",
          flat.opened == std::vector<size_t>{3, 2, 1, 0} && flat.announced == std::vector<size_t>{2, 1, 0, 3} &&
              packed.opened == flat.opened && packed.announced == flat.announced);
    const std::vector<float> g = flat.flat.download();
    bool complete = true, nonzero = true;
    for (size_t k = 0; k < flat.announced.size(); k++) {
        std::vector<float> final_g;
        for (const FlatRange& r : bucket_ranges(model.layout(), flat.announced[k]))
            final_g.insert(final_g.end(), g.begin() + r.begin, g.begin() + r.end);
        complete = complete && final_g == flat.at_announcement[k];
        double ss = 0;
        for (float x : final_g) ss += (double)x * x;
        nonzero = nonzero && ss > 0;
    }
    check("each bucket's gradients are final when it is announced", complete && nonzero);
    check("the packed bucket buffers hold the flat buffer's gradients, bit for bit",
          packed.at_announcement == flat.at_announcement);

    // The optimizer's misuse checks on announcements.
    auto comm = make_single_comm();
    Opt opt(be, model, *comm, OptimConfig(), 1, 1);
    opt.reducer().bucket_ready(0, true);
    expect_error("a bucket announced twice in a micro-step", [&] { opt.reducer().bucket_ready(0, true); }, "twice");
    expect_error("a bucket past L", [&] { opt.reducer().bucket_ready(4, true); }, "bucket 4");
    opt.end_micro_step(true);
    expect_error("bucket_ready after the last micro-step, before the step", [&] { opt.reducer().bucket_ready(1, true); },
                    "before the step");
    opt.skip();
    const uint64_t reduces = comm->counters.total();
    opt.reducer().bucket_ready(0, false);  // ZeRO 1 before the last micro-step: nothing to do, so no error either
    opt.reducer().bucket_ready(0, false);
    check("announcements before the last micro-step issue nothing at ZeRO 1", comm->counters.total() == reduces);
}

// A CPU backend that records the size of every live allocation (the model's and the optimizer's).
struct CountingBackend : CpuBackend {
    std::map<void*, size_t> sizes;
    size_t live = 0;
    void* alloc(size_t bytes) {
        void* p = CpuBackend::alloc(bytes);
        sizes[p] = bytes;
        live += bytes;
        return p;
    }
    void free(void* p) {
        live -= sizes.at(p);
        sizes.erase(p);
        CpuBackend::free(p);
    }
};

// A communicator that only knows where it sits (the optimizer's plan); it is never asked for a collective here.
class PlacedComm : public Comm {
public:
    PlacedComm(int world, int rank) {
        info_.world_size = world, info_.rank = rank;
    }
    const char* name() const override { return "placed"; }
    void all_reduce(void*, size_t, DType, ReduceOp, Stream) override { unexpected(); }
    void reduce(const void*, void*, size_t, DType, ReduceOp, int, Stream) override { unexpected(); }
    void reduce_scatter(const void*, void*, size_t, DType, ReduceOp, Stream) override { unexpected(); }
    void all_gather(const void*, void*, size_t, DType, Stream) override { unexpected(); }
    void broadcast(void*, size_t, DType, int, Stream) override { unexpected(); }
    void barrier() override { unexpected(); }

protected:
    void host_all_reduce(void*, size_t, DType, ReduceOp) override { unexpected(); }
    void host_all_gather(const void*, void*, size_t, DType) override { unexpected(); }

private:
    static void unexpected() { fail("PlacedComm: no collective expected"); }
};

// zero_memory() is what the model and the optimizer allocate: the parameters and the full gradient buffer (stages
// 0, 1) in the model; m, v, master, ZeRO 2's accumulator and bucket buffers in the optimizer (plus one float, the
// norm's scratch), and --reduce-dtype bf16's staging buffer in the reducer. For 1, 3 and 8 ranks (the rank's plan),
// L = 2 and L = 5 (fewer layers than ZeRO 2's layer buffers, and more), every stage, both reduce types.
void test_memory_matches_allocations() {
    bool ok = true;
    std::string why;
    for (int world : {1, 3, 8})
        for (size_t layers : {(size_t)2, (size_t)5})
            for (int stage = 0; stage <= 2; stage++)
            for (size_t reduce_bytes : {(size_t)4, (size_t)2}) {
                CountingBackend be;
                const ZeroMemory want =
                    zero_memory(ParamLayout(tiny_config(layers)), world, stage, sizeof(float), 128, reduce_bytes);
                OptimConfig oc;
                oc.reduce_dtype = reduce_bytes == 2 ? DType::BF16 : DType::F32;
                Gpt2<CountingBackend> model(be, tiny_config(layers), 1, 1, padded_for(world));
                PlacedComm comm(world, world - 1);
                const size_t before = be.live;
                ZeroOptimizer<CountingBackend> opt(be, model, comm, oc, stage, 1);
                const size_t model_grads = opt.reducer().grads() ? be.sizes.at(opt.reducer().grads()) : 0;
                const size_t opt_bytes = be.live - before - model_grads;
                const size_t planned =
                    want.accumulator + want.bucket_pool + want.master + want.adam_m + want.adam_v + want.wire;
                char buf[256];
                std::snprintf(buf, sizeof buf,
                              "W=%d L=%zu ZeRO %d wire %zu: params %zu/%zu grads %zu/%zu optimizer %zu/%zu (+4) "
                              "m %zu/%zu",
                              world, layers, stage, reduce_bytes, be.sizes.at(model.params()), want.params, model_grads, want.grads,
                              opt_bytes, planned, be.sizes.at(opt.m()), want.adam_m);
                if (be.sizes.at(model.params()) != want.params || model_grads != want.grads ||
                    opt_bytes != planned + sizeof(float) || be.sizes.at(opt.m()) != want.adam_m ||
                    be.sizes.at(opt.v()) != want.adam_v || be.sizes.at(opt.master()) != want.master ||
                    (stage == 2) != (want.bucket_pool > 0 && want.accumulator > 0 && want.grads == 0) ||
                    (reduce_bytes == 2) != (want.wire > 0)) {
                    if (ok) why = buf;
                    ok = false;
                }
            }
    check("zero_memory() equals the model's and the optimizer's allocations (W 1/3/8, L 2/5, ZeRO 0/1/2, fp32 and "
          "bf16 reduction)", ok,
          "%s", why.c_str());
}

// The optimizer step inside a strategy of either kind.
template <class Backend>
ZeroOptimizer<Backend>& inner_optimizer(DataParallel<Backend>& dp) {
    if (auto* z = dynamic_cast<DataParallelZero<Backend>*>(&dp)) return z->optimizer();
    return dynamic_cast<PeriodicSync<Backend>&>(dp).optimizer();
}

// The --dry-run plan (llmc/memory_plan.h) under hybrid sharding and --sync-every equals what the model and the
// strategy allocate when built as the trainer builds them, from the same ParallelPlan (make_data_parallel,
// llmc/parallel.h): the model padded for the whole world, the optimizer over a comm of the sharding group's size (one
// rank with --sync-every alone), written down per case here rather than taken from the code under test. The shard
// sizes are also derived here, by hand: m = v = master = 4 x ceil(N / (G x 128)) x 128 bytes for a group of G ranks
// (the whole padded buffer at ZeRO 0), which for these cases differs from the world-wide shard the plan used to print.
void test_dry_run_plan_matches_hybrid_allocations() {
    struct Case {
        int world;
        const char* shard_group;
        int per_node, sync_every, stage;
        int group;  // the ranks the trainer's optimizer comm has for this case
    };
    const Case cases[] = {
        {16, "8", 0, 0, 1, 8}, {16, "8", 0, 0, 2, 8}, {16, "node", 4, 0, 1, 4}, {6, "3", 0, 0, 2, 3},
        {4, "", 0, 0, 2, 4},   {4, "", 0, 3, 1, 1},   {4, "", 0, 3, 0, 1},      {8, "2", 0, 3, 2, 2},
        {8, "8", 0, 3, 1, 8},
    };
    ModelConfig cfg;
    parse_model_descriptor("L=2,NH=2,C=16,T=8,V=64", &cfg);  // N = 8768 parameters
    const size_t N = ParamLayout(cfg).total;
    for (const Case& c : cases) {
        TrainOptions o;
        o.batch_size = 1, o.seq_len = 4, o.zero_stage = c.stage, o.shard_group = c.shard_group;
        o.sync_every = c.sync_every;
        char tag[160];
        std::snprintf(tag, sizeof tag, "dry run of %d ranks, --shard-group '%s' (-pg %d), --sync-every %d, ZeRO %d",
                      c.world, c.shard_group, c.per_node, c.sync_every, c.stage);
        const ParallelPlan pp = make_parallel_plan(parallel_options_for(o), dry_run_mesh(o, c.world, c.per_node));
        const MemoryPlan plan =
            plan_training_memory<CountingBackend>(pp, cfg, 1, 4, model_options_for(o, pp), 0, BackendOptions());
        std::map<std::string, size_t> item;
        for (const BufferSize& b : plan.groups.at(0).items) item[b.name] = b.bytes();
        const size_t G = (size_t)c.group, shard = (N + G * 128 - 1) / (G * 128) * 128;
        const size_t state = 4 * (c.stage == 0 ? shard * G : shard), world_shard = (N + c.world * 128 - 1) /
                                                                                     (c.world * 128) * 128;
        check(std::string(tag) + ": m, v and master are the group's shard, derived by hand",
              item["master weights"] == state && item["AdamW m and v"] == 2 * state &&
                  (c.stage == 0 || G == (size_t)c.world || 4 * world_shard != state),
              "master %zu, m+v %zu, expected %zu each (the world-wide shard: %zu)", item["master weights"],
              item["AdamW m and v"], state, 4 * world_shard);

        // The strategy the trainer makes from the same plan, over comms of the sizes written down for the case.
        CountingBackend be;
        Gpt2<CountingBackend> model(be, cfg, 1, 4, model_options_for(o, pp));
        PlacedComm world(c.world, 0), group(c.group, c.group - 1), across(c.world / c.group, 0);
        DpGroups groups;
        groups.mesh = pp.mesh, groups.shard = &group, groups.replica = c.group < c.world ? &across : nullptr;
        const size_t before = be.live;
        std::unique_ptr<DataParallel<CountingBackend>> dp =
            make_data_parallel(pp, std::move(groups), be, model, world, OptimConfig(), 1);
        ZeroOptimizer<CountingBackend>& opt = inner_optimizer(*dp);
        const size_t grads = dp->grad_buffer_bytes();
        const size_t opt_bytes = be.live - before - grads;
        const size_t planned_opt = item["gradient accumulator"] + item["gradient bucket buffers"] +
                                   item["master weights"] + item["AdamW m and v"] + sizeof(float);  // + the norm
        check(std::string(tag) + ": the plan's training state is what the model and the strategy allocate",
              be.sizes.at(model.params()) == item["parameters"] && grads == item["gradients"] &&
                  opt_bytes == planned_opt && be.sizes.at(opt.master()) == item["master weights"],
              "params %zu/%zu grads %zu/%zu optimizer %zu/%zu master %zu/%zu", be.sizes.at(model.params()),
              item["parameters"], grads, item["gradients"], opt_bytes, planned_opt, be.sizes.at(opt.master()),
              item["master weights"]);
        if (c.sync_every == 0) {
            check(std::string(tag) + ": no host line without --sync-every", plan.host.empty());
            continue;
        }
        const size_t outer = dynamic_cast<PeriodicSync<CountingBackend>&>(*dp).outer().count();
        check(std::string(tag) + ": the outer state is listed in host memory, 3 arrays of the state range (and none "
              "of it on the device: the device bytes are the plan's, above)",
              plan.host.size() == 1 && plan.host[0].bytes() == 3 * 4 * outer,
              "host %zu bytes, outer state %zu floats", plan.host.empty() ? 0 : plan.host[0].bytes(), outer);
    }
    expect_error("a dry run refuses --shard-group node without the ranks per node", [] {
        TrainOptions o;
        o.shard_group = "node";
        dry_run_mesh(o, 16, 0);
    }, "give -pg N");
}

void test_misuse_and_state() {
    CpuBackend be;
    TinyModel model(be, tiny_config(), 1, 1, padded_for(1));
    model.set_params(initial_params(model.num_params()));
    auto comm = make_single_comm();
    Opt opt(be, model, *comm, OptimConfig(), 1, 1);
    expect_error("step without end_micro_step", [&] { opt.step(1e-3f, 1); }, "end_micro_step");
    opt.end_micro_step(true);
    expect_error("end_micro_step after the last micro-step", [&] { opt.end_micro_step(true); }, "before the step");
    expect_error("step 0", [&] { opt.step(1e-3f, 0); }, "t=0");
    opt.step(1e-3f, 1);

    // master_to_params restores parameters from the master copy.
    std::vector<float> good = model.get_params();
    model.set_params(std::vector<float>(model.num_params(), 3.0f));
    opt.master_to_params();
    check("master_to_params restores the parameters", model.get_params() == good);
    check("state covers the whole (one-rank) buffer",
          opt.state_offset() == 0 && opt.state_count() == model.padded_params() && opt.zero_stage() == 1);

    TinyModel unpadded(be, tiny_config(), 1, 1);  // pad_to 1: not a multiple of 128
    expect_error("a model not padded for ZeRO is refused",
                 [&] { Opt bad(be, unpadded, *comm, OptimConfig(), 0, 1); }, "pad_to");
    expect_error("ZeRO stage 3 is refused", [&] { Opt bad(be, model, *comm, OptimConfig(), 3, 1); }, "ZeRO stage 3");
    Opt zero2(be, model, *comm, OptimConfig(), 2, 1);
    expect_error("ZeRO 2: a bucket announced before it was handed out", [&] { zero2.reducer().bucket_ready(1, false); },
                 "before bucket_buffer()");
    zero2.reducer().open_bucket(2);
    expect_error("ZeRO 2: a bucket handed out twice", [&] { zero2.reducer().open_bucket(2); }, "twice");

    uint32_t a = AdamW<CpuBackend>::rounding_seed(5, 1, WTE);
    check("rounding seed is a function of its inputs", a == AdamW<CpuBackend>::rounding_seed(5, 1, WTE));
    check("rounding seed differs by step, tensor and seed",
          a != AdamW<CpuBackend>::rounding_seed(5, 2, WTE) && a != AdamW<CpuBackend>::rounding_seed(5, 1, WPE) && a != AdamW<CpuBackend>::rounding_seed(6, 1, WTE));
}

}  // namespace

int main() {
    try {
        for (int stage = 0; stage <= 2; stage++)
            for (int accum : {1, 2, 8}) test_against_reference(stage, accum);
        for (int accum : {1, 3}) {
            test_against_reference(1, accum, 2, true);
            for (bool announce : {false, true}) test_against_reference(2, accum, 5, announce);
        }
        for (int stage = 0; stage <= 2; stage++) test_weight_decay_only_2d(stage);
        test_clip_settings();
        test_collective_counts();
        test_backward_into_sinks();
        test_memory_matches_allocations();
        test_dry_run_plan_matches_hybrid_allocations();
        test_misuse_and_state();
    } catch (const Error& e) {
        testing::fail("unexpected error", "%s", e.what());
    }
    return testing::finish();
}
