// generate: load a model file and continue a prompt (CPU backend).
//
//   ./generate -e runs/quickstart/model.bin -p "The jury said" -n 64 --temperature 0.8 --top-k 40 --seed 1
//
// The prompt is encoded with GPT-2's tokenizer (data/gpt2: encoder.json + vocab.bpe) and prefixed with
// <|endoftext|>, as the training documents are; a model with V = 256 (prepare_data --bytes) uses the byte-level
// vocabulary instead (one token per byte, EOT = byte 0). Output is UTF-8-safe (llmc/utf8_stream.h). Each new token
// costs one forward pass over the last maxT tokens (no KV cache: simple, and fast enough for the small models this
// runs on the CPU).
#include <cxxopts.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/cpu/thread_policy.h"
#include "llmc/cli_errors.h"
#include "llmc/error.h"
#include "llmc/layout.h"
#include "llmc/model.h"
#include "llmc/models.h"
#include "llmc/model_file.h"
#include "llmc/sampler.h"
#include "llmc/tokenizer.h"
#include "llmc/utf8_stream.h"

// Writes to stdout and flushes; fails on a short write or a failed flush (a full disk, a closed pipe), so the
// program never exits 0 after losing its output.
static void emit(const std::string& bytes) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
        llmc::fail("stdout: write failed (%s)", std::strerror(errno));
}

// nanoGPT's sample.py names for these flags, for the hint of an unknown option.
static const llmc::FlagHints SAMPLE_PY_NAMES = {
    {"start", "-p/--prompt"}, {"max_new_tokens", "-n/--tokens"}, {"init_from", "-e/--model"},
    {"out_dir", "-e/--model (the model file itself)"}, {"temp", "--temperature"}, {"k", "--top-k"},
};

int main(int argc, char** argv) {
    llmc::use_passive_openmp_wait(argv);  // before OpenMP starts: idle threads sleep (llmc/cpu/thread_policy.h)
    try {
        std::string model_path, prompt, vocab = "data/gpt2";
        int tokens = 64, top_k = 40, threads = 0;
        float temperature = 0.8f;
        uint64_t seed = 1337;
        cxxopts::Options opts("generate", "Continue a prompt with a trained GPT-2 (llm.c model file, fp32 or bf16).");
        opts.add_options()
            ("e,model", "model file", cxxopts::value(model_path))
            ("p,prompt", "prompt text (empty: start from <|endoftext|> alone)", cxxopts::value(prompt))
            ("n,tokens", "tokens to generate", cxxopts::value(tokens)->default_value("64"))
            ("temperature", "softmax temperature (0: greedy)", cxxopts::value(temperature)->default_value("0.8"))
            ("top-k", "sample among the k most likely tokens (0: all)", cxxopts::value(top_k)->default_value("40"))
            ("seed", "sampling seed", cxxopts::value(seed)->default_value("1337"))
            ("vocab", "directory with encoder.json and vocab.bpe", cxxopts::value(vocab)->default_value("data/gpt2"))
            ("threads", "CPU threads (0: one for a model under 1 GFLOP per forward pass, such as the quickstart's; "
                        "else one per core)", cxxopts::value(threads)->default_value("0"))
            ("h,help", "print this help");
        cxxopts::ParseResult r;
        try {
            r = opts.parse(argc, argv);
        } catch (const cxxopts::exceptions::exception& e) {
            llmc::fail("%s", llmc::option_error_message(argc, argv, e, SAMPLE_PY_NAMES).c_str());
        }
        if (r.count("help")) {
            std::printf("%s\n", opts.help().c_str());
            return 0;
        }
        // A word the options did not take (an unquoted prompt's second word) would be dropped silently.
        if (!r.unmatched().empty())
            llmc::fail("unexpected argument '%s' (a prompt of several words goes in quotes: -p \"The jury said\")",
                       r.unmatched()[0].c_str());
        if (model_path.empty()) llmc::fail("-e MODEL is required (a model file written by the trainer)");
        if (tokens < 1) llmc::fail("-n %d: must be >= 1", tokens);
        if (!(temperature >= 0.0f)) llmc::fail("--temperature %g: must be >= 0", temperature);
        if (threads < 0 || threads > 4096) llmc::fail("--threads %d: must be in [0, 4096]", threads);

        llmc::ModelFile mf = llmc::read_model_file(model_path);
        const bool byte_level = mf.config.vocab_size == llmc::BYTE_VOCAB_SIZE;
        llmc::Tokenizer tok = byte_level ? llmc::Tokenizer::bytes() : llmc::Tokenizer::from_gpt2_dir(vocab);
        // Checked before anything is printed: the prompt starts with <|endoftext|> (id 50256) and every id the
        // model samples is decoded, so the model's vocabulary must be GPT-2's.
        if (mf.config.vocab_size != tok.vocab_size())
            llmc::fail("%s: the model's vocabulary has %zu tokens, GPT-2's tokenizer %zu (its <|endoftext|> is id %d): "
                       "generate needs a model trained with GPT-2's vocabulary (V=%zu)",
                       model_path.c_str(), mf.config.vocab_size, tok.vocab_size(), tok.eot(), tok.vocab_size());
        std::vector<int> ids = {tok.eot()};
        for (int id : byte_level ? llmc::encode_bytes(prompt) : tok.encode(prompt)) ids.push_back(id);

        llmc::BackendOptions bo;  // a small model's default is one thread (llmc/cpu/thread_policy.h)
        const double flops_per_forward = 2.0 * (double)llmc::ParamLayout(mf.config).total * (double)mf.config.max_seq_len;
        bo.num_threads = threads > 0 ? threads : llmc::generation_threads(flops_per_forward);
        llmc::CpuBackend be(bo);
        const size_t T = mf.config.max_seq_len;
        std::unique_ptr<llmc::Model<llmc::CpuBackend>> created = llmc::create_model(be, mf.config, 1, T);
        llmc::Model<llmc::CpuBackend>& model = *created;
        model.set_params(mf.params);
        llmc::SplitMix64 rng(seed);
        llmc::Utf8Stream text;
        emit(text.push(prompt));
        for (int i = 0; i < tokens; i++) {
            size_t start = ids.size() > T ? ids.size() - T : 0, len = ids.size() - start;
            model.forward(ids.data() + start, nullptr, 1, len, 0.0f);
            std::vector<float> row = model.get_logits_row(0, len - 1);
            int next = llmc::sample_token(row.data(), mf.config.vocab_size, temperature, top_k, rng);
            if (next == tok.eot()) break;
            ids.push_back(next);
            emit(text.push(tok.decode(&next, 1)));
        }
        emit(text.finish() + "\n");
        if (std::fclose(stdout) != 0) llmc::fail("stdout: close failed (%s)", std::strerror(errno));
        return 0;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
