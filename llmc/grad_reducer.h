// The data-parallel gradient reduction: a GradSink (llmc/grad_sink.h) that reduces each gradient bucket across the
// ranks as soon as backward announces it, on the comm stream, overlapping the backward of the earlier layers. The
// optimizer step (llmc/zero_optimizer.h) owns one, made for its plan by make_grad_reducer() below, and reads the reduced
// gradients of its rank's range from it; docs/distributed.md explains the stages and their costs.
//
// Per micro-step: the model's backward writes into sink(last) (open_bucket, then bucket_done as each bucket is
// complete), then end_micro_step(last) reduces the buckets backward did not announce and makes the main stream wait
// for the reductions. What a bucket's reduction is, is the kind's:
//   ReplicatedGrads  (ZeRO 0)  at the last micro-step, all_reduce(Sum) in place of each of the bucket's flat ranges
//                              of the full fp32 gradient buffer
//   OwnedGrads       (ZeRO 1)  at the last micro-step, reduce(Sum) in place of each piece (a bucket range cut at the
//                              shard boundaries) to the rank that owns it; afterwards this rank's shard range of the
//                              buffer holds the reduced sum (only the owner reads a piece)
//   BucketPoolGrads  (ZeRO 2)  the same reduce at every micro-step, in a pool of bucket buffers, the own pieces added
//                              into a sharded fp32 accumulator (llmc/grad_bucket_pool.h)
// One group (group_start/group_end) per bucket; the padding past num_params is never communicated. Exactly one
// reduction per range or piece per optimizer step for ZeRO 0/1 whatever the number of micro-steps. Summing over
// ranks and over micro-steps commute, so ZeRO 2's per-micro-step sums add up to ZeRO 0/1's sum.
//
// World-size independence: a step's k x W micro-batches are the same for any split of the global batch (the data
// loader), and each micro-batch's gradient is computed alike (the model scales its logit gradients by 1/(B T) only,
// in act_t, never by a factor that depends on k or W: bf16(g/12) is not bf16(g/4)/3). The reduced gradients are
// the fp32 sums over micro-steps (accumulation) and ranks (reduction); the strategy multiplies them once by
// inv = fp32(1/(k W)), k = micro_steps(), W = data_parallel_size(). That is the same arithmetic for every split but
// for the order of the fp32 sums: bit-identical when those sums are exact or formed in the same order, else within
// fp32 reduction-order rounding (docs/distributed.md, "Semantics").
//
// Hybrid sharding (--shard-group N, llmc/dp_groups.h): `comm` is the rank's sharding group of N ranks and `replica`
// the ranks owning the same shard in the other groups. ZeRO 1 follows each bucket's reduces within the group with an
// all_reduce(Sum) across groups of the rank's own pieces (one group per bucket, on the comm stream after the
// reduces), so a rank sends across groups only its 1/N of the gradient; ZeRO 2 all-reduces its accumulator across
// groups once, after the last micro-step. The sums then run over every rank of every group (k x N x R).
//
// Reduce dtype (--reduce-dtype bf16): each part is converted into a bf16 staging buffer (at its packed offset in the
// bucket), reduced there, and converted back into its fp32 place where the result lands (every rank for ZeRO 0, the
// root for ZeRO 1/2), all on the comm stream, so buckets take turns with the one staging buffer.
//
// Streams (CUDA; on the CPU the stream calls are no-ops and the collectives block, so the same code computes the
// same math in program order):
//   main: backward of layer L-1 ... | layer l ... (bucket l complete)               | ... encoder (bucket L) |
//   comm:                            comm_waits_main -> reduce bucket l (overlaps the backward of layers < l) ...
//   main: main_waits_comm (end_micro_step) -> next micro-step or the optimizer's step
// No backward op touches a bucket's gradients after it was announced (llmc/model.h), and the reductions write only
// gradient buffers, which nothing on the main stream reads or rewrites before it has waited for them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend.h"
#include "comm.h"
#include "error.h"
#include "grad_sink.h"
#include "layout.h"
#include "state_ownership.h"
#include "zero.h"

namespace llmc {

template <class Backend>
class GradReducer : public GradSink {
public:
    ~GradReducer() override {
        if (wire_buf_) be_.free(wire_buf_);
    }
    GradReducer(const GradReducer&) = delete;
    GradReducer& operator=(const GradReducer&) = delete;

    // The sink the model's backward of one micro-step writes into.
    GradSink& sink(bool last_micro_step) {
        last_micro_step_ = last_micro_step;
        return *this;
    }
    void bucket_done(size_t bucket) override { bucket_ready(bucket, last_micro_step_); }

    // Bucket `bucket`'s gradients are complete on the main stream: at a micro-step that reduces, its reduction is
    // enqueued on the comm stream, after the main stream's work so far.
    void bucket_ready(size_t bucket, bool last_micro_step) {
        check_bucket("bucket_ready", bucket);
        if (!reduces_at(last_micro_step)) return;
        if (bucket_done_[bucket])
            fail("GradReducer::bucket_ready: bucket %zu announced twice in one micro-step", bucket);
        check_announced(bucket);
        be_.comm_waits_main();
        reduce_bucket(bucket);
    }

    // After every micro-step's backward: the buckets not announced through bucket_done are reduced now (in
    // backward's order: the layers from the last, then the others), then the main stream waits for every reduction
    // of this micro-step.
    void end_micro_step(bool last_micro_step) {
        if (reduced_) fail("GradReducer::end_micro_step: called after the last micro-step, before the step");
        micro_steps_++;
        if (reduces_at(last_micro_step)) {
            bool waited = false;
            for (size_t b : backward_order()) {
                if (bucket_done_[b]) continue;
                prepare_unannounced(b);
                if (bucket_done_[b]) continue;  // preparing it may have finished it (ZeRO 2's buffer reuse)
                if (!waited) be_.comm_waits_main();
                waited = true;
                reduce_bucket(b);
            }
            finish_micro_step(last_micro_step);
            std::fill(bucket_done_.begin(), bucket_done_.end(), 0);
        }
        if (last_micro_step) reduced_ = true;
    }

    // The reduced gradient of flat element `flat` onwards, for this rank's range (ZeRO 0: the whole buffer; ZeRO >=
    // 1: its shard).
    virtual const float* reduced_grads(size_t flat) const = 0;
    // After the optimizer's step (applied or skipped): the gradients are zeroed for the next step.
    virtual void finish_step() {
        reduced_ = false;
        micro_steps_ = 0;
    }
    // The full fp32 gradient buffer (ZeRO 0 and 1; nullptr at ZeRO 2), and its bytes.
    virtual float* grads() { return nullptr; }
    virtual size_t grad_buffer_bytes() const { return 0; }

    const ShardPlan& plan() const { return plan_; }
    // The last micro-step's reduction was issued (and waited for on the main stream).
    bool reduced() const { return reduced_; }
    // end_micro_step calls since the last step: the micro-steps whose gradients the reduced sums hold.
    int micro_steps() const { return micro_steps_; }
    // The ranks whose gradients the reduced sums hold: the group's N x the R groups.
    int data_parallel_size() const { return comm_.world_size() * (replica_ ? replica_->world_size() : 1); }
    DType wire_dtype() const { return wire_; }
    // Bytes this rank handed to gradient reductions so far (count x the wire type's size): within its sharding group
    // (all of them with one group), and across groups (hybrid sharding).
    uint64_t reduced_bytes() const { return reduced_bytes_; }
    uint64_t cross_group_bytes() const { return cross_group_bytes_; }

protected:
    // `padded`: the model's flat buffer length, a multiple of zero_pad_multiple(world size, align)
    // (ModelOptions::pad_to). wire: F32 or BF16. replica: hybrid sharding's comm across groups (null: one group).
    // The pieces' owners are the shard plan's, or `owners` (llmc/state_ownership.h: optimizer groups sharded by
    // whole matrices).
    GradReducer(Backend& be, const ParamLayout& layout, size_t padded, Comm& comm, size_t align, DType wire,
                Comm* replica, const std::vector<OwnedRange>* owners)
        : be_(be), layout_(layout), padded_(padded), comm_(comm), replica_(replica), wire_(wire),
          plan_(make_shard_plan(layout.total, comm.world_size(), comm.rank(), align)) {
        if (wire != DType::F32 && wire != DType::BF16)
            fail("GradReducer: gradients are reduced in f32 or bf16, not %s", dtype_name(wire));
        if (padded < plan_.padded)
            fail("the model's flat buffers have %zu elements but ZeRO over %d ranks needs %zu: create the model "
                 "with ModelOptions::pad_to = zero_pad_multiple(%d) = %zu",
                 padded, plan_.world_size, plan_.padded, plan_.world_size, zero_pad_multiple(plan_.world_size, align));
        for (size_t b = 0; b < num_grad_buckets(layout); b++) {
            ranges_.push_back(bucket_ranges(layout, b));
            pieces_.push_back(owners ? ownership_pieces(*owners, layout, b) : bucket_pieces(plan_, layout, b));
        }
        bucket_done_.assign(ranges_.size(), 0);
        if (wire_ == DType::BF16) wire_buf_ = be_.alloc(max_bucket_elements(layout) * 2);
    }

    // One collective of a bucket: an all_reduce of a range (root -1) or a reduce of a piece to its owner.
    struct Part {
        float* grads;   // the fp32 gradients: the full buffer, or ZeRO 2's bucket buffer
        size_t packed;  // offset in the bucket's packed layout (where a bf16 wire stages it)
        size_t count;
        int root;
    };
    virtual std::vector<Part> parts_of(size_t bucket) = 0;
    // ZeRO 0 and 1 reduce at the last micro-step only, ZeRO 2 at every one.
    virtual bool reduces_at(bool last_micro_step) const { return last_micro_step; }
    virtual void check_announced(size_t) {}
    virtual void prepare_unannounced(size_t) {}
    // Between a bucket's collectives and the conversion back from the wire (ZeRO 1's hop across groups), and after
    // everything of it is enqueued (ZeRO 2's event), on the comm stream.
    virtual void across_groups(const std::vector<Part>&, uint16_t*, Stream) {}
    virtual void bucket_reduced(size_t, Stream) {}
    // The end of a reducing micro-step: nothing on the main stream reads the gradients before they are reduced.
    virtual void finish_micro_step(bool) { be_.main_waits_comm(); }

    void check_bucket(const char* what, size_t bucket) const {
        if (reduced_) fail("GradReducer::%s: called after the last micro-step, before the step", what);
        if (bucket >= bucket_done_.size())
            fail("GradReducer::%s: bucket %zu, expected 0 .. %zu", what, bucket, bucket_done_.size() - 1);
    }
    bool is_reduced(size_t bucket) const { return bucket_done_[bucket] != 0; }
    // Enqueues bucket b's reductions on the comm stream (the caller made it wait for the main stream).
    void reduce_bucket(size_t b) {
        const Stream st = be_.comm_stream();
        const std::vector<Part> parts = parts_of(b);
        const bool staged = wire_ == DType::BF16;
        uint16_t* wire = static_cast<uint16_t*>(wire_buf_);
        if (staged)
            for (const Part& p : parts) be_.grads_to_bf16(wire + p.packed, p.grads, p.count, st);
        comm_.group_start();
        for (const Part& p : parts) {
            void* buf = staged ? (void*)(wire + p.packed) : (void*)p.grads;
            if (p.root < 0) comm_.all_reduce(buf, p.count, wire_, ReduceOp::Sum, st);
            else comm_.reduce(buf, buf, p.count, wire_, ReduceOp::Sum, p.root, st);
            reduced_bytes_ += p.count * dtype_size(wire_);
        }
        comm_.group_end();
        across_groups(parts, staged ? wire : nullptr, st);
        if (staged)
            for (const Part& p : parts)
                if (p.root < 0 || p.root == plan_.rank) be_.grads_from_bf16(p.grads, wire + p.packed, p.count, st);
        bucket_reduced(b, st);
        bucket_done_[b] = 1;
    }
    // The buckets in backward's order: the layers' from the last, then the others (wte's after the encoder).
    std::vector<size_t> backward_order() const {
        const size_t L = layout_.cfg.num_layers;
        std::vector<size_t> order;
        for (size_t l = L; l-- > 0;) order.push_back(l);
        for (size_t b = L; b < ranges_.size(); b++) order.push_back(b);
        return order;
    }
    float* alloc_floats(size_t n) { return alloc_zeroed_floats(be_, n); }

    Backend& be_;
    const ParamLayout& layout_;
    const size_t padded_;
    Comm& comm_;
    Comm* const replica_;          // hybrid sharding: the comm across groups (null: one group)
    const DType wire_;             // the type gradients are reduced in
    const ShardPlan plan_;
    std::vector<std::vector<FlatRange>> ranges_;    // per bucket: its flat ranges
    std::vector<std::vector<BucketPiece>> pieces_;  // per bucket: its ranges cut at the shard boundaries
    void* wire_buf_ = nullptr;     // bf16 wire: the staging buffer, the largest bucket's size
    uint64_t reduced_bytes_ = 0;
    uint64_t cross_group_bytes_ = 0;

private:
    std::vector<char> bucket_done_;  // reduced in this micro-step
    bool reduced_ = false;           // the last micro-step's reduction was issued
    bool last_micro_step_ = false;   // the micro-step sink() was handed out for
    int micro_steps_ = 0;            // end_micro_step calls since the last step
};

// ZeRO 0 and 1: backward accumulates every micro-step into one full fp32 gradient buffer, reduced at the last.
template <class Backend>
class FullBufferGrads : public GradReducer<Backend> {
public:
    ~FullBufferGrads() override { this->be_.free(grads_); }
    BucketGrads open_bucket(size_t bucket) override {
        this->check_bucket("open_bucket", bucket);
        return BucketGrads(grads_);
    }
    const float* reduced_grads(size_t flat) const override { return grads_ + flat; }
    void finish_step() override {
        this->be_.memset_zero(grads_, this->padded_ * sizeof(float));
        GradReducer<Backend>::finish_step();
    }
    float* grads() override { return grads_; }
    size_t grad_buffer_bytes() const override { return this->padded_ * sizeof(float); }

protected:
    FullBufferGrads(Backend& be, const ParamLayout& layout, size_t padded, Comm& comm, size_t align, DType wire,
                    Comm* replica, const std::vector<OwnedRange>* owners)
        : GradReducer<Backend>(be, layout, padded, comm, align, wire, replica, owners),
          grads_(this->alloc_floats(padded)) {}
    float* const grads_;
};

// ZeRO 0: every rank ends with every reduced gradient.
template <class Backend>
class ReplicatedGrads : public FullBufferGrads<Backend> {
public:
    ReplicatedGrads(Backend& be, const ParamLayout& layout, size_t padded, Comm& comm, size_t align, DType wire)
        : FullBufferGrads<Backend>(be, layout, padded, comm, align, wire, nullptr, nullptr) {}

private:
    std::vector<typename GradReducer<Backend>::Part> parts_of(size_t b) override {
        std::vector<typename GradReducer<Backend>::Part> parts;
        const std::vector<FlatRange>& ranges = this->ranges_[b];
        for (const FlatRange& r : ranges)
            parts.push_back({this->grads_ + r.begin, packed_offset(ranges, r.begin), r.end - r.begin, -1});
        return parts;
    }
};

// ZeRO 1: each piece reduced to its owner (and, under hybrid sharding, the own pieces all-reduced across groups).
// The owners are the shard plan's, or `owners` (see GradReducer).
template <class Backend>
class OwnedGrads : public FullBufferGrads<Backend> {
public:
    OwnedGrads(Backend& be, const ParamLayout& layout, size_t padded, Comm& comm, size_t align, DType wire,
               Comm* replica, const std::vector<OwnedRange>* owners = nullptr)
        : FullBufferGrads<Backend>(be, layout, padded, comm, align, wire, replica, owners) {}

private:
    using Part = typename GradReducer<Backend>::Part;
    std::vector<Part> parts_of(size_t b) override {
        std::vector<Part> parts;
        for (const BucketPiece& p : this->pieces_[b])
            parts.push_back({this->grads_ + p.begin, packed_offset(this->ranges_[b], p.begin), p.end - p.begin, p.root});
        return parts;
    }
    // Every group owns this rank's pieces alike: their sums across the groups.
    void across_groups(const std::vector<Part>& parts, uint16_t* wire, Stream st) override {
        Comm* replica = this->replica_;
        if (!replica) return;
        replica->group_start();
        for (const Part& p : parts)
            if (p.root == this->plan_.rank) {
                replica->all_reduce(wire ? (void*)(wire + p.packed) : (void*)p.grads, p.count, this->wire_,
                                    ReduceOp::Sum, st);
                this->cross_group_bytes_ += p.count * dtype_size(this->wire_);
            }
        replica->group_end();
    }
};

}  // namespace llmc
