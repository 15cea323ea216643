// AdamW over the flat, sharded parameter buffer, with data-parallel gradient reduction and ZeRO stages 0-2.
//
// One optimizer step, after the micro-steps' forward/backward. The model's backward takes backward_hooks(last):
//   bucket_buffer(b)         (ZeRO 2 only; ZeRO 0/1 accumulate in the model's full fp32 gradient buffer) where
//                            backward accumulates gradient bucket b: a buffer of the pool (see "ZeRO 2" below),
//                            zeroed on the main stream, handed out before backward's first op on bucket b
//   bucket_ready(b, last)    as soon as bucket b is complete (llmc/zero.h: bucket l < L = layer l's 12 slices,
//                            announced after layer l's backward; bucket L = wte, wpe, lnfw, lnfb, after the
//                            encoder's), at the micro-steps that reduce (ZeRO 0/1: the last; ZeRO 2: every one;
//                            otherwise a no-op):
//       ZeRO 0:    all_reduce(Sum) in place of each of the bucket's flat ranges
//       ZeRO 1:    reduce(Sum) in place of each piece (a bucket range cut at the shard boundaries) to the rank
//                  that owns it; afterwards this rank's shard range of the gradient buffer holds the reduced sum
//                  of its shard (the rest of the buffer is left as it was: only the owner reads a piece)
//       ZeRO 2:    the same reduce of each piece, in place in the bucket buffer
//       one group (group_start/group_end) per bucket; the padding past num_params is never communicated
//   reduce_gradients(last)   called after every micro-step's backward: reduces the buckets that were not announced
//                            (all of them for a caller that passes no hooks), then makes the main stream wait for
//                            the reductions; ZeRO 2 adds the rank's pieces into its shard accumulator (below).
//   step(lr, t)              after the last micro-step (or grad_norm() then apply() or skip()):
//       the reduced gradients are the SUM over ranks and micro-steps of each micro-batch's mean-loss gradient (the
//       model's backward with grad_scale 1); the mean over the k x W micro-batches of the step is taken here, in
//       fp32: inv = 1 / (k W) (k = reduce_gradients calls since the last step, W ranks; see "World-size
//       independence" below)
//       global norm = inv x sqrt(all_reduce(Sum) of the squared norm of this rank's shard of the reduced sums);
//           ZeRO 0 has every reduced gradient on every rank but still sums shard norms, so every stage and every
//           world size computes the norm the same way
//       clip scale = min(1, grad_clip / (norm + 1e-6))  (PyTorch's clip_grad_norm_; grad_clip <= 0: no clipping)
//       AdamW on the rank's range (ZeRO 0: everything; ZeRO >= 1: its shard), one backend call per tensor piece
//           (weight decay only on the 2-D matrices, ParamLayout::is_decayed), with gradient scale inv x clip scale
//       ZeRO >= 1: all_gather the updated parameters (in place); the gradients are zeroed meanwhile
//   and returns the norm before clipping. A non-finite norm is returned as it is (the update is still applied):
//   what to do about it is the training loop's decision.
// Collectives per optimizer step (counted in CommCounters; zero_footprint() computes them from the plan): ZeRO 0
// one all_reduce per bucket range; ZeRO 1 one reduce per bucket piece; ZeRO 2 that once per micro-step; ZeRO >= 1
// one all_gather; every stage one 1-float all_reduce for the norm. Exactly one reduction per range or piece per
// step for ZeRO 0/1 whatever the number of micro-steps.
//
// World-size independence: a step's k x W micro-batches are the same for any split of the global batch (the data
// loader), and each micro-batch's gradient is computed alike (the model scales its logit gradients by 1/(B T) only,
// in act_t, never by a factor that depends on k or W: bf16(g/48) is not bf16(g/16)/3). Summing over micro-steps
// (fp32 accumulation) and ranks (fp32 reduction) and then multiplying once by inv = fp32(1/(k W)) is the same
// arithmetic for every split but for the order of the fp32 sums: bit-identical when those sums are exact or happen
// in the same order, else within fp32 reduction-order rounding (docs/distributed.md, "Numerics"). ZeRO 2's sum over
// micro-steps of per-micro-step sums over ranks is ZeRO 0/1's sum over ranks of the accumulated sums.
//
// ZeRO 2 holds no full gradient buffer (the model is created with ModelOptions::gradient_buffer = false). Between
// micro-steps a rank keeps only its fp32 shard accumulator; during backward, each bucket lives in a buffer of a pool
// (llmc/zero.h: bucket L's own buffer, ZERO2_LAYER_BUFFERS buffers shared by the layer buckets) from bucket_buffer()
// until its reduction has completed and the rank's own pieces have been added into the accumulator (copied at a
// step's first micro-step, added at the others: the same arithmetic as reducing a full buffer). Each buffer has an
// event recorded on the comm stream after its reduction; the main stream waits for that event only, when the buffer
// is handed out again (layer l's backward reuses the buffer of layer l + ZERO2_LAYER_BUFFERS) or at the end of the
// micro-step, so backward never waits for more than the one reduction whose buffer it needs.
//
// Streams and events (CUDA; on the CPU the stream calls are no-ops and the collectives block, so the same code
// computes the same math in program order). Per optimizer step, in enqueue order:
//   main: backward of layer L-1 ... | layer l ... (bucket l complete)               | ... encoder (bucket L) |
//   comm:                            comm_waits_main -> reduce bucket l (overlaps the backward of layers < l) ...
//   main: main_waits_comm (reduce_gradients) -> next micro-step or:
//   main: squared norm -> norm all_reduce (comm, waited for) -> copy to host -> AdamW on the shard
//   comm: comm_waits_main -> all_gather params          main: zero grads (overlaps the gather) -> main_waits_comm
//   main: next step's forward (reads the gathered parameters)
// ZeRO 2, every micro-step (K = ZERO2_LAYER_BUFFERS, buffer k = (L-1-l) mod K):
//   main: [bucket_buffer(l): wait event k (reduction of bucket l+K) -> add its own pieces into the accumulator ->
//          zero buffer k] -> backward of layer l (into buffer k)
//   comm: comm_waits_main -> reduce bucket l in buffer k -> record event k
//   main (reduce_gradients): for each buffer, wait its event -> add its own pieces
// So the reductions run while backward still computes earlier layers; the optimizer reads the gradients only after
// waiting for them; the gather starts after AdamW wrote the shard and the next forward starts after the gather. No
// backward op touches a bucket's gradients after it was announced (GPT2::backward), and the reductions write only
// gradient buffers, which nothing on the main stream reads or rewrites before it has waited for them.
// The host synchronises once per step (the norm and the loss it logs), never per micro-step.
//
// State: m, v and the fp32 master weights cover ZeRO 0's whole buffer or ZeRO >= 1's shard, [state_offset(),
// state_offset() + state_count()) of the flat buffer. The master is a separate fp32 copy on every backend (one code
// path), initialised from the parameters at construction (act_to_floats). What the model and the optimizer allocate
// is zero_memory() (llmc/zero.h), checked against the allocations in test/test_optimizer.cpp.
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

// Model needs: num_params(), padded_params(), layout(), params() (act_t*, device), grads() (float*, device; nullptr
// for ZeRO 2, which needs a model without a full gradient buffer), all in ParamLayout order over padded_params()
// elements. GPT2<Backend> is the model; tests may pass a stand-in.
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
        if (stage_ == 2 && model.grads())
            fail("ZeRO 2 keeps no full gradient buffer: create the model with ModelOptions::gradient_buffer = false");
        if (stage_ < 2 && !model.grads())
            fail("ZeRO %d reduces the model's full gradient buffer, but the model has none "
                 "(ModelOptions::gradient_buffer = false is for ZeRO 2)",
                 stage_);
        segments_ = range_segments(model.layout(), state_offset_, state_offset_ + state_count_);
        const size_t nb = num_grad_buckets(model.layout());
        for (size_t b = 0; b < nb; b++) {
            ranges_.push_back(bucket_ranges(model.layout(), b));
            pieces_.push_back(bucket_pieces(plan_, model.layout(), b));
            std::vector<size_t> packed;
            for (const BucketPiece& p : pieces_.back()) packed.push_back(packed_offset(ranges_.back(), p.begin));
            piece_packed_.push_back(packed);
        }
        bucket_done_.assign(nb, 0);
        acquired_.assign(nb, 0);
        m_ = alloc_floats(state_count_);
        v_ = alloc_floats(state_count_);
        master_ = alloc_floats(state_count_);
        if (stage_ == 2) {
            accum_ = alloc_floats(plan_.shard_size);
            // The pool: ZERO2_LAYER_BUFFERS layer-bucket buffers (every layer bucket has the same size), then
            // bucket L's own (llmc/zero.h, zero_memory's bucket_pool).
            const size_t L = nb - 1, layers = std::min(L, ZERO2_LAYER_BUFFERS);
            slots_.resize(layers + 1);
            for (size_t k = 0; k <= layers; k++) {
                slots_[k].buf = alloc_floats(bucket_elements(model.layout(), k < layers ? 0 : L));
                slots_[k].reduced = be_.event_create();
            }
        }
        norm_ = alloc_floats(1);
        reset_master_from_params();
    }
    ~Optimizer() {
        for (float* p : {m_, v_, master_, accum_, norm_})
            if (p) be_.free(p);
        for (BucketSlot& k : slots_) {
            be_.free(k.buf);
            be_.event_destroy(k.reduced);
        }
    }
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    // What the model's backward of one micro-step does with the gradient buckets: ZeRO 2 accumulates them in the
    // pool's buffers (bucket_buffer), every stage announces them (bucket_ready).
    BackwardHooks backward_hooks(bool last_micro_step) {
        BackwardHooks h;
        if (stage_ == 2) h.bucket_buffer = [this](size_t b) { return bucket_buffer(b); };
        h.bucket_ready = [this, last_micro_step](size_t b) { bucket_ready(b, last_micro_step); };
        return h;
    }

    // ZeRO 2: the packed buffer (llmc/zero.h) that backward accumulates bucket `bucket` into, zeroed on the main
    // stream; the buffer's previous bucket is finished first (reduced if it was not announced, waited for, its own
    // pieces added into the accumulator). nullptr at ZeRO 0 and 1 (the model's own buffer).
    float* bucket_buffer(size_t bucket) {
        check_bucket("bucket_buffer", bucket);
        if (stage_ != 2) return nullptr;
        if (acquired_[bucket]) fail("Optimizer::bucket_buffer: bucket %zu handed out twice in one micro-step", bucket);
        BucketSlot& k = slot_of(bucket);
        release(k);
        be_.memset_zero(k.buf, bucket_elements(model_.layout(), bucket) * sizeof(float));
        k.bucket = (long)bucket;
        acquired_[bucket] = 1;
        return k.buf;
    }

    // Bucket `bucket`'s gradients are complete on the main stream (the model's backward calls this through its
    // hooks): its reduction is enqueued on the comm stream, after the main stream's work so far.
    void bucket_ready(size_t bucket, bool last_micro_step) {
        check_bucket("bucket_ready", bucket);
        if (!reduces_at(last_micro_step)) return;
        if (bucket_done_[bucket]) fail("Optimizer::bucket_ready: bucket %zu announced twice in one micro-step", bucket);
        if (stage_ == 2 && !acquired_[bucket])
            fail("Optimizer::bucket_ready: ZeRO 2 bucket %zu announced before bucket_buffer() handed it out (pass "
                 "backward_hooks() to the model's backward)",
                 bucket);
        be_.comm_waits_main();
        reduce_bucket(bucket);
    }

    // After every micro-step's backward: the buckets not announced through bucket_ready are reduced now (in
    // backward's order, L-1 .. 0, L), then the main stream waits for every reduction of this micro-step.
    void reduce_gradients(bool last_micro_step) {
        if (reduced_) fail("Optimizer::reduce_gradients: called after the last micro-step without step()");
        micro_steps_++;
        if (reduces_at(last_micro_step)) {
            const size_t L = bucket_done_.size() - 1;
            bool waited = false;
            for (size_t k = 0; k <= L; k++) {
                const size_t b = k < L ? L - 1 - k : L;
                if (bucket_done_[b]) continue;
                // ZeRO 2: a bucket backward never wrote (a caller without hooks) is a zero bucket, still reduced:
                // every rank issues the same collectives.
                if (stage_ == 2 && !acquired_[b]) bucket_buffer(b);
                if (bucket_done_[b]) continue;  // handing it out finished the buffer's previous bucket, maybe this one
                if (!waited) be_.comm_waits_main();
                waited = true;
                reduce_bucket(b);
            }
            if (stage_ == 2) {
                for (BucketSlot& k : slots_) release(k);  // waits for each reduction, adds the rank's pieces
                accumulated_ = true;
                std::fill(acquired_.begin(), acquired_.end(), 0);
            } else {
                be_.main_waits_comm();  // nothing on the main stream reads the gradients before they are reduced
            }
            std::fill(bucket_done_.begin(), bucket_done_.end(), 0);
        }
        if (last_micro_step) reduced_ = true;
    }

    float step(float lr, int t) {
        const float norm = grad_norm();
        apply(lr, t);
        return norm;
    }

    // step() in two halves, for a training loop that looks at the norm before deciding (skipping
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
        // The mean over the step's micro_steps_ x W micro-batches, applied once in fp32 (see the header comment).
        const float inv = 1.0f / ((float)micro_steps_ * (float)comm_.world_size());
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
        // The reduced gradients of this rank's state range: in place for ZeRO 0 and 1, the accumulator for ZeRO 2.
        const float* g = stage_ == 2 ? accum_ : model_.grads() + state_offset_;
        const float scale = update_scale_;
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

    void check_bucket(const char* what, size_t bucket) const {
        if (reduced_) fail("Optimizer::%s: called after the last micro-step without step()", what);
        if (bucket >= bucket_done_.size())
            fail("Optimizer::%s: bucket %zu, expected 0 .. %zu", what, bucket, bucket_done_.size() - 1);
    }

    // Enqueues bucket b's reductions on the comm stream (the caller made it wait for the main stream). ZeRO 2
    // reduces the bucket's buffer and records the buffer's event after the reductions.
    void reduce_bucket(size_t b) {
        void* st = be_.comm_stream();
        BucketSlot* k = stage_ == 2 ? &slot_of(b) : nullptr;
        float* grads = model_.grads();
        comm_.group_start();
        if (stage_ == 0) {
            for (const FlatRange& r : ranges_[b])
                comm_.all_reduce(grads + r.begin, r.end - r.begin, DType::F32, ReduceOp::Sum, st);
        } else {
            for (size_t i = 0; i < pieces_[b].size(); i++) {
                const BucketPiece& p = pieces_[b][i];
                float* g = k ? k->buf + piece_packed_[b][i] : grads + p.begin;
                comm_.reduce(g, g, p.end - p.begin, DType::F32, ReduceOp::Sum, p.root, st);
            }
        }
        comm_.group_end();
        if (k) be_.event_record(k->reduced, st);
        bucket_done_[b] = 1;
    }

    // ZeRO 2's pool (llmc/zero.h): buffer (L-1-b) mod K for layer bucket b < L, buffer K for bucket L.
    struct BucketSlot {
        float* buf = nullptr;
        void* reduced = nullptr;  // event, recorded on the comm stream after the reduction of `bucket`
        long bucket = -1;         // the bucket the buffer holds (-1: free)
    };
    BucketSlot& slot_of(size_t b) {
        const size_t L = bucket_done_.size() - 1, K = slots_.size() - 1;
        return b == L ? slots_[K] : slots_[(L - 1 - b) % K];
    }
    // Finishes the buffer's bucket: its reduction (issued now if backward did not announce it) is waited for on the
    // main stream, then the rank's own pieces go into the accumulator (copied at a step's first micro-step).
    void release(BucketSlot& k) {
        if (k.bucket < 0) return;
        const size_t b = (size_t)k.bucket;
        if (!bucket_done_[b]) {
            be_.comm_waits_main();
            reduce_bucket(b);
        }
        be_.stream_wait_event(be_.main_stream(), k.reduced);
        for (size_t i = 0; i < pieces_[b].size(); i++) {
            const BucketPiece& p = pieces_[b][i];
            if (p.root != plan_.rank) continue;
            float* dst = accum_ + (p.begin - plan_.begin());
            const float* src = k.buf + piece_packed_[b][i];
            if (accumulated_) be_.add_into(dst, src, p.end - p.begin);
            else be_.copy_on_device(dst, src, (p.end - p.begin) * sizeof(float));
        }
        k.bucket = -1;
    }

    // Enqueue a collective on the comm stream, ordered after the main stream's work and before its later work.
    template <class F>
    void collective(F&& f) {
        be_.comm_waits_main();
        f(be_.comm_stream());
        be_.main_waits_comm();
    }
    // The gradients are zeroed for the next step (ZeRO 2 zeroes each bucket buffer when it hands it out, and the
    // next step's first micro-step overwrites its accumulator).
    void finish_step() {
        if (stage_ != 2) be_.memset_zero(model_.grads(), model_.padded_params() * sizeof(float));
        accumulated_ = false;
        reduced_ = false;
        normed_ = false;
        micro_steps_ = 0;
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
    std::vector<std::vector<size_t>> piece_packed_; // per bucket: each piece's offset in a packed bucket buffer
    std::vector<char> bucket_done_;                // reduced in this micro-step
    std::vector<char> acquired_;                   // ZeRO 2: handed out by bucket_buffer() in this micro-step
    std::vector<BucketSlot> slots_;                // ZeRO 2: the bucket buffers
    float* accum_ = nullptr;       // ZeRO 2: the fp32 accumulator of this rank's shard of the reduced gradients
    float* norm_ = nullptr;        // the squared norm (one device float)
    bool accumulated_ = false;     // ZeRO 2: accum_ holds this step's first micro-step
    bool reduced_ = false;         // the last micro-step's reduction was issued
    bool normed_ = false;          // grad_norm() ran for this step (apply() uses its clip scale)
    float last_grad_scale_ = 1.0f;
    float update_scale_ = 1.0f;    // what AdamW multiplies the reduced sums by: 1/(k W) x the clip scale
    int micro_steps_ = 0;          // reduce_gradients calls since the last step (k)
};

}  // namespace llmc
