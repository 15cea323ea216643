// Token shards in llm.c's format and the loader that turns them into (input, target) batches.
//
// Shard file: 256 x int32 header ([0] = 20240520, [1] = 1, [2] = number of tokens), then that many uint16 tokens.
// Offsets are 64-bit throughout (shards larger than 2 GiB load).
//
// A shard of n tokens holds (n - 1) / T sequences; sequence j is tokens [j*T, j*T + T] (T inputs, and the same
// window shifted by one as targets). An optimizer step consumes `seqs_per_step` sequences (= -d / T), all from one
// shard; it is split into micro-steps of world_size * B sequences, and rank r takes the r-th B of each micro-step.
// So the global batch of every step is the same whatever the world size (docs/distributed.md, "Semantics").
// With shuffling, each epoch permutes the shard order and the sequences inside each shard from one global seed
// (seed, epoch, shard): every rank computes the same permutation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

constexpr int SHARD_MAGIC = 20240520;
constexpr int SHARD_VERSION = 1;

struct ShardInfo {
    std::string path;
    size_t num_tokens = 0;
};

// Validates the header and that the file size matches it; fails naming the file otherwise.
ShardInfo read_shard_info(const std::string& path);
// Expands a glob pattern (sorted); fails if nothing matches.
std::vector<std::string> expand_glob(const std::string& pattern);

// Where the loader is: enough to resume exactly (checkpoints store it).
struct LoaderPosition {
    uint64_t epoch = 0;
    uint64_t shard = 0;      // index into this epoch's shard order
    uint64_t sequence = 0;   // index into this shard's sequence order where the current step starts
    uint64_t micro_step = 0; // micro-steps of the current step already taken
};
inline bool operator==(const LoaderPosition& a, const LoaderPosition& b) {
    return a.epoch == b.epoch && a.shard == b.shard && a.sequence == b.sequence && a.micro_step == b.micro_step;
}

class DataLoader {
public:
    DataLoader(const std::string& pattern, size_t B, size_t T, int rank, int world_size, size_t seqs_per_step,
               bool shuffle, uint64_t seed);
    ~DataLoader();
    DataLoader(const DataLoader&) = delete;
    DataLoader& operator=(const DataLoader&) = delete;

    // This rank's next micro-batch: B*T inputs and B*T targets. After the last micro-step of a step, the loader
    // moves on to the next step (and to the next shard / epoch when the shard cannot hold another whole step).
    void next_batch(int* inputs, int* targets);
    size_t micro_steps_per_step() const { return micro_steps_; }
    // This rank's slice of each micro-step's window of B x world sequences: [slice_begin(), slice_begin() + B).
    size_t slice_begin() const { return (size_t)rank_ * B_; }
    // Sequences (whole steps) available in one pass over the data.
    size_t steps_per_epoch() const;
    void reset() { set_position(LoaderPosition()); }
    LoaderPosition position() const { return pos_; }
    // Fails with check_position's message when `p` does not fit the data.
    void set_position(const LoaderPosition& p);
    // "" when `p` is a position this data and batch can be at (shard and sequence in range, a step's worth of
    // sequences left in the shard, micro-step in range), else what is wrong, naming the field. Safe for any values
    // (no wrap-around: a position read from a file may hold anything).
    std::string check_position(const LoaderPosition& p) const;
    // Where `steps` whole steps from the start leave the loader (the position is a function of the step count).
    LoaderPosition position_after(uint64_t steps) const;
    const std::vector<ShardInfo>& shards() const { return shards_; }
    size_t total_tokens() const;
    size_t num_shards() const { return shards_.size(); }

    // Evaluation over every sequence (validation, -m -1): the shards in file order, never shuffled, each cut into
    // windows of seqs_per_step sequences, a shard's last window holding the rest (possibly fewer). In window w,
    // micro-step m, this rank reads the window's sequences [m B world + rank B, + B) that exist: B, fewer or none.
    // So the windows and their sequences are the same for any world size, and the ranks' batches may be partial:
    // average the losses by token count (the trainer's evaluate()). The training position is not touched.
    size_t eval_windows() const;
    size_t eval_sequences(size_t windows) const;  // the sequences of the first `windows` windows, all ranks together
    size_t read_eval_batch(size_t window, size_t micro_step, int* inputs, int* targets);  // rows read: 0 .. B

private:
    void start_epoch(uint64_t epoch);
    std::vector<size_t> shard_order(uint64_t epoch) const;  // the epoch's order of shards
    void open_current_shard();
    void advance_step();
    void read_sequence(uint64_t seq, int* inputs, int* targets);
    // Window w of the evaluation pass: shard (file order), first sequence, number of sequences.
    struct EvalWindow {
        size_t shard;
        uint64_t first;
        size_t count;
    };
    EvalWindow eval_window(size_t w) const;
    size_t sequences_in(size_t shard_index) const { return (shards_[shard_index].num_tokens - 1) / T_; }

    std::vector<ShardInfo> shards_;
    size_t B_, T_;
    int rank_, world_;
    size_t seqs_per_step_, micro_steps_;
    bool shuffle_;
    uint64_t seed_;
    LoaderPosition pos_;
    std::vector<size_t> shard_order_;  // this epoch's order of shards
    std::vector<uint64_t> seq_order_;  // the current shard's order of sequences (empty: identity)
    int fd_ = -1;
    size_t open_shard_ = SIZE_MAX;
    int eval_fd_ = -1;                 // the evaluation pass's open shard (its own: the position's stays open)
    size_t eval_shard_ = SIZE_MAX;
    std::vector<uint16_t> buf_;
};

}  // namespace llmc
