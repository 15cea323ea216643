// AdamW over the flat, sharded parameter buffer, with data-parallel gradient reduction and ZeRO stages 0-2.
//
// One optimizer step, after the micro-steps' forward/backward (grads accumulate locally with += in the model):
//   bucket_ready(b, last)    called by the model's backward (GPT2::backward's on_bucket_ready) as soon as gradient
//                            bucket b is complete (llmc/zero.h: bucket l < L = layer l's 12 slices, announced after
//                            layer l's backward; bucket L = wte, wpe, lnfw, lnfb, after the encoder's), at the
//                            micro-steps that reduce (ZeRO 0/1: the last; ZeRO 2: every one; otherwise a no-op):
//       ZeRO 0:    all_reduce(Avg) in place of each of the bucket's flat ranges
//       ZeRO 1, 2: reduce(Avg) in place of each piece (a bucket range cut at the shard boundaries) to the rank
//                  that owns it; afterwards this rank's shard range of the gradient buffer holds the reduced average
//                  of its shard (the rest of the buffer is left as it was: only the owner reads a piece)
//       one group (group_start/group_end) per bucket; the padding past num_params is never communicated
//   reduce_gradients(last)   called after every micro-step's backward: reduces the buckets that were not announced
//                            (all of them for a caller that passes no callback), then makes the main stream wait
//                            for the comm stream. ZeRO 2 then adds its shard of the reduced gradients into the
//                            sharded fp32 accumulator and zeroes the full gradient buffer for the next micro-step.
//   step(lr, t)              after the last micro-step (or grad_norm() then apply() or skip()):
//       global norm = sqrt(all_reduce(Sum) of the squared norm of this rank's shard of the reduced gradients);
//           ZeRO 0 has every reduced gradient on every rank but still sums shard norms, so every stage and every
//           world size computes the norm the same way
//       clip scale = min(1, grad_clip / (norm + 1e-6))  (PyTorch's clip_grad_norm_; grad_clip <= 0: no clipping)
//       AdamW on the rank's range (ZeRO 0: everything; ZeRO >= 1: its shard), one backend call per tensor piece
//           (weight decay only on the 2-D matrices, ParamLayout::is_decayed)
//       ZeRO >= 1: all_gather the updated parameters (in place); the gradients are zeroed meanwhile
//   and returns the norm before clipping. A non-finite norm is returned as it is (the update is still applied):
//   what to do about it is the training loop's decision.
// Collectives per optimizer step (counted in CommCounters; zero_footprint() computes them from the plan): ZeRO 0
// one all_reduce per bucket range; ZeRO 1 one reduce per bucket piece; ZeRO 2 that once per micro-step; ZeRO >= 1
// one all_gather; every stage one 1-float all_reduce for the norm. Exactly one reduction per range or piece per
// step for ZeRO 0/1 whatever the number of micro-steps.
//
// Averaging over ranks (Avg) and over micro-steps (the model scales each micro-step's loss by 1/accum) commute, so
// the sum over micro-steps of ZeRO 2's per-micro-step averages equals ZeRO 0/1's average of the accumulated sums.
//
// Streams and events (CUDA; on the CPU the stream calls are no-ops and the collectives block, so the same code
// computes the same math in program order). Per optimizer step, in enqueue order:
//   main: backward of layer L-1 ... | layer l ... (bucket l complete)               | ... encoder (bucket L) |
//   comm:                            comm_waits_main -> reduce bucket l (overlaps the backward of layers < l) ...
//   main: main_waits_comm (reduce_gradients) -> [ZeRO 2: accumulate, zero grads] -> next micro-step or:
//   main: squared norm -> norm all_reduce (comm, waited for) -> copy to host -> AdamW on the shard
//   comm: comm_waits_main -> all_gather params          main: zero grads (overlaps the gather) -> main_waits_comm
//   main: next step's forward (reads the gathered parameters)
// So the reductions of the last micro-step run while backward still computes earlier layers; the optimizer reads
// the gradients only after main_waits_comm; the gather starts after AdamW wrote the shard and the next forward starts
// after the gather. No backward op touches a bucket's gradients after it was announced (GPT2::backward), and the
// reductions write only the gradient buffer, which nothing on the main stream reads before main_waits_comm.
// The host synchronises once per step (the norm and the loss it logs), never per micro-step.
//
// State: m, v and the fp32 master weights cover ZeRO 0's whole buffer or ZeRO >= 1's shard, [state_offset(),
// state_offset() + state_count()) of the flat buffer. The master is a separate fp32 copy on every backend (one code
// path), initialised from the parameters at construction (act_to_floats).
//
// ZeRO 2 honestly: this implementation keeps the model's full fp32 gradient buffer (backward accumulates into it),
// so its memory saving over ZeRO 1 is nil here (it adds the accumulator shard); what it changes is the traffic (every
// piece reduced each micro-step instead of once per step). Freeing the full buffer would need the model to
// accumulate into per-bucket buffers; docs/distributed.md has the formulas.
//
// bf16 stochastic rounding (CUDA): the random bits of an element are a function of (seed, t, tensor, the element's
// index in its tensor) only: the same on every rank and for every world size and ZeRO stage, so a bf16 run rounds
// alike however it is sharded, and a rerun reproduces it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "comm.h"
#include "error.h"
#include "layout.h"
#include "rng.h"
#include "zero.h"

namespace llmc {

struct OptimConfig {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f, grad_clip = 1.0f;
};

template <class Backend>
class GPT2;

// Model needs: num_params(), padded_params(), layout(), params() (act_t*, device), grads() (float*, device),
// all in ParamLayout order over padded_params() elements. GPT2<Backend> is the model; tests may pass a stand-in.
template <class Backend, class Model = GPT2<Backend>>
class Optimizer {
public:
    using act_t = typename Backend::act_t;

    // The model's buffers must be padded to a multiple of zero_pad_multiple(world size, align) (ModelOptions::pad_to).
    Optimizer(Backend& be, Model& model, Comm& comm, const OptimConfig& cfg, int zero_stage, uint64_t seed,
              size_t align = 128)
        : be_(be), model_(model), comm_(comm), cfg_(cfg), stage_(zero_stage), seed_(seed) {
        validate_zero_stage(zero_stage);
        plan_ = make_shard_plan(model.num_params(), comm.world_size(), comm.rank(), align);
        if (model.padded_params() < plan_.padded)
            fail("the model's flat buffers have %zu elements but ZeRO over %d ranks needs %zu: create the model "
                 "with ModelOptions::pad_to = zero_pad_multiple(%d) = %zu",
                 model.padded_params(), plan_.world_size, plan_.padded, plan_.world_size,
                 zero_pad_multiple(plan_.world_size, align));
        state_offset_ = stage_ == 0 ? 0 : plan_.begin();
        state_count_ = stage_ == 0 ? plan_.padded : plan_.shard_size;
        segments_ = range_segments(model.layout(), state_offset_, state_offset_ + state_count_);
        const size_t nb = num_grad_buckets(model.layout());
        for (size_t b = 0; b < nb; b++) {
            ranges_.push_back(bucket_ranges(model.layout(), b));
            pieces_.push_back(bucket_pieces(plan_, model.layout(), b));
        }
        bucket_done_.assign(nb, 0);
        m_ = alloc_floats(state_count_);
        v_ = alloc_floats(state_count_);
        master_ = alloc_floats(state_count_);
        if (stage_ == 2) accum_ = alloc_floats(plan_.shard_size);
        norm_ = alloc_floats(1);
        reset_master_from_params();
    }
    ~Optimizer() {
        for (float* p : {m_, v_, master_, accum_, norm_})
            if (p) be_.free(p);
    }
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    // Bucket `bucket`'s gradients are complete on the main stream (the model's backward calls this through its
    // on_bucket_ready callback): its reduction is enqueued on the comm stream, after the main stream's work so far.
    void bucket_ready(size_t bucket, bool last_micro_step) {
        if (reduced_) fail("Optimizer::bucket_ready: called after the last micro-step without step()");
        if (bucket >= bucket_done_.size())
            fail("Optimizer::bucket_ready: bucket %zu, expected 0 .. %zu", bucket, bucket_done_.size() - 1);
        if (!reduces_at(last_micro_step)) return;
        if (bucket_done_[bucket]) fail("Optimizer::bucket_ready: bucket %zu announced twice in one micro-step", bucket);
        be_.comm_waits_main();
        reduce_bucket(bucket);
    }

    // After every micro-step's backward: the buckets not announced through bucket_ready are reduced now (in
    // backward's order, L-1 .. 0, L), then the main stream waits for every reduction of this micro-step.
    void reduce_gradients(bool last_micro_step) {
        if (reduced_) fail("Optimizer::reduce_gradients: called after the last micro-step without step()");
        if (reduces_at(last_micro_step)) {
            const size_t L = bucket_done_.size() - 1;
            bool waited = false;
            for (size_t k = 0; k <= L; k++) {
                const size_t b = k < L ? L - 1 - k : L;
                if (bucket_done_[b]) continue;
                if (!waited) be_.comm_waits_main();
                waited = true;
                reduce_bucket(b);
            }
            be_.main_waits_comm();  // nothing on the main stream reads the gradients before they are reduced
            std::fill(bucket_done_.begin(), bucket_done_.end(), 0);
            if (stage_ == 2) {
                // The shard's reduced gradients into the accumulator (the first micro-step of a step copies), then
                // the full buffer is zeroed for the next micro-step's backward.
                const float* shard = model_.grads() + plan_.begin();
                if (accumulated_) be_.add_into(accum_, shard, plan_.shard_size);
                else be_.copy_on_device(accum_, shard, plan_.shard_size * sizeof(float));
                accumulated_ = true;
                be_.memset_zero(model_.grads(), model_.padded_params() * sizeof(float));
            }
        }
        if (last_micro_step) reduced_ = true;
    }

    float step(float lr, int t) {
        const float norm = grad_norm();
        apply(lr, t);
        return norm;
    }

    // step() in two halves, for a training loop that looks at the norm before deciding (issue 6: skipping
    // non-finite and outlier steps). grad_norm() is collective (every rank calls it); then either apply(lr, t)
    // (clipping with the scale grad_norm() computed, AdamW, gather, zeroed gradients) or skip() (the gradients are
    // dropped; parameters and m, v, master are untouched).
    float grad_norm() {
        if (!reduced_) fail("Optimizer::step: reduce_gradients(last_micro_step = true) was not called");
        const float* g_shard = stage_ == 2 ? accum_ : model_.grads() + plan_.begin();
        be_.memset_zero(norm_, sizeof(float));
        be_.norm_squared_into(norm_, g_shard, plan_.shard_size);
        collective([&](void* st) { comm_.all_reduce(norm_, 1, DType::F32, ReduceOp::Sum, st); });
        float norm2 = 0;
        be_.copy_to_host(&norm2, norm_, sizeof(float));
        const float norm = std::sqrt(norm2);
        float scale = 1.0f;
        if (cfg_.grad_clip > 0) {
            const float coef = cfg_.grad_clip / (norm + 1e-6f);
            if (coef < 1.0f) scale = coef;
        }
        last_grad_scale_ = scale;
        normed_ = true;
        return norm;
    }

    void apply(float lr, int t) {
        if (!normed_) fail("Optimizer::apply: grad_norm() was not called for this step");
        if (t < 1) fail("Optimizer::step: step t=%d, expected >= 1 (AdamW's bias correction is 1-based)", t);
        // The reduced gradients of this rank's state range: in place for ZeRO 0 and 1, the accumulator for ZeRO 2.
        const float* g = stage_ == 2 ? accum_ : model_.grads() + state_offset_;
        const float scale = last_grad_scale_;
        act_t* params = model_.params();
        for (const ShardSegment& s : segments_) {
            const float wd = ParamLayout::is_decayed(s.tensor) ? cfg_.weight_decay : 0.0f;
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
        if (!reduced_) fail("Optimizer::skip: reduce_gradients(last_micro_step = true) was not called");
        finish_step();
    }

    // ---- state, for checkpoints and tests --------------------------------------------------------------------
    const ShardPlan& plan() const { return plan_; }
    int zero_stage() const { return stage_; }
    const OptimConfig& config() const { return cfg_; }
    // m(), v(), master() (device, float) hold flat elements [state_offset(), state_offset() + state_count()).
    // A checkpoint stores rank r's logical part [plan().logical_begin(r), plan().logical_end(r)), found at index
    // logical_begin(r) - state_offset() of these arrays (for ZeRO 0 every rank holds all of them).
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
    // ZeRO 0 and 1 reduce at the last micro-step only, ZeRO 2 at every one.
    bool reduces_at(bool last_micro_step) const { return last_micro_step || stage_ == 2; }

    // Enqueues bucket b's reductions on the comm stream (the caller made it wait for the main stream).
    void reduce_bucket(size_t b) {
        float* grads = model_.grads();
        void* st = be_.comm_stream();
        comm_.group_start();
        if (stage_ == 0) {
            for (const FlatRange& r : ranges_[b])
                comm_.all_reduce(grads + r.begin, r.end - r.begin, DType::F32, ReduceOp::Avg, st);
        } else {
            for (const BucketPiece& p : pieces_[b])
                comm_.reduce(grads + p.begin, grads + p.begin, p.end - p.begin, DType::F32, ReduceOp::Avg, p.root,
                             st);
        }
        comm_.group_end();
        bucket_done_[b] = 1;
    }

    // Enqueue a collective on the comm stream, ordered after the main stream's work and before its later work.
    template <class F>
    void collective(F&& f) {
        be_.comm_waits_main();
        f(be_.comm_stream());
        be_.main_waits_comm();
    }
    // The gradients are zeroed for the next step (ZeRO 2 zeroed the full buffer after each micro-step already;
    // its accumulator is overwritten by the next step's first micro-step).
    void finish_step() {
        if (stage_ != 2) be_.memset_zero(model_.grads(), model_.padded_params() * sizeof(float));
        accumulated_ = false;
        reduced_ = false;
        normed_ = false;
    }
    void gather_params() {
        act_t* params = model_.params();
        collective([&](void* st) {
            comm_.all_gather(params + plan_.begin(), params, plan_.shard_size, Backend::act_dtype, st);
        });
    }

    Backend& be_;
    Model& model_;
    Comm& comm_;
    OptimConfig cfg_;
    int stage_;
    uint64_t seed_;
    ShardPlan plan_;
    size_t state_offset_ = 0, state_count_ = 0;
    std::vector<ShardSegment> segments_;
    float *m_ = nullptr, *v_ = nullptr, *master_ = nullptr;
    std::vector<std::vector<FlatRange>> ranges_;   // per bucket: its flat ranges (ZeRO 0 all-reduces them)
    std::vector<std::vector<BucketPiece>> pieces_; // per bucket: the ranges cut at shard boundaries (ZeRO >= 1)
    std::vector<char> bucket_done_;                // reduced in this micro-step
    float* accum_ = nullptr;       // ZeRO 2: the fp32 accumulator of this rank's shard of the reduced gradients
    float* norm_ = nullptr;        // the squared norm (one device float)
    bool accumulated_ = false;     // ZeRO 2: accum_ holds this step's first micro-step
    bool reduced_ = false;         // the last micro-step's reduction was issued
    bool normed_ = false;          // grad_norm() ran for this step (apply() uses its clip scale)
    float last_grad_scale_ = 1.0f;
};

}  // namespace llmc
