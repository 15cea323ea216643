#!/usr/bin/env bash
# GPT-2 (1558M) reproduction with llm.c's published hyper-parameters: 1558M parameters, 32B FineWeb-Edu tokens: 32,000 steps of 1,048,576 tokens, lr 6e-4 decaying to 10%.
#
#   NUM_GPUS=8 scripts/run_gpt2_1558M.sh        (ran on 8 x 80 GB GPUs; other counts keep the global batch -d and
#                                              change the number of gradient-accumulation micro-steps)
# Environment: NUM_GPUS (8), DATA_DIR (data/edu_fineweb100B), OUT_DIR (runs/gpt2_1558M), MICRO_BATCH (16: sequences per GPU per
# micro-step; lower it if a GPU runs out of memory: -d stays, so the optimisation does not change), HELLASWAG
# (data/hellaswag/hellaswag_val.bin: evaluated at every -v when present; dev/data/hellaswag.sh makes it).
# The run checkpoints every 2000 steps and resumes with -y 1 after a crash (scripts/autoresume.sh loops until the
# last step is done); scripts/plot_metrics.py OUT_DIR/metrics.jsonl OUT_DIR/loss.png draws the curves.
set -eu
cd "$(dirname "$0")/.."
NUM_GPUS=${NUM_GPUS:-8}
DATA_DIR=${DATA_DIR:-data/edu_fineweb100B}
OUT_DIR=${OUT_DIR:-runs/gpt2_1558M}
MICRO_BATCH=${MICRO_BATCH:-16}
HELLASWAG=${HELLASWAG:-data/hellaswag/hellaswag_val.bin}
hs=(); [ -f "$HELLASWAG" ] && hs=(--hellaswag "$HELLASWAG")
ls $DATA_DIR/*train*.bin >/dev/null 2>&1 || { echo "error: no training shards in $DATA_DIR (prepare FineWeb-Edu 100B into llm.c shards first)" >&2; exit 1; }
make -j train_gpt2
exec scripts/autoresume.sh "$OUT_DIR" \
    mpirun -np "$NUM_GPUS" ./train_gpt2 \
        -i "$DATA_DIR/*train*.bin" -j "$DATA_DIR/*val*.bin" -o "$OUT_DIR" "${hs[@]}" \
        -e d48 -b "$MICRO_BATCH" -t 1024 -d 1048576 \
        -l 6e-4 -u 700 -q 0.1 -k cosine -c 0.1 -z 1 \
        -x 32000 -v 250 -s 20000 \
        -n 2000 -y 1
