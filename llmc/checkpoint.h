// Checkpoints: what a run needs to continue exactly after a crash, possibly on another number of ranks.
//
// Layout (docs/checkpoints.md has the details): <output dir>/ckpt_<step, 8 digits>/
//   model.bin            the parameters, llm.c's model file, fp32 (version 3), written by rank 0
//   optim_<rank>.bin     one per writing rank: that rank's logical range [begin, end) of the flat, UNPADDED AdamW
//                        arrays: 256 x int32 header, then m[begin:end], v[begin:end], master[begin:end] (fp32).
//                        The ranges are ShardPlan::logical_begin/end of the writer's plan, for every ZeRO stage (with
//                        ZeRO 0 every rank holds everything but writes only its own range: the writes run in
//                        parallel and every stage produces the same files)
//   meta.json            written last, by rank 0, once every rank's files are on disk: step, model shape, the flags
//                        that must match on resume, data-loader position, StepGuard state (outlier windows, bad-step
//                        count), metrics.jsonl's length, world size, ZeRO stage, and each file's size and CRC-32C.
// Every file is written to a temporary name, fsync'ed and renamed (llmc::write_atomically), and the directory is
// fsync'ed. A checkpoint is complete iff meta.json exists and every file's size and CRC-32C match it; meta.json is
// removed first when a checkpoint directory is rewritten, so a crash at any point leaves either the old complete
// checkpoint, or an incomplete one that resume ignores.
//
// Resume (-y 1) takes the newest complete checkpoint whose files verify; a corrupt one is reported on stderr (the
// file, the CRC computed and the CRC recorded) and the previous one is tried. The files are verified in parallel
// (rank r checks files r, r + world, ...). A rank of the new run reads the parts of the optimizer files that
// overlap its own range, so N writers and M readers need not agree.
//
// The RNG: initialisation is seeded once (the checkpoint replaces it), shuffling is a function of (seed, epoch,
// shard) and the loader position, sampling is seeded by (seed, step): the seed and the position are the whole
// random state, and both are in meta.json.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm.h"
#include "config.h"
#include "crc32c.h"
#include "data_check.h"
#include "dataloader.h"
#include "error.h"
#include "file_util.h"
#include "model.h"
#include "model_file.h"
#include "optimizer.h"

namespace llmc {

constexpr int OPTIM_STATE_MAGIC = 20241106;
constexpr int OPTIM_STATE_VERSION = 1;
constexpr int CHECKPOINT_META_VERSION = 2;  // 2: meta.json carries its own checksum; train_data

struct CheckpointFileInfo {
    std::string name;          // inside the checkpoint directory
    uint64_t bytes = 0;
    uint32_t crc32c = 0;
    uint64_t begin = 0, end = 0;  // optimizer files: the logical range of m, v, master they hold
};

struct CheckpointMeta {
    int step = 0;  // optimizer steps done; the run continues with step + 1
    GPT2Config config;
    uint64_t num_params = 0;
    int world_size = 1, zero_stage = 0;
    // Must match on resume (the data order and the model depend on them).
    long long batch_size = 0, seq_len = 0, total_batch = 0;
    uint64_t seed = 0;
    bool shuffle = true;
    bool overfit = false;
    DataSummary train_data;       // must match too: the training shards' names and sizes (llmc/data_check.h)
    int max_steps = 0;            // informational: a resumed run may change -x (the lr schedule then changes too)
    LoaderPosition data;          // the training loader at the start of step + 1
    nlohmann::json guard;         // StepGuard::state()
    int64_t metrics_bytes = -1;   // metrics.jsonl's length after step `step`'s line (-1: no metrics file)
    std::vector<CheckpointFileInfo> files;  // model.bin first, then the optimizer files in writer-rank order
};

// <out>/ckpt_00000123
std::string checkpoint_dir(const std::string& out_dir, int step);
// Steps of the directories named ckpt_<digits> in out_dir, ascending (complete or not); empty if none / no dir.
std::vector<int> list_checkpoint_steps(const std::string& out_dir);
bool checkpoint_complete(const std::string& dir);  // meta.json exists

nlohmann::json meta_to_json(const CheckpointMeta& m);
// Fails naming the file and the field on anything missing, of the wrong JSON type or out of range (integers are
// never wrapped: -4 is not 2^64 - 4), and on anything inconsistent within the file (the model's parameter count,
// one optimizer file per writing rank tiling [0, num_params), the files' sizes).
CheckpointMeta meta_from_json(const nlohmann::json& j, const std::string& path);
// Reads dir/meta.json and checks its own checksum (field "meta_crc32c": the CRC-32C of the file's bytes with that
// value written as "00000000") before meta_from_json.
CheckpointMeta read_checkpoint_meta(const std::string& dir);
void write_checkpoint_meta(const std::string& dir, const CheckpointMeta& m);
// "" when file `index` of `meta` has the recorded size and CRC-32C and its header agrees with meta.json (model.bin:
// the model shape; optimizer files: magic, version, step, range), else a message naming the file.
std::string verify_checkpoint_file(const std::string& dir, const CheckpointMeta& meta, size_t index);
// Fails naming the file when an optimizer file's header `h` (256 int32) disagrees with meta.json.
void check_optim_header(const std::string& path, const int32_t* h, const CheckpointMeta& meta,
                        const CheckpointFileInfo& fi);
// A checkpoint that is intact but written by a run with other flags or data: resuming it is refused outright
// (every checkpoint of that run would be the same), not skipped for an older one.
struct ResumeMismatch : Error {
    using Error::Error;
};
// Throws ResumeMismatch with a message naming the flag when `saved` (the checkpoint) and `now` (this run) differ
// in anything that must match: model shape, -b, -t, -d, --seed, --shuffle, -a, the training data (-i).
void check_resume_compatible(const CheckpointMeta& saved, const CheckpointMeta& now, const std::string& dir);
// "" when the first `bytes` of metrics.jsonl at `path` end with the train line of step `step` (the checkpoint's
// metrics_bytes), else what is wrong.
std::string check_metrics_prefix(const std::string& path, int64_t bytes, int step);

// Writes one optimizer-state file atomically: `fetch(which, offset, count, dst)` copies `count` floats of array
// `which` (0 = m, 1 = v, 2 = master) starting at logical element begin + offset into dst. Returns name, size, CRC.
CheckpointFileInfo write_optim_state(const std::string& dir, const std::string& name, int step, uint64_t num_params,
                                     uint64_t begin, uint64_t end,
                                     const std::function<void(int, uint64_t, size_t, float*)>& fetch);
// Reads logical elements [lo, hi) of array `which` from the optimizer files of `meta` (whatever their number) into
// dst. Validates each file's header against meta.json; fails naming the file.
void read_optim_state(const std::string& dir, const CheckpointMeta& meta, int which, uint64_t lo, uint64_t hi,
                      float* dst);

// Deletes checkpoints: keeps the newest `keep_last` complete ones (0: all), plus every one whose step is a multiple
// of keep_every (0: none), among those up to `newest`; incomplete directories older than `newest` (crash leftovers)
// go too. Checkpoints past `newest` (left by a run that got further before it crashed) are left alone.
void apply_retention(const std::string& out_dir, int keep_last, int keep_every, int newest);
void remove_checkpoint(const std::string& dir);  // meta.json first, so a half-removed one is never complete
// Cuts metrics.jsonl back to `bytes` (the lines of the steps a resumed run redoes); no-op if it is shorter.
void truncate_metrics(const std::string& path, int64_t bytes);

// Test hook: LLMC_TEST_CRASH_IN_CHECKPOINT=<step> makes the writer of step <step>'s checkpoint kill itself
// (SIGKILL) after the temporary file of its optimizer state is written and before it is renamed.
void checkpoint_test_hook(int step);
// mkdir (and its parents) + fsync of the parent, so the directory entry survives a crash.
void make_checkpoint_directory(const std::string& dir);

// The collective parts: every rank calls save(), find_latest_valid() and load() together.
template <class Backend>
class Checkpointer {
public:
    Checkpointer(const std::string& out_dir, Backend& be, Comm& comm, GPT2<Backend>& model, Optimizer<Backend>& opt)
        : out_(out_dir), be_(be), comm_(comm), model_(model), opt_(opt) {}

    // Writes ckpt_<meta.step>: the caller fills everything but `files`, world_size, zero_stage, num_params.
    void save(CheckpointMeta meta, int keep_last, int keep_every) {
        const int rank = comm_.rank(), world = comm_.world_size();
        const std::string dir = checkpoint_dir(out_, meta.step);
        if (rank == 0) {
            remove_checkpoint(dir);  // rewriting (or crash leftovers): meta.json goes first, then the rest
            make_checkpoint_directory(dir);
        }
        comm_.barrier();
        std::vector<float> params;
        if (rank == 0) params = model_.get_params();
        const ShardPlan& plan = opt_.plan();
        const uint64_t begin = plan.logical_begin(rank), end = plan.logical_end(rank);
        char name[32];
        std::snprintf(name, sizeof name, "optim_%05d.bin", rank);
        float* arrays[3] = {opt_.m(), opt_.v(), opt_.master()};
        const size_t base = begin - opt_.state_offset();  // where `begin` sits in this rank's state arrays
        CheckpointFileInfo mine = write_optim_state(
            dir, name, meta.step, plan.num_params, begin, end,
            [&](int which, uint64_t off, size_t count, float* dst) {
                be_.copy_to_host(dst, arrays[which] + base + off, count * sizeof(float));
            });
        // Every rank's (size, CRC) for meta.json.
        const std::vector<uint64_t> sizes_crcs = comm_.all_gather_host({mine.bytes, mine.crc32c});
        if (rank == 0) {
            CheckpointFileInfo model_file;
            model_file.name = "model.bin";
            write_model_file(dir + "/model.bin", model_.config(), params.data(), false);
            model_file.crc32c = crc32c_file(dir + "/model.bin", &model_file.bytes);
            meta.files = {model_file};
            for (int r = 0; r < world; r++) {
                CheckpointFileInfo f;
                char n[32];
                std::snprintf(n, sizeof n, "optim_%05d.bin", r);
                f.name = n, f.begin = plan.logical_begin(r), f.end = plan.logical_end(r);
                f.bytes = sizes_crcs[2 * (size_t)r], f.crc32c = (uint32_t)sizes_crcs[2 * (size_t)r + 1];
                meta.files.push_back(f);
            }
            meta.world_size = world, meta.zero_stage = opt_.zero_stage(), meta.num_params = plan.num_params;
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
            std::string problem;
            bool shared = true;  // a problem every rank sees: only rank 0 reports it
            CheckpointMeta meta;
            if (!checkpoint_complete(dir)) {
                problem = dir + " is incomplete (no meta.json: the run stopped while writing it)";
            } else {
                try {
                    meta = read_checkpoint_meta(dir);
                    if (meta.step != steps[i])
                        problem = dir + "/meta.json: field \"step\" is " + std::to_string(meta.step) +
                                  ", the directory is for step " + std::to_string(steps[i]);
                    if (problem.empty() && check) problem = check(meta);
                    shared = problem.empty() ? false : shared;
                    for (size_t f = (size_t)rank; f < meta.files.size() && problem.empty(); f += (size_t)world)
                        problem = verify_checkpoint_file(dir, meta, f);
                } catch (const ResumeMismatch&) {
                    throw;
                } catch (const Error& e) {
                    problem = e.what();
                }
            }
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
    std::string out_;
    Backend& be_;
    Comm& comm_;
    GPT2<Backend>& model_;
    Optimizer<Backend>& opt_;
};

}  // namespace llmc
