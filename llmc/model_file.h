// Model files (little-endian; docs/formats.md):
//   header: 256 x int32: [0] = 20240326, [1] = version, [2] = maxT, [3] = V, [4] = L, [5] = NH, [6] = C, [7] = Vp
//     versions 3 (fp32 weights) and 5 (bf16): llm.c's format, GPT-2
//     versions 6 (fp32) and 7 (bf16): any architecture, named in the header: [8] = its name's length in bytes,
//     [16 ..] its name (ASCII, at most 128 bytes)
//   then the architecture's parameter tensors in ParamLayout order (llmc/layout.h), weights (out, in); padded wte
//   rows are zero.
// Every version loads into both backends: the reader always returns fp32 values. GPT-2 is always written in llm.c's
// format.
#pragma once

#include <string>
#include <vector>

#include "config.h"

namespace llmc {

constexpr int MODEL_MAGIC = 20240326;
constexpr int MODEL_VERSION_FP32 = 3;
constexpr int MODEL_VERSION_BF16 = 5;
constexpr int MODEL_VERSION_NAMED_FP32 = 6;
constexpr int MODEL_VERSION_NAMED_BF16 = 7;
constexpr int MODEL_ARCH_NAME_BYTES = 128;

struct ModelFile {
    ModelConfig config;
    int version = MODEL_VERSION_FP32;
    std::vector<float> params;  // ParamLayout(config).total values
};

// Reads and validates (magic, version, sane sizes, file size == header + parameters). Errors name the file.
ModelFile read_model_file(const std::string& path);
// Reads only the header (validated as above, without loading the weights).
ModelConfig read_model_config(const std::string& path);
// Writes atomically (temp file + fsync + rename): a crash never leaves a half-written file under `path`.
void write_model_file(const std::string& path, const ModelConfig& cfg, const float* params, bool bf16);

}  // namespace llmc
