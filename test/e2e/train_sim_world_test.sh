#!/usr/bin/env bash
# World-size independence of the CUDA backend's training path (the simulator: the real llmc/cuda kernels on the CPU,
# NCCL served by MPI): the same run on 1, 2, 3, 4 and 6 ranks, ZeRO 0, 1 and 2 at 3 and 6 ranks. -d 96 is 12
# sequences of 8 tokens per step: 12, 6, 4, 3 and 2 micro-steps of one sequence per rank. Every rank count, odd ones
# included, computes each micro-batch's gradient alike (logit gradients scaled by 1/(B T) in bf16, never by the
# number of micro-steps or ranks) and divides the fp32 sum over micro-steps and ranks by their count once
# (llmc/optimizer.h, "World-size independence"; docs/distributed.md, "Numerics").
#
# Tolerance, the same as test/e2e/train_sim_mpi_test.sh's at 2 ranks and for the same reason: the runs differ only in
# the order of the fp32 gradient sums (over micro-steps on one rank, over ranks by NCCL). Losses 1e-5 relative, grad
# norms 1e-4 relative (later norms are taken at bf16 parameters where stochastic rounding of slightly different
# master weights may flip one ulp), parameters 2 x lr x steps = 0.06 absolute. A micro-batch gradient scaled by the
# split (bf16(g/12) against bf16(g/4)/3) moves the step-1 norm by ~4e-4 relative at 3 ranks: outside.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir train_sim_world)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 6000 --val-tokens 600 >/dev/null \
    || { fail "make shards"; finish; }
BIN=build/train_gpt2_sim
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=2,C=32,T=8,V=64" -b 1 -t 8 -d 96 -x 3
      -v 3 -m 1 -s 0 -l 1e-2 --threads 1)
if CUDA_VISIBLE_DEVICES=0 "$BIN" "${args[@]}" -o "$TMP/one" >"$TMP/one.log" 2>&1; then pass "simulated CUDA trainer, 1 rank"
else fail "simulated CUDA trainer, 1 rank" "$(tail -3 "$TMP/one.log")"; finish; fi
for run in 2:1 3:0 3:1 3:2 4:1 6:0 6:1 6:2; do
    np=${run%:*} z=${run#*:} name="np${run%:*}_z${run#*:}"
    if mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x CUDA_VISIBLE_DEVICES=0 -np "$np" \
        "$BIN" "${args[@]}" -z "$z" -o "$TMP/$name" >"$TMP/$name.log" 2>&1; then
        /usr/bin/python3 test/helpers/compare_runs.py "$TMP/one" "$TMP/$name" 1e-5 0.06 1e-4 >"$TMP/cmp_$name" 2>&1 \
            && pass "simulated CUDA trainer: $np ranks, ZeRO-$z matches one rank ($(tail -1 "$TMP/cmp_$name"))" \
            || fail "simulated CUDA trainer: $np ranks, ZeRO-$z matches one rank" "$(tail -2 "$TMP/cmp_$name")"
    else
        fail "simulated CUDA trainer, $np ranks ZeRO-$z" "$(tail -3 "$TMP/$name.log")"
    fi
done
# ZeRO 0 against ZeRO 1 at the same world size: the same per-rank gradients, reduced by different collectives
# (ZeRO 0 an all-reduce, ZeRO 1 a reduce of each piece to its owner), which NCCL sums in different orders at 3 or
# more ranks (the all-reduce's ring chain starts at a rank that rotates from chunk to chunk, the reduce's at the
# root's successor; the simulator does the same: docs/cudasim.md, "NCCL reduction orders"). Each reduced element is
# then an fp32 sum of W terms in two orders, which differ by at most 2 (W - 1) 2^-24 sum|g_i| (each order's error is
# within gamma_(W-1) sum|g_i|): 6e-7 relative at W = 6, far inside the 1e-4 the norms are allowed; the rest
# follows from the one-rank comparison's argument (a bf16 ulp flip of a parameter), so the same tolerances apply.
# Bit-identity is not a property of the math here, so it is not asserted (docs/distributed.md, "Numerics").
for np in 3 6; do
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/np${np}_z0" "$TMP/np${np}_z1" 1e-5 0.06 1e-4 >"$TMP/cmp_z01_$np" 2>&1 \
        && pass "simulated CUDA trainer: $np ranks, ZeRO-0 within reduction-order rounding of ZeRO-1 ($(tail -1 "$TMP/cmp_z01_$np"))" \
        || fail "simulated CUDA trainer: $np ranks, ZeRO-0 within reduction-order rounding of ZeRO-1" "$(tail -2 "$TMP/cmp_z01_$np")"
done
finish
