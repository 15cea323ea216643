// Periodic synchronisation (--sync-every H): the outer optimizer of local SGD / DiLoCo (docs/distributed.md,
// "Periodic synchronisation").
//
// Every replica (a rank, or under hybrid sharding a group of ranks) trains on its own slice of each global batch
// with its own AdamW (the inner optimizer: its gradients are reduced over the replica's comm only, and its m, v,
// master stay local). After every H-th step, and after the run's last step, every replica takes the same outer
// step on its fp32 master weights theta (one all-reduce of theta over the outer comm, the comm that joins the
// replicas; nothing else crosses it):
//
//   avg   = mean over replicas of theta                 (the all-reduce: Sum, then / replicas)
//   delta = theta_last - avg                            (= the mean of the replicas' deltas theta_last - theta:
//                                                        theta_last is the same on every replica)
//   m     = mu m + delta                                (outer momentum, mu = --outer-momentum)
//   theta = theta_last - lr (delta + mu m)              (Nesterov; lr = --outer-lr)
//         = (1 - lr) theta_last + lr avg - lr mu m      (evaluated in this form, below)
//   theta_last = theta;  master = theta;  params = act_t(theta)
//
// The second form of the update is the first one expanded (delta = theta_last - avg); in it lr = 1 and mu = 0
// give exactly avg (0 x theta_last + avg - 0), so `--sync-every 1 --outer-lr 1 --outer-momentum 0` is parameter
// averaging after every step bit for bit, which test/e2e/sync_every_test.sh checks. All-reducing theta rather
// than delta sends the same bytes (one fp32 value per parameter); the update's rounding is eps |theta| either way.
// Every replica computes the same theta from the same all-reduced sum, the same theta_last and the same m, so the
// replicas leave the outer step identical (the parameters are rounded from theta with the same rounding everywhere).
//
// A replica made of a sharding group (--shard-group N, llmc/dp_groups.h) runs this on each rank for the rank's shard
// of the master weights only (the inner optimizer's state range), over the comm of the ranks holding that shard in
// every replica; the parameter all-gather within the group (ZeroOptimizer::master_to_params) then rebuilds the whole
// model: so a rank sends its shard, 1/N of the parameters, across replicas per outer step. Only the real elements of
// the range are all-reduced (the padding past num_params stays 0 everywhere).
//
// The outer state (theta_last, m, the step of the last outer step) is the replicas' common state: checkpoints
// store it once (the outer files, docs/checkpoints.md). It lives in host memory: the outer step copies the master to
// the host and back (2 x 4n bytes every H steps for a range of n elements, against H steps of compute), so no backend
// op is needed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm.h"
#include "error.h"
#include "parallel_plan.h"
#include "zero_optimizer.h"

namespace llmc {

template <class Backend>
class OuterSync {
public:
    // `inner` is the replica's optimizer; the outer step works on the range of the flat buffer its state covers
    // (the whole buffer when a replica is one rank; a shard of it when a replica is a sharding group: then `outer`
    // must join the ranks that hold the same shard in every replica). `outer` joins the replicas (the world comm
    // when every rank is a replica).
    OuterSync(Backend& be, ZeroOptimizer<Backend>& inner, Comm& outer, const OuterSyncConfig& cfg)
        : be_(be), inner_(inner), outer_(outer), cfg_(cfg), n_(inner.state_count()),
          real_(std::min(n_, inner.plan().num_params - std::min(inner.plan().num_params, inner.state_offset()))) {
        if (cfg.every < 1) fail("OuterSync: period %d, expected >= 1", cfg.every);
        theta_last_.resize(n_);
        momentum_.assign(n_, 0.0f);
        buf_.resize(n_);
        be_.copy_to_host(theta_last_.data(), inner_.master(), n_ * sizeof(float));
    }

    const OuterSyncConfig& config() const { return cfg_; }
    size_t count() const { return n_; }
    size_t reduced_count() const { return real_; }  // the real elements of the range: what each outer step all-reduces

    // After optimizer step `step` (1-based, done): the outer step is due at the end of every period and after the
    // run's last step (so the final model is the replicas' common one).
    bool due(int step, bool last) const { return step % cfg_.every == 0 || last; }

    // The outer step (collective over the outer comm: every replica calls it after the same inner step).
    void step(int step) {
        float* master = inner_.master();
        if (real_ > 0) {  // a shard that lies in the padding has nothing to average (on every replica alike)
            be_.comm_waits_main();
            outer_.all_reduce(master, real_, DType::F32, ReduceOp::Sum, be_.comm_stream());
            be_.main_waits_comm();
            be_.copy_to_host(buf_.data(), master, real_ * sizeof(float));
        }
        const float replicas = (float)outer_.world_size(), lr = cfg_.lr, mu = cfg_.momentum;
        const float keep = 1.0f - lr, lr_mu = lr * mu;
        for (size_t i = 0; i < real_; i++) {
            const float avg = buf_[i] / replicas;
            const float delta = theta_last_[i] - avg;
            momentum_[i] = mu * momentum_[i] + delta;
            const float theta = keep * theta_last_[i] + lr * avg - lr_mu * momentum_[i];
            theta_last_[i] = theta, buf_[i] = theta;
        }
        if (real_ > 0) be_.copy_to_device(master, buf_.data(), real_ * sizeof(float));
        inner_.master_to_params();
        last_sync_step_ = step;
        outer_steps_++;
    }

    // ---- state, for checkpoints and tests: host arrays of count() floats, elements [inner.state_offset(),
    // + count()) of the flat buffer (the padding past num_params stays 0) ------------------------------------------
    float* theta_last() { return theta_last_.data(); }
    float* momentum() { return momentum_.data(); }
    int last_sync_step() const { return last_sync_step_; }
    void set_last_sync_step(int s) { last_sync_step_ = s; }
    uint64_t outer_steps() const { return outer_steps_; }

private:
    Backend& be_;
    ZeroOptimizer<Backend>& inner_;
    Comm& outer_;
    OuterSyncConfig cfg_;
    size_t n_;
    size_t real_;  // elements [0, real_) of the range are parameters, the rest padding
    std::vector<float> theta_last_, momentum_, buf_;
    int last_sync_step_ = 0;  // the step after which the last outer step ran (0: none yet)
    uint64_t outer_steps_ = 0;  // outer steps taken by this process (not checkpointed: a count for the log)
};

}  // namespace llmc
