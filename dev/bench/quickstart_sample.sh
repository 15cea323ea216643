#!/usr/bin/env bash
# The CPU quickstart's sample quality: the README's command as it is (QUICKSTART_DEVICE=cpu scripts/quickstart.sh, 800
# steps, about 3-4 minutes on 2 cores) in a directory of its own, then the share of its sample's words found in Debian's
# word list (scripts/english_words.py counts words of 4+ letters only: single letters and function words come out of
# a model of letter statistics by chance). At least 25% is the bar: measured at temperature 0.7, 600 bytes (what the
# quickstart prints), the GPT-2 recipe's model after 100 steps, still on the letter-pair plateau, scores 7-11%, its
# 800-step model 35-53% (seeds 1-5), and the speedrun recipe's 800-step model (the quickstart's since 2026-11-28)
# 83% (seed 1). A sample has about 50 such words, so its share has a standard deviation of about 7 points at 40%:
# 25% is 10 points below the weaker recipe's lowest and 14 above the plateau's highest. Thread counts change the
# order of the CPU's float sums, so another machine's sample differs (docs/benchmarks.md, "Quickstart"). Exits
# non-zero below the bar.
#   dev/bench/quickstart_sample.sh [TRAINER OPTIONS...]     (e.g. -x 2000 for the longer run)
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
QUICKSTART_DEVICE=cpu QUICKSTART_OUT="$tmp/run" bash scripts/quickstart.sh "$@" >"$tmp/log" 2>&1 \
    || { tail -5 "$tmp/log"; echo "the quickstart failed"; exit 1; }
grep '^== done' "$tmp/log"
/usr/bin/python3 scripts/english_words.py "$tmp/run/sample.txt" 0.25
