// The trainer's command line: llm.c's short flags (so its run scripts work) plus a long name for each.
//
// cxxopts takes one-letter short options; llm.c also has two-letter ones (-nk, -nm, -sl, -sg, -pi, -pn, -pr, -pg,
// -pf, -ps). normalize_args() rewrites exactly those tokens to their long names before parsing. `-h` is --help
// here; HellaSwag evaluation has the long flag --hellaswag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct TrainOptions {
    // data and model
    std::string train_data = "data/brown/brown_train_*.bin";  // -i
    std::string val_data = "data/brown/brown_val_*.bin";      // -j
    std::string model = "d12";                                // -e: model file or descriptor
    std::string output_dir;                                   // -o ("" = no output files)
    std::string tokenizer = "data/gpt2/gpt2_tokenizer.bin";       // decode table for samples
    // batch
    int batch_size = 4;          // -b (per rank, per micro-step)
    int seq_len = 1024;          // -t
    long long total_batch = -1;  // -d tokens per optimizer step (-1: B*T*world, no accumulation)
    int max_steps = -1;          // -x (-1: one epoch of the training data)
    // the recipe (llmc/recipe.h): gpt2 (llm.c's) or speedrun (the NanoGPT speedrun's: its defaults replace the
    // optimisation defaults below that the command line does not set, llmc/cli.cpp)
    std::string recipe = "gpt2";        // --recipe
    float embed_lr = 0.3f;              // --embed-lr: speedrun, Adam on the embedding
    float head_lr = 0.002f;             // --head-lr: speedrun, Adam on the head
    int muon_momentum_warmup = 0;       // --muon-momentum-warmup: steps of Muon's momentum 0.85 -> 0.95 (0: off)
    float scalar_lr = 0.02f;            // --scalar-lr: speedrun, Adam on the value-residual and skip scalars
    int logit_softcap = 0;              // --logit-softcap: 1 = the logits 30 tanh(z / 30) (a new model's architecture)
    int value_residual = 0;             // --value-residual: 1 = v mixed with layer 0's (a new model's architecture)
    int embed_skip = 0;                 // --embed-skip: 1 = each layer's input mixed with x0 (a new model's architecture)
    float decay_fraction = 0.2f;        // --decay-fraction: -k wsd's share of the steps spent decaying
    // optimisation
    float learning_rate = 3e-4f;        // -l
    int warmup_steps = 0;               // -u
    float final_lr_fraction = 0.1f;     // -q (llm.c's default is 1.0, which makes -k cosine flat; 0.1 as nanoGPT)
    std::string lr_schedule = "cosine"; // -k
    float weight_decay = 0.0f;          // -c
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, grad_clip = 1.0f;
    uint64_t seed = 1337;
    bool shuffle = true;
    // evaluation, sampling, logging
    int val_every = 20;      // -v (0: off)
    int val_batches = 20;    // -m (-1: the whole val set)
    int sample_every = 20;   // -s (0: off)
    int gen_tokens = 64;     // -g
    int log_every = 1;
    // checkpoints and memory
    int checkpoint_every = 0;   // -n
    int keep_last = 0;          // -nk
    int keep_every = 0;         // -nm
    int resume = 0;             // -y
    bool start_over = false;    // --start-over: move an earlier run's files in -o aside (llmc/output_dir.h)
    int zero_stage = -1;        // -z (-1: 1 with several ranks, 0 with one)
    int recompute = 0;          // -r
    int gemm_tuning = 1;        // --gemm-tuning
    int bias_grad_epilogue = 1; // --bias-grad-epilogue
    int classifier_chunk = 4096;  // --classifier-chunk: rows per classifier chunk (the logits buffer's rows)
    int master_weights = 1;     // -w
    int overfit_single_batch = 0;  // -a
    bool dry_run = false;       // --dry-run: print the device memory plan per rank and exit
    float skip_loss_z = 0.0f, skip_grad_z = 0.0f;  // -sl, -sg
    int max_bad_steps = 5;      // stop after this many non-finite steps in a row
    // distributed
    std::string init_method = "auto";  // -pi
    std::string reduce_dtype = "fp32";  // --reduce-dtype: the gradient reduction's type (accumulation stays fp32)
    // --sync-every H (0: off): each rank trains its own replica for H steps, then an outer Nesterov step on the
    // averaged parameter change (llmc/outer_sync.h); --outer-lr, --outer-momentum: that step's rate and momentum
    int sync_every = 0;
    float outer_lr = 0.7f, outer_momentum = 0.9f;
    std::string shard_group;           // --shard-group: ranks per sharding group, "node", or "" (every rank)
    int num_processes = -1, process_rank = -1, gpus_per_node = -1;  // -pn -pr -pg
    std::string rendezvous_dir;        // -pf
    std::string server_ip;             // -ps
    std::string hellaswag;             // --hellaswag
    // --comm-timeout: a collective that makes no progress for this long stops every rank (llmc/watchdog.h); 0: off.
    // Default: $LLMC_COMM_TIMEOUT, else 300.
    double comm_timeout = 300;
    int threads = 0;
    bool show_placement = false;       // --show-placement: every rank prints where it sits and what it owns
    // --preempt-signal: besides SIGTERM and SIGINT, this signal saves a checkpoint and stops (llmc/preemption.h)
    std::string preempt_signal = "USR1";
    // --preempt-grace: after a signal, the step must end within this many seconds (or 3 times the slowest step so
    // far, if longer), or the process stops without saving it (llmc/preemption.h); 0: wait for ever
    double preempt_grace = 120;
};

// Rewrites llm.c's two-letter short flags to long options; everything else is passed through.
std::vector<std::string> normalize_args(int argc, char** argv);
// Parses and validates the flags that can be checked without the model or the data. Prints --help (naming the
// program as it was run) and exits 0 when asked; with no flag at all, prints a usage with examples for `backend`'s
// build ("cpu" or "cuda") on stderr and exits 2; fails (llmc::Error) naming the flag on anything unknown or invalid.
TrainOptions parse_train_options(int argc, char** argv, const char* backend = "cpu");

}  // namespace llmc
