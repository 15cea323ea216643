// The training loop, shared by every backend: train_gpt2.cu picks the backend and calls Trainer<Backend>::run().
// The step (micro-steps, gradient reduction, loss, clipping, AdamW, the stream order) is described once, in
// docs/architecture.md ("One training step"); the set-up before step 1 is in llmc/trainer_setup.h and
// llmc/trainer_resume.h.
#pragma once

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "batch_lookahead.h"
#include "checkpoint.h"
#include "cli.h"
#include "comm.h"
#include "gemm_record.h"
#include "logger.h"
#include "model.h"
#include "model_file.h"
#include "outlier.h"
#include "parallel.h"
#include "preemption.h"
#include "run_identity.h"
#include "run_lock.h"
#include "sampler.h"
#include "schedule.h"
#include "test_hooks.h"
#include "tokenizer.h"
#include "trainer_resume.h"
#include "trainer_setup.h"
#include "utf8_stream.h"
#include "validator.h"

namespace llmc {

// What one optimizer step reports.
struct StepStats {
    float loss = 0;  // mean over micro-steps and ranks
    float norm = 0;  // global gradient norm, before clipping
    float lr = 0;
    double ms = 0;   // wall time of the step, host synchronised
    StepVerdict verdict;  // skipped (non-finite or outlier, llmc/outlier.h) or applied
};

template <class Backend>
class Trainer {
public:
    // hooks: a test's (llmc/test_hooks.h); none by default.
    Trainer(const TrainOptions& o, Backend& be, Comm& comm, TestHooks hooks = TestHooks())
        : o_(o), be_(be), comm_(comm), rank_(comm.rank()), hooks_(std::move(hooks)),
          guard_(o.skip_loss_z, o.skip_grad_z, o.max_bad_steps) {}

    int run() {
        // A signal from here on finishes the step and saves instead of killing the run (llmc/preemption.h).
        PreemptionHandlers preemption(parse_preempt_signal(o_.preempt_signal), o_.preempt_grace);
        set_up();
        for (int step = start_step_; step <= max_steps_; step++) {  // `step` optimizer steps are done
            const auto started = std::chrono::steady_clock::now();
            const bool last = step == max_steps_;
            maybe_evaluate(step, last);
            maybe_sample(step, last);
            if (last) break;
            const StepStats stats = train_step(step);
            log_step(step + 1, stats);
            if (!gemm_recorded_) record_gemm_choices(true);
            preemption.step_took(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
            const bool preempted = comm_.any(PreemptionHandlers::received() != 0);  // the same step on every rank
            if (preempted) PreemptionHandlers::step_ended();  // the save may take its time
            maybe_checkpoint(step + 1, preempted);
            if (preempted) return stop_preempted(step + 1);
        }
        save_final_model();
        if (rank_ == 0 && shape_.world > 1) print_traffic();
        if (loop_.show_placement) print_comm_bytes(comm_, dp_->groups());
        return 0;
    }

private:
    // Everything before step 1, in the order its checks fail (llmc/trainer_setup.h, llmc/trainer_resume.h).
    void set_up() {
        shape_ = plan_run(o_, comm_.world_size());
        loop_ = loop_config_for(o_);
        DpGroups groups = make_dp_groups(comm_, o_.shard_group, shape_.zero_stage);  // refuses a bad --shard-group
        const ParallelPlan plan = make_parallel_plan(parallel_options_for(o_), groups.mesh);
        data_ = open_data(o_, be_, comm_, shape_, plan.mesh.dp_rank);
        batches_ = std::make_unique<BatchLookahead>(*data_.train, shape_.B * shape_.T);
        max_steps_ = o_.max_steps > 0 ? o_.max_steps : (int)data_.train->steps_per_epoch();
        agree_and_lock();
        const std::vector<std::string> earlier = refuse_earlier_run(o_);
        if (o_.resume) {  // the ranks see the same checkpoints (a shared -o), so they resume the same one
            RunIdentity checkpoints;
            checkpoints.add_checkpoints(o_.output_dir);
            agree(checkpoints);
        }
        scan_data(be_, comm_, data_, shape_.cfg.vocab_size);
        model_ = make_model(be_, o_, shape_, plan);
        dp_ = make_data_parallel(plan, std::move(groups), be_, *model_, comm_, optim_config_for(o_), o_.seed);
        schedule_ = schedule_for(o_, max_steps_);
        run_id_ = run_identity(o_, shape_, plan, max_steps_, data_.train_summary);
        if (!o_.output_dir.empty())
            ckpt_ = std::make_unique<Checkpointer<Backend>>(o_.output_dir, comm_, *model_, *dp_,
                                                            hooks_.inside_checkpoint);
        const bool resumed = resume_or_start(earlier);
        if (resumed)  // the choices the resumed run made, if it recorded them: reused, not timed again
            be_.load_gemm_choices(read_gemm_choices(gemm_choices_path(o_.output_dir, rank_)));
        std::vector<McExample> hellaswag = read_checked_hellaswag(o_, shape_.cfg.vocab_size, data_.val != nullptr);
        if (o_.sample_every > 0 && rank_ == 0) tokenizer_ = load_tokenizer(o_, shape_.cfg);
        metrics_ = open_metrics(o_, rank_, resumed ? &resumed_ : nullptr);
        flops_token_ = flops_per_token(shape_.cfg, model_->num_params(), shape_.T);
        const std::string fresh = std::string("fresh ") + architecture(shape_.cfg.arch).title + " init";
        const char* origin = shape_.from_file ? o_.model.c_str() : resumed ? "from the checkpoint" : fresh.c_str();
        if (rank_ == 0) print_startup(o_, shape_, *model_, *dp_, *data_.train, schedule_, origin);
        if (o_.show_placement) print_placement(comm_, be_, shape_, *dp_, *data_.train);
        loss_acc_ = std::make_unique<DeviceArray<Backend, float>>(be_, 1);
        if (data_.val)
            validator_ = std::make_unique<Validator<Backend>>(
                be_, comm_, *data_.val, validation_windows(o_, data_.val.get()), shape_.grad_accum, shape_.B, shape_.T,
                loss_acc_->get(), std::move(hellaswag));
    }

    // Rank 0 at the end of a multi-rank run: the bytes it handed to collectives (docs/distributed.md compares them).
    void print_traffic() {
        const CommCounters& c = comm_.counters;
        std::fputs(dp_->traffic_line().c_str(), stdout);
        std::printf("collectives: %llu bytes handed to collectives by rank 0 in %llu calls (all_reduce %llu, reduce "
                    "%llu, all_gather %llu; host channel not counted)\n",
                    (unsigned long long)c.bytes, (unsigned long long)(c.total() - c.host),
                    (unsigned long long)c.all_reduce, (unsigned long long)c.reduce, (unsigned long long)c.all_gather);
    }

    // Every rank agrees on the model, the flags, the data and -o before anything is built or written
    // (llmc/run_identity.h); then rank 0 locks -o for the whole run (llmc/run_lock.h).
    void agree_and_lock() {
        ResolvedRun r;
        r.backend = Backend::name, r.config = shape_.cfg, r.model_from_file = shape_.from_file;
        r.total_batch = (long long)shape_.total_batch, r.max_steps = max_steps_, r.zero_stage = shape_.zero_stage;
        r.train = data_.train_summary, r.val = data_.val_summary;
        agree(identity_of(o_, r));
        if (rank_ == 0 && !o_.output_dir.empty()) {
            make_dirs(o_.output_dir);
            lock_ = RunLock(o_.output_dir);
        }
    }

    // Collective: every rank stops, with the same message, where its description of the run differs from rank 0's.
    void agree(const RunIdentity& id) {
        agree_on_identity(id, comm_.world_size(),
                          [&](const std::vector<uint64_t>& mine) { return comm_.all_gather_host(mine); });
    }

    // After a preemption signal: the step `step` is saved (when there is an -o); says so and returns the status
    // scripts/autoresume.sh reads as "requeue".
    int stop_preempted(int step) {
        if (rank_ != 0) return EXIT_PREEMPTED;
        const int sig = PreemptionHandlers::received();
        std::string who = sig ? std::string(signal_name(sig)) + " here" : "a signal on another rank";
        if (sig == SIGTERM && comm_.info().launcher == "openmpi")  // Open MPI's mpirun turns Ctrl-C into SIGTERM
            who += " (from mpirun: a Ctrl-C or a SIGTERM to it)";
        if (loop_.output_dir.empty())
            std::printf("preempted  by %s after step %d of %d; no -o, nothing saved; exiting with status %d\n",
                        who.c_str(), step, max_steps_, EXIT_PREEMPTED);
        else
            std::printf("preempted  by %s after step %d of %d: every rank saved it in %s; exiting with status %d "
                        "(resume with -y 1)\n", who.c_str(), step, max_steps_,
                        checkpoint_dir(loop_.output_dir, step).c_str(), EXIT_PREEMPTED);
        std::fflush(stdout);
        return EXIT_PREEMPTED;
    }

    // -y 1 with a checkpoint to continue: its parameters, optimizer state, data position and step guard; else the
    // run starts at step 0 (the earlier run's files moved aside). True when resumed.
    bool resume_or_start(const std::vector<std::string>& earlier) {
        start_step_ = o_.resume && ckpt_ ? find_resume_point(o_, comm_, *ckpt_, run_id_, *data_.train, &resumed_) : -1;
        if (start_step_ < 0) {
            start_step_ = 0;
            start_afresh(o_, rank_, earlier);
            return false;
        }
        ckpt_->load(resumed_);
        batches_->set_position(resumed_.data);
        guard_.set_state(resumed_.guard);
        if (rank_ == 0) announce_resume(o_, resumed_, run_id_);
        return true;
    }

    // One optimizer step (docs/architecture.md, "One training step"): step + 1 is the 1-based number of the step.
    StepStats train_step(int step) {
        hooks_.step_starts(rank_, step + 1);
        const auto t0 = std::chrono::steady_clock::now();
        float* loss_acc = loss_acc_->get();
        accumulate_gradients(loss_acc);
        comm_.all_reduce(loss_acc, 1, DType::F32, ReduceOp::Avg, be_.main_stream());
        StepStats s;
        s.lr = learning_rate(schedule_, step);
        be_.copy_to_host(&s.loss, loss_acc, sizeof(float));
        if (hooks_.loss_is_nan(step + 1)) s.loss = NAN;
        s.norm = dp_->grad_norm();
        s.verdict = guard_.judge(step + 1, s.loss, s.norm);
        if (s.verdict.skip) dp_->skip();
        else dp_->apply(s.lr, step + 1);
        dp_->after_step(step + 1, step + 1 == max_steps_);
        be_.synchronize();  // the step is done
        s.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return s;
    }

    // The step's micro-steps: each the next batch, forward, the loss added into loss_acc (on the device, mean over
    // the micro-steps), backward into the strategy's sink.
    void accumulate_gradients(float* loss_acc) {
        if (loop_.overfit_single_batch) batches_->reset();
        be_.memset_zero(loss_acc, sizeof(float));
        const size_t accum = shape_.grad_accum, B = shape_.B, T = shape_.T;
        for (size_t micro = 0; micro < accum; micro++) {
            const BatchLookahead::Batch& batch = batches_->take();
            // The micro-batch's own mean-loss gradient; the strategy divides by accum x ranks in fp32.
            model_->forward(batch.inputs.data(), batch.targets.data(), B, T, 1.0f);
            model_->accumulate_loss(loss_acc, 1.0f / (float)(B * T * accum));
            const bool last_micro = micro + 1 == accum;  // the strategy decides when gradients cross the ranks
            model_->backward(dp_->grad_sink(last_micro));
            dp_->end_micro_step(last_micro);
            batches_->read_ahead();  // the next micro-batch, read while the device computes this one
        }
    }

    // At step 0, every -v steps and after the last step: validation loss (and HellaSwag), all-reduced.
    void maybe_evaluate(int step, bool last) {
        if (!validator_ || !(last || step % loop_.val_every == 0)) return;
        const Evaluation e = validator_->evaluate(*model_);
        if (rank_ != 0) return;
        nlohmann::json rec = {{"step", step}, {"val_loss", e.val_loss}};
        char hs_s[48] = "";
        if (e.has_hellaswag) {
            rec["hellaswag_acc"] = e.hellaswag_acc;
            std::snprintf(hs_s, sizeof hs_s, " | hellaswag %.4f", e.hellaswag_acc);
        }
        std::printf("step %*d/%d | val loss %.6f%s\n", width(max_steps_), step, max_steps_, e.val_loss, hs_s);
        metrics_.log(rec);
    }

    // Rank 0, every -s steps and after the last step: continues an <|endoftext|> prompt for -g tokens (no KV cache:
    // one forward over the prefix per token).
    void maybe_sample(int step, bool last) {
        const int every = loop_.sample_every;
        if (!tokenizer_ || every <= 0 || !(last || (step > 0 && step % every == 0))) return;
        const Tokenizer& tok = *tokenizer_;
        const size_t T = model_->max_seq_len();
        SplitMix64 rng(loop_.seed ^ (0x53414D50ull + (uint64_t)step));  // a stream per step: resumes reproduce samples
        std::vector<int> ids = {tok.eot()};
        std::string text;
        Utf8Stream utf8;  // a character split across tokens is printed whole, invalid bytes as U+FFFD
        for (int i = 0; i < loop_.gen_tokens; i++) {
            const size_t start = ids.size() > T ? ids.size() - T : 0, len = ids.size() - start;
            model_->forward(ids.data() + start, nullptr, 1, len, 0.0f);
            std::vector<float> row = model_->get_logits_row(0, len - 1);
            const int next = sample_token(row.data(), model_->config().vocab_size, 1.0f, 0, rng);
            ids.push_back(next);
            if (next == tok.eot()) break;
            text += utf8.push(tok.decode(&next, 1));
        }
        text += utf8.finish();
        std::printf("---- sample at step %d ----\n%s\n---------------------------\n", step, text.c_str());
        std::fflush(stdout);
    }

    // Rank 0: the console line (every --log-every steps, the first step and every skipped one) and metrics.jsonl's
    // line of step `step` (1-based). Throughput is measured over the step's wall time; the first step warms up and
    // is left out of the ETA's average.
    void log_step(int step, const StepStats& s) {
        if (step - 1 > start_step_) total_ms_ += s.ms, timed_steps_++;
        const double avg_ms = timed_steps_ ? total_ms_ / timed_steps_ : s.ms;
        const double tok_s = (double)shape_.total_batch / (s.ms / 1e3);
        const double peak = be_.peak_flops() * shape_.world;
        const double mfu = peak > 0 ? flops_token_ * tok_s / peak : -1.0;
        if (rank_ != 0) return;
        if (step % loop_.log_every == 0 || step - 1 == start_step_ || s.verdict.skip) {
            char mfu_s[32] = "";
            if (mfu >= 0) std::snprintf(mfu_s, sizeof mfu_s, " | MFU %5.1f%%", 100 * mfu);
            std::printf("step %*d/%d | loss %.6f | norm %7.4f | lr %.2e | %7.1f ms | %8.0f tok/s%s | ETA %s%s\n",
                        width(max_steps_), step, max_steps_, s.loss, s.norm, s.lr, s.ms, tok_s, mfu_s,
                        format_duration(avg_ms * (max_steps_ - step) / 1e3).c_str(),
                        s.verdict.skip ? (" | SKIPPED (" + s.verdict.reason + ")").c_str() : "");
            std::fflush(stdout);
        }
        nlohmann::json rec = {{"step", step}, {"train_loss", s.loss}, {"lr", s.lr}, {"grad_norm", s.norm},
                              {"tokens_per_sec", tok_s}, {"ms", s.ms}};
        rec["mfu"] = mfu >= 0 ? nlohmann::json(mfu) : nlohmann::json(nullptr);
        if (s.verdict.skip) rec["skipped"] = s.verdict.reason;
        auto z = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
        if (loop_.skip_loss_z > 0) rec["loss_z"] = z(s.verdict.loss_z);
        if (loop_.skip_grad_z > 0) rec["grad_norm_z"] = z(s.verdict.norm_z);
        metrics_.log(rec);
    }

    // Every -n steps, at the last step and after a preemption signal (`now`; collective): checkpoint `step` (1-based,
    // done) with where the data and the step guard stand and how long metrics.jsonl is.
    void maybe_checkpoint(int step, bool now) {
        const int every = loop_.checkpoint_every;
        const bool periodic = every > 0 && (step % every == 0 || step == max_steps_);
        if (!ckpt_ || !(periodic || now)) return;
        CheckpointMeta meta = run_id_;
        meta.step = step, meta.data = batches_->position(), meta.guard = guard_.state();
        if (metrics_.enabled()) meta.metrics_bytes = metrics_.bytes();
        ckpt_->save(meta, loop_.keep_last, loop_.keep_every);
        record_gemm_choices(false);  // plans built since the first step (an evaluation's shapes) are kept too
        if (rank_ == 0) std::printf("checkpoint %s\n", checkpoint_dir(loop_.output_dir, step).c_str());
    }

    // The GEMM choices: in the log after the first step (rank 0), and in -o (every rank its own file) for a resume.
    void record_gemm_choices(bool print) {
        gemm_recorded_ = true;
        const std::string text = be_.gemm_choices();
        if (print && rank_ == 0 && !text.empty()) print_gemm_choices(text, loop_.gemm_tuning);
        if (!loop_.output_dir.empty() && !text.empty())
            write_gemm_choices(gemm_choices_path(loop_.output_dir, rank_), text);
    }

    // -o: rank 0 writes the final parameters to model.bin (fp32); the others take part in the download.
    void save_final_model() {
        if (loop_.output_dir.empty()) return;
        if (rank_ != 0) {
            model_->get_params();  // keeps ranks in step with rank 0's synchronising download
            return;
        }
        const std::string path = loop_.output_dir + "/model.bin";
        write_model_file(path, shape_.cfg, model_->get_params().data(), false);
        std::printf("wrote %s\n", path.c_str());
    }

    static int width(int n) { return (int)std::to_string(n).size(); }

    const TrainOptions& o_;                          // read by the set-up only
    LoopConfig loop_;                                // what the loop reads (llmc/trainer_setup.h)
    Backend& be_;
    Comm& comm_;
    const int rank_;
    const TestHooks hooks_;
    RunShape shape_;                                 // model shape, batch arithmetic, ZeRO stage
    RunLock lock_;                                   // rank 0: the lock on -o, held for the whole run
    RunData data_;                                   // training and validation loaders
    std::unique_ptr<BatchLookahead> batches_;        // the training loader's micro-batches, one read ahead
    std::unique_ptr<Model<Backend>> model_;
    std::unique_ptr<DataParallel<Backend>> dp_;      // the data-parallel strategy of the run's ParallelPlan
    int max_steps_ = 0;
    ScheduleConfig schedule_;
    CheckpointMeta run_id_;                          // what this run is: a checkpoint must agree to be resumed
    std::unique_ptr<Checkpointer<Backend>> ckpt_;    // null without -o
    StepGuard guard_;                                // skips non-finite and outlier steps (llmc/outlier.h)
    int start_step_ = 0;
    CheckpointMeta resumed_;                         // the checkpoint resumed from, if any
    std::unique_ptr<Tokenizer> tokenizer_;           // rank 0 with -s, when one fits the model
    MetricsLogger metrics_;                          // rank 0 with -o
    double flops_token_ = 0;
    bool gemm_recorded_ = false;
    std::unique_ptr<DeviceArray<Backend, float>> loss_acc_;
    std::unique_ptr<Validator<Backend>> validator_;  // null with -v 0
    double total_ms_ = 0;
    int timed_steps_ = 0;
};

}  // namespace llmc
