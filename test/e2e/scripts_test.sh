#!/usr/bin/env bash
# The run scripts' batch arithmetic for any GPU count (scripts/gpt2_recipes.sh), without launching anything: every
# recipe on 1, 2, 3, 6, 8, 16 and 64 GPUs keeps its -d and hyper-parameters, with -b at most the recipe's
# micro-batch and -d = -b x -t x GPUs x micro-steps, or stops with a message when the GPU count cannot share -d (3
# and 6 here: a step is a power of two of sequences); an explicit MICRO_BATCH that does not divide a GPU's share is
# refused with the -b values that work. Then the scripts themselves with PRINT_ONLY=1: run_gpt2.sh, the hostfile
# launcher and the Slurm batch script print the same trainer flags for the same recipe and GPU count (the Slurm
# defaults are the 124M recipe).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
source scripts/gpt2_recipes.sh
TMP=$(test_tmp_dir scripts)

# Expected (-b, micro-steps) per GPU count, "-" where the count cannot keep -d: 124M/350M/774M step = 512
# sequences of 1024, 1558M = 1024.
declare -A want=(
    [124M]="1:64x8 2:64x4 3:- 6:- 8:64x1 16:32x1 64:8x1"
    [350M]="1:64x8 2:64x4 3:- 6:- 8:64x1 16:32x1 64:8x1"
    [774M]="1:32x16 2:32x8 3:- 6:- 8:32x2 16:32x1 64:8x1"
    [1558M]="1:16x64 2:16x32 3:- 6:- 8:16x8 16:16x4 64:16x1")
for size in 124M 350M 774M 1558M; do
    gpt2_recipe "$size"
    for entry in ${want[$size]}; do
        gpus=${entry%%:*} expect=${entry#*:}
        if out=$( (gpt2_train_args "$size" "$gpus" && echo "${TRAIN_ARGS[*]}") 2>"$TMP/err"); then
            got=$(sed -E 's/.* -b ([0-9]+) .*/\1/' <<<"$out")
            steps=$((RECIPE_TOTAL_BATCH / (got * 1024 * gpus)))
            flags="-e $RECIPE_MODEL -b $got -t 1024 -d $RECIPE_TOTAL_BATCH -l $RECIPE_LR -u 700 -q $RECIPE_FINAL_FRAC -k cosine -c 0.1 -z 1 -x $RECIPE_STEPS"
            if [ "$expect" = "${got}x$steps" ] && [[ "$out" == *"$flags"* ]] && ((got * 1024 * gpus * steps == RECIPE_TOTAL_BATCH)) \
                && grep -q "x $gpus GPU(s) x $steps micro-step(s)" "$TMP/err"; then
                pass "$size on $gpus GPUs: -b $got x $steps micro-steps, -d and the recipe kept"
            else
                fail "$size on $gpus GPUs" "expected $expect, got -b $got x $steps: $out"
            fi
        else
            if [ "$expect" = "-" ] && grep -q "cannot share evenly: no -b works" "$TMP/err" && grep -q "TOTAL_BATCH=" "$TMP/err"; then
                pass "$size on $gpus GPUs: refused with a message ($(grep -o 'Use a GPU count[^.]*' "$TMP/err"))"
            else
                fail "$size on $gpus GPUs" "expected $expect: $(cat "$TMP/err")"
            fi
        fi
    done
done

# An explicit micro-batch must divide each GPU's share (64 sequences for 124M on 8 GPUs).
if (MICRO_BATCH=48 gpt2_train_args 124M 8) 2>"$TMP/err"; then fail "MICRO_BATCH=48 on 8 GPUs is refused" "accepted"
elif grep -q "\-b 48 does not divide the 64 sequences.*-b values that work: 64 32 16 8 4 2 1" "$TMP/err"; then
    pass "MICRO_BATCH=48 on 8 GPUs is refused, naming the -b values that work"
else fail "MICRO_BATCH=48 on 8 GPUs is refused, naming the -b values that work" "$(cat "$TMP/err")"; fi
(MICRO_BATCH=16 gpt2_train_args 124M 8 && echo "${TRAIN_ARGS[*]}") >"$TMP/out" 2>/dev/null
grep -q -- "-b 16 -t 1024 -d 524288" "$TMP/out" && pass "MICRO_BATCH=16 on 8 GPUs: 4 micro-steps" \
    || fail "MICRO_BATCH=16 on 8 GPUs" "$(cat "$TMP/out")"
expect_error "an unknown size is refused" "must be 124M, 350M, 774M or 1558M" bash -c 'source scripts/gpt2_recipes.sh; gpt2_recipe 2B'

# The scripts, printing their command. Same recipe, same GPU count -> the same trainer flags.
flags_of() { sed -E 's/.*(-i .*)$/\1/' <<<"$1"; }
single=$(PRINT_ONLY=1 NUM_GPUS=16 bash scripts/run_gpt2.sh 124M 2>/dev/null)
printf 'node01 slots=8\nnode02 slots=8\n' >"$TMP/hosts"
hostfile=$(PRINT_ONLY=1 GPUS_PER_NODE=8 bash scripts/multi_node/run_mpirun.sh "$TMP/hosts" 2>/dev/null)
slurm=$(PRINT_ONLY=1 SLURM_NTASKS=16 SLURM_JOB_ID=1 SLURM_JOB_NUM_NODES=2 bash scripts/multi_node/run_slurm.sbatch 2>/dev/null)
[[ "$single" == "mpirun -np 16 ./train_gpt2 "*"-b 32 -t 1024 -d 524288 "*"-x 18865 "* ]] \
    && pass "run_gpt2.sh 124M on 16 GPUs: -b 32, one micro-step" || fail "run_gpt2.sh 124M on 16 GPUs" "$single"
[[ "$hostfile" == "mpirun -np 16 --hostfile $TMP/hosts"* && "$(flags_of "$hostfile")" == "$(flags_of "$single")" ]] \
    && pass "run_mpirun.sh: 2 nodes x 8 runs the 124M recipe with run_gpt2.sh's flags" \
    || fail "run_mpirun.sh: 2 nodes x 8 runs the 124M recipe" "$hostfile"
[[ "$slurm" == "srun --mpi=pmix --kill-on-bad-exit=1 ./train_gpt2 "* && "$(flags_of "$slurm")" == "$(flags_of "$single")" ]] \
    && pass "run_slurm.sbatch defaults: the 124M recipe on the job's 16 tasks, run_gpt2.sh's flags" \
    || fail "run_slurm.sbatch defaults: the 124M recipe" "$slurm"
# PRINT_ONLY prints a command that can be pasted: globs single-quoted, and the words come back unchanged.
[[ "$single" == *"-i 'data/fineweb10B/*train*.bin' -j 'data/fineweb10B/*val*.bin'"* ]] \
    && eval "words=($single)" && [ "${words[4]}" = "-i" ] && [ "${words[5]}" = "data/fineweb10B/*train*.bin" ] \
    && pass "PRINT_ONLY quotes globs (the printed command pastes back to the same words)" \
    || fail "PRINT_ONLY quotes globs" "$single"
passthrough=$(PRINT_ONLY=1 SLURM_NTASKS=16 bash scripts/multi_node/run_slurm.sbatch -e d12 -b 4 2>/dev/null)
[[ "$passthrough" == *"./train_gpt2 -e d12 -b 4" ]] && pass "run_slurm.sbatch passes given arguments through" \
    || fail "run_slurm.sbatch passes given arguments through" "$passthrough"
printf 'a slots=2\nb slots=2\nc slots=2\n' >"$TMP/hosts3"
expect_error "run_mpirun.sh: 3 nodes x 2 GPUs cannot keep the 124M recipe's -d" "cannot share evenly" \
    env PRINT_ONLY=1 GPUS_PER_NODE=2 bash scripts/multi_node/run_mpirun.sh "$TMP/hosts3"
expect_error "run_gpt2.sh on 6 GPUs stops with the message" "6 GPUs cannot share evenly" \
    env PRINT_ONLY=1 NUM_GPUS=6 bash scripts/run_gpt2.sh 124M
# run_speedrun.sh: the UntieEmbed record's steps and batch on any GPU count, flags the trainer accepts (its dry run).
sr8=$(PRINT_ONLY=1 NUM_GPUS=8 bash scripts/run_speedrun.sh 2>/dev/null)
sr1=$(PRINT_ONLY=1 NUM_GPUS=1 SOFTCAP=1 MOMENTUM_WARMUP=500 bash scripts/run_speedrun.sh 2>&1)
[[ "$sr8" == "mpirun -np 8 ./train_gpt2 "*"--recipe speedrun -e L=12,NH=6,C=768 -b 64 -t 1024 -d 524288 -x 4578 "* ]] \
    && pass "run_speedrun.sh on 8 GPUs: the record's 4578 steps of 524288 tokens, one micro-step" \
    || fail "run_speedrun.sh on 8 GPUs" "$sr8"
[[ "$sr1" == *"1 GPU(s) x 8 micro-step(s)"* && "$sr1" == *"-d 524288"*"--logit-softcap 1 --muon-momentum-warmup 500" ]] \
    && pass "run_speedrun.sh on 1 GPU: the same tokens per step in 8 micro-steps, the record-9 options" \
    || fail "run_speedrun.sh on 1 GPU" "$sr1"
eval "words=($sr8)"
./train_gpt2_cpu --dry-run -pn 8 "${words[@]:4}" >"$TMP/sr_plan" 2>&1 && grep -q "memory per rank" "$TMP/sr_plan" \
    && pass "the trainer accepts run_speedrun.sh's flags (its dry run on 8 ranks)" \
    || fail "the trainer accepts run_speedrun.sh's flags" "$(tail -2 "$TMP/sr_plan")"
finish
