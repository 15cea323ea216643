// The data-parallel gradient reduction of ZeRO stages 0-2: gradient buckets, ZeRO 2's bucket pool, and the stream
// and event order that overlaps the reductions with backward. The optimizer (llmc/optimizer.h) owns one and reads
// the reduced gradients of its rank's range from it; docs/distributed.md explains the stages and their costs.
//
// Per micro-step, the model's backward takes the hooks of backward_hooks(last):
//   bucket_buffer(b)         (ZeRO 2 only; ZeRO 0/1 accumulate in the model's full fp32 gradient buffer) where
//                            backward accumulates gradient bucket b: a buffer of the pool, zeroed on the main
//                            stream, handed out before backward's first op on bucket b
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
//   reduce_gradients(last)   after every micro-step's backward: reduces the buckets that were not announced (all of
//                            them for a caller that passes no hooks), then makes the main stream wait for the
//                            reductions; ZeRO 2 adds the rank's pieces into its shard accumulator (below).
// Exactly one reduction per range or piece per optimizer step for ZeRO 0/1 whatever the number of micro-steps;
// ZeRO 2 reduces every micro-step. Summing over ranks and over micro-steps commute, so the sum of ZeRO 2's
// per-micro-step sums equals ZeRO 0/1's sum of the accumulated sums.
//
// World-size independence: a step's k x W micro-batches are the same for any split of the global batch (the data
// loader), and each micro-batch's gradient is computed alike (the model scales its logit gradients by 1/(B T) only,
// in act_t, never by a factor that depends on k or W: bf16(g/12) is not bf16(g/4)/3). The reduced gradients are
// the fp32 sums over micro-steps (accumulation) and ranks (reduction); the optimizer multiplies them once by
// inv = fp32(1/(k W)), k = micro_steps(). That is the same arithmetic for every split but for the order of the fp32
// sums: bit-identical when those sums are exact or formed in the same order, else within fp32 reduction-order
// rounding (docs/distributed.md, "Semantics").
//
// Hybrid sharding (--shard-group N, llmc/dp_groups.h): `comm` is the rank's sharding group of N ranks (the plan
// shards over it) and `replica` the ranks owning the same shard in the other groups. ZeRO 1 follows each bucket's
// reduces within the group with an all_reduce(Sum) across groups of the rank's own pieces (one group per bucket, on
// the comm stream after the reduces), so a rank sends across groups only its 1/N of the gradient. ZeRO 2 reduces
// within the group every micro-step as above, and all-reduces its shard accumulator across groups once, after the
// last micro-step (through the bf16 staging buffer in chunks with a bf16 wire). The sums then run over every rank
// of every group: the optimizer divides by k x N x R (data_parallel_size()).
//
// ZeRO 2 holds no full gradient buffer. Between
// micro-steps a rank keeps only its fp32 shard accumulator; during backward, each bucket lives in a buffer of a pool
// (llmc/zero.h: bucket L's own buffer, ZERO2_LAYER_BUFFERS buffers shared by the layer buckets) from bucket_buffer()
// until its reduction has completed and the rank's own pieces have been added into the accumulator (copied at a
// step's first micro-step, added at the others: the same arithmetic as reducing a full buffer). Each buffer has an
// event recorded on the comm stream after its reduction; the main stream waits for that event only, when the buffer
// is handed out again (layer l's backward reuses the buffer of layer l + ZERO2_LAYER_BUFFERS) or at the end of the
// micro-step, so backward never waits for more than the one reduction whose buffer it needs.
//
// Streams and events (CUDA; on the CPU the stream calls are no-ops and the collectives block, so the same code
// computes the same math in program order):
//   main: backward of layer L-1 ... | layer l ... (bucket l complete)               | ... encoder (bucket L) |
//   comm:                            comm_waits_main -> reduce bucket l (overlaps the backward of layers < l) ...
//   main: main_waits_comm (reduce_gradients) -> next micro-step or the optimizer's step
// ZeRO 2, every micro-step (K = ZERO2_LAYER_BUFFERS, buffer k = (L-1-l) mod K):
//   main: [bucket_buffer(l): wait event k (reduction of bucket l+K) -> add its own pieces into the accumulator ->
//          zero buffer k] -> backward of layer l (into buffer k)
//   comm: comm_waits_main -> reduce bucket l in buffer k -> record event k
//   main (reduce_gradients): for each buffer, wait its event -> add its own pieces
// No backward op touches a bucket's gradients after it was announced (GPT2::backward), and the reductions write only
// gradient buffers, which nothing on the main stream reads or rewrites before it has waited for them.
#pragma once

#include <algorithm>
#include <vector>

#include "comm.h"
#include "error.h"
#include "grad_sink.h"
#include "layout.h"
#include "zero.h"

namespace llmc {

// The gradients of a model with this layout whose flat buffers have `padded` elements (a multiple of
// zero_pad_multiple(world size, align), ModelOptions::pad_to). ZeRO 0 and 1 hold the full fp32 gradient buffer.
template <class Backend>
class GradReducer : public GradSink {
public:
    // wire: the type the gradients are reduced in (F32, or BF16: half the bytes, see "Reduce dtype" above).
    // replica: hybrid sharding's comm across groups (null: one group, `comm` spans every rank).
    GradReducer(Backend& be, const ParamLayout& layout, size_t padded, Comm& comm, int zero_stage, size_t align,
                DType wire = DType::F32, Comm* replica = nullptr)
        : be_(be), layout_(layout), padded_(padded), comm_(comm), replica_(replica), stage_(zero_stage), wire_(wire) {
        validate_zero_stage(zero_stage);
        if (replica_ && stage_ == 0)
            fail("GradReducer: ZeRO 0 all-reduces over every rank; sharding groups need ZeRO 1 or 2");
        if (wire != DType::F32 && wire != DType::BF16)
            fail("GradReducer: gradients are reduced in f32 or bf16, not %s", dtype_name(wire));
        plan_ = make_shard_plan(layout.total, comm.world_size(), comm.rank(), align);
        if (padded < plan_.padded)
            fail("the model's flat buffers have %zu elements but ZeRO over %d ranks needs %zu: create the model "
                 "with ModelOptions::pad_to = zero_pad_multiple(%d) = %zu",
                 padded, plan_.world_size, plan_.padded, plan_.world_size, zero_pad_multiple(plan_.world_size, align));
        if (stage_ < 2) grads_ = alloc_floats(padded);
        const size_t nb = num_grad_buckets(layout);
        for (size_t b = 0; b < nb; b++) {
            ranges_.push_back(bucket_ranges(layout, b));
            pieces_.push_back(bucket_pieces(plan_, layout, b));
            std::vector<size_t> packed;
            for (const BucketPiece& p : pieces_.back()) packed.push_back(packed_offset(ranges_.back(), p.begin));
            piece_packed_.push_back(packed);
        }
        bucket_done_.assign(nb, 0);
        acquired_.assign(nb, 0);
        if (stage_ == 2) allocate_pool(nb);
        if (wire_ == DType::BF16) wire_buf_ = be_.alloc(max_bucket_elements(layout) * 2);
    }
    ~GradReducer() override {
        if (grads_) be_.free(grads_);
        if (accum_) be_.free(accum_);
        if (wire_buf_) be_.free(wire_buf_);
        for (BucketSlot& k : slots_) {
            be_.free(k.buf);
            be_.event_destroy(k.reduced);
        }
    }
    GradReducer(const GradReducer&) = delete;
    GradReducer& operator=(const GradReducer&) = delete;

    const ShardPlan& plan() const { return plan_; }
    int zero_stage() const { return stage_; }

    // The sink the model's backward of one micro-step writes into: ZeRO 2 accumulates the buckets in the pool's
    // buffers (bucket_buffer), ZeRO 0 and 1 in the full gradient buffer; every stage reduces each bucket as it is
    // announced (bucket_ready).
    GradSink& sink(bool last_micro_step) {
        last_micro_step_ = last_micro_step;
        return *this;
    }
    BucketGrads open_bucket(size_t bucket) override {
        float* packed = bucket_buffer(bucket);
        return packed ? BucketGrads(packed, ranges_[bucket]) : BucketGrads(grads_);
    }
    void bucket_done(size_t bucket) override { bucket_ready(bucket, last_micro_step_); }
    // The full fp32 gradient buffer (ZeRO 0 and 1; nullptr at ZeRO 2), and its bytes.
    float* grads() { return grads_; }
    size_t grad_buffer_bytes() const { return grads_ ? padded_ * sizeof(float) : 0; }

    // ZeRO 2: the packed buffer (llmc/zero.h) that backward accumulates bucket `bucket` into, zeroed on the main
    // stream; the buffer's previous bucket is finished first (reduced if it was not announced, waited for, its own
    // pieces added into the accumulator). nullptr at ZeRO 0 and 1 (the model's own buffer).
    float* bucket_buffer(size_t bucket) {
        check_bucket("bucket_buffer", bucket);
        if (stage_ != 2) return nullptr;
        if (acquired_[bucket])
            fail("GradReducer::bucket_buffer: bucket %zu handed out twice in one micro-step", bucket);
        BucketSlot& k = slot_of(bucket);
        release(k);
        be_.memset_zero(k.buf, bucket_elements(layout_, bucket) * sizeof(float));
        k.bucket = (long)bucket;
        acquired_[bucket] = 1;
        return k.buf;
    }

    // Bucket `bucket`'s gradients are complete on the main stream (the model's backward calls this through its
    // hooks): its reduction is enqueued on the comm stream, after the main stream's work so far.
    void bucket_ready(size_t bucket, bool last_micro_step) {
        check_bucket("bucket_ready", bucket);
        if (!reduces_at(last_micro_step)) return;
        if (bucket_done_[bucket])
            fail("GradReducer::bucket_ready: bucket %zu announced twice in one micro-step", bucket);
        if (stage_ == 2 && !acquired_[bucket])
            fail("GradReducer::bucket_ready: ZeRO 2 bucket %zu announced before bucket_buffer() handed it out (pass "
                 "backward_hooks() to the model's backward)",
                 bucket);
        be_.comm_waits_main();
        reduce_bucket(bucket);
    }

    // After every micro-step's backward: the buckets not announced through bucket_ready are reduced now (in
    // backward's order, L-1 .. 0, L), then the main stream waits for every reduction of this micro-step.
    void reduce_gradients(bool last_micro_step) {
        if (reduced_) fail("GradReducer::reduce_gradients: called after the last micro-step without step()");
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
                if (last_micro_step && replica_) reduce_accumulator_across_groups();
            } else {
                be_.main_waits_comm();  // nothing on the main stream reads the gradients before they are reduced
            }
            std::fill(bucket_done_.begin(), bucket_done_.end(), 0);
        }
        if (last_micro_step) reduced_ = true;
    }

    // The last micro-step's reduction was issued (and waited for on the main stream).
    bool reduced() const { return reduced_; }
    // reduce_gradients calls since the last step: the micro-steps whose gradients the reduced sums hold.
    int micro_steps() const { return micro_steps_; }
    // Bytes this rank handed to gradient reductions so far (count x the wire type's size): within its sharding group
    // (all of them with one group), and across groups (hybrid sharding).
    uint64_t reduced_bytes() const { return reduced_bytes_; }
    uint64_t cross_group_bytes() const { return cross_group_bytes_; }
    // The ranks whose gradients the reduced sums hold: the group's N x the R groups.
    int data_parallel_size() const { return comm_.world_size() * (replica_ ? replica_->world_size() : 1); }
    DType wire_dtype() const { return wire_; }
    // The reduced gradient of flat element `flat_begin` onwards, for this rank's range (ZeRO 0: the whole buffer;
    // ZeRO >= 1: its shard): in place in the model's buffer for ZeRO 0 and 1, the accumulator for ZeRO 2.
    const float* reduced_grads(size_t flat_begin) const {
        return stage_ == 2 ? accum_ + (flat_begin - plan_.begin()) : grads_ + flat_begin;
    }
    // After the optimizer's step (applied or skipped): the gradients are zeroed for the next step (ZeRO 2 zeroes each
    // bucket buffer when it hands it out, and the next step's first micro-step overwrites its accumulator).
    void finish_step() {
        if (stage_ != 2) be_.memset_zero(grads_, padded_ * sizeof(float));
        accumulated_ = false;
        reduced_ = false;
        micro_steps_ = 0;
    }

private:
    // ZeRO 2's pool: ZERO2_LAYER_BUFFERS layer-bucket buffers (every layer bucket has the same size), then bucket
    // L's own (llmc/zero.h, zero_memory's bucket_pool); and the fp32 accumulator of this rank's shard.
    void allocate_pool(size_t num_buckets) {
        accum_ = alloc_floats(plan_.shard_size);
        const size_t L = num_buckets - 1, layers = std::min(L, ZERO2_LAYER_BUFFERS);
        slots_.resize(layers + 1);
        for (size_t k = 0; k <= layers; k++) {
            slots_[k].buf = alloc_floats(bucket_elements(layout_, k < layers ? 0 : L));
            slots_[k].reduced = be_.event_create();
        }
    }
    float* alloc_floats(size_t n) {
        float* p = static_cast<float*>(be_.alloc(n * sizeof(float)));
        be_.memset_zero(p, n * sizeof(float));
        return p;
    }
    // ZeRO 0 and 1 reduce at the last micro-step only, ZeRO 2 at every one.
    bool reduces_at(bool last_micro_step) const { return last_micro_step || stage_ == 2; }

    void check_bucket(const char* what, size_t bucket) const {
        if (reduced_) fail("GradReducer::%s: called after the last micro-step without step()", what);
        if (bucket >= bucket_done_.size())
            fail("GradReducer::%s: bucket %zu, expected 0 .. %zu", what, bucket, bucket_done_.size() - 1);
    }

    // Enqueues bucket b's reductions on the comm stream (the caller made it wait for the main stream). ZeRO 2
    // reduces the bucket's buffer and records the buffer's event after the reductions.
    // With a bf16 wire, each part is converted into the staging buffer (at its packed offset in the bucket), reduced
    // there, and converted back into its fp32 place where the result lands (every rank for ZeRO 0, the root for
    // ZeRO 1/2), all on the comm stream, so buckets take turns with the one staging buffer.
    void reduce_bucket(size_t b) {
        const Stream st = be_.comm_stream();
        BucketSlot* k = stage_ == 2 ? &slot_of(b) : nullptr;
        const std::vector<Part> parts = parts_of(b, k);
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
        if (replica_ && stage_ == 1) {  // this rank's pieces, across groups (every group owns them alike)
            replica_->group_start();
            for (const Part& p : parts)
                if (p.root == plan_.rank) {
                    replica_->all_reduce(staged ? (void*)(wire + p.packed) : (void*)p.grads, p.count, wire_,
                                         ReduceOp::Sum, st);
                    cross_group_bytes_ += p.count * dtype_size(wire_);
                }
            replica_->group_end();
        }
        if (staged)
            for (const Part& p : parts)
                if (p.root < 0 || p.root == plan_.rank) be_.grads_from_bf16(p.grads, wire + p.packed, p.count, st);
        if (k) be_.event_record(k->reduced, st);
        bucket_done_[b] = 1;
    }
    // ZeRO 2 under hybrid sharding: the accumulator's real elements (the padding stays zero) summed across groups,
    // on the comm stream after the main stream's last additions into it; in place (fp32), or through the staging
    // buffer in chunks of the largest bucket (bf16).
    void reduce_accumulator_across_groups() {
        const Stream st = be_.comm_stream();
        const size_t own = plan_.logical_end(plan_.rank) - plan_.logical_begin(plan_.rank);
        const size_t chunk = wire_ == DType::BF16 ? max_bucket_elements(layout_) : std::max<size_t>(own, 1);
        uint16_t* wire = static_cast<uint16_t*>(wire_buf_);
        be_.comm_waits_main();
        for (size_t off = 0; off < own; off += chunk) {
            const size_t n = std::min(chunk, own - off);
            if (wire_ == DType::BF16) {
                be_.grads_to_bf16(wire, accum_ + off, n, st);
                replica_->all_reduce(wire, n, wire_, ReduceOp::Sum, st);
                be_.grads_from_bf16(accum_ + off, wire, n, st);
            } else {
                replica_->all_reduce(accum_ + off, n, wire_, ReduceOp::Sum, st);
            }
            cross_group_bytes_ += n * dtype_size(wire_);
        }
        be_.main_waits_comm();
    }
    struct BucketSlot;
    // One collective of a bucket: ZeRO 0 all-reduces each range (root -1), ZeRO 1/2 reduce each piece to its owner.
    struct Part {
        float* grads;   // the fp32 gradients: the model's buffer, or ZeRO 2's bucket buffer
        size_t packed;  // offset in the bucket's packed layout (where a bf16 wire stages it)
        size_t count;
        int root;
    };
    std::vector<Part> parts_of(size_t b, BucketSlot* k) const {
        std::vector<Part> parts;
        if (stage_ == 0) {
            for (const FlatRange& r : ranges_[b])
                parts.push_back({grads_ + r.begin, packed_offset(ranges_[b], r.begin), r.end - r.begin, -1});
            return parts;
        }
        for (size_t i = 0; i < pieces_[b].size(); i++) {
            const BucketPiece& p = pieces_[b][i];
            float* g = k ? k->buf + piece_packed_[b][i] : grads_ + p.begin;
            parts.push_back({g, piece_packed_[b][i], p.end - p.begin, p.root});
        }
        return parts;
    }

    // ZeRO 2's pool (llmc/zero.h): buffer (L-1-b) mod K for layer bucket b < L, buffer K for bucket L.
    struct BucketSlot {
        float* buf = nullptr;
        Event reduced;            // recorded on the comm stream after the reduction of `bucket`
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

    Backend& be_;
    const ParamLayout& layout_;
    size_t padded_;
    Comm& comm_;
    Comm* replica_;                // hybrid sharding: the comm across groups (null: one group)
    int stage_;
    ShardPlan plan_;
    std::vector<std::vector<FlatRange>> ranges_;   // per bucket: its flat ranges (ZeRO 0 all-reduces them)
    std::vector<std::vector<BucketPiece>> pieces_; // per bucket: the ranges cut at shard boundaries (ZeRO >= 1)
    std::vector<std::vector<size_t>> piece_packed_; // per bucket: each piece's offset in a packed bucket buffer
    std::vector<char> bucket_done_;                // reduced in this micro-step
    std::vector<char> acquired_;                   // ZeRO 2: handed out by bucket_buffer() in this micro-step
    std::vector<BucketSlot> slots_;                // ZeRO 2: the bucket buffers
    float* grads_ = nullptr;       // ZeRO 0, 1: the full fp32 gradient buffer backward accumulates into
    bool last_micro_step_ = false; // the micro-step sink() was handed out for
    float* accum_ = nullptr;       // ZeRO 2: the fp32 accumulator of this rank's shard of the reduced gradients
    bool accumulated_ = false;     // ZeRO 2: accum_ holds this step's first micro-step
    bool reduced_ = false;         // the last micro-step's reduction was issued
    int micro_steps_ = 0;          // reduce_gradients calls since the last step
    DType wire_;                   // the type gradients are reduced in
    void* wire_buf_ = nullptr;     // bf16 wire: the staging buffer, the largest bucket's size
    uint64_t reduced_bytes_ = 0;
    uint64_t cross_group_bytes_ = 0;
};

}  // namespace llmc
