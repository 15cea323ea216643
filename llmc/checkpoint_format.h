// The checkpoint format: what each file of a checkpoint directory holds, how it is written and read back, and how
// it is verified. Where the directories are and which one is the latest is the store's (checkpoint_store.h); the
// collective save / resume of a run is the Checkpointer's (checkpoint.h). docs/checkpoints.md has the details.
//
// <output dir>/ckpt_<step, 8 digits>/
//   model.bin            the parameters, llm.c's model file, fp32 (version 3), written by rank 0
//   optim_<rank>.bin     one per writing rank: that rank's logical range [begin, end) of the flat, UNPADDED AdamW
//                        arrays: 256 x int32 header, then m[begin:end], v[begin:end], master[begin:end] (fp32).
//                        The ranges are ShardPlan::logical_begin/end of the writer's plan, for every ZeRO stage (with
//                        ZeRO 0 every rank holds everything but writes only its own range: the writes run in
//                        parallel and every stage produces the same files)
//   replica_<r>.bin      with --sync-every, replicas of one rank each (meta.json version 3) instead of the
//                        optimizer files: replica r's parameters (fp32), m, v, master over [0, num_params)
//   outer.bin            ... and the outer optimizer's theta_last and momentum over [0, num_params) (llmc/outer_sync.h)
//   replica_<r>_shard_<s>.bin, outer_shard_<s>.bin
//                        with --sync-every and --shard-group N > 1 (version 4): replica r is a sharding group of N
//                        ranks; the rank at shard s writes its shard's logical range [begin, end) of the replica's
//                        parameters, m, v, master, and replica 0's rank at shard s the outer state of that range.
//                        Version 3 is the case N = 1 of this layout: each replica's files, and the outer files, tile
//                        [0, num_params) in shard order.
//   meta.json            written last, by rank 0, once every rank's files are on disk: step, model shape, the flags
//                        that must match on resume, data-loader position, StepGuard state (outlier windows, bad-step
//                        count), metrics.jsonl's length, world size, ZeRO stage, and each file's size and CRC-32C.
// Every file is written to a temporary name, fsync'ed and renamed (llmc::write_atomically). A checkpoint is complete
// iff meta.json exists and every file's size and CRC-32C match it.
//
// The RNG: initialisation is seeded once (the checkpoint replaces it), shuffling is a function of (seed, epoch,
// shard) and the loader position, sampling is seeded by (seed, step): the seed and the position are the whole
// random state, and both are in meta.json.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config.h"
#include "data_check.h"
#include "dataloader.h"
#include "error.h"

namespace llmc {

constexpr int OPTIM_STATE_MAGIC = 20241106;
constexpr int OPTIM_STATE_VERSION = 1;
constexpr int SYNC_STATE_MAGIC = 20241107;  // replica_<rank>.bin and outer.bin: the optimizer file's header layout
// 2: meta.json carries its own checksum; train_data. 3: a run with --sync-every: "sync" and its files (version 2 is
// still written without it, and read). 4: --sync-every with replicas of N > 1 ranks: "sync.shard_group" and the
// per-shard files (version 3 is still written for replicas of one rank, and read).
constexpr int CHECKPOINT_META_VERSION = 2;
constexpr int CHECKPOINT_META_VERSION_SYNC = 3;
constexpr int CHECKPOINT_META_VERSION_SYNC_SHARDED = 4;
constexpr const char* CHECKPOINT_META_NAME = "meta.json";

struct CheckpointFileInfo {
    std::string name;          // inside the checkpoint directory
    uint64_t bytes = 0;
    uint32_t crc32c = 0;
    uint64_t begin = 0, end = 0;  // optimizer files: the logical range of m, v, master they hold
};

// --sync-every's part of a checkpoint (llmc/outer_sync.h); every = 0: a run without it.
struct SyncMeta {
    int every = 0;
    float outer_lr = 0, outer_momentum = 0;
    int last_sync_step = 0;  // the step after which the last outer step ran (0: none yet)
    int shard_group = 1;     // N: ranks per replica (--shard-group; 1 in version 3); replicas = world_size / N
    int replicas(int world_size) const { return world_size / shard_group; }
};

struct CheckpointMeta {
    int step = 0;  // optimizer steps done; the run continues with step + 1
    ModelConfig config;
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
    SyncMeta sync;                // must match too (the period, the outer optimizer; and then the world size)
    // model.bin first, then the optimizer files in writer-rank order (with --sync-every: the replica files, replica
    // by replica and shard by shard within one, then the outer files in shard order; sync_file_index())
    std::vector<CheckpointFileInfo> files;
};

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
// in anything that must match: model shape, -b, -t, -d, --seed, --shuffle, -a, the training data (-i),
// --sync-every, --outer-lr, --outer-momentum, and with --sync-every the number of replicas (world size / ranks per
// replica; the ranks per replica, and so the world size, may change).
void check_resume_compatible(const CheckpointMeta& saved, const CheckpointMeta& now, const std::string& dir);

// The file name of optimizer-state file i of the strategies that reduce every step: "optim_00003.bin".
std::string optim_file_name(size_t i);
// The file names of --sync-every's state (replicas of one rank: "replica_00003.bin", "outer.bin"; of N > 1 ranks:
// "replica_00001_shard_00002.bin", "outer_shard_00002.bin") and the arrays a state file holds (optim_*: 3, m v
// master; replica_*: 4, params m v master; outer*: 2, theta_last momentum).
std::string replica_file_name(int replica, int shard = 0, int shard_group = 1);
std::string outer_file_name(int shard = 0, int shard_group = 1);
constexpr const char* OUTER_FILE_NAME = "outer.bin";
int state_file_arrays(const std::string& name);
// With --sync-every: the index in CheckpointMeta::files of replica `replica`'s file of shard `shard`, and of the outer
// file of shard `shard` (0 <= shard < shard_group).
size_t sync_replica_file_index(const CheckpointMeta& m, int replica, int shard);
size_t sync_outer_file_index(const CheckpointMeta& m, int shard);

// Writes one optimizer-state file (or, by its name, a replica or outer file) atomically: `fetch(which, offset,
// count, dst)` copies `count` floats of array `which` (0 = m, 1 = v, 2 = master for an optimizer file) starting at
// logical element begin + offset into dst. `before_rename(step)`, when given, runs once the temporary file is
// written and before it is renamed (TestHooks::inside_checkpoint, llmc/test_hooks.h). Returns name, size, CRC.
CheckpointFileInfo write_optim_state(const std::string& dir, const std::string& name, int step, uint64_t num_params,
                                     uint64_t begin, uint64_t end,
                                     const std::function<void(int, uint64_t, size_t, float*)>& fetch,
                                     const std::function<void(int)>& before_rename = {});
// Reads logical elements [lo, hi) of array `which` from the optimizer files of `meta` (whatever their number) into
// dst. Validates each file's header against meta.json; fails naming the file.
void read_optim_state(const std::string& dir, const CheckpointMeta& meta, int which, uint64_t lo, uint64_t hi,
                      float* dst);
// Reads elements [lo, hi) of array `which` of the state file meta.files[index] (validated against meta.json).
void read_state_file(const std::string& dir, const CheckpointMeta& meta, size_t index, int which, uint64_t lo,
                     uint64_t hi, float* dst);


}  // namespace llmc
