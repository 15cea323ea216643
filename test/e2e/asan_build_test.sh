#!/usr/bin/env bash
# The ASan + UBSan build (`make asan-build`: the CPU programs and the unit tests test/e2e/asan_test.sh runs, into
# build-asan/) as an entry of test/tests.list, so that it compiles beside the other tests instead of before them; the
# two ASan groups run after it. A compiler error or warning (-Werror) under the sanitizers' flags fails it.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir asan_build)
if make --no-print-directory asan-build >"$TMP/build.log" 2>&1; then
    pass "the CPU programs and unit tests build with ASan + UBSan (build-asan/)"
else
    fail "the ASan + UBSan build" "$(grep -m3 -E 'error|Error' "$TMP/build.log" | tr '\n' ' ' | head -c 400)"
fi
finish
