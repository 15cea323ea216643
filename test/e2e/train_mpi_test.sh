#!/usr/bin/env bash
# Data-parallel equivalence of the CPU trainer (docs/distributed.md, "Semantics"): mpirun -np 1, 2, 3 and 4 with
# ZeRO 0, 1 and 2 on the same data, seed and -d give the same train and val losses for 20 steps and the same final
# parameters as one plain process.
#
# Tolerance: the runs differ only in the order fp32 gradient sums are taken (micro-step accumulation on one rank vs
# averaging over ranks), about 1e-7 relative per sum. The losses stay within ~1e-7 relative and the grad norms within
# ~4e-7 (both checked at 2e-5; another seed's batches move the norms by 68%). AdamW
# divides each gradient element by sqrt(v), so an element whose gradient is near zero turns its rounding noise into a
# full-size step of up to lr (3e-3 here): parameters drift apart by ~1e-5 after 20 steps (observed 0.9-2.3e-5). The
# check allows 1e-4 absolute: a thirtieth of one step's largest movement, so a systematic difference (a wrong batch
# slice, a sum instead of a mean, a missing rank) that changes even one step's update is caught.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir train_mpi)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 30000 >/dev/null || { fail "make shards"; finish; }
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=32,V=64" -b 1 -t 32 -d 384
      -x 20 -v 10 -m 2 -s 0 -l 3e-3 -c 0.1 --threads 1)

OMP_NUM_THREADS=1 ./train_gpt2_cpu "${args[@]}" -o "$TMP/single" >"$TMP/single.log" 2>&1 \
    && pass "single process" || fail "single process" "$(tail -2 "$TMP/single.log")"
for np in 1 2 3 4; do
    for z in 0 1 2; do
        name="np${np}_z${z}"
        if "${MPI[@]}" -np $np ./train_gpt2_cpu "${args[@]}" -z $z -o "$TMP/$name" >"$TMP/$name.log" 2>&1; then
            /usr/bin/python3 test/helpers/compare_runs.py "$TMP/single" "$TMP/$name" 2e-5 1e-4 >"$TMP/$name.cmp" 2>&1 \
                && pass "mpirun -np $np ZeRO-$z matches one process ($(tail -1 "$TMP/$name.cmp"))" \
                || fail "mpirun -np $np ZeRO-$z matches one process" "$(tail -3 "$TMP/$name.cmp")"
        else
            fail "mpirun -np $np ZeRO-$z" "$(tail -3 "$TMP/$name.log")"
        fi
    done
done
# A wrong global batch must be caught: a different seed with shuffling gives other batches.
"${MPI[@]}" -np 2 ./train_gpt2_cpu "${args[@]}" --seed 7 -o "$TMP/other" >/dev/null 2>&1
/usr/bin/python3 test/helpers/compare_runs.py "$TMP/single" "$TMP/other" 2e-5 1e-4 >/dev/null 2>&1 \
    && fail "the comparison notices different batches" || pass "the comparison notices different batches"
expect_error "-d not divisible by B*T*ranks" "not divisible" "${MPI[@]}" -np 3 ./train_gpt2_cpu "${args[@]}" -d 256
finish
