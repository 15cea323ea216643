// Checkpoints of a run: what it needs to continue exactly after a crash, possibly on another number of ranks
// (docs/checkpoints.md). Three files, one job each:
//   checkpoint_format.h  what a checkpoint's files hold (meta.json, model.bin, the optimizer-state files) and how
//                        they are written, read and verified
//   checkpoint_store.h   where the checkpoints live in the output directory, which are complete, retention
//   checkpoint.h         (this file) the collective save, choice of the checkpoint to resume, and load
//
// Resume (-y 1) takes the newest complete checkpoint whose files verify; a corrupt one is reported on stderr (the
// file, the CRC computed and the CRC recorded) and the previous one is tried. The files are verified in parallel
// (rank r checks files r, r + world, ...). A rank of the new run reads the parts of the optimizer files that
// overlap its own range, so N writers and M readers need not agree.
// Hybrid sharding (llmc/dp_mesh.h): every sharding group holds the same optimizer state, so only group 0 writes it:
// N files, file i by the rank at dp_rank i (its shard i); meta.json's world_size is then N, the writing ranks.
// With --sync-every (an OuterSync) every rank is a replica: it writes and reads its whole replica
// (replica_<rank>.bin), and rank 0 the outer state (outer.bin).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint_format.h"
#include "checkpoint_store.h"
#include "comm.h"
#include "crc32c.h"
#include "dp_mesh.h"
#include "error.h"
#include "model.h"
#include "model_file.h"
#include "optimizer.h"
#include "outer_sync.h"

namespace llmc {

// The collective parts: every rank calls save(), find_latest_valid() and load() together.
template <class Backend>
class Checkpointer {
public:
    // comm: every rank of the run; mesh: where this rank sits among the sharding groups (one group by default);
    // outer: the run's OuterSync with --sync-every, else nullptr.
    Checkpointer(const std::string& out_dir, Backend& be, Comm& comm, GPT2<Backend>& model, Optimizer<Backend>& opt,
                 const DpMesh& mesh = DpMesh(), OuterSync<Backend>* outer = nullptr)
        : out_(out_dir), be_(be), comm_(comm), model_(model), opt_(opt), mesh_(mesh), outer_(outer) {}

    // Writes ckpt_<meta.step>: the caller fills everything but `files`, world_size, zero_stage, num_params.
    void save(CheckpointMeta meta, int keep_last, int keep_every) {
        const int rank = comm_.rank();
        const std::string dir = checkpoint_dir(out_, meta.step);
        if (rank == 0) {
            remove_checkpoint(dir);  // rewriting (or crash leftovers): meta.json goes first, then the rest
            make_checkpoint_directory(dir);
        }
        comm_.barrier();
        if (outer_) return save_replicas(dir, meta, keep_last, keep_every);
        std::vector<float> params;
        if (rank == 0) params = model_.get_params();
        const ShardPlan& plan = opt_.plan();  // over the sharding group (every rank with one group)
        const bool writer = !mesh_.hybrid() || mesh_.replica_rank == 0;
        const int file = mesh_.hybrid() ? mesh_.dp_rank : rank;  // = the shard it owns, for a writer
        CheckpointFileInfo mine;
        if (writer) mine = write_own_state(dir, file, meta.step);
        // Every rank's (file + 1 or 0, size, CRC) for meta.json.
        const std::vector<uint64_t> got =
            comm_.all_gather_host({writer ? (uint64_t)file + 1 : 0, mine.bytes, mine.crc32c});
        if (rank == 0) {
            meta.files = {write_model(dir, params)};
            for (int r = 0; r < plan.world_size; r++) meta.files.push_back(optim_file_info(plan, r, got));
            meta.world_size = plan.world_size, meta.zero_stage = opt_.zero_stage(), meta.num_params = plan.num_params;
            write_checkpoint_meta(dir, meta);  // last: the checkpoint is complete from here on
            apply_retention(out_, keep_last, keep_every, meta.step);
        }
        comm_.barrier();  // nobody races ahead into a later checkpoint while rank 0 finishes this one
    }

    // -y 1: the newest checkpoint that is complete, intact and valid; -1 when out_dir has no checkpoint at all.
    // `check(meta)` is the run's own validation of a metadata file that read correctly (data position, metrics,
    // step guard: "" or the problem, naming the file and the field); it runs on every rank, and it may throw
    // ResumeMismatch (another run's checkpoint), which stops the search. A checkpoint that fails anything else is
    // reported on stderr and the previous one is tried. Fails when there are checkpoints but none is usable
    // (starting afresh would silently drop the run's progress).
    int find_latest_valid(CheckpointMeta* out, const std::function<std::string(const CheckpointMeta&)>& check) {
        const int rank = comm_.rank(), world = comm_.world_size();
        std::vector<int> steps = list_checkpoint_steps(out_);
        int found = -1;
        for (size_t i = steps.size(); i-- > 0 && found < 0;) {
            const std::string dir = checkpoint_dir(out_, steps[i]);
            CheckpointMeta meta;
            bool shared = true;
            const std::string problem = checkpoint_problem(dir, steps[i], rank, world, check, &meta, &shared);
            if (!problem.empty() && (rank == 0 || !shared)) std::fprintf(stderr, "checkpoint: %s\n", problem.c_str());
            if (!comm_.any(!problem.empty())) {
                found = steps[i], *out = meta;
            } else if (rank == 0) {
                std::fprintf(stderr, "checkpoint: refusing %s; falling back to the previous checkpoint\n",
                             dir.c_str());
            }
        }
        if (found < 0 && !steps.empty())
            fail("-y 1: none of the %zu checkpoint(s) in %s is complete, intact and valid (see the messages above); "
                 "nothing was changed. Move them away or point -o elsewhere to start afresh",
                 steps.size(), out_.c_str());
        return found;
    }

    // Parameters from model.bin, m / v / master for this rank's range from the optimizer files (verified by
    // find_latest_valid). The parameters are not recomputed from the master: on bf16 backends they were rounded
    // stochastically, so the saved values are the exact ones.
    void load(const CheckpointMeta& meta) {
        const std::string dir = checkpoint_dir(out_, meta.step);
        if ((meta.sync.every > 0) != (outer_ != nullptr))  // check_resume_compatible refused this already
            fail("%s: --sync-every %d, this run has %d", dir.c_str(), meta.sync.every,
                 outer_ ? outer_->config().every : 0);
        if (outer_) return load_replica(dir, meta);
        ModelFile mf = read_model_file(dir + "/model.bin");
        if (!(mf.config == model_.config()))
            fail("%s/model.bin: model %s, expected %s", dir.c_str(), mf.config.describe().c_str(),
                 model_.config().describe().c_str());
        model_.set_params(mf.params);
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

private:
    // Rank 0: `params` into <dir>/model.bin, and that file's entry for meta.json.
    CheckpointFileInfo write_model(const std::string& dir, const std::vector<float>& params) {
        CheckpointFileInfo f;
        f.name = "model.bin";
        write_model_file(dir + "/model.bin", model_.config(), params.data(), false);
        f.crc32c = crc32c_file(dir + "/model.bin", &f.bytes);
        return f;
    }
    // --sync-every: every rank writes replica_<rank>.bin (its parameters, m, v, master over [0, num_params)), rank 0
    // also outer.bin (theta_last, momentum) and model.bin (its replica's parameters), then meta.json.
    void save_replicas(const std::string& dir, CheckpointMeta meta, int keep_last, int keep_every) {
        const int rank = comm_.rank(), world = comm_.world_size();
        const uint64_t n = opt_.plan().num_params;
        if (opt_.state_offset() != 0 || opt_.state_count() < n)  // a replica sharded over several ranks
            fail("checkpoint: --sync-every with replicas of several ranks is not supported (this rank holds [%zu, "
                 "%zu) of %llu parameters)", opt_.state_offset(), opt_.state_offset() + opt_.state_count(),
                 (unsigned long long)n);
        const std::vector<float> params = model_.get_params();
        float* arrays[3] = {opt_.m(), opt_.v(), opt_.master()};
        const CheckpointFileInfo mine = write_optim_state(
            dir, replica_file_name(rank), meta.step, n, 0, n, [&](int which, uint64_t off, size_t count, float* dst) {
                if (which == 0) std::copy(params.begin() + off, params.begin() + off + count, dst);
                else be_.copy_to_host(dst, arrays[which - 1] + off, count * sizeof(float));
            });
        const std::vector<uint64_t> sizes_crcs = comm_.all_gather_host({mine.bytes, mine.crc32c});
        if (rank == 0) {
            meta.files = {write_model(dir, params)};
            for (int r = 0; r < world; r++) {
                CheckpointFileInfo f;
                f.name = replica_file_name(r), f.begin = 0, f.end = n;
                f.bytes = sizes_crcs[2 * (size_t)r], f.crc32c = (uint32_t)sizes_crcs[2 * (size_t)r + 1];
                meta.files.push_back(f);
            }
            const float* outer[2] = {outer_->theta_last(), outer_->momentum()};
            meta.files.push_back(write_optim_state(dir, OUTER_FILE_NAME, meta.step, n, 0, n,
                                                   [&](int which, uint64_t off, size_t count, float* dst) {
                                                       std::copy(outer[which] + off, outer[which] + off + count, dst);
                                                   }));
            meta.world_size = world, meta.zero_stage = opt_.zero_stage(), meta.num_params = n;
            meta.sync.last_sync_step = outer_->last_sync_step();
            write_checkpoint_meta(dir, meta);  // last: the checkpoint is complete from here on
            apply_retention(out_, keep_last, keep_every, meta.step);
        }
        comm_.barrier();
    }

    // --sync-every: this rank's replica (same world size: check_resume_compatible) and the outer state.
    void load_replica(const std::string& dir, const CheckpointMeta& meta) {
        const uint64_t n = meta.num_params;
        const size_t replica = 1 + (size_t)comm_.rank(), outer_file = meta.files.size() - 1;
        std::vector<float> host(n);
        read_state_file(dir, meta, replica, 0, 0, n, host.data());
        model_.set_params(host);
        float* arrays[3] = {opt_.m(), opt_.v(), opt_.master()};
        for (int which = 1; which < 4; which++) {
            read_state_file(dir, meta, replica, which, 0, n, host.data());
            be_.copy_to_device(arrays[which - 1], host.data(), n * sizeof(float));
        }
        read_state_file(dir, meta, outer_file, 0, 0, n, outer_->theta_last());
        read_state_file(dir, meta, outer_file, 1, 0, n, outer_->momentum());
        outer_->set_last_sync_step(meta.sync.last_sync_step);
    }

    static std::string optim_file_name(int file) {
        char name[32];
        std::snprintf(name, sizeof name, "optim_%05d.bin", file);
        return name;
    }
    // This rank's logical range of m, v and the master weights (its shard's), into optim_<file>.bin.
    CheckpointFileInfo write_own_state(const std::string& dir, int file, int step) {
        const ShardPlan& plan = opt_.plan();
        const uint64_t begin = plan.logical_begin(plan.rank), end = plan.logical_end(plan.rank);
        float* arrays[3] = {opt_.m(), opt_.v(), opt_.master()};
        const size_t base = begin - opt_.state_offset();  // where `begin` sits in this rank's state arrays
        return write_optim_state(dir, optim_file_name(file), step, plan.num_params, begin, end,
                                 [&](int which, uint64_t off, size_t count, float* dst) {
                                     be_.copy_to_host(dst, arrays[which] + base + off, count * sizeof(float));
                                 });
    }
    // File `file`'s entry in meta.json, from the gathered (file + 1, size, CRC) of every rank.
    static CheckpointFileInfo optim_file_info(const ShardPlan& plan, int file, const std::vector<uint64_t>& got) {
        CheckpointFileInfo f;
        f.name = optim_file_name(file), f.begin = plan.logical_begin(file), f.end = plan.logical_end(file);
        for (size_t r = 0; r + 2 < got.size(); r += 3)
            if (got[r] == (uint64_t)file + 1) f.bytes = got[r + 1], f.crc32c = (uint32_t)got[r + 2];
        return f;
    }

    std::string out_;
    Backend& be_;
    Comm& comm_;
    GPT2<Backend>& model_;
    Optimizer<Backend>& opt_;
    DpMesh mesh_;
    OuterSync<Backend>* outer_;
};

}  // namespace llmc
