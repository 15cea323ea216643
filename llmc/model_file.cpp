#include "model_file.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "bf16.h"
#include "error.h"
#include "file_util.h"
#include "layout.h"

namespace llmc {

static bool is_bf16(int version) { return version == MODEL_VERSION_BF16 || version == MODEL_VERSION_NAMED_BF16; }

// Versions 6 and 7 name their architecture in the header: its length at [8], its bytes from [16] on.
static std::string arch_from_header(const int32_t* h, const std::string& path) {
    if (h[1] == MODEL_VERSION_FP32 || h[1] == MODEL_VERSION_BF16) return "gpt2";
    if (h[8] <= 0 || h[8] > MODEL_ARCH_NAME_BYTES)
        fail("%s: header field 8 (the architecture name's length) is %d, expected 1 .. %d", path.c_str(), h[8],
             MODEL_ARCH_NAME_BYTES);
    return std::string(reinterpret_cast<const char*>(h + 16), (size_t)h[8]);
}

static ModelConfig config_from_header(const int32_t* h, const std::string& path, size_t file_bytes) {
    if (h[0] != MODEL_MAGIC)
        fail("%s: bad magic number %d (expected %d for a model file)", path.c_str(), h[0], MODEL_MAGIC);
    if (h[1] != MODEL_VERSION_FP32 && h[1] != MODEL_VERSION_BF16 && h[1] != MODEL_VERSION_NAMED_FP32 &&
        h[1] != MODEL_VERSION_NAMED_BF16)
        fail("%s: unsupported model file version %d (expected %d = fp32 or %d = bf16, or %d / %d naming the "
             "architecture)", path.c_str(), h[1], MODEL_VERSION_FP32, MODEL_VERSION_BF16, MODEL_VERSION_NAMED_FP32,
             MODEL_VERSION_NAMED_BF16);
    for (int i = 2; i <= 7; i++)
        if (h[i] <= 0) fail("%s: header field %d is %d (expected a positive size)", path.c_str(), i, h[i]);
    ModelConfig c;
    c.arch = arch_from_header(h, path);
    if (h[1] == MODEL_VERSION_NAMED_FP32 || h[1] == MODEL_VERSION_NAMED_BF16) c.arch_flags = (unsigned)h[9];
    c.max_seq_len = (size_t)h[2];
    c.vocab_size = (size_t)h[3];
    c.num_layers = (size_t)h[4];
    c.num_heads = (size_t)h[5];
    c.channels = (size_t)h[6];
    c.padded_vocab_size = (size_t)h[7];
    try {
        validate_config(c);
    } catch (const Error& e) {
        fail("%s: %s", path.c_str(), e.what());
    }
    size_t elem = is_bf16(h[1]) ? 2 : 4;
    size_t want = 256 * sizeof(int32_t) + ParamLayout(c).total * elem;
    if (file_bytes != want)
        fail("%s: file is %zu bytes but its header (%s, version %d) implies %zu bytes%s", path.c_str(), file_bytes,
             c.describe().c_str(), h[1], want, file_bytes < want ? " (truncated?)" : "");
    return c;
}

static void read_header(const std::string& path, FILE* f, int32_t* h) {
    size_t bytes = file_size_or_fail(path);
    if (bytes < 256 * sizeof(int32_t))
        fail("%s: %zu bytes is too short for a model file header (1024 bytes)", path.c_str(), bytes);
    read_exact(f, h, 256 * sizeof(int32_t), path);
}

ModelConfig read_model_config(const std::string& path) {
    FILE* f = open_or_fail(path, "rb");
    int32_t h[256];
    try {
        read_header(path, f, h);
        ModelConfig c = config_from_header(h, path, file_size_or_fail(path));
        std::fclose(f);
        return c;
    } catch (...) {
        std::fclose(f);
        throw;
    }
}

ModelFile read_model_file(const std::string& path) {
    FILE* f = open_or_fail(path, "rb");
    try {
        int32_t h[256];
        read_header(path, f, h);
        ModelFile m;
        m.config = config_from_header(h, path, file_size_or_fail(path));
        m.version = h[1];
        size_t n = ParamLayout(m.config).total;
        m.params.resize(n);
        if (!is_bf16(m.version)) {
            read_exact(f, m.params.data(), n * sizeof(float), path);
        } else {
            std::vector<uint16_t> raw(n);
            read_exact(f, raw.data(), n * sizeof(uint16_t), path);
            for (size_t i = 0; i < n; i++) m.params[i] = bf16_to_float(raw[i]);
        }
        // A NaN or infinity would only show up steps later as a non-finite loss: refuse the file now.
        for (size_t i = 0; i < n; i++)
            if (!std::isfinite(m.params[i])) {
                const ParamLayout lay(m.config);
                const int t = lay.tensor_of(i);
                fail("%s: parameter %zu (%s, element %zu) is %g: the file is corrupt", path.c_str(), i,
                     lay.name(t), i - lay.offsets[t], m.params[i]);
            }
        std::fclose(f);
        return m;
    } catch (...) {
        std::fclose(f);
        throw;
    }
}

void write_model_file(const std::string& path, const ModelConfig& cfg, const float* params, bool bf16) {
    validate_config(cfg);
    int32_t h[256] = {};
    h[0] = MODEL_MAGIC;
    const bool llmc_format = cfg.arch == "gpt2";  // llm.c's header; other architectures name theirs
    h[1] = llmc_format ? (bf16 ? MODEL_VERSION_BF16 : MODEL_VERSION_FP32)
                       : (bf16 ? MODEL_VERSION_NAMED_BF16 : MODEL_VERSION_NAMED_FP32);
    if (!llmc_format) {
        if (cfg.arch.size() > (size_t)MODEL_ARCH_NAME_BYTES)
            fail("%s: architecture name '%s' is longer than %d bytes", path.c_str(), cfg.arch.c_str(),
                 MODEL_ARCH_NAME_BYTES);
        h[8] = (int32_t)cfg.arch.size();
        h[9] = (int32_t)cfg.arch_flags;
        std::memcpy(h + 16, cfg.arch.data(), cfg.arch.size());
    }
    h[2] = (int32_t)cfg.max_seq_len;
    h[3] = (int32_t)cfg.vocab_size;
    h[4] = (int32_t)cfg.num_layers;
    h[5] = (int32_t)cfg.num_heads;
    h[6] = (int32_t)cfg.channels;
    h[7] = (int32_t)cfg.padded_vocab_size;
    size_t n = ParamLayout(cfg).total;
    write_atomically(path, [&](FILE* f) {
        write_exact(f, h, sizeof h, path);
        if (!bf16) {
            write_exact(f, params, n * sizeof(float), path);
        } else {
            std::vector<uint16_t> raw(n);
            for (size_t i = 0; i < n; i++) raw[i] = float_to_bf16(params[i]);
            write_exact(f, raw.data(), n * sizeof(uint16_t), path);
        }
    });
}

}  // namespace llmc
