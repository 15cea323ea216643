#!/usr/bin/env bash
# The CPU quickstart's first steps and a second run into the same directory (scripts/quickstart.sh):
#   1. the first 40 steps (-x 40: the speedrun recipe has no warmup, and its constant rate holds for 28 of them, the
#      800-step run's rate) print every step (--log-every 1) without a jump: no step's loss more than 0.3 nats above
#      the lowest so far. The step-to-step noise of this loss at 2048 bytes per step is below 0.1 nats once it falls;
#      a jump is what an optimizer's too-large first steps do (the GPT-2 recipe's Adam with 20 warmup steps threw it
#      from 3.69 to 6.94 at step 11).
#   2. a second quickstart into the same directory, -x 10, ends below where it started, and keeps the first run:
#      the trainer moves its model and metrics into previous_<time>/, and its sample.txt and loss.png go with them.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
OUT=$(test_tmp_dir quickstart_rerun)/run
run_quickstart() {  # LOG ARGS...
    local log=$1; shift
    QUICKSTART_DEVICE=cpu QUICKSTART_OUT="$OUT" bash scripts/quickstart.sh "$@" >"$log" 2>&1
}
losses() { sed -n 's/^step *\([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p' "$1"; }

if run_quickstart "$OUT.first.log" -x 40 --log-every 1; then
    jumps=$(losses "$OUT.first.log" | awk 'NR == 1 { low = $2 } $2 > low + 0.3 { printf " step %d: %.2f (lowest before %.2f)", $1, $2, low }
                                         $2 < low { low = $2 } END { if (NR != 40) printf " %d steps logged", NR }')
    [ -z "$jumps" ] && pass "quickstart's first 40 steps: no loss jump above 0.3 nats ($(losses "$OUT.first.log" | sed -n '1p;$p' | awk '{printf "%s ", $2}'))" \
        || fail "quickstart's first 40 steps jump" "$jumps"
else
    fail "quickstart -x 40" "$(tail -3 "$OUT.first.log")"; finish
fi
first_sample=$(sha256sum <"$OUT/sample.txt") first_plot=$( [ -f "$OUT/loss.png" ] && sha256sum <"$OUT/loss.png")
if run_quickstart "$OUT.second.log" -x 10 --log-every 1; then
    read -r l1 l10 < <(losses "$OUT.second.log" | awk 'NR == 1 { a = $2 } END { print a, $2 }')
    awk -v a="$l1" -v b="$l10" 'BEGIN { exit !(b < a) }' && pass "quickstart -x 10 ends below where it started ($l1 -> $l10)" \
        || fail "quickstart -x 10 ends worse than it started" "$l1 -> $l10"
    aside=$(ls -d "$OUT"/previous_*/ 2>/dev/null | head -1)
    [ -n "$aside" ] && [ -f "$aside/model.bin" ] && [ "$(sha256sum <"$aside/sample.txt")" = "$first_sample" ] \
        && { [ -z "$first_plot" ] || [ "$(sha256sum <"$aside/loss.png")" = "$first_plot" ]; } \
        && pass "a second quickstart keeps the first one's model, sample.txt and loss.png in ${aside#$OUT/}" \
        || fail "a second quickstart overwrote the first one's outputs" "$(ls "$OUT" "$aside" 2>&1 | tr '\n' ' ')"
    [ -s "$OUT/sample.txt" ] && pass "... and writes its own sample.txt" || fail "no sample.txt from the second run"
else
    fail "a second quickstart" "$(tail -3 "$OUT.second.log")"
fi
finish
