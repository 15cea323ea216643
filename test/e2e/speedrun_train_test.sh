#!/usr/bin/env bash
# The speedrun recipe (--recipe speedrun, docs/speedrun.md) in the CPU trainer: mpirun -np 1, 2, 3, 4 and 6 with ZeRO
# 0, 1 and 2, and hybrid sharding (--shard-group 2 on 4 ranks), give the same train and val losses for 20 steps and
# the same final parameters as one plain process; a checkpoint of 3 ranks at ZeRO 1 resumes on 1, 2 and 4 ranks at
# other stages (the matrices dealt again) and ends where the uninterrupted run ends; the dry run plans the owned
# state; the refusals.
#
# Tolerance as test/e2e/train_mpi_test.sh: the runs differ only in the order of fp32 gradient sums (losses within
# ~3e-7 relative, checked at 2e-5). Parameters: Muon's update is orthogonalised from the whole momentum, which
# rounding noise barely moves; Adam on the embedding (lr 0.3) and the head (0.002) can turn an element's gradient
# noise into up to an lr-sized step, but at these shapes every element's gradient is far above the noise: observed
# 1.2e-6 to 5.7e-6, checked at 1e-4, below one Muon step of the run's last, decayed learning rate (3.5e-3 x 1.25).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir speedrun_train)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 30000 >/dev/null || { fail "make shards"; finish; }
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)
base=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -b 1 -t 32 -d 384 -x 20 -v 10 -m 2 -s 0 --threads 1)
args=("${base[@]}" -e "L=2,NH=2,C=32,T=32,V=64" --recipe speedrun)
same() {  # NAME RUN_DIR: the run ends as the single process
    if /usr/bin/python3 test/helpers/compare_runs.py "$TMP/single" "$2" 2e-5 1e-4 >"$2.cmp" 2>&1; then
        pass "$1 matches one process ($(tail -1 "$2.cmp"))"
    else
        fail "$1 matches one process" "$(tail -2 "$2.cmp")"
    fi
}

OMP_NUM_THREADS=1 ./train_gpt2_cpu "${args[@]}" -o "$TMP/single" >"$TMP/single.log" 2>&1 \
    && pass "single process" || fail "single process" "$(tail -2 "$TMP/single.log")"
if grep -q "arch=speedrun" "$TMP/single.log" && grep -q "Muon on qkvw" "$TMP/single.log"; then
    pass "the start-up names the architecture and the optimizer groups"
else
    fail "the start-up names the architecture and the optimizer groups" "$(head -8 "$TMP/single.log")"
fi
for np in 1 2 3 4 6; do
    for z in 0 1 2; do
        name="np${np}_z${z}"
        if "${MPI[@]}" -np $np ./train_gpt2_cpu "${args[@]}" -z $z -o "$TMP/$name" >"$TMP/$name.log" 2>&1; then
            same "mpirun -np $np ZeRO-$z" "$TMP/$name"
        else
            fail "mpirun -np $np ZeRO-$z" "$(tail -3 "$TMP/$name.log")"
        fi
    done
done
for z in 1 2; do
    name="hybrid_z$z"
    if "${MPI[@]}" -np 4 ./train_gpt2_cpu "${args[@]}" -z $z --shard-group 2 -o "$TMP/$name" >"$TMP/$name.log" 2>&1; then
        same "mpirun -np 4 --shard-group 2 ZeRO-$z" "$TMP/$name"
    else
        fail "mpirun -np 4 --shard-group 2 ZeRO-$z" "$(tail -3 "$TMP/$name.log")"
    fi
done
# The ShortcutsTweaks record's options: the scalars (Adam) sharded in flat ranges beside the owned matrices. The
# embedding skip feeds every layer's gradient into the embedding's and the skip scalars' (Adam at lr 0.3 and 0.02),
# whose near-zero elements turn the reduction-order noise into larger steps: observed (1 against 3 ranks) losses
# 1.2e-6, grad norms 1.7e-5, parameters 6.9e-4 (0.2% of one embedding step); checked at 2e-5, 1e-4 and 3e-3 (1%
# of one embedding step): a wrong sum (a micro-step or a rank missing) moves the first step's norm by far more.
rec9=(--logit-softcap 1 --value-residual 1 --embed-skip 1 --muon-momentum-warmup 5)
OMP_NUM_THREADS=1 ./train_gpt2_cpu "${args[@]}" "${rec9[@]}" -o "$TMP/single9" >"$TMP/single9.log" 2>&1 \
    || fail "single process with the record-9 options" "$(tail -2 "$TMP/single9.log")"
for z in 1 2; do
    name="record9_np3_z$z"
    if "${MPI[@]}" -np 3 ./train_gpt2_cpu "${args[@]}" "${rec9[@]}" -z $z -o "$TMP/$name" >"$TMP/$name.log" 2>&1 &&
        /usr/bin/python3 test/helpers/compare_runs.py "$TMP/single9" "$TMP/$name" 2e-5 3e-3 1e-4 \
            --first-rtol 1e-6 1e-6 >"$TMP/$name.cmp" 2>&1; then
        pass "the record-9 options on 3 ranks, ZeRO-$z, match one process ($(tail -1 "$TMP/$name.cmp"))"
    else
        fail "the record-9 options on 3 ranks, ZeRO-$z" "$(tail -2 "$TMP/$name.log" "$TMP/$name.cmp" 2>/dev/null)"
    fi
done
# Their checkpoint (the flags and the scalars in it) resumed on 2 ranks at ZeRO 2.
"${MPI[@]}" -np 3 ./train_gpt2_cpu "${args[@]}" "${rec9[@]}" -z 1 -n 10 -o "$TMP/ckpt9" >"$TMP/ckpt9.log" 2>&1 \
    && rm -rf "$TMP/ckpt9/ckpt_00000020" \
    && "${MPI[@]}" -np 2 ./train_gpt2_cpu "${args[@]}" "${rec9[@]}" -z 2 -n 10 -y 1 -o "$TMP/ckpt9" >"$TMP/resume9.log" 2>&1 \
    && grep -q "resume .*step 10" "$TMP/resume9.log" \
    && /usr/bin/python3 test/helpers/compare_runs.py "$TMP/single9" "$TMP/ckpt9" 2e-5 3e-3 1e-4 >"$TMP/resume9.cmp" 2>&1 \
    && pass "the record-9 options resumed on 2 ranks match one process ($(tail -1 "$TMP/resume9.cmp"))" \
    || fail "the record-9 options resumed on 2 ranks" "$(tail -2 "$TMP/resume9.log" "$TMP/resume9.cmp" 2>/dev/null)"
# ZeRO 1 on 3 ranks deals the 8 block matrices (4 per layer) to their owners: every rank steps some.
owned=$(grep -c "this rank steps [1-9][0-9]* Muon matri" "$TMP/np3_z1.log")
[ "$owned" = 1 ] && pass "ZeRO 1 on 3 ranks: rank 0 owns Muon matrices" || fail "ZeRO 1 on 3 ranks: rank 0 owns Muon matrices" "$(grep optimizer "$TMP/np3_z1.log")"

# Checkpoint at step 10 on 3 ranks (ZeRO 1), resumed elsewhere.
"${MPI[@]}" -np 3 ./train_gpt2_cpu "${args[@]}" -z 1 -n 10 -o "$TMP/ckpt" >"$TMP/ckpt.log" 2>&1 \
    && pass "3 ranks, checkpoints every 10 steps" || fail "3 ranks, checkpoints every 10 steps" "$(tail -2 "$TMP/ckpt.log")"
files=$(ls "$TMP/ckpt/ckpt_00000010" | grep -c '^optim_')
if /usr/bin/python3 -c "import json,sys; m=json.load(open(sys.argv[1])); f=m['files'][1:]; sys.exit(not(len(f)==m['world_size']==$files and f[0]['begin']==0 and all(a['end']==b['begin'] for a,b in zip(f,f[1:])) and f[-1]['end']==m['num_params']))" "$TMP/ckpt/ckpt_00000010/meta.json"; then
    pass "the checkpoint's $files optimizer files tile the parameters in flat order"
else
    fail "the checkpoint's optimizer files tile the parameters" "$(head -c 400 "$TMP/ckpt/ckpt_00000010/meta.json")"
fi
for w in "1 0" "2 2" "4 1"; do
    set -- $w
    dir="$TMP/resume_np$1"
    cp -r "$TMP/ckpt" "$dir" && rm -rf "$dir/ckpt_00000020"
    if "${MPI[@]}" -np "$1" ./train_gpt2_cpu "${args[@]}" -z "$2" -n 10 -y 1 -o "$dir" >"$dir.log" 2>&1 \
        && grep -q "resume .*step 10" "$dir.log"; then
        same "resumed at step 10 on $1 rank(s), ZeRO-$2" "$dir"
    else
        fail "resumed at step 10 on $1 rank(s), ZeRO-$2" "$(tail -3 "$dir.log")"
    fi
done
expect_error "a speedrun checkpoint refused by --recipe gpt2" "written for model arch=speedrun" \
    ./train_gpt2_cpu "${base[@]}" -e "L=2,NH=2,C=32,T=32,V=64" --recipe gpt2 -y 1 -o "$TMP/ckpt"

# The dry run: the state each rank owns.
out=$(./train_gpt2_cpu --dry-run -i /none -j /none --recipe speedrun -e "L=12,NH=6,C=768" -b 4 -t 1024 -pn 8 -z 1 2>/dev/null)
if [[ "$out" == *"owned of 8 ranks"* && "$out" == *"qk-norm rstd"* && "$out" == *"host memory per rank"* ]]; then
    pass "dry run of the speedrun on 8 ranks plans the owned state and the recipe's buffers"
else
    fail "dry run of the speedrun on 8 ranks" "$(printf '%s' "$out" | head -12)"
fi

# The tools: samples during training and generate work with a speedrun model (GPT-2's vocabulary, the soft-cap in
# the model file); export_hf refuses it (no Hugging Face class has this architecture) and writes nothing.
# GPT-2's vocabulary (the model's V = 50257; the shards use ids < 64), as test/e2e/generate_test.sh.
gpt2_vocab || fail "fetch the GPT-2 vocabulary"
if ./train_gpt2_cpu --recipe speedrun --logit-softcap 1 -e "L=1,NH=2,C=32,T=32" -i "$TMP/data/syn_train_*.bin" \
        -j "$TMP/data/syn_val_*.bin" -b 2 -t 32 -x 2 -v 1 -m 1 -s 2 -g 8 --threads 1 -o "$TMP/gen" \
        >"$TMP/gen.log" 2>&1 && grep -q -- "---- sample at step 2" "$TMP/gen.log"; then
    pass "a speedrun run with the soft-cap samples text"
else
    fail "a speedrun run with the soft-cap samples text" "$(tail -3 "$TMP/gen.log")"
fi
gen=$(./generate -e "$TMP/gen/model.bin" -p "The" -n 8 2>&1)
[ $? -eq 0 ] && [[ "$gen" == The* ]] && pass "generate continues a prompt with a speedrun model" \
    || fail "generate continues a prompt with a speedrun model" "$gen"
refuses "export_hf refuses a speedrun model" "no Hugging Face class matches the speedrun architecture" \
    ./export_hf "$TMP/gen/model.bin" "$TMP/hf"
[ ! -e "$TMP/hf" ] && pass "export_hf wrote nothing" || fail "export_hf wrote nothing" "$(ls "$TMP/hf")"

refuses "--sync-every with Muon" "--sync-every with --recipe speedrun" ./train_gpt2_cpu "${args[@]}" --sync-every 5
refuses "weight decay with the speedrun" "no weight decay" ./train_gpt2_cpu "${args[@]}" -c 0.1
refuses "a speedrun flag with the GPT-2 recipe" "--embed-lr belongs to --recipe speedrun" ./train_gpt2_cpu "${base[@]}" --embed-lr 0.1
refuses "an unknown recipe" "--recipe 'modded'" ./train_gpt2_cpu "${base[@]}" --recipe modded
refuses "an odd head size" "even head size" ./train_gpt2_cpu "${base[@]}" --recipe speedrun -e "L=2,NH=4,C=12,T=32,V=64"
finish
