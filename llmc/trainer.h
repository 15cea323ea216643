// The training loop, shared by every backend: data, gradient accumulation, the optimizer, evaluation, sampling,
// logging. train_gpt2.cu picks the backend and calls run_training<Backend>().
//
// One optimizer step:
//   for each of grad_accum micro-steps: next batch -> forward (dlogits scaled by 1/grad_accum) -> backward, which
//       hands each completed gradient bucket to the optimizer (optimizer.backward_hooks: its reduction starts on
//       the comm stream while backward goes on; ZeRO 0/1 reduce only at the last micro-step; ZeRO 2 also hands
//       backward its bucket buffers) -> optimizer.reduce_gradients(last?)
//       (the rest, and the main stream waits for the reductions); no host synchronisation per micro-step
//   train loss = mean over micro-steps, all-reduced (mean over ranks) before it is logged
//   optimizer grad_norm, then apply(lr(step), step + 1) or skip(): clipping, AdamW on the rank's shard, all-gather
//   (stream and event order: llmc/optimizer.h)
#pragma once

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "cli.h"
#include "comm.h"
#include "config.h"
#include "data_check.h"
#include "dataloader.h"
#include "dist_info.h"
#include "error.h"
#include "hellaswag.h"
#include "logger.h"
#include "memory_plan.h"
#include "model.h"
#include "model_file.h"
#include "optimizer.h"
#include "outlier.h"
#include "output_dir.h"
#include "preemption.h"
#include "run_identity.h"
#include "run_lock.h"
#include "sampler.h"
#include "schedule.h"
#include "tokenizer.h"
#include "zero.h"

namespace llmc {

// Model FLOPs per token of one training step (forward + backward), for MFU: 6 per parameter that takes part in a
// matmul (one multiply-add forward, two backward) plus the attention score and value products, 12 * L * C * T
// (PaLM's appendix B count). The position embedding (maxT x C) is a table lookup, no matmul: it is not counted
// (wte is: it is the classifier's weight). GPT-2 124M at T = 1024: 855.4 MFLOP per token (DESIGN.md).
inline double flops_per_token(const GPT2Config& c, size_t num_params, size_t T) {
    const double matmul_params = (double)num_params - (double)c.max_seq_len * (double)c.channels;
    return 6.0 * matmul_params + 12.0 * (double)c.num_layers * (double)c.channels * (double)T;
}

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

// The model's shape: a descriptor builds a fresh, GPT-2-initialised model; anything else is a model file.
inline GPT2Config resolve_model_config(const std::string& spec, bool* from_file) {
    GPT2Config cfg;
    *from_file = !parse_model_descriptor(spec, &cfg);
    if (*from_file) cfg = read_model_config(spec);
    validate_config(cfg);
    return cfg;
}

inline void make_dirs(const std::string& dir) {
    std::string path;
    for (size_t i = 0; i <= dir.size(); i++) {
        if (i == dir.size() || dir[i] == '/') {
            if (!path.empty() && mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
                fail("%s: cannot create directory (%s)", path.c_str(), std::strerror(errno));
        }
        if (i < dir.size()) path += dir[i];
    }
}

// Test hook: LLMC_TEST_STOP_RANK=<rank>:<step> makes that rank stop itself (SIGSTOP) just before it computes step
// <step> (1-based), as a suspended or hung peer would: the other ranks must not wait for it forever (llmc/watchdog.h).
inline void test_stop_hook(int rank, int step) {
    const char* s = std::getenv("LLMC_TEST_STOP_RANK");
    int r = -1, k = -1;
    if (s && std::sscanf(s, "%d:%d", &r, &k) == 2 && r == rank && k == step) {
        std::fprintf(stderr, "LLMC_TEST_STOP_RANK: rank %d stops itself before step %d\n", rank, step);
        std::fflush(stderr);
        raise(SIGSTOP);
    }
}

// --dry-run: prints one rank's device memory plan (llmc/memory_plan.h) for these options on `world` ranks, before any
// device memory exists (no backend is created) and without the data. Fails like the run would on a bad shape or -d.
template <class Backend>
void print_memory_plan(const TrainOptions& o, int world, const BackendOptions& bo) {
    bool from_file = false;
    const GPT2Config cfg = resolve_model_config(o.model, &from_file);
    const size_t tokens_per_micro = (size_t)o.batch_size * (size_t)o.seq_len * (size_t)world;
    if (o.total_batch > 0 && (size_t)o.total_batch % tokens_per_micro != 0)
        fail("-d %lld is not divisible by B*T*ranks = %d*%d*%d = %zu", o.total_batch, o.batch_size, o.seq_len, world,
             tokens_per_micro);
    std::fputs(render_memory_plan(plan_training_memory<Backend>(o, cfg, world, bo)).c_str(), stdout);
}

template <class Backend>
class Trainer {
public:
    Trainer(const TrainOptions& o, Backend& be, Comm& comm) : o_(o), be_(be), comm_(comm) {}

    int run() {
        const int rank = comm_.rank(), world = comm_.world_size();
        bool from_file = false;
        GPT2Config cfg = resolve_model_config(o_.model, &from_file);
        const size_t B = (size_t)o_.batch_size, T = (size_t)o_.seq_len;
        if (T > cfg.max_seq_len)
            fail("-t %zu is longer than the model's maximum sequence length %zu", T, cfg.max_seq_len);
        const size_t tokens_per_micro = B * T * (size_t)world;
        const size_t total_batch = o_.total_batch < 0 ? tokens_per_micro : (size_t)o_.total_batch;
        if (total_batch % tokens_per_micro != 0)
            fail("-d %zu is not divisible by B*T*ranks = %zu*%zu*%d = %zu (%s)", total_batch, B, T, world,
                 tokens_per_micro, batch_size_advice(total_batch, T, world).c_str());
        const size_t grad_accum = total_batch / tokens_per_micro;
        const int zero_stage = zero_stage_for(o_, world);
        // A signal from here on finishes the step and saves instead of killing the run (llmc/preemption.h).
        PreemptionHandlers preemption(parse_preempt_signal(o_.preempt_signal));

        // The data first: it is cheap to check, and a batch larger than the data (a mistyped -b, -t or -d) is
        // refused here with a message instead of after allocating activations for it (which may not fit).
        const size_t seqs_per_step = total_batch / T;
        std::unique_ptr<DataLoader> train_ptr = open_loader("-i", o_.train_data, seqs_per_step,
                                                            o_.shuffle && !o_.overfit_single_batch);
        DataLoader& train = *train_ptr;
        std::unique_ptr<DataLoader> val;
        if (o_.val_every > 0) val = open_loader("-j", o_.val_data, seqs_per_step, false);
        const int max_steps = o_.max_steps > 0 ? o_.max_steps : (int)train.steps_per_epoch();
        // Every rank agrees on the model, the flags, the data and -o before anything is built or written
        // (llmc/run_identity.h); then rank 0 locks -o for the whole run (llmc/run_lock.h).
        ResolvedRun resolved;
        resolved.backend = Backend::name, resolved.config = cfg, resolved.model_from_file = from_file;
        resolved.total_batch = (long long)total_batch, resolved.max_steps = max_steps, resolved.zero_stage = zero_stage;
        resolved.train = summarize_shards(train.shards());
        if (val) resolved.val = summarize_shards(val->shards());
        agree(identity_of(o_, resolved));
        RunLock lock;
        if (rank == 0 && !o_.output_dir.empty()) {
            make_dirs(o_.output_dir);
            lock = RunLock(o_.output_dir);
        }

        // The output directory is never destroyed (llmc/output_dir.h): a fresh run into an -o that holds an earlier
        // run is refused here, before anything is loaded; with --start-over the earlier files are moved aside below.
        std::vector<std::string> earlier;
        if (!o_.output_dir.empty()) earlier = earlier_run_files(o_.output_dir);
        if (!earlier.empty() && !o_.resume && !o_.start_over)
            fail("-o %s holds an earlier run (%s): resume it with -y 1, or choose another -o; --start-over moves its "
                 "files into %s/previous_<time>/ and starts afresh",
                 o_.output_dir.c_str(), describe_earlier_run(earlier).c_str(), o_.output_dir.c_str());
        if (o_.resume) {  // the ranks see the same checkpoints (a shared -o), so they resume the same one
            RunIdentity checkpoints;
            checkpoints.add_checkpoints(o_.output_dir);
            agree(checkpoints);
        }
        // No token is outside the vocabulary (llmc/data_check.h).
        const DataSummary train_summary = check_data("-i", train, resolved.train, cfg.vocab_size);
        if (val) check_data("-j", *val, resolved.val, cfg.vocab_size);

        GPT2<Backend> model(be_, cfg, B, T, model_options_for(o_, world));
        if (from_file) model.set_params(read_model_file(o_.model).params);
        else model.init_gpt2(o_.seed);

        OptimConfig oc;
        oc.beta1 = o_.beta1, oc.beta2 = o_.beta2, oc.eps = o_.eps, oc.weight_decay = o_.weight_decay;
        oc.grad_clip = o_.grad_clip;
        Optimizer<Backend> opt(be_, model, comm_, oc, zero_stage, o_.seed);
        // -m N: the first N windows of -d tokens of the validation data; -m -1: all of them, every sequence.
        const size_t val_steps = !val ? 0
                                 : o_.val_batches < 0 ? val->eval_windows()
                                                      : std::min((size_t)o_.val_batches, val->eval_windows());

        ScheduleConfig sc;
        sc.kind = parse_schedule(o_.lr_schedule);
        sc.peak_lr = o_.learning_rate, sc.warmup_steps = o_.warmup_steps, sc.total_steps = max_steps;
        sc.final_fraction = o_.final_lr_fraction;
        validate_schedule(sc);

        // Checkpoints and resume (issue 6, llmc/checkpoint.h): -y 1 continues from the newest intact checkpoint.
        CheckpointMeta run_id;  // what this run is; a checkpoint must agree to be resumed
        run_id.config = cfg, run_id.batch_size = o_.batch_size, run_id.seq_len = o_.seq_len;
        run_id.total_batch = (long long)total_batch, run_id.seed = o_.seed, run_id.shuffle = o_.shuffle;
        run_id.overfit = o_.overfit_single_batch != 0, run_id.max_steps = max_steps;
        run_id.train_data = train_summary;
        std::unique_ptr<Checkpointer<Backend>> ckpt;
        if (!o_.output_dir.empty()) ckpt = std::make_unique<Checkpointer<Backend>>(o_.output_dir, be_, comm_, model, opt);
        StepGuard guard(o_.skip_loss_z, o_.skip_grad_z, o_.max_bad_steps);
        int start_step = 0;
        CheckpointMeta resumed;
        auto validate = [&](const CheckpointMeta& m) { return validate_checkpoint(m, run_id, train); };
        const bool resuming = o_.resume && ckpt && (start_step = ckpt->find_latest_valid(&resumed, validate)) >= 0;
        if (resuming) {
            const std::string dir = checkpoint_dir(o_.output_dir, start_step);
            if (start_step > max_steps)
                fail("%s: the checkpoint is at step %d, past -x %d", dir.c_str(), start_step, max_steps);
            ckpt->load(resumed);
            train.set_position(resumed.data);
            guard.set_state(resumed.guard);
            if (rank == 0)
                std::printf("resume     %s: step %d (written by %d rank(s), ZeRO-%d)\n", dir.c_str(), start_step,
                            resumed.world_size, resumed.zero_stage);
            if (rank == 0 && resumed.max_steps != max_steps)
                std::printf("note: the checkpoint's run had %d steps, this one has %d: the learning-rate schedule "
                            "from step %d on is not the one the checkpoint's run would have followed\n",
                            resumed.max_steps, max_steps, start_step);
        } else {
            start_step = 0;
            if (o_.resume && rank == 0) std::printf("resume     no checkpoint in %s: starting afresh\n", o_.output_dir.c_str());
            // --start-over, or -y 1 with nothing to resume: the earlier run's files are moved aside, never
            // overwritten. Rank 0 moves them; the others do not touch -o before the first checkpoint, which comes
            // after collectives that rank 0 reaches only after this.
            if (!earlier.empty() && rank == 0) {
                const std::string aside = move_earlier_run_aside(o_.output_dir, earlier);
                std::printf("note       the earlier run's %s moved into %s\n", describe_earlier_run(earlier).c_str(),
                            aside.c_str());
            }
        }

        std::vector<McExample> hellaswag;
        if (!o_.hellaswag.empty()) {
            if (!val) fail("--hellaswag %s: evaluated at each -v, but -v is 0", o_.hellaswag.c_str());
            hellaswag = read_hellaswag(o_.hellaswag);
            // Its tokens feed the model: an id outside the vocabulary would stop the run at the first evaluation.
            for (const McExample& ex : hellaswag) {
                std::vector<int> ids = ex.context;
                for (const std::vector<int>& c : ex.completions) ids.insert(ids.end(), c.begin(), c.end());
                for (int id : ids)
                    if (id < 0 || (size_t)id >= cfg.vocab_size)
                        fail("--hellaswag %s: example %d has token %d, outside the model's vocabulary [0, %zu)",
                             o_.hellaswag.c_str(), ex.index, id, cfg.vocab_size);
            }
        }
        std::unique_ptr<Tokenizer> tokenizer;
        if (o_.sample_every > 0 && rank == 0) tokenizer = load_tokenizer(cfg);

        MetricsLogger metrics;
        if (rank == 0 && !o_.output_dir.empty()) {
            make_dirs(o_.output_dir);
            // A resumed run drops the lines of the steps it redoes and appends from there.
            if (resuming) truncate_metrics(o_.output_dir + "/metrics.jsonl", resumed.metrics_bytes);
            metrics = MetricsLogger(o_.output_dir + "/metrics.jsonl", resuming);
        }
        const double flops_token = flops_per_token(cfg, model.num_params(), T);
        if (rank == 0) {
            std::printf("model      %s, %.2fM parameters (%s)\n", cfg.describe().c_str(), model.num_params() / 1e6,
                        from_file ? o_.model.c_str() : resuming ? "from the checkpoint" : "fresh GPT-2 init");
            std::printf("backend    %s, %d rank(s), ZeRO-%d, %zu MiB of model memory per rank\n", Backend::name,
                        world, zero_stage, model.memory_bytes() >> 20);
            std::printf("batch      B=%zu T=%zu, %zu tokens per step = %zu micro-step(s) x %d rank(s)\n", B, T,
                        total_batch, grad_accum, world);
            std::printf("data       train %zu tokens in %zu shard(s); %d steps%s\n", train.total_tokens(),
                        train.num_shards(), max_steps, o_.overfit_single_batch ? " (overfitting one batch)" : "");
            std::printf("schedule   %s, peak lr %g, warmup %d, final fraction %g\n", schedule_name(sc.kind),
                        sc.peak_lr, sc.warmup_steps, sc.final_fraction);
            std::printf("%s\n", zero_summary(opt.plan(), model.layout(), zero_stage, sizeof(typename Backend::act_t), (int)grad_accum).c_str());
            std::fflush(stdout);
        }
        if (o_.show_placement) {  // every rank, one line (test/multinode_test.sh): only the GPU follows the local rank
            const DistInfo& d = comm_.info();
            std::printf("placement: rank %d of %d | node %d of %d, local rank %d of %d, gpu %d (%s) | data: sequences "
                        "[%zu, %zu) of each micro-step's %zu | ZeRO-%d shard [%zu, %zu)\n",
                        d.rank, d.world_size, d.node, d.num_nodes, d.local_rank, d.local_size, be_.device(),
                        d.launcher.c_str(), train.slice_begin(), train.slice_begin() + B, B * (size_t)world,
                        zero_stage, opt.plan().begin(), opt.plan().end());
            std::fflush(stdout);
        }

        DeviceArray<Backend, float> loss_acc_buf(be_, 1);
        float* loss_acc = loss_acc_buf.get();
        DeviceArray<Backend, float> signal_flag(be_, 1);
        std::vector<int> inputs(B * T), targets(B * T);
        double total_ms = 0;
        int timed_steps = 0;
        for (int step = start_step; step <= max_steps; step++) {
            const bool last = step == max_steps;
            if (val && (last || step % o_.val_every == 0)) {
                float vl = evaluate(model, *val, val_steps, grad_accum, loss_acc, inputs, targets);
                nlohmann::json rec = {{"step", step}, {"val_loss", vl}};
                char hs_s[48] = "";
                if (!hellaswag.empty()) {  // --hellaswag: multiple-choice accuracy (llmc/hellaswag.h)
                    const double acc = evaluate_hellaswag(model, comm_, hellaswag);
                    rec["hellaswag_acc"] = acc;
                    std::snprintf(hs_s, sizeof hs_s, " | hellaswag %.4f", acc);
                }
                if (rank == 0) {
                    std::printf("step %*d/%d | val loss %.6f%s\n", width(max_steps), step, max_steps, vl, hs_s);
                    metrics.log(rec);
                }
            }
            if (tokenizer && o_.sample_every > 0 && (last || (step > 0 && step % o_.sample_every == 0)))
                sample(model, *tokenizer, step);
            if (last) break;

            test_stop_hook(rank, step + 1);
            wait_for_signal_test_hook(rank, step + 1);
            auto t0 = std::chrono::steady_clock::now();
            if (o_.overfit_single_batch) train.reset();
            be_.memset_zero(loss_acc, sizeof(float));
            for (size_t micro = 0; micro < grad_accum; micro++) {
                train.next_batch(inputs.data(), targets.data());
                model.forward(inputs.data(), targets.data(), B, T, 1.0f / (float)grad_accum);
                model.accumulate_loss(loss_acc, 1.0f / (float)(B * T * grad_accum));
                const bool last_micro = micro + 1 == grad_accum;
                model.backward(opt.backward_hooks(last_micro));
                opt.reduce_gradients(last_micro);
            }
            comm_.all_reduce(loss_acc, 1, DType::F32, ReduceOp::Avg, be_.main_stream());
            const float lr = learning_rate(sc, step);
            float loss = 0;
            be_.copy_to_host(&loss, loss_acc, sizeof(float));
            if (test_nan_injected(step + 1)) loss = NAN;
            // Non-finite or outlier (-sl/-sg) steps are skipped: no AdamW update, the gradients are dropped
            // (llmc/outlier.h); the guard stops the run after --max-bad-steps non-finite ones in a row.
            const float norm = opt.grad_norm();
            const StepVerdict verdict = guard.judge(step + 1, loss, norm);
            if (verdict.skip) opt.skip();
            else opt.apply(lr, step + 1);
            be_.synchronize();  // the step is done
            auto t1 = std::chrono::steady_clock::now();

            const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
            if (step > start_step) total_ms += ms, timed_steps++;  // the first step warms up
            const double avg_ms = timed_steps ? total_ms / timed_steps : ms;
            const double tok_s = (double)total_batch / (ms / 1e3);
            const double peak = be_.peak_flops() * world;
            const double mfu = peak > 0 ? flops_token * tok_s / peak : -1.0;
            if (rank == 0) {
                if ((step + 1) % o_.log_every == 0 || step == start_step || verdict.skip) {
                    char mfu_s[32] = "";
                    if (mfu >= 0) std::snprintf(mfu_s, sizeof mfu_s, " | MFU %5.1f%%", 100 * mfu);
                    std::printf("step %*d/%d | loss %.6f | norm %7.4f | lr %.2e | %7.1f ms | %8.0f tok/s%s | ETA %s%s\n",
                                width(max_steps), step + 1, max_steps, loss, norm, lr, ms, tok_s, mfu_s,
                                format_duration(avg_ms * (max_steps - step - 1) / 1e3).c_str(),
                                verdict.skip ? (" | SKIPPED (" + verdict.reason + ")").c_str() : "");
                    std::fflush(stdout);
                }
                nlohmann::json rec = {{"step", step + 1}, {"train_loss", loss}, {"lr", lr}, {"grad_norm", norm},
                                      {"tokens_per_sec", tok_s}, {"ms", ms}};
                rec["mfu"] = mfu >= 0 ? nlohmann::json(mfu) : nlohmann::json(nullptr);
                if (verdict.skip) rec["skipped"] = verdict.reason;
                auto z = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
                if (o_.skip_loss_z > 0) rec["loss_z"] = z(verdict.loss_z);
                if (o_.skip_grad_z > 0) rec["grad_norm_z"] = z(verdict.norm_z);
                metrics.log(rec);
            }
            const bool preempted = signalled_on_any_rank(signal_flag.get());  // one collective per step (llmc/preemption.h)
            const bool periodic = o_.checkpoint_every > 0 && ((step + 1) % o_.checkpoint_every == 0 || step + 1 == max_steps);
            if (ckpt && (periodic || preempted)) {
                CheckpointMeta meta = run_id;
                meta.step = step + 1, meta.data = train.position(), meta.guard = guard.state();
                if (metrics.enabled()) meta.metrics_bytes = (int64_t)file_size_or_fail(o_.output_dir + "/metrics.jsonl");
                ckpt->save(meta, o_.keep_last, o_.keep_every);
                if (rank == 0) std::printf("checkpoint %s\n", checkpoint_dir(o_.output_dir, step + 1).c_str());
            }
            if (preempted) return stop_preempted(step + 1, max_steps);
        }
        if (rank == 0 && !o_.output_dir.empty()) {
            std::string path = o_.output_dir + "/model.bin";
            write_model_file(path, cfg, model.get_params().data(), false);
            std::printf("wrote %s\n", path.c_str());
        } else if (rank != 0 && !o_.output_dir.empty()) {
            model.get_params();  // keeps ranks in step with rank 0's synchronising download
        }
        return 0;
    }

private:
    static int width(int n) { return (int)std::to_string(n).size(); }

    // A loader over `pattern`; its errors name the flag (-i or -j) the data came from.
    std::unique_ptr<DataLoader> open_loader(const char* flag, const std::string& pattern, size_t seqs_per_step,
                                            bool shuffle) {
        try {
            return std::make_unique<DataLoader>(pattern, (size_t)o_.batch_size, (size_t)o_.seq_len, comm_.rank(),
                                                comm_.world_size(), seqs_per_step, shuffle, o_.seed);
        } catch (const Error& e) {
            fail("%s: %s%s", flag, e.what(),
                 std::string(flag) == "-j" ? " (-v 0 turns validation off)" : "");
        }
    }

    // What this run checks in a checkpoint's metadata beyond its own consistency (checkpoint.h): the flags and data
    // it was written with (ResumeMismatch), that its data position is where its step leaves the data, a step guard
    // state that fits, and (rank 0) that metrics.jsonl still holds its steps' lines up to metrics_bytes. "" or the
    // problem, naming the file and the field.
    std::string validate_checkpoint(const CheckpointMeta& m, const CheckpointMeta& run_id, const DataLoader& train) {
        const std::string dir = checkpoint_dir(o_.output_dir, m.step), meta_path = dir + "/meta.json";
        check_resume_compatible(m, run_id, dir);
        const std::string bad_position = train.check_position(m.data);
        if (!bad_position.empty()) return meta_path + ": " + bad_position;
        const LoaderPosition want = train.position_after(run_id.overfit ? 1 : (uint64_t)m.step);
        if (!(m.data == want)) {
            char buf[320];
            std::snprintf(buf, sizeof buf, "%s: field \"data\" (epoch %llu, shard %llu, sequence %llu) is not where %d "
                          "steps leave the data (epoch %llu, shard %llu, sequence %llu)",
                          meta_path.c_str(), (unsigned long long)m.data.epoch, (unsigned long long)m.data.shard,
                          (unsigned long long)m.data.sequence, m.step, (unsigned long long)want.epoch,
                          (unsigned long long)want.shard, (unsigned long long)want.sequence);
            return buf;
        }
        try {
            StepGuard g(o_.skip_loss_z, o_.skip_grad_z, o_.max_bad_steps);
            g.set_state(m.guard);
        } catch (const std::exception& e) {
            return meta_path + ": field \"guard\": " + e.what();
        }
        if (comm_.rank() == 0) return check_metrics_prefix(o_.output_dir + "/metrics.jsonl", m.metrics_bytes, m.step);
        return "";
    }

    // Collective: every rank stops, with the same message, where its description of the run differs from rank 0's
    // (llmc/run_identity.h).
    void agree(const RunIdentity& id) {
        agree_on_identity(id, comm_.world_size(),
                          [&](const std::vector<uint64_t>& mine) { return all_gather_u64(be_, comm_, mine); });
    }

    // Collective, at the end of each step: whether any rank has received a preemption signal (a max over ranks of
    // 0 or 1 in `flag`, one float on the device), so that every rank saves and stops at the same step.
    bool signalled_on_any_rank(float* flag) {
        float mine = PreemptionHandlers::received() != 0 ? 1.0f : 0.0f;
        if (comm_.world_size() == 1) return mine != 0.0f;
        be_.copy_to_device(flag, &mine, sizeof(float));
        comm_.all_reduce(flag, 1, DType::F32, ReduceOp::Max, be_.main_stream());
        be_.copy_to_host(&mine, flag, sizeof(float));
        return mine != 0.0f;
    }

    // After a preemption signal: the step `step` is saved (when there is an -o); says so and returns the status
    // scripts/autoresume.sh reads as "requeue".
    int stop_preempted(int step, int max_steps) {
        if (comm_.rank() != 0) return EXIT_PREEMPTED;
        const int sig = PreemptionHandlers::received();
        const std::string who = sig ? std::string(signal_name(sig)) + " here" : "a signal on another rank";
        if (o_.output_dir.empty())
            std::printf("preempted  by %s after step %d of %d; no -o, nothing saved; exiting with status %d\n",
                        who.c_str(), step, max_steps, EXIT_PREEMPTED);
        else
            std::printf("preempted  by %s after step %d of %d: every rank saved it in %s; exiting with status %d "
                        "(resume with -y 1)\n", who.c_str(), step, max_steps,
                        checkpoint_dir(o_.output_dir, step).c_str(), EXIT_PREEMPTED);
        std::fflush(stdout);
        return EXIT_PREEMPTED;
    }

    // Before step 1, on every rank (the ranks agreed on the shards' names and sizes already): no token is outside
    // the model's vocabulary. Rank r scans shards r, r + world, ... (each with all its threads); every rank gets
    // every result, so every rank stops with the same message. Returns the data's summary `mine` with the content
    // digest of every shard (checkpoints record it).
    DataSummary check_data(const char* flag, const DataLoader& loader, DataSummary mine, size_t vocab) {
        const int rank = comm_.rank(), world = comm_.world_size();
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
        const std::vector<uint64_t> got = all_gather_u64(be_, comm_, scans);
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

    std::unique_ptr<Tokenizer> load_tokenizer(const GPT2Config& cfg) {
        FILE* f = std::fopen(o_.tokenizer.c_str(), "rb");
        if (!f) {
            std::printf("note: no tokenizer at %s, samples are off (make one with ./gpt2_tokenizer)\n",
                        o_.tokenizer.c_str());
            return nullptr;
        }
        std::fclose(f);
        auto tok = std::make_unique<Tokenizer>(Tokenizer::from_decode_table(o_.tokenizer));
        // Samples start from EOT and may be any id below V: both must be ids the model and the tokenizer know,
        // or the first sample would stop the run.
        const size_t V = cfg.vocab_size;
        if (tok->eot() < 0 || (size_t)tok->eot() >= V || tok->vocab_size() < V) {
            std::printf("note: the tokenizer %s (%zu tokens, EOT %d) does not fit the model's vocabulary of %zu, "
                        "samples are off\n",
                        o_.tokenizer.c_str(), tok->vocab_size(), tok->eot(), V);
            return nullptr;
        }
        return tok;
    }

    // Mean loss per token over the first `windows` windows of -d tokens of the validation data (DataLoader's
    // evaluation pass: the same sequences for any world size). A shard's last window may be partial, so ranks may
    // score fewer than B sequences, or none: each adds its losses scaled by 1 / (tokens scored by all ranks), and
    // the sum over ranks is the mean over every scored token.
    float evaluate(GPT2<Backend>& model, DataLoader& val, size_t windows, size_t grad_accum, float* acc,
                   std::vector<int>& inputs, std::vector<int>& targets) {
        const size_t T = (size_t)o_.seq_len;
        be_.memset_zero(acc, sizeof(float));
        const float scale = 1.0f / (float)(val.eval_sequences(windows) * T);
        for (size_t w = 0; w < windows; w++)
            for (size_t micro = 0; micro < grad_accum; micro++) {
                const size_t rows = val.read_eval_batch(w, micro, inputs.data(), targets.data());
                if (rows == 0) continue;
                model.forward(inputs.data(), targets.data(), rows, T, 0.0f);
                model.accumulate_loss(acc, scale);
            }
        comm_.all_reduce(acc, 1, DType::F32, ReduceOp::Sum, be_.main_stream());
        float loss = 0;
        be_.copy_to_host(&loss, acc, sizeof(float));
        return loss;
    }

    // Rank 0 continues an <|endoftext|> prompt for -g tokens (no KV cache: one forward over the prefix per token).
    void sample(GPT2<Backend>& model, const Tokenizer& tok, int step) {
        const size_t T = model.max_seq_len();
        SplitMix64 rng(o_.seed ^ (0x53414D50ull + (uint64_t)step));  // a stream per step: resumes reproduce samples
        std::vector<int> ids = {tok.eot()};
        std::string text;
        for (int i = 0; i < o_.gen_tokens; i++) {
            size_t start = ids.size() > T ? ids.size() - T : 0;
            size_t len = ids.size() - start;
            model.forward(ids.data() + start, nullptr, 1, len, 0.0f);
            std::vector<float> row = model.get_logits_row(0, len - 1);
            int next = sample_token(row.data(), model.config().vocab_size, 1.0f, 0, rng);
            ids.push_back(next);
            if (next == tok.eot()) break;
            text += tok.decode(&next, 1);
        }
        std::printf("---- sample at step %d ----\n%s\n---------------------------\n", step, text.c_str());
        std::fflush(stdout);
    }

    const TrainOptions& o_;
    Backend& be_;
    Comm& comm_;
};

}  // namespace llmc
