// The ranks' agreement on the run (see run_identity.h).
#include "run_identity.h"

#include <cstring>

#include "checkpoint.h"
#include "cli.h"
#include "crc32c.h"
#include "error.h"
#include "preemption.h"

namespace llmc {

namespace {

constexpr size_t TEXT_WORDS = 8;  // a CRC-32C of the whole text, then its first 56 bytes

std::string show_text(const uint64_t* w) {
    char buf[(TEXT_WORDS - 1) * 8 + 1] = {};
    std::memcpy(buf, w + 1, sizeof buf - 1);
    const std::string s(buf);
    char crc[24];
    std::snprintf(crc, sizeof crc, "%08x", (unsigned)w[0]);
    return "'" + s + (s.size() == sizeof buf - 1 ? "...' (crc32c " + std::string(crc) + ")" : "'");
}

// The words' count and a digest of the items' names: the same on every rank that runs this build.
uint64_t layout_digest(const RunIdentity& id) {
    uint32_t names = 0;
    size_t words = 0;
    for (const IdentityItem& it : id.items()) {
        names = crc32c(names, it.name.c_str(), it.name.size() + 1);
        words += it.words.size();
    }
    return (uint64_t)words << 32 | names;
}

}  // namespace

void RunIdentity::add_int(const std::string& name, long long v) {
    items_.push_back({name, {(uint64_t)v}, [](const uint64_t* w) { return std::to_string((long long)w[0]); }});
}

void RunIdentity::add_float(const std::string& name, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    items_.push_back({name, {bits}, [](const uint64_t* w) {
                          const uint32_t b = (uint32_t)w[0];
                          float f;
                          std::memcpy(&f, &b, sizeof f);
                          char buf[32];
                          std::snprintf(buf, sizeof buf, "%.9g", f);
                          return std::string(buf);
                      }});
}

void RunIdentity::add_text(const std::string& name, const std::string& s) {
    std::vector<uint64_t> w(TEXT_WORDS, 0);
    w[0] = crc32c(0, s.data(), s.size());
    std::memcpy(&w[1], s.data(), std::min(s.size(), (TEXT_WORDS - 1) * 8));
    items_.push_back({name, w, show_text});
}

void RunIdentity::add_model(const ModelConfig& c, bool from_file, uint32_t file_crc) {
    std::vector<uint64_t> w = {c.max_seq_len, c.vocab_size, c.padded_vocab_size, c.num_layers,
                               c.num_heads,   c.channels,   from_file ? 1u : 0u, file_crc};
    items_.push_back({"-e (the model)", w, [](const uint64_t* w) {
                          ModelConfig c;
                          c.max_seq_len = w[0], c.vocab_size = w[1], c.padded_vocab_size = w[2];
                          c.num_layers = w[3], c.num_heads = w[4], c.channels = w[5];
                          char crc[64];
                          std::snprintf(crc, sizeof crc, "a model file, crc32c %08x", (unsigned)w[7]);
                          return c.describe() + " (" + (w[6] ? crc : "a fresh GPT-2 initialisation") + ")";
                      }});
}

void RunIdentity::add_data(const std::string& name, const DataSummary& s) {
    items_.push_back({name, {s.shards, s.tokens, s.digest}, [](const uint64_t* w) {
                          DataSummary d;
                          d.shards = w[0], d.tokens = w[1], d.digest = (uint32_t)w[2];
                          return describe(d);
                      }});
}

void RunIdentity::add_checkpoints(const std::string& out_dir) {
    uint64_t count = 0, newest = 0;
    uint32_t digest = 0;
    for (int step : list_checkpoint_steps(out_dir)) {
        const std::string meta = checkpoint_dir(out_dir, step) + "/meta.json";
        uint64_t bytes = 0;
        const uint32_t crc = checkpoint_complete(checkpoint_dir(out_dir, step)) ? crc32c_file(meta, &bytes) : 0;
        const uint64_t rec[3] = {(uint64_t)step, bytes, crc};
        digest = crc32c(digest, rec, sizeof rec);
        count++, newest = (uint64_t)step;
    }
    items_.push_back({"the checkpoints in -o", {count, newest, digest}, [](const uint64_t* w) {
                          char buf[96];
                          std::snprintf(buf, sizeof buf, "%llu checkpoint(s), the newest of step %llu, digest %08x",
                                        (unsigned long long)w[0], (unsigned long long)w[1], (unsigned)w[2]);
                          return std::string(buf);
                      }});
}

RunIdentity identity_of(const TrainOptions& o, const ResolvedRun& r) {
    RunIdentity id;
    id.add_text("the backend", r.backend);
    id.add_model(r.config, r.model_from_file, r.model_from_file ? crc32c_file(o.model, nullptr) : 0);
    id.add_int("-t", o.seq_len);
    id.add_int("-b", o.batch_size);
    id.add_int("-d (tokens per step)", r.total_batch);
    id.add_data("-i (the training data)", r.train);
    id.add_data("-j (the validation data)", r.val);
    id.add_int("-x (steps)", r.max_steps);
    id.add_float("-l", o.learning_rate);
    id.add_text("-k", o.lr_schedule);
    id.add_int("-u", o.warmup_steps);
    id.add_float("-q", o.final_lr_fraction);
    id.add_float("-c", o.weight_decay);
    id.add_float("--beta1", o.beta1);
    id.add_float("--beta2", o.beta2);
    id.add_float("--eps", o.eps);
    id.add_float("--grad-clip", o.grad_clip);
    id.add_int("--seed", (long long)o.seed);
    id.add_int("--shuffle", o.shuffle);
    id.add_int("-a", o.overfit_single_batch);
    id.add_int("-z (ZeRO stage)", r.zero_stage);
    id.add_text("--shard-group", o.shard_group);
    id.add_text("--reduce-dtype", o.reduce_dtype);  // mixed wire types: a model neither run's (NCCL: undefined)
    id.add_int("--classifier-chunk", o.classifier_chunk);
    id.add_int("--gemm-tuning", o.gemm_tuning);
    id.add_int("--bias-grad-epilogue", o.bias_grad_epilogue);
    id.add_int("--sync-every", o.sync_every);
    id.add_float("--outer-lr", o.outer_lr);
    id.add_float("--outer-momentum", o.outer_momentum);
    id.add_int("-r", o.recompute);
    id.add_float("-sl", o.skip_loss_z);
    id.add_float("-sg", o.skip_grad_z);
    id.add_int("--max-bad-steps", o.max_bad_steps);
    id.add_int("-v", o.val_every);
    id.add_int("-m", o.val_batches);
    id.add_text("--hellaswag", o.hellaswag);
    id.add_int("-n", o.checkpoint_every);
    id.add_int("-nk", o.keep_last);
    id.add_int("-nm", o.keep_every);
    // A signal that saves on one rank must save on all: with USR1 on one and none on another, the signal that
    // reaches every rank (sbatch --signal) would kill the second one (no checkpoint).
    const int extra_signal = parse_preempt_signal(o.preempt_signal);
    id.add_text("--preempt-signal", extra_signal ? signal_name(extra_signal) : "none");
    id.add_float("--preempt-grace", (float)o.preempt_grace);
    id.add_int("-y", o.resume);
    id.add_int("--start-over", o.start_over);
    id.add_text("-o", o.output_dir);
    return id;
}

void agree_on_identity(const RunIdentity& mine, int world, const GatherU64& gather) {
    const uint64_t layout = layout_digest(mine);
    const std::vector<uint64_t> layouts = gather({layout});
    for (int r = 1; r < world; r++)
        if (layouts[(size_t)r] != layouts[0])
            fail("the ranks run different builds of the program: rank 0 and rank %d describe their runs differently "
                 "(%016llx vs %016llx); start every rank with the same program", r, (unsigned long long)layouts[0],
                 (unsigned long long)layouts[(size_t)r]);
    std::vector<uint64_t> words;
    for (const IdentityItem& it : mine.items()) words.insert(words.end(), it.words.begin(), it.words.end());
    const std::vector<uint64_t> all = gather(words);
    const size_t row = words.size();
    size_t at = 0;
    for (const IdentityItem& it : mine.items()) {
        const uint64_t* first = &all[at];
        std::string differ;  // the ranks whose words differ from rank 0's
        int example = -1;
        for (int r = 1; r < world; r++)
            if (std::memcmp(&all[(size_t)r * row + at], first, it.words.size() * sizeof(uint64_t)) != 0) {
                differ += (differ.empty() ? "" : ", ") + std::to_string(r);
                if (example < 0) example = r;
            }
        if (example >= 0)
            fail("the ranks disagree on %s: rank 0 has %s, rank %d has %s (rank(s) differing from rank 0: %s); every "
                 "rank must be started with the same model, flags, data and -o", it.name.c_str(),
                 it.show(first).c_str(), example, it.show(&all[(size_t)example * row + at]).c_str(), differ.c_str());
        at += it.words.size();
    }
}

}  // namespace llmc
