#!/usr/bin/env bash
# The model against PyTorch: generate references with dev/reference/gpt2_reference.py (Debian's python3-torch, CPU)
# into build/ref/<name>/, then run ./test_gpt2_cpu on each (its PASS/FAIL lines are passed through, tagged with the
# reference's name). Two shapes: a small regular one, and one with odd sizes (C=96 with 3 heads, V=100 padded to 128,
# B=3, T=24 < maxT) and random biases / layernorm weights (--perturb) so that no bias or gain is checked at 0 or 1.
# Then the CUDA backend's real kernels under the CUDA simulator (build/test_gpt2_sim, bf16 tolerances) on the smallest
# shape (the simulator runs one fiber per CUDA thread: slow), also with every fused cuBLASLt epilogue declined. Then bad input: a wrong magic, a truncated file, a
# missing directory. Then the reference's own exactness (its gradient norms summed in float64), and llm.c's debug-state
# format read by ./test_gpt2_cpu.
# Formats and tolerances: docs/reference.md; GPT-2 124M (d12) itself: dev/reference/check_d12.sh (minutes, not here).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
PY=/usr/bin/python3
GEN=dev/reference/gpt2_reference.py
OUT=build/ref

if ! "$PY" -c "import torch" 2>/dev/null; then
    fail "pytorch" "$PY cannot import torch: install python3-torch (make deps does)"
    finish
fi
for bin in ./test_gpt2_cpu build/test_gpt2_sim; do
    if [ ! -x "$bin" ]; then fail "$bin" "$bin is not built (make $bin)"; finish; fi
done

# gen NAME ARGS...: write build/ref/NAME/{model.bin,reference.bin}, unless the same generator wrote them there with the
# same arguments before (cached_reference: a SKIP line then, the files are used as they are).
gen() {
    local name="$1"; shift
    local out
    if out=$(cached_reference "$OUT/$name" "$PY" "$GEN" --out "$OUT/$name" "$@"); then
        if [ "$(tail -n 1 <<<"$out")" = cached ]; then
            skip "generate reference $name" "cached in $OUT/$name (dev/reference, the arguments and PyTorch unchanged)"
        else
            printf '%s\n' "$out"; pass "generate reference $name"
        fi
    else printf '%s\n' "$out"; fail "generate reference $name" "$GEN $*"; return 1; fi
}
# run_ref NAME BINARY [ENV...]: BINARY on build/ref/NAME (with the environment ENV), its check lines tagged NAME.
run_ref() {
    local name="$1" bin="$2" log="$OUT/$1${3:+_${3##*=}}.log"; shift 2
    env "$@" "$bin" --ref "$OUT/$name" >"$log" 2>&1
    local rc=$?
    sed -E "s|^(PASS\|FAIL\|SKIP) |\1 [$name, ${bin##*/}${*:+, $*}] |" "$log"
    if [ $rc -ne 0 ]; then fail "$bin $name" "exited with status $rc (see $log)"; fi
}

gen small --layers 2 --heads 4 --channels 64 --max-seq-len 32 --vocab 250 --batch 2 --seq-len 16 --seed 42 \
    --llmc-debug-state "$OUT/small_llmc_state.bin" && run_ref small ./test_gpt2_cpu
gen odd --layers 3 --heads 3 --channels 96 --max-seq-len 32 --vocab 100 --batch 3 --seq-len 24 --seed 7 --perturb \
    && run_ref odd ./test_gpt2_cpu OMP_NUM_THREADS=1  # one thread here, all cores for small: both paths covered
# The simulator under three stream-scheduler seeds (docs/cudasim.md).
if gen tiny --layers 3 --heads 2 --channels 32 --max-seq-len 8 --vocab 64 --batch 1 --seq-len 8 --seed 3 --perturb; then
    for seed in 1 2 3; do run_ref tiny build/test_gpt2_sim CUDASIM_STREAM_SEED=$seed; done
    # Every fused cuBLASLt epilogue declined (docs/cudasim.md): the fallback passes carry the whole model.
    run_ref tiny build/test_gpt2_sim CUDASIM_CUBLASLT_DECLINE=all
fi

# The reference's gradient norms are float64 sums of its fp32 gradients (PyTorch's fp32 clip_grad_norm_ was off by up to
# 2.45e-4 at 124M, and by 2 ulps here). Step 1 is at the initial weights, so its norm is that of the gradients in the
# file: both are the float64 norm of the same fp32 values (in orders differing by ~P 2^-53 relative) rounded once to
# fp32, so they are at most 1 fp32 ulp apart.
for name in small odd; do
    [ -f "$OUT/$name/reference.bin" ] || continue
    ulps=$("$PY" dev/reference/norm_ulps.py "$OUT/$name/reference.bin")
    [ "$ulps" -le 1 ] 2>/dev/null && pass "reference $name: the step-1 gradient norm is the float64 norm of its gradients ($ulps ulp)" \
        || fail "reference $name: step-1 gradient norm not float64-exact" "$ulps ulps from the float64 norm"
done

# llm.c's debug state (docs/formats.md), written in its layout for the small model: the logits, the loss and the 16
# gradients at the fp32 tolerances; the steps, which it does not hold, are a SKIP. Read with --llmc-debug-state, and
# as a --ref directory's reference.bin (by its magic number).
if [ -f "$OUT/small_llmc_state.bin" ]; then
    ./test_gpt2_cpu --model "$OUT/small/model.bin" --llmc-debug-state "$OUT/small_llmc_state.bin" >"$OUT/llmc_state.log" 2>&1
    rc=$?
    sed -E 's/^(PASS|FAIL|SKIP) /\1 [llm.c debug state, test_gpt2_cpu] /' "$OUT/llmc_state.log" | grep -E '^(PASS|FAIL|SKIP)'
    [ $rc -eq 0 ] && [ "$(grep -c '^PASS' "$OUT/llmc_state.log")" -eq 18 ] \
        && pass "test_gpt2_cpu --llmc-debug-state: logits, loss and 16 gradients checked" \
        || fail "test_gpt2_cpu --llmc-debug-state" "status $rc, $(grep -c '^PASS' "$OUT/llmc_state.log") checks passed"
    rm -rf "$OUT/small_as_llmc" && mkdir -p "$OUT/small_as_llmc" && cp "$OUT/small/model.bin" "$OUT/small_as_llmc/" \
        && cp "$OUT/small_llmc_state.bin" "$OUT/small_as_llmc/reference.bin"
    ./test_gpt2_cpu --ref "$OUT/small_as_llmc" >"$OUT/llmc_state_ref.log" 2>&1 \
        && cmp -s <(grep -E '^(PASS|FAIL)' "$OUT/llmc_state.log") <(grep -E '^(PASS|FAIL)' "$OUT/llmc_state_ref.log") \
        && pass "an llm.c debug state as --ref's reference.bin is told by its magic number" \
        || fail "an llm.c debug state as --ref's reference.bin" "$(grep -m1 -e error -e FAIL "$OUT/llmc_state_ref.log")"
    cp "$OUT/small_llmc_state.bin" "$OUT/llmc_v1.bin" && printf '\x01' | dd of="$OUT/llmc_v1.bin" bs=1 seek=4 conv=notrunc status=none
    expect_error "llm.c debug state of version 1" "llm.c debug state version 1 (expected 2)" \
        ./test_gpt2_cpu --model "$OUT/small/model.bin" --llmc-debug-state "$OUT/llmc_v1.bin"
    [ -f "$OUT/odd/model.bin" ] && expect_error "llm.c debug state of another model" "another model's state" \
        ./test_gpt2_cpu --model "$OUT/odd/model.bin" --llmc-debug-state "$OUT/small_llmc_state.bin"
    expect_error "--llmc-debug-state without --model" "--llmc-debug-state FILE goes with --model FILE" \
        ./test_gpt2_cpu --llmc-debug-state "$OUT/small_llmc_state.bin"
fi

# The CUDA backend on a real GPU (./test_gpt2, bf16 tolerances), when this machine has one: reported as a skip, never
# as a pass, when it does not.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    if [ -x ./test_gpt2 ]; then run_ref small ./test_gpt2; run_ref odd ./test_gpt2; else fail "./test_gpt2" "not built"; fi
else
    skip "test_gpt2 on a GPU" "no GPU on this machine (nvidia-smi finds none)"
fi

# Bad input: each stops with one clear line on stderr and a non-zero exit.
if [ -f "$OUT/small/reference.bin" ]; then
    rm -rf "$OUT/bad_magic" "$OUT/truncated"
    cp -r "$OUT/small" "$OUT/bad_magic"
    printf '\x01\x02\x03\x04' | dd of="$OUT/bad_magic/reference.bin" bs=1 count=4 conv=notrunc status=none
    expect_error "reference with a wrong magic" "bad magic number" ./test_gpt2_cpu --ref "$OUT/bad_magic"
    cp -r "$OUT/small" "$OUT/truncated"
    truncate -s -4 "$OUT/truncated/reference.bin"
    expect_error "truncated reference" "truncated" ./test_gpt2_cpu --ref "$OUT/truncated"
    expect_error "missing reference directory" "cannot open" ./test_gpt2_cpu --ref "$OUT/does_not_exist"
    expect_error "no --ref" "missing --ref" ./test_gpt2_cpu
fi
finish
