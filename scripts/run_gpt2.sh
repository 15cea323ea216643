#!/usr/bin/env bash
# GPT-2 reproduction runs with llm.c's published hyper-parameters (scripts/gpt2_recipes.sh has the table):
#   124M   10B FineWeb tokens:   18,865 steps of 524,288 tokens, lr 6e-4
#   350M   ~31B FineWeb tokens:  60,000 steps of 524,288 tokens, lr 3e-4
#   774M   150B FineWeb tokens: 286,102 steps of 524,288 tokens, lr 2.5e-4
#   1558M  32B FineWeb-Edu:      32,000 steps of 1,048,576 tokens, lr 6e-4 decaying to 10%
#
#   NUM_GPUS=8 scripts/run_gpt2.sh 124M      (scripts/run_gpt2_124M.sh etc. call this)
# Any GPU count keeps the global batch -d and every hyper-parameter: the micro-batch (at most the recipe's, sized for
# 80 GB GPUs) and the number of gradient-accumulation micro-steps are derived from -d and NUM_GPUS, and a GPU count
# that cannot share -d evenly stops with a message. Environment: NUM_GPUS (8), DATA_DIR (the size's shards), OUT_DIR
# (runs/gpt2_SIZE), MICRO_BATCH (sequences per GPU per micro-step, e.g. lower on smaller GPUs: must divide each GPU's
# share, the message lists the values that do), TOTAL_BATCH (changes the recipe's -d), HELLASWAG
# (data/hellaswag/hellaswag_val.bin: evaluated at every -v when present; dev/data/hellaswag.sh makes it),
# PRINT_ONLY=1 (print the command, run nothing). The run checkpoints every -n steps and resumes with -y 1 after a
# crash (scripts/autoresume.sh loops until the last step is done); scripts/plot_metrics.py draws the curves.
set -eu
cd "$(dirname "$0")/.."
source scripts/gpt2_recipes.sh
size=${1:-}
NUM_GPUS=${NUM_GPUS:-8}
gpt2_train_args "$size" "$NUM_GPUS" || exit 1
CMD=(mpirun -np "$NUM_GPUS" ./train_gpt2 "${TRAIN_ARGS[@]}")
if [ -n "${PRINT_ONLY:-}" ]; then source scripts/quote_command.sh; quote_command "${CMD[@]}"; exit 0; fi
data=${DATA_DIR:-$RECIPE_DATA}
ls "$data"/*train*.bin >/dev/null 2>&1 || { echo "error: no training shards in $data (prepare them with $RECIPE_PREPARE)" >&2; exit 1; }
make -j train_gpt2
exec scripts/autoresume.sh "${OUT_DIR:-runs/gpt2_$size}" "${CMD[@]}"
