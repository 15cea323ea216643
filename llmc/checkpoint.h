// Checkpoints of a run: what it needs to continue exactly after a crash, possibly on another number of ranks
// (docs/checkpoints.md). Three files, one job each:
//   checkpoint_format.h  what a checkpoint's files hold (meta.json, model.bin, the optimizer-state files) and how
//                        they are written, read and verified
//   checkpoint_store.h   where the checkpoints live in the output directory, which are complete, retention
//   checkpoint.h         (this file) the collective save, choice of the checkpoint to resume, and load
//
// Resume (-y 1) takes the newest complete checkpoint whose files verify; a corrupt one is reported on stderr (the
// file, the CRC computed and the CRC recorded) and the previous one is tried. The files are verified in parallel
// (rank r checks files r, r + world, ...). Which optimizer-state files a checkpoint has, who writes each and how a
// rank reads its state back is the data-parallel strategy's (llmc/data_parallel.h): optim_<i>.bin for the
// strategies that reduce every step, replica and outer files for --sync-every (docs/checkpoints.md).
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
#include "data_parallel.h"
#include "error.h"
#include "model.h"
#include "model_file.h"

namespace llmc {

// The collective parts: every rank calls save(), find_latest_valid() and load() together.
template <class Backend>
class Checkpointer {
public:
    // comm: every rank of the run; dp: its data-parallel strategy, whose state the optimizer files hold;
    // inside_checkpoint: a test's hook (llmc/test_hooks.h).
    Checkpointer(const std::string& out_dir, Comm& comm, Model<Backend>& model, DataParallel<Backend>& dp,
                 std::function<void(int)> inside_checkpoint = {})
        : out_(out_dir), comm_(comm), model_(model), dp_(dp), inside_checkpoint_(std::move(inside_checkpoint)) {}

    // Writes ckpt_<meta.step>: the caller fills everything but what the strategy describes (describe_checkpoint).
    // Every rank writes its state files, then rank 0 model.bin (its parameters) and, last, meta.json.
    void save(CheckpointMeta meta, int keep_last, int keep_every) {
        const int rank = comm_.rank();
        const std::string dir = checkpoint_dir(out_, meta.step);
        if (rank == 0) {
            remove_checkpoint(dir);  // rewriting (or crash leftovers): meta.json goes first, then the rest
            make_checkpoint_directory(dir);
        }
        comm_.barrier();
        // Every rank's (index + 1 or 0, size, CRC) of each file it wrote, for meta.json: as many slots on every rank
        // as the rank with the most files needs (a strategy that shards whole matrices writes one file per owned
        // range).
        const std::vector<OwnStateFile> own = dp_.own_state_files();
        size_t slots = 0;
        for (uint64_t n : comm_.all_gather_host(std::vector<uint64_t>{own.size()})) slots = std::max<size_t>(slots, n);
        std::vector<uint64_t> mine(3 * slots, 0);
        for (size_t i = 0; i < own.size(); i++) {
            const OwnStateFile& f = own[i];
            const CheckpointFileInfo info =
                write_optim_state(dir, f.name, meta.step, model_.num_params(), f.begin, f.end, f.fetch, inside_checkpoint_);
            mine[3 * i] = f.index + 1, mine[3 * i + 1] = info.bytes, mine[3 * i + 2] = info.crc32c;
        }
        const std::vector<uint64_t> got = comm_.all_gather_host(mine);
        if (rank == 0) {
            dp_.describe_checkpoint(meta);
            for (size_t k = 0; k + 2 < got.size(); k += 3)
                if (got[k] != 0) meta.files.at(got[k] - 1).bytes = got[k + 1], meta.files[got[k] - 1].crc32c =
                                                                                     (uint32_t)got[k + 2];
            meta.files[0] = write_model(dir, model_.get_params());
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

    // The parameters and this rank's optimizer state (verified by find_latest_valid), through the strategy.
    void load(const CheckpointMeta& meta) {
        const std::string dir = checkpoint_dir(out_, meta.step);
        if ((meta.sync.every > 0) != dp_.plan().periodic())  // check_resume_compatible refused this already
            fail("%s: --sync-every %d, this run has %d", dir.c_str(), meta.sync.every, dp_.plan().outer.every);
        if (!(meta.config == model_.config()))
            fail("%s/model.bin: model %s, expected %s", dir.c_str(), meta.config.describe().c_str(),
                 model_.config().describe().c_str());
        dp_.load_state(dir, meta);
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

    std::string out_;
    Comm& comm_;
    Model<Backend>& model_;
    DataParallel<Backend>& dp_;
    std::function<void(int)> inside_checkpoint_;
};

}  // namespace llmc
