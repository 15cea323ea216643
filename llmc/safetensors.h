// Reading Hugging Face's safetensors files (the format llmc/export_hf.h writes):
//   u64 little-endian N, then N bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end)}, optional
//   "__metadata__"}, then the data; offsets are relative to the first byte after the JSON.
// The header is validated as a whole when the file is opened (every tensor's bytes inside the file and equal to its
// shape times its dtype's size; shapes and offsets non-negative integers; no tensor named twice; no two tensors
// sharing a byte, as the reference library requires), so a truncated download or a forged header is refused before
// anything is converted. Tensors are read
// one at a time (a 1.5B-parameter file need not fit in memory twice).
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace llmc {

struct SafetensorsEntry {
    std::string dtype;           // "F32", "F16", "BF16", "F64", "I64", ...
    std::vector<size_t> shape;
    size_t begin = 0, end = 0;   // byte range in the data section
};

class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::string& path);  // fails naming the file on anything malformed
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const { return path_; }
    const std::map<std::string, SafetensorsEntry>& tensors() const { return tensors_; }
    bool has(const std::string& name) const { return tensors_.count(name) != 0; }
    const SafetensorsEntry& entry(const std::string& name) const;  // fails "missing tensor" when absent
    // The tensor's values as fp32 (F32 copied, F16 and BF16 widened exactly); other dtypes are refused.
    std::vector<float> read_f32(const std::string& name) const;

private:
    std::string path_;
    std::FILE* file_ = nullptr;
    size_t data_start_ = 0;
    std::map<std::string, SafetensorsEntry> tensors_;
};

// Bytes per element of a safetensors dtype name; 0 for an unknown name.
size_t safetensors_dtype_size(const std::string& dtype);
// IEEE half (binary16) bit pattern -> float, exact (subnormals, infinities and NaN included).
float fp16_to_float(uint16_t h);

}  // namespace llmc
