#include "data_shard_writer.h"

#include <algorithm>
#include <cstdio>

#include "error.h"
#include "file_util.h"

namespace llmc {

std::string shard_path(const std::string& dir, const std::string& name, const std::string& split, size_t index) {
    char num[32];
    std::snprintf(num, sizeof num, "%06zu", index);
    return dir + "/" + name + "_" + split + "_" + num + ".bin";
}

void write_shard(const std::string& path, const uint16_t* tokens, size_t n) {
    if (n > shard::MAX_TOKENS) fail("%s: %zu tokens do not fit one shard (at most %zu)", path.c_str(), n, shard::MAX_TOKENS);
    write_atomically(path, [&](FILE* f) {
        int32_t header[shard::HEADER_INTS] = {};
        header[0] = shard::MAGIC;
        header[1] = shard::VERSION;
        header[2] = (int32_t)n;
        write_exact(f, header, sizeof header, path);
        write_exact(f, tokens, n * sizeof(uint16_t), path);
    });
}

ShardWriter::ShardWriter(std::string dir, std::string name, std::string split, size_t shard_tokens)
    : dir_(std::move(dir)), name_(std::move(name)), split_(std::move(split)), shard_tokens_(shard_tokens) {
    if (shard_tokens_ == 0 || shard_tokens_ > shard::MAX_TOKENS)
        fail("shard size %zu tokens (expected 1 .. %zu)", shard_tokens_, shard::MAX_TOKENS);
    buf_.reserve(std::min(shard_tokens_, (size_t)1 << 24));
}

void ShardWriter::add(const int* ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] > 0xFFFF) fail("token id %d does not fit a uint16 shard", ids[i]);
        buf_.push_back((uint16_t)ids[i]);
        if (buf_.size() == shard_tokens_) flush();
    }
    total_ += n;
}

void ShardWriter::flush() {
    std::string path = shard_path(dir_, name_, split_, paths_.size());
    write_shard(path, buf_.data(), buf_.size());
    paths_.push_back(path);
    buf_.clear();
}

void ShardWriter::finish() {
    if (!buf_.empty()) flush();
}

}  // namespace llmc
