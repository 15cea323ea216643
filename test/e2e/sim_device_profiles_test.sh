#!/usr/bin/env bash
# The simulated CUDA trainer's start-up and two steps of GPT-2-shaped layers under each device profile of the
# simulator (CUDASIM_DEVICE=sm_80, sm_86, sm_89, sm_90: docs/cudasim.md), so that a kernel asking for more shared
# memory than an architecture allows, or a launch it refuses, fails here as it would on that GPU:
#   C = 768,  NH = 12 (head size 64),  2 layers  (GPT-2 124M's width)
#   C = 768,  NH = 6  (head size 128), 1 layer
#   C = 1600, NH = 25 (head size 64),  1 layer   (GPT-2 1.5B's width: the layernorm backward's shared memory)
# with tiny B, T and vocabulary. Every run must start, take its steps and write finite losses. Then the classifier at
# GPT-2's vocabulary (build/test/sim_classifier_prefetch) under each profile.
#
# Across profiles, the step-1 loss (identical parameters and data, forward only) must agree with sm_90's to 1e-3
# relative. Kernels may pick other tiles per architecture, which changes fp32 summation orders and can flip the bf16
# rounding of individual activations by one ulp (2^-8 relative); the loss is a mean over B*T positions of a smooth
# function of those activations, so such flips move it by far less than 2^-8 (observed: identical today), while a
# wrong per-architecture path moves logits by O(1). 1e-3 separates the two.
#
# Each run also appends the launches it made to build/test-tmp/sim_device_profiles/launches.tsv (CUDASIM_LAUNCH_LOG:
# profile, kernel, threads per block, dynamic shared bytes) for the resource check (test/e2e/resource_check_test.py).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir sim_device_profiles)
BIN=build/train_gpt2_sim
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
[ -x build/test/sim_classifier_prefetch ] || { fail build/test/sim_classifier_prefetch "not built"; finish; }
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 3000 --val-tokens 600 >/dev/null \
    || { fail "make shards"; finish; }
shapes=("L=2,NH=12,C=768,T=8,V=64" "L=1,NH=6,C=768,T=8,V=64" "L=1,NH=25,C=1600,T=8,V=64")
step1_loss() { /usr/bin/python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("step") == 1 and "train_loss" in r: print(repr(r["train_loss"])); break' "$1/metrics.jsonl"; }
for dev in sm_90 sm_80 sm_86 sm_89; do
    for shape in "${shapes[@]}"; do
        name="$dev $shape"
        out="$TMP/${dev}_${shape//[,=]/_}"
        if CUDASIM_DEVICE=$dev CUDASIM_LAUNCH_LOG="$TMP/launches.tsv" CUDA_VISIBLE_DEVICES=0 "$BIN" \
            -i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "$shape" -b 1 -t 8 -x 2 -v 0 -s 0 \
            --threads 1 -o "$out" >"$out.log" 2>&1; then
            loss=$(step1_loss "$out")
            if [ -z "$loss" ] || ! /usr/bin/python3 -c 'import math,sys; sys.exit(0 if math.isfinite(float(sys.argv[1])) else 1)' "$loss"; then
                fail "simulated trainer under $name: finite step-1 loss" "got '$loss'"
                continue
            fi
            if [ "$dev" = sm_90 ]; then
                declare "ref_${#shape}_$(echo "$shape" | md5sum | cut -c1-8)=$loss"
                pass "simulated trainer under $name: starts, takes 2 steps (step-1 loss $loss)"
            else
                ref_var="ref_${#shape}_$(echo "$shape" | md5sum | cut -c1-8)"
                ref=${!ref_var}
                if [ -n "$ref" ] && /usr/bin/python3 -c 'import sys; a,b=map(float,sys.argv[1:]); sys.exit(0 if abs(a-b) <= 1e-3*abs(b) else 1)' "$loss" "$ref"; then
                    pass "simulated trainer under $name: starts, takes 2 steps, step-1 loss $loss matches sm_90's"
                else
                    fail "simulated trainer under $name: step-1 loss matches sm_90's" "got $loss, sm_90 ${ref:-(failed)}"
                fi
            fi
        else
            fail "simulated trainer under $name" "$(grep -E 'cudasim:|error' "$out.log" | head -2 | tr '\n' ' ')"
        fi
    done
done
# The classifier at GPT-2's row (Vp = 50304: 1024 threads, a 100,608-byte prefetch buffer) under each profile: the
# simulator refuses a launch over the profile's limits, and its launches go to the log for the resource check.
for dev in sm_90 sm_80 sm_86 sm_89; do
    log="$TMP/classifier_$dev.log"
    if CUDASIM_DEVICE=$dev CUDASIM_LAUNCH_LOG="$TMP/launches.tsv" build/test/sim_classifier_prefetch >"$log" 2>&1 &&
        grep -q "^PASS backend fused_classifier N=3 V=50257 Vp=50304 (prefetch kernel" "$log"; then
        pass "classifier at Vp=50304 under $dev: the prefetch kernel launched, bitwise equal to one block per row"
    else
        fail "classifier at Vp=50304 under $dev" "$(grep -E 'FAIL|cudasim:|error' "$log" | head -2 | tr '\n' ' ')"
    fi
done
finish
