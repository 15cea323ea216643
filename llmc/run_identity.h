// Before step 1 every rank agrees on what it is about to run (docs/distributed.md, "No hangs: the agreement before
// step 1 and the watchdog").
//
// Each rank describes its run as a fixed list of items, each a few 64-bit words: the backend, the model (shape and
// a checksum of the model file's bytes; a fresh initialisation is a function of the shape and --seed), every flag
// that changes the math, the sequence of collectives or the handling of signals (-b, -t, -d, -x, the lr schedule,
// AdamW's betas, eps and weight decay, clipping, --seed, ZeRO stage, --shard-group, --reduce-dtype, the kernels'
// choices, recompute, the bad-step guard, evaluation and checkpoint intervals and retention, --preempt-signal),
// the data (-i, -j: shard names and sizes, llmc/data_check.h), -o, and, once -o is locked, the checkpoints in it.
// The ranks exchange their words through an all-gather of a fixed size (first their count, so ranks running other
// builds of the program are told apart instead of crashing in a mismatched collective), and every rank stops with
// the same message naming the first item that differs and the ranks that differ:
//   error: the ranks disagree on -e (the model): rank 0 has L=2 NH=2 C=32 ..., rank 1 has L=4 NH=2 C=32 ...; ...
// This runs before the model is built, before any collective whose size depends on the run, and before anything
// is written to -o.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config.h"
#include "data_check.h"

namespace llmc {

struct IdentityItem {
    std::string name;              // "-b", "-e (the model)"
    std::vector<uint64_t> words;   // the same count on every rank
    std::function<std::string(const uint64_t*)> show;  // the words as the message shows them
};

class RunIdentity {
public:
    void add_int(const std::string& name, long long v);
    void add_float(const std::string& name, float v);  // compared bit for bit
    void add_text(const std::string& name, const std::string& s);
    void add_model(const ModelConfig& cfg, bool from_file, uint32_t file_crc);
    void add_data(const std::string& name, const DataSummary& s);  // names and sizes (content is checked apart)
    void add_checkpoints(const std::string& out_dir);  // ckpt_* steps and their meta.json bytes
    const std::vector<IdentityItem>& items() const { return items_; }

private:
    std::vector<IdentityItem> items_;
};

struct TrainOptions;
// The run as the trainer resolved it: what the flags left open (-d -1, -x -1, -z -1) and the data it opened.
struct ResolvedRun {
    const char* backend = "";
    ModelConfig config;
    bool model_from_file = false;
    long long total_batch = 0;
    int max_steps = 0, zero_stage = 0;
    DataSummary train, val;  // val: zero when -v 0
};
// Every item of a training run but the checkpoints (added once -o is locked). Reads the model file (-e) through
// for its checksum.
RunIdentity identity_of(const TrainOptions& o, const ResolvedRun& r);

// Every rank's words, concatenated in rank order (a collective: Comm's all-gather on 64-bit values).
using GatherU64 = std::function<std::vector<uint64_t>(const std::vector<uint64_t>&)>;
// Collective. Fails on every rank, with the same message, when any rank's items differ from rank 0's.
void agree_on_identity(const RunIdentity& mine, int world, const GatherU64& gather);

}  // namespace llmc
