#!/usr/bin/env bash
# GPT-2 reproduction runs with llm.c's published hyper-parameters, one line per size:
#   124M   10B FineWeb tokens:   18,865 steps of 524,288 tokens, lr 6e-4
#   350M   ~31B FineWeb tokens:  60,000 steps of 524,288 tokens, lr 3e-4
#   774M   150B FineWeb tokens: 286,102 steps of 524,288 tokens, lr 2.5e-4
#   1558M  32B FineWeb-Edu:      32,000 steps of 1,048,576 tokens, lr 6e-4 decaying to 10%
#
#   NUM_GPUS=8 scripts/run_gpt2.sh 124M      (scripts/run_gpt2_124M.sh etc. call this)
# Sized for 8 x 80 GB GPUs; other GPU counts keep the global batch -d and change the number of gradient-accumulation
# micro-steps. Environment: NUM_GPUS (8), DATA_DIR (the size's FineWeb shards), OUT_DIR (runs/gpt2_SIZE),
# MICRO_BATCH (sequences per GPU per micro-step; lower it if a GPU runs out of memory: -d stays, so the optimisation
# does not change), HELLASWAG (data/hellaswag/hellaswag_val.bin: evaluated at every -v when present;
# dev/data/hellaswag.sh makes it). The run checkpoints every -n steps and resumes with -y 1 after a crash
# (scripts/autoresume.sh loops until the last step is done); scripts/plot_metrics.py draws the curves.
set -eu
cd "$(dirname "$0")/.."
size=${1:-}
#                 model  data                   micro  -d        lr      -q   steps   ckpt
case "$size" in
    124M)  set -- d12 data/fineweb10B          64 524288  6e-4    0.0  18865   5000 ;;
    350M)  set -- d24 data/fineweb100B         64 524288  3e-4    0.0  60000   2000 ;;
    774M)  set -- d36 data/fineweb100B         32 524288  2.5e-4  0.0  286102  4000 ;;
    1558M) set -- d48 data/edu_fineweb100B     16 1048576 6e-4    0.1  32000   2000 ;;
    *) echo "error: usage: $0 124M|350M|774M|1558M (got '$size')" >&2; exit 1 ;;
esac
model=$1 total_batch=$4 lr=$5 final_frac=$6 steps=$7 ckpt_every=$8
NUM_GPUS=${NUM_GPUS:-8}
DATA_DIR=${DATA_DIR:-$2}
OUT_DIR=${OUT_DIR:-runs/gpt2_$size}
MICRO_BATCH=${MICRO_BATCH:-$3}
HELLASWAG=${HELLASWAG:-data/hellaswag/hellaswag_val.bin}
hs=(); [ -f "$HELLASWAG" ] && hs=(--hellaswag "$HELLASWAG")
ls "$DATA_DIR"/*train*.bin >/dev/null 2>&1 || { echo "error: no training shards in $DATA_DIR (prepare them with dev/data/fineweb.sh first)" >&2; exit 1; }
make -j train_gpt2
exec scripts/autoresume.sh "$OUT_DIR" \
    mpirun -np "$NUM_GPUS" ./train_gpt2 \
        -i "$DATA_DIR/*train*.bin" -j "$DATA_DIR/*val*.bin" -o "$OUT_DIR" "${hs[@]}" \
        -e "$model" -b "$MICRO_BATCH" -t 1024 -d "$total_batch" \
        -l "$lr" -u 700 -q "$final_frac" -k cosine -c 0.1 -z 1 \
        -x "$steps" -v 250 -s 20000 \
        -n "$ckpt_every" -y 1
