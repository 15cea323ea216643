#!/usr/bin/env bash
# FineWeb sample (10B or 100B GPT-2 tokens) -> data/fineweb10B/fineweb10B_{train,val}_NNNNNN.bin, shards of 100M
# tokens as in llm.c. Needs internet access and Python's `datasets` package (pip install datasets); neither is
# available on the build machines, so this script is untested here.
#
# Step 1 streams the dataset into JSON lines (data/fineweb10B/jsonl/part_NNNN.jsonl, about 4.5 bytes per token:
# ~45 GB for 10B); step 2 is ./prepare_data on them (tokenization on all cores). 1% of the documents, spread evenly,
# go to val (about 100M tokens for 10B: one shard, like llm.c's first-shard val split).
# Usage: dev/data/fineweb.sh [10B|100B] [extra prepare_data options]
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE=${1:-10B}
[ $# -gt 0 ] && shift
case "$SIZE" in 10B|100B) ;; *) echo "error: size must be 10B or 100B, got '$SIZE'" >&2; exit 1 ;; esac
OUT=data/fineweb$SIZE
mkdir -p "$OUT/jsonl"
if [ ! -f "$OUT/jsonl/.done" ]; then
    python3 - "$SIZE" "$OUT/jsonl" <<'PY'
import json, os, sys
from datasets import load_dataset  # pip install datasets
size, out = sys.argv[1], sys.argv[2]
ds = load_dataset("HuggingFaceFW/fineweb", name=f"sample-{size}T", split="train", streaming=True)
part, n, f = 0, 0, None
for doc in ds:
    if f is None or n == 1_000_000:  # one million documents per file
        if f: f.close()
        f, n, part = open(os.path.join(out, f"part_{part:04d}.jsonl"), "w", encoding="utf-8"), 0, part + 1
    f.write(json.dumps({"text": doc["text"]}, ensure_ascii=False) + "\n")
    n += 1
if f: f.close()
open(os.path.join(out, ".done"), "w").close()
PY
fi
dev/data/fetch_tokenizer.sh --no-reference
[ -x ./prepare_data ] || make prepare_data
./prepare_data -o "$OUT" --name "fineweb$SIZE" --shard-size 100000000 --val-fraction 0.01 "$@" "$OUT/jsonl"
