#!/usr/bin/env bash
# The model against PyTorch: generate references with dev/reference/gpt2_reference.py (Debian's python3-torch, CPU)
# into build/ref/<name>/, then run ./test_gpt2_cpu on each (its PASS/FAIL lines are passed through, tagged with the
# reference's name). Two shapes: a small regular one, and one with odd sizes (C=96 with 3 heads, V=100 padded to 128,
# B=3, T=24 < maxT) and random biases / layernorm weights (--perturb) so that no bias or gain is checked at 0 or 1.
# Then the CUDA backend's real kernels under the CUDA simulator (build/test_gpt2_sim, bf16 tolerances) on the smallest
# shape (the simulator runs one fiber per CUDA thread: slow), also with every fused cuBLASLt epilogue declined. Then bad input: a wrong magic, a truncated file, a
# missing directory.
# Formats and tolerances: docs/reference.md.
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
    && run_ref small ./test_gpt2_cpu
gen odd --layers 3 --heads 3 --channels 96 --max-seq-len 32 --vocab 100 --batch 3 --seq-len 24 --seed 7 --perturb \
    && run_ref odd ./test_gpt2_cpu OMP_NUM_THREADS=1  # one thread here, all cores for small: both paths covered
# The simulator under three stream-scheduler seeds (docs/cudasim.md).
if gen tiny --layers 3 --heads 2 --channels 32 --max-seq-len 8 --vocab 64 --batch 1 --seq-len 8 --seed 3 --perturb; then
    for seed in 1 2 3; do run_ref tiny build/test_gpt2_sim CUDASIM_STREAM_SEED=$seed; done
    # Every fused cuBLASLt epilogue declined (docs/cudasim.md): the fallback passes carry the whole model.
    run_ref tiny build/test_gpt2_sim CUDASIM_CUBLASLT_DECLINE=all
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
