#!/usr/bin/env bash
# `make asan`: a CI-sized run of the CPU programs and tests built with AddressSanitizer + UndefinedBehaviorSanitizer
# (the Makefile builds them into build-asan/). Every sanitizer report goes to a file under build-asan/asan-logs/
# instead of stderr, so a test that expects a program to fail cannot mistake a sanitizer abort for a clean refusal:
# any report at all is a failure. Leaks are checked (LeakSanitizer) in every process, with suppressions only for
# libraries outside this repository (test/fixtures/asan.supp). Prints PASS/FAIL lines and "N passed, M failed, K skipped".
#   bash test/e2e/asan_test.sh [BUILD_DIR [GROUP]]     (default build-asan, all)
# GROUP: `units` (the unit tests, under mpirun too, and the hostile inputs) or `runs` (training, checkpoints,
# generation, data preparation end to end), about half the time each, so that `make test` runs them side by side;
# `all` both. Each group keeps its reports in build-asan/asan-logs/GROUP.
set -u
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh  # gpt2_vocab
B=${1:-build-asan}
GROUP=${2:-all}
case "$GROUP" in all|units|runs) ;; *) echo "FAIL asan: unknown group '$GROUP' (all, units or runs)"; exit 2 ;; esac
LOGS="$B/asan-logs/$GROUP"
rm -rf "$LOGS" && mkdir -p "$LOGS"
[ -x "$B/bin/train_gpt2_cpu" ] || { echo "FAIL asan: $B/bin/train_gpt2_cpu not built (make asan builds it)"; exit 1; }
# Full (slow) unwinding on malloc and OpenMPI's plugins kept loaded: the leak suppressions match on the frames of
# whole stacks, which the fast unwinder cuts short inside libraries built without frame pointers.
# intercept_tls_get_addr=0: GCC 12's runtime takes a dynamic TLS block whose address is 16 bytes past a page boundary
# for one with glibc 2.19's header and reads a length from before it; LeakSanitizer's tracer then scans that bogus
# range and dies ("Tracer caught signal 11", "DTLS 9 at 0x3ce3-0x400004de5" with verbosity=1). It struck the MPI tests
# (OpenMPI's plugins hold dynamic TLS) on every run on a loaded machine. Without the interceptor those blocks are not
# scanned as roots: that can only add leak reports, never hide one.
export ASAN_OPTIONS="log_path=$PWD/$LOGS/asan:detect_leaks=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:fast_unwind_on_malloc=0:intercept_tls_get_addr=0"
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
run() {
    local name="$1"; shift
    local log="$LOGS/$name.log" start=$SECONDS
    TEST_TMPDIR="$TMP_BASE/$name" "$@" >"$log" 2>&1
    local rc=$? p f r
    # The reports this test's processes wrote (asan.PID, ubsan.PID) take its name: NAME.asan.PID.
    for r in "$LOGS"/asan.* "$LOGS"/ubsan.*; do [ -e "$r" ] && mv "$r" "$LOGS/$name.${r##*/}"; done
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

in_group() { [ "$GROUP" = all ] || [ "$GROUP" = "$1" ]; }
if in_group units; then
    # Unit tests (the simulator's are not built with sanitizers); the Makefile's ASAN_TESTS builds these.
    for t in layout schedule dataloader cpu_ops adamw sampler checkpoint trainer_host dist_info zero optimizer \
             hellaswag export_hf watchdog utf8_stream; do
        run "$t" "$B/test/test_$t"
    done
    if gpt2_vocab; then run tokenizer "$B/test/test_tokenizer" data/gpt2
    else echo "SKIP asan tokenizer: no data/gpt2, and dev/data/fetch_tokenizer.sh cannot fetch it"; skipped=$((skipped + 1)); fi
    run comm_np2 "${MPI[@]}" -np 2 "$B/test/test_comm"
    run optimizer_mpi_np3 "${MPI[@]}" -np 3 "$B/test/test_optimizer_mpi"
    # Every refusal path of the sanitized binaries, the watchdog under mpirun.
    export TOOL_DIR="$B/bin" BUILD_DIR="$B"
    run hostile_input bash test/e2e/hostile_input_test.sh
fi
if in_group runs; then
    # End to end, on the sanitized binaries: training, checkpoints (kill -9 and resume, corruption, resharding under
    # mpirun), generation, data preparation.
    export TOOL_DIR="$B/bin" BUILD_DIR="$B"
    run cluster bash test/e2e/cluster_test.sh
    run train_cpu bash test/e2e/train_cpu_test.sh
    run checkpoint_e2e bash test/e2e/checkpoint_test.sh
    run generate bash test/e2e/generate_test.sh
    run prepare_data bash test/e2e/prepare_data_test.sh
fi

# Any sanitizer report, from any process of any test above, fails the run.
# (A report written after the last test, by a process that outlived it, keeps its plain asan.PID name.)
reports=$(ls "$LOGS" | grep -E '(^|\.)(asan|ubsan)\.[0-9]+$' || true)
if [ -n "$reports" ]; then
    # One FAIL line per report, naming the test and the report's first lines, so that a summary that shows only
    # FAIL lines (make test's) still says what went wrong; the whole report is printed below it.
    for r in $reports; do
        first=$(grep -m3 -E 'ERROR|runtime error|SUMMARY|fatal error|Tracer caught|#[0-9]+ 0x' "$LOGS/$r" | tr '\n' ' ' | head -c 600)
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
