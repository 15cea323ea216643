// Everything a run does before its first step (the step itself: llmc/trainer.h, docs/architecture.md): the shape of
// the run from the options (model, batch arithmetic, ZeRO stage), the data and the ranks' agreement on it, the model
// and its optimizer's settings, the HellaSwag and tokenizer checks, the start-up messages, and --dry-run's memory
// plan. What the output directory and a resume need is in llmc/trainer_resume.h.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "architectures.h"
#include "cli.h"
#include "comm.h"
#include "config.h"
#include "crc32c.h"
#include "data_check.h"
#include "data_parallel.h"
#include "gpt2_params.h"
#include "dataloader.h"
#include "dp_groups.h"
#include "error.h"
#include "hellaswag.h"
#include "memory_plan.h"
#include "model.h"
#include "model_file.h"
#include "models.h"
#include "parallel_plan.h"
#include "recipe.h"
#include "schedule.h"
#include "speedrun_params.h"
#include "tokenizer.h"
#include "zero.h"

namespace llmc {

// Why -d does not split into whole micro-steps of -b x -t on `world` ranks, and which -b values would: the divisors of
// each rank's share of the step's sequences, largest first ("-b values that work: 64, 32, ...", at most 12), or how
// to change -d when the ranks cannot share its sequences at all. (scripts/gpt2_recipes.sh does the same for the run
// scripts.)
inline std::string batch_size_advice(size_t total_batch, size_t T, int world) {
    const size_t per_rank = T * (size_t)world;
    if (total_batch % per_rank != 0)
        return "no -b works: -d must be a multiple of -t x ranks = " + std::to_string(T) + " x " +
               std::to_string(world) + " = " + std::to_string(per_rank);
    const size_t share = total_batch / per_rank;  // sequences per rank per step
    std::vector<size_t> divisors;                  // of share, largest first
    for (size_t d = 1; d * d <= share; d++)
        if (share % d == 0) divisors.push_back(d), divisors.push_back(share / d);
    std::sort(divisors.begin(), divisors.end(), std::greater<size_t>());
    divisors.erase(std::unique(divisors.begin(), divisors.end()), divisors.end());
    std::string list;
    for (size_t i = 0; i < divisors.size() && i < 12; i++) list += (i ? ", " : "") + std::to_string(divisors[i]);
    return "-b values that work with -t " + std::to_string(T) + " on " + std::to_string(world) + " rank(s): " + list +
           (divisors.size() > 12 ? ", ..." : "");
}

// The architecture of each recipe (llmc/recipe.h).
inline const char* recipe_architecture(const std::string& recipe) {
    return recipe == "speedrun" ? speedrun_architecture.name : gpt2_architecture.name;
}

// The model's shape: a descriptor builds a fresh model of the recipe's architecture (with the speedrun's flags:
// --logit-softcap, --value-residual, --embed-skip); anything else is a model file, whose architecture must be the
// recipe's.
inline ModelConfig resolve_model_config(const TrainOptions& o, bool* from_file) {
    ModelConfig cfg;
    *from_file = !parse_model_descriptor(o.model, &cfg);
    if (*from_file) {
        cfg = read_model_config(o.model);
        if (cfg.arch != recipe_architecture(o.recipe))
            fail("-e %s holds a %s model, but --recipe is %s (its architecture is %s)", o.model.c_str(),
                 cfg.arch.c_str(), o.recipe.c_str(), recipe_architecture(o.recipe));
    } else {
        cfg.arch = recipe_architecture(o.recipe);
        if (o.logit_softcap) cfg.arch_flags |= SR_FLAG_SOFTCAP;
        if (o.value_residual) cfg.arch_flags |= SR_FLAG_VALUE_RESIDUAL;
        if (o.embed_skip) cfg.arch_flags |= SR_FLAG_EMBED_SKIP;
    }
    validate_config(cfg);
    return cfg;
}

// What the options make of a run on `world` ranks, before anything is loaded.
struct RunShape {
    ModelConfig cfg;
    bool from_file = false;   // -e is a model file (else a descriptor: a fresh GPT-2 initialisation)
    int world = 1;
    size_t B = 0, T = 0;      // sequences per rank per micro-step, sequence length
    size_t total_batch = 0;   // tokens per optimizer step (-d)
    size_t grad_accum = 0;    // micro-steps per optimizer step
    int zero_stage = 0;
    size_t seqs_per_step() const { return total_batch / T; }
};

inline RunShape plan_run(const TrainOptions& o, int world) {
    RunShape s;
    s.cfg = resolve_model_config(o, &s.from_file);
    s.world = world, s.B = (size_t)o.batch_size, s.T = (size_t)o.seq_len;
    if (s.T > s.cfg.max_seq_len)
        fail("-t %zu is longer than the model's maximum sequence length %zu", s.T, s.cfg.max_seq_len);
    const size_t tokens_per_micro = s.B * s.T * (size_t)world;
    s.total_batch = o.total_batch < 0 ? tokens_per_micro : (size_t)o.total_batch;
    if (s.total_batch % tokens_per_micro != 0)
        fail("-d %zu is not divisible by B*T*ranks = %zu*%zu*%d = %zu (%s)", s.total_batch, s.B, s.T, world,
             tokens_per_micro, batch_size_advice(s.total_batch, s.T, world).c_str());
    s.grad_accum = s.total_batch / tokens_per_micro;
    s.zero_stage = zero_stage_for(o.zero_stage, world);
    return s;
}

// --dry-run on the CPU backend: when `ranks` ranks of the plan (one node's) need more than this machine's memory, a
// warning says so on stderr, after the plan.
inline void warn_beyond_host_memory(const MemoryPlan& plan, int ranks) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (plan.kind != "host" || pages <= 0 || page <= 0) return;
    const double machine = (double)pages * (double)page, rank = (double)plan.total(), gib = 1024.0 * 1024.0 * 1024.0;
    if (rank * ranks <= machine) return;
    std::fflush(stdout);
    std::fprintf(stderr, "warning: %d rank(s) of %.2f GiB on a node need %.2f GiB, this machine has %.2f GiB of memory: "
                 "lower -b or -t, or use -r 1 (a GPU's plan: ./train_gpt2 --dry-run)\n", ranks, rank / gib,
                 rank * ranks / gib, machine / gib);
}

// What the training loop reads once the set-up is done (llmc/trainer.h): the rest of TrainOptions stays here.
struct LoopConfig {
    std::string output_dir;  // -o ("": no files)
    int val_every = 0, sample_every = 0, gen_tokens = 0, log_every = 1;
    int checkpoint_every = 0, keep_last = 0, keep_every = 0;
    bool overfit_single_batch = false, show_placement = false, gemm_tuning = true;
    float skip_loss_z = 0, skip_grad_z = 0;  // the step guard's thresholds: their z-scores go into metrics.jsonl
    uint64_t seed = 0;                       // samples draw from (seed, step)
};

inline LoopConfig loop_config_for(const TrainOptions& o) {
    LoopConfig c;
    c.output_dir = o.output_dir;
    c.val_every = o.val_every, c.sample_every = o.sample_every, c.gen_tokens = o.gen_tokens, c.log_every = o.log_every;
    c.checkpoint_every = o.checkpoint_every, c.keep_last = o.keep_last, c.keep_every = o.keep_every;
    c.overfit_single_batch = o.overfit_single_batch != 0, c.show_placement = o.show_placement;
    c.gemm_tuning = o.gemm_tuning == 1;
    c.skip_loss_z = o.skip_loss_z, c.skip_grad_z = o.skip_grad_z;
    c.seed = o.seed;
    return c;
}

// The optimizer groups of the recipe (llmc/recipe.h): GPT-2's one AdamW group, or the speedrun's three, each
// learning rate a multiple of the schedule's (-l, Muon's).
inline std::vector<GroupRule> recipe_groups(const TrainOptions& o) {
    if (o.recipe != "speedrun") return {};
    const auto scale = [&](float lr) { return o.learning_rate > 0 ? lr / o.learning_rate : 0.0f; };
    std::vector<GroupRule> g(NUM_SPEEDRUN_GROUPS);
    g[SR_GROUP_EMBED] = {OptimizerKind::AdamW, scale(o.embed_lr)};
    g[SR_GROUP_MATRICES] = {OptimizerKind::Muon, 1.0f};
    g[SR_GROUP_HEAD] = {OptimizerKind::AdamW, scale(o.head_lr)};
    g[SR_GROUP_SCALARS] = {OptimizerKind::AdamW, scale(o.scalar_lr)};
    return g;
}

// The parallel options of the command line (llmc/parallel_plan.h).
inline ParallelOptions parallel_options_for(const TrainOptions& o) {
    ParallelOptions p;
    p.zero_stage = o.zero_stage, p.shard_group = o.shard_group;
    p.wire = o.reduce_dtype == "bf16" ? DType::BF16 : DType::F32;
    p.outer.every = o.sync_every, p.outer.lr = o.outer_lr, p.outer.momentum = o.outer_momentum;
    p.group_sharding = group_sharding_of(recipe_groups(o));
    return p;
}

// The model options the trainer creates its model with: padded as the plan shards it.
inline ModelOptions model_options_for(const TrainOptions& o, const ParallelPlan& plan) {
    ModelOptions mo;
    mo.pad_to = plan.pad_to();
    mo.recompute_gelu = o.recompute >= 1;
    mo.recompute_layernorm = o.recompute >= 2;
    mo.classifier_chunk_rows = (size_t)o.classifier_chunk;
    return mo;
}

// The ranks a dry run plans for: -pn (else the launcher's world size), placed node by node with -pg ranks per node
// (else the launcher's ranks per node when it started as many ranks, else all on one node), grouped by --shard-group
// with the run's own resolve_shard_group() and make_dp_mesh() (llmc/dp_mesh.h). `--shard-group node` needs to know
// the ranks per node: without -pg or a launcher of that many ranks the dry run refuses it.
inline int dry_run_ranks_per_node(const TrainOptions& o, int world, const DistInfo& launched) {
    if (o.gpus_per_node > 0) return o.gpus_per_node;
    if (o.gpus_per_node == 0) fail("-pg 0: the number of ranks per node must be at least 1");
    return launched.launcher != "single" && launched.world_size == world ? launched.local_size : 0;
}

// Rank 0's place in the data-parallel mesh of a dry run of `world` ranks, `per_node` to a node (0: unknown).
inline DpMesh dry_run_mesh(const TrainOptions& o, int world, int per_node) {
    if (world < 1) fail("-pn %d: the number of processes must be at least 1", world);
    if (per_node == 0 && o.shard_group == "node")
        fail("--shard-group node with --dry-run: the plan needs the ranks per node; give -pg N (ranks per node) or "
             "the group size as a number (--shard-group N)");
    const int local = per_node == 0 || per_node > world ? world : per_node;
    std::vector<DistInfo> all((size_t)world);
    for (int r = 0; r < world; r++) {
        DistInfo& d = all[(size_t)r];
        d.rank = r, d.world_size = world, d.local_size = local, d.local_rank = r % local;
        d.node = r / local, d.num_nodes = (world + local - 1) / local, d.launcher = "--dry-run";
    }
    return make_dp_mesh(all, 0, resolve_shard_group(o.shard_group, all, zero_stage_for(o.zero_stage, world)));
}

// --dry-run: prints one rank's device memory plan (llmc/memory_plan.h) for these options on `world` ranks (`launched`:
// the layout the dry run itself was started with, for --shard-group node), before any device memory exists (no
// backend is created) and without the data. Fails like the run would on a bad shape, -d or --shard-group.
template <class Backend>
void print_memory_plan(const TrainOptions& o, int world, const DistInfo& launched, const BackendOptions& bo) {
    bool from_file = false;
    const ModelConfig cfg = resolve_model_config(o, &from_file);
    const size_t tokens_per_micro = (size_t)o.batch_size * (size_t)o.seq_len * (size_t)world;
    if (o.total_batch > 0 && (size_t)o.total_batch % tokens_per_micro != 0)
        fail("-d %lld is not divisible by B*T*ranks = %d*%d*%d = %zu", o.total_batch, o.batch_size, o.seq_len, world,
             tokens_per_micro);
    const int per_node = dry_run_ranks_per_node(o, world, launched);
    const ParallelPlan plan = make_parallel_plan(parallel_options_for(o), dry_run_mesh(o, world, per_node));
    const MemoryPlan mp = plan_training_memory<Backend>(plan, cfg, (size_t)o.batch_size, (size_t)o.seq_len,
                                                        model_options_for(o, plan), o.recompute, bo);
    std::fputs(render_memory_plan(mp).c_str(), stdout);
    warn_beyond_host_memory(mp, per_node > 0 && per_node < world ? per_node : world);
}

// A loader over `pattern` for the rank at data-parallel rank `dp_rank` (llmc/dp_mesh.h); its errors name the flag
// (-i or -j) the data came from.
inline std::unique_ptr<DataLoader> open_loader(const TrainOptions& o, const Comm& comm, int dp_rank, const char* flag,
                                               const std::string& pattern, size_t seqs_per_step, bool shuffle) {
    try {
        return std::make_unique<DataLoader>(pattern, (size_t)o.batch_size, (size_t)o.seq_len, dp_rank,
                                            comm.world_size(), seqs_per_step, shuffle, o.seed);
    } catch (const Error& e) {
        fail("%s: %s%s", flag, e.what(), std::string(flag) == "-j" ? " (-v 0 turns validation off)" : "");
    }
}

// Before step 1, on every rank (the ranks agreed on the shards' names and sizes already, llmc/run_identity.h): no
// token is outside the model's vocabulary. Rank r scans shards r, r + world, ... (each with all its threads); every
// rank gets every result, so every rank stops with the same message. Returns the data's summary `mine` with the
// content digest of every shard (checkpoints record it).
template <class Backend>
DataSummary check_data(Backend& be, Comm& comm, const char* flag, const DataLoader& loader, DataSummary mine,
                       size_t vocab) {
    const int rank = comm.rank(), world = comm.world_size();
    // Per rank: [shard index + 1 of its first bad token (0: none), token index, value, then one content digest
    // per shard (0 for the shards of other ranks)].
    const std::vector<ShardInfo>& shards = loader.shards();
    const size_t n = shards.size(), row = 3 + n;
    std::vector<uint64_t> scans(row, 0);
    for (size_t i = (size_t)rank; i < n && scans[0] == 0; i += (size_t)world) {
        const ShardScan sc = scan_shard(shards[i], vocab);
        if (sc.bad.found) scans[0] = i + 1, scans[1] = sc.bad.index, scans[2] = sc.bad.value;
        scans[3 + i] = sc.content;
    }
    const std::vector<uint64_t> got = comm.all_gather_host(scans);
    size_t worst = 0;  // the rank whose bad token is in the lowest-numbered shard
    for (size_t r = 0; r < (size_t)world; r++)
        if (got[r * row] != 0 && (got[worst * row] == 0 || got[r * row] < got[worst * row])) worst = r;
    const uint64_t* bad = &got[worst * row];
    if (bad[0] != 0)
        fail("%s: %s: token %llu at token offset %llu (byte %llu) is outside the model's vocabulary [0, %zu)", flag,
             shards[bad[0] - 1].path.c_str(), (unsigned long long)bad[2], (unsigned long long)bad[1],
             (unsigned long long)(1024 + 2 * bad[1]), vocab);
    for (size_t i = 0; i < n; i++) {
        const uint32_t c = (uint32_t)got[(i % (size_t)world) * row + 3 + i];  // scanned by rank i % world
        mine.content = crc32c(mine.content, &c, sizeof c);
    }
    return mine;
}

// The run's data: -i, and -j unless -v 0. The data first: it is cheap to check, and a batch larger than the data (a
// mistyped -b, -t or -d) is refused here with a message instead of after allocating activations for it (which may
// not fit).
struct RunData {
    std::unique_ptr<DataLoader> train, val;  // val: null with -v 0
    DataSummary train_summary, val_summary;  // names and sizes; the training data's content digest once scanned
};

template <class Backend>
RunData open_data(const TrainOptions& o, Backend& be, Comm& comm, const RunShape& s, int dp_rank) {
    RunData d;
    d.train = open_loader(o, comm, dp_rank, "-i", o.train_data, s.seqs_per_step(), o.shuffle && !o.overfit_single_batch);
    if (o.val_every > 0) d.val = open_loader(o, comm, dp_rank, "-j", o.val_data, s.seqs_per_step(), false);
    d.train_summary = summarize_shards(d.train->shards());
    if (d.val) d.val_summary = summarize_shards(d.val->shards());
    return d;
}

// The out-of-vocabulary scan of -i and -j (check_data), after the ranks agreed on the run.
template <class Backend>
void scan_data(Backend& be, Comm& comm, RunData& d, size_t vocab) {
    d.train_summary = check_data(be, comm, "-i", *d.train, d.train_summary, vocab);
    if (d.val) check_data(be, comm, "-j", *d.val, d.val_summary, vocab);
}

template <class Backend>
std::unique_ptr<Model<Backend>> make_model(Backend& be, const TrainOptions& o, const RunShape& s,
                                           const ParallelPlan& plan) {
    std::unique_ptr<Model<Backend>> model = create_model(be, s.cfg, s.B, s.T, model_options_for(o, plan));
    if (s.from_file) model->set_params(read_model_file(o.model).params);
    else model->init(o.seed);
    return model;
}

inline OptimConfig optim_config_for(const TrainOptions& o) {
    OptimConfig oc;
    oc.beta1 = o.beta1, oc.beta2 = o.beta2, oc.eps = o.eps, oc.weight_decay = o.weight_decay;
    oc.grad_clip = o.grad_clip;
    oc.groups = recipe_groups(o);
    oc.muon.momentum_warmup = o.muon_momentum_warmup;
    return oc;
}

inline ScheduleConfig schedule_for(const TrainOptions& o, int max_steps) {
    ScheduleConfig sc;
    sc.kind = parse_schedule(o.lr_schedule);
    sc.peak_lr = o.learning_rate, sc.warmup_steps = o.warmup_steps, sc.total_steps = max_steps;
    sc.final_fraction = o.final_lr_fraction;
    sc.decay_fraction = o.decay_fraction;
    validate_schedule(sc);
    return sc;
}

// -m N: the first N windows of -d tokens of the validation data; -m -1: all of them, every sequence.
inline size_t validation_windows(const TrainOptions& o, const DataLoader* val) {
    if (!val) return 0;
    return o.val_batches < 0 ? val->eval_windows() : std::min((size_t)o.val_batches, val->eval_windows());
}

// --hellaswag: the examples, every token id checked against the vocabulary (they feed the model: an id outside it
// would stop the run at the first evaluation). Evaluated at each -v, so -v 0 is refused.
inline std::vector<McExample> read_checked_hellaswag(const TrainOptions& o, size_t vocab, bool validating) {
    if (o.hellaswag.empty()) return {};
    if (!validating) fail("--hellaswag %s: evaluated at each -v, but -v is 0", o.hellaswag.c_str());
    std::vector<McExample> examples = read_hellaswag(o.hellaswag);
    for (const McExample& ex : examples) {
        std::vector<int> ids = ex.context;
        for (const std::vector<int>& c : ex.completions) ids.insert(ids.end(), c.begin(), c.end());
        for (int id : ids)
            if (id < 0 || (size_t)id >= vocab)
                fail("--hellaswag %s: example %d has token %d, outside the model's vocabulary [0, %zu)",
                     o.hellaswag.c_str(), ex.index, id, vocab);
    }
    return examples;
}

// The tokenizer for -s's samples (rank 0), or null with a note when there is none or it does not fit the model.
inline std::unique_ptr<Tokenizer> load_tokenizer(const TrainOptions& o, const ModelConfig& cfg) {
    FILE* f = std::fopen(o.tokenizer.c_str(), "rb");
    if (!f) {
        std::printf("note: no tokenizer at %s, samples are off (make one with ./gpt2_tokenizer)\n",
                    o.tokenizer.c_str());
        return nullptr;
    }
    std::fclose(f);
    auto tok = std::make_unique<Tokenizer>(Tokenizer::from_decode_table(o.tokenizer));
    // Samples start from EOT and may be any id below V: both must be ids the model and the tokenizer know,
    // or the first sample would stop the run.
    const size_t V = cfg.vocab_size;
    if (tok->eot() < 0 || (size_t)tok->eot() >= V || tok->vocab_size() < V) {
        std::printf("note: the tokenizer %s (%zu tokens, EOT %d) does not fit the model's vocabulary of %zu, "
                    "samples are off\n",
                    o.tokenizer.c_str(), tok->vocab_size(), tok->eot(), V);
        return nullptr;
    }
    return tok;
}

// Rank 0's start-up lines: model, backend, batch, data, schedule, then the strategy's (sharding, ZeRO plan, sync).
// `origin` says where the parameters come from.
template <class Backend>
void print_startup(const TrainOptions& o, const RunShape& s, const Model<Backend>& model,
                   const DataParallel<Backend>& dp, const DataLoader& train, const ScheduleConfig& sc,
                   const char* origin) {
    std::printf("model      %s, %.2fM parameters (%s)\n", s.cfg.describe().c_str(), model.num_params() / 1e6, origin);
    std::printf("backend    %s, %d rank(s), ZeRO-%d, %zu MiB of model memory per rank\n", Backend::name, s.world,
                s.zero_stage, (model.memory_bytes() + dp.grad_buffer_bytes()) >> 20);
    std::printf("batch      B=%zu T=%zu, %zu tokens per step = %zu micro-step(s) x %d rank(s)\n", s.B, s.T,
                s.total_batch, s.grad_accum, s.world);
    std::printf("data       train %zu tokens in %zu shard(s); %d steps%s\n", train.total_tokens(), train.num_shards(),
                sc.total_steps, o.overfit_single_batch ? " (overfitting one batch)" : "");
    std::printf("schedule   %s\n", describe_schedule(sc).c_str());
    std::printf("flops      %s\n", describe_flops_per_token(s.cfg, model.num_params(), s.T).c_str());
    std::fputs(dp.startup_lines(sizeof(typename Backend::act_t), (int)s.grad_accum).c_str(), stdout);
    std::fflush(stdout);
}

// --show-placement: every rank, one line (test/e2e/multinode_test.sh): only the GPU follows the local rank.
template <class Backend>
void print_placement(const Comm& comm, const Backend& be, const RunShape& s, const DataParallel<Backend>& dp,
                     const DataLoader& train) {
    const DpMesh& mesh = dp.plan().mesh;
    const ShardPlan& shard = dp.state_shard();
    const DistInfo& d = comm.info();
    std::printf("placement: rank %d of %d | node %d of %d, local rank %d of %d, gpu %d (%s) | data: sequences "
                "[%zu, %zu) of each micro-step's %zu | ZeRO-%d shard [%zu, %zu) | dp rank %d = group %d x %d + %d | comm %s\n",
                d.rank, d.world_size, d.node, d.num_nodes, d.local_rank, d.local_size, be.device(), d.launcher.c_str(),
                train.slice_begin(), train.slice_begin() + s.B, s.B * (size_t)s.world, s.zero_stage,
                shard.begin(), shard.end(), mesh.dp_rank, mesh.replica_rank, mesh.shard_size,
                mesh.shard_rank, comm.name());
    std::fflush(stdout);
}

// --show-placement, at the end of the run, every rank: the payload bytes it handed to collectives (CommCounters::
// bytes; the host channel's control data is not counted) on the world comm, within its sharding group and across
// the groups (test/e2e/hybrid_shard_test.sh). With one group the world comm is the group's: "group 0 across 0".
inline void print_comm_bytes(const Comm& world, const DpGroups& g) {
    const bool hybrid = g.mesh.hybrid();
    std::printf("comm bytes: rank %d | world %llu | within group %llu | across groups %llu\n", world.rank(),
                (unsigned long long)world.counters.bytes,
                (unsigned long long)(hybrid ? g.shard->counters.bytes : 0),
                (unsigned long long)(hybrid ? g.replica->counters.bytes : 0));
    std::fflush(stdout);
}

}  // namespace llmc
