#!/usr/bin/env bash
# The test runner (test/run_tests.sh) on lists of fake tests, in a scratch repository of its own: the counting of
# PASS/FAIL/SKIP lines and of silent or crashing programs, the slot pool (tests overlap; an `mpirun -np 2` entry has a
# two-slot pool to itself), --after, the temporary directory of each test, TEST_FILTER (with the tests a match runs
# after), TEST_TIER=quick, TEST_FAIL_FAST, and refusals of a bad list. Overlap is shown by tests that wait for each
# other's marker files (no timing), with a 30-second limit so that a runner that serialises fails instead of hanging.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir run_tests)
REPO=$TMP/repo
mkdir -p "$REPO/test" "$REPO/fakebin"
cp test/run_tests.sh "$REPO/test/"
# A stand-in mpirun: runs its program once (the runner only reads -np from the command line).
printf '#!/usr/bin/env bash\nwhile [ "$1" != -np ]; do shift; done; shift 2; exec "$@"\n' >"$REPO/fakebin/mpirun"
chmod +x "$REPO/fakebin/mpirun"
M=$TMP/markers
# runner LIST-TEXT [ENV...]: run the runner on that list; its output in $TMP/out, its status in $rc. The settings of the
# run this test is part of (`make check`'s TEST_TIER=quick, a filter) are not passed on.
runner() {
    printf '%s\n' "$1" >"$REPO/test/tests.list"; shift
    rm -rf "$M" "$REPO/build" && mkdir -p "$M"
    env -u TEST_TIER -u TEST_FILTER -u TEST_FAIL_FAST -u TEST_JOBS "$@" PATH="$REPO/fakebin:$PATH" MARKERS="$M" bash "$REPO/test/run_tests.sh" >"$TMP/out" 2>&1
    rc=$?
}
# wait_for FILE: up to 30 s.
WAIT='w() { for _ in $(seq 300); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }'

# Counting: passes, failures, skips, a crash without a FAIL line, a program that prints nothing.
runner "run ok bash -c 'echo PASS a; echo PASS b'
run bad bash -c 'echo PASS c; echo FAIL d: wrong'
run skips bash -c 'echo SKIP e: no GPU'
run crash bash -c 'echo PASS f; exit 3'
run silent true" TEST_JOBS=2
[ $rc -ne 0 ] && [ "$(tail -n 1 "$TMP/out")" = "4 passed, 3 failed, 1 skipped" ] \
    && pass "counts PASS/FAIL/SKIP lines, a crash and a silent program as failures; exits non-zero" \
    || fail "counting" "status $rc: $(tail -n 3 "$TMP/out" | tr '\n' '|')"
grep -q '^crash  *1 passed   1 failed   0 skipped' "$TMP/out" && grep -q '\[silent\] FAIL: printed no PASS/FAIL/SKIP' "$TMP/out" \
    && grep -q '\[bad\] FAIL d: wrong' "$TMP/out" && pass "one result line per test, its FAIL lines above it" \
    || fail "result lines" "$(head -c 600 "$TMP/out")"
[ "$(cat "$REPO/build/test-logs/ok.log")" = $'PASS a\nPASS b' ] && pass "each test's output in build/test-logs/NAME.log" \
    || fail "logs" "$(ls "$REPO/build/test-logs")"
runner "run ok bash -c 'echo PASS a'" TEST_JOBS=2
[ $rc -eq 0 ] && [ "$(tail -n 1 "$TMP/out")" = "1 passed, 0 failed, 0 skipped" ] && pass "exits 0 when every test passes" \
    || fail "exit status on success" "status $rc"

# Two one-slot tests run at once in a pool of two: each waits for the other's marker.
runner "run x bash -c '$WAIT; touch \$MARKERS/x; w \$MARKERS/y && echo PASS x'
run y bash -c '$WAIT; touch \$MARKERS/y; w \$MARKERS/x && echo PASS y'" TEST_JOBS=2
[ "$(tail -n 1 "$TMP/out")" = "2 passed, 0 failed, 0 skipped" ] && pass "two tests run at once in a pool of two slots" \
    || fail "parallel tests" "$(tail -n 4 "$TMP/out" | tr '\n' '|')"
# An mpirun -np 2 entry (or one with --slots=2) takes both slots: while it runs, no other test does. Each test below
# marks itself running for a second and checks that the wide one's mark and a narrow one's never meet.
ALONE='mark() { mkdir -p $MARKERS/run; touch $MARKERS/run/$1; sleep 1; ls $MARKERS/run >$MARKERS/seen.$1; rm $MARKERS/run/$1; }'
NARROW="$ALONE; mark \$0; ! grep -q wide \$MARKERS/seen.\$0 && echo PASS \$0 never beside the wide test"
WIDE="$ALONE; mark wide; [ \"\$(cat \$MARKERS/seen.wide)\" = wide ] && echo PASS the wide test alone"
runner "run one bash -c '$NARROW' one
run np2 mpirun -np 2 bash -c '$WIDE'
run two bash -c '$NARROW' two
run three bash -c '$NARROW' three" TEST_JOBS=2
[ "$(tail -n 1 "$TMP/out")" = "4 passed, 0 failed, 0 skipped" ] && pass "an mpirun -np 2 entry has the two-slot pool to itself" \
    || fail "mpirun slots" "$(head -c 600 "$TMP/out")"
runner "run one bash -c '$NARROW' one
run --slots=2 wide bash -c '$WIDE'
run two bash -c '$NARROW' two" TEST_JOBS=2
[ "$(tail -n 1 "$TMP/out")" = "3 passed, 0 failed, 0 skipped" ] && pass "an entry with --slots=2 has the two-slot pool to itself" \
    || fail "--slots" "$(head -c 600 "$TMP/out")"

# --after: the reader starts once the writer has finished, although listed first; both have a directory of their own.
runner "run --after=writer reader bash -c '[ -f \$MARKERS/written ] && echo PASS reads what the writer left; [ -z \"\$(ls -A \$TEST_TMPDIR)\" ] && echo PASS own empty directory'
run writer bash -c 'sleep 1; touch \$TEST_TMPDIR/mine; [ \"\$TEST_TMPDIR\" = \"\$PWD/build/test-tmp/writer\" ] && echo PASS directory named after the test; touch \$MARKERS/written'" TEST_JOBS=2
[ "$(tail -n 1 "$TMP/out")" = "3 passed, 0 failed, 0 skipped" ] && pass "--after orders two tests; each test has an empty build/test-tmp/NAME" \
    || fail "--after and TEST_TMPDIR" "$(head -c 600 "$TMP/out")"
# Without durations of its own, the committed test/durations.txt orders the run: the longer test first.
printf '# a comment line\na 1 0\nb 50 10\n' >"$REPO/test/durations.txt"
runner "run a bash -c 'touch \$MARKERS/a; echo PASS a'
run b bash -c '[ ! -e \$MARKERS/a ] && echo PASS b before a'" TEST_JOBS=1
rm -f "$REPO/test/durations.txt"
[ "$(tail -n 1 "$TMP/out")" = "2 passed, 0 failed, 0 skipped" ] \
    && pass "a fresh clone's first run starts the tests test/durations.txt times longest first" \
    || fail "test/durations.txt order" "$(head -c 600 "$TMP/out")"
# TEST_FILTER picks by name and brings in what a match runs after; TEST_TIER=quick runs the --quick entries only.
LIST="run alpha bash -c 'echo PASS alpha'
run --quick beta bash -c 'echo PASS beta'
run --after=alpha gamma bash -c 'echo PASS gamma'"
runner "$LIST" TEST_FILTER=gam TEST_JOBS=2
[ "$(grep -cE '^[a-z]+ +[0-9]+ passed' "$TMP/out")" -eq 2 ] && grep -q '^alpha ' "$TMP/out" && grep -q '^gamma ' "$TMP/out" \
    && ! grep -q '^beta ' "$TMP/out" && pass "TEST_FILTER runs the matches and the tests they run after" \
    || fail "TEST_FILTER" "$(head -c 600 "$TMP/out")"
runner "run alpha bash -c 'echo PASS alpha'
run alphabet bash -c 'echo PASS alphabet'" TEST_FILTER==alpha TEST_JOBS=2
[ "$(tail -n 1 "$TMP/out")" = "1 passed, 0 failed, 0 skipped" ] && grep -q '^alpha ' "$TMP/out" \
    && pass "TEST_FILTER=\"=NAME\" runs that test only, not the names that contain it" || fail "TEST_FILTER=NAME" "$(head -c 600 "$TMP/out")"
runner "$LIST" TEST_TIER=quick TEST_JOBS=2
[ "$(tail -n 1 "$TMP/out")" = "1 passed, 0 failed, 0 skipped" ] && grep -q '^beta ' "$TMP/out" \
    && pass "TEST_TIER=quick runs the --quick entries only" || fail "TEST_TIER=quick" "$(head -c 600 "$TMP/out")"

# --last starts after every other test; every test sees the run's launch log and whether the run is every entry.
runner "run --last final bash -c 'ls \$MARKERS | tr -d \"\\n\" | grep -qx ab && echo PASS after all the others'
run a bash -c 'sleep 1; [ \"\$CUDASIM_LAUNCH_LOG\" = \"\$PWD/build/test-logs/launches.tsv\" ] && [ \"\$TEST_RUN_ALL\" = 1 ] && echo PASS env; touch \$MARKERS/a'
run b bash -c 'sleep 1; touch \$MARKERS/b; echo PASS b'" TEST_JOBS=2
[ $rc -eq 0 ] && grep -q '^final  *1 passed' "$TMP/out" && grep -q '^a  *1 passed' "$TMP/out" \
    && pass "--last starts once every other test has finished; CUDASIM_LAUNCH_LOG and TEST_RUN_ALL are set" \
    || fail "--last" "$(head -c 600 "$TMP/out")"
runner "run b bash -c '[ \"\$TEST_RUN_ALL\" = 0 ] && echo PASS filtered'
run c true" TEST_JOBS=2 TEST_FILTER=b
grep -q '^b  *1 passed' "$TMP/out" && pass "TEST_RUN_ALL=0 in a filtered run" || fail "TEST_RUN_ALL=0" "$(head -c 600 "$TMP/out")"

# TEST_FAIL_FAST: a failure stops the running tests and starts no other.
runner "run fails bash -c 'echo FAIL early: planted'
run long bash -c 'sleep 30; echo PASS long'
run later bash -c 'echo PASS later'" TEST_FAIL_FAST=1 TEST_JOBS=2
! grep -q 'PASS' "$REPO/build/test-logs/long.log" && ! grep -q '^later ' "$TMP/out" && [ $rc -ne 0 ] \
    && grep -q '^long: stopped' "$TMP/out" && pass "TEST_FAIL_FAST stops the running tests and starts no other" \
    || fail "TEST_FAIL_FAST" "$(head -c 600 "$TMP/out")"

# A bad list is refused, naming the problem.
runner "run --quick --soon x true" TEST_JOBS=2
[ $rc -eq 2 ] && grep -q "unknown option '--soon'" "$TMP/out" && pass "an unknown option is refused" \
    || fail "unknown option" "status $rc: $(cat "$TMP/out")"
runner "run x true
run x true" TEST_JOBS=2
[ $rc -eq 2 ] && grep -q "'x' is listed twice" "$TMP/out" && pass "a name listed twice is refused" \
    || fail "duplicate name" "status $rc: $(cat "$TMP/out")"
runner "run --after=nothing x true" TEST_JOBS=2
[ $rc -eq 2 ] && grep -q "x runs --after=nothing, which is not listed" "$TMP/out" \
    && pass "--after of an unlisted test is refused" || fail "unknown --after" "status $rc: $(cat "$TMP/out")"
finish
