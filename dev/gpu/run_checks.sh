#!/usr/bin/env bash
# The checks that need a real GPU, in one command on a GPU machine (see dev/gpu/pack.sh, which must have run on the
# build machine first; its .gpu_bundle/ is copied along). Data, runs and checkpoints go to a scratch folder; the
# results are two files in $OUT (if set, else ./gpu_results): summary.txt and logs.tgz (every log and metrics.jsonl).
# Each part runs even when an earlier one failed; the summary says which passed.
#   1. ./test_gpt2 against the PyTorch references (bf16 tolerances)
#   2. compute-sanitizer memcheck, racecheck and synccheck on ./test_gpt2 (small reference)
#   3. one NCCL rank end to end: ./train_gpt2 on synthetic shards, with checkpoints and a resume
#   4. GPT-2 124M throughput: ./train_gpt2 -e d12 -t 1024 at B = 16, 32, 64 (tokens/s, MFU, memory) on uniform
#      random tokens, and at B = 64 on real text (the Brown shards packed by pack.sh: skewed token frequencies, which
#      the encoder backward must handle as fast)
#      and B = 64 with --gemm-tuning 0 (the GEMM algorithm tuning's gain), and that a resume reused its GEMM choices
#   5. the same model in PyTorch (torch.compile, bf16 autocast, flash attention) in the same run
#   6. the per-kernel benchmarks (dev/cuda), and the SASS check (test/e2e/sass_check_test.py) with the toolkit's cuobjdump;
#      attention checks itself against a plain GPU reference first; dev/cuda/cublaslt_rules: what the real cuBLASLt
#      does with each configuration the simulator's cuBLASLt refuses (a MISMATCH line means the simulator is too lax)
#   7. PyTorch's scaled_dot_product_attention at the attention benchmark's shapes (dev/bench/pytorch_sdpa.py: flash,
#      cuDNN and memory-efficient backends, each forced; the attention benchmark times this GPU's kernels, the other
#      variants, the backward with 16 rows per warp (same bits checked, speed-up printed) and the kernels from before
#      the head-major grid in its own call), and
#      the --dry-run memory plan of the B = 64 run beside its measured peak
#   8. with 2 or more GPUs: the NCCL collectives' watchdog (a stopped rank ends the job, named; no false alarm)
#   9. ZeRO-2's bucket buffers and events against ZeRO-1 on the device, with peak memory
#  10. the simulator's device profile against this GPU's reported limits, and the resource check against its driver
#      (dev/gpu/driver_check.py: every kernel's registers and shared memory as the driver sees them, and every launch
#      configuration the simulated profiles ran, at its __launch_bounds__ too, accepted by the driver)
#  11. the classifier in chunks of 4096 rows against one chunk of the whole batch (step time, peak memory), the
#      classifier kernel that prefetches the next row against one block per row (dev/cuda/classifier.cu: same bits on
#      every row, then both timed), and the column sums in two stages against the one-stage kernel (dev/cuda/reduce.cu)
set -u
cd "$(dirname "$0")/../.."
B=.gpu_bundle
RES=${OUT:-gpu_results}
WORK=${GPU_WORK:-/tmp/gpu_work}
LOGS="$WORK/logs"
rm -rf "$WORK" && mkdir -p "$RES" "$LOGS"
[ -x "$B/bin/train_gpt2" ] || { echo "error: $B/bin/train_gpt2 missing: run dev/gpu/pack.sh first (and carry $B)" >&2; exit 1; }
# Libraries: ours first, then the machine's CUDA and NCCL (the toolkit's, or PyTorch's wheel's).
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$PWD/$B/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${nccl_dir}:${LD_LIBRARY_PATH:-}"
summary="$RES/summary.txt"
: >"$summary"
step() {  # step NAME CMD...: run, log to $LOGS/NAME.log, record the outcome
    local name="$1"; shift
    local t0=$SECONDS
    "$@" >"$LOGS/$name.log" 2>&1
    local rc=$?
    printf '%-28s %s (%ds)\n' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")" $((SECONDS - t0)) | tee -a "$summary"
}
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } 2>&1 | tee "$LOGS/device.txt" >>"$summary"
ldd "$B/bin/train_gpt2" | grep "not found" >>"$summary"

step test_gpt2_small "$B/bin/test_gpt2" --ref "$B/ref/small"
step test_gpt2_odd "$B/bin/test_gpt2" --ref "$B/ref/odd"
if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck synccheck; do
        step "sanitizer_$tool" compute-sanitizer --tool "$tool" --error-exitcode 9 "$B/bin/test_gpt2" --ref "$B/ref/small"
    done
else
    echo "compute-sanitizer: not on this machine" | tee -a "$summary"
fi

# Synthetic shards (random GPT-2 tokens): enough for the throughput runs below.
python3 - "$WORK/data" <<'PY'
import os, sys, numpy as np
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(1)
for name, n in (("syn_train_000000.bin", 64 * 1024 * 24 + 1), ("syn_val_000000.bin", 64 * 1024 * 2 + 1)):
    hdr = np.zeros(256, dtype="<i4"); hdr[:3] = (20240520, 1, n)
    with open(os.path.join(d, name), "wb") as f:
        f.write(hdr.tobytes()); f.write(rng.integers(0, 50257, n, dtype="<u2").tobytes())
PY
TR="$WORK/data/syn_train_*.bin"; VA="$WORK/data/syn_val_*.bin"
step nccl_one_rank_train "$B/bin/train_gpt2" -i "$TR" -j "$VA" -e d6 -b 8 -t 512 -x 20 -v 10 -m 2 -s 0 -n 10 -o "$WORK/run_d6"
step nccl_one_rank_resume "$B/bin/train_gpt2" -i "$TR" -j "$VA" -e d6 -b 8 -t 512 -x 30 -v 10 -m 2 -s 0 -n 10 -y 1 -o "$WORK/run_d6"
# The NCCL watchdog on real GPUs (needs 2 GPUs, NCCL refuses two ranks on one): two processes started by
# hand (torchrun-style variables, -pi fs: this machine has no MPI), rank 1 stops itself before step 3; rank 0 must
# exit non-zero within seconds naming rank 1 (its watchdog polls the CUDA events of the enqueued collectives and
# aborts the communicator). A second pair without the stop must run to the end (no false alarm at 5 s).
if [ "$(nvidia-smi -L 2>/dev/null | grep -c GPU)" -ge 2 ]; then
    nccl_pair() {  # NAME EXTRA_ENV_FOR_RANK_1...
        local name="$1"; shift
        local rv="$WORK/rv_$name"; mkdir -p "$rv"
        local args=(-i "$TR" -j "$VA" -e d6 -b 4 -t 256 -d 2048 -x 10 -v 0 -s 0 --comm-timeout 5 -pi fs -pf "$rv")
        env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 LLMC_RUN_ID="$name" "$@" \
            "$B/bin/train_gpt2" "${args[@]}" -o "$WORK/$name" >"$LOGS/${name}_rank1.log" 2>&1 &
        local p1=$!
        env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 LLMC_RUN_ID="$name" \
            timeout 120 "$B/bin/train_gpt2" "${args[@]}" -o "$WORK/$name" >"$LOGS/${name}_rank0.log" 2>&1
        local rc=$?
        kill -KILL $p1 2>/dev/null; wait $p1 2>/dev/null
        return $rc
    }
    nccl_pair nccl_two_ranks_no_alarm
    echo "nccl_two_ranks_no_alarm: rank 0 status $? (expected 0)" | tee -a "$summary"
    nccl_pair nccl_watchdog_stopped_rank LLMC_TEST_STOP_RANK=1:3
    echo "nccl_watchdog_stopped_rank: rank 0 status $? (expected 1); $(grep -m1 'comm watchdog' "$LOGS/nccl_watchdog_stopped_rank_rank0.log")" \
        | tee -a "$summary"
else
    echo "nccl watchdog on 2 GPUs: skipped (needs 2 GPUs)" | tee -a "$summary"
fi
# Hybrid sharding on real NCCL (needs 4 GPUs): --shard-group 2 (groups made by ncclCommSplit, gradient shards
# all-reduced across them) against flat ZeRO-1 on the same 4 ranks, started by hand as above. The runs differ only in
# the order of the fp32 gradient sums: test/e2e/hybrid_shard_sim_test.sh's tolerances (losses 1e-5, norms 1e-4,
# parameters 2 lr x steps = 6e-3 at the default lr 3e-4 over 10 steps).
if [ "$(nvidia-smi -L 2>/dev/null | grep -c GPU)" -ge 4 ]; then
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
    step hybrid_flat_zero1 four_ranks hybrid_flat -z 1
    step hybrid_groups_of_2 four_ranks hybrid_groups -z 1 --shard-group 2
    step hybrid_matches_flat python3 test/helpers/compare_runs.py "$WORK/hybrid_flat" "$WORK/hybrid_groups" 1e-5 6e-3 1e-4
else
    echo "hybrid sharding on 4 GPUs: skipped (needs 4 GPUs)" | tee -a "$summary"
fi
for b in 16 32 64; do
    # Peak device memory of the run: nvidia-smi sampled every 200 ms while it trains.
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$LOGS/mem_124M_B$b.txt" 2>/dev/null &
    sampler=$!
    step "gpt2_124M_B$b" "$B/bin/train_gpt2" -i "$TR" -j "$VA" -e d12 -b $b -t 1024 -x 20 -v 0 -s 0 -o "$WORK/run_124M_B$b"
    kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
    echo "gpt2_124M_B$b peak device memory: $(sort -n "$LOGS/mem_124M_B$b.txt" | tail -1) MiB" | tee -a "$summary"
done
# GEMM tuning off (the heuristic's first algorithm, as before tuning) beside the tuned B = 64 run above: the step time
# and MFU of both are in summary.txt; and the resume above must have reused its run's algorithm choices (the
# gemm-choice lines without their timing field are the same, and a reused choice was not timed: ms -1).
step gpt2_124M_B64_untuned "$B/bin/train_gpt2" -i "$TR" -j "$VA" -e d12 -b 64 -t 1024 -x 20 -v 0 -s 0 --gemm-tuning 0 \
    -o "$WORK/run_124M_B64_untuned"
choices() { grep '^gemm-choice' "$1" | sed 's/ : \([0-9]* [0-9]* [-0-9]* [-0-9]*\) [-0-9.]* : / : \1 : /'; }
if [ -n "$(choices "$LOGS/nccl_one_rank_train.log")" ] && \
   [ "$(choices "$LOGS/nccl_one_rank_train.log")" == "$(choices "$LOGS/nccl_one_rank_resume.log")" ] && \
   ! grep '^gemm-choice' "$LOGS/nccl_one_rank_resume.log" | grep -vq ' -1.0000 : '; then
    echo "gemm_choices_reused_on_resume ok" | tee -a "$summary"
else
    echo "gemm_choices_reused_on_resume FAILED (compare the gemm-choice lines of the two logs)" | tee -a "$summary"
fi
# Real text: the Brown corpus (its most frequent token is a few percent of the positions, unlike uniform tokens).
step gpt2_124M_B64_brown "$B/bin/train_gpt2" -i "$B/data/brown_train_*.bin" -j "$B/data/brown_val_*.bin" -e d12 -b 64 \
    -t 1024 -x 20 -v 0 -s 0 -o "$WORK/run_124M_B64_brown"
# The chunked classifier against one chunk of all 65536 rows (the logits of the whole batch, 6.1 GiB more): step time
# (the throughput lines below) and peak memory; and the CUDA backend's one-rank Comm, pinned uploads and batch
# read-ahead are in every run above (docs/cuda.md, "Host side of a step").
for chunk in 4096 65536; do
    name=run_124M_B64_classifier_chunk$chunk
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$LOGS/mem_$name.txt" 2>/dev/null &
    sampler=$!
    step "gpt2_124M_B64_classifier_chunk$chunk" "$B/bin/train_gpt2" -i "$TR" -j "$VA" -e d12 -b 64 -t 1024 -x 20 -v 0 \
        -s 0 --classifier-chunk $chunk -o "$WORK/$name"
    kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
    echo "$name peak device memory: $(sort -n "$LOGS/mem_$name.txt" | tail -1) MiB" | tee -a "$summary"
done
# ZeRO-2's bucket buffers on real streams and events (one rank: the pool's reuse and its event waits run
# on the device). One micro-step: ZeRO-2 does ZeRO-1's arithmetic, so bit-identical. Four micro-steps for 3 steps:
# the sums over micro-steps are taken in another order (in the bucket buffers vs in the cuBLASLt epilogue), so
# losses within 1e-4, grad norms 1e-3, parameters 2 lr steps = 1.8e-3 (bf16 parameters, see
# test/e2e/train_sim_mpi_test.sh). Peak memory: at one rank ZeRO-2's accumulator is full-size, so it needs the bucket
# pool (204.5 MiB for d12) more than ZeRO-1; the saving starts at 2 ranks (docs/distributed.md).
for z in 1 2; do
    for acc in 1 4; do
        name=zero${z}_d12_acc$acc
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$LOGS/mem_$name.txt" 2>/dev/null &
        sampler=$!
        step "$name" "$B/bin/train_gpt2" -i "$TR" -j "$VA" -e d12 -b 16 -t 1024 -d $((16 * 1024 * acc)) -x 3 -v 0 \
            -s 0 -z $z -o "$WORK/$name"
        kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
        echo "$name peak device memory: $(sort -n "$LOGS/mem_$name.txt" | tail -1) MiB" | tee -a "$summary"
    done
done
step zero2_bit_identical_acc1 python3 test/helpers/compare_runs.py "$WORK/zero1_d12_acc1" "$WORK/zero2_d12_acc1" 0 0
step zero2_matches_zero1_acc4 python3 test/helpers/compare_runs.py "$WORK/zero1_d12_acc4" "$WORK/zero2_d12_acc4" 1e-4 1.8e-3 1e-3
step pytorch_124M python3 dev/bench/pytorch_gpu_step.py --batch 16 --seq-len 1024 --steps 20
step driver_limits_and_resources python3 dev/gpu/driver_check.py "$B/bin/train_gpt2" "$B/launches.tsv"
# The SASS check read by the real cuobjdump (the build machines use Debian's CUDA 11.8 nvdisasm instead).
if command -v cuobjdump >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/cuobjdump ]; then
    step sass_check_cuobjdump python3 test/e2e/sass_check_test.py "$B/bin/train_gpt2"
fi
step pytorch_124M_B64 python3 dev/bench/pytorch_gpu_step.py --batch 64 --seq-len 1024 --steps 20
step pytorch_sdpa python3 dev/bench/pytorch_sdpa.py --batch 64
echo "gpt2_124M_B64 planned by --dry-run: $("$B/bin/train_gpt2" --dry-run -e d12 -b 64 -t 1024 | tail -n 1)" | tee -a "$summary"
for k in "$B"/bin/*; do
    case "$(basename "$k")" in train_gpt2|test_gpt2) continue ;; esac
    step "kernel_$(basename "$k")" "$k"
done
# The throughput lines (median of steps 2..20) for docs/benchmarks.md.
python3 - "$WORK" <<'PY' | tee -a "$summary"
import glob, json, os, statistics, sys
for d in sorted(glob.glob(os.path.join(sys.argv[1], "run_124M_B*"))):
    try:
        rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if "train_loss" in l]
    except OSError:
        continue
    rows = rows[1:] or rows
    print("%s: %.0f tokens/s, MFU %.1f%%, %.1f ms/step" % (os.path.basename(d),
          statistics.median(r["tokens_per_sec"] for r in rows),
          100 * statistics.median((r["mfu"] or 0) for r in rows), statistics.median(r["ms"] for r in rows)))
PY
grep -h "tokens/s\|MiB" "$LOGS"/pytorch_124M*.log "$LOGS"/gpt2_124M_B*.log 2>/dev/null | head -20 >>"$summary"
grep -h "attention\|# check\|sdpa\|^# new\|^# before\|^# backward" "$LOGS"/kernel_attention.log "$LOGS"/pytorch_sdpa.log 2>/dev/null >>"$summary"
grep -h "column_sums_into\|fused_classifier\|prefetch" "$LOGS"/kernel_reduce.log "$LOGS"/kernel_classifier.log 2>/dev/null >>"$summary"
for d in "$WORK"/run_*; do [ -f "$d/metrics.jsonl" ] && cp "$d/metrics.jsonl" "$LOGS/$(basename "$d").metrics.jsonl"; done
tar czf "$RES/logs.tgz" -C "$WORK" logs
cat "$summary"
