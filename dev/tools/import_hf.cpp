// Import a Hugging Face GPT-2 checkpoint (config.json + model.safetensors: OpenAI's gpt2 ... gpt2-xl from the hub, or
// any GPT2LMHeadModel) into a model file in llm.c's format, ready for `-e` (fine-tuning) or ./generate.
//
//   dev/data/fetch_gpt2_weights.sh gpt2        (downloads into data/hf/gpt2 and runs this)
//   ./import_hf data/hf/gpt2 models/gpt2_124M.bin [--bf16]
// llmc/import_hf.h has the name mapping and what is refused.
#include <cstdio>
#include <cstring>
#include <string>

#include "llmc/file_util.h"
#include "llmc/error.h"
#include "llmc/import_hf.h"
#include "llmc/model_file.h"

static const char* USAGE =
    "usage: import_hf HF_DIR OUT.bin [--bf16]\n"
    "Reads HF_DIR/config.json and HF_DIR/model.safetensors (a Hugging Face GPT-2 checkpoint, F32/F16/BF16) and\n"
    "writes OUT.bin in llm.c's model format: fp32 (version 3) by default, bf16 (version 5) with --bf16.\n"
    "The parent directory of OUT.bin is created if missing.\n";

int main(int argc, char** argv) {
    if (argc == 2 && (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help"))) {
        std::printf("%s", USAGE);
        return 0;
    }
    const bool bf16 = argc == 4 && !std::strcmp(argv[3], "--bf16");
    if (argc != 3 && !bf16) {
        std::fprintf(stderr, "error: usage: import_hf HF_DIR OUT.bin [--bf16] (see --help)\n");
        return 1;
    }
    try {
        llmc::ImportedModel m = llmc::import_hf(argv[1]);
        const std::string out = argv[2];
        const size_t slash = out.find_last_of('/');
        if (slash != std::string::npos && slash > 0) llmc::make_dirs(out.substr(0, slash));
        llmc::write_model_file(argv[2], m.config, m.params.data(), bf16);
        std::printf("wrote %s (%s, %s, %zu parameters)\n", argv[2], m.config.describe().c_str(), bf16 ? "bf16" : "fp32",
                    m.params.size());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
