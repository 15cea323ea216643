#!/usr/bin/env bash
# The checks that need a real GPU, on a GPU machine (dev/gpu/pack.sh must have run on the build machine first; its
# .gpu_bundle/ is copied along). Data, runs and checkpoints go to a scratch folder; the results are two files in $OUT
# (if set, else ./gpu_results): summary.txt and logs.tgz (every log and metrics.jsonl), both rewritten after each
# check, so a call stopped from outside still returns what it finished.
#
#   bash dev/gpu/run_checks.sh [--from NAME | --only NAME[,NAME...]] [--list]
#
# The checks run in order of importance, each even when an earlier one failed; the summary says which passed.
# A time budget (GPU_CHECKS_BUDGET_S, default 540 s, inside a 10-minute call) bounds the whole call: a check that
# would start with less than 30 s left is not started, and the summary's last line names the command that goes on from
# there (--from NAME). Each check has its own limit (GPU_STEP_TIMEOUT_S, default 300 s, or what is left of the
# budget), so a hang costs one check, not the call. --list prints the checks' names in order.
#
# What they are (docs/benchmarks.md, "GPU"):
#   - ./test_gpt2 against the PyTorch references (bf16 tolerances); compute-sanitizer memcheck, racecheck and
#     synccheck on ./test_gpt2 (small reference), and memcheck on the attention benchmark at B = 1 (its backward in
#     3 passes of 4 heads in the trainer's workspace: the multi-pass path that ./test_gpt2's small shapes do not reach)
#   - one NCCL rank end to end: ./train_gpt2 on synthetic shards, with checkpoints and a resume that must reuse the
#     run's GEMM algorithm choices
#   - GPT-2 124M throughput: ./train_gpt2 -e d12 -t 1024 at B = 16, 32, 64 (tokens/s, MFU, peak memory) on uniform
#     random tokens; at B = 64 on real text (the Brown shards: skewed token frequencies, which the encoder backward
#     must handle as fast), with --gemm-tuning 0 (the tuning's gain), and with the classifier in one chunk of all rows
#     (the chunking's gain in time and memory); the --dry-run plan beside the measured peak
#   - the speedrun recipe: ./test_gpt2 --speedrun-ref (its model and optimizers against the PyTorch reference; under
#     memcheck and racecheck too; memcheck on two training steps at its opt-in shapes) and 18 steps at GPT-2 124M's
#     width on real text, with and without the record-9 options (the loss falls; step time and peak memory); its
#     kernels' benchmark (dev/cuda/speedrun.cu)
#   - the same model in PyTorch (torch.compile, bf16 autocast, flash attention) in the same call
#   - the attention benchmark (it checks itself against a plain GPU reference first, then times this GPU's kernels,
#     the recomputing and 16-rows-per-warp backwards with the same bits checked, and the kernels from before the
#     head-major grid) and PyTorch's scaled_dot_product_attention at the same shapes (flash, cuDNN and
#     memory-efficient backends, each forced)
#   - the other kernel benchmarks (dev/cuda): GEMM tuning and epilogues, classifier, column sums, the host side
#     (one-rank NCCL, pageable uploads), layernorm, ...;
#     dev/cuda/cublaslt_rules (a MISMATCH line means the simulator's cuBLASLt is too lax)
#   - the simulator's device profile and resource check against the driver (dev/gpu/driver_check.py), the SASS
#     check with the toolkit's cuobjdump
#   - ZeRO-2's bucket buffers and events against ZeRO-1 on the device, with peak memory
#   - with 2 or more GPUs: the NCCL collectives' watchdog; with 4: hybrid sharding against flat ZeRO-1
set -u
cd "$(dirname "$0")/../.."

FROM="" ONLY="" LIST=0
while [ $# -gt 0 ]; do
    case "$1" in
        --from) FROM="${2:-}"; shift 2 || { echo "error: --from needs a check's name (see --list)" >&2; exit 2; } ;;
        --only) ONLY="${2:-}"; shift 2 || { echo "error: --only needs check names (see --list)" >&2; exit 2; } ;;
        --list) LIST=1; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "error: unknown argument '$1' (usage: run_checks.sh [--from NAME | --only NAME,...] [--list])" >&2
           exit 2 ;;
    esac
done
[ -n "$FROM" ] && [ -n "$ONLY" ] && { echo "error: --from and --only exclude each other" >&2; exit 2; }

export B=${GPU_BUNDLE:-.gpu_bundle}
export RES=${OUT:-gpu_results}
export WORK=${GPU_WORK:-/tmp/gpu_work}
export LOGS="$WORK/logs"
export summary="$RES/summary.txt"
BUDGET=${GPU_CHECKS_BUDGET_S:-540}
STEP_LIMIT=${GPU_STEP_TIMEOUT_S:-300}
MIN_LEFT=30
export TR="$WORK/data/syn_train_*.bin" VA="$WORK/data/syn_val_*.bin"

gpu_count() { nvidia-smi -L 2>/dev/null | grep -c GPU; }

# A check that cannot run here exits with this status and says why on its last line (reported as skipped).
SKIP=77

# ---- the checks' building blocks -------------------------------------------------------------------------------------

with_peak_memory() {  # NAME CMD...: run CMD; its peak device memory (nvidia-smi every 200 ms) goes to the summary
    local name="$1"; shift
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$LOGS/mem_$name.txt" 2>/dev/null &
    local sampler=$!
    "$@"
    local rc=$?
    # A command shorter than nvidia-smi's start-up would leave no sample: wait up to 2 s for the first one.
    for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$LOGS/mem_$name.txt" ] && break; sleep 0.2; done
    kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
    echo "$name peak device memory: $(sort -n "$LOGS/mem_$name.txt" | tail -1) MiB" >>"$summary"
    return $rc
}

train_124M() {  # RUN-NAME EXTRA-ARGS...: 20 steps of GPT-2 124M at T = 1024 on the synthetic shards (or TRAIN, VAL)
    local name="$1"; shift
    with_peak_memory "$name" "$B/bin/train_gpt2" -i "${TRAIN:-$TR}" -j "${VAL:-$VA}" -e d12 -t 1024 -x 20 -v 0 -s 0 \
        -o "$WORK/$name" "$@" 2>&1 | tee "$WORK/$name.out"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || return "$rc"
    no_gemm_fallbacks "$WORK/$name.out"
}

no_gemm_fallbacks() {  # LOG: a fused epilogue cuBLASLt declined, or a candidate it refused, costs step time: a failure
    local found
    found=$(grep -E "cuBLASLt declined|cublasLtMatmul refused" "$1") || return 0
    echo "FAIL: $(wc -l <<<"$found") GEMM fallback(s), the first: $(head -n 1 <<<"$found")"
    return 1
}

# The trainer at a GPT-2 width (C = 768, head size 64) and T = 256, where the kernels that opt in to more than 48 KiB of
# shared memory run (test_gpt2's small shapes reach none of them); two layers, two steps, no tuning (each timed
# candidate would run under the tool too).
memcheck_opt_in() {
    sanitizer memcheck "$B/bin/train_gpt2" -i "$TR" -j "$VA" -e "L=2,NH=12,C=768,T=256,V=50257" -b 2 -t 256 -x 2 \
        -v 0 -s 0 --gemm-tuning 0 -o "$WORK/memcheck_opt_in"
}

# The speedrun recipe's kernels at its own opt-in shapes (6 heads of 128 at C = 768, every record-9 option on).
memcheck_speedrun_opt_in() {
    sanitizer memcheck "$B/bin/train_gpt2" -i "$TR" -j "$VA" -e "L=2,NH=6,C=768,T=256,V=50257" --recipe speedrun \
        --logit-softcap 1 --value-residual 1 --embed-skip 1 -b 2 -t 256 -x 2 -v 0 -s 0 --gemm-tuning 0 \
        -o "$WORK/memcheck_speedrun_opt_in"
}

sanitizer() {  # TOOL [PROGRAM ARGS...]: ./test_gpt2 on the small reference unless a program is named
    command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer is not on this machine"; return $SKIP; }
    local tool="$1"; shift
    [ $# -gt 0 ] || set -- "$B/bin/test_gpt2" --ref "$B/ref/small"
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$@"
}

gemm_choices() { grep '^gemm-choice' "$1" | sed 's/ : \([0-9]* [0-9]* [-0-9]* [-0-9]*\) [-0-9.]* : / : \1 : /'; }

gemm_choices_reused() {  # the resume reused the first run's choices: the same lines without timing, none timed (ms -1)
    local first="$LOGS/nccl_one_rank_train.log" resumed="$LOGS/nccl_one_rank_resume.log"
    [ -n "$(gemm_choices "$first")" ] || { echo "no gemm-choice lines in $first"; return 1; }
    [ "$(gemm_choices "$first")" == "$(gemm_choices "$resumed")" ] ||
        { echo "the resume chose other GEMM algorithms"; return 1; }
    if grep '^gemm-choice' "$resumed" | grep -vq ' -1.0000 : '; then echo "the resume timed a GEMM plan"; return 1; fi
    echo "the resume reused all $(gemm_choices "$first" | wc -l) GEMM choices"
}

# One NCCL rank end to end (LLMC_NCCL_ONE_RANK=1: a real NCCL communicator, the file rendezvous and the watchdog,
# which one rank otherwise skips): 20 steps with checkpoints, then a resume to step 30 that must reuse the GEMM
# choices. One check, since the resume needs the first run's checkpoint (a later call with --from starts on a bare
# machine).
nccl_one_rank() {
    local args=(-i "$TR" -j "$VA" -e d6 -b 8 -t 512 -v 10 -m 2 -s 0 -n 10 -o "$WORK/run_d6" -pi fs -pf "$WORK/rv_d6"
                --show-placement)
    mkdir -p "$WORK/rv_d6"
    export LLMC_NCCL_ONE_RANK=1
    "$B/bin/train_gpt2" "${args[@]}" -x 20 >"$LOGS/nccl_one_rank_train.log" 2>&1 ||
        { echo "the first run failed (nccl_one_rank_train.log)"; return 1; }
    grep -q "^placement: .* | comm nccl$" "$LOGS/nccl_one_rank_train.log" ||
        { echo "the run did not use NCCL (its placement line does not say 'comm nccl')"; return 1; }
    "$B/bin/train_gpt2" "${args[@]}" -x 30 -y 1 >"$LOGS/nccl_one_rank_resume.log" 2>&1 ||
        { echo "the resume failed (nccl_one_rank_resume.log)"; return 1; }
    gemm_choices_reused && no_gemm_fallbacks "$LOGS/nccl_one_rank_train.log"
}

kernel_bench() {  # NAME: one dev/cuda benchmark from the bundle
    [ -x "$B/bin/$1" ] || { echo "$B/bin/$1 is not in the bundle"; return $SKIP; }
    "$B/bin/$1"
}

# The NCCL watchdog on real GPUs (needs 2 GPUs, NCCL refuses two ranks on one): two processes started by hand
# (torchrun-style variables, -pi fs: this machine has no MPI). NAME EXPECTED-RANK0-STATUS EXTRA-ENV-FOR-RANK-1...
nccl_pair() {
    local name="$1" expect="$2"; shift 2
    [ "$(gpu_count)" -ge 2 ] || { echo "needs 2 GPUs"; return $SKIP; }
    local rv="$WORK/rv_$name"; mkdir -p "$rv"
    local args=(-i "$TR" -j "$VA" -e d6 -b 4 -t 256 -d 2048 -x 10 -v 0 -s 0 --comm-timeout 5 -pi fs -pf "$rv")
    env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 LLMC_RUN_ID="$name" "$@" \
        "$B/bin/train_gpt2" "${args[@]}" -o "$WORK/$name" >"$LOGS/${name}_rank1.log" 2>&1 &
    local p1=$!
    env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 LLMC_RUN_ID="$name" \
        timeout 120 "$B/bin/train_gpt2" "${args[@]}" -o "$WORK/$name" >"$LOGS/${name}_rank0.log" 2>&1
    local rc=$?
    kill -KILL $p1 2>/dev/null; wait $p1 2>/dev/null
    echo "rank 0 exited with status $rc (expected $expect)"
    [ "$rc" -eq "$expect" ]
}

watchdog_names_stopped_rank() {  # rank 1 stops itself before step 3: rank 0 must exit 1 within seconds, naming rank 1
    nccl_pair nccl_watchdog_stopped_rank 1 LLMC_TEST_STOP_RANK=1:3 || return $?
    grep -m1 'comm watchdog' "$LOGS/nccl_watchdog_stopped_rank_rank0.log"
}

# Hybrid sharding on real NCCL (needs 4 GPUs): --shard-group 2 (groups made by ncclCommSplit, gradient shards
# all-reduced across them) against flat ZeRO-1 on the same 4 ranks. The runs differ only in the order of the fp32
# gradient sums: test/e2e/hybrid_shard_sim_test.sh's tolerances (losses 1e-5, norms 1e-4, parameters 2 lr x steps =
# 6e-3 at the default lr 3e-4 over 10 steps).
four_ranks() {  # NAME TRAINER-ARGS...
    local name="$1"; shift
    local rv="$WORK/rv_$name" pids=() rc=0; mkdir -p "$rv"
    local args=(-i "$TR" -j "$VA" -e d6 -b 4 -t 256 -d 4096 -x 10 -v 5 -m 2 -s 0 -pi fs -pf "$rv" "$@")
    for r in 3 2 1 0; do
        env RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 LLMC_RUN_ID="$name" \
            timeout 300 "$B/bin/train_gpt2" "${args[@]}" -o "$WORK/$name" >"$LOGS/${name}_rank$r.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return $rc
}

hybrid_matches_flat() {
    [ "$(gpu_count)" -ge 4 ] || { echo "needs 4 GPUs"; return $SKIP; }
    four_ranks hybrid_flat -z 1 || { echo "the flat ZeRO-1 run failed"; return 1; }
    four_ranks hybrid_groups -z 1 --shard-group 2 || { echo "the --shard-group 2 run failed"; return 1; }
    python3 test/helpers/compare_runs.py "$WORK/hybrid_flat" "$WORK/hybrid_groups" 1e-5 6e-3 1e-4
}

# ZeRO-2's bucket buffers on real streams and events (one rank: the pool's reuse and its event waits run on the
# device). One micro-step: ZeRO-2 does ZeRO-1's arithmetic, so bit-identical. Four micro-steps for 3 steps: the sums
# over micro-steps are taken in another order (in the bucket buffers vs in the cuBLASLt epilogue), so losses within
# 1e-4 and grad norms 1e-3. Parameters: AdamW moves an element whose gradient is rounding noise by up to lr per step
# either way, 2 x (3e-4 + 2.33e-4 + 9.75e-5) = 1.3e-3 over the 3 steps; and model.bin holds the bf16 parameters,
# whose stochastic rounding flips to the other neighbour where the fp32 master weights differ slightly: one bf16 ulp,
# at most 2^-7 of the value (3.9e-3 at the layernorm gains just below 1, seen on an H200). So |a - b| <= 1.3e-3 +
# 2^-7 max(|a|, |b|). Peak memory: at one rank ZeRO-2's accumulator is full-size, so it needs the bucket pool
# (204.5 MiB for d12) more than ZeRO-1; the saving starts at 2 ranks (docs/distributed.md).
zero_run() {  # STAGE MICRO-STEPS
    local name="zero$1_d12_acc$2"
    with_peak_memory "$name" "$B/bin/train_gpt2" -i "$TR" -j "$VA" -e d12 -b 16 -t 1024 -d $((16 * 1024 * $2)) -x 3 \
        -v 0 -s 0 -z "$1" -o "$WORK/$name"
}
zero2_against_zero1() {  # ACC TOLERANCES...
    local acc="$1"; shift
    zero_run 1 "$acc" && zero_run 2 "$acc" || return 1
    python3 test/helpers/compare_runs.py "$WORK/zero1_d12_acc$acc" "$WORK/zero2_d12_acc$acc" "$@"
}

# The speedrun recipe at GPT-2 124M's width (docs/speedrun.md; the records' 6 heads of 128): 18 steps at B = 64 on the
# Brown shards, the shape of the GPT-2 runs, so the step times compare. 18 steps of 65,536 tokens are one pass over
# the 1.24M-token train shard, so each step's train loss is taken on text the model has not seen: it must fall (the
# mean of the last 3 below the first step's by 1.0). No validation: the Brown val shard (65,493 tokens) is short of
# one B = 64 batch. Then the same with the record-9 options (soft-capped logits, value residual, embedding skip).
speedrun_124M() {  # RUN-NAME EXTRA-ARGS...
    local name="$1"; shift
    with_peak_memory "$name" "$B/bin/train_gpt2" -i "$B/data/brown_train_*.bin" --recipe speedrun \
        -e "L=12,NH=6,C=768" -b 64 -t 1024 -x 18 -v 0 -s 0 -o "$WORK/$name" "$@" 2>&1 | tee "$WORK/$name.out"
    [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
    no_gemm_fallbacks "$WORK/$name.out" || return 1
    python3 - "$WORK/$name/metrics.jsonl" <<'PY'
import json, sys
train = [json.loads(l)["train_loss"] for l in open(sys.argv[1]) if "train_loss" in l]
last = sum(train[-3:]) / 3
print(f"speedrun train loss {train[0]:.4f} at step 1, {last:.4f} over the last 3 steps")
sys.exit(0 if last < train[0] - 1.0 else 1)
PY
}

dry_run_plan() {
    local plan; plan=$("$B/bin/train_gpt2" --dry-run -e d12 -b 64 -t 1024) || return 1
    echo "$plan"
    echo "gpt2_124M_B64 planned by --dry-run: $(tail -n 1 <<<"$plan")" >>"$summary"
}

sass_check() {
    command -v cuobjdump >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/cuobjdump ] || \
        { echo "cuobjdump is not on this machine"; return $SKIP; }
    python3 test/e2e/sass_check_test.py "$B/bin/train_gpt2"
}

# ---- the checks, most important first ------------------------------------------------------------------------------
# NAME|COMMAND (one line each; the command is run by bash with the functions above).
CHECKS=(
    "test_gpt2_small|\"\$B/bin/test_gpt2\" --ref \"\$B/ref/small\""
    "test_gpt2_odd|\"\$B/bin/test_gpt2\" --ref \"\$B/ref/odd\""
    "sanitizer_memcheck|sanitizer memcheck"
    "nccl_one_rank_train_resume|nccl_one_rank"
    "test_gpt2_speedrun|\"\$B/bin/test_gpt2\" --speedrun-ref \"\$B/ref/speedrun/speedrun_reference.bin\""
    "gpt2_124M_B64|train_124M run_124M_B64 -b 64"
    "gpt2_124M_B64_bias_grad_sums|train_124M run_124M_B64_bias_grad_sums -b 64 --bias-grad-epilogue 0"
    "dry_run_B64|dry_run_plan"
    "speedrun_124M_B64|speedrun_124M run_speedrun_124M_B64"
    "speedrun_124M_B64_record9|speedrun_124M run_speedrun_124M_B64_record9 --logit-softcap 1 --value-residual 1 --embed-skip 1"
    "kernel_speedrun|kernel_bench speedrun"
    "kernel_matmul|kernel_bench matmul"
    "kernel_cublaslt_rules|kernel_bench cublaslt_rules"
    "kernel_attention|kernel_bench attention"
    "pytorch_sdpa|python3 dev/bench/pytorch_sdpa.py --batch 64"
    "sanitizer_memcheck_opt_in|memcheck_opt_in"
    "sanitizer_racecheck|sanitizer racecheck"
    "sanitizer_synccheck|sanitizer synccheck"
    "sanitizer_memcheck_speedrun|sanitizer memcheck \"\$B/bin/test_gpt2\" --speedrun-ref \"\$B/ref/speedrun/speedrun_reference.bin\""
    "sanitizer_memcheck_speedrun_opt_in|memcheck_speedrun_opt_in"
    "sanitizer_racecheck_speedrun|sanitizer racecheck \"\$B/bin/test_gpt2\" --speedrun-ref \"\$B/ref/speedrun/speedrun_reference.bin\""
    "sanitizer_memcheck_attention|sanitizer memcheck \"\$B/bin/attention\" 1"
    "pytorch_124M_B64|python3 dev/bench/pytorch_gpu_step.py --batch 64 --seq-len 1024 --steps 20"
    "driver_limits_and_resources|python3 dev/gpu/driver_check.py \"\$B/bin/train_gpt2\" \"\$B/launches.tsv\""
    "gpt2_124M_B64_untuned|train_124M run_124M_B64_untuned -b 64 --gemm-tuning 0"
    "gpt2_124M_B64_classifier_chunk65536|train_124M run_124M_B64_classifier_chunk65536 -b 64 --classifier-chunk 65536"
    "kernel_classifier|kernel_bench classifier"
    "kernel_reduce|kernel_bench reduce"
    "kernel_host_side|kernel_bench host_side"
    "gpt2_124M_B64_brown|TRAIN=\"\$B/data/brown_train_*.bin\" VAL=\"\$B/data/brown_val_*.bin\" train_124M run_124M_B64_brown -b 64"
    "gpt2_124M_B16|train_124M run_124M_B16 -b 16"
    "gpt2_124M_B32|train_124M run_124M_B32 -b 32"
    "sass_check_cuobjdump|sass_check"
    "zero2_bit_identical_acc1|zero2_against_zero1 1 0 0"
    "zero2_matches_zero1_acc4|zero2_against_zero1 4 1e-4 1.3e-3 1e-3 --param-rtol 0.0078125"
    "pytorch_124M_B16|python3 dev/bench/pytorch_gpu_step.py --batch 16 --seq-len 1024 --steps 20"
    "nccl_two_ranks_no_alarm|nccl_pair nccl_two_ranks_no_alarm 0"
    "nccl_watchdog_stopped_rank|watchdog_names_stopped_rank"
    "hybrid_matches_flat|hybrid_matches_flat"
)
# The other kernel benchmarks in the bundle, after the named ones.
for k in "$B"/bin/*; do
    n=$(basename "$k")
    case "$n" in train_gpt2|test_gpt2|'*') continue ;; esac
    printf '%s\n' "${CHECKS[@]}" | grep -q "^kernel_$n|" || CHECKS+=("kernel_$n|kernel_bench $n")
done

names=()
for c in "${CHECKS[@]}"; do names+=("${c%%|*}"); done
if [ "$LIST" = 1 ]; then printf '%s\n' "${names[@]}"; exit 0; fi
for n in ${FROM:+"$FROM"} ${ONLY//,/ }; do
    printf '%s\n' "${names[@]}" | grep -qx -- "$n" || { echo "error: no check named '$n' (see --list)" >&2; exit 2; }
done
[ -x "$B/bin/train_gpt2" ] || { echo "error: $B/bin/train_gpt2 missing: run dev/gpu/pack.sh first (and carry $B)" >&2; exit 1; }

# ---- run them --------------------------------------------------------------------------------------------------------
rm -rf "$WORK" && mkdir -p "$RES" "$LOGS"
: >"$summary"
# Libraries: ours first, then the machine's CUDA and NCCL wherever the image has them: the toolkit's folders, and
# the lib folders of pip's NVIDIA wheels (nvidia/nccl/lib, nvidia/cublas/lib, nvidia/cu13/lib, ...).
cuda_lib_dirs() {
    local d
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
        [ -d "$d" ] && printf '%s:' "$d"
    done
    python3 -c 'import nvidia, os, glob
for root in nvidia.__path__:
    for d in sorted(glob.glob(os.path.join(root, "*", "lib")) + glob.glob(os.path.join(root, "*", "lib64"))):
        print(d, end=":")' 2>/dev/null
}
export LD_LIBRARY_PATH="$PWD/$B/lib:$(cuda_lib_dirs)${LD_LIBRARY_PATH:-}"
# Every program and carried library must load here: a missing library, or a glibc older than the build machine's
# (ldd: "version `GLIBC_2.36' not found"), stops the call at once with one line instead of failing every check.
missing=$(for f in "$B"/bin/* "$B"/lib/*; do ldd "$f" 2>&1 | grep "not found" | sed "s|^|$(basename "$f"): |"; done |
          sort -u)
if [ -n "$missing" ]; then
    echo "error: the bundle cannot load here: $(head -n 1 <<<"$missing" | tr -s ' \t' ' ') ($(wc -l <<<"$missing") line(s) in $RES/summary.txt)" \
        | tee "$summary" >&2
    echo "$missing" >>"$summary"
    exit 1
fi
export -f $(compgen -A function)
export SKIP

save_logs() {
    for d in "$WORK"/run_* "$WORK"/zero*_d12_acc*; do
        [ -f "$d/metrics.jsonl" ] && cp "$d/metrics.jsonl" "$LOGS/$(basename "$d").metrics.jsonl"
    done
    tar czf "$RES/logs.tgz.tmp" -C "$WORK" logs && mv "$RES/logs.tgz.tmp" "$RES/logs.tgz"
}

{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } 2>&1 \
    | tee "$LOGS/device.txt" >>"$summary"
# Synthetic shards (random GPT-2 tokens): enough for the training runs.
python3 - "$WORK/data" <<'PY' >>"$summary" 2>&1
import os, sys, numpy as np
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(1)
for name, n in (("syn_train_000000.bin", 64 * 1024 * 24 + 1), ("syn_val_000000.bin", 64 * 1024 * 2 + 1)):
    hdr = np.zeros(256, dtype="<i4"); hdr[:3] = (20240520, 1, n)
    with open(os.path.join(d, name), "wb") as f:
        f.write(hdr.tobytes()); f.write(rng.integers(0, 50257, n, dtype="<u2").tobytes())
PY

selected() {  # NAME: whether --from / --only pick this check
    if [ -n "$ONLY" ]; then [[ ",$ONLY," == *",$1,"* ]]; return; fi
    [ -z "$FROM" ] && return 0
    [ "$1" == "$FROM" ] && FROM=""
    [ -z "$FROM" ]
}

failure_line() {  # LOG: its first error line (stderr is unbuffered, so it may precede stdout's last lines), else its last
    grep -m1 -i -E '^error|error:|^FAIL' "$1" || tail -n 1 "$1"
}

out_of_time=""
for c in "${CHECKS[@]}"; do
    name="${c%%|*}" cmd="${c#*|}"
    selected "$name" || continue
    left=$((BUDGET - SECONDS))
    if [ -n "$out_of_time" ] || [ "$left" -lt "$MIN_LEFT" ]; then
        [ -n "$out_of_time" ] || out_of_time="$name"
        printf '%-36s not run (time budget)\n' "$name" >>"$summary"
        continue
    fi
    limit=$((left < STEP_LIMIT ? left : STEP_LIMIT))
    t0=$SECONDS
    timeout --kill-after=10 "$limit" bash -c "$cmd" >"$LOGS/$name.log" 2>&1
    rc=$?
    case $rc in
        0) outcome=ok ;;
        "$SKIP") outcome="skipped: $(tail -n 1 "$LOGS/$name.log")" ;;
        124|137) outcome="FAILED: stopped at its ${limit} s limit" ;;
        *) outcome="FAILED rc=$rc: $(failure_line "$LOGS/$name.log" | cut -c 1-100)" ;;
    esac
    printf '%-36s %s (%ds)\n' "$name" "$outcome" $((SECONDS - t0)) | tee -a "$summary"
    save_logs
done

# The throughput lines (median of steps 2..20) and the kernels' headline lines, for docs/benchmarks.md.
python3 - "$WORK" <<'PY' | tee -a "$summary"
import glob, json, os, statistics, sys
runs = glob.glob(os.path.join(sys.argv[1], "run_124M_B*")) + glob.glob(os.path.join(sys.argv[1], "run_speedrun_*"))
for d in sorted(runs):
    try:
        rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if "train_loss" in l]
    except OSError:
        continue
    rows = rows[1:] or rows
    if not rows:
        continue
    print("%s: %.0f tokens/s, MFU %.1f%%, %.1f ms/step" % (os.path.basename(d),
          statistics.median(r["tokens_per_sec"] for r in rows),
          100 * statistics.median((r["mfu"] or 0) for r in rows), statistics.median(r["ms"] for r in rows)))
PY
grep -h "tokens/s\|MiB" "$LOGS"/pytorch_124M*.log "$LOGS"/gpt2_124M_B*.log 2>/dev/null | head -20 >>"$summary"
grep -h "attention\|# check\|sdpa\|^# new\|^# before\|^# backward" "$LOGS"/kernel_attention.log "$LOGS"/pytorch_sdpa.log \
    2>/dev/null >>"$summary"
grep -h "muon_update\|per training step" "$LOGS"/kernel_speedrun.log 2>/dev/null >>"$summary"
grep -h "column_sums_into\|fused_classifier\|prefetch\|one-rank\|batch upload" "$LOGS"/kernel_reduce.log \
    "$LOGS"/kernel_classifier.log "$LOGS"/kernel_host_side.log 2>/dev/null >>"$summary"
[ -z "$out_of_time" ] || echo "time budget spent: go on with  bash dev/gpu/run_checks.sh --from $out_of_time" \
    | tee -a "$summary"
save_logs
cat "$summary"
