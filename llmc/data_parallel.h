// A data-parallel strategy: how the ranks combine their gradients and keep their parameters the same, applied to the
// model from outside (the model only hands its gradients to a GradSink, llmc/grad_sink.h). The trainer drives it
// through the verbs below and never asks which strategy it is; llmc/parallel.h makes the one its ParallelPlan
// (llmc/parallel_plan.h) says:
//   DataParallelZero  (llmc/data_parallel_zero.h)  gradients reduced every step: replicated (ZeRO 0), ZeRO 1, ZeRO 2,
//                                                   and hybrid sharding (--shard-group)
//   PeriodicSync      (llmc/periodic_sync.h)       --sync-every: replicas that train on their own, merged every H
//                                                   steps by an outer optimizer
// One step (docs/architecture.md, "One training step"): per micro-step, backward into grad_sink(last) then
// end_micro_step(last); then grad_norm(), apply() or skip(), after_step(). Checkpoints (llmc/checkpoint.h) write the
// files the strategy names and read its state back through it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint_format.h"
#include "dp_groups.h"
#include "grad_sink.h"
#include "parallel_plan.h"
#include "zero.h"

namespace llmc {

// One optimizer-state file a rank writes into a checkpoint: its place in meta.json's file list, its name and logical
// range, and its arrays: fetch(which, offset, count, dst) copies `count` floats of array `which` from logical element
// begin + offset (checkpoint_format.h, write_optim_state).
struct OwnStateFile {
    size_t index = 0;
    std::string name;
    uint64_t begin = 0, end = 0;
    std::function<void(int, uint64_t, size_t, float*)> fetch;
};

template <class Backend>
class DataParallel {
public:
    virtual ~DataParallel() = default;

    // ---- one step ----------------------------------------------------------------------------------------------
    // Where the model's backward of a micro-step puts its gradients; after that backward, end_micro_step.
    virtual GradSink& grad_sink(bool last_micro_step) = 0;
    virtual void end_micro_step(bool last_micro_step) = 0;
    // Collective: the gradient norm the step guard judges and the log shows (the global norm, before clipping).
    virtual float grad_norm() = 0;
    // The update of step `step` (1-based) with the clip scale grad_norm() found, the parameters left the same on every
    // rank of a replica; or the gradients dropped.
    virtual void apply(float lr, int step) = 0;
    virtual void skip() = 0;
    // After step `step` (applied or skipped); `last`: the run's last step.
    virtual void after_step(int step, bool last) = 0;

    // ---- checkpoints ---------------------------------------------------------------------------------------------
    // meta.json's fields that describe the state (world_size, zero_stage, num_params, sync, and `files`: model.bin
    // first, then every state file of every rank, named, with its range; sizes and checksums are the writers').
    virtual void describe_checkpoint(CheckpointMeta& meta) const = 0;
    // The state files this rank writes (none, one or two).
    virtual std::vector<OwnStateFile> own_state_files() = 0;
    // The model's parameters and this rank's state from checkpoint `dir` (verified by the checkpointer).
    virtual void load_state(const std::string& dir, const CheckpointMeta& meta) = 0;

    // ---- what it is, for the log ---------------------------------------------------------------------------------
    const ParallelPlan& plan() const { return plan_; }
    const DpGroups& groups() const { return groups_; }
    // This rank's shard of the optimizer state (the whole buffer when it is replicated).
    virtual const ShardPlan& state_shard() const = 0;
    // Device bytes of gradient memory held between steps besides the model's (the full buffer of ZeRO 0 and 1).
    virtual size_t grad_buffer_bytes() const = 0;
    // The start-up lines about the strategy (rank 0, after the model's); each ends with a newline.
    virtual std::string startup_lines(size_t act_bytes, int grad_accum) const = 0;
    // Rank 0's line at the end of a multi-rank run: what the strategy handed to collectives.
    virtual std::string traffic_line() const = 0;

protected:
    DataParallel(const ParallelPlan& plan, DpGroups groups) : plan_(plan), groups_(std::move(groups)) {}

    const ParallelPlan plan_;
    DpGroups groups_;  // the sharding group's and the replicas' comms (llmc/dp_groups.h)
};

}  // namespace llmc
