#!/usr/bin/env bash
# The speedrun reference (dev/reference/speedrun_reference.py, docs/reference.md "The speedrun reference"): generated
# for the tiny model (L=2, NH=4, C=64, V=250, T=16, B=2) with the records' initialisation, with every matrix non-zero
# (--perturb), and with the ShortcutsTweaks options too (--record9), each file read back by the C++ tests: the CPU's
# Newton-Schulz against the reference's float64 cases (build/test/test_muon --ref), and the recipe's CPU ops composed
# into the model against its logits, loss, gradients and optimizer steps (build/test/test_speedrun_reference --ref).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=build/test-tmp/speedrun_reference
rm -rf "$TMP" && mkdir -p "$TMP"
for bin in build/test/test_muon build/test/test_speedrun_reference; do
    [ -x "$bin" ] || { fail "$bin" "not built"; finish; }
done
/usr/bin/python3 -c "import torch" 2>/dev/null || { skip "speedrun reference" "no PyTorch for /usr/bin/python3 (python3-torch)"; finish; }
for variant in "record:" "perturbed:--perturb" "record9_perturbed:--record9 --perturb"; do
    name=${variant%%:*}
    args=${variant#*:}
    # shellcheck disable=SC2086
    if /usr/bin/python3 dev/reference/speedrun_reference.py --out "$TMP/$name" $args >"$TMP/$name.log" 2>&1; then
        pass "speedrun reference ($name) written"
    else
        fail "speedrun reference ($name) written" "$(tail -2 "$TMP/$name.log" | tr '\n' ' ')"
        continue
    fi
    log="$TMP/${name}_muon.log"
    if build/test/test_muon --ref "$TMP/$name/speedrun_reference.bin" >"$log" 2>&1; then
        pass "CPU Newton-Schulz against the reference's float64 cases ($name, $(grep -c '^PASS' "$log") checks)"
    else
        fail "CPU Newton-Schulz against the reference's float64 cases ($name)" "$(grep -m2 '^FAIL' "$log" | tr '\n' ' ')"
    fi
    log="$TMP/${name}_model.log"
    if build/test/test_speedrun_reference --ref "$TMP/$name/speedrun_reference.bin" >"$log" 2>&1; then
        pass "the recipe's CPU ops as the model: logits, loss, gradients, optimizer steps ($name, $(grep -c '^PASS' "$log") checks)"
    else
        fail "the recipe's CPU ops as the model ($name)" "$(grep -m2 '^FAIL' "$log" | tr '\n' ' ')"
    fi
done
finish
