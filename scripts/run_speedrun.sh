#!/usr/bin/env bash
# The NanoGPT speedrun's recipe at GPT-2 124M's size on FineWeb (docs/speedrun.md): the UntieEmbed record's model and
# optimizers (12 layers of 6 heads x 128, RMSNorm, QK-norm, rotary, ReLU², untied zero-initialised head; Muon lr 0.02
# on the block matrices, Adam lr 0.3 on the embedding and 0.002 on the head; constant, then linear to 0 over the last
# 28.6%), 4,578 steps of 524,288 tokens = 2.40B tokens. Published: val loss 3.2762 at the end (the target is 3.28,
# llm.c's GPT-2 124M after 9.9B tokens).
#
#   NUM_GPUS=8 scripts/run_speedrun.sh
# Any GPU count keeps the tokens per step: the micro-batch (64 sequences of 1024, the records') and the
# gradient-accumulation micro-steps are derived from -d and NUM_GPUS, as scripts/run_gpt2.sh does. Environment:
# NUM_GPUS (8), DATA_DIR (data/fineweb10B, made by dev/data/fineweb.sh classic 10B), OUT_DIR (runs/speedrun),
# MICRO_BATCH, TOTAL_BATCH (tokens per step, 524288), STEPS (4578), SOFTCAP=1 and MOMENTUM_WARMUP=N (the ShortcutsTweaks record's logit soft-cap and Muon
# momentum warm-up, 500 there), PRINT_ONLY=1 (print the command, run nothing). Checkpoints every 1000 steps, resumes
# with -y 1 after a crash (scripts/autoresume.sh).
set -eu
cd "$(dirname "$0")/.."
source scripts/gpt2_recipes.sh
NUM_GPUS=${NUM_GPUS:-8}
data=${DATA_DIR:-data/fineweb10B}
out=${OUT_DIR:-runs/speedrun}
d=${TOTAL_BATCH:-524288}
if [ -n "${MICRO_BATCH:-}" ]; then plan_batch "$d" 1024 "$NUM_GPUS" "$MICRO_BATCH" exact || exit 1
else plan_batch "$d" 1024 "$NUM_GPUS" 64 || exit 1; fi
echo "speedrun on $NUM_GPUS GPU(s): -d $d = -b $MICRO_BATCH x -t 1024 x $NUM_GPUS GPU(s) x $GRAD_ACCUM micro-step(s)" >&2
ARGS=(-i "$data/*train*.bin" -j "$data/*val*.bin" -o "$out" --recipe speedrun -e "L=12,NH=6,C=768"
      -b "$MICRO_BATCH" -t 1024 -d "$d" -x "${STEPS:-4578}" -v 125 -m 20 -s 1000 -n 1000 -y 1 -z 1)
[ "${SOFTCAP:-0}" = 1 ] && ARGS+=(--logit-softcap 1)
[ -n "${MOMENTUM_WARMUP:-}" ] && ARGS+=(--muon-momentum-warmup "$MOMENTUM_WARMUP")
CMD=(mpirun -np "$NUM_GPUS" ./train_gpt2 "${ARGS[@]}")
if [ -n "${PRINT_ONLY:-}" ]; then source scripts/quote_command.sh; quote_command "${CMD[@]}"; exit 0; fi
ls "$data"/*train*.bin >/dev/null 2>&1 || { echo "error: no training shards in $data (prepare them with dev/data/fineweb.sh classic 10B)" >&2; exit 1; }
make -j train_gpt2
exec scripts/autoresume.sh "$out" "${CMD[@]}"
