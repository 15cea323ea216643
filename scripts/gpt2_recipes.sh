# GPT-2 reproduction recipes (llm.c's published hyper-parameters) and the batch arithmetic that runs them on any
# number of GPUs. Sourced, not run: scripts/run_gpt2.sh, scripts/multi_node/run_mpirun.sh and
# scripts/multi_node/run_slurm.sbatch build their command lines here, so the three agree; test/e2e/scripts_test.sh
# checks the arithmetic for 1, 2, 3, 6, 8, 16 and 64 GPUs (make test).
#
#   gpt2_recipe SIZE              RECIPE_* for 124M | 350M | 774M | 1558M
#   plan_batch D T GPUS B [exact] MICRO_BATCH and GRAD_ACCUM such that D = MICRO_BATCH x T x GPUS x GRAD_ACCUM:
#                                 the largest micro-batch <= B that divides each GPU's share of the step (B exactly
#                                 when `exact`), or a message saying which -b values work, and status 1
#   gpt2_train_args SIZE GPUS     TRAIN_ARGS: the trainer's flags for that recipe on GPUS GPUs
#
# The global batch -d and every other hyper-parameter of a recipe stay as published whatever the GPU count; only the
# split of a step into micro-steps changes (so the optimisation is the same). A GPU count that does not divide the
# step's sequences cannot keep -d: the message names the nearest -d values (TOTAL_BATCH=...) that would work.
# Environment: DATA_DIR, OUT_DIR, MICRO_BATCH (sequences per GPU per micro-step: must divide each GPU's share),
# TOTAL_BATCH (override -d), HELLASWAG (an eval file, used when present).

# gpt2_recipe SIZE: the recipe's model, data, micro-batch (for 80 GB GPUs), -d, learning rate, final lr fraction,
# steps and checkpoint interval.
gpt2_recipe() {
    #                   model data                  micro -d       lr      -q   steps   ckpt
    case "${1:-}" in
        124M)  set -- d12 data/fineweb10B         64 524288  6e-4    0.0  18865   5000 ;;
        350M)  set -- d24 data/fineweb100B        64 524288  3e-4    0.0  60000   2000 ;;
        774M)  set -- d36 data/fineweb100B        32 524288  2.5e-4  0.0  286102  4000 ;;
        1558M) set -- d48 data/edu_fineweb100B    16 1048576 6e-4    0.1  32000   2000 ;;
        *) echo "error: GPT-2 size must be 124M, 350M, 774M or 1558M (got '${1:-}')" >&2; return 1 ;;
    esac
    RECIPE_MODEL=$1 RECIPE_DATA=$2 RECIPE_MICRO=$3 RECIPE_TOTAL_BATCH=$4 RECIPE_LR=$5 RECIPE_FINAL_FRAC=$6
    RECIPE_STEPS=$7 RECIPE_CKPT=$8
    case "$RECIPE_DATA" in  # the command that prepares the data (docs/data.md)
        data/fineweb10B) RECIPE_PREPARE="dev/data/fineweb.sh classic 10B" ;;
        data/fineweb100B) RECIPE_PREPARE="dev/data/fineweb.sh classic 100B" ;;
        data/edu_fineweb100B) RECIPE_PREPARE="dev/data/fineweb.sh edu 100B" ;;
    esac
}

# plan_batch D T GPUS B [exact]
plan_batch() {
    local d=$1 t=$2 gpus=$3 want=$4 exact=${5:-}
    if ! [[ "$d" =~ ^[1-9][0-9]*$ && "$t" =~ ^[1-9][0-9]*$ && "$gpus" =~ ^[1-9][0-9]*$ && "$want" =~ ^[1-9][0-9]*$ ]]; then
        echo "error: plan_batch: -d '$d', -t '$t', GPUs '$gpus' and -b '$want' must be positive integers" >&2
        return 1
    fi
    if (( d % t != 0 )); then
        echo "error: -d $d is not a multiple of the sequence length -t $t" >&2
        return 1
    fi
    local seqs=$((d / t))
    if (( seqs % gpus != 0 )); then
        local lo=$((seqs / gpus * gpus * t)) hi=$(((seqs / gpus + 1) * gpus * t))
        echo "error: -d $d is $seqs sequences of $t tokens per step, which $gpus GPUs cannot share evenly: no -b" \
             "works. Use a GPU count that divides $seqs, or change the recipe's batch with TOTAL_BATCH=$hi" \
             "$( ((lo > 0)) && echo "or TOTAL_BATCH=$lo")" >&2
        return 1
    fi
    local share=$((seqs / gpus)) b works=""
    for ((b = share; b >= 1; b--)); do (( share % b == 0 )) && works+="${works:+ }$b"; done
    if [ -n "$exact" ]; then
        if (( share % want != 0 )); then
            echo "error: -b $want does not divide the $share sequences each of $gpus GPUs takes per step" \
                 "(-d $d, -t $t); -b values that work: $works" >&2
            return 1
        fi
        b=$want
    else
        for ((b = want < share ? want : share; b > 1; b--)); do (( share % b == 0 )) && break; done
    fi
    MICRO_BATCH=$b
    GRAD_ACCUM=$((share / b))
}

# gpt2_train_args SIZE GPUS: TRAIN_ARGS for the trainer (prints the batch plan on stderr).
gpt2_train_args() {
    local size=$1 gpus=$2
    gpt2_recipe "$size" || return 1
    local data=${DATA_DIR:-$RECIPE_DATA} out=${OUT_DIR:-runs/gpt2_$size} d=${TOTAL_BATCH:-$RECIPE_TOTAL_BATCH}
    local hellaswag=${HELLASWAG:-data/hellaswag/hellaswag_val.bin}
    if [ -n "${MICRO_BATCH:-}" ]; then plan_batch "$d" 1024 "$gpus" "$MICRO_BATCH" exact || return 1
    else plan_batch "$d" 1024 "$gpus" "$RECIPE_MICRO" || return 1; fi
    echo "GPT-2 $size on $gpus GPU(s): -d $d = -b $MICRO_BATCH x -t 1024 x $gpus GPU(s) x $GRAD_ACCUM micro-step(s)" >&2
    TRAIN_ARGS=(-i "$data/*train*.bin" -j "$data/*val*.bin" -o "$out")
    [ -f "$hellaswag" ] && TRAIN_ARGS+=(--hellaswag "$hellaswag")
    TRAIN_ARGS+=(-e "$RECIPE_MODEL" -b "$MICRO_BATCH" -t 1024 -d "$d"
                 -l "$RECIPE_LR" -u 700 -q "$RECIPE_FINAL_FRAC" -k cosine -c 0.1 -z 1
                 -x "$RECIPE_STEPS" -v 250 -s 20000 -n "$RECIPE_CKPT" -y 1)
}
