#!/usr/bin/env bash
# CPU threads on a shared machine: training step time and generation time with the default thread count against
# --threads 1 (docs/benchmarks.md, "Threads on a shared machine"). Needs data/brown_bytes (the CPU quickstart, or
# ./prepare_data --bytes -o data/brown_bytes data/brown/text) and ./train_gpt2_cpu, ./generate.
#   dev/bench/threads.sh [STEPS]      (default 10; the mean of the last 5 steps is reported)
# Extra environment is passed through, e.g. OMP_WAIT_POLICY=active dev/bench/threads.sh to compare policies.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps="${1:-10}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for threads in 0 1; do
    ./train_gpt2_cpu -i "data/brown_bytes/*train*.bin" -j "data/brown_bytes/*val*.bin" -e "L=4,NH=4,C=128,T=128,V=256" \
        -b 16 -t 128 -x "$steps" -v 0 -s 0 --threads "$threads" -o "$tmp/run$threads" >"$tmp/log$threads" 2>&1
    ms=$(grep '^step' "$tmp/log$threads" | tail -5 | awk '{s += $13} END {printf "%.0f", s / NR}')
    start=$(date +%s.%N)
    ./generate -e "$tmp/run$threads/model.bin" -p "The " -n 64 --threads "$threads" >/dev/null
    gen=$(echo "$(date +%s.%N) - $start" | bc)
    echo "--threads $threads: train $ms ms/step (B=16, T=128, L=4, C=128, V=256), generate 64 tokens ${gen}s"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
