#!/usr/bin/env bash
# Code size (docs/architecture.md, "Code size"): no function in llmc/ is over 80 lines, kernels and the option table
# excepted. The checker must first report a planted 90-line function, so a broken scanner cannot pass silently.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir function_lengths)
{
    echo "int long_function(int x) {"
    for i in $(seq 1 88); do echo "    x += $i;"; done
    echo "}"
} >"$TMP/planted.cpp"
out=$(/usr/bin/python3 dev/function_lengths.py "$TMP/planted.cpp" 2>&1); rc=$?
[ $rc -ne 0 ] && [[ "$out" == *"long_function is 90 lines"* ]] \
    && pass "a planted 90-line function is reported" || fail "a planted 90-line function is reported" "status $rc: $out"
out=$(/usr/bin/python3 dev/function_lengths.py 2>&1); rc=$?
[ $rc -eq 0 ] && pass "no function in llmc/ over 80 lines (kernels and the option table excepted)" \
    || fail "functions in llmc/ over 80 lines" "$(echo "$out" | grep -v exempt)"
finish
