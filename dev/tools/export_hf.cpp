// Export a model file (llm.c format, fp32 or bf16; e.g. runs/d12/model.bin or a checkpoint's model.bin) to a
// HuggingFace GPT2LMHeadModel directory: model.safetensors + config.json (llmc/export_hf.h has the name mapping).
//
//   ./export_hf runs/d12/model.bin runs/d12/hf        (--force: replace an earlier export there)
//   python: GPT2LMHeadModel.from_pretrained("runs/d12/hf")   (tokenizer: the standard "gpt2" one)
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "llmc/error.h"
#include "llmc/export_hf.h"
#include "llmc/model_file.h"

int main(int argc, char** argv) {
    std::vector<std::string> args;
    bool force = false;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::printf("usage: export_hf [--force] MODEL.bin OUT_DIR\n"
                        "Writes OUT_DIR/model.safetensors and OUT_DIR/config.json for HuggingFace GPT2LMHeadModel.\n"
                        "Existing files there are refused unless --force (they are then replaced atomically).\n");
            return 0;
        }
        if (a == "--force") force = true;
        else args.push_back(a);
    }
    try {
        if (args.size() != 2) llmc::fail("usage: export_hf [--force] MODEL.bin OUT_DIR (see --help)");
        for (const std::string& a : args)
            if (a.size() > 1 && a[0] == '-') llmc::fail("unknown option '%s' (see --help)", a.c_str());
        const std::string& out = args[1];
        if (out == "-") llmc::fail("OUT_DIR '-': export_hf writes two files into a directory, not to stdout");
        for (const char* name : {"model.safetensors", "config.json"}) {
            struct stat st;
            const std::string path = out + "/" + name;
            if (!force && lstat(path.c_str(), &st) == 0)
                llmc::fail("%s exists; export_hf does not overwrite an earlier export unless --force", path.c_str());
        }
        llmc::ModelFile m = llmc::read_model_file(args[0]);
        llmc::export_hf(m.config, m.params, out);
        std::printf("wrote %s/model.safetensors and %s/config.json (%s)\n", out.c_str(), out.c_str(),
                    m.config.describe().c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
