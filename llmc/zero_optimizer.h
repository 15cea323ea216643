// One data-parallel optimizer step over a comm of ranks that share one copy of the optimizer state: the gradient
// reduction of its ZeRO stage (llmc/grad_reducer.h), the global norm and clipping, AdamW on the rank's range
// (llmc/optimizer.h) and, when the state is sharded, the parameter all-gather. The data-parallel strategies
// (llmc/data_parallel.h) drive it: over the sharding group, or over a replica's ranks under --sync-every. The step
// end to end is in docs/architecture.md, "One training step".
//
// After the micro-steps (each backward into grad_sink(last), each followed by end_micro_step(last)): step(lr, t), or
// grad_norm() then apply() or skip():
//   the reduced gradients are the SUM over ranks and micro-steps of each micro-batch's mean-loss gradient (the
//       model's backward with grad_scale 1); the mean over the step's k x W micro-batches is taken here, once, in
//       fp32: inv = 1 / (k W) (llmc/grad_reducer.h, "World-size independence")
//   norm = inv x sqrt(all_reduce(Sum) of the squared norm of this rank's shard of the reduced sums); ZeRO 0 has every
//       reduced gradient on every rank but still sums shard norms, so every stage and world size computes it alike
//   clip scale = min(1, grad_clip / (norm + 1e-6))  (PyTorch's clip_grad_norm_; grad_clip <= 0: no clipping)
//   AdamW with gradient scale inv x clip scale
//   ZeRO >= 1: all_gather the updated parameters in place (comm stream, after AdamW: comm_waits_main) while the
//       gradients are zeroed on the main stream; the next forward waits for the gather (main_waits_comm)
// and returns the norm before clipping; a non-finite norm is returned as it is (the update is still applied): what
// to do about it is the training loop's decision. The host synchronises once per step (the norm).
// Collectives per step (CommCounters; zero_footprint() computes them): the reducer's, one all_gather for ZeRO >= 1,
// one 1-float all_reduce for the norm. What it allocates is zero_memory() (llmc/zero.h), checked against the
// allocations in test/unit/test_optimizer.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm.h"
#include "error.h"
#include "grad_bucket_pool.h"
#include "grad_reducer.h"
#include "model.h"
#include "optimizer.h"
#include "recipe.h"

namespace llmc {

struct OptimConfig {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f, grad_clip = 1.0f;
    DType reduce_dtype = DType::F32;  // the type the gradients are reduced in (F32 or BF16)
    std::vector<GroupRule> groups;    // per optimizer group (llmc/recipe.h); empty: one AdamW group
    MuonConfig muon;
    AdamWConfig adamw() const { return AdamWConfig{beta1, beta2, eps, weight_decay}; }
};

// The gradient reduction of a ZeRO stage (0, 1 or 2) for a model with this layout and padding over `comm` (replica:
// hybrid sharding's comm across the groups, or null). owners: who owns which ranges of the optimizer state
// (llmc/state_ownership.h), or null for the shard plan's flat shards.
template <class Backend>
std::unique_ptr<GradReducer<Backend>> make_grad_reducer(Backend& be, const ParamLayout& layout, size_t padded,
                                                        Comm& comm, int stage, size_t align, DType wire, Comm* replica,
                                                        const std::vector<OwnedRange>* owners = nullptr) {
    validate_zero_stage(stage);
    if (stage == 0 && replica) fail("GradReducer: ZeRO 0 all-reduces over every rank; sharding groups need ZeRO 1 or 2");
    if (stage == 0) return std::make_unique<ReplicatedGrads<Backend>>(be, layout, padded, comm, align, wire);
    if (stage == 1) return std::make_unique<OwnedGrads<Backend>>(be, layout, padded, comm, align, wire, replica, owners);
    return std::make_unique<BucketPoolGrads<Backend>>(be, layout, padded, comm, align, wire, replica, owners);
}

template <class Backend>
class ZeroOptimizer {
public:
    using act_t = typename Backend::act_t;

    // The model's buffers must be padded to a multiple of zero_pad_multiple(world size, align) (ModelOptions::pad_to).
    // Hybrid sharding (llmc/dp_groups.h): `comm` is the rank's sharding group (the shards, the norm and the gather
    // span it) and `replica` the comm across groups that the gradient shards are all-reduced over.
    ZeroOptimizer(Backend& be, Model<Backend>& model, Comm& comm, const OptimConfig& cfg, int zero_stage, uint64_t seed,
                  size_t align = 128, Comm* replica = nullptr)
        : be_(be), model_(model), comm_(comm), cfg_(cfg), stage_(zero_stage),
          reducer_(make_grad_reducer(be, model.layout(), model.padded_params(), comm, zero_stage, align,
                                     cfg.reduce_dtype, replica)),
          plan_(reducer_->plan()),
          adamw_(be, model.layout(), cfg.adamw(), seed, stage_ == 0 ? 0 : plan_.begin(),
                 zero_state_elements(plan_, stage_), model.params()),
          norm_(static_cast<float*>(be.alloc(sizeof(float)))) {}
    ~ZeroOptimizer() { be_.free(norm_); }
    ZeroOptimizer(const ZeroOptimizer&) = delete;
    ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

    // The gradients of one step (llmc/grad_reducer.h): the model's backward writes into grad_sink(last), and every
    // micro-step ends with end_micro_step(last).
    GradReducer<Backend>& reducer() { return *reducer_; }
    const GradReducer<Backend>& reducer() const { return *reducer_; }
    GradSink& grad_sink(bool last_micro_step) { return reducer_->sink(last_micro_step); }
    void end_micro_step(bool last_micro_step) { reducer_->end_micro_step(last_micro_step); }

    float step(float lr, int t) {
        const float norm = grad_norm();
        apply(lr, t);
        return norm;
    }

    // step() in two halves, for a training loop that looks at the norm before deciding (skipping non-finite and
    // outlier steps). grad_norm() is collective (every rank calls it); then either apply(lr, t) (clipping with the
    // scale grad_norm() computed, AdamW, gather, zeroed gradients) or skip() (the gradients are dropped; parameters
    // and m, v, master are untouched).
    float grad_norm() {
        if (!reducer_->reduced()) fail("Optimizer::step: end_micro_step(last_micro_step = true) was not called");
        be_.memset_zero(norm_, sizeof(float));
        be_.norm_squared_into(norm_, reducer_->reduced_grads(plan_.begin()), plan_.shard_size);
        collective([&](Stream st) { comm_.all_reduce(norm_, 1, DType::F32, ReduceOp::Sum, st); });
        float norm2 = 0;
        be_.copy_to_host(&norm2, norm_, sizeof(float));
        // The mean over the step's micro-steps x W micro-batches, applied once in fp32 (see the header comment).
        const float inv = 1.0f / ((float)reducer_->micro_steps() * (float)reducer_->data_parallel_size());
        const float norm = std::sqrt(norm2) * inv;
        float scale = 1.0f;
        if (cfg_.grad_clip > 0) {
            const float coef = cfg_.grad_clip / (norm + 1e-6f);
            if (coef < 1.0f) scale = coef;
        }
        last_grad_scale_ = scale;
        update_scale_ = scale * inv;
        normed_ = true;
        return norm;
    }

    void apply(float lr, int t) {
        if (!normed_) fail("Optimizer::apply: grad_norm() was not called for this step");
        act_t* params = model_.params();
        adamw_.update(params, reducer_->reduced_grads(adamw_.offset()), update_scale_, lr, t);
        if (stage_ >= 1) {
            be_.comm_waits_main();  // the gather reads the shard AdamW just wrote
            comm_.all_gather(params + plan_.begin(), params, plan_.shard_size, Backend::act_dtype, be_.comm_stream());
        }
        finish_step();  // zeroes the gradients on the main stream while the gather runs
        if (stage_ >= 1) be_.main_waits_comm();  // the next forward reads the gathered parameters
    }

    void skip() {
        if (!reducer_->reduced()) fail("Optimizer::skip: end_micro_step(last_micro_step = true) was not called");
        finish_step();
    }

    // ---- state, for checkpoints and tests --------------------------------------------------------------------
    const ShardPlan& plan() const { return plan_; }
    int zero_stage() const { return stage_; }
    const OptimConfig& config() const { return cfg_; }
    // m(), v(), master() (device, float) hold flat elements [state_offset(), state_offset() + state_count()).
    // A checkpoint stores rank r's logical part [plan().logical_begin(r), plan().logical_end(r)), found at index
    // logical_begin(r) - state_offset() of these arrays (for ZeRO 0 every rank holds all of them) when it is not
    // empty; a shard made only of padding has the empty part [num_params, num_params), which lies before its
    // state_offset(): nothing to copy, and no index to compute.
    size_t state_offset() const { return adamw_.offset(); }
    size_t state_count() const { return adamw_.count(); }
    float* m() { return adamw_.m(); }
    float* v() { return adamw_.v(); }
    float* master() { return adamw_.master(); }
    float last_grad_scale() const { return last_grad_scale_; }  // the clip factor the last step applied

    // master = the current parameters of the state's range (construction does this; again after loading params).
    void reset_master_from_params() { adamw_.reset_master(model_.params()); }
    // params = master (rounded to act_t), then gathered: after loading the master weights from a checkpoint.
    void master_to_params() {
        adamw_.master_to_params(model_.params());
        if (stage_ >= 1) gather_params();
    }

private:
    // Enqueue a collective on the comm stream, ordered after the main stream's work and before its later work.
    template <class F>
    void collective(F&& f) {
        be_.comm_waits_main();
        f(be_.comm_stream());
        be_.main_waits_comm();
    }
    void finish_step() {
        reducer_->finish_step();
        normed_ = false;
    }
    void gather_params() {
        act_t* params = model_.params();
        collective([&](Stream st) {
            comm_.all_gather(params + plan_.begin(), params, plan_.shard_size, Backend::act_dtype, st);
        });
    }

    Backend& be_;
    Model<Backend>& model_;
    Comm& comm_;
    OptimConfig cfg_;
    int stage_;
    std::unique_ptr<GradReducer<Backend>> reducer_;
    const ShardPlan& plan_;  // the reducer's
    AdamW<Backend> adamw_;
    float* norm_;                  // the squared norm (one device float)
    bool normed_ = false;          // grad_norm() ran for this step (apply() uses its clip scale)
    float last_grad_scale_ = 1.0f;
    float update_scale_ = 1.0f;    // what AdamW multiplies the reduced sums by: 1/(k W) x the clip scale
};

}  // namespace llmc
