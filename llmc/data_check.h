// Checks of the token shards before training starts (docs/data.md, "Checks before step 1").
//
//   summarize_shards   a digest of the shard list (names and token counts): the ranks compare theirs before step 1
//                      among the run's other items (llmc/run_identity.h; a rank with other or missing files would
//                      compute another number of steps and hang the others)
//   scan_shard         one pass over a shard's tokens, in parallel chunks: the first token id >= the vocabulary (found
//                      when the shard is opened, naming the shard and the offset, not when its batch comes up) and a
//                      digest of its content; checkpoints record the data's names, sizes and content digests, so a
//                      resume on other data is refused
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dataloader.h"

namespace llmc {

struct DataSummary {
    uint64_t shards = 0, tokens = 0;
    uint32_t digest = 0;   // CRC-32C over each shard's file name (without its directory) and token count, in order
    uint32_t content = 0;  // CRC-32C over the shards' content digests (ShardScan::content), in order; 0: not scanned
};
inline bool operator==(const DataSummary& a, const DataSummary& b) {
    return a.shards == b.shards && a.tokens == b.tokens && a.digest == b.digest && a.content == b.content;
}
// Names and token counts (content stays 0: see scan_shard).
DataSummary summarize_shards(const std::vector<ShardInfo>& shards);
// "3 shard(s), 60000 tokens, names digest 1a2b3c4d, content digest 5e6f7a8b"
std::string describe(const DataSummary& s);

struct BadToken {
    bool found = false;
    uint64_t index = 0;  // token index in the shard (the byte offset is 1024 + 2 * index)
    uint32_t value = 0;
};
struct ShardScan {
    BadToken bad;          // the first token >= vocab_size
    uint32_t content = 0;  // CRC-32C over the CRC-32Cs of the shard's 4 MiB chunks of tokens, in order
};
// One pass over `shard`'s tokens with OpenMP threads over 4 MiB chunks. Fails naming the file on a read error.
ShardScan scan_shard(const ShardInfo& shard, size_t vocab_size);

}  // namespace llmc
