# Shell helpers for test scripts: print the PASS/FAIL/SKIP lines test/run_tests.sh counts.
# Usage: source test/helpers/lib.sh; check "name" test-command...; expect_error "name" "stderr substring" command...;
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
