#!/usr/bin/env bash
# The speedrun reference (dev/reference/speedrun_reference.py, docs/reference.md "The speedrun reference"): generated
# for the tiny model (L=2, NH=4, C=64, V=250, T=16, B=2) with the records' initialisation, with every matrix non-zero
# (--perturb), with the ShortcutsTweaks options too (--record9), and with the soft-cap and the momentum warm-up, each
# file read back by the C++ tests: the CPU's Newton-Schulz against the reference's float64 cases (build/test/test_muon
# --ref), the recipe's CPU ops composed into the model against its logits, loss, gradients and optimizer steps
# (build/test/test_speedrun_reference --ref), and the trainer's own speedrun model and optimizer on the CPU backend
# and on the CUDA backend under the simulator (test_gpt2 --speedrun-ref).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir speedrun_reference)
for bin in build/test/test_muon build/test/test_speedrun_reference ./test_gpt2_cpu build/test_gpt2_sim; do
    [ -x "$bin" ] || { fail "$bin" "not built"; finish; }
done
/usr/bin/python3 -c "import torch" 2>/dev/null || { skip "speedrun reference" "no PyTorch for /usr/bin/python3 (python3-torch)"; finish; }
for variant in "record:" "perturbed:--perturb" "record9_perturbed:--record9 --perturb" \
               "softcap_perturbed:--softcap --momentum-warmup 4 --perturb"; do
    name=${variant%%:*}
    args=${variant#*:}
    # Written once per generator, arguments and PyTorch (cached_reference), into build/ref/speedrun_NAME.
    ref=build/ref/speedrun_$name
    # shellcheck disable=SC2086
    if cached_reference "$ref" /usr/bin/python3 dev/reference/speedrun_reference.py --out "$ref" $args >"$TMP/$name.log" 2>&1; then
        if [ "$(tail -n 1 "$TMP/$name.log")" = cached ]; then
            skip "speedrun reference ($name) written" "cached in $ref (dev/reference, the arguments and PyTorch unchanged)"
        else
            pass "speedrun reference ($name) written"
        fi
    else
        fail "speedrun reference ($name) written" "$(tail -2 "$TMP/$name.log" | tr '\n' ' ')"
        continue
    fi
    log="$TMP/${name}_muon.log"
    if build/test/test_muon --ref "$ref/speedrun_reference.bin" >"$log" 2>&1; then
        pass "CPU Newton-Schulz against the reference's float64 cases ($name, $(grep -c '^PASS' "$log") checks)"
    else
        fail "CPU Newton-Schulz against the reference's float64 cases ($name)" "$(grep -m2 '^FAIL' "$log" | tr '\n' ' ')"
    fi
    # The trainer's model and optimizer (llmc/speedrun.h, llmc/data_parallel_owned.h) on both backends, the CUDA one
    # under the simulator.
    for bin in ./test_gpt2_cpu build/test_gpt2_sim; do
        log="$TMP/${name}_$(basename "$bin").log"
        if "$bin" --speedrun-ref "$ref/speedrun_reference.bin" >"$log" 2>&1; then
            pass "$bin --speedrun-ref: the trainer's speedrun model and optimizer ($name, $(grep -c '^PASS' "$log") checks)"
        else
            fail "$bin --speedrun-ref ($name)" "$(grep -m2 '^FAIL\|error' "$log" | tr '\n' ' ')"
        fi
    done
    log="$TMP/${name}_model.log"
    if build/test/test_speedrun_reference --ref "$ref/speedrun_reference.bin" >"$log" 2>&1; then
        pass "the recipe's CPU ops as the model: logits, loss, gradients, optimizer steps ($name, $(grep -c '^PASS' "$log") checks)"
    else
        fail "the recipe's CPU ops as the model ($name)" "$(grep -m2 '^FAIL' "$log" | tr '\n' ' ')"
    fi
done
finish
