#!/usr/bin/env bash
# FineWeb or FineWeb-Edu (Hugging Face's HuggingFaceFW/fineweb and HuggingFaceFW/fineweb-edu, the sample-10BT or
# sample-100BT subsets) -> GPT-2 token shards of 100M tokens, split as llm.c's dev/data/fineweb.py splits them: all
# documents, in the dataset's order, form one token stream (EOT before each document) cut into shards; the FIRST
# shard is val, the rest train, numbered by their place in the stream. So the validation set is the same 100M tokens
# as llm.c's and validation curves compare with its published ones:
#
#   dev/data/fineweb.sh [classic|edu] [10B|100B] [extra prepare_data options]     (defaults: classic 10B)
#     classic 10B   -> data/fineweb10B/fineweb_val_000000.bin, fineweb_train_000001.bin, ...        (124M recipe)
#     classic 100B  -> data/fineweb100B/fineweb_{val,train}_*.bin                                    (350M, 774M)
#     edu 100B      -> data/edu_fineweb100B/edu_fineweb_{val,train}_*.bin                            (1558M recipe)
#     edu 10B       -> data/edu_fineweb10B/edu_fineweb_{val,train}_*.bin
#   (`dev/data/fineweb.sh 10B` = classic 10B, as before.)
#
# Needs internet access to Hugging Face and Python's `datasets` package (pip install datasets); the build machines
# have neither, so the download is not run there: test/e2e/fineweb_script_test.sh runs this script end to end against a
# stand-in `datasets` module serving a few local documents, and test/e2e/prepare_data_test.sh checks the split itself.
# Step 1 streams the subset into JSON lines (<out>/jsonl/part_NNNN.jsonl, a million documents each, about 4.5 bytes
# per token: ~45 GB for 10B; <out>/jsonl/.done marks it complete, so a rerun goes straight to step 2); step 2 is
# ./prepare_data --val-first-shard on them (tokenization on all cores; ~20 GB of shards for 10B).
# Environment: DATA_ROOT (data), SHARD_SIZE (100000000 tokens, llm.c's), PYTHON (python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
TYPE=classic
case "${1:-}" in classic|edu) TYPE=$1; shift ;; esac
SIZE=${1:-10B}
[ $# -gt 0 ] && shift
case "$SIZE" in 10B|100B) ;; *) echo "error: size must be 10B or 100B, got '$SIZE' (usage: $0 [classic|edu] [10B|100B])" >&2; exit 1 ;; esac
if [ "$TYPE" = edu ]; then DATASET=HuggingFaceFW/fineweb-edu NAME=edu_fineweb; else DATASET=HuggingFaceFW/fineweb NAME=fineweb; fi
OUT=${DATA_ROOT:-data}/$NAME$SIZE
mkdir -p "$OUT/jsonl"
if [ ! -f "$OUT/jsonl/.done" ]; then
    echo "streaming $DATASET sample-${SIZE}T into $OUT/jsonl"
    "${PYTHON:-python3}" - "$DATASET" "sample-${SIZE}T" "$OUT/jsonl" <<'PY'
import json, os, sys
from datasets import load_dataset  # pip install datasets
dataset, subset, out = sys.argv[1], sys.argv[2], sys.argv[3]
# The dataset's own document order (llm.c's split depends on it: its first 100M tokens are the val shard).
ds = load_dataset(dataset, name=subset, split="train", streaming=True)
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
./prepare_data -o "$OUT" --name "$NAME" --shard-size "${SHARD_SIZE:-100000000}" --val-first-shard "$@" "$OUT/jsonl"
