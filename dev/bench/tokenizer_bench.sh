#!/usr/bin/env bash
# Tokenizer throughput: our C++ tokenizer against the JavaScript reference encoders on the same text, same run.
#
# Text: the Brown corpus (500 documents, 6.0 MB; dev/data/fetch_brown.sh), encoded document by document.
# Measured: encoding time only (vocabulary loading excluded, reported apart), single thread, best of REPEAT runs
# (the best run is the least disturbed by other load on the machine). Also prepare_data end to end (reading,
# tokenizing, writing shards; vocabulary loading excluded) on 1 thread and on all cores.
# Usage: dev/bench/tokenizer_bench.sh [REPEAT]   (default 3). Prints a markdown table for docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEAT=${1:-3}
dev/data/fetch_tokenizer.sh >/dev/null
dev/data/fetch_brown.sh >/dev/null
[ -x ./gpt2_tokenizer ] && [ -x ./prepare_data ] || make gpt2_tokenizer prepare_data >/dev/null
docs=(data/brown/text/*.txt)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# best TOOL...: runs the command REPEAT times, keeps the highest "N tokens/s" its stderr reports.
best() {
    local b=0 r
    for _ in $(seq "$REPEAT"); do
        r=$("$@" 2>&1 >/dev/null | grep -o '[0-9]* tokens/s' | grep -o '^[0-9]*')
        [ "$r" -gt "$b" ] && b=$r
    done
    echo "$b"
}
cpp=$(best ./gpt2_tokenizer encode --stats "${docs[@]}")
tik=$(best node test/helpers/tokenizer_reference.js js-tiktoken --stats "${docs[@]}")
g3=$(best node test/helpers/tokenizer_reference.js gpt-3-encoder --stats "${docs[@]}")
load=$(./gpt2_tokenizer encode --stats "${docs[0]}" 2>&1 >/dev/null | grep -o 'vocab load [0-9.]* s')

prep() {  # prep THREADS: end-to-end tokens/s of prepare_data (best of REPEAT)
    local b=0 r
    for _ in $(seq "$REPEAT"); do
        r=$(./prepare_data -q -t "$1" -o "$TMP/brown" data/brown/text | sed -n 's/^time: .*; \([0-9]*\) tokens\/s after loading.*/\1/p')
        [ "$r" -gt "$b" ] && b=$r
    done
    echo "$b"
}
p1=$(prep 1)
pn=$(prep "$(nproc)")
tokens=$(./gpt2_tokenizer encode "${docs[@]}" | wc -w)

echo "Text: Brown corpus, ${#docs[@]} documents, $(cat "${docs[@]}" | wc -c) bytes, $tokens tokens; best of $REPEAT."
echo "Node $(node --version); $(g++ --version | head -1), -O2."
echo
echo "| encoder | threads | tokens/s | vs js-tiktoken |"
echo "|---|---|---|---|"
printf '| C++ gpt2_tokenizer (encode only; %s) | 1 | %s | %.1fx |\n' "$load" "$cpp" "$(echo "$cpp / $tik" | bc -l)"
printf '| js-tiktoken %s, gpt2 | 1 | %s | 1.0x |\n' "1.0.21" "$tik"
printf '| gpt-3-encoder %s | 1 | %s | %.2fx |\n' "1.1.4" "$g3" "$(echo "$g3 / $tik" | bc -l)"
printf '| prepare_data (read, tokenize, write shards; after vocab load) | 1 | %s | %.1fx |\n' "$p1" "$(echo "$p1 / $tik" | bc -l)"
printf '| prepare_data, all cores | %s | %s | %.1fx |\n' "$(nproc)" "$pn" "$(echo "$pn / $tik" | bc -l)"
