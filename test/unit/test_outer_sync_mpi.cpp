// --sync-every's outer optimizer (llmc/outer_sync.h) under mpirun (test/tests.list: -np 1, 2, 3, 4). Every rank is a
// replica: the trainer's set-up, an AdamW Optimizer over a one-rank comm (no gradient reduction across ranks) on a
// model padded for W ranks, fed this rank's own gradients, and an OuterSync over the MPI comm. Against references
// computed here, without OuterSync:
//   averaging   period 1, outer lr 1, momentum 0: after every step the parameters are the average of what each
//               replica's AdamW step produced. The reference is a second Optimizer per rank, fed the same
//               gradients, whose master weights this test replaces after every step by the mean of every rank's
//               (gathered with MPI_Allgather, summed in rank order in fp32, divided by W). With one or two ranks
//               every order of the sum is the same fp32 operation (a + b = b + a), so the parameters must be
//               bit-identical; with 3 and 4 ranks MPI may sum in another order: each element then differs by at
//               most (W - 1) eps_32 max|theta| / W ~ 1e-7 per step (|theta| < 1; AdamW's update does not depend on the
//               parameters except through weight decay 0.1 x lr, so the errors do not grow), atol 1e-6 over 3 steps.
//   nesterov    period 2, outer lr 0.7, momentum 0.9, 6 steps (3 outer steps): the reference applies DiLoCo's
//               formula as written, theta = theta_last - lr (delta + mu m) with m = mu m + delta and delta =
//               theta_last - mean(theta), in double. OuterSync evaluates the expanded form in fp32: each of its
//               ~6 operations rounds by eps_32 |x| with |x| <= 2 (theta and m's terms), 1e-6 per outer step at most,
//               not amplified by the few inner steps: atol 5e-6. Using lr alone (no momentum) or a wrong sign moves
//               the parameters by ~lr x |delta| ~ 1e-3, far outside it.
//   collectives the outer comm sees exactly one all_reduce of the replica's parameters per outer step (steps / H;
//               the padding of the state past num_params is not sent), and the replica's own comm never reaches MPI.
// After every outer step every rank holds the same parameters (compared bit for bit with rank 0's). With an even
// number of ranks, replicas of two ranks (sharded_case, below).
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/model.h"
#include "llmc/zero_optimizer.h"
#include "llmc/outer_sync.h"
#include "test/fixtures/dist_testing.h"
#include "test/fixtures/optimizer_fixture.h"

using namespace llmc;
namespace dt = dist_testing;
using TinyModel = Gpt2<CpuBackend>;
using Opt = ZeroOptimizer<CpuBackend>;

namespace {

using optimizer_fixture::backward_with;
using optimizer_fixture::initial_params;
using optimizer_fixture::padded_for;
using optimizer_fixture::tiny_config;

// Rank r's own gradient at step s: different on every rank (the replicas drift apart between outer steps).
std::vector<float> local_grads(size_t n, int s, int r) {
    std::vector<float> g(n);
    Rng rng(3000 + (uint64_t)s, (uint64_t)r);
    for (auto& x : g) x = (float)(rng.uniform() - 0.5);
    return g;
}

// One replica: a model and its AdamW over a one-rank comm, as the trainer builds them with --sync-every.
struct Replica {
    std::unique_ptr<Comm> own = make_single_comm();
    TinyModel model;
    Opt opt;
    Replica(CpuBackend& be, int world, const OptimConfig& cfg)
        : model(be, tiny_config(), 1, 1, padded_for(world)), opt(be, model, *own, cfg, 1, 42) {
        model.set_params(initial_params(model.num_params()));
        opt.reset_master_from_params();
    }
    void inner_step(int s, int rank, float lr) {
        backward_with(model, opt, local_grads(model.num_params(), s, rank), true, false);
        opt.end_micro_step(true);
        opt.step(lr, s + 1);
    }
};

// Every rank's master weights (count each), rank after rank.
std::vector<float> gather_all(const float* mine, size_t count) {
    std::vector<float> all(count * (size_t)dt::world());
    MPI_Allgather(mine, (int)count, MPI_FLOAT, all.data(), (int)count, MPI_FLOAT, MPI_COMM_WORLD);
    return all;
}

bool same_as_rank0(const std::vector<float>& mine) {
    std::vector<float> root = mine;
    MPI_Bcast(root.data(), (int)root.size(), MPI_FLOAT, 0, MPI_COMM_WORLD);
    return std::memcmp(root.data(), mine.data(), mine.size() * 4) == 0;
}

std::string first_difference(const std::vector<float>& a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); i++)
        if (std::memcmp(&a[i], &b[i], 4) != 0) {
            char buf[128];
            std::snprintf(buf, sizeof buf, "element %zu: %.9g vs %.9g", i, (double)a[i], (double)b[i]);
            return buf;
        }
    return "";
}

// The reference outer step on `ref`'s master (every rank the same): DiLoCo's formula as written, in double.
void reference_outer_step(CpuBackend& be, Opt& ref, std::vector<double>& last, std::vector<double>& mom, double lr,
                          double mu) {
    const size_t n = ref.state_count();
    const int W = dt::world();
    const std::vector<float> all = gather_all(ref.master(), n);
    std::vector<float> theta(n);
    for (size_t i = 0; i < n; i++) {
        double avg = 0;
        for (int r = 0; r < W; r++) avg += all[(size_t)r * n + i];
        avg /= W;
        const double delta = last[i] - avg;
        mom[i] = mu * mom[i] + delta;
        last[i] = last[i] - lr * (delta + mu * mom[i]);
        theta[i] = (float)last[i];
    }
    be.copy_to_device(ref.master(), theta.data(), n * 4);
    ref.master_to_params();
}

void averaging_case(Comm& comm, CpuBackend& be, const OptimConfig& cfg) {
    const int W = comm.world_size(), R = comm.rank(), steps = 3;
    Replica rep(be, W, cfg), ref(be, W, cfg);
    OuterSync<CpuBackend> outer(be, rep.opt, comm, OuterSyncConfig{1, 1.0f, 0.0f});
    const size_t n = rep.opt.state_count();
    bool consistent = true;
    for (int s = 0; s < steps; s++) {
        rep.inner_step(s, R, 1e-2f);
        if (outer.due(s + 1, s + 1 == steps)) outer.step(s + 1);
        consistent = same_as_rank0(rep.model.get_params()) && consistent;
        ref.inner_step(s, R, 1e-2f);
        const std::vector<float> all = gather_all(ref.opt.master(), n);
        std::vector<float> avg(n, 0.0f);
        for (size_t i = 0; i < n; i++) {
            for (int r = 0; r < W; r++) avg[i] += all[(size_t)r * n + i];
            avg[i] /= (float)W;
        }
        be.copy_to_device(ref.opt.master(), avg.data(), n * 4);
        ref.opt.master_to_params();
    }
    const std::vector<float> got = rep.model.get_params(), want = ref.model.get_params();
    dt::check("period 1, outer lr 1, momentum 0: every rank leaves each outer step with rank 0's parameters",
              consistent, "parameters differ from rank 0's");
    if (W <= 2)
        dt::check("period 1, outer lr 1, momentum 0: parameters bit-identical to averaging after every step",
                  got == want, "%s", first_difference(got, want).c_str());
    else
        dt::check_close("period 1, outer lr 1, momentum 0: parameters equal averaging after every step (atol 1e-6, "
                        "reduction order)", got.data(), want.data(), got.size(), 0.0, 1e-6);
    dt::check("period 1: theta_last is the averaged master",
              std::memcmp(outer.theta_last(), rep.opt.master(), n * 4) == 0, "%s", "theta_last differs from the master");
}

void nesterov_case(Comm& comm, CpuBackend& be, const OptimConfig& cfg, int period, int steps) {
    const int W = comm.world_size(), R = comm.rank();
    const float lr = 0.7f, mu = 0.9f;
    Replica rep(be, W, cfg), ref(be, W, cfg);
    OuterSync<CpuBackend> outer(be, rep.opt, comm, OuterSyncConfig{period, lr, mu});
    const size_t n = rep.opt.state_count(), reduced = outer.reduced_count();  // the padding is not sent
    std::vector<double> last(ref.opt.master(), ref.opt.master() + n), mom(n, 0.0);
    const CommCounters before = comm.counters, own_before = rep.own->counters;
    bool consistent = true;
    for (int s = 0; s < steps; s++) {
        rep.inner_step(s, R, 1e-2f);
        ref.inner_step(s, R, 1e-2f);
        if (!outer.due(s + 1, s + 1 == steps)) continue;
        outer.step(s + 1);
        reference_outer_step(be, ref.opt, last, mom, lr, mu);
        consistent = same_as_rank0(rep.model.get_params()) && consistent;
    }
    const std::string tag = "period " + std::to_string(period) + ", " + std::to_string(steps) + " steps, lr 0.7, "
                            "momentum 0.9: ";
    const uint64_t outer_steps = (uint64_t)(steps / period + (steps % period != 0));
    const uint64_t ar = comm.counters.all_reduce - before.all_reduce, bytes = comm.counters.bytes - before.bytes;
    dt::check(tag + "one all_reduce of the replica per outer step on the outer comm",
              ar == outer_steps && reduced == rep.model.num_params() && bytes == outer_steps * reduced * 4 &&
                  comm.counters.total() - before.total() == ar,
              "all_reduce %llu (want %llu), %llu bytes (want %llu)", (unsigned long long)ar,
              (unsigned long long)outer_steps, (unsigned long long)bytes,
              (unsigned long long)(outer_steps * rep.model.num_params() * 4));
    dt::check(tag + "every rank leaves each outer step with rank 0's parameters", consistent, "differ");
    const std::vector<float> got = rep.model.get_params(), want = ref.model.get_params();
    dt::check_close(tag + "parameters equal DiLoCo's formula in double (atol 5e-6)", got.data(), want.data(),
                    got.size(), 0.0, 5e-6);
    dt::check(tag + "the replica's own comm reduced nothing across ranks (it is one rank)",
              rep.own->world_size() == 1 && rep.own->counters.reduce > own_before.reduce, "world %d",
              rep.own->world_size());
}

// Replicas of two ranks (--sync-every with --shard-group 2; np 2 and 4): rank 2g + s holds shard s of replica g. Its
// AdamW runs over its group (ZeRO 1, no comm across groups), fed its own gradients (the group's reduction sums the
// two), and the OuterSync over the ranks holding shard s in every group. The reference on every rank is its group's
// whole replica: an AdamW over a one-rank comm fed the group's two gradients summed in fp32 and halved (the sharded
// AdamW multiplies the same fp32 sum by 1/(k N) = 0.5: the same value, halving is exact), without clipping (the
// norm sums in another order), then the groups' masters averaged in group order. Every sum has at most two terms,
// so its order cannot matter: after every outer step of period 1, lr 1, momentum 0 the parameters must be
// bit-identical. The outer comm carries one all-reduce of the shard's real elements per outer step and nothing else.
void sharded_case(Comm& comm, CpuBackend& be, OptimConfig cfg) {
    const int W = comm.world_size(), R = comm.rank();
    if (W % 2 != 0) return;
    cfg.grad_clip = 0.0f;
    const int group = R / 2, shard = R % 2, groups = W / 2, steps = 3;
    std::unique_ptr<Comm> shard_comm = comm.split(group, shard), replica_comm = comm.split(shard, group);
    TinyModel model(be, tiny_config(), 1, 1, padded_for(W));
    model.set_params(initial_params(model.num_params()));
    Opt opt(be, model, *shard_comm, cfg, 1, 42);
    OuterSync<CpuBackend> outer(be, opt, *replica_comm, OuterSyncConfig{1, 1.0f, 0.0f});
    Replica ref(be, W, cfg);
    const size_t n = model.num_params(), nref = ref.opt.state_count();
    const CommCounters before = replica_comm->counters;
    bool same = true;
    for (int s = 0; s < steps; s++) {
        const std::vector<float> mine = local_grads(n, s, R), all = gather_all(mine.data(), n);
        backward_with(model, opt, mine, true, false);
        opt.end_micro_step(true);
        opt.step(1e-2f, s + 1);
        outer.step(s + 1);
        std::vector<float> g(n);
        for (size_t i = 0; i < n; i++) g[i] = (all[(size_t)(2 * group) * n + i] + all[(size_t)(2 * group + 1) * n + i]) * 0.5f;
        backward_with(ref.model, ref.opt, g, true, false);
        ref.opt.end_micro_step(true);
        ref.opt.step(1e-2f, s + 1);
        const std::vector<float> masters = gather_all(ref.opt.master(), nref);
        std::vector<float> avg(nref, 0.0f);
        for (size_t i = 0; i < nref; i++) {
            for (int k = 0; k < groups; k++) avg[i] += masters[(size_t)(2 * k) * nref + i];
            avg[i] /= (float)groups;
        }
        be.copy_to_device(ref.opt.master(), avg.data(), nref * 4);
        ref.opt.master_to_params();
        same = same && model.get_params() == ref.model.get_params();
    }
    const ShardPlan& plan = opt.plan();
    const uint64_t real = plan.logical_end(shard) - plan.logical_begin(shard);
    const CommCounters& c = replica_comm->counters;
    dt::check("replicas of 2 ranks, period 1, lr 1, mu 0: parameters bit-identical to the groups' whole replicas "
              "averaged after every step", same, "parameters differ");
    dt::check("replicas of 2 ranks: the outer comm carries one all_reduce of the rank's shard per outer step, nothing "
              "else (no gradient crosses the groups)",
              outer.reduced_count() == real && c.all_reduce - before.all_reduce == (uint64_t)steps &&
                  c.bytes - before.bytes == (uint64_t)steps * real * 4 && c.total() - before.total() == (uint64_t)steps,
              "reduced %zu of shard %llu; all_reduce %llu, bytes %llu, calls %llu", outer.reduced_count(),
              (unsigned long long)real, (unsigned long long)(c.all_reduce - before.all_reduce),
              (unsigned long long)(c.bytes - before.bytes), (unsigned long long)(c.total() - before.total()));
}

}  // namespace

int main() {
    return dt::run_main([](Comm& comm) {
        BackendOptions bo;
        bo.num_threads = 1;  // several ranks share the machine's cores
        CpuBackend be(bo);
        OptimConfig cfg;
        cfg.weight_decay = 0.1f;
        averaging_case(comm, be, cfg);
        nesterov_case(comm, be, cfg, 2, 6);
        nesterov_case(comm, be, cfg, 3, 7);  // the last step ends a short period (the run's final outer step)
        sharded_case(comm, be, cfg);         // even world sizes: replicas of two ranks
    });
}
