// AdamW over the rank's range of the flat, sharded parameter buffer (ZeRO 0: all of it; ZeRO >= 1: its shard).
// The gradients reach it through its GradReducer (llmc/grad_reducer.h: buckets, ZeRO 0/1/2 reductions, the stream
// and event order); the training step that drives both is described in docs/architecture.md.
//
// After the micro-steps (each backward with backward_hooks(last), each followed by reduce_gradients(last)),
// step(lr, t), or grad_norm() then apply() or skip():
//   the reduced gradients are the SUM over ranks and micro-steps of each micro-batch's mean-loss gradient (the
//       model's backward with grad_scale 1); the mean over the step's k x W micro-batches is taken here, once, in
//       fp32: inv = 1 / (k W) (k = the reducer's micro-steps, W ranks; llmc/grad_reducer.h, "World-size
//       independence")
//   norm = inv x sqrt(all_reduce(Sum) of the squared norm of this rank's shard of the reduced sums); ZeRO 0 has every
//       reduced gradient on every rank but still sums shard norms, so every stage and world size computes it alike
//   clip scale = min(1, grad_clip / (norm + 1e-6))  (PyTorch's clip_grad_norm_; grad_clip <= 0: no clipping)
//   AdamW on the rank's range, one backend call per tensor piece (weight decay on the 2-D matrices only), with
//       gradient scale inv x clip scale
//   ZeRO >= 1: all_gather the updated parameters in place (comm stream, after AdamW: comm_waits_main) while the
//       gradients are zeroed on the main stream; the next forward waits for the gather (main_waits_comm)
// and returns the norm before clipping; a non-finite norm is returned as it is (the update is still applied): what
// to do about it is the training loop's decision. The host synchronises once per step (the norm).
// Collectives per step (CommCounters; zero_footprint() computes them): the reducer's, one all_gather for ZeRO >= 1,
// one 1-float all_reduce for the norm.
//
// State: m, v and the fp32 master weights cover [state_offset(), state_offset() + state_count()) of the flat
// buffer; the master is a separate fp32 copy on every backend (one code path). What the model and the optimizer
// allocate is zero_memory() (llmc/zero.h), checked against the allocations in test/unit/test_optimizer.cpp.
//
// bf16 stochastic rounding (CUDA): the random bits of an element are a function of (seed, t, tensor, the element's
// index in its tensor) only: the same on every rank, world size and ZeRO stage, and in a rerun.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "comm.h"
#include "error.h"
#include "grad_reducer.h"
#include "model.h"
#include "rng.h"

namespace llmc {

struct OptimConfig {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f, grad_clip = 1.0f;
    DType reduce_dtype = DType::F32;  // the type the gradients are reduced in (GradReducer; F32 or BF16)
};

template <class Backend>
class Optimizer {
public:
    using act_t = typename Backend::act_t;

    // The model's buffers must be padded to a multiple of zero_pad_multiple(world size, align) (ModelOptions::pad_to).
    // Hybrid sharding (llmc/dp_groups.h): `comm` is the rank's sharding group (the plan, the norm and the gather
    // span it) and `replica` the comm across groups that the reducer all-reduces the gradient shards over.
    Optimizer(Backend& be, Model<Backend>& model, Comm& comm, const OptimConfig& cfg, int zero_stage, uint64_t seed,
              size_t align = 128, Comm* replica = nullptr)
        : be_(be), model_(model), comm_(comm), cfg_(cfg), seed_(seed),
          reducer_(be, model.layout(), model.padded_params(), comm, zero_stage, align, cfg.reduce_dtype, replica), plan_(reducer_.plan()),
          stage_(zero_stage) {
        state_offset_ = stage_ == 0 ? 0 : plan_.begin();
        state_count_ = zero_state_elements(plan_, stage_);
        segments_ = range_segments(model.layout(), state_offset_, state_offset_ + state_count_);
        m_ = alloc_floats(state_count_);
        v_ = alloc_floats(state_count_);
        master_ = alloc_floats(state_count_);
        norm_ = alloc_floats(1);
        reset_master_from_params();
    }
    ~Optimizer() {
        for (float* p : {m_, v_, master_, norm_}) be_.free(p);
    }
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    // The gradients of one step (llmc/grad_reducer.h): the model's backward takes backward_hooks(last), and every
    // micro-step ends with reduce_gradients(last).
    GradReducer<Backend>& reducer() { return reducer_; }
    const GradReducer<Backend>& reducer() const { return reducer_; }
    GradSink& grad_sink(bool last_micro_step) { return reducer_.sink(last_micro_step); }
    void reduce_gradients(bool last_micro_step) { reducer_.reduce_gradients(last_micro_step); }

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
        if (!reducer_.reduced()) fail("Optimizer::step: reduce_gradients(last_micro_step = true) was not called");
        be_.memset_zero(norm_, sizeof(float));
        be_.norm_squared_into(norm_, reducer_.reduced_grads(plan_.begin()), plan_.shard_size);
        collective([&](Stream st) { comm_.all_reduce(norm_, 1, DType::F32, ReduceOp::Sum, st); });
        float norm2 = 0;
        be_.copy_to_host(&norm2, norm_, sizeof(float));
        // The mean over the step's micro-steps x W micro-batches, applied once in fp32 (see the header comment).
        const float inv = 1.0f / ((float)reducer_.micro_steps() * (float)reducer_.data_parallel_size());
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
        if (t < 1) fail("Optimizer::step: step t=%d, expected >= 1 (AdamW's bias correction is 1-based)", t);
        const float* g = reducer_.reduced_grads(state_offset_);
        const float scale = update_scale_;
        act_t* params = model_.params();
        for (const TensorSegment& s : segments_) {
            const float wd = model_.layout().is_decayed(s.tensor) ? cfg_.weight_decay : 0.0f;
            be_.adamw_update(params + s.flat_offset, master_ + s.offset_in_range, g + s.offset_in_range,
                             m_ + s.offset_in_range, v_ + s.offset_in_range, s.length, lr, cfg_.beta1, cfg_.beta2,
                             cfg_.eps, wd, scale, t, rounding_seed(seed_, t, s.tensor), s.offset_in_tensor);
        }
        if (stage_ >= 1) {
            be_.comm_waits_main();  // the gather reads the shard AdamW just wrote
            comm_.all_gather(params + plan_.begin(), params, plan_.shard_size, Backend::act_dtype, be_.comm_stream());
        }
        finish_step();  // zeroes the gradients on the main stream while the gather runs
        if (stage_ >= 1) be_.main_waits_comm();  // the next forward reads the gathered parameters
    }

    void skip() {
        if (!reducer_.reduced()) fail("Optimizer::skip: reduce_gradients(last_micro_step = true) was not called");
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
    size_t state_offset() const { return state_offset_; }
    size_t state_count() const { return state_count_; }
    float* m() { return m_; }
    float* v() { return v_; }
    float* master() { return master_; }
    float last_grad_scale() const { return last_grad_scale_; }  // the clip factor the last step applied

    // master = the current parameters of the state's range (construction does this; again after loading params).
    void reset_master_from_params() { be_.act_to_floats(master_, model_.params() + state_offset_, state_count_); }
    // params = master (rounded to act_t), then gathered: after loading the master weights from a checkpoint.
    void master_to_params() {
        be_.floats_to_act(model_.params() + state_offset_, master_, state_count_);
        if (stage_ >= 1) gather_params();
    }

    // The stochastic-rounding seed of one (step, tensor): the adamw_update call of each piece passes it with the
    // piece's offset in the tensor, so element e of a tensor draws hash(seed, e) however the tensor is sharded.
    static uint32_t rounding_seed(uint64_t seed, int t, int tensor) {
        uint64_t s = seed ^ ((uint64_t)(uint32_t)t << 32) ^ ((uint64_t)tensor << 20);
        return (uint32_t)(splitmix64(s) >> 32);
    }

private:
    float* alloc_floats(size_t n) {
        float* p = static_cast<float*>(be_.alloc(n * sizeof(float)));
        be_.memset_zero(p, n * sizeof(float));
        return p;
    }
    // Enqueue a collective on the comm stream, ordered after the main stream's work and before its later work.
    template <class F>
    void collective(F&& f) {
        be_.comm_waits_main();
        f(be_.comm_stream());
        be_.main_waits_comm();
    }
    void finish_step() {
        reducer_.finish_step();
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
    uint64_t seed_;
    GradReducer<Backend> reducer_;
    const ShardPlan& plan_;  // the reducer's
    int stage_;
    size_t state_offset_ = 0, state_count_ = 0;
    std::vector<TensorSegment> segments_;
    float *m_ = nullptr, *v_ = nullptr, *master_ = nullptr;
    float* norm_ = nullptr;        // the squared norm (one device float)
    bool normed_ = false;          // grad_norm() ran for this step (apply() uses its clip scale)
    float last_grad_scale_ = 1.0f;
    float update_scale_ = 1.0f;    // what AdamW multiplies the reduced sums by: 1/(k W) x the clip scale
};

}  // namespace llmc
