// Data parallelism with the gradients reduced every step (llmc/data_parallel.h): replicated (ZeRO 0), ZeRO 1 and 2,
// over one group of every rank or, with --shard-group, within sharding groups whose gradient shards are all-reduced
// across the groups. The step is a ZeroOptimizer (llmc/zero_optimizer.h) over the sharding group's comm.
//
// Checkpoints: every sharding group holds the same optimizer state, so only group 0 writes it: N files
// optim_<i>.bin, file i by the rank at dp rank i (its shard i), each the logical range of shard i of m, v and the
// master weights; meta.json's world_size is N, the writing ranks. model.bin holds the parameters. A rank of a resumed
// run reads the parts of the files that overlap its own range, so N writers and M readers need not agree.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint_format.h"
#include "data_parallel.h"
#include "model.h"
#include "model_file.h"
#include "zero_optimizer.h"

namespace llmc {

template <class Backend>
class DataParallelZero : public DataParallel<Backend> {
public:
    DataParallelZero(const ParallelPlan& plan, DpGroups groups, Backend& be, Model<Backend>& model,
                     const OptimConfig& cfg, uint64_t seed)
        : DataParallel<Backend>(plan, std::move(groups)), be_(be), model_(model),
          opt_(be, model, *this->groups_.shard, cfg, plan.zero_stage, seed, plan.align, this->groups_.replica) {}

    GradSink& grad_sink(bool last_micro_step) override { return opt_.grad_sink(last_micro_step); }
    void end_micro_step(bool last_micro_step) override { opt_.end_micro_step(last_micro_step); }
    float grad_norm() override { return opt_.grad_norm(); }
    void apply(float lr, int step) override { opt_.apply(lr, step); }
    void skip() override { opt_.skip(); }
    void after_step(int, bool) override {}

    void describe_checkpoint(CheckpointMeta& meta) const override {
        const ShardPlan& plan = opt_.plan();  // over the sharding group (every rank with one group)
        meta.world_size = plan.world_size, meta.zero_stage = opt_.zero_stage(), meta.num_params = plan.num_params;
        meta.files.assign(1, CheckpointFileInfo{"model.bin"});
        for (int r = 0; r < plan.world_size; r++)
            meta.files.push_back({optim_file_name((size_t)r), 0, 0, plan.logical_begin(r), plan.logical_end(r)});
    }
    std::vector<OwnStateFile> own_state_files() override {
        const DpMesh& mesh = this->plan_.mesh;
        if (mesh.replica_rank != 0) return {};  // group 0 writes the state every group holds
        const ShardPlan& plan = opt_.plan();
        OwnStateFile f;
        f.index = 1 + (size_t)mesh.dp_rank, f.name = optim_file_name((size_t)mesh.dp_rank);
        f.begin = plan.logical_begin(plan.rank), f.end = plan.logical_end(plan.rank);
        // Where `begin` sits in the state arrays; 0 for an empty range (a shard made only of padding: [num_params,
        // num_params) lies before the shard's start, and nothing is copied).
        const size_t base = f.end > f.begin ? f.begin - opt_.state_offset() : 0;
        f.fetch = [this, base](int which, uint64_t off, size_t count, float* dst) {
            float* arrays[3] = {opt_.m(), opt_.v(), opt_.master()};
            be_.copy_to_host(dst, arrays[which] + base + off, count * sizeof(float));
        };
        return {f};
    }
    // Parameters from model.bin, m / v / master for this rank's range from the optimizer files. The parameters are
    // not recomputed from the master: on bf16 backends they were rounded stochastically, so the saved values are the
    // exact ones.
    void load_state(const std::string& dir, const CheckpointMeta& meta) override {
        model_.set_params(read_model_file(dir + "/model.bin").params);
        const uint64_t lo = opt_.state_offset();
        const uint64_t hi = std::min<uint64_t>(lo + opt_.state_count(), meta.num_params);
        float* arrays[3] = {opt_.m(), opt_.v(), opt_.master()};
        const uint64_t chunk = 1ull << 24;  // 64 MiB of host staging
        std::vector<float> host(std::min<uint64_t>(chunk, hi > lo ? hi - lo : 0));
        for (int which = 0; which < 3; which++)
            for (uint64_t a = lo; a < hi; a += chunk) {
                const uint64_t b = std::min(hi, a + chunk);
                read_optim_state(dir, meta, which, a, b, host.data());
                be_.copy_to_device(arrays[which] + (a - lo), host.data(), (b - a) * sizeof(float));
            }
    }

    const ShardPlan& state_shard() const override { return opt_.plan(); }
    size_t grad_buffer_bytes() const override { return opt_.reducer().grad_buffer_bytes(); }
    // Under hybrid sharding, what crosses the groups per step: rank 0's shard all-reduced (ring: 2 (R-1)/R of it);
    // with several ranks, the ZeRO plan of the group (llmc/zero.h).
    std::string startup_lines(size_t act_bytes, int grad_accum) const override {
        const DpMesh& mesh = this->plan_.mesh;
        std::string s;
        char line[512];
        if (mesh.hybrid()) {
            const ShardPlan& p = opt_.plan();
            const double R = mesh.replicas, shard_bytes = (double)(p.logical_end(0) - p.logical_begin(0)) *
                                                          (double)dtype_size(this->plan_.wire);
            std::snprintf(line, sizeof line,
                          "sharding   %d group(s) of %d rank(s) (--shard-group): ZeRO within a group (the plan below), "
                          "each gradient shard all-reduced across the groups: ~%.1f MiB sent across groups per rank "
                          "and step (ring)\n",
                          mesh.replicas, mesh.shard_size, 2 * (R - 1) / R * shard_bytes / (1024.0 * 1024.0));
            s += line;
        }
        if (this->plan_.world() > 1)
            s += zero_summary(opt_.plan(), model_.layout(), opt_.zero_stage(), act_bytes, grad_accum,
                              model_.padded_params()) + "\n";
        return s;
    }
    std::string traffic_line() const override {
        const GradReducer<Backend>& r = opt_.reducer();
        char line[256];
        std::snprintf(line, sizeof line, "gradient reduction: %llu bytes handed to collectives by rank 0 (%s)%s\n",
                      (unsigned long long)r.reduced_bytes(), dtype_name(r.wire_dtype()),
                      this->plan_.mesh.hybrid()
                          ? (", and " + std::to_string(r.cross_group_bytes()) + " across the sharding groups").c_str()
                          : "");
        return line;
    }

    // The optimizer step, for tests.
    ZeroOptimizer<Backend>& optimizer() { return opt_; }

private:
    Backend& be_;
    Model<Backend>& model_;
    ZeroOptimizer<Backend> opt_;
};

}  // namespace llmc
