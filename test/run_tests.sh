#!/usr/bin/env bash
# The test runner behind `make test`. Every test is a program (or script) that prints PASS/FAIL/SKIP lines
# (test/fixtures/testing.h for C++, test/helpers/lib.sh for shell); this script runs them all, keeps each one's full output in
# build/test-logs/, and ends with the line "N passed, M failed, K skipped".
#
# A program that exits non-zero without printing a FAIL line counts as one failure; one that prints no
# PASS/FAIL/SKIP line at all counts as a failure too (a test that checks nothing is a defect).
set -u
cd "$(dirname "$0")/.."
LOGS=build/test-logs
mkdir -p "$LOGS"
passed=0; failed=0; skipped=0
ONLY="${TEST_FILTER:-}"
FAIL_FAST="${TEST_FAIL_FAST:-}"  # set: once a test has failed, the remaining ones are not run (mutation testing)

# run NAME CMD...: run one test program.
run() {
    local name="$1"; shift
    if [ -n "$ONLY" ]; then  # TEST_FILTER: space-separated substrings, a test runs if its name contains one
        local want=0 pat
        for pat in $ONLY; do [[ "$name" == *"$pat"* ]] && want=1; done
        [ $want -eq 1 ] || return
    fi
    [ -n "$FAIL_FAST" ] && [ "$failed" -gt 0 ] && return
    local log="$LOGS/$name.log" start=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    local p f s
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIP ' "$log")
    grep -E '^(FAIL|SKIP) ' "$log" | sed "s|^|  [$name] |"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "  [$name] FAIL: exited with status $rc (last lines of $log):"; tail -n 5 "$log" | sed 's/^/      /'
        f=1
    elif [ $((p + f + s)) -eq 0 ]; then
        echo "  [$name] FAIL: printed no PASS/FAIL/SKIP line"; f=1
    fi
    printf '%-40s %4d passed %3d failed %3d skipped  (%ds)\n' "$name" "$p" "$f" "$s" $((SECONDS - start))
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

# One line per test program. Keep them fast: tiny shapes (test/README.md).
source test/tests.list

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
