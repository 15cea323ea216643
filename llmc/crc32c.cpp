// CRC-32C (see crc32c.h).
#include "crc32c.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "error.h"
#include "file_util.h"

namespace llmc {

// ---- CRC-32C ---------------------------------------------------------------------------------------------------
// Reflected polynomial 0x82F63B78. The table path handles a byte at a time from a 256-entry table; the SSE4.2 path
// uses the crc32 instruction on 8 bytes at a time (about 20x faster: checkpoints of the large models are tens of GB).

namespace {

struct Crc32cTable {
    uint32_t t[256];
    Crc32cTable() {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            t[i] = c;
        }
    }
};

uint32_t crc32c_table(uint32_t c, const unsigned char* p, size_t n) {
    static const Crc32cTable table;
    for (size_t i = 0; i < n; i++) c = table.t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t c, const unsigned char* p, size_t n) {
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
    }
    c = (uint32_t)c64;
    for (; n > 0; n--, p++) c = __builtin_ia32_crc32qi(c, *p);
    return c;
}
bool have_sse42() {
    static const bool yes = __builtin_cpu_supports("sse4.2");
    return yes;
}
#endif

}  // namespace

uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
    uint32_t c = ~crc;
    const unsigned char* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
    if (have_sse42()) return ~crc32c_sse42(c, p, n);
#endif
    return ~crc32c_table(c, p, n);
}

uint32_t crc32c_file(const std::string& path, uint64_t* bytes) {
    FILE* f = open_or_fail(path, "rb");
    std::vector<unsigned char> buf(1 << 22);
    uint32_t crc = 0;
    uint64_t total = 0;
    size_t got;
    while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
        crc = crc32c(crc, buf.data(), got);
        total += got;
    }
    bool err = std::ferror(f);
    std::fclose(f);
    if (err) fail("%s: read error (%s)", path.c_str(), std::strerror(errno));
    if (bytes) *bytes = total;
    return crc;
}

}  // namespace llmc
