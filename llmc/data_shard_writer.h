// Writing llm.c's token shards: the files that dev/tools/prepare_data produces and the dataloader reads.
//
// Format (little-endian): a header of 256 int32, [0] = 20240520 (magic), [1] = 1 (version), [2] = number of tokens;
// then that many uint16 token ids. Documents are concatenated, each preceded by the EOT token (50256), and may
// continue from one shard into the next. Shards of one split are named <dir>/<name>_<split>_<6-digit index>.bin,
// e.g. data/brown/brown_train_000000.bin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

namespace shard {
constexpr int32_t MAGIC = 20240520;
constexpr int32_t VERSION = 1;
constexpr size_t HEADER_INTS = 256;
constexpr size_t MAX_TOKENS = 0x7FFFFFFF;  // header [2] is an int32
}  // namespace shard

// "<dir>/<name>_<split>_<index, 6 digits>.bin"
std::string shard_path(const std::string& dir, const std::string& name, const std::string& split, size_t index);

// Writes one complete shard file atomically (temporary file + fsync + rename).
void write_shard(const std::string& path, const uint16_t* tokens, size_t n);

// Accumulates the tokens of one split and writes a shard each time `shard_tokens` have been added (the last shard
// holds the remainder, written by finish()). Token ids must fit uint16 (GPT-2's 50257 do).
class ShardWriter {
public:
    ShardWriter(std::string dir, std::string name, std::string split, size_t shard_tokens);
    void add(const int* ids, size_t n);
    void finish();  // writes the last, partial shard (if any tokens are pending)
    size_t tokens() const { return total_; }
    const std::vector<std::string>& paths() const { return paths_; }  // shards written so far, in order

private:
    void flush();
    std::string dir_, name_, split_;
    size_t shard_tokens_, total_ = 0;
    std::vector<uint16_t> buf_;
    std::vector<std::string> paths_;
};

}  // namespace llmc
