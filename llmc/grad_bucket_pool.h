// ZeRO 2's gradient reduction (llmc/grad_reducer.h has the common part): no rank holds the full gradient. Between
// micro-steps a rank keeps only its fp32 shard accumulator; during backward, each bucket lives in a buffer of a pool
// from open_bucket() until its reduction (a reduce of each piece to its owner, every micro-step) has completed and
// the rank's own pieces have been added into the accumulator (copied at a step's first micro-step, added at the
// others: the same arithmetic as reducing a full buffer).
//
// The pool: each bucket that is not a layer's (GPT-2: wte, wpe, lnfw, lnfb) has a buffer of its own, since the
// classifier writes wte's gradient first and the encoder last; the layer buckets share ZERO2_LAYER_BUFFERS buffers,
// bucket l taking buffer (L-1-l) mod ZERO2_LAYER_BUFFERS. A buffer holds its bucket's ranges back to back ("packed",
// llmc/grad_sink.h). Each buffer has an event recorded on the comm stream after its reduction; the main stream waits
// for that event only, when the buffer is handed out again (layer l's backward reuses the buffer of layer l +
// ZERO2_LAYER_BUFFERS, whose reduction had the backward of the layers in between to hide behind) or at the end of the
// micro-step, so backward never waits for more than the one reduction whose buffer it needs. Per micro-step
// (K = ZERO2_LAYER_BUFFERS, buffer k = (L-1-l) mod K):
//   main: [open_bucket(l): wait event k (reduction of bucket l+K) -> add its own pieces into the accumulator ->
//          zero buffer k] -> backward of layer l (into buffer k)
//   comm: comm_waits_main -> reduce bucket l in buffer k -> record event k
//   main (end_micro_step): for each buffer, wait its event -> add its own pieces
// Under hybrid sharding the accumulator (its real elements) is all-reduced across the groups once, after the last
// micro-step (through the bf16 staging buffer in chunks of the largest bucket with a bf16 wire).
#pragma once

#include <algorithm>
#include <vector>

#include "grad_reducer.h"

namespace llmc {

template <class Backend>
class BucketPoolGrads : public GradReducer<Backend> {
public:
    // The owners are the shard plan's (the accumulator: this rank's shard), or `owners` (llmc/state_ownership.h: the
    // accumulator holds this rank's owned ranges back to back, in flat order).
    BucketPoolGrads(Backend& be, const ParamLayout& layout, size_t padded, Comm& comm, size_t align, DType wire,
                    Comm* replica, const std::vector<OwnedRange>* owners = nullptr)
        : GradReducer<Backend>(be, layout, padded, comm, align, wire, replica, owners) {
        const ShardPlan& plan = this->plan_;
        if (owners) {
            for (const OwnedRange& o : *owners)
                if (o.owner == plan.rank) own_.push_back({o.begin, o.end}), accum_size_ += o.end - o.begin;
            real_size_ = accum_size_;
        } else {
            own_.push_back({plan.begin(), plan.end()});
            accum_size_ = plan.shard_size, real_size_ = plan.logical_end(plan.rank) - plan.logical_begin(plan.rank);
        }
        for (size_t b = 0; b < this->ranges_.size(); b++) {
            std::vector<size_t> packed;
            for (const BucketPiece& p : this->pieces_[b]) packed.push_back(packed_offset(this->ranges_[b], p.begin));
            piece_packed_.push_back(packed);
        }
        acquired_.assign(this->ranges_.size(), 0);
        allocate_pool();
    }
    ~BucketPoolGrads() override {
        this->be_.free(accum_);
        for (Slot& k : slots_) {
            this->be_.free(k.buf);
            this->be_.event_destroy(k.reduced);
        }
    }

    BucketGrads open_bucket(size_t bucket) override {
        return BucketGrads(bucket_buffer(bucket), this->ranges_[bucket]);
    }
    // The packed buffer backward accumulates bucket `bucket` into, zeroed on the main stream; the buffer's previous
    // bucket is finished first (reduced if it was not announced, waited for, its own pieces added into the
    // accumulator).
    float* bucket_buffer(size_t bucket) {
        this->check_bucket("bucket_buffer", bucket);
        if (acquired_[bucket]) fail("GradReducer::bucket_buffer: bucket %zu handed out twice in one micro-step", bucket);
        Slot& k = slot_of(bucket);
        release(k);
        this->be_.memset_zero(k.buf, bucket_elements(this->layout_, bucket) * sizeof(float));
        k.bucket = (long)bucket;
        acquired_[bucket] = 1;
        return k.buf;
    }
    const float* reduced_grads(size_t flat) const override { return accum_ + accum_index(flat); }
    // The next step's first micro-step overwrites the accumulator; each bucket buffer is zeroed when handed out.
    void finish_step() override {
        accumulated_ = false;
        GradReducer<Backend>::finish_step();
    }

private:
    using Part = typename GradReducer<Backend>::Part;
    struct Slot {
        float* buf = nullptr;
        Event reduced;     // recorded on the comm stream after the reduction of `bucket`
        long bucket = -1;  // the bucket the buffer holds (-1: free)
    };

    // The layer-bucket buffers (every layer bucket has the same size), then one per other bucket; and the fp32
    // accumulator of this rank's shard (zero_memory's bucket_pool and accumulator, llmc/zero.h).
    void allocate_pool() {
        const size_t L = this->layout_.cfg.num_layers, layers = std::min(L, ZERO2_LAYER_BUFFERS);
        accum_ = this->alloc_floats(std::max<size_t>(accum_size_, 1));
        slots_.resize(layers + this->ranges_.size() - L);
        for (size_t k = 0; k < slots_.size(); k++) {
            slots_[k].buf = this->alloc_floats(bucket_elements(this->layout_, k < layers ? 0 : L + (k - layers)));
            slots_[k].reduced = this->be_.event_create();
        }
    }
    Slot& slot_of(size_t b) {
        const size_t L = this->layout_.cfg.num_layers, layers = std::min(L, ZERO2_LAYER_BUFFERS);
        return b >= L ? slots_[layers + (b - L)] : slots_[(L - 1 - b) % layers];
    }

    bool reduces_at(bool) const override { return true; }
    void check_announced(size_t b) override {
        if (!acquired_[b])
            fail("GradReducer::bucket_ready: ZeRO 2 bucket %zu announced before bucket_buffer() handed it out (pass "
                 "the sink to the model's backward)", b);
    }
    // A bucket backward never wrote (a caller without a backward) is a zero bucket, still reduced: every rank issues
    // the same collectives.
    void prepare_unannounced(size_t b) override {
        if (!acquired_[b]) bucket_buffer(b);
    }
    std::vector<Part> parts_of(size_t b) override {
        std::vector<Part> parts;
        Slot& k = slot_of(b);
        for (size_t i = 0; i < this->pieces_[b].size(); i++) {
            const BucketPiece& p = this->pieces_[b][i];
            parts.push_back({k.buf + piece_packed_[b][i], piece_packed_[b][i], p.end - p.begin, p.root});
        }
        return parts;
    }
    void bucket_reduced(size_t b, Stream st) override { this->be_.event_record(slot_of(b).reduced, st); }
    void finish_micro_step(bool last_micro_step) override {
        for (Slot& k : slots_) release(k);  // waits for each reduction, adds the rank's pieces
        accumulated_ = true;
        std::fill(acquired_.begin(), acquired_.end(), 0);
        if (last_micro_step && this->replica_) reduce_accumulator_across_groups();
    }

    // Finishes the buffer's bucket: its reduction (issued now if backward did not announce it) is waited for on the
    // main stream, then the rank's own pieces go into the accumulator (copied at a step's first micro-step).
    void release(Slot& k) {
        if (k.bucket < 0) return;
        const size_t b = (size_t)k.bucket;
        if (!this->is_reduced(b)) {
            this->be_.comm_waits_main();
            this->reduce_bucket(b);
        }
        this->be_.stream_wait_event(this->be_.main_stream(), k.reduced);
        for (size_t i = 0; i < this->pieces_[b].size(); i++) {
            const BucketPiece& p = this->pieces_[b][i];
            if (p.root != this->plan_.rank) continue;
            float* dst = accum_ + accum_index(p.begin);
            const float* src = k.buf + piece_packed_[b][i];
            if (accumulated_) this->be_.add_into(dst, src, p.end - p.begin);
            else this->be_.copy_on_device(dst, src, (p.end - p.begin) * sizeof(float));
        }
        k.bucket = -1;
    }
    // Hybrid sharding: the accumulator's real elements (the padding stays zero) summed across groups, on the comm
    // stream after the main stream's last additions into it; in place (fp32), or through the staging buffer in chunks
    // of the largest bucket (bf16).
    void reduce_accumulator_across_groups() {
        Backend& be = this->be_;
        const Stream st = be.comm_stream();
        const size_t own = real_size_;
        const bool bf16 = this->wire_ == DType::BF16;
        const size_t chunk = bf16 ? max_bucket_elements(this->layout_) : std::max<size_t>(own, 1);
        uint16_t* wire = static_cast<uint16_t*>(this->wire_buf_);
        be.comm_waits_main();
        for (size_t off = 0; off < own; off += chunk) {
            const size_t n = std::min(chunk, own - off);
            if (bf16) {
                be.grads_to_bf16(wire, accum_ + off, n, st);
                this->replica_->all_reduce(wire, n, this->wire_, ReduceOp::Sum, st);
                be.grads_from_bf16(accum_ + off, wire, n, st);
            } else {
                this->replica_->all_reduce(accum_ + off, n, this->wire_, ReduceOp::Sum, st);
            }
            this->cross_group_bytes_ += n * dtype_size(this->wire_);
        }
        be.main_waits_comm();
    }

    std::vector<std::vector<size_t>> piece_packed_;  // per bucket: each piece's offset in its packed buffer
    std::vector<char> acquired_;                     // handed out by bucket_buffer() in this micro-step
    std::vector<Slot> slots_;
    float* accum_ = nullptr;    // the fp32 accumulator of this rank's owned ranges of the reduced gradients
    bool accumulated_ = false;  // accum_ holds this step's first micro-step
    std::vector<FlatRange> own_;       // the flat ranges the accumulator holds, back to back, in flat order
    size_t accum_size_ = 0, real_size_ = 0;  // its elements, and those before the padding

    // Where flat element `flat` sits in the accumulator: its offset in the shard, or in the owned ranges.
    size_t accum_index(size_t flat) const {
        if (own_.size() == 1) return flat - own_[0].begin;
        return packed_offset(own_, flat);
    }
};

}  // namespace llmc
