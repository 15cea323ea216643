#!/usr/bin/env bash
# The GPU kit's driver (dev/gpu/run_checks.sh) without a GPU: a bundle of fake programs (shell scripts standing for
# train_gpt2, test_gpt2 and two kernel benchmarks) and fake nvidia-smi / compute-sanitizer on the PATH. What is
# checked is the driver's own logic, which a GPU call of 10 minutes cannot afford to find broken: each check's
# outcome (ok, FAILED, skipped with its reason) in the summary, a hanging check stopped at its own limit while the
# next still runs, the time budget leaving the rest "not run" with the command that goes on from there, --from and
# --only, the logs and throughput lines returned, and its refusals of bad arguments. Also: the order (correctness,
# the 124M step, the GEMM benchmark and the cuBLASLt probe before attention, sanitizers and torch.compile), the
# CUDA libraries found in a pip-wheel layout (nvidia/*/lib) and a missing one stopping the call with one line, the
# one-rank NCCL switch, and a GEMM fallback failing a training check.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
KIT="$PWD/dev/gpu/run_checks.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
BUNDLE="$T/bundle" FAKE="$T/fakebin"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/ref/small" "$BUNDLE/ref/odd" "$BUNDLE/data" "$FAKE"
: >"$BUNDLE/launches.tsv"

# test_gpt2: passes on the small reference, fails on the odd one; hangs when FAKE_HANG is set.
cat >"$BUNDLE/bin/test_gpt2" <<'EOF'
#!/usr/bin/env bash
[ -n "${FAKE_HANG:-}" ] && exec sleep 600
[[ "$2" == */small ]] && { echo "all checks passed"; exit 0; }
echo "logits differ"; exit 1
EOF
# train_gpt2: writes 3 steps of metrics into -o's folder (the second and third at 100 ms, 655360 tokens/s) and one
# GEMM choice line, timed (0.1234 ms) unless resumed (-y 1: -1.0000, reused) or FAKE_RETIME is set. With
# --show-placement its placement line names the comm: nccl under LLMC_NCCL_ONE_RANK=1, else single. FAKE_DECLINE:
# a fused epilogue declined.
cat >"$BUNDLE/bin/train_gpt2" <<'EOF'
#!/usr/bin/env bash
out="" ms=0.1234 place=0
while [ $# -gt 0 ]; do
    [ "$1" == "-o" ] && out="$2"; [ "$1" == "-y" ] && [ -z "${FAKE_RETIME:-}" ] && ms=-1.0000
    [ "$1" == "--show-placement" ] && place=1; shift
done
[ -n "$out" ] || { echo "device memory per rank: 21.85 GiB"; exit 0; }
[ $place = 1 ] && echo "placement: rank 0 of 1 | dp rank 0 = group 0 x 1 + 0 | comm $([ "${LLMC_NCCL_ONE_RANK:-}" = 1 ] && echo nccl || echo single)"
[ -n "${FAKE_DECLINE:-}" ] && echo "warning: cuBLASLt declined the BGRADB epilogue for a 768x2304x65536 GEMM (x): using the separate pass" >&2
echo "gemm-choice gemm 1 0 2304 65536 768 : 0 8 21 1 $ms : 0a0b"
mkdir -p "$out"
for s in 1 2 3; do
    ms=$([ $s -eq 1 ] && echo 900 || echo 100)
    echo "{\"step\": $s, \"train_loss\": 10.9, \"ms\": $ms, \"tokens_per_sec\": $((65536000 / ms)), \"mfu\": 0.5}"
done >"$out/metrics.jsonl"
echo "trained"
EOF
printf '#!/usr/bin/env bash\necho "attention: 198.0 TFLOP/s"\n' >"$BUNDLE/bin/attention"
printf '#!/usr/bin/env bash\necho gelu bench\n' >"$BUNDLE/bin/gelu"
cat >"$FAKE/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
case "$*" in
    -L) echo "GPU 0: Fake H100 (UUID: GPU-0)" ;;
    *-lms*) while :; do echo 1234; sleep 0.2; done ;;
    *) echo "name, driver_version"; echo "Fake H100, 0.0" ;;
esac
EOF
# compute-sanitizer --tool T --error-exitcode N CMD...: runs CMD.
printf '#!/usr/bin/env bash\nshift 4\nexec "$@"\n' >"$FAKE/compute-sanitizer"
ln -s /usr/bin/python3 "$FAKE/python3"
chmod +x "$BUNDLE"/bin/* "$FAKE"/*

kit() {  # ARGS...: the kit on the fake bundle; its output in $T/out.txt, its results in $T/res
    rm -rf "$T/res"
    env PATH="$FAKE:$PATH" GPU_BUNDLE="$BUNDLE" OUT="$T/res" GPU_WORK="$T/work" bash "$KIT" "$@" >"$T/out.txt" 2>&1
}
line() { grep -m1 "^$1 " "$T/res/summary.txt"; }  # the summary's line of a check
has() {  # NAME PATTERN: the check's summary line matches the extended regular expression
    local l; l=$(line "$1")
    if [[ "$l" =~ $2 ]]; then pass "kit: $1 -> ${l:-not run}"; else fail "kit: $1" "summary line '$l', expected /$2/"; fi
}

kit --list
first=$(head -n 1 "$T/out.txt")
if [ "$first" == test_gpt2_small ] && grep -qx kernel_gelu "$T/out.txt" && grep -qx hybrid_matches_flat "$T/out.txt"
then pass "kit --list: $(wc -l <"$T/out.txt") checks, ./test_gpt2 first, unnamed benchmarks appended"
else fail "kit --list" "$(head -c 300 "$T/out.txt")"; fi
pos() { grep -nx "$1" "$T/out.txt" | cut -d: -f1; }
order="sanitizer_memcheck nccl_one_rank_train_resume gpt2_124M_B64 kernel_matmul kernel_cublaslt_rules kernel_attention
       pytorch_sdpa sanitizer_memcheck_opt_in sanitizer_racecheck pytorch_124M_B64"
prev=0 ok=1
for n in $order; do p=$(pos "$n"); [ -n "$p" ] && [ "$p" -gt "$prev" ] || { ok=0; break; }; prev=$p; done
[ $ok = 1 ] && pass "kit --list: correctness, the 124M step, GEMMs and the cuBLASLt probe, attention, then sanitizers and torch.compile" ||
    fail "kit --list order" "$n out of order in: $(tr '\n' ' ' <"$T/out.txt")"
expect_error "kit refuses an unknown check" "no check named 'nope'" \
    env GPU_BUNDLE="$BUNDLE" bash "$KIT" --from nope
expect_error "kit refuses --from with --only" "exclude each other" \
    env GPU_BUNDLE="$BUNDLE" bash "$KIT" --from test_gpt2_odd --only test_gpt2_small
expect_error "kit refuses an unknown argument" "unknown argument '--fast'" env GPU_BUNDLE="$BUNDLE" bash "$KIT" --fast
expect_error "kit refuses a missing bundle" "run dev/gpu/pack.sh first" \
    env GPU_BUNDLE="$T/none" OUT="$T/res" GPU_WORK="$T/work" bash "$KIT" --only test_gpt2_small

kit --only test_gpt2_small,test_gpt2_odd,sanitizer_memcheck,nccl_one_rank_train_resume,gpt2_124M_B64,dry_run_B64,\
kernel_attention,hybrid_matches_flat
has test_gpt2_small ' ok \([0-9]+s\)$'
has test_gpt2_odd ' FAILED rc=1: logits differ '
has sanitizer_memcheck ' ok '
has nccl_one_rank_train_resume ' ok '
has gpt2_124M_B64 ' ok '
has hybrid_matches_flat ' skipped: needs 4 GPUs '
has nccl_one_rank_train '^$'
check "kit: peak memory of the 124M run in the summary" grep -q "^run_124M_B64 peak device memory: 1234 MiB" "$T/res/summary.txt"
check "kit: throughput line, median of the steps after the first" \
    grep -q "^run_124M_B64: 655360 tokens/s, MFU 50.0%, 100.0 ms/step" "$T/res/summary.txt"
check "kit: the dry-run plan beside it" grep -q "planned by --dry-run: device memory per rank: 21.85 GiB" "$T/res/summary.txt"
check "kit: the attention benchmark's headline in the summary" grep -q "^attention: 198.0 TFLOP/s" "$T/res/summary.txt"
if tar xzf "$T/res/logs.tgz" -O logs/test_gpt2_odd.log 2>/dev/null | grep -q "logits differ" &&
   tar tzf "$T/res/logs.tgz" | grep -q "logs/run_124M_B64.metrics.jsonl"; then
    pass "kit: logs.tgz holds each check's log and the runs' metrics"
else fail "kit: logs.tgz" "$(tar tzf "$T/res/logs.tgz" 2>&1 | head -5)"; fi
! grep -q "time budget" "$T/res/summary.txt" && pass "kit: within its budget, nothing reported as not run" ||
    fail "kit: within its budget" "a 'time budget' line: $(grep "time budget" "$T/res/summary.txt")"

FAKE_RETIME=1 kit --only nccl_one_rank_train_resume
has nccl_one_rank_train_resume ' FAILED rc=1: the resume timed a GEMM plan '
FAKE_DECLINE=1 kit --only gpt2_124M_B64,nccl_one_rank_train_resume
has gpt2_124M_B64 ' FAILED rc=1: FAIL: 1 GEMM fallback\(s\), the first: warning: cuBLASLt declined the BGRADB'
has nccl_one_rank_train_resume ' FAILED rc=1: FAIL: 1 GEMM fallback'
# The switch is the kit's: a trainer that ignores it (here: LLMC_NCCL_ONE_RANK cleared by a wrapper) fails the check.
mv "$BUNDLE/bin/train_gpt2" "$BUNDLE/bin/train_gpt2.real"
printf '#!/usr/bin/env bash\nLLMC_NCCL_ONE_RANK= exec "%s" "$@"\n' "$BUNDLE/bin/train_gpt2.real" >"$BUNDLE/bin/train_gpt2"
chmod +x "$BUNDLE/bin/train_gpt2"
kit --only nccl_one_rank_train_resume
has nccl_one_rank_train_resume " FAILED rc=1: the run did not use NCCL"
mv "$BUNDLE/bin/train_gpt2.real" "$BUNDLE/bin/train_gpt2"

# CUDA libraries from pip wheels: a real program linked against a library that only a fake nvidia/cu13/lib holds.
SITE="$T/site"
mkdir -p "$SITE/nvidia/cu13/lib" "$T/probe_src"
printf 'int fake_cublas_version(void) { return 13; }\n' >"$T/probe_src/lib.c"
printf 'int fake_cublas_version(void);\nint main(void) { return fake_cublas_version() == 13 ? 0 : 1; }\n' \
    >"$T/probe_src/main.c"
if cc -shared -fPIC -o "$SITE/nvidia/cu13/lib/libfakecublas.so" "$T/probe_src/lib.c" &&
   cc -o "$BUNDLE/bin/probe" "$T/probe_src/main.c" -L"$SITE/nvidia/cu13/lib" -lfakecublas; then
    PYTHONPATH="$SITE" kit --only kernel_probe
    has kernel_probe ' ok '
    kit --only kernel_probe
    rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -c . "$T/out.txt")" -eq 1 ] &&
       grep -q "^error: the bundle cannot load here: probe: libfakecublas.so => not found" "$T/out.txt"; then
        pass "kit: a library missing everywhere stops the call with one line (status $rc)"
    else fail "kit: missing library" "status $rc, output: $(head -c 300 "$T/out.txt")"; fi
    rm -f "$BUNDLE/bin/probe"
else
    fail "kit: build the library probe" "cc failed"
fi

# A hanging check is stopped at its limit and the next one runs; then the budget is spent (less than 30 s left).
FAKE_HANG=1 GPU_STEP_TIMEOUT_S=6 GPU_CHECKS_BUDGET_S=40 kit --only test_gpt2_small,test_gpt2_odd,gpt2_124M_B64
has test_gpt2_small ' FAILED: stopped at its 6 s limit '
has test_gpt2_odd ' FAILED: stopped at its 6 s limit '
has gpt2_124M_B64 ' not run \(time budget\)$'
check "kit: the summary names the command that goes on" \
    grep -q "go on with  bash dev/gpu/run_checks.sh --from gpt2_124M_B64" "$T/res/summary.txt"
if tar xzf "$T/res/logs.tgz" -O logs/test_gpt2_odd.log >/dev/null 2>&1; then pass "kit: logs.tgz written after a stopped check"
else fail "kit: logs.tgz after a stopped check" "missing"; fi

# --from starts at the named check: nothing before it runs, everything after it does.
kit --from hybrid_matches_flat
has hybrid_matches_flat ' skipped: needs 4 GPUs '
has kernel_gelu ' ok '
has test_gpt2_small '^$'
finish
