#!/usr/bin/env bash
# The speedrun recipe's kernels on every architecture the build targets, without a GPU:
#   1. the simulator tests of the kernels (build/test/sim_speedrun_kernels, build/test/sim_newton_schulz) under each
#      device profile (CUDASIM_DEVICE=sm_80, sm_86, sm_89, sm_90: their shared-memory and thread limits), logging
#      every launch (CUDASIM_LAUNCH_LOG);
#   2. the resource check (test/e2e/resource_check_test.py) of the nvcc object build/cuda/llmc/cuda/speedrun_ops.o
#      against those launches: registers, static + dynamic shared memory and __launch_bounds__ per profile;
#   3. the SASS check of that object (test/e2e/speedrun_sass_check.py): 128-bit accesses on the vector paths.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=build/test-tmp/speedrun_kernels_check
rm -rf "$TMP" && mkdir -p "$TMP"
OBJ=build/cuda/llmc/cuda/speedrun_ops.o
for bin in build/test/sim_speedrun_kernels build/test/sim_newton_schulz; do
    [ -x "$bin" ] || { fail "$bin" "not built"; finish; }
done
[ -f "$OBJ" ] || { fail "$OBJ" "not built (make $OBJ)"; finish; }
for dev in sm_80 sm_86 sm_89 sm_90; do
    for bin in build/test/sim_speedrun_kernels build/test/sim_newton_schulz; do
        log="$TMP/$(basename "$bin")_$dev.log"
        if CUDASIM_DEVICE=$dev CUDASIM_LAUNCH_LOG="$TMP/launches.tsv" "$bin" >"$log" 2>&1; then
            pass "$(basename "$bin") under $dev ($(grep -c '^PASS' "$log") checks)"
        else
            fail "$(basename "$bin") under $dev" "$(grep -E '^FAIL|cudasim:|error' "$log" | head -2 | tr '\n' ' ')"
        fi
    done
done
/usr/bin/python3 test/e2e/resource_check_test.py "$OBJ" "$TMP/launches.tsv" || TESTS_FAILED=1
/usr/bin/python3 test/e2e/speedrun_sass_check.py "$OBJ" || TESTS_FAILED=1
finish
