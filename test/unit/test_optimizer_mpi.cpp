// Data-parallel Optimizer under mpirun (test/tests.list: -np 1, 2, 3, 4) for ZeRO 0, 1 and 2: every rank gets
// different local gradients whose average over ranks is a known global gradient G; after three steps the
// parameters, norms and optimizer state must equal those of a one-process Optimizer that runs the same micro-batches
// itself (accum x W micro-steps: each rank's local gradient in turn; that Optimizer is checked against a hand
// computation in test_optimizer.cpp), whether the gradient buckets are announced during backward (bucket_ready) or
// reduced by end_micro_step. Also counts the collectives of each step. ZeRO 2 runs on the tiny model (L = 2) and
// on one with more layers than its bucket buffers (L = 5: each buffer reused within a backward); with one
// micro-step ZeRO 1 and ZeRO 2 do the same arithmetic and must give bit-identical parameters. Hybrid sharding
// (llmc/grad_reducer.h): ZeRO 1 and 2 within groups of 1 and 2 ranks made by Comm::split, the gradient shards
// all-reduced across the groups, against the same one-process run, with the collectives of both comms counted.
//
// Two gradient families:
//   exact     G and the per-rank offsets are small integers times 2^-6. Every sum the run forms (over micro-steps,
//             over ranks in any order, the squared norm: integer multiples of 2^-12 below 2^24 * 2^-12) is exact in
//             fp32, and both runs then multiply by the same fp32(1/(accum W)), so the gradients, the norm and hence
//             every elementwise AdamW result are bit-identical to the one-process run: compared exactly. This is
//             the optimizer's share of world-size independence (llmc/optimizer.h).
//   general   random fp32 values. The reduction over ranks rounds differently from the single process; see
//             check_general() for the tolerance.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "test/fixtures/dist_testing.h"
#include "llmc/comm_mpi.h"
#include "llmc/cpu/cpu_backend.h"
#include "llmc/model.h"
#include "llmc/mpi_env.h"
#include "llmc/zero_optimizer.h"
#include "test/fixtures/optimizer_fixture.h"

using namespace llmc;
namespace dt = dist_testing;
using TinyModel = Gpt2<CpuBackend>;
using Opt = ZeroOptimizer<CpuBackend>;

namespace {

const int kSteps = 3;
const float kLr[kSteps] = {1e-2f, 5e-3f, 2e-3f};

using optimizer_fixture::backward_with;
using optimizer_fixture::initial_params;
using optimizer_fixture::padded_for;
using optimizer_fixture::tiny_config;

// The global gradient G of micro-step k of step s, and rank r's local gradient: G + c_r D with
// c_r = 2r - (W-1), which sums to 0 over the ranks, so the average of the locals is G.
struct Grads {
    bool exact;
    std::vector<float> global(size_t n, int s, int k) const {
        std::vector<float> g(n);
        Rng rng(1000 + s, (uint64_t)k);
        for (auto& x : g)
            x = exact ? (float)((int)rng.below(65) - 32) * 0x1p-6f
                      : (float)((rng.uniform() - 0.5) * (s == 0 ? 1.0 : 0.01));
        return g;
    }
    std::vector<float> local(size_t n, int s, int k, int r, int W) const {
        std::vector<float> g = global(n, s, k);
        Rng rng(2000 + s, (uint64_t)k);
        const float c = (float)(2 * r - (W - 1));
        for (auto& x : g) {
            // exact: D an integer in [-8, 8] times 2^-6 (|local| <= 56 * 2^-6, exact); general: D = x u / 4 with
            // u uniform in [-1, 1), so no local value is far larger than the global one (no cancellation).
            float d = exact ? (float)((int)rng.below(17) - 8) * 0x1p-6f
                            : x * (float)(rng.uniform() * 2 - 1) * 0.25f;
            x += c * d;
        }
        return g;
    }
};

std::vector<float> download(CpuBackend& be, const float* src, size_t n) {
    std::vector<float> h(n);
    be.copy_to_host(h.data(), src, n * 4);
    return h;
}

std::string first_difference(const float* a, const float* b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (std::memcmp(&a[i], &b[i], 4) != 0)
        {
            char buf[128];
            std::snprintf(buf, sizeof buf, "element %zu: %.9g vs %.9g", i, (double)a[i], (double)b[i]);
            return buf;
        }
    return "";
}

// announce: every micro-step announces the buckets as the model's backward does (bucket_ready, L-1 .. 0, then L)
// before end_micro_step; otherwise end_micro_step reduces them all. Returns this rank's final parameters.
// group > 0: hybrid sharding, ZeRO within groups of `group` ranks (world ranks g x group .. (g+1) x group - 1).
std::vector<float> run_case(Comm& world, int stage, int accum, bool exact, bool announce, size_t layers = 2,
                            int group = 0) {
    const int W = world.world_size(), R = world.rank();
    std::unique_ptr<Comm> shard, replica;
    if (group > 0) {
        shard = world.split(R / group, R % group);
        replica = world.split(R % group, R / group);
    }
    Comm& comm = group > 0 ? *shard : world;
    const std::string tag = std::string(exact ? "exact" : "general") + " grads, ZeRO " + std::to_string(stage) +
                            ", " + std::to_string(accum) + " micro-steps" + (announce ? ", announced" : "") +
                            (layers != 2 ? ", L=" + std::to_string(layers) : "") +
                            (group > 0 ? ", groups of " + std::to_string(group) : "") + ": ";
    // One OpenMP thread per rank: several ranks share the machine's cores (oversubscribed spinning is slow).
    BackendOptions bo;
    bo.num_threads = 1;
    CpuBackend be(bo);
    OptimConfig cfg;
    cfg.weight_decay = 0.1f;
    cfg.grad_clip = 1.0f;
    Grads grads{exact};

    TinyModel model(be, tiny_config(layers), 1, 1, padded_for(W));
    const size_t n = model.num_params();
    model.set_params(initial_params(n));
    Opt opt(be, model, comm, cfg, stage, 42, 128, replica.get());

    // The one-process reference: ZeRO 0 on its own communicator, fed the global gradients.
    auto single = make_single_comm();
    TinyModel ref_model(be, tiny_config(layers), 1, 1, padded_for(1));
    ref_model.set_params(initial_params(n));
    Opt ref(be, ref_model, *single, cfg, 0, 42);

    const CommCounters before = comm.counters;
    const CommCounters across_before = replica ? replica->counters : CommCounters();
    std::vector<float> norms, ref_norms;
    for (int s = 0; s < kSteps; s++) {
        for (int k = 0; k < accum; k++) {
            backward_with(model, opt, grads.local(n, s, k, R, W), k == accum - 1, announce);
            opt.end_micro_step(k == accum - 1);
        }
        // The one process runs the step's accum x W micro-batches itself, each rank's local gradient in turn.
        for (int k = 0; k < accum; k++)
            for (int r = 0; r < W; r++) {
                const bool last = k == accum - 1 && r == W - 1;
                backward_with(ref_model, ref, grads.local(n, s, k, r, W), last, false);
                ref.end_micro_step(last);
            }
        norms.push_back(opt.step(kLr[s], s + 1));
        ref_norms.push_back(ref.step(kLr[s], s + 1));
    }

    // Collectives of this run, counted from the plan: per step, ZeRO 0 all-reduces each bucket range once, ZeRO 1
    // reduces each bucket piece (a range cut at the shard boundaries) to its owner once, ZeRO 2 once per
    // micro-step; ZeRO >= 1 all-gathers once; every stage all-reduces the squared norm once; no reduce_scatter.
    const CommCounters& c = comm.counters;
    uint64_t ranges = 0, pieces = 0;
    for (size_t b = 0; b < num_grad_buckets(model.layout()); b++) {
        ranges += bucket_ranges(model.layout(), b).size();
        pieces += bucket_pieces(opt.plan(), model.layout(), b).size();
    }
    uint64_t ar = c.all_reduce - before.all_reduce, red = c.reduce - before.reduce,
             rs = c.reduce_scatter - before.reduce_scatter, ag = c.all_gather - before.all_gather;
    uint64_t want_ar = kSteps * (stage == 0 ? ranges + 1 : 1),
             want_red = kSteps * (stage == 0 ? 0 : stage == 1 ? pieces : accum * pieces),
             want_ag = kSteps * (stage == 0 ? 0 : 1);
    dt::check(tag + "collectives per step", ar == want_ar && red == want_red && rs == 0 && ag == want_ag &&
                                                pieces >= ranges && c.broadcast == before.broadcast &&
                                                c.barrier == before.barrier,
              "all_reduce %llu/%llu reduce %llu/%llu reduce_scatter %llu/0 all_gather %llu/%llu",
              (unsigned long long)ar, (unsigned long long)want_ar, (unsigned long long)red,
              (unsigned long long)want_red, (unsigned long long)rs, (unsigned long long)ag,
              (unsigned long long)want_ag);
    if (replica) {  // across groups, per step: ZeRO 1 one all_reduce per own piece, ZeRO 2 one of the accumulator
        uint64_t own = 0;
        for (size_t b = 0; b < num_grad_buckets(model.layout()); b++)
            for (const BucketPiece& p : bucket_pieces(opt.plan(), model.layout(), b)) own += p.root == opt.plan().rank;
        const bool empty = opt.plan().logical_end(opt.plan().rank) == opt.plan().logical_begin(opt.plan().rank);
        const uint64_t x = replica->counters.all_reduce - across_before.all_reduce,
                       want_x = kSteps * (stage == 1 ? own : empty ? 0 : 1);
        dt::check(tag + "collectives across groups per step", x == want_x &&
                      replica->counters.total() - across_before.total() == x,
                  "all_reduce %llu/%llu", (unsigned long long)x, (unsigned long long)want_x);
    }

    std::vector<float> got = model.get_params(), want = ref_model.get_params();
    // State: this rank's logical range of m and v against the same range of the reference's full state.
    const ShardPlan& plan = opt.plan();
    size_t lo = plan.logical_begin(plan.rank), hi = plan.logical_end(plan.rank), off = lo - opt.state_offset();
    std::vector<float> m = download(be, opt.m(), opt.state_count()), v = download(be, opt.v(), opt.state_count());
    std::vector<float> rm = download(be, ref.m(), ref.state_count()), rv = download(be, ref.v(), ref.state_count());

    if (exact) {
        dt::check(tag + "norms bit-identical to one process", norms == ref_norms, "step 1: %.9g vs %.9g", norms[0],
                  ref_norms[0]);
        dt::check(tag + "parameters bit-identical to one process", got == want, "%s",
                  first_difference(got.data(), want.data(), n).c_str());
        bool state_ok = hi == lo || (std::memcmp(m.data() + off, rm.data() + lo, (hi - lo) * 4) == 0 &&
                                     std::memcmp(v.data() + off, rv.data() + lo, (hi - lo) * 4) == 0);
        dt::check(tag + "m and v of the rank's range bit-identical", state_ok, "range [%zu, %zu)", lo, hi);
    } else {
        // Tolerance. The only difference from one process is the order of the fp32 gradient sums: each reduced
        // gradient has relative error delta <= (W-1 + accum) eps_32 * 1.75 (|local| <= 1.75 |G|) + the rounding of
        // the locals, i.e. delta < 2e-6 for W <= 4, accum <= 3. The norm (a sum of squares) moves by <= 2 delta
        // relative; AdamW's update lr * mhat / sqrt(vhat) is scale-free, so it moves by <= 2 delta * lr * |u| with
        // |u| <= 3 in the first steps: 1.2e-7 per step; each parameter may also round to a neighbouring float
        // (6e-8 at |p| < 0.5). Three steps: < 6e-7; 1e-6 allows it and is 100x below a wrong average (which, with
        // offsets of 25% of G, moves parameters by > 1e-4).
        float norm_err = 0;
        for (int s = 0; s < kSteps; s++) norm_err = std::max(norm_err, std::fabs(norms[s] - ref_norms[s]) / ref_norms[s]);
        dt::check(tag + "norms match one process (rel 4e-6)", norm_err <= 4e-6f, "relative error %g", norm_err);
        dt::check_close(tag + "parameters match one process (atol 1e-6)", got.data(), want.data(), n, 0.0, 1e-6);
    }
    bool same_norm = true;
    for (int s = 0; s < kSteps; s++) {
        float mine = norms[s], root = norms[s];
        MPI_Bcast(&root, 1, MPI_FLOAT, 0, MPI_COMM_WORLD);
        same_norm = same_norm && mine == root;
    }
    dt::check(tag + "every rank reports the same norm", same_norm, "norm differs from rank 0's");
    return got;
}

}  // namespace

int main() {
    return dt::run_main([](Comm& comm) {
        for (bool exact : {true, false})
            for (int stage = 0; stage <= 2; stage++)
                for (int accum : {1, 3})
                    for (bool announce : {false, true}) run_case(comm, stage, accum, exact, announce);
        for (int accum : {1, 3})
            for (bool announce : {false, true}) run_case(comm, 2, accum, false, announce, 5);
        const std::vector<float> z1 = run_case(comm, 1, 1, false, true, 5), z2 = run_case(comm, 2, 1, false, true, 5);
        dt::check("one micro-step, L=5: ZeRO 2 parameters bit-identical to ZeRO 1", z1 == z2, "%s",
                  first_difference(z1.data(), z2.data(), z1.size()).c_str());
        for (int group : {1, 2})
            if (comm.world_size() % group == 0 && group < comm.world_size())
                for (bool exact : {true, false})
                    for (int stage = 1; stage <= 2; stage++)
                        for (int accum : {1, 3}) run_case(comm, stage, accum, exact, true, 2, group);
    });
}
