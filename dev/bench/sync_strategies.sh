#!/usr/bin/env bash
# The sync-strategy comparison of docs/distributed.md ("Periodic synchronisation"): the CPU trainer under
# mpirun -np $NP (default 2) on the Brown corpus as bytes (V = 256), the same model, data, seed, schedule and
# total tokens for each strategy:
#   plain    data parallelism (ZeRO 1: gradients reduced to their owners every step, parameters gathered)
#   bf16     the same, gradients reduced in bf16 (--reduce-dtype bf16)
#   sync8    --sync-every 8 (local AdamW on each rank, an outer Nesterov step every 8 steps, DiLoCo's 0.7 / 0.9)
#   sync32   --sync-every 32
#   avg8     --sync-every 8 --outer-lr 1 --outer-momentum 0 (plain parameter averaging every 8 steps: local SGD)
#   avg32    --sync-every 32 --outer-lr 1 --outer-momentum 0
# and prints, per strategy, the final val loss and the bytes rank 0 handed to collectives over the run (the
# trainer's last line; MPI's ring all-reduce puts about 2 (W-1)/W of an all-reduce's bytes on each rank's link).
#
# Usage: dev/bench/sync_strategies.sh [OUT_DIR]   (default runs/sync_strategies; needs data/brown_bytes:
#   bash dev/data/fetch_brown.sh && ./prepare_data --bytes -o data/brown_bytes --val-fraction 0.05 data/brown/text)
# Environment: NP (ranks, 2), STEPS (400), THREADS (OpenMP threads per rank, 1), NAMES (the strategies to run).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/sync_strategies}
NP=${NP:-2} STEPS=${STEPS:-400} THREADS=${THREADS:-1}
[ -x ./train_gpt2_cpu ] || { echo "error: ./train_gpt2_cpu not built (make train_gpt2_cpu)" >&2; exit 1; }
compgen -G "data/brown_bytes/*train*.bin" >/dev/null || { echo "error: no data/brown_bytes shards (see --help)" >&2; exit 1; }
mkdir -p "$OUT"
common=(-i "data/brown_bytes/*train*.bin" -j "data/brown_bytes/*val*.bin" -e "L=2,NH=4,C=64,T=64,V=256"
        -b 8 -t 64 -d $((8 * 64 * NP)) -x "$STEPS" -l 2e-3 -u 20 -q 0.1 -c 0.1 -v 100 -m 16 -s 0 --log-every 100
        --threads "$THREADS")
declare -A flags=([plain]="" [bf16]="--reduce-dtype bf16" [sync8]="--sync-every 8" [sync32]="--sync-every 32"
                  [avg8]="--sync-every 8 --outer-lr 1 --outer-momentum 0"
                  [avg32]="--sync-every 32 --outer-lr 1 --outer-momentum 0")
names=${NAMES:-plain bf16 sync8 sync32 avg8 avg32}
printf "%-8s %12s %16s %10s\n" strategy "val loss" "bytes (rank 0)" "seconds"
for name in $names; do
    rm -rf "${OUT:?}/$name"
    start=$(date +%s)
    # shellcheck disable=SC2086
    mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS="$THREADS" -np "$NP" ./train_gpt2_cpu "${common[@]}" \
        ${flags[$name]} -o "$OUT/$name" >"$OUT/$name.log" 2>&1 || { echo "error: $name failed, see $OUT/$name.log" >&2; exit 1; }
    secs=$(( $(date +%s) - start ))
    val=$(grep val_loss "$OUT/$name/metrics.jsonl" | tail -1 | sed -E 's/.*"val_loss":([0-9.eE+-]+).*/\1/')
    bytes=$(sed -nE 's/^collectives: ([0-9]+) bytes.*/\1/p' "$OUT/$name.log")
    printf "%-8s %12.4f %16s %10s\n" "$name" "$val" "$bytes" "$secs"
done
