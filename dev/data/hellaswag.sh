#!/usr/bin/env bash
# Download HellaSwag's validation set (10,042 examples, rowanz/hellaswag on GitHub) and write it in llm.c's eval
# format (llmc/hellaswag.h) for the trainer's --hellaswag flag:
#
#   dev/data/hellaswag.sh [OUT_DIR]        -> OUT_DIR/hellaswag_val.bin (default data/hellaswag)
#
# Needs internet access, ./gpt2_tokenizer (make gpt2_tokenizer) and GPT-2's vocabulary in data/gpt2
# (dev/data/fetch_tokenizer.sh). Each example: the context "ctx" tokenized, and each of the 4 endings tokenized
# with a leading space (" " + ending, as GPT-2 sees a continuation); the label is the right ending.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-data/hellaswag}
URL=https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl
[ -x ./gpt2_tokenizer ] || { echo "error: ./gpt2_tokenizer not built (make gpt2_tokenizer)" >&2; exit 1; }
mkdir -p "$OUT"
if [ ! -f "$OUT/hellaswag_val.jsonl" ]; then
    curl -fL --retry 3 -o "$OUT/hellaswag_val.jsonl.part" "$URL"
    mv "$OUT/hellaswag_val.jsonl.part" "$OUT/hellaswag_val.jsonl"
fi
/usr/bin/python3 - "$OUT/hellaswag_val.jsonl" "$OUT/hellaswag_val.bin" <<'PY'
import json, os, struct, subprocess, sys, tempfile
src, dst = sys.argv[1], sys.argv[2]
items = [json.loads(l) for l in open(src, encoding="utf-8")]
texts = []
for it in items:
    texts.append(it["ctx"])
    texts.extend(" " + e for e in it["endings"])
tokens = []
with tempfile.TemporaryDirectory() as tmp:
    paths = []
    for i, t in enumerate(texts):
        p = os.path.join(tmp, "%07d.txt" % i)
        open(p, "w", encoding="utf-8").write(t)
        paths.append(p)
    for k in range(0, len(paths), 2000):  # one output line per file, in order
        out = subprocess.run(["./gpt2_tokenizer", "encode"] + paths[k:k + 2000], check=True, capture_output=True,
                             text=True).stdout.splitlines()
        assert len(out) == len(paths[k:k + 2000])
        tokens.extend([int(x) for x in line.split()] for line in out)
stream, longest = [], 0
for i, it in enumerate(items):
    ctx, ends = tokens[5 * i], tokens[5 * i + 1:5 * i + 5]
    ex = [65535, 0, i, int(it["label"]), len(ends), len(ctx)] + ctx
    for e in ends:
        ex += [len(e)] + e
    ex[1] = 2 * len(ex)
    longest = max(longest, ex[1])
    stream += ex
header = [20240522, 1, len(items), longest] + [0] * 252
with open(dst + ".part", "wb") as f:
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack("<%dH" % len(stream), *stream))
os.replace(dst + ".part", dst)
print("wrote %s: %d examples" % (dst, len(items)))
PY
