// CRC-32C (Castagnoli): the checksum of checkpoint files, meta.json and the data digests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmc {

// CRC-32C continuing from `crc` (0 to start): crc32c(crc32c(0, a), b) == crc32c(0, a + b).
// SSE4.2's crc32 instruction when the CPU has it, else a table. crc32c(0, "123456789", 9) == 0xE3069283.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);
// CRC-32C of a whole file (and its size in *bytes); fails naming the file.
uint32_t crc32c_file(const std::string& path, uint64_t* bytes);

}  // namespace llmc
