#!/usr/bin/env bash
# Tokens to a target loss, the GPT-2 recipe against the speedrun recipe (docs/speedrun.md), on the CPU: both train the
# same small model shape on the same GPT-2-token corpus for the same steps and batch, each at every learning rate of
# its sweep; the target is the best GPT-2 run's final validation loss, and the speedrun's best run is read for the
# tokens it needed to reach it (dev/bench/recipe_tokens_to_target.py prints the figures and draws both curves).
#   dev/bench/recipe_tokens_to_target.sh [OUT_DIR]
# Settings (environment): MODEL (default L=4,NH=4,C=128), STEPS (300), B (8), T (64), VAL_EVERY (20), VAL_BATCHES (8),
# THREADS (0: every core), GPT2_LRS ("1e-3 3e-3 1e-2": -l, with llm.c's recipe otherwise: warm-up, cosine to 0,
# weight decay 0.1, clipping 1), SPEEDRUN_SCALES ("0.5 1 2": multiples of the speedrun's three learning rates, Muon
# 0.02, embedding 0.3, head 0.002), TRAIN / VAL (data/brown's GPT-2 tokens). Runs that exist in OUT_DIR are kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/bench/recipe_tokens_to_target}
MODEL=${MODEL:-L=4,NH=4,C=128} STEPS=${STEPS:-300} B=${B:-8} T=${T:-64}
VAL_EVERY=${VAL_EVERY:-20} VAL_BATCHES=${VAL_BATCHES:-8} THREADS=${THREADS:-0}
GPT2_LRS=${GPT2_LRS:-"1e-3 3e-3 1e-2"} SPEEDRUN_SCALES=${SPEEDRUN_SCALES:-"0.5 1 2"}
TRAIN=${TRAIN:-"data/brown/brown_train_*.bin"} VAL=${VAL:-"data/brown/brown_val_*.bin"}
[ -x ./train_gpt2_cpu ] || make train_gpt2_cpu
mkdir -p "$out"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores: $MODEL, $STEPS steps of B=$B x T=$T tokens, val every $VAL_EVERY"
common=(-e "$MODEL" -i "$TRAIN" -j "$VAL" -b "$B" -t "$T" -x "$STEPS" -v "$VAL_EVERY" -m "$VAL_BATCHES" -s 0
        --threads "$THREADS" --seed 1337)
run() {  # NAME ARGS...: one training run into $out/NAME (skipped when it finished before)
    local name=$1
    shift
    if [ -f "$out/$name/done" ]; then echo "$name: kept"; return; fi
    rm -rf "${out:?}/$name"
    local t0=$SECONDS
    ./train_gpt2_cpu "${common[@]}" -o "$out/$name" "$@" >"$out/$name.log" 2>&1 || { tail -3 "$out/$name.log"; exit 1; }
    touch "$out/$name/done"
    echo "$name: $(grep 'val loss' "$out/$name.log" | tail -1), $((SECONDS - t0)) s"
}
for lr in $GPT2_LRS; do
    run "gpt2_lr$lr" --recipe gpt2 -l "$lr" -u $((STEPS / 20)) -k cosine -q 0 -c 0.1 --grad-clip 1
done
for m in $SPEEDRUN_SCALES; do
    lrs=$(awk -v m="$m" 'BEGIN { printf "-l %g --embed-lr %g --head-lr %g", 0.02 * m, 0.3 * m, 0.002 * m }')
    # shellcheck disable=SC2086
    run "speedrun_x$m" --recipe speedrun $lrs
done
/usr/bin/python3 dev/bench/recipe_tokens_to_target.py "$out" --tokens-per-step $((B * T))
