// Import a Hugging Face GPT-2 checkpoint (config.json + model.safetensors: OpenAI's gpt2 ... gpt2-xl from the hub, or
// any GPT2LMHeadModel) into a model file in llm.c's format, ready for `-e` (fine-tuning) or ./generate.
//
//   dev/data/fetch_gpt2_weights.sh gpt2        (downloads into data/hf/gpt2 and runs this)
//   ./import_hf data/hf/gpt2 models/gpt2_124M.bin [--bf16] [--force]
// llmc/import_hf.h has the name mapping and what is refused.
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "llmc/file_util.h"
#include "llmc/error.h"
#include "llmc/import_hf.h"
#include "llmc/model_file.h"

static const char* USAGE =
    "usage: import_hf HF_DIR OUT.bin [--bf16] [--force]\n"
    "Reads HF_DIR/config.json and HF_DIR/model.safetensors (a Hugging Face GPT-2 checkpoint, F32/F16/BF16) and\n"
    "writes OUT.bin in llm.c's model format: fp32 (version 3) by default, bf16 (version 5) with --bf16.\n"
    "The parent directory of OUT.bin is created if missing. An existing OUT.bin is refused unless --force (it is\n"
    "then replaced atomically); the checkpoint's own files are refused always.\n";

// Refuses an output path that would replace something: any existing file (unless --force: a symlink is then
// replaced by the new file, its target untouched), a directory, or one of the files being read, whatever its name.
static void check_output(const std::string& out, const std::string& dir, bool force) {
    struct stat o;
    if (lstat(out.c_str(), &o) != 0) return;  // a new file
    if (S_ISDIR(o.st_mode)) llmc::fail("%s is a directory (expected the model file to write)", out.c_str());
    struct stat target;
    const bool resolved = stat(out.c_str(), &target) == 0;
    for (const char* name : {"config.json", "model.safetensors"}) {
        struct stat in;
        const std::string path = dir + "/" + name;
        if (resolved && stat(path.c_str(), &in) == 0 && in.st_dev == target.st_dev && in.st_ino == target.st_ino)
            llmc::fail("%s is %s, which import_hf reads: choose another output file", out.c_str(), path.c_str());
    }
    if (!force) llmc::fail("%s exists; import_hf does not overwrite a file unless --force", out.c_str());
}

int main(int argc, char** argv) {
    std::vector<std::string> args;
    bool bf16 = false, force = false;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::printf("%s", USAGE);
            return 0;
        }
        if (a == "--bf16") bf16 = true;
        else if (a == "--force") force = true;
        else args.push_back(a);
    }
    try {
        for (const std::string& a : args)
            if (a.size() > 1 && a[0] == '-') llmc::fail("unknown option '%s' (see --help)", a.c_str());
        if (args.size() != 2) llmc::fail("usage: import_hf HF_DIR OUT.bin [--bf16] [--force] (see --help)");
        const std::string& out = args[1];
        check_output(out, args[0], force);
        llmc::ImportedModel m = llmc::import_hf(args[0]);
        const size_t slash = out.find_last_of('/');
        if (slash != std::string::npos && slash > 0) llmc::make_dirs(out.substr(0, slash));
        llmc::write_model_file(out, m.config, m.params.data(), bf16);
        std::printf("wrote %s (%s, %s, %zu parameters)\n", out.c_str(), m.config.describe().c_str(),
                    bf16 ? "bf16" : "fp32", m.params.size());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
