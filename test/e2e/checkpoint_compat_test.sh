#!/usr/bin/env bash
# A checkpoint written by an earlier build of the trainer resumes, and continues exactly as a run of this build does.
# test/fixtures/earlier_checkpoint/ holds what that build left in its -o (its metrics.jsonl and ckpt_00000002: 2 ranks,
# ZeRO 1, meta.json version 2, model.bin, optim_00000.bin and optim_00001.bin), from
#   mpirun -np 2 ./train_gpt2_cpu "${args[@]}" -x 4 -n 2 -o DIR      (args: below; the later checkpoint and model.bin
#                                                                      removed)
# on the shards make_synthetic_shards.py writes with the arguments below. Checked:
#   - resumed on 2 ranks with -y 1 for steps 3 and 4, the run ends with the model.bin and the metrics.jsonl (timings
#     aside) of an uninterrupted run of this build: byte for byte, so the checkpoint's files are read as they were
#     written and a checkpoint this build writes at step 2 would hold the same bits;
#   - resumed on 1 rank (the optimizer files cut at other boundaries), it continues from step 2 and finishes.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir checkpoint_compat)
BIN=./train_gpt2_cpu
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
FIXTURE=test/fixtures/earlier_checkpoint
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 20000 --val-tokens 2000 \
    >/dev/null || { fail "make shards"; finish; }
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=2,C=16,T=16,V=64" -t 16 -b 2 -d 64
      -z 1 -v 2 -m 2 -s 0 -l 3e-3 -c 0.1 --threads 1 -x 4)
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)
without_timings() { jq -c 'del(.ms, .tokens_per_sec, .mfu)' "$1"; }

"${MPI[@]}" -np 2 "$BIN" "${args[@]}" -o "$TMP/uninterrupted" >"$TMP/uninterrupted.log" 2>&1 \
    || { fail "uninterrupted run" "$(tail -3 "$TMP/uninterrupted.log")"; finish; }

cp -r "$FIXTURE" "$TMP/resumed2"
if "${MPI[@]}" -np 2 "$BIN" "${args[@]}" -y 1 -o "$TMP/resumed2" >"$TMP/resumed2.log" 2>&1; then
    check "the earlier build's checkpoint resumes at step 2 on 2 ranks" grep -qF "step 2 (ZeRO-1, optimizer state in 2 shard(s))" \
        "$TMP/resumed2.log"
    check "resumed on 2 ranks: model.bin is the uninterrupted run's, byte for byte" \
        cmp -s "$TMP/uninterrupted/model.bin" "$TMP/resumed2/model.bin"
    check "resumed on 2 ranks: metrics.jsonl is the uninterrupted run's (timings aside)" \
        diff <(without_timings "$TMP/uninterrupted/metrics.jsonl") <(without_timings "$TMP/resumed2/metrics.jsonl")
else
    fail "the earlier build's checkpoint resumes on 2 ranks" "$(tail -3 "$TMP/resumed2.log")"
fi

cp -r "$FIXTURE" "$TMP/resumed1"
if "$BIN" "${args[@]}" -y 1 -o "$TMP/resumed1" >"$TMP/resumed1.log" 2>&1; then
    check "the earlier build's checkpoint of 2 ranks resumes on 1 rank at step 2 and finishes" \
        grep -qE '"step":4,"train_loss":[0-9]' <(jq -c '{step, train_loss}' "$TMP/resumed1/metrics.jsonl")
else
    fail "the earlier build's checkpoint resumes on 1 rank" "$(tail -3 "$TMP/resumed1.log")"
fi
finish
