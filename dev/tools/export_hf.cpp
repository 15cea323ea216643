// Export a model file (llm.c format, fp32 or bf16; e.g. runs/d12/model.bin or a checkpoint's model.bin) to a
// HuggingFace GPT2LMHeadModel directory: model.safetensors + config.json (llmc/export_hf.h has the name mapping).
//
//   ./export_hf runs/d12/model.bin runs/d12/hf
//   python: GPT2LMHeadModel.from_pretrained("runs/d12/hf")   (tokenizer: the standard "gpt2" one)
#include <cstdio>
#include <cstring>

#include "llmc/error.h"
#include "llmc/export_hf.h"
#include "llmc/model_file.h"

int main(int argc, char** argv) {
    if (argc == 2 && (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help"))) {
        std::printf("usage: export_hf MODEL.bin OUT_DIR\n"
                    "Writes OUT_DIR/model.safetensors and OUT_DIR/config.json for HuggingFace GPT2LMHeadModel.\n");
        return 0;
    }
    if (argc != 3) {
        std::fprintf(stderr, "error: usage: export_hf MODEL.bin OUT_DIR (see --help)\n");
        return 1;
    }
    try {
        llmc::ModelFile m = llmc::read_model_file(argv[1]);
        llmc::export_hf(m.config, m.params, argv[2]);
        std::printf("wrote %s/model.safetensors and %s/config.json (%s)\n", argv[2], argv[2],
                    m.config.describe().c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
