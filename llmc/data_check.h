// Checks of the token shards before training starts (docs/data.md, "Checks before step 1").
//
//   summarize_shards   a digest of the shard list (names and token counts): the ranks compare theirs before step 1
//                      (a rank with other or missing files would compute another number of steps and hang the
//                      others), and checkpoints record it (a resume with other data is refused)
//   find_bad_token     the first token id >= the vocabulary in a shard, read in parallel chunks: a bad id is found
//                      when the shard is opened, naming the shard and the offset, not when its batch comes up
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dataloader.h"

namespace llmc {

struct DataSummary {
    uint64_t shards = 0, tokens = 0;
    uint32_t digest = 0;  // CRC-32C over each shard's file name (without its directory) and token count, in order
};
inline bool operator==(const DataSummary& a, const DataSummary& b) {
    return a.shards == b.shards && a.tokens == b.tokens && a.digest == b.digest;
}
DataSummary summarize_shards(const std::vector<ShardInfo>& shards);
// "3 shard(s), 60000 tokens, digest 1a2b3c4d"
std::string describe(const DataSummary& s);

struct BadToken {
    bool found = false;
    uint64_t index = 0;  // token index in the shard (the byte offset is 1024 + 2 * index)
    uint32_t value = 0;
};
// The first token of `shard` that is >= vocab_size (OpenMP threads over 4 MiB chunks). Fails naming the file on a
// read error.
BadToken find_bad_token(const ShardInfo& shard, size_t vocab_size);

}  // namespace llmc
