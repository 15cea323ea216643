#!/usr/bin/env bash
# The speedrun recipe (docs/speedrun.md) on the CUDA backend under the CUDA simulator (build/train_gpt2_sim: the real
# llmc/cuda kernels in bf16, NCCL served by MPI), with every ShortcutsTweaks option on: 2, 3 and 4 ranks at ZeRO 0, 1
# and 2 against the one-rank run (same data, seed and -d, so the same global batches); a checkpoint of 2 ranks
# resumed on 3.
#
# Tolerance, as test/e2e/train_sim_mpi_test.sh's: the runs differ in how fp32 partial gradient sums are combined, one
# fp32 rounding per element; the losses at 1e-5 relative. The grad norms are taken at bf16 parameters that differ
# by one bf16 ulp wherever stochastic rounding of slightly different master weights flipped (1e-4, as there). The
# parameters are not compared: Adam's lr-0.3 embedding turns a rounding flip into a full step of 0.3 (test_gpt2
# --speedrun-ref holds the optimizer's arithmetic to the reference; the CPU trainer's runs hold the parameters,
# test/e2e/speedrun_train_test.sh): 10 is a bound no real run approaches, so only a NaN or a lost parameter fails.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir speedrun_sim_mpi)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 3000 --val-tokens 600 >/dev/null \
    || { fail "make shards"; finish; }
BIN=build/train_gpt2_sim
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=8,V=64" -b 1 -t 8 -d 96 -x 4
      -v 4 -m 1 -s 0 --threads 1 --recipe speedrun --logit-softcap 1 --value-residual 1 --embed-skip 1
      --muon-momentum-warmup 3)
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x CUDA_VISIBLE_DEVICES=0)
if CUDA_VISIBLE_DEVICES=0 "$BIN" "${args[@]}" -o "$TMP/one" >"$TMP/one.log" 2>&1; then
    pass "simulated CUDA speedrun, 1 rank"
else
    fail "simulated CUDA speedrun, 1 rank" "$(tail -3 "$TMP/one.log")"; finish
fi
for run in "2 0" "2 1" "2 2" "3 1" "4 2"; do
    set -- $run
    name="np$1_z$2"
    if "${MPI[@]}" -np "$1" "$BIN" "${args[@]}" -z "$2" -o "$TMP/$name" >"$TMP/$name.log" 2>&1; then
        /usr/bin/python3 test/helpers/compare_runs.py "$TMP/one" "$TMP/$name" 1e-5 10 1e-4 >"$TMP/$name.cmp" 2>&1 \
            && pass "simulated CUDA speedrun: mpirun -np $1 ZeRO-$2 matches one rank ($(tail -1 "$TMP/$name.cmp"))" \
            || fail "simulated CUDA speedrun: mpirun -np $1 ZeRO-$2 matches one rank" "$(tail -2 "$TMP/$name.cmp")"
    else
        fail "simulated CUDA speedrun, mpirun -np $1 ZeRO-$2" "$(tail -3 "$TMP/$name.log")"
    fi
done
# A checkpoint at step 2 of 2 ranks (ZeRO 1) resumed on 3 (ZeRO 2): the matrices dealt again, the same end.
if "${MPI[@]}" -np 2 "$BIN" "${args[@]}" -z 1 -n 2 -o "$TMP/ckpt" >"$TMP/ckpt.log" 2>&1; then
    rm -rf "$TMP/ckpt/ckpt_00000004"
    if "${MPI[@]}" -np 3 "$BIN" "${args[@]}" -z 2 -n 2 -y 1 -o "$TMP/ckpt" >"$TMP/resume.log" 2>&1 &&
        grep -q "resume .*step 2" "$TMP/resume.log"; then
        /usr/bin/python3 test/helpers/compare_runs.py "$TMP/one" "$TMP/ckpt" 1e-5 10 1e-4 >"$TMP/resume.cmp" 2>&1 \
            && pass "simulated CUDA speedrun: 2 ranks' checkpoint resumed on 3 matches one rank ($(tail -1 "$TMP/resume.cmp"))" \
            || fail "simulated CUDA speedrun: resumed on 3 ranks matches one rank" "$(tail -2 "$TMP/resume.cmp")"
    else
        fail "simulated CUDA speedrun: resume on 3 ranks" "$(tail -3 "$TMP/resume.log")"
    fi
else
    fail "simulated CUDA speedrun: 2 ranks with checkpoints" "$(tail -3 "$TMP/ckpt.log")"
fi
finish
