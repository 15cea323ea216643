#!/usr/bin/env bash
# Prepares everything the GPU checks need into .gpu_bundle/ (git-ignored), so that they run as ONE command on a GPU
# machine that has nvcc, PyTorch and the NVIDIA libraries but none of our Debian packages (no
# PCRE2, no OpenMPI, no cxxopts headers) and no network. So the CUDA binaries are built here and carried with the
# few shared libraries they need beyond the CUDA ones (the GPU machine's own cuBLASLt and NCCL are used there), and the
# PyTorch references are generated here.
#
#   bash dev/gpu/pack.sh                  then, on the GPU machine, in a copy of this checkout with .gpu_bundle/:
#   bash dev/gpu/run_checks.sh
#   bash dev/gpu/pack.sh --binaries-only  the programs and their libraries again, keeping the references and data
# GPU_BUNDLE: another folder than .gpu_bundle (run_checks.sh reads the same variable). GPU_BENCH=cuda-bench-check:
# the benchmarks as `make test` builds them (for the last of GPU_ARCH only) instead of `make cuda-bench`'s.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${GPU_BUNDLE:-.gpu_bundle}
BINARIES_ONLY=0
case "${1:-}" in
    "") ;;
    --binaries-only) BINARIES_ONLY=1 ;;
    *) echo "error: unknown argument '$1' (usage: pack.sh [--binaries-only])" >&2; exit 2 ;;
esac
if [ $BINARIES_ONLY = 1 ]; then rm -rf "$OUT/bin" "$OUT/lib"; else rm -rf "$OUT"; fi
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/ref"
# build/train_gpt2_sim and build/test/sim_classifier_prefetch: the simulated device-profile runs below record their
# launch configurations with them.
BENCH=${GPU_BENCH:-cuda-bench}
case "$BENCH" in
    cuda-bench|cuda-bench-check) ;;
    *) echo "error: GPU_BENCH=$BENCH (cuda-bench or cuda-bench-check)" >&2; exit 2 ;;
esac
make -j"$(nproc)" train_gpt2 test_gpt2 "$BENCH" build/train_gpt2_sim build/test/sim_classifier_prefetch >/dev/null
cp train_gpt2 test_gpt2 "$OUT/bin/"
for k in "build/$BENCH"/*; do if [ -f "$k" ] && [[ "$k" != *.d ]]; then cp "$k" "$OUT/bin/"; fi; done
strip --strip-debug "$OUT/bin"/*  # the carried tree is limited to 64 MiB
# Shared libraries outside glibc/libstdc++ and outside CUDA (the GPU machine has its own cuBLASLt/NCCL/driver).
for bin in "$OUT/bin"/*; do
    ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
        libcublas*|libnccl*|libcuda.so*|libcudart*) ;;
        *) cp -L "$lib" "$OUT/lib/" ;;
    esac
done
if [ $BINARIES_ONLY = 1 ]; then
    echo "packed $OUT: $(ls "$OUT/bin" | wc -l) binaries, $(ls "$OUT/lib" | wc -l) libraries (references and data kept)"
    exit 0
fi
# Real text for the throughput runs: the Brown corpus shards (about 2.5 MB; tokenized here, the GPU machine has no
# tokenizer data and no network).
[ -f data/brown/brown_train_000000.bin ] || bash dev/data/prepare_brown.sh >/dev/null
mkdir -p "$OUT/data"
cp data/brown/brown_train_000000.bin data/brown/brown_val_000000.bin "$OUT/data/"
# References for ./test_gpt2: the same shapes as test/e2e/reference_test.sh.
PY=/usr/bin/python3
$PY dev/reference/gpt2_reference.py --out "$OUT/ref/small" --layers 2 --heads 4 --channels 64 --max-seq-len 32 \
    --vocab 250 --batch 2 --seq-len 16 --seed 42 >/dev/null
$PY dev/reference/gpt2_reference.py --out "$OUT/ref/odd" --layers 3 --heads 3 --channels 96 --max-seq-len 32 \
    --vocab 100 --batch 3 --seq-len 24 --seed 7 --perturb >/dev/null
# The speedrun reference for ./test_gpt2 --speedrun-ref (test/e2e/speedrun_reference_test.sh's soft-cap case).
$PY dev/reference/speedrun_reference.py --out "$OUT/ref/speedrun" --softcap --momentum-warmup 4 --perturb >/dev/null
# The launch configurations of the simulated device-profile runs, for dev/gpu/driver_check.py.
[ -f build/test-tmp/sim_device_profiles/launches.tsv ] || bash test/e2e/sim_device_profiles_test.sh >/dev/null
cp build/test-tmp/sim_device_profiles/launches.tsv "$OUT/"
du -sh "$OUT"
echo "packed $OUT: $(ls "$OUT/bin" | wc -l) binaries, $(ls "$OUT/lib" | wc -l) libraries, 3 references, Brown shards"
