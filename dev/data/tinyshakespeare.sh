#!/usr/bin/env bash
# Tiny Shakespeare (1.1 MB, about 338k GPT-2 tokens) -> data/tinyshakespeare/tinyshakespeare_{train,val}_000000.bin.
# Needs internet access to GitHub (not available on the build machines). Documents are the blank-line-separated
# speeches, each preceded by EOT as in llm.c; every 10th document goes to val (llm.c instead takes the first 32768
# tokens as val, so the two splits differ).
# Usage: dev/data/tinyshakespeare.sh [extra prepare_data options]
set -euo pipefail
cd "$(dirname "$0")/../.."
URL=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
OUT=data/tinyshakespeare
mkdir -p "$OUT"
if [ ! -s "$OUT/input.txt" ]; then
    echo "downloading $URL"
    curl -fsSL "$URL" -o "$OUT/input.txt.tmp" && mv "$OUT/input.txt.tmp" "$OUT/input.txt"
fi
dev/data/fetch_tokenizer.sh --no-reference
[ -x ./prepare_data ] || make prepare_data
./prepare_data -o "$OUT" --name tinyshakespeare --doc-separator '\n\n' --val-fraction 0.1 "$@" "$OUT/input.txt"
