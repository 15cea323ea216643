#!/usr/bin/env bash
# One training step of the same small GPT-2 on the CPU backend (./train_gpt2_cpu) and in PyTorch on the CPU, in one
# run on the same machine, same threads. Prints both and their ratio (a line to copy into docs/benchmarks.md).
#   dev/bench/cpu_vs_pytorch.sh [L=6 NH=6 C=384 B=4 T=256 STEPS=6]
set -euo pipefail
cd "$(dirname "$0")/../.."
L=${L:-6}; NH=${NH:-6}; C=${C:-384}; B=${B:-4}; T=${T:-256}; STEPS=${STEPS:-6}; V=50257
THREADS=${THREADS:-$(nproc)}
make -s train_gpt2_cpu >/dev/null
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
# Random tokens: enough for STEPS steps of B*T.
/usr/bin/python3 - "$TMP" $((B * T * STEPS + 1)) <<'PY'
import os, random, struct, sys
n = int(sys.argv[2]); rng = random.Random(3)
hdr = [0] * 256; hdr[0], hdr[1], hdr[2] = 20240520, 1, n
for name in ("bench_train.bin", "bench_val.bin"):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(struct.pack("<256i", *hdr)); f.write(struct.pack("<%dH" % n, *[rng.randrange(50257) for _ in range(n)]))
PY
./train_gpt2_cpu -i "$TMP/bench_train.bin" -j "$TMP/bench_val.bin" -e "L=$L,NH=$NH,C=$C,T=$T" -b "$B" -t "$T" \
    -x "$STEPS" -v 0 -s 0 --threads "$THREADS" --shuffle 0 -o "$TMP/run" >/dev/null
ours=$(/usr/bin/python3 -c "
import json, sys
ms = sorted(json.loads(l)['ms'] for l in list(open('$TMP/run/metrics.jsonl'))[1:])
print(ms[len(ms) // 2])")
theirs=$(/usr/bin/python3 dev/bench/pytorch_cpu_step.py --layers "$L" --heads "$NH" --channels "$C" --batch "$B" \
    --seq-len "$T" --threads "$THREADS" --steps $((STEPS - 1)))
/usr/bin/python3 - "$ours" "$theirs" "$L" "$NH" "$C" "$B" "$T" "$THREADS" <<'PY'
import json, sys
ours = float(sys.argv[1]); t = json.loads(sys.argv[2]); L, NH, C, B, T, th = sys.argv[3:]
print("shape L=%s NH=%s C=%s V=50257 B=%s T=%s, %s threads" % (L, NH, C, B, T, th))
print("train_gpt2_cpu   %8.1f ms/step  %8.0f tok/s" % (ours, int(B) * int(T) / ours * 1e3))
print("%-16s %8.1f ms/step  %8.0f tok/s" % (t["impl"], t["ms"], t["tokens_per_sec"]))
print("ratio (PyTorch time / ours) = %.2f" % (t["ms"] / ours))
PY
