// Command-line parsing for the trainer (see cli.h).
#include "cli.h"

#include <cxxopts.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "cli_errors.h"
#include "dp_mesh.h"
#include "error.h"
#include "preemption.h"
#include "schedule.h"

namespace llmc {

namespace {
// llm.c's two-letter flags and their long names here.
const std::map<std::string, std::string> TWO_LETTER = {
    {"-nk", "--keep-last"},     {"-nm", "--keep-every"},    {"-sl", "--skip-loss-z"}, {"-sg", "--skip-grad-z"},
    {"-pi", "--init-method"},   {"-pn", "--num-processes"}, {"-pr", "--process-rank"}, {"-pg", "--gpus-per-node"},
    {"-pf", "--rendezvous-dir"}, {"-ps", "--server-ip"},
};
// Default values as text: %g for floats, so 1e-8 is not printed (and re-parsed) as 0.000000.
std::string default_text(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    return buf;
}
std::string default_text(float x) { return default_text((double)x); }
std::string default_text(const std::string& x) { return x; }
template <class I>
std::string default_text(I x) {
    return std::to_string(x);
}
// Other trainers' names for this trainer's flags (nanoGPT's train.py, llm.c's train_gpt2.py), for the hint of an
// unknown option.
const FlagHints FOREIGN_NAMES = {
    {"lr", "-l/--learning-rate"},          {"learning_rate", "-l/--learning-rate"},
    {"max_iters", "-x/--max-steps"},       {"num_iterations", "-x/--max-steps"},  {"steps", "-x/--max-steps"},
    {"batch_size", "-b/--batch-size"},     {"block_size", "-t/--seq-len"},        {"sequence_length", "-t/--seq-len"},
    {"total_batch_size", "-d/--total-batch (tokens per step)"},
    {"gradient_accumulation_steps", "-d/--total-batch (tokens per step; the micro-steps follow from it)"},
    {"warmup_iters", "-u/--warmup"},       {"warmup_steps", "-u/--warmup"},       {"weight_decay", "-c/--weight-decay"},
    {"min_lr", "-q/--final-lr-frac (a fraction of -l)"},                     {"decay_lr", "-k/--lr-schedule"},
    {"out_dir", "-o/--output-dir"},        {"input_bin", "-i/--train-data"},      {"input_val_bin", "-j/--val-data"},
    {"init_from", "-e/--model"},           {"eval_interval", "-v/--val-every"},   {"val_loss_every", "-v/--val-every"},
    {"eval_iters", "-m/--val-batches"},    {"val_max_steps", "-m/--val-batches"}, {"zero_stage", "-z/--zero-stage"},
};
}  // namespace

std::vector<std::string> normalize_args(int argc, char** argv) {
    std::vector<std::string> out;
    for (int i = 0; i < argc; i++) {
        auto it = TWO_LETTER.find(argv[i]);
        out.push_back(i > 0 && it != TWO_LETTER.end() ? it->second : std::string(argv[i]));
    }
    return out;
}

namespace {
std::string program_name(const char* argv0) {
    const std::string a = argv0 ? argv0 : "train_gpt2";
    const size_t slash = a.find_last_of('/');
    return slash == std::string::npos ? a : a.substr(slash + 1);
}

// The usage with examples for this build: the CPU build's start is the quickstart's byte-level model, the GPU's a
// GPT-2 on the Brown corpus' GPT-2 tokens.
std::string no_flags_text(const std::string& prog, bool cpu) {
    const std::string head =
        "usage: ./" + prog + " -i TRAIN_SHARDS -j VAL_SHARDS -e MODEL [-o OUT_DIR] [flags]   (--help lists them all)\n"
        "\n"
        "No flags: nothing was started. The defaults would train GPT-2 124M (-e d12) at T=1024 on\n"
        "data/brown/brown_train_*.bin, " +
        std::string(cpu ? "hours per step on a CPU" : "which needs a dataset and a run's settings") + ". To start:\n"
        "  scripts/quickstart.sh      build, fetch the Brown corpus, train a small model, print a sample\n";
    if (cpu)
        return head + "  ./" + prog + " -i \"data/brown_bytes/*train*.bin\" -j \"data/brown_bytes/*val*.bin\" \\\n"
                      "      --tokenizer data/brown_bytes/brown_bytes_tokenizer.bin -e \"L=4,NH=4,C=128,T=64,V=256\" \\\n"
                      "      -b 32 -t 64 -x 800 -l 4e-3 --beta2 0.99 -u 100 -o runs/bytes     the quickstart's byte-level "
                      "model\n      (its data: scripts/quickstart.sh once)\n";
    return head + "  dev/data/prepare_brown.sh  the Brown corpus in GPT-2 tokens: data/brown/\n"
                  "  ./" + prog + " -i \"data/brown/brown_train_*.bin\" -j \"data/brown/brown_val_*.bin\" \\\n"
                  "      -e d6 -b 32 -t 256 -x 600 -l 1e-3 -u 50 -o runs/d6     a 6-layer GPT-2 (README.md)\n";
}

// --sync-every, --outer-lr, --outer-momentum (llmc/outer_sync.h): refused when the outer step is undefined.
void validate_sync_options(const TrainOptions& o) {
    if (o.sync_every < 0) fail("--sync-every %d: must be >= 0 (0: off)", o.sync_every);
    if (!(o.outer_lr > 0.0f && o.outer_lr <= 16.0f)) fail("--outer-lr %g: must be in (0, 16]", o.outer_lr);
    if (!(o.outer_momentum >= 0.0f && o.outer_momentum < 1.0f))
        fail("--outer-momentum %g: must be in [0, 1)", o.outer_momentum);
    // Alone, --sync-every makes every rank a replica with its whole optimizer state: ZeRO-2 has nothing to shard,
    // and its bucket buffers cost more memory than -z 1 (about 200 MiB more per rank at 124M: --dry-run).
    if (o.sync_every > 0 && o.zero_stage == 2 && o.shard_group.empty())
        fail("-z 2 with --sync-every %d and no --shard-group: every rank trains its own replica, so ZeRO-2 shards "
             "nothing and only adds buffers; use -z 1, or --shard-group N to shard each replica over N ranks",
             o.sync_every);
    // With --shard-group the replicas are sharding groups (docs/distributed.md, "Periodic synchronisation"): their
    // gradients are reduced within the group only, where a bf16 wire saves nothing worth its rounding.
    if (o.sync_every > 0 && o.reduce_dtype != "fp32")
        fail("--reduce-dtype %s with --sync-every %d: gradients are not reduced across replicas then (each rank, or "
             "with --shard-group each sharding group, trains its own replica); the outer step averages fp32 "
             "parameters", o.reduce_dtype.c_str(), o.sync_every);
}
// --recipe: its name checked, and the speedrun's optimisation defaults for every such flag the command line leaves
// unset (the published records': docs/speedrun.md). The speedrun's own flags are refused with the GPT-2 recipe.
void apply_recipe_defaults(TrainOptions& o, const cxxopts::ParseResult& r) {
    if (o.recipe != "gpt2" && o.recipe != "speedrun")
        fail("--recipe '%s': expected gpt2 or speedrun", o.recipe.c_str());
    if (o.recipe == "gpt2") {
        for (const char* flag : {"embed-lr", "head-lr", "scalar-lr", "muon-momentum-warmup", "logit-softcap",
                                 "value-residual", "embed-skip"})
            if (r.count(flag)) fail("--%s belongs to --recipe speedrun (this run's recipe is gpt2)", flag);
        return;
    }
    if (!r.count("learning-rate")) o.learning_rate = 0.02f;
    if (!r.count("lr-schedule")) o.lr_schedule = "wsd";
    if (!r.count("warmup")) o.warmup_steps = 0;
    if (!r.count("final-lr-frac")) o.final_lr_fraction = 0.0f;
    if (!r.count("decay-fraction")) o.decay_fraction = 0.286f;
    if (!r.count("grad-clip")) o.grad_clip = 0.0f;
    if (o.weight_decay != 0.0f) fail("-c %g with --recipe speedrun: its optimizers use no weight decay", o.weight_decay);
    if (o.sync_every > 0)
        fail("--sync-every with --recipe speedrun: each replica would keep its own Muon momentum, and the outer step "
             "(llmc/outer_sync.h) is written for AdamW replicas; the speedrun reduces gradients every step (any -z, "
             "--shard-group)");
    if (!(o.embed_lr >= 0.0f) || !(o.head_lr >= 0.0f) || !(o.scalar_lr >= 0.0f))
        fail("--embed-lr %g / --head-lr %g / --scalar-lr %g: learning rates must be >= 0", o.embed_lr, o.head_lr,
             o.scalar_lr);
    if (o.muon_momentum_warmup < 0) fail("--muon-momentum-warmup %d: must be >= 0", o.muon_momentum_warmup);
    if (o.logit_softcap != 0 && o.logit_softcap != 1) fail("--logit-softcap %d: must be 0 or 1", o.logit_softcap);
    if (o.value_residual != 0 && o.value_residual != 1) fail("--value-residual %d: must be 0 or 1", o.value_residual);
    if (o.embed_skip != 0 && o.embed_skip != 1) fail("--embed-skip %d: must be 0 or 1", o.embed_skip);
}
}  // namespace

TrainOptions parse_train_options(int argc, char** argv, const char* backend) {
    TrainOptions o;
    const std::string prog = program_name(argc > 0 ? argv[0] : nullptr);
    if (argc == 1) {  // llm.c starts training with its defaults here; on a CPU that is hours of silence
        std::fprintf(stderr, "%s", no_flags_text(prog, std::string(backend) == "cpu").c_str());
        std::exit(2);  // a usage error: nothing ran
    }
    cxxopts::Options opts(prog, "Train GPT-2 (llm.c-compatible flags; every short flag has a long name).");
    auto v = [](auto& x) {  // x's value as the default; an empty string is not shown as (default: "")
        std::shared_ptr<cxxopts::Value> val = cxxopts::value(x);
        const std::string shown = default_text(x);
        if (!shown.empty()) val->default_value(shown);
        return val;
    };
    opts.add_options("data and model")
        ("i,train-data", "training shards (glob)", v(o.train_data))
        ("j,val-data", "validation shards (glob)", v(o.val_data))
        ("e,model", "model file (.bin) or descriptor: d12 d24 d36 d48, dN, or L=6,NH=6,C=384[,T=..][,V=..]", v(o.model))
        ("o,output-dir", "where metrics.jsonl, checkpoints and the final model go", v(o.output_dir))
        ("tokenizer", "llm.c decode table used to print samples", v(o.tokenizer));
    opts.add_options("batch")
        ("b,batch-size", "sequences per rank per micro-step (B)", v(o.batch_size))
        ("t,seq-len", "sequence length (T)", v(o.seq_len))
        ("d,total-batch", "tokens per optimizer step; -1: B*T*ranks", v(o.total_batch))
        ("x,max-steps", "optimizer steps; -1: one epoch", v(o.max_steps));
    opts.add_options("recipe")
        ("recipe", "gpt2: llm.c's GPT-2 and AdamW; speedrun: the NanoGPT speedrun's model (RMSNorm, QK-norm, rotary, "
                   "ReLU², untied zero-initialised head) with Muon on the block matrices and Adam on the rest; its "
                   "defaults: -l 0.02 (Muon) -k wsd -u 0 -q 0 --decay-fraction 0.286 --grad-clip 0 (docs/speedrun.md)",
         v(o.recipe))
        ("embed-lr", "speedrun: Adam's learning rate on the embedding (follows -k's schedule)", v(o.embed_lr))
        ("head-lr", "speedrun: Adam's learning rate on the head", v(o.head_lr))
        ("muon-momentum-warmup", "speedrun: Muon's momentum rises from 0.85 to 0.95 over this many steps (0: 0.95 "
                                 "from the start)", v(o.muon_momentum_warmup))
        ("scalar-lr", "speedrun: Adam's learning rate on the scalars of --value-residual and --embed-skip",
         v(o.scalar_lr))
        ("logit-softcap", "speedrun: 1 = logits capped as 30 tanh(z / 30) before the softmax (part of a new model's "
                          "architecture; a model file keeps its own)", v(o.logit_softcap))
        ("value-residual", "speedrun: 1 = each layer's attention values mixed with the first layer's, v = (1 - lam) v "
                           "+ lam v1, lam learnt per layer (a new model's architecture)", v(o.value_residual))
        ("embed-skip", "speedrun: 1 = each layer's input is l0 x + l1 x0, x0 the normalised embedding, l0 and l1 "
                       "learnt per layer (a new model's architecture)", v(o.embed_skip));
    opts.add_options("optimisation")
        ("l,learning-rate", "peak learning rate (speedrun: Muon's)", v(o.learning_rate))
        ("u,warmup", "linear warmup steps", v(o.warmup_steps))
        ("q,final-lr-frac", "final learning rate as a fraction of the peak", v(o.final_lr_fraction))
        ("k,lr-schedule", "cosine, linear, constant or wsd", v(o.lr_schedule))
        ("decay-fraction", "-k wsd: the share of the steps after warmup spent decaying to -q", v(o.decay_fraction))
        ("c,weight-decay", "AdamW weight decay (2-D weights only)", v(o.weight_decay))
        ("beta1", "AdamW beta1", v(o.beta1))
        ("beta2", "AdamW beta2", v(o.beta2))
        ("eps", "AdamW epsilon", v(o.eps))
        ("grad-clip", "clip the global gradient norm to this (0: off)", v(o.grad_clip))
        ("seed", "seed of initialisation, shuffling and sampling", v(o.seed))
        ("shuffle", "shuffle the training data each epoch (0/1)", cxxopts::value<int>()->default_value("1"));
    opts.add_options("evaluation and output")
        ("v,val-every", "validate every N steps (0: off)", v(o.val_every))
        ("m,val-batches", "validation batches of -d tokens (-1: every sequence, a partial last batch included)", v(o.val_batches))
        ("s,sample-every", "print a sample every N steps (0: off)", v(o.sample_every))
        ("g,gen-tokens", "tokens per sample", v(o.gen_tokens))
        ("log-every", "print a step line every N steps", v(o.log_every))
        ("hellaswag", "HellaSwag eval file (llm.c format)", v(o.hellaswag));
    opts.add_options("checkpoints and memory")
        ("n,checkpoint-every", "write a checkpoint every N steps (0: off)", v(o.checkpoint_every))
        ("keep-last", "-nk: keep the last N checkpoints (0: all)", v(o.keep_last))
        ("keep-every", "-nm: also keep every checkpoint whose step is a multiple of M", v(o.keep_every))
        ("y,resume", "1: resume from the latest checkpoint in -o", v(o.resume))
        ("start-over", "start afresh in an -o that holds an earlier run: its files are moved into -o/previous_<time>/",
         cxxopts::value(o.start_over))
        ("z,zero-stage", "ZeRO stage 0, 1 or 2 (-1: 1 with several ranks)", v(o.zero_stage))
        ("r,recompute", "1: recompute GELU in backward; 2: GELU and the layernorms", v(o.recompute))
        ("gemm-tuning", "1: time cuBLASLt's candidate algorithms per GEMM shape on first use; 0: the heuristic's first",
         v(o.gemm_tuning))
        ("bias-grad-epilogue", "1: bias gradients from the weight-gradient GEMM's BGRADB epilogue; 0: a separate "
         "column-sum pass (docs/cuda.md, \"Fused epilogues\")", v(o.bias_grad_epilogue))
        ("classifier-chunk", "rows per classifier chunk: the logits buffer holds this many rows of Vp (at least T)",
         v(o.classifier_chunk))
        ("w,master-weights", "fp32 master weights: always kept here (accepted for llm.c's scripts)", v(o.master_weights))
        ("a,overfit", "1: train on the first batch only", v(o.overfit_single_batch))
        ("skip-loss-z", "-sl: skip steps whose loss z-score exceeds this (0: off)", v(o.skip_loss_z))
        ("skip-grad-z", "-sg: skip steps whose grad-norm z-score exceeds this (0: off)", v(o.skip_grad_z))
        ("max-bad-steps", "stop after this many steps in a row with a non-finite loss or grad norm", v(o.max_bad_steps))
        ("dry-run", "print the device memory plan per rank (-pn ranks, -z stage) and exit: no data, no allocation",
         cxxopts::value(o.dry_run));
    opts.add_options("distributed")
        ("init-method", "-pi: auto, mpi or fs", v(o.init_method))
        ("reduce-dtype", "the type gradients are reduced in across ranks: fp32 or bf16 (half the bytes; "
                         "accumulation stays fp32)", v(o.reduce_dtype))
        ("sync-every", "H > 0: no gradient reduction across replicas; every rank (with --shard-group: every "
                       "sharding group) trains its own replica and every H steps an outer Nesterov step averages "
                       "them (0: off)", v(o.sync_every))
        ("outer-lr", "--sync-every's outer learning rate", v(o.outer_lr))
        ("outer-momentum", "--sync-every's outer Nesterov momentum, in [0, 1)", v(o.outer_momentum))
        ("shard-group", "hybrid sharding: ZeRO within groups of N ranks (or node: the ranks of one node), gradient "
                        "shards all-reduced across the groups (with --sync-every: each group is a replica) "
                        "(default: one group of every rank)", v(o.shard_group))
        ("num-processes", "-pn: world size override", v(o.num_processes))
        ("process-rank", "-pr: rank override", v(o.process_rank))
        ("gpus-per-node", "-pg: GPUs per node override", v(o.gpus_per_node))
        ("rendezvous-dir", "-pf: shared directory for -pi fs", v(o.rendezvous_dir))
        ("server-ip", "-ps: accepted for llm.c compatibility (unused)", v(o.server_ip))
        ("comm-timeout", "seconds a collective may wait for a peer before every rank stops, naming the stuck rank "
                         "(0: off; default $LLMC_COMM_TIMEOUT, else 300)", cxxopts::value<std::string>())
        ("threads", "CPU threads (0: one per core; idle threads sleep, llmc/cpu/thread_policy.h)", v(o.threads))
        ("show-placement", "every rank prints its node, local rank, GPU, data slice and ZeRO shard",
         cxxopts::value(o.show_placement))
        ("preempt-signal", "besides SIGTERM and SIGINT, this signal finishes the step, saves a checkpoint and exits "
                           "75: USR1, USR2, HUP or none (for sbatch --signal)", v(o.preempt_signal))
        ("preempt-grace", "seconds the step may take after such a signal (at least 3x the slowest step so far) "
                          "before the process stops without saving it (0: no limit)", v(o.preempt_grace))
        ("h,help", "print this help");

    // llm.c's `-h 1` turns HellaSwag on; here -h is --help, so such a script would print the help and stop.
    for (int i = 1; i + 1 < argc; i++)
        if (std::string(argv[i]) == "-h" && (std::string(argv[i + 1]) == "0" || std::string(argv[i + 1]) == "1"))
            fail("-h %s: -h is --help here; HellaSwag evaluation takes the eval file: --hellaswag FILE", argv[i + 1]);
    std::vector<std::string> args = normalize_args(argc, argv);
    std::vector<char*> cargs;
    for (std::string& a : args) cargs.push_back(a.data());
    cxxopts::ParseResult r;
    try {
        r = opts.parse((int)cargs.size(), cargs.data());
        if (!r.unmatched().empty()) fail("unexpected argument '%s'", r.unmatched()[0].c_str());
    } catch (const cxxopts::exceptions::exception& e) {
        fail("%s", option_error_message(argc, argv, e, FOREIGN_NAMES).c_str());
    }
    if (r.count("help")) {
        std::printf("%s\n", opts.help({"data and model", "batch", "recipe", "optimisation", "evaluation and output",
                                         "checkpoints and memory", "distributed"})
                                 .c_str());
        std::exit(0);
    }
    o.shuffle = r["shuffle"].as<int>() != 0;
    apply_recipe_defaults(o, r);
    // --comm-timeout, else $LLMC_COMM_TIMEOUT, else the default; the message names where a bad value came from.
    const char* env_timeout = std::getenv("LLMC_COMM_TIMEOUT");
    if (r.count("comm-timeout") || env_timeout) {
        const std::string text = r.count("comm-timeout") ? r["comm-timeout"].as<std::string>() : env_timeout;
        char* end = nullptr;
        const double t = std::strtod(text.c_str(), &end);
        if (text.empty() || *end || !(t >= 0.0 && t <= 1e9))
            fail("%s '%s': expected seconds >= 0 (0 turns the watchdog off)",
                 r.count("comm-timeout") ? "--comm-timeout" : "LLMC_COMM_TIMEOUT", text.c_str());
        o.comm_timeout = t;
    }

    if (o.batch_size < 1) fail("-b %d: the batch size must be >= 1", o.batch_size);
    if (o.seq_len < 1) fail("-t %d: the sequence length must be >= 1", o.seq_len);
    if (o.total_batch == 0 || o.total_batch < -1) fail("-d %lld: must be positive (or -1)", o.total_batch);
    if (o.max_steps == 0 || o.max_steps < -1) fail("-x %d: must be positive (or -1 for one epoch)", o.max_steps);
    if (o.zero_stage < -1 || o.zero_stage > 2) fail("-z %d: ZeRO stage must be 0, 1 or 2", o.zero_stage);
    if (o.reduce_dtype != "fp32" && o.reduce_dtype != "bf16")
        fail("--reduce-dtype '%s': expected fp32 or bf16", o.reduce_dtype.c_str());
    validate_sync_options(o);
    check_shard_group_syntax(o.shard_group);
    if (o.val_every < 0) fail("-v %d: must be >= 0", o.val_every);
    if (o.val_batches == 0 || o.val_batches < -1) fail("-m %d: must be positive (or -1)", o.val_batches);
    if (o.sample_every < 0) fail("-s %d: must be >= 0", o.sample_every);
    if (o.gen_tokens < 1) fail("-g %d: must be >= 1", o.gen_tokens);
    if (o.log_every < 1) fail("--log-every %d: must be >= 1", o.log_every);
    if (o.checkpoint_every < 0 || o.keep_last < 0 || o.keep_every < 0)
        fail("-n/-nk/-nm: must be >= 0 (got %d/%d/%d)", o.checkpoint_every, o.keep_last, o.keep_every);
    if (o.resume != 0 && o.resume != 1) fail("-y %d: must be 0 or 1", o.resume);
    if (o.max_bad_steps < 1) fail("--max-bad-steps %d: must be >= 1", o.max_bad_steps);
    if (!(o.skip_loss_z >= 0.0f) || !(o.skip_grad_z >= 0.0f))
        fail("-sl/-sg %g/%g: z-score thresholds must be >= 0 (0: off)", o.skip_loss_z, o.skip_grad_z);
    if (o.resume && o.output_dir.empty()) fail("-y 1 needs -o (the directory holding the checkpoints)");
    if (o.start_over && o.resume)
        fail("--start-over and -y 1 exclude each other: -y 1 continues the run in -o, --start-over starts a new one");
    if (o.start_over && o.output_dir.empty()) fail("--start-over needs -o (the directory to start over in)");
    parse_preempt_signal(o.preempt_signal);  // fails on a name it does not know
    if (!(o.preempt_grace >= 0 && o.preempt_grace <= 1e6))
        fail("--preempt-grace %g: expected seconds in [0, 1e6] (0: no limit)", o.preempt_grace);
    if (o.recompute < 0 || o.recompute > 2) fail("-r %d: must be 0, 1 or 2", o.recompute);
    if (o.gemm_tuning != 0 && o.gemm_tuning != 1) fail("--gemm-tuning %d: must be 0 or 1", o.gemm_tuning);
    if (o.bias_grad_epilogue != 0 && o.bias_grad_epilogue != 1)
        fail("--bias-grad-epilogue %d: must be 0 or 1", o.bias_grad_epilogue);
    if (o.classifier_chunk < 1) fail("--classifier-chunk %d: must be >= 1 (rows)", o.classifier_chunk);
    if (o.master_weights != 0 && o.master_weights != 1) fail("-w %d: must be 0 or 1", o.master_weights);
    if (o.overfit_single_batch != 0 && o.overfit_single_batch != 1) fail("-a %d: must be 0 or 1", o.overfit_single_batch);
    if (!(o.weight_decay >= 0.0f)) fail("-c %g: weight decay must be >= 0", o.weight_decay);
    if (!(o.beta1 >= 0.0f && o.beta1 < 1.0f)) fail("--beta1 %g: must be in [0, 1)", o.beta1);
    if (!(o.beta2 >= 0.0f && o.beta2 < 1.0f)) fail("--beta2 %g: must be in [0, 1)", o.beta2);
    if (!(o.eps > 0.0f)) fail("--eps %g: must be > 0", o.eps);
    if (!(o.grad_clip >= 0.0f)) fail("--grad-clip %g: must be >= 0", o.grad_clip);
    // OpenMP cannot start arbitrarily many threads (100000 crashes it); no machine this runs on has 4096 cores.
    if (o.threads < 0 || o.threads > 4096) fail("--threads %d: must be in [0, 4096]", o.threads);
    if (o.checkpoint_every > 0 && o.output_dir.empty())
        fail("-n %d: checkpoints are written into -o, which is not set", o.checkpoint_every);
    parse_schedule(o.lr_schedule);  // validates -k
    ScheduleConfig sc;
    sc.peak_lr = o.learning_rate, sc.warmup_steps = o.warmup_steps, sc.final_fraction = o.final_lr_fraction;
    sc.decay_fraction = o.decay_fraction;
    validate_schedule(sc);
    return o;
}

}  // namespace llmc
