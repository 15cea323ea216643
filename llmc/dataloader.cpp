// Shard validation and the data loader (see dataloader.h for the batch semantics).
#include "dataloader.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "error.h"
#include "file_util.h"
#include "rng.h"

namespace llmc {

namespace {
constexpr size_t HEADER_BYTES = 256 * sizeof(int32_t);
constexpr uint64_t SHUFFLE_STREAM = 0x5348554646ull;  // "SHUFF": separates the loader's RNG from the others

void pread_exact(int fd, void* dst, size_t n, off_t offset, const std::string& path) {
    char* p = (char*)dst;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, offset);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) fail("%s: read failed at byte %lld (%s)", path.c_str(), (long long)offset,
                           got < 0 ? std::strerror(errno) : "unexpected end of file");
        p += got, n -= (size_t)got, offset += got;
    }
}

// Sequence j of a shard (tokens [j T, j T + T], T + 1 of them through `buf`) as inputs and targets.
void read_window(int fd, const ShardInfo& s, uint64_t j, size_t T, std::vector<uint16_t>& buf, int* inputs,
                 int* targets) {
    pread_exact(fd, buf.data(), (T + 1) * sizeof(uint16_t), (off_t)(HEADER_BYTES + j * T * sizeof(uint16_t)), s.path);
    for (size_t t = 0; t < T; t++) {
        inputs[t] = buf[t];
        targets[t] = buf[t + 1];
    }
}

// Fisher-Yates with our own RNG, so every rank and machine gets the same permutation.
template <class T>
void shuffle_with(std::vector<T>& v, Rng& rng) {
    for (size_t i = v.size(); i > 1; i--) std::swap(v[i - 1], v[rng.below(i)]);
}
}  // namespace

ShardInfo read_shard_info(const std::string& path) {
    size_t bytes = file_size_or_fail(path);
    if (bytes < HEADER_BYTES)
        fail("%s: truncated data shard (%zu bytes, the header alone is %zu)", path.c_str(), bytes, HEADER_BYTES);
    FILE* f = open_or_fail(path, "rb");
    int32_t header[256];
    read_exact(f, header, sizeof header, path);
    std::fclose(f);
    if (header[0] != SHARD_MAGIC)
        fail("%s: bad magic %d in data shard header (expected %d)", path.c_str(), header[0], SHARD_MAGIC);
    if (header[1] != SHARD_VERSION)
        fail("%s: unsupported data shard version %d (expected %d)", path.c_str(), header[1], SHARD_VERSION);
    if (header[2] < 0) fail("%s: negative token count %d in the header", path.c_str(), header[2]);
    ShardInfo s{path, (size_t)(uint32_t)header[2]};
    size_t want = HEADER_BYTES + s.num_tokens * sizeof(uint16_t);
    if (bytes != want)
        fail("%s: the header says %zu tokens (%zu bytes) but the file has %zu bytes", path.c_str(), s.num_tokens,
             want, bytes);
    return s;
}

std::vector<std::string> expand_glob(const std::string& pattern) {
    glob_t g;
    std::memset(&g, 0, sizeof g);
    int rc = glob(pattern.c_str(), 0, nullptr, &g);
    std::vector<std::string> out;
    if (rc == 0)
        for (size_t i = 0; i < g.gl_pathc; i++) out.emplace_back(g.gl_pathv[i]);
    globfree(&g);
    if (out.empty())  // the default -i and README's examples name data/brown/: say what makes it
        fail("no data files match '%s' (%s)", pattern.c_str(),
             pattern.find("data/brown/") != std::string::npos
                 ? "dev/data/prepare_brown.sh makes data/brown/, the Brown corpus in GPT-2 tokens; the CPU quickstart's "
                   "byte-level shards are data/brown_bytes/"
                 : "prepare data first: docs/data.md");
    std::sort(out.begin(), out.end());
    return out;
}

DataLoader::DataLoader(const std::string& pattern, size_t B, size_t T, int rank, int world_size,
                       size_t seqs_per_step, bool shuffle, uint64_t seed)
    : B_(B), T_(T), rank_(rank), world_(world_size), seqs_per_step_(seqs_per_step), shuffle_(shuffle), seed_(seed) {
    if (B == 0 || T == 0 || world_size < 1 || rank < 0 || rank >= world_size)
        fail("data loader: bad shape B=%zu T=%zu rank=%d world=%d", B, T, rank, world_size);
    size_t per_micro = B * (size_t)world_size;
    if (seqs_per_step == 0 || seqs_per_step % per_micro != 0)
        fail("data loader: %zu sequences per step is not a multiple of B x world size = %zu", seqs_per_step,
             per_micro);
    micro_steps_ = seqs_per_step / per_micro;
    for (const std::string& path : expand_glob(pattern)) {
        ShardInfo s = read_shard_info(path);
        if (s.num_tokens < 1 || (s.num_tokens - 1) / T < seqs_per_step)
            fail("%s: %zu tokens is fewer than one step needs (%zu sequences of %zu+1 tokens)", path.c_str(),
                 s.num_tokens, seqs_per_step, T);
        shards_.push_back(s);
    }
    buf_.resize(T + 1);
    set_position(LoaderPosition());
}

DataLoader::~DataLoader() {
    if (fd_ >= 0) close(fd_);
    if (eval_fd_ >= 0) close(eval_fd_);
}

size_t DataLoader::total_tokens() const {
    size_t n = 0;
    for (const ShardInfo& s : shards_) n += s.num_tokens;
    return n;
}

size_t DataLoader::steps_per_epoch() const {
    size_t n = 0;
    for (size_t i = 0; i < shards_.size(); i++) n += sequences_in(i) / seqs_per_step_;
    return n;
}

std::vector<size_t> DataLoader::shard_order(uint64_t epoch) const {
    std::vector<size_t> order(shards_.size());
    for (size_t i = 0; i < shards_.size(); i++) order[i] = i;
    if (shuffle_) {
        Rng rng(seed_ ^ (epoch * 0x9E3779B97F4A7C15ull), SHUFFLE_STREAM);
        shuffle_with(order, rng);
    }
    return order;
}

void DataLoader::start_epoch(uint64_t epoch) { shard_order_ = shard_order(epoch); }

void DataLoader::open_current_shard() {
    size_t index = shard_order_[pos_.shard];
    if (index != open_shard_) {
        if (fd_ >= 0) close(fd_);
        fd_ = open(shards_[index].path.c_str(), O_RDONLY);
        if (fd_ < 0) fail("%s: cannot open (%s)", shards_[index].path.c_str(), std::strerror(errno));
        open_shard_ = index;
    }
    seq_order_.clear();
    if (shuffle_) {
        seq_order_.resize(sequences_in(index));
        for (size_t i = 0; i < seq_order_.size(); i++) seq_order_[i] = i;
        Rng rng(seed_ ^ (pos_.epoch * 0x9E3779B97F4A7C15ull), SHUFFLE_STREAM + 1 + index);
        shuffle_with(seq_order_, rng);
    }
}

std::string DataLoader::check_position(const LoaderPosition& p) const {
    char buf[256];
    if (p.shard >= shards_.size()) {
        std::snprintf(buf, sizeof buf, "data.shard %llu is out of range (the data has %zu shard(s))",
                      (unsigned long long)p.shard, shards_.size());
        return buf;
    }
    if (p.micro_step >= micro_steps_) {
        std::snprintf(buf, sizeof buf, "data.micro_step %llu is out of range (%zu micro-step(s) per step)",
                      (unsigned long long)p.micro_step, micro_steps_);
        return buf;
    }
    // Compared as "sequence <= n - per_step" (n >= per_step for every shard, checked when the loader opened it):
    // "sequence + per_step <= n" would wrap around for a sequence near 2^64 and accept it.
    const size_t shard = shard_order(p.epoch)[p.shard];
    const uint64_t n = sequences_in(shard);
    if (n < seqs_per_step_ || p.sequence > n - seqs_per_step_) {
        std::snprintf(buf, sizeof buf, "data.sequence %llu is out of range (shard %s holds %llu sequences, a step "
                      "takes %zu)", (unsigned long long)p.sequence, shards_[shard].path.c_str(), (unsigned long long)n,
                      seqs_per_step_);
        return buf;
    }
    return "";
}

void DataLoader::set_position(const LoaderPosition& p) {
    const std::string problem = check_position(p);
    if (!problem.empty()) fail("data loader position: %s", problem.c_str());
    start_epoch(p.epoch);
    pos_ = p;
    open_current_shard();
}

LoaderPosition DataLoader::position_after(uint64_t steps) const {
    // Each shard holds floor(sequences / per-step) steps (advance_step moves on when another whole step does not
    // fit); an epoch is the sum over its shards, whatever their order.
    LoaderPosition p;
    if (steps_per_epoch() == 0) return p;
    p.epoch = steps / steps_per_epoch();
    uint64_t left = steps % steps_per_epoch();
    const std::vector<size_t> order = shard_order(p.epoch);
    for (p.shard = 0; left >= sequences_in(order[p.shard]) / seqs_per_step_; p.shard++)
        left -= sequences_in(order[p.shard]) / seqs_per_step_;
    p.sequence = left * seqs_per_step_;
    return p;
}

void DataLoader::advance_step() {
    LoaderPosition p = pos_;
    p.micro_step = 0;
    p.sequence += seqs_per_step_;
    if (p.sequence + seqs_per_step_ > sequences_in(shard_order_[p.shard])) {
        p.sequence = 0;
        if (++p.shard == shards_.size()) p.shard = 0, p.epoch++;
    }
    if (p.epoch != pos_.epoch) start_epoch(p.epoch);
    bool new_shard = p.shard != pos_.shard || p.epoch != pos_.epoch;
    pos_ = p;
    if (new_shard) open_current_shard();
}

void DataLoader::read_sequence(uint64_t seq, int* inputs, int* targets) {
    uint64_t j = seq_order_.empty() ? seq : seq_order_[seq];
    read_window(fd_, shards_[open_shard_], j, T_, buf_, inputs, targets);
}

size_t DataLoader::eval_windows() const {
    size_t n = 0;
    for (size_t i = 0; i < shards_.size(); i++) n += (sequences_in(i) + seqs_per_step_ - 1) / seqs_per_step_;
    return n;
}

DataLoader::EvalWindow DataLoader::eval_window(size_t w) const {
    for (size_t i = 0; i < shards_.size(); i++) {
        const size_t seqs = sequences_in(i), windows = (seqs + seqs_per_step_ - 1) / seqs_per_step_;
        if (w < windows) {
            const uint64_t first = (uint64_t)w * seqs_per_step_;
            return EvalWindow{i, first, (size_t)std::min<uint64_t>(seqs_per_step_, seqs - first)};
        }
        w -= windows;
    }
    fail("evaluation window past the %zu windows of the data '%s'...", eval_windows(), shards_[0].path.c_str());
}

size_t DataLoader::eval_sequences(size_t windows) const {
    size_t n = 0;
    for (size_t w = 0; w < windows; w++) n += eval_window(w).count;
    return n;
}

size_t DataLoader::read_eval_batch(size_t window, size_t micro_step, int* inputs, int* targets) {
    if (micro_step >= micro_steps_)
        fail("evaluation micro-step %zu, expected < %zu per window", micro_step, micro_steps_);
    const EvalWindow win = eval_window(window);
    const size_t first = micro_step * B_ * (size_t)world_ + (size_t)rank_ * B_;
    const size_t rows = first >= win.count ? 0 : std::min(B_, win.count - first);
    if (rows > 0 && win.shard != eval_shard_) {
        if (eval_fd_ >= 0) close(eval_fd_);
        eval_shard_ = SIZE_MAX;
        eval_fd_ = open(shards_[win.shard].path.c_str(), O_RDONLY);
        if (eval_fd_ < 0) fail("%s: cannot open (%s)", shards_[win.shard].path.c_str(), std::strerror(errno));
        eval_shard_ = win.shard;
    }
    for (size_t b = 0; b < rows; b++)
        read_window(eval_fd_, shards_[win.shard], win.first + first + b, T_, buf_, inputs + b * T_, targets + b * T_);
    return rows;
}

void DataLoader::next_batch(int* inputs, int* targets) {
    uint64_t first = pos_.sequence + pos_.micro_step * B_ * world_ + (uint64_t)rank_ * B_;
    for (size_t b = 0; b < B_; b++) read_sequence(first + b, inputs + b * T_, targets + b * T_);
    if (++pos_.micro_step == micro_steps_) advance_step();
}

}  // namespace llmc
