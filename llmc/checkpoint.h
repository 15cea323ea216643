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
// With --sync-every (an OuterSync) the mesh says which replica a rank belongs to (replica_rank, one of `replicas`)
// and which shard of it it holds (shard_rank of shard_size): every rank writes its shard's logical range of its
// replica's parameters, m, v, master (replica_<r>.bin when a replica is one rank, replica_<r>_shard_<s>.bin), and
// replica 0's ranks the outer state of their ranges (outer.bin, outer_shard_<s>.bin). A resume reads what overlaps
// its ranges from the files of its replica, so the ranks per replica may change; the number of replicas may not.
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
    // outer: the run's OuterSync with --sync-every, else nullptr; then mesh's groups are the replicas (groups of one
    // rank, in rank order, when every rank is a replica).
    Checkpointer(const std::string& out_dir, Backend& be, Comm& comm, Model<Backend>& model, Optimizer<Backend>& opt,
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
    // --sync-every: every rank writes its shard's logical range of its replica (the whole replica when a replica is
    // one rank), replica 0's ranks the outer state of theirs, rank 0 model.bin (its replica's parameters: the replicas' common ones at the end of a period), then
    // meta.json. Version 3 when a replica is one rank (one file per replica, outer.bin), else 4.
    void save_replicas(const std::string& dir, CheckpointMeta meta, int keep_last, int keep_every) {
        const int rank = comm_.rank(), world = comm_.world_size(), group = mesh_.shard_size;
        const uint64_t n = opt_.plan().num_params;
        const ShardPlan& plan = opt_.plan();  // over the replica's ranks: its shards are mesh_'s
        const uint64_t begin = plan.logical_begin(plan.rank), end = plan.logical_end(plan.rank);
        const std::vector<float> params = model_.get_params(begin, end);  // this rank's range only
        const size_t base = state_index(begin, end);
        float* arrays[3] = {opt_.m(), opt_.v(), opt_.master()};
        const CheckpointFileInfo mine = write_optim_state(
            dir, replica_file_name(mesh_.replica_rank, mesh_.shard_rank, group), meta.step, n, begin, end,
            [&](int which, uint64_t off, size_t count, float* dst) {
                if (which == 0) std::copy(params.begin() + off, params.begin() + off + count, dst);
                else be_.copy_to_host(dst, arrays[which - 1] + base + off, count * sizeof(float));
            });
        CheckpointFileInfo outer;
        if (mesh_.replica_rank == 0) {
            const float* state[2] = {outer_->theta_last(), outer_->momentum()};
            outer = write_optim_state(dir, outer_file_name(mesh_.shard_rank, group), meta.step, n, begin, end,
                                      [&](int which, uint64_t off, size_t count, float* dst) {
                                          std::copy(state[which] + base + off, state[which] + base + off + count, dst);
                                      });
        }
        // Every rank's (replica, shard, size, CRC, outer size, outer CRC) for meta.json.
        const std::vector<uint64_t> got = comm_.all_gather_host({(uint64_t)mesh_.replica_rank,
                                                                 (uint64_t)mesh_.shard_rank, mine.bytes, mine.crc32c,
                                                                 outer.bytes, outer.crc32c});
        if (rank == 0) {
            meta.world_size = world, meta.zero_stage = opt_.zero_stage(), meta.num_params = n;
            meta.sync.last_sync_step = outer_->last_sync_step();
            meta.sync.shard_group = group;
            meta.files.assign(1 + (size_t)world + (size_t)group, CheckpointFileInfo());
            if (begin == 0 && end == n) meta.files[0] = write_model(dir, params);  // a one-rank replica: all of them
            else meta.files[0] = write_model(dir, model_.get_params());
            for (size_t k = 0; k < (size_t)world; k++) {
                const uint64_t* w = &got[6 * k];
                const int r = (int)w[0], s = (int)w[1];
                CheckpointFileInfo& f = meta.files[sync_replica_file_index(meta, r, s)];
                f.name = replica_file_name(r, s, group), f.bytes = w[2], f.crc32c = (uint32_t)w[3];
                f.begin = plan.logical_begin(s), f.end = plan.logical_end(s);
                if (r != 0) continue;
                CheckpointFileInfo& o = meta.files[sync_outer_file_index(meta, s)];
                o.name = outer_file_name(s, group), o.bytes = w[4], o.crc32c = (uint32_t)w[5];
                o.begin = f.begin, o.end = f.end;
            }
            write_checkpoint_meta(dir, meta);  // last: the checkpoint is complete from here on
            apply_retention(out_, keep_last, keep_every, meta.step);
        }
        comm_.barrier();
    }

    // --sync-every: this rank's replica (the same number of replicas: check_resume_compatible) and the outer state.
    // The parameters are the replica's whole vector (its files tile it); m, v, master and the outer state are read
    // for this rank's state range from whatever files of the checkpoint's layout overlap it.
    void load_replica(const std::string& dir, const CheckpointMeta& meta) {
        const uint64_t n = meta.num_params;
        const int replica = mesh_.replica_rank, group = meta.sync.shard_group;
        std::vector<float> host(n);
        for (int s = 0; s < group; s++) read_state_file(dir, meta, sync_replica_file_index(meta, replica, s), 0, 0, n,
                                                        host.data());
        model_.set_params(host);
        const uint64_t lo = std::min<uint64_t>(opt_.state_offset(), n);
        const uint64_t hi = std::min<uint64_t>(opt_.state_offset() + opt_.state_count(), n);
        float* arrays[3] = {opt_.m(), opt_.v(), opt_.master()};
        for (int which = 1; which < 4; which++) {
            for (int s = 0; s < group; s++)
                read_state_file(dir, meta, sync_replica_file_index(meta, replica, s), which, lo, hi, host.data());
            if (hi > lo) be_.copy_to_device(arrays[which - 1], host.data(), (hi - lo) * sizeof(float));
        }
        for (int s = 0; s < group; s++) {
            read_state_file(dir, meta, sync_outer_file_index(meta, s), 0, lo, hi, outer_->theta_last());
            read_state_file(dir, meta, sync_outer_file_index(meta, s), 1, lo, hi, outer_->momentum());
        }
        outer_->set_last_sync_step(meta.sync.last_sync_step);
    }

    static std::string optim_file_name(int file) {
        char name[32];
        std::snprintf(name, sizeof name, "optim_%05d.bin", file);
        return name;
    }
    // Where `begin` of this rank's logical range [begin, end) sits in its state arrays; 0 for an empty range (a shard
    // made only of padding: [num_params, num_params) lies before the shard's start, and nothing is copied).
    size_t state_index(uint64_t begin, uint64_t end) const { return end > begin ? begin - opt_.state_offset() : 0; }
    // This rank's logical range of m, v and the master weights (its shard's), into optim_<file>.bin.
    CheckpointFileInfo write_own_state(const std::string& dir, int file, int step) {
        const ShardPlan& plan = opt_.plan();
        const uint64_t begin = plan.logical_begin(plan.rank), end = plan.logical_end(plan.rank);
        float* arrays[3] = {opt_.m(), opt_.v(), opt_.master()};
        const size_t base = state_index(begin, end);
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
    Model<Backend>& model_;
    Optimizer<Backend>& opt_;
    DpMesh mesh_;
    OuterSync<Backend>* outer_;
};

}  // namespace llmc
