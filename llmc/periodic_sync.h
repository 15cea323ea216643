// Periodic synchronisation (--sync-every H; llmc/data_parallel.h; docs/distributed.md, "Periodic synchronisation"):
// every replica trains on its own slice of each global batch with its own optimizer step and, after every H-th step
// and the run's last, the replicas take the outer step of llmc/outer_sync.h together.
//   replicas of one rank (no --shard-group)   the inner step over a one-rank comm (no gradient reduction, the whole
//                                             state local); the outer step over the world comm
//   replicas of a sharding group              the inner step ZeRO-sharded over the group, its gradients reduced within
//                                             it and never across groups; the outer step averages each rank's shard
//                                             over the replica comm (the ranks holding that shard in every group; a
//                                             one-rank comm with one group)
// The norm the step guard judges and the log shows is the root mean square of the replicas' norms (each replica
// clips with its own): the same value on every rank, so every rank skips the same steps.
//
// Checkpoints hold every replica (parameters, m, v, master) and the outer state: the rank at shard s of replica r
// writes its shard's logical range of its replica (replica_<r>.bin when a replica is one rank,
// replica_<r>_shard_<s>.bin), replica 0's ranks the outer state of their ranges (outer.bin, outer_shard_<s>.bin). A
// resume reads what overlaps its ranges from the files of its replica, so the ranks per replica may change; the
// number of replicas may not.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint_format.h"
#include "data_parallel.h"
#include "model.h"
#include "outer_sync.h"
#include "zero_optimizer.h"

namespace llmc {

template <class Backend>
class PeriodicSync : public DataParallel<Backend> {
public:
    PeriodicSync(const ParallelPlan& plan, DpGroups groups, Backend& be, Model<Backend>& model, Comm& world,
                 const OptimConfig& cfg, uint64_t seed)
        : DataParallel<Backend>(plan, std::move(groups)), be_(be), model_(model), world_(world),
          single_(needs_single_comm(plan, this->groups_) ? create_replica_comm(be) : nullptr),
          inner_(be, model, plan.rank_is_replica() ? *single_ : *this->groups_.shard, cfg, plan.zero_stage, seed,
                 plan.align),
          outer_(be, inner_, outer_comm(), plan.outer) {}

    GradSink& grad_sink(bool last_micro_step) override { return inner_.grad_sink(last_micro_step); }
    void end_micro_step(bool last_micro_step) override { inner_.end_micro_step(last_micro_step); }
    // One float over the host channel; a non-finite norm anywhere makes it non-finite.
    float grad_norm() override {
        const float mine = inner_.grad_norm();
        float sq = mine * mine;
        world_.all_reduce_host(&sq, 1, DType::F32, ReduceOp::Avg);
        return std::sqrt(sq);
    }
    void apply(float lr, int step) override { inner_.apply(lr, step); }
    void skip() override { inner_.skip(); }
    void after_step(int step, bool last) override {
        if (outer_.due(step, last)) outer_.step(step);
    }

    // Version 3 when a replica is one rank (one file per replica, outer.bin), else 4.
    void describe_checkpoint(CheckpointMeta& meta) const override {
        const ShardPlan& plan = inner_.plan();  // over the replica's ranks: its shards are the mesh's
        const int group = this->plan_.replica_mesh().shard_size, world = this->plan_.world();
        meta.world_size = world, meta.zero_stage = inner_.zero_stage(), meta.num_params = plan.num_params;
        meta.sync.last_sync_step = outer_.last_sync_step();
        meta.sync.shard_group = group;
        meta.files.assign(1 + (size_t)world + (size_t)group, CheckpointFileInfo{"model.bin"});
        for (int s = 0; s < group; s++) {
            for (int r = 0; r < world / group; r++)
                meta.files[sync_replica_file_index(meta, r, s)] =
                    {replica_file_name(r, s, group), 0, 0, plan.logical_begin(s), plan.logical_end(s)};
            meta.files[sync_outer_file_index(meta, s)] =
                {outer_file_name(s, group), 0, 0, plan.logical_begin(s), plan.logical_end(s)};
        }
    }
    std::vector<OwnStateFile> own_state_files() override {
        const DpMesh m = this->plan_.replica_mesh();
        const ShardPlan& plan = inner_.plan();
        CheckpointMeta layout;
        layout.world_size = this->plan_.world(), layout.sync.shard_group = m.shard_size;
        OwnStateFile replica;
        replica.index = sync_replica_file_index(layout, m.replica_rank, m.shard_rank);
        replica.name = replica_file_name(m.replica_rank, m.shard_rank, m.shard_size);
        replica.begin = plan.logical_begin(plan.rank), replica.end = plan.logical_end(plan.rank);
        const size_t base = replica.end > replica.begin ? replica.begin - inner_.state_offset() : 0;
        const uint64_t begin = replica.begin;
        replica.fetch = [this, base, begin](int which, uint64_t off, size_t count, float* dst) {
            if (which == 0) {  // the replica's parameters of the range
                const std::vector<float> p = model_.get_params(begin + off, begin + off + count);
                std::copy(p.begin(), p.end(), dst);
                return;
            }
            float* arrays[3] = {inner_.m(), inner_.v(), inner_.master()};
            be_.copy_to_host(dst, arrays[which - 1] + base + off, count * sizeof(float));
        };
        if (m.replica_rank != 0) return {replica};
        OwnStateFile outer = replica;
        outer.index = sync_outer_file_index(layout, m.shard_rank);
        outer.name = outer_file_name(m.shard_rank, m.shard_size);
        outer.fetch = [this, base](int which, uint64_t off, size_t count, float* dst) {
            const float* state = which == 0 ? outer_.theta_last() : outer_.momentum();
            std::copy(state + base + off, state + base + off + count, dst);
        };
        return {replica, outer};
    }
    // This rank's replica (the same number of replicas: check_resume_compatible) and the outer state. The parameters
    // are the replica's whole vector (its files tile it); m, v, master and the outer state are read for this rank's
    // state range from whatever files of the checkpoint's layout overlap it.
    void load_state(const std::string& dir, const CheckpointMeta& meta) override {
        const uint64_t n = meta.num_params;
        const int replica = this->plan_.replica_mesh().replica_rank, group = meta.sync.shard_group;
        std::vector<float> host(n);
        for (int s = 0; s < group; s++)
            read_state_file(dir, meta, sync_replica_file_index(meta, replica, s), 0, 0, n, host.data());
        model_.set_params(host);
        const uint64_t lo = std::min<uint64_t>(inner_.state_offset(), n);
        const uint64_t hi = std::min<uint64_t>(inner_.state_offset() + inner_.state_count(), n);
        float* arrays[3] = {inner_.m(), inner_.v(), inner_.master()};
        for (int which = 1; which < 4; which++) {
            for (int s = 0; s < group; s++)
                read_state_file(dir, meta, sync_replica_file_index(meta, replica, s), which, lo, hi, host.data());
            if (hi > lo) be_.copy_to_device(arrays[which - 1], host.data(), (hi - lo) * sizeof(float));
        }
        for (int s = 0; s < group; s++) {
            read_state_file(dir, meta, sync_outer_file_index(meta, s), 0, lo, hi, outer_.theta_last());
            read_state_file(dir, meta, sync_outer_file_index(meta, s), 1, lo, hi, outer_.momentum());
        }
        outer_.set_last_sync_step(meta.sync.last_sync_step);
    }

    const ShardPlan& state_shard() const override { return inner_.plan(); }
    size_t grad_buffer_bytes() const override { return inner_.reducer().grad_buffer_bytes(); }
    std::string startup_lines(size_t act_bytes, int grad_accum) const override {
        const DpMesh& mesh = this->plan_.mesh;
        const DpMesh m = this->plan_.replica_mesh();
        std::string s;
        char line[512];
        if (mesh.hybrid()) {  // the groups are replicas
            std::snprintf(line, sizeof line,
                          "sharding   %d group(s) of %d rank(s) (--shard-group): ZeRO within a group (the plan below); "
                          "each group is a replica of --sync-every: no gradient crosses the groups\n",
                          mesh.replicas, mesh.shard_size);
            s += line;
        }
        if (this->plan_.world() > 1)
            s += zero_summary(inner_.plan(), model_.layout(), inner_.zero_stage(), act_bytes, grad_accum,
                              model_.padded_params()) + "\n";
        std::snprintf(line, sizeof line,
                      "sync       every %d steps: outer SGD, lr %g, Nesterov momentum %g, over %d replica(s) of %d "
                      "rank(s); gradients are not reduced across replicas; each outer step all-reduces %zu fp32 "
                      "parameters per rank across them\n",
                      this->plan_.outer.every, this->plan_.outer.lr, this->plan_.outer.momentum, m.replicas,
                      m.shard_size, outer_.reduced_count());
        return s + line;
    }
    std::string traffic_line() const override {
        char line[160];
        std::snprintf(line, sizeof line, "outer sync: %llu outer steps of %zu fp32 parameters (rank 0's range)\n",
                      (unsigned long long)outer_.outer_steps(), outer_.reduced_count());
        return line;
    }

    ZeroOptimizer<Backend>& optimizer() { return inner_; }
    OuterSync<Backend>& outer() { return outer_; }

private:
    // A one-rank comm: the inner step's when every rank is a replica, the outer step's with one sharding group.
    static bool needs_single_comm(const ParallelPlan& plan, const DpGroups& groups) {
        return plan.rank_is_replica() || !groups.replica;
    }
    Comm& outer_comm() {
        if (this->plan_.rank_is_replica()) return world_;
        return this->groups_.replica ? *this->groups_.replica : *single_;
    }

    Backend& be_;
    Model<Backend>& model_;
    Comm& world_;
    std::unique_ptr<Comm> single_;
    ZeroOptimizer<Backend> inner_;
    OuterSync<Backend> outer_;
};

}  // namespace llmc
