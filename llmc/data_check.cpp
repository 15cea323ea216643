// Shard digests and the out-of-vocabulary scan (see data_check.h).
#include "data_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "crc32c.h"
#include "error.h"

namespace llmc {

DataSummary summarize_shards(const std::vector<ShardInfo>& shards) {
    DataSummary s;
    for (const ShardInfo& sh : shards) {
        const std::string name = sh.path.substr(sh.path.find_last_of('/') + 1);
        const uint64_t n = sh.num_tokens;
        s.digest = crc32c(s.digest, name.data(), name.size() + 1);  // with the terminating zero: names stay apart
        s.digest = crc32c(s.digest, &n, sizeof n);
        s.shards++;
        s.tokens += n;
    }
    return s;
}

std::string describe(const DataSummary& s) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%llu shard(s), %llu tokens, names digest %08x, content digest %08x",
                  (unsigned long long)s.shards, (unsigned long long)s.tokens, s.digest, s.content);
    return buf;
}

ShardScan scan_shard(const ShardInfo& shard, size_t vocab_size) {
    constexpr size_t HEADER_BYTES = 256 * sizeof(int32_t), CHUNK = (size_t)2 << 20;  // tokens per chunk (4 MiB)
    const int fd = open(shard.path.c_str(), O_RDONLY);
    if (fd < 0) fail("%s: cannot open (%s)", shard.path.c_str(), std::strerror(errno));
    const size_t chunks = (shard.num_tokens + CHUNK - 1) / CHUNK;
    uint64_t first = UINT64_MAX;  // the lowest bad index found
    bool read_error = false;
    std::vector<uint32_t> chunk_crc(chunks);
#pragma omp parallel
    {
        std::vector<uint16_t> buf(CHUNK);
#pragma omp for schedule(dynamic) reduction(min : first)
        for (size_t c = 0; c < chunks; c++) {
            const size_t begin = c * CHUNK, n = std::min(CHUNK, shard.num_tokens - begin);
            size_t got = 0;
            while (got < n * 2) {
                const ssize_t r = pread(fd, (char*)buf.data() + got, n * 2 - got,
                                        (off_t)(HEADER_BYTES + begin * 2 + got));
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) break;
                got += (size_t)r;
            }
            if (got != n * 2) {
#pragma omp atomic write
                read_error = true;
                continue;
            }
            chunk_crc[c] = crc32c(0, buf.data(), n * 2);
            for (size_t i = 0; i < n; i++)
                if (buf[i] >= vocab_size) {
                    first = std::min<uint64_t>(first, begin + i);
                    break;
                }
        }
    }
    ShardScan scan;
    if (first != UINT64_MAX) {
        uint16_t v = 0;
        scan.bad.found = pread(fd, &v, 2, (off_t)(HEADER_BYTES + first * 2)) == 2;
        scan.bad.index = first, scan.bad.value = v;
    }
    close(fd);
    if (read_error) fail("%s: read error while checking its tokens", shard.path.c_str());
    scan.content = crc32c(0, chunk_crc.data(), chunk_crc.size() * sizeof(uint32_t));
    return scan;
}

}  // namespace llmc
