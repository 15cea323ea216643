// Model files in llm.c's format (little-endian):
//   header: 256 x int32: [0] = 20240326, [1] = version (3: fp32 weights, 5: bf16 weights), [2] = maxT, [3] = V,
//           [4] = L, [5] = NH, [6] = C, [7] = Vp
//   then the 16 parameter tensors in ParamLayout order (llmc/layout.h), weights (out, in); padded wte rows are zero.
// Both versions load into both backends: the reader always returns fp32 values.
#pragma once

#include <string>
#include <vector>

#include "config.h"

namespace llmc {

constexpr int MODEL_MAGIC = 20240326;
constexpr int MODEL_VERSION_FP32 = 3;
constexpr int MODEL_VERSION_BF16 = 5;

struct ModelFile {
    GPT2Config config;
    int version = MODEL_VERSION_FP32;
    std::vector<float> params;  // ParamLayout(config).total values
};

// Reads and validates (magic, version, sane sizes, file size == header + parameters). Errors name the file.
ModelFile read_model_file(const std::string& path);
// Reads only the header (validated as above, without loading the weights).
GPT2Config read_model_config(const std::string& path);
// Writes atomically (temp file + fsync + rename): a crash never leaves a half-written file under `path`.
void write_model_file(const std::string& path, const GPT2Config& cfg, const float* params, bool bf16);

}  // namespace llmc
