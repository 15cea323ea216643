// Data parallelism for a recipe whose optimizer groups are sharded their own ways (llmc/recipe.h, llmc/state_ownership.h):
// the speedrun's Muon, whose Newton-Schulz needs each block matrix whole on one rank, beside Adam's elementwise state
// in flat ranges. A DataParallel strategy (llmc/data_parallel.h), made by llmc/parallel.h when the recipe has such a
// group.
//
// Ownership: the plan deals every whole matrix of a Muon group to one owner rank (largest first to the least loaded,
// so the ranks' Newton-Schulz work balances) and cuts the rest in the flat ranges of the shard plan; ZeRO 0 keeps
// everything on every rank (each Muon matrix then taken from rank 0 after the update, below). One step:
//   gradients   ZeRO 0: all-reduced at the last micro-step (every rank steps everything);
//               ZeRO 1: each bucket piece reduced to its owner at the last micro-step (llmc/grad_reducer.h, the
//               pieces cut where the owner changes), also across the sharding groups under --shard-group;
//               ZeRO 2: the same at every micro-step, the owner adding its pieces into an accumulator of what it
//               owns (llmc/grad_bucket_pool.h)
//   norm        the sum of the owners' squared norms of what they own, all-reduced (the same value on every rank and
//               stage), then clipping as llmc/zero_optimizer.h
//   update      Muon on each owned matrix (a fused qkv weight: its q, k and v each alone), momentum warmed up as
//               MuonConfig says; AdamW on each owned piece of the other groups; each group at its multiple of the
//               schedule's rate
//   parameters  ZeRO 1 and 2: every owned range broadcast from its owner (one group call on the comm stream),
//               overlapping the zeroing of the gradients; the next forward waits for it. ZeRO 0 on several ranks: each Muon
//               matrix's master and parameters broadcast from rank 0, since the replicas' Newton-Schulz GEMMs may
//               round differently (AdamW's elementwise arithmetic is the same on every rank)
// State (fp32, on the owner): for each owned element m, v and the master weight, packed in flat order; a Muon
// matrix keeps its momentum in m (v stays zero). Checkpoints: one optimizer file per owned range, the files tiling
// [0, num_params) in flat order (meta.json's world_size counts the files); a resumed run reads the parts of the files
// that overlap its own ranges, so the matrices are dealt again for any other world size.
#pragma once

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint_format.h"
#include "data_parallel.h"
#include "grad_bucket_pool.h"
#include "grad_reducer.h"
#include "model.h"
#include "model_file.h"
#include "optimizer.h"
#include "recipe.h"
#include "speedrun_recipe.h"
#include "state_ownership.h"
#include "zero_optimizer.h"

namespace llmc {

template <class Backend>
class DataParallelOwned : public DataParallel<Backend> {
public:
    using act_t = typename Backend::act_t;

    DataParallelOwned(const ParallelPlan& plan, DpGroups groups, Backend& be, Model<Backend>& model,
                      const OptimConfig& cfg, uint64_t seed)
        : DataParallel<Backend>(plan, std::move(groups)), be_(be), model_(model), cfg_(cfg), seed_(seed),
          comm_(*this->groups_.shard), stage_(plan.zero_stage) {
        const ParamLayout& layout = model.layout();
        // ZeRO 0: one owner (this rank) of everything; ZeRO 1: the plan's owners within the sharding group.
        owners_ = stage_ == 0 ? state_ownership(layout, make_shard_plan(layout.total, 1, 0, plan.align),
                                                plan.group_sharding)
                              : plan.ownership(layout);
        me_ = stage_ == 0 ? 0 : plan.state_rank();
        reducer_ = make_grad_reducer(be, layout, model.padded_params(), comm_, stage_, plan.align, cfg.reduce_dtype,
                                     this->groups_.replica, stage_ == 0 ? nullptr : &owners_);
        size_t count = 0;
        for (const OwnedRange& o : owners_) {
            state_offset_.push_back(count);
            if (o.owner == me_) count += o.end - o.begin;
        }
        state_count_ = count;
        m_ = alloc_zeroed_floats(be, std::max<size_t>(count, 1));
        v_ = alloc_zeroed_floats(be, std::max<size_t>(count, 1));
        master_ = alloc_zeroed_floats(be, std::max<size_t>(count, 1));
        norm_ = alloc_zeroed_floats(be, 1);
        plan_work(layout);
        reset_master();
    }
    ~DataParallelOwned() override {
        for (float* p : {m_, v_, master_, norm_}) be_.free(p);
    }

    GradSink& grad_sink(bool last_micro_step) override { return reducer_->sink(last_micro_step); }
    void end_micro_step(bool last_micro_step) override { reducer_->end_micro_step(last_micro_step); }

    float grad_norm() override {
        if (!reducer_->reduced()) fail("Optimizer::step: end_micro_step(last_micro_step = true) was not called");
        be_.memset_zero(norm_, sizeof(float));
        if (stage_ == 0) {  // every rank holds every reduced gradient: each sums its flat shard's
            const ShardPlan& p = reducer_->plan();
            be_.norm_squared_into(norm_, reducer_->reduced_grads(p.begin()), p.shard_size);
        } else {
            for (const OwnedRange& o : owners_)
                if (o.owner == me_) be_.norm_squared_into(norm_, reducer_->reduced_grads(o.begin), o.end - o.begin);
        }
        be_.comm_waits_main();
        comm_.all_reduce(norm_, 1, DType::F32, ReduceOp::Sum, be_.comm_stream());
        be_.main_waits_comm();
        float norm2 = 0;
        be_.copy_to_host(&norm2, norm_, sizeof(float));
        // The mean over the step's micro-steps x ranks, once, in fp32 (llmc/zero_optimizer.h).
        const float inv = 1.0f / ((float)reducer_->micro_steps() * (float)reducer_->data_parallel_size());
        const float norm = std::sqrt(norm2) * inv;
        float clip = 1.0f;
        if (cfg_.grad_clip > 0 && cfg_.grad_clip / (norm + 1e-6f) < 1.0f) clip = cfg_.grad_clip / (norm + 1e-6f);
        update_scale_ = clip * inv;
        normed_ = true;
        return norm;
    }

    void apply(float lr, int step) override {
        if (!normed_) fail("Optimizer::apply: grad_norm() was not called for this step");
        if (step < 1) fail("Optimizer::step: step t=%d, expected >= 1", step);
        act_t* params = model_.params();
        const float mu = muon_momentum_at(step - 1, cfg_.muon.momentum_warmup);
        for (const MuonMatrix& w : muon_)
            be_.muon_update(params + w.flat, master_ + w.state, reducer_->reduced_grads(w.flat), m_ + w.state, w.rows,
                            w.cols, lr * w.lr_scale, mu, cfg_.muon.nesterov, update_scale_,
                            AdamW<Backend>::rounding_seed(seed_, step, w.tensor), w.offset_in_tensor);
        const bool replicas = stage_ == 0 && comm_.world_size() > 1;
        if (replicas) {  // rank 0's Muon result everywhere, overlapping AdamW (other memory) on the main stream
            be_.comm_waits_main();
            broadcast_muon_from_rank0(be_.comm_stream());
        }
        for (const AdamPiece& a : adam_)
            be_.adamw_update(params + a.flat, master_ + a.state, reducer_->reduced_grads(a.flat), m_ + a.state,
                             v_ + a.state, a.length, lr * a.lr_scale, cfg_.beta1, cfg_.beta2, cfg_.eps,
                             a.decayed ? cfg_.weight_decay : 0.0f, update_scale_, step,
                             AdamW<Backend>::rounding_seed(seed_, step, a.tensor), a.offset_in_tensor);
        if (stage_ >= 1) {
            be_.comm_waits_main();  // the broadcasts read what the updates just wrote
            broadcast_owned(be_.comm_stream());
        }
        finish_step();  // zeroes the gradients on the main stream while the broadcasts run
        if (stage_ >= 1 || replicas) be_.main_waits_comm();
    }

    void skip() override {
        if (!reducer_->reduced()) fail("Optimizer::skip: end_micro_step(last_micro_step = true) was not called");
        finish_step();
    }
    void after_step(int, bool) override {}

    // ---- checkpoints -----------------------------------------------------------------------------------------------
    void describe_checkpoint(CheckpointMeta& meta) const override {
        meta.world_size = (int)owners_.size(), meta.zero_stage = stage_, meta.num_params = model_.num_params();
        meta.files.assign(1, CheckpointFileInfo{"model.bin"});
        for (size_t i = 0; i < owners_.size(); i++)
            meta.files.push_back({optim_file_name(i), 0, 0, owners_[i].begin, owners_[i].end});
    }
    std::vector<OwnStateFile> own_state_files() override {
        const DpMesh& mesh = this->plan_.mesh;
        // Sharding group 0 writes the state every group holds; under ZeRO 0 rank 0 writes it.
        if (mesh.replica_rank != 0 || (stage_ == 0 && mesh.dp_rank != 0)) return {};
        std::vector<OwnStateFile> files;
        for (size_t i = 0; i < owners_.size(); i++) {
            if (owners_[i].owner != me_) continue;
            OwnStateFile f;
            f.index = 1 + i, f.name = optim_file_name(i), f.begin = owners_[i].begin, f.end = owners_[i].end;
            const size_t base = state_offset_[i];
            f.fetch = [this, base](int which, uint64_t off, size_t count, float* dst) {
                float* arrays[3] = {m_, v_, master_};
                be_.copy_to_host(dst, arrays[which] + base + off, count * sizeof(float));
            };
            files.push_back(f);
        }
        return files;
    }
    // Parameters from model.bin (the exact saved values), this rank's owned ranges of m, v, master from whichever
    // files hold them.
    void load_state(const std::string& dir, const CheckpointMeta& meta) override {
        model_.set_params(read_model_file(dir + "/model.bin").params);
        float* arrays[3] = {m_, v_, master_};
        for (size_t i = 0; i < owners_.size(); i++) {
            const OwnedRange& o = owners_[i];
            if (o.owner != me_) continue;
            std::vector<float> host(o.end - o.begin);
            for (int which = 0; which < 3; which++) {
                read_optim_state(dir, meta, which, o.begin, o.end, host.data());
                be_.copy_to_device(arrays[which] + state_offset_[i], host.data(), host.size() * sizeof(float));
            }
        }
    }

    // ---- what it is ------------------------------------------------------------------------------------------------
    const ShardPlan& state_shard() const override { return reducer_->plan(); }
    size_t grad_buffer_bytes() const override { return reducer_->grad_buffer_bytes(); }
    std::string startup_lines(size_t, int) const override {
        size_t matrices = 0, muon_elems = 0;
        for (const MuonMatrix& w : muon_) matrices++, muon_elems += w.rows * w.cols;
        char line[512];
        std::snprintf(line, sizeof line,
                      "optimizer  %s; this rank steps %zu Muon matri%s (%.2fM parameters) and %.2fM AdamW "
                      "parameters%s\n",
                      group_summary(model_.layout()).c_str(), matrices, matrices == 1 ? "x" : "ces", muon_elems / 1e6,
                      (state_count_ - muon_elems) / 1e6,
                      stage_ >= 1 && this->plan_.world() > 1 ? " (each matrix on one owner rank)" : "");
        return line;
    }
    std::string traffic_line() const override {
        char line[256];
        std::snprintf(line, sizeof line, "gradient reduction: %llu bytes handed to collectives by rank 0 (%s)\n",
                      (unsigned long long)reducer_->reduced_bytes(), dtype_name(reducer_->wire_dtype()));
        return line;
    }

    // ---- for tests -----------------------------------------------------------------------------------------------
    const std::vector<OwnedRange>& owners() const { return owners_; }
    size_t state_count() const { return state_count_; }

private:
    // One Muon matrix this rank steps, and one piece of an AdamW group.
    struct MuonMatrix {
        size_t flat, state, rows, cols, offset_in_tensor;
        int tensor;
        float lr_scale;
    };
    struct AdamPiece {
        size_t flat, state, length, offset_in_tensor;
        int tensor;
        float lr_scale;
        bool decayed;
    };

    const GroupRule& rule(int group) const {
        static const GroupRule adamw;
        return group >= 0 && (size_t)group < cfg_.groups.size() ? cfg_.groups[(size_t)group] : adamw;
    }
    // "Muon on qkvw attprojw fcw fcprojw (x 0.02), AdamW on wte (x 15) lm_head (x 0.1)"
    std::string group_summary(const ParamLayout& layout) const {
        std::string muon, adam;
        for (int t = 0; t < layout.num_tensors(); t++) {
            const GroupRule& r = rule(layout.spec(t).group);
            char s[96];
            std::snprintf(s, sizeof s, " %s (lr x %g)", layout.name(t), r.lr_scale);
            (r.kind == OptimizerKind::Muon ? muon : adam) += s;
        }
        return "Muon on" + muon + ", AdamW on" + adam;
    }

    // The work lists of this rank's owned ranges: every Muon matrix whole (the ownership guarantees it), every AdamW
    // piece with its tensor's weight decay.
    void plan_work(const ParamLayout& layout) {
        for (size_t i = 0; i < owners_.size(); i++) {
            const OwnedRange& o = owners_[i];
            if (o.owner != me_) continue;
            for (const TensorSegment& s : range_segments(layout, o.begin, o.end)) {
                const ParamSpec& spec = layout.spec(s.tensor);
                const GroupRule& r = rule(spec.group);
                const size_t state = state_offset_[i] + s.offset_in_range;
                if (r.kind == OptimizerKind::AdamW) {
                    adam_.push_back({s.flat_offset, state, s.length, s.offset_in_tensor, s.tensor, r.lr_scale,
                                     spec.decayed});
                    continue;
                }
                const size_t each = spec.elements(), rows = spec.shape[0] / spec.row_blocks, cols = each / spec.shape[0];
                if (s.offset_in_tensor % each != 0 || s.length % each != 0 || spec.shape[0] % spec.row_blocks != 0)
                    fail("Muon: tensor %s is not owned in whole matrices of %zu x %zu here", spec.name.c_str(), rows,
                         cols);
                for (size_t e = 0; e < s.length; e += rows * cols)
                    muon_.push_back({s.flat_offset + e, state + e, rows, cols, s.offset_in_tensor + e, s.tensor,
                                     r.lr_scale});
            }
        }
    }
    // master = the parameters of the owned ranges (construction; after loading parameters the checkpoint's master
    // is read instead).
    void reset_master() {
        for (size_t i = 0; i < owners_.size(); i++)
            if (owners_[i].owner == me_)
                be_.act_to_floats(master_ + state_offset_[i], model_.params() + owners_[i].begin,
                                  owners_[i].end - owners_[i].begin);
    }
    void broadcast_owned(Stream st) {
        act_t* params = model_.params();
        comm_.group_start();
        for (const OwnedRange& o : owners_)
            comm_.broadcast(params + o.begin, o.end - o.begin, Backend::act_dtype, o.owner, st);
        comm_.group_end();
    }
    // ZeRO 0 on several ranks: every rank steps every matrix, but Newton-Schulz's GEMMs may round differently from
    // rank to rank (each GPU tunes its own GEMM algorithms, docs/cuda.md), and the replicas would drift apart; so each
    // Muon matrix's master and parameters are rank 0's (its momentum is the same everywhere: elementwise arithmetic on
    // the all-reduced gradients).
    void broadcast_muon_from_rank0(Stream st) {
        act_t* params = model_.params();
        comm_.group_start();
        for (const MuonMatrix& w : muon_) {
            comm_.broadcast(master_ + w.state, w.rows * w.cols, DType::F32, 0, st);
            comm_.broadcast(params + w.flat, w.rows * w.cols, Backend::act_dtype, 0, st);
        }
        comm_.group_end();
    }
    void finish_step() {
        reducer_->finish_step();
        normed_ = false;
    }

    Backend& be_;
    Model<Backend>& model_;
    const OptimConfig cfg_;
    const uint64_t seed_;
    Comm& comm_;
    const int stage_;
    std::vector<OwnedRange> owners_;    // every element's owner (state rank), in flat order
    int me_ = 0;                        // this rank's state rank
    std::vector<size_t> state_offset_;  // per owned range of this rank: its first element in m_, v_, master_
    size_t state_count_ = 0;
    std::unique_ptr<GradReducer<Backend>> reducer_;
    std::vector<MuonMatrix> muon_;
    std::vector<AdamPiece> adam_;
    float *m_ = nullptr, *v_ = nullptr, *master_ = nullptr, *norm_ = nullptr;
    bool normed_ = false;
    float update_scale_ = 1.0f;
};

}  // namespace llmc
