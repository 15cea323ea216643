#!/usr/bin/env bash
# The test runner behind `make test` and `make check`. Every test is a program (or script) that prints PASS/FAIL/SKIP
# lines (test/fixtures/testing.h for C++, test/helpers/lib.sh for shell); this script runs the entries of
# test/tests.list in parallel, keeps each one's full output in build/test-logs/NAME.log, prints each one's result as it
# finishes, and ends with the line "N passed, M failed, K skipped".
#
# A program that exits non-zero without printing a FAIL line counts as one failure; one that prints no
# PASS/FAIL/SKIP line at all counts as a failure too (a test that checks nothing is a defect).
#
# Scheduling: a pool of TEST_JOBS slots (default: one per core and two more: about 40% of the tests' wall time is
# spent waiting, on mpirun's start-up, a watchdog's timeout or a child's exit, and tests beyond the cores keep the
# cores busy through it; on 2 cores 4 slots took 528 s where 3 took 576; docs in test/README.md). A test takes one
# slot; an `mpirun -np N` entry takes N, and `--slots=N` says so for a script that keeps N processes busy (never more
# than the pool). Each test gets an empty directory of its own, build/test-tmp/NAME, as $TEST_TMPDIR. A test starts
# once the tests it names with `--after=NAME` have finished; a `--last` test once every other test of the run has.
# Start order: the widest first (once the pool is busy, narrower tests would keep taking the slots a wide one waits
# for), then the longest of the last run (build/test-logs/durations, else the committed test/durations.txt), tests
# neither times (a new entry) before the timed ones, in list order.
#
# Environment:
#   TEST_FILTER="a b"   only the tests whose names contain one of the words (and the tests they run --after); a word
#                       =NAME matches the test NAME only
#   TEST_TIER=quick     only the entries marked --quick (`make check`)
#   TEST_JOBS=N         slots in the pool
#   TEST_FAIL_FAST=1    once a test has failed, start no other and stop the running ones (mutation testing)
# Every test runs with CUDASIM_LAUNCH_LOG=build/test-logs/launches.tsv (emptied at the start: the simulated launches of
# this run, for test/e2e/kernel_coverage_test.py) and TEST_RUN_ALL=1 when the run is every entry (no filter, no tier),
# 0 otherwise.
set -u
cd "$(dirname "$0")/.."
LOGS=build/test-logs
TMP_ROOT=$PWD/build/test-tmp
DURATIONS=$LOGS/durations
FILTER=${TEST_FILTER:-}
TIER=${TEST_TIER:-all}
FAIL_FAST=${TEST_FAIL_FAST:-}
JOBS=${TEST_JOBS:-$(( $(nproc 2>/dev/null || echo 2) + 2 ))}
case "$TIER" in all|quick) ;; *) echo "run_tests.sh: TEST_TIER is '$TIER', expected 'all' or 'quick'" >&2; exit 2 ;; esac
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "run_tests.sh: TEST_JOBS is '$JOBS', expected a positive integer" >&2; exit 2; }

# ---- the list ------------------------------------------------------------------------------------------------------
names=(); commands=(); slots=(); afters=(); quick=(); lasts=()  # one element per entry, in list order
declare -A index_of=()
# run [--quick] [--after=NAME]... [--last] [--slots=N] NAME COMMAND...: one entry of test/tests.list.
run() {
    local is_quick=0 is_last=0 after="" n=""
    while [[ "${1:-}" == --* ]]; do
        case "$1" in
            --quick) is_quick=1 ;;
            --after=*) after+=" ${1#--after=}" ;;
            --last) is_last=1 ;;
            --slots=*) n=${1#--slots=} ;;
            *) echo "test/tests.list: unknown option '$1'" >&2; exit 2 ;;
        esac
        shift
    done
    local name="$1"; shift
    [ -z "${index_of[$name]:-}" ] || { echo "test/tests.list: '$name' is listed twice" >&2; exit 2; }
    if [ -z "$n" ]; then
        local words=" $* "
        if [[ "$words" == *" mpirun "* && "$words" =~ \ -np\ ([0-9]+)\  ]]; then n=${BASH_REMATCH[1]}; else n=1; fi
    fi
    index_of[$name]=${#names[@]}
    names+=("$name"); commands+=("$(printf '%q ' "$@")"); slots+=($((n < JOBS ? n : JOBS)))
    afters+=("$after"); quick+=("$is_quick"); lasts+=("$is_last")
}
# quick_if TEST...: --quick when the test(1) expression holds (tests.list: one member of a loop in the quick tier).
quick_if() { if [ "$@" ]; then echo --quick; fi; }
source test/tests.list

# ---- which tests run, in which order ---------------------------------------------------------------------------------
declare -A selected=()
wanted() {  # wanted I: the tier and the filter pick entry I
    local w
    [ "$TIER" = quick ] && [ "${quick[$1]}" = 0 ] && return 1
    [ -z "$FILTER" ] && return 0
    for w in $FILTER; do
        if [[ "$w" == =* ]]; then [[ "${names[$1]}" == "${w#=}" ]] && return 0
        else [[ "${names[$1]}" == *"$w"* ]] && return 0; fi
    done
    return 1
}
select_entry() {  # select_entry I: entry I and the entries it runs after
    local dep
    [ -n "${selected[$1]:-}" ] && return
    selected[$1]=1
    for dep in ${afters[$1]}; do
        [ -n "${index_of[$dep]:-}" ] || { echo "test/tests.list: ${names[$1]} runs --after=$dep, which is not listed" >&2; exit 2; }
        select_entry "${index_of[$dep]}"
    done
}
for i in "${!names[@]}"; do if wanted "$i"; then select_entry "$i"; fi; done

# A fresh clone has no durations of its own: test/durations.txt (committed, a typical run's) orders its first run, so
# that the longest tests do not start last and leave one core busy at the end; this machine's own replace them.
declare -A last_seconds=()
for f in test/durations.txt "$DURATIONS"; do
    [ -f "$f" ] || continue
    while read -r name seconds _; do last_seconds[$name]=$seconds; done <"$f"
done
order=()
while read -r _ i; do order+=("$i"); done < <(
    for i in "${!selected[@]}"; do echo "${slots[$i]} ${last_seconds[${names[$i]}]:-999999} $i"; done \
        | sort -k1,1nr -k2,2nr -k3,3n | cut -d' ' -f2-)

# ---- running -------------------------------------------------------------------------------------------------------
mkdir -p "$LOGS" "$TMP_ROOT"
rm -f "$LOGS/durations.new" "$LOGS/launches.tsv"
export CUDASIM_LAUNCH_LOG=$PWD/$LOGS/launches.tsv
if [ -z "$FILTER" ] && [ "$TIER" = all ]; then export TEST_RUN_ALL=1; else export TEST_RUN_ALL=0; fi
passed=0; failed=0; skipped=0; free=$JOBS; run_start=$SECONDS
failed_tests=()
declare -A state=() pid_entry=() started=()
for i in "${order[@]}"; do state[$i]=pending; done

# start I: entry I in the background, in a process group of its own (setsid, so that it can be stopped whole); its
# shell writes the CPU time of everything it ran (bash's `times`, children's line) to NAME.cpu.
start() {
    local i=$1 name=${names[$1]}
    rm -rf "${TMP_ROOT:?}/$name" && mkdir -p "$TMP_ROOT/$name"
    TEST_TMPDIR="$TMP_ROOT/$name" setsid -w bash -c "${commands[$i]}"'
        rc=$?; times >"$0"; exit $rc' "$LOGS/$name.cpu" </dev/null >"$LOGS/$name.log" 2>&1 &
    pid_entry[$!]=$i; started[$i]=$SECONDS; state[$i]=running
    free=$((free - slots[i]))
}
ready() {  # ready I: every test entry I runs after has finished (every other test, for a --last entry)
    local dep j
    for dep in ${afters[$1]}; do [ "${state[${index_of[$dep]}]:-done}" = done ] || return 1; done
    if [ "${lasts[$1]}" = 1 ]; then
        for j in "${order[@]}"; do [ "$j" = "$1" ] || [ "${state[$j]}" = done ] || return 1; done
    fi
}
cpu_seconds() {  # cpu_seconds FILE: user + system seconds from a `times` line ("1m2.500s 0m0.250s")
    local line m1 s1 m2 s2
    line=$(tail -n 1 "$1" 2>/dev/null); rm -f "$1"
    [[ "$line" =~ ^([0-9]+)m([0-9]+)[.,][0-9]+s\ ([0-9]+)m([0-9]+)[.,][0-9]+s ]] || { echo 0; return; }
    m1=${BASH_REMATCH[1]} s1=${BASH_REMATCH[2]} m2=${BASH_REMATCH[3]} s2=${BASH_REMATCH[4]}
    echo $((10#$m1 * 60 + 10#$s1 + 10#$m2 * 60 + 10#$s2))
}
report() {  # report I STATUS: count entry I's lines, print its result
    local i=$1 rc=$2 name=${names[$1]} log="$LOGS/${names[$1]}.log" p f s wall cpu
    wall=$((SECONDS - started[$1])); cpu=$(cpu_seconds "$LOGS/$name.cpu")
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIP ' "$log")
    {
        grep -E '^(FAIL|SKIP) ' "$log" | sed "s|^|  [$name] |"
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            echo "  [$name] FAIL: exited with status $rc (last lines of $log):"; tail -n 5 "$log" | sed 's/^/      /'
        elif [ $((p + f + s)) -eq 0 ]; then
            echo "  [$name] FAIL: printed no PASS/FAIL/SKIP line"
        fi
    }
    if { [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; } || [ $((p + f + s)) -eq 0 ]; then f=1; fi
    printf '%-40s %4d passed %3d failed %3d skipped  (%ds, cpu %ds)\n' "$name" "$p" "$f" "$s" "$wall" "$cpu"
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    [ "$f" -gt 0 ] && failed_tests+=("$name")
    echo "$name $wall $cpu" >>"$LOGS/durations.new"
}
stop_running() {
    local pid
    for pid in "${!pid_entry[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
}
trap 'stop_running; exit 130' INT TERM

stopping=0
while :; do
    if [ $stopping -eq 0 ]; then
        for i in "${order[@]}"; do
            if [ "${state[$i]}" = pending ] && [ "${slots[$i]}" -le "$free" ] && ready "$i"; then start "$i"; fi
        done
    fi
    [ ${#pid_entry[@]} -eq 0 ] && break
    finished=""
    wait -n -p finished; rc=$?
    [ -n "$finished" ] && [ -n "${pid_entry[$finished]:-}" ] || continue
    i=${pid_entry[$finished]}; unset "pid_entry[$finished]"
    state[$i]=done; free=$((free + slots[i]))
    if [ $stopping -eq 1 ]; then echo "${names[$i]}: stopped (TEST_FAIL_FAST)"; continue; fi
    report "$i" "$rc"
    if [ -n "$FAIL_FAST" ] && [ "$failed" -gt 0 ]; then stopping=1; stop_running; fi
done

# This run's durations replace those of the tests it ran: the next run starts the longest first.
if [ -f "$LOGS/durations.new" ]; then
    touch "$DURATIONS"
    awk 'NR == FNR { ran[$1] = 1; next } !($1 in ran)' "$LOGS/durations.new" "$DURATIONS" \
        | cat - "$LOGS/durations.new" | sort >"$DURATIONS.tmp" && mv "$DURATIONS.tmp" "$DURATIONS"
    rm -f "$LOGS/durations.new"
fi
echo
[ ${#failed_tests[@]} -gt 0 ] && echo "failed: ${failed_tests[*]} (their logs: $LOGS/NAME.log)"
echo "${#order[@]} tests in $((SECONDS - run_start)) s on $JOBS slots"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
