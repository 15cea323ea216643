// A run's output directory and its resume, before step 1 (docs/checkpoints.md): the refusal of a fresh run into an -o
// that holds an earlier one (llmc/output_dir.h), -y 1's choice of a checkpoint and the checks against this run, the
// earlier run's files moved aside when the run starts afresh, and metrics.jsonl opened where the run continues.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "cli.h"
#include "dataloader.h"
#include "error.h"
#include "file_util.h"
#include "logger.h"
#include "outlier.h"
#include "output_dir.h"
#include "trainer_setup.h"

namespace llmc {

// The output directory is never destroyed (llmc/output_dir.h): a fresh run into an -o that holds an earlier run is
// refused here, before anything is loaded. Returns the earlier run's files (moved aside by start_afresh when the run
// does not resume).
inline std::vector<std::string> refuse_earlier_run(const TrainOptions& o) {
    std::vector<std::string> earlier;
    if (!o.output_dir.empty()) earlier = earlier_run_files(o.output_dir);
    if (!earlier.empty() && !o.resume && !o.start_over)
        fail("-o %s holds an earlier run (%s): resume it with -y 1, or choose another -o; --start-over moves its "
             "files into %s/previous_<time>/ and starts afresh",
             o.output_dir.c_str(), describe_earlier_run(earlier).c_str(), o.output_dir.c_str());
    return earlier;
}

// What this run is: the fields of a checkpoint's metadata that a resume must agree with (and max_steps).
inline CheckpointMeta run_identity(const TrainOptions& o, const RunShape& s, const ParallelPlan& plan, int max_steps,
                                   const DataSummary& train) {
    CheckpointMeta id;
    id.config = s.cfg, id.batch_size = o.batch_size, id.seq_len = o.seq_len;
    id.total_batch = (long long)s.total_batch, id.seed = o.seed, id.shuffle = o.shuffle;
    id.overfit = o.overfit_single_batch != 0, id.max_steps = max_steps;
    id.train_data = train;
    id.world_size = s.world;
    if (plan.periodic()) {  // else zero, as in a checkpoint written without it
        id.sync.every = plan.outer.every, id.sync.outer_lr = plan.outer.lr, id.sync.outer_momentum = plan.outer.momentum;
        id.sync.shard_group = plan.replica_mesh().shard_size;
    }
    return id;
}

// What this run checks in a checkpoint's metadata beyond its own consistency (checkpoint_format.h): the flags and data
// it was written with (ResumeMismatch), that its data position is where its step leaves the data, a step guard
// state that fits, and (rank 0) that metrics.jsonl still holds its steps' lines up to metrics_bytes. "" or the
// problem, naming the file and the field.
inline std::string validate_checkpoint(const TrainOptions& o, int rank, const CheckpointMeta& m,
                                       const CheckpointMeta& run_id, const DataLoader& train) {
    const std::string dir = checkpoint_dir(o.output_dir, m.step), meta_path = dir + "/meta.json";
    check_resume_compatible(m, run_id, dir);
    const std::string bad_position = train.check_position(m.data);
    if (!bad_position.empty()) return meta_path + ": " + bad_position;
    const LoaderPosition want = train.position_after(run_id.overfit ? 1 : (uint64_t)m.step);
    if (!(m.data == want)) {
        char buf[320];
        std::snprintf(buf, sizeof buf, "%s: field \"data\" (epoch %llu, shard %llu, sequence %llu) is not where %d "
                      "steps leave the data (epoch %llu, shard %llu, sequence %llu)",
                      meta_path.c_str(), (unsigned long long)m.data.epoch, (unsigned long long)m.data.shard,
                      (unsigned long long)m.data.sequence, m.step, (unsigned long long)want.epoch,
                      (unsigned long long)want.shard, (unsigned long long)want.sequence);
        return buf;
    }
    try {
        StepGuard g(o.skip_loss_z, o.skip_grad_z, o.max_bad_steps);
        g.set_state(m.guard);
    } catch (const std::exception& e) {
        return meta_path + ": field \"guard\": " + e.what();
    }
    if (rank == 0) return check_metrics_prefix(metrics_path(o.output_dir), m.metrics_bytes, m.step);
    return "";
}

// -y 1 (collective): the newest intact checkpoint in -o that this run may continue (run_id: what this run is), or
// step -1 when there is none. Fails when the checkpoint is past -x.
template <class Backend>
int find_resume_point(const TrainOptions& o, Comm& comm, Checkpointer<Backend>& ckpt, const CheckpointMeta& run_id,
                      const DataLoader& train, CheckpointMeta* found) {
    const int rank = comm.rank();
    auto validate = [&](const CheckpointMeta& m) { return validate_checkpoint(o, rank, m, run_id, train); };
    const int step = ckpt.find_latest_valid(found, validate);
    if (step > run_id.max_steps)
        fail("%s: the checkpoint is at step %d, past -x %d", checkpoint_dir(o.output_dir, step).c_str(), step,
             run_id.max_steps);
    return step;
}

// Rank 0's lines for a resumed run (run_id: what this run is, run_identity()).
inline void announce_resume(const TrainOptions& o, const CheckpointMeta& resumed, const CheckpointMeta& run_id) {
    const int max_steps = run_id.max_steps;
    // meta.json's world_size counts the ranks that wrote optimizer files: with --shard-group, one group's ranks.
    if (resumed.sync.every > 0)
        std::printf("resume     %s: step %d (written by %d rank(s) as %d replica(s), ZeRO-%d)\n",
                    checkpoint_dir(o.output_dir, resumed.step).c_str(), resumed.step, resumed.world_size,
                    resumed.sync.replicas(resumed.world_size), resumed.zero_stage);
    else
        std::printf("resume     %s: step %d (ZeRO-%d, optimizer state in %d shard(s))\n",
                    checkpoint_dir(o.output_dir, resumed.step).c_str(), resumed.step, resumed.zero_stage,
                    resumed.world_size);
    // A replica takes N x B sequences of each micro-step's window (its N ranks' blocks of B): another N x B gives
    // each replica other sequences (every sequence of a step is still used once).
    const long long was = resumed.sync.shard_group * resumed.batch_size, now = run_id.sync.shard_group * run_id.batch_size;
    if (resumed.sync.every > 0 && was != now)
        std::printf("note: each replica of the checkpoint's run took %lld sequence(s) of each micro-step (%d rank(s) x "
                    "-b %lld), this run's take %lld (%d x -b %lld): from step %d on each replica trains on other sequences "
                    "than the checkpoint's run would have (the step's sequences are the same), so the run does not "
                    "continue it bit for bit\n",
                    was, resumed.sync.shard_group, resumed.batch_size, now, run_id.sync.shard_group,
                    run_id.batch_size, resumed.step + 1);
    if (resumed.max_steps != max_steps)
        std::printf("note: the checkpoint's run had %d steps, this one has %d: the learning-rate schedule "
                    "from step %d on is not the one the checkpoint's run would have followed\n",
                    resumed.max_steps, max_steps, resumed.step);
}

// A run that does not resume: --start-over, or -y 1 with nothing to resume. The earlier run's files are moved aside,
// never overwritten. Rank 0 moves them; the others do not touch -o before the first checkpoint, which comes after
// collectives that rank 0 reaches only after this.
inline void start_afresh(const TrainOptions& o, int rank, const std::vector<std::string>& earlier) {
    if (o.resume && rank == 0) std::printf("resume     no checkpoint in %s: starting afresh\n", o.output_dir.c_str());
    if (!earlier.empty() && rank == 0) {
        const std::string aside = move_earlier_run_aside(o.output_dir, earlier);
        std::printf("note       the earlier run's %s moved into %s\n", describe_earlier_run(earlier).c_str(),
                    aside.c_str());
    }
}

// Rank 0 with -o: metrics.jsonl, created, or for a resumed run cut back to the checkpoint's step (the lines of the
// steps it redoes go) and appended to. Other ranks, or no -o: a logger that logs nothing.
inline MetricsLogger open_metrics(const TrainOptions& o, int rank, const CheckpointMeta* resumed) {
    if (rank != 0 || o.output_dir.empty()) return MetricsLogger();
    make_dirs(o.output_dir);
    const std::string path = metrics_path(o.output_dir);
    if (resumed) truncate_metrics(path, resumed->metrics_bytes);
    return MetricsLogger(path, resumed != nullptr);
}

}  // namespace llmc
