#!/usr/bin/env bash
# `make asan`: a CI-sized run of the CPU programs and tests built with AddressSanitizer + UndefinedBehaviorSanitizer
# (the Makefile builds them into build-asan/). Every sanitizer report goes to a file under build-asan/asan-logs/
# instead of stderr, so a test that expects a program to fail cannot mistake a sanitizer abort for a clean refusal:
# any report at all is a failure. Leaks are checked (LeakSanitizer) in every process, with suppressions only for
# libraries outside this repository (test/fixtures/asan.supp). Prints PASS/FAIL lines and "N passed, M failed, K skipped".
#   bash test/e2e/asan_test.sh [BUILD_DIR]     (default build-asan)
set -u
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh  # gpt2_vocab
B=${1:-build-asan}
LOGS="$B/asan-logs"
rm -rf "$LOGS" && mkdir -p "$LOGS"
[ -x "$B/bin/train_gpt2_cpu" ] || { echo "FAIL asan: $B/bin/train_gpt2_cpu not built (make asan builds it)"; exit 1; }
# Full (slow) unwinding on malloc and OpenMPI's plugins kept loaded: the leak suppressions match on the frames of
# whole stacks, which the fast unwinder cuts short inside libraries built without frame pointers.
export ASAN_OPTIONS="log_path=$PWD/$LOGS/asan:detect_leaks=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:fast_unwind_on_malloc=0"
export UBSAN_OPTIONS="log_path=$PWD/$LOGS/ubsan:print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/test/fixtures/asan.supp:print_suppressions=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1
export OMP_NUM_THREADS=1
MPI=(mpirun --oversubscribe --allow-run-as-root -x ASAN_OPTIONS -x UBSAN_OPTIONS -x LSAN_OPTIONS -x OMP_NUM_THREADS
     -x OMPI_MCA_mca_base_component_disable_dlclose)

passed=0; failed=0; skipped=0
TMP_BASE=${TEST_TMPDIR:-$PWD/build/test-tmp/asan}
# run NAME CMD...: one PASS or FAIL line per test program (its own checks are in $LOGS/NAME.log, its temporary files in
# a directory of its own); its SKIP lines are passed on. A non-zero exit fails it even when every check passed.
# LeakSanitizer's leak check stops the process and walks its threads with a tracer of its own; on a loaded machine
# with MPI's progress threads that tracer itself can crash ("Tracer caught signal 11 ... LeakSanitizer has encountered
# a fatal error"): a failure of the tool, no finding about the code. A run whose every report is only that, with
# every check passed, is run again (and says so), up to twice (on a loaded 2-core machine optimizer_mpi_np3 crashed
# the tracer twice in a row once, with 177 of 177 checks passed); a third crash, or any real report, fails as usual.
lsan_tracer_crash_only() {  # NAME LOG: every report of test NAME is LeakSanitizer's own fatal error
    local r any=0
    for r in "$LOGS/$1".asan.* "$LOGS/$1".ubsan.*; do
        [ -e "$r" ] || continue
        any=1
        grep -q "LeakSanitizer has encountered a fatal error" "$r" || return 1
        grep -qE "ERROR: (Address|Undefined|Leak)Sanitizer|runtime error" "$r" && return 1
    done
    [ $any -eq 1 ] && [ "$(grep -c '^FAIL ' "$2")" -eq 0 ] && [ "$(grep -c '^PASS ' "$2")" -gt 0 ]
}
run() {
    local name="$1"; shift
    local log="$LOGS/$name.log" start=$SECONDS
    TEST_TMPDIR="$TMP_BASE/$name" "$@" >"$log" 2>&1
    local rc=$? p f r
    # The reports this test's processes wrote (asan.PID, ubsan.PID) take its name: NAME.asan.PID.
    for r in "$LOGS"/asan.* "$LOGS"/ubsan.*; do [ -e "$r" ] && mv "$r" "$LOGS/$name.${r##*/}"; done
    local again
    for again in 1 2; do
        [ $rc -ne 0 ] && lsan_tracer_crash_only "$name" "$log" || break
        echo "note: asan $name: LeakSanitizer's tracer crashed ($(ls "$LOGS/$name".*san.* | head -1)); running it again"
        mkdir -p "$LOGS/tracer-crash" && mv "$LOGS/$name".*san.* "$LOGS/tracer-crash/"
        TEST_TMPDIR="$TMP_BASE/$name.again$again" "$@" >"$log" 2>&1
        rc=$?
        for r in "$LOGS"/asan.* "$LOGS"/ubsan.*; do [ -e "$r" ] && mv "$r" "$LOGS/$name.${r##*/}"; done
    done
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log")
    grep '^SKIP ' "$log" | sed "s|^SKIP |SKIP asan $name: |"
    skipped=$((skipped + $(grep -c '^SKIP ' "$log")))
    if [ $rc -ne 0 ] || [ "$f" -gt 0 ] || [ "$p" -eq 0 ]; then
        echo "FAIL asan $name: status $rc, $p passed, $f failed ($log): $(grep -m1 '^FAIL ' "$log" | head -c 300)"
        failed=$((failed + 1))
    else
        echo "PASS asan $name: $p checks under ASan/UBSan ($((SECONDS - start))s)"
        passed=$((passed + 1))
    fi
}

# Unit tests (the simulator's are not built with sanitizers); the Makefile's ASAN_TESTS builds these.
for t in layout schedule dataloader cpu_ops adamw sampler checkpoint trainer_host dist_info zero optimizer hellaswag \
         export_hf watchdog utf8_stream; do
    run "$t" "$B/test/test_$t"
done
if gpt2_vocab; then run tokenizer "$B/test/test_tokenizer" data/gpt2
else echo "SKIP asan tokenizer: no data/gpt2, and dev/data/fetch_tokenizer.sh cannot fetch it"; skipped=$((skipped + 1)); fi
run comm_np2 "${MPI[@]}" -np 2 "$B/test/test_comm"
run optimizer_mpi_np3 "${MPI[@]}" -np 3 "$B/test/test_optimizer_mpi"
# End to end, on the sanitized binaries: the hostile inputs (every refusal path, the watchdog under mpirun), training,
# checkpoints (kill -9 and resume, corruption, resharding under mpirun), generation, data preparation.
export TOOL_DIR="$B/bin" BUILD_DIR="$B"
run hostile_input bash test/e2e/hostile_input_test.sh
run cluster bash test/e2e/cluster_test.sh
run train_cpu bash test/e2e/train_cpu_test.sh
run checkpoint_e2e bash test/e2e/checkpoint_test.sh
run generate bash test/e2e/generate_test.sh
run prepare_data bash test/e2e/prepare_data_test.sh

# Any sanitizer report, from any process of any test above, fails the run.
# (A report written after the last test, by a process that outlived it, keeps its plain asan.PID name.)
reports=$(ls "$LOGS" | grep -E '(^|\.)(asan|ubsan)\.[0-9]+$' || true)
if [ -n "$reports" ]; then
    # One FAIL line per report, naming the test and the report's first lines, so that a summary that shows only
    # FAIL lines (make test's) still says what went wrong; the whole report is printed below it.
    for r in $reports; do
        first=$(grep -m3 -E 'ERROR|runtime error|SUMMARY|#[0-9]+ 0x' "$LOGS/$r" | tr '\n' ' ' | head -c 600)
        case "$r" in asan.*|ubsan.*) who="a process that outlived the last test" ;; *) who="the test ${r%%.*}" ;; esac
        echo "FAIL sanitizer report $LOGS/$r (from $who): $first"
        sed 's/^/      /' "$LOGS/$r" | head -60
        failed=$((failed + 1))
    done
else
    echo "PASS no sanitizer report (AddressSanitizer, UndefinedBehaviorSanitizer, LeakSanitizer) from any process"
    passed=$((passed + 1))
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
