#!/usr/bin/env bash
# The GEMM algorithm choices of the simulated CUDA trainer (docs/cuda.md, "Tuned GEMMs"): printed in the log, kept
# in -o, reused by a resumed run instead of being chosen again. The simulated cuBLASLt offers five algorithms per
# GEMM (the first, then split-K 2, 4, 8, 16, which change the bits); CUDASIM_CUBLASLT_FASTEST_SPLITK makes one of them
# the fastest by its modelled cost, which is what the runner ranks by under the simulator (no timings involved).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir gemm_choices)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 3000 --val-tokens 300 >/dev/null \
    || { fail "make shards"; finish; }
BIN=build/train_gpt2_sim
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=2,C=32,T=8,V=64" -b 2 -t 8 -x 4 -v 2
      -m 1 -s 0 -l 1e-2 -n 2 --threads 1)
# The chosen index of every gemm-choice line ("gemm-choice gemm <16 numbers> : <index> <count> <id> <split> <ms> : ..."),
# and the timing field.
indices() { grep '^gemm-choice' "$1" | sed 's/.* : \([0-9]*\) [0-9]* [-0-9]* [-0-9]* \([-0-9.]*\) : .*/\1/' | sort -u | tr '\n' ' '; }
timings() { grep '^gemm-choice' "$1" | sed 's/.* : [0-9]* [0-9]* [-0-9]* [-0-9]* \([-0-9.]*\) : .*/\1/' | sort -u | tr '\n' ' '; }

CUDASIM_CUBLASLT_FASTEST_SPLITK=4 "$BIN" "${args[@]}" -o "$TMP/a" >"$TMP/a.log" 2>&1 \
    || { fail "tuned run" "$(tail -3 "$TMP/a.log")"; finish; }
n=$(grep -c '^gemm-choice' "$TMP/a.log")
[ "$n" -ge 6 ] && [ "$(indices "$TMP/a.log")" == "2 " ] && grep -q '^gemm       .* the fastest' "$TMP/a.log" \
    && pass "tuned run: $n choices in the log after the first step, each the fastest (split-K 4, index 2)" \
    || fail "tuned run's log" "$n lines, indices '$(indices "$TMP/a.log")'"
[ -s "$TMP/a/gemm_choices_rank0.txt" ] && [ "$(grep -c '^gemm ' "$TMP/a/gemm_choices_rank0.txt")" -ge "$n" ] \
    && pass "the choices are kept in -o/gemm_choices_rank0.txt" || fail "gemm_choices_rank0.txt" "missing or short"

# Resume from step 2 with a simulated library whose fastest is now split-K 16: the recorded choices are reused (not
# ranked again: no timing field), and the run ends bit-identical to the uninterrupted one.
resume() {  # NAME KEEP_CHOICES
    mkdir -p "$TMP/$1" && cp -r "$TMP/a/ckpt_00000002" "$TMP/a/metrics.jsonl" "$TMP/$1/"
    [ "$2" == 1 ] && cp "$TMP/a/gemm_choices_rank0.txt" "$TMP/$1/"
    CUDASIM_CUBLASLT_FASTEST_SPLITK=16 "$BIN" "${args[@]}" -y 1 -o "$TMP/$1" >"$TMP/$1.log" 2>&1
}
resume r 1 || fail "resume" "$(tail -3 "$TMP/r.log")"
[ "$(indices "$TMP/r.log")" == "2 " ] && [ "$(timings "$TMP/r.log")" == "-1.0000 " ] \
    && pass "resumed run: every recorded choice reused, none ranked again" \
    || fail "resumed run's choices" "indices '$(indices "$TMP/r.log")', timings '$(timings "$TMP/r.log")'"
cmp -s "$TMP/a/model.bin" "$TMP/r/model.bin" && pass "resumed run: final parameters bit-identical to the uninterrupted run" \
    || fail "resumed run bit-identical"
# Without the record the resumed run chooses afresh (split-K 16, index 4): the reuse above came from the record. (At
# these tiny shapes the two algorithms may well round alike; test_cudasim_cublaslt shows that they change the bits.)
resume fresh 0 || fail "resume without the record" "$(tail -3 "$TMP/fresh.log")"
[ "$(indices "$TMP/fresh.log")" == "4 " ] && [ "$(timings "$TMP/fresh.log")" != "-1.0000 " ] \
    && pass "control: a resume without the record chooses again (index 4)" \
    || fail "control resume" "indices '$(indices "$TMP/fresh.log")'"

# --gemm-tuning 0: the heuristic's first algorithm everywhere; a bad value is refused.
CUDASIM_CUBLASLT_FASTEST_SPLITK=4 "$BIN" "${args[@]}" --gemm-tuning 0 -o "$TMP/off" >"$TMP/off.log" 2>&1 \
    || fail "untuned run" "$(tail -3 "$TMP/off.log")"
[ "$(indices "$TMP/off.log")" == "0 " ] && grep -q "the heuristic's first (--gemm-tuning 0)" "$TMP/off.log" \
    && pass "--gemm-tuning 0: every plan takes the heuristic's first algorithm" \
    || fail "--gemm-tuning 0" "indices '$(indices "$TMP/off.log")'"
expect_error "--gemm-tuning 2 is refused" "--gemm-tuning 2: must be 0 or 1" "$BIN" "${args[@]}" --gemm-tuning 2 -o "$TMP/bad"
finish
