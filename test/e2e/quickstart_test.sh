#!/usr/bin/env bash
# The CPU quickstart end to end, as a new user runs it (scripts/quickstart.sh, QUICKSTART_DEVICE=cpu), cut to 10
# training steps on one thread with options the script passes on to the trainer (-x 10 --threads 1; the README's
# command runs 800 steps on every core, and tests that share the machine make threads wait on each other): it
# finishes, prints no compiler command lines, writes the model, the metrics, the sample and the plot, and ends with
# the next-steps block. The sample's quality after the whole run is a benchmark, not a test:
# dev/bench/quickstart_sample.sh (docs/benchmarks.md, "Quickstart").
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir quickstart)
OUT=$TMP/run
LOG=$TMP/quickstart.log

QUICKSTART_DEVICE=cpu QUICKSTART_OUT="$OUT" bash scripts/quickstart.sh -x 10 --threads 1 >"$LOG" 2>&1
rc=$?
[ $rc -eq 0 ] && pass "quickstart (CPU) finishes" || { fail "quickstart (CPU) finishes" "status $rc: $(tail -3 "$LOG")"; finish; }

# Quiet build: no line that is a compiler or linker invocation.
cmds=$(grep -cE '^((/usr/bin/)?ccache |g\+\+|c\+\+|gcc|cc |nvcc|/usr/local/cuda/bin/nvcc|mpicxx)' "$LOG")
[ "$cmds" -eq 0 ] && pass "quickstart prints no compiler command lines" || fail "quickstart prints compiler lines" "$cmds lines"

# Its files: the model, one metrics line per logged step, a sample of text, the plot.
for f in model.bin metrics.jsonl sample.txt; do
    [ -s "$OUT/$f" ] && pass "quickstart writes $f" || fail "quickstart writes $f" "$OUT/$f missing or empty"
done
steps=$(grep -c '"step"' "$OUT/metrics.jsonl" 2>/dev/null)
[ "${steps:-0}" -ge 1 ] && pass "quickstart metrics.jsonl has step lines ($steps)" || fail "quickstart metrics" "no step line"
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null || python3 -c "import matplotlib" 2>/dev/null; then
    [ -s "$OUT/loss.png" ] && pass "quickstart writes loss.png" || fail "quickstart writes loss.png" "$(grep -A2 '== plot' "$LOG")"
else
    skip "quickstart loss.png" "no Python with matplotlib"
fi
grep -q "^Next steps" "$LOG" && grep -q "GPT-2 124M:" "$LOG" && pass "quickstart ends with next steps" \
    || fail "quickstart next steps" "$(tail -5 "$LOG")"
grep -q "vocabulary: bytes, V = 256" "$LOG" && pass "quickstart says which vocabulary it used" \
    || fail "quickstart vocabulary line" "$(grep -m1 "== done" "$LOG")"
finish
