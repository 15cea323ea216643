#!/usr/bin/env bash
# Validation over every sequence (-m -1), partial batches included, on 1 to 4 ranks of the CPU trainer. Two val
# shards of 7 and 5 sequences (T = 32): with -d of 4 sequences the windows are 4+3 and 4+1, with 3 sequences 3+3+1
# and 3+2, so the last window of each shard is partial and some ranks score fewer sequences than -b, or none. The
# val loss at step 0 (every run starts from the same initialisation) must be the mean over all 12 sequences: the
# value of a run whose -d is one sequence (every window whole).
#
# Tolerance: each rank adds its batches' loss sums, each scaled by 1 / (tokens scored by all ranks), into one fp32
# value, and the ranks' values are summed: at most 12 + 4 fp32 roundings of a value ~4 (6e-8 relative each), so the
# runs agree within 1e-6 relative. The untrained model's per-sequence losses are all near log(64), yet leaving out
# the partial windows (the old -m -1) or weighting the ranks' own means equally changes the mean by ~1e-3 here
# (checked below: one window of 4 sequences is 9e-4 from the whole set), three orders above the tolerance.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir val_all)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 8000 --val-tokens 225 >/dev/null \
    && /usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/more" --vocab 64 --train-tokens 200 --val-tokens 161 --seed 2 >/dev/null \
    && mv "$TMP/more/syn_val_000000.bin" "$TMP/data/syn_val_000001.bin" || { fail "make shards"; finish; }
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=32,V=64" -t 32 -x 1 -v 1 -s 0
      --threads 1)
# val0 NAME: the val loss at step 0 of run NAME
val0() { /usr/bin/python3 -c "import json,sys; print([r['val_loss'] for r in map(json.loads, open(sys.argv[1])) if r['step'] == 0 and 'val_loss' in r][0])" "$TMP/$1/metrics.jsonl"; }
run() {  # run NAME NP ARGS...
    local name=$1 np=$2; shift 2
    "${MPI[@]}" -np "$np" ./train_gpt2_cpu "${args[@]}" "$@" -o "$TMP/$name" >"$TMP/$name.log" 2>&1 \
        || { fail "$name" "$(tail -3 "$TMP/$name.log")"; return 1; }
}
close() { /usr/bin/python3 -c "import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(abs(a - b) > r * abs(b))" "$@"; }

run ref 1 -b 1 -d 32 -m -1 || finish
ref=$(val0 ref)
grep -q "val loss" "$TMP/ref.log" && pass "reference: -d of one sequence, 12 whole windows: val loss $ref" || fail "reference"
for c in "np1_d4 1 -b 1 -d 128" "np2_d4 2 -b 1 -d 128" "np2_b2 2 -b 2 -d 128" "np3_d3 3 -b 1 -d 96" "np4_d4 4 -b 1 -d 128"; do
    set -- $c
    name=$1 np=$2; shift 2
    if run "$name" "$np" "$@" -m -1; then
        v=$(val0 "$name")
        close "$v" "$ref" 1e-6 && pass "-m -1, $np rank(s), $*: every sequence scored, partial windows included ($v)" \
            || fail "-m -1, $np rank(s), $*" "val loss $v, want $ref"
    fi
done
# -m N counts windows, a partial one included: -m 2 with 4 sequences per window is shard 0's 4 + 3 sequences, the
# same as 7 windows of one sequence. And the check can fail: one window (4 sequences) is not the whole set.
if run m2_d4 2 -b 1 -d 128 -m 2 && run m7 1 -b 1 -d 32 -m 7 && run m1 2 -b 1 -d 128 -m 1; then
    close "$(val0 m2_d4)" "$(val0 m7)" 1e-6 && pass "-m 2 (4+3 sequences) equals -m 7 of one sequence each" \
        || fail "-m 2 (4+3 sequences) equals -m 7" "$(val0 m2_d4) vs $(val0 m7)"
    close "$(val0 m1)" "$ref" 1e-5 && fail "one window differs from the whole set" "$(val0 m1) vs $ref" \
        || pass "one window differs from the whole set ($(val0 m1) vs $ref)"
fi
finish
