#!/usr/bin/env bash
# dev/gpu/pack.sh's programs (--binaries-only: no references or data, which a GPU call needs but this check does not):
# it must run to the end on this build tree and carry train_gpt2, test_gpt2 and one program for each dev/cuda/*.cu
# benchmark, plain files only (a folder under build/cuda-bench, say its objects', must not stop it), and the shared
# libraries they need except glibc's, libstdc++'s and CUDA's own (the GPU machine has its own driver, cuBLASLt and
# NCCL). It packs the benchmarks as `make test` builds them (GPU_BENCH=cuda-bench-check: one architecture), not a
# second set.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir gpu_pack)
B="$TMP/bundle"
if GPU_BUNDLE="$B" GPU_BENCH=cuda-bench-check bash dev/gpu/pack.sh --binaries-only >"$TMP/pack.log" 2>&1; then pass "pack.sh --binaries-only runs to the end"
else fail "pack.sh --binaries-only runs to the end" "$(tail -3 "$TMP/pack.log")"; finish; fi
missing=()
for p in train_gpt2 test_gpt2 $(ls dev/cuda/*.cu | sed 's|dev/cuda/||; s|\.cu$||'); do
    [ -f "$B/bin/$p" ] && [ -x "$B/bin/$p" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && pass "the bundle carries train_gpt2, test_gpt2 and every dev/cuda benchmark" \
    || fail "the bundle carries every program" "missing: ${missing[*]}"
others=$(find "$B/bin" -mindepth 1 ! -type f | head -3)
[ -z "$others" ] && pass "the bundle's bin/ holds plain files only" || fail "bin/ holds more than programs" "$others"
carried=$(ls "$B/lib" | grep -E '^(libc\.so|libstdc\+\+|libcublas|libnccl|libcudart|libcuda\.so)' | head -3)
[ -z "$carried" ] && pass "no glibc, libstdc++ or CUDA library carried ($(ls "$B/lib" | wc -l) others)" \
    || fail "a library the GPU machine has is carried" "$carried"
finish
