#!/usr/bin/env bash
# The CPU quickstart's sample quality: the README's command as it is (QUICKSTART_DEVICE=cpu scripts/quickstart.sh, 800
# steps, about 3-4 minutes on 2 cores) in a directory of its own, then the share of its sample's words found in Debian's
# word list (scripts/english_words.py). At least 60% is the bar: a byte-level model that has only learned letter and
# bigram statistics scores about 40-50% (short common words come out by chance); the quickstart's model scores about
# 70% (docs/benchmarks.md, "Quickstart"), so 60% separates the two with margin for the run-to-run difference between
# machines (thread counts change the order of the CPU's float sums). Exits non-zero below the bar.
#   dev/bench/quickstart_sample.sh [TRAINER OPTIONS...]     (e.g. -x 2000 for the longer run)
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
QUICKSTART_DEVICE=cpu QUICKSTART_OUT="$tmp/run" bash scripts/quickstart.sh "$@" >"$tmp/log" 2>&1 \
    || { tail -5 "$tmp/log"; echo "the quickstart failed"; exit 1; }
grep '^== done' "$tmp/log"
/usr/bin/python3 scripts/english_words.py "$tmp/run/sample.txt" 0.6
