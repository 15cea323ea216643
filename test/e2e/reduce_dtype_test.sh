#!/usr/bin/env bash
# --reduce-dtype bf16: the gradients cross ranks in bf16 (half the bytes), accumulation and the optimizer stay fp32.
# The CPU trainer under mpirun -np 2, a tiny model (L=2, C=32, V=64: n = 30,080 parameters), 50 steps, against the
# same run reduced in fp32:
#   - the bytes handed to gradient reductions ("gradient reduction: ..." line) are exactly half, at ZeRO 0, 1 and 2;
#   - step 1, where both runs start from the same parameters: each reduced element carries at most two bf16
#     roundings (each rank's contribution, then the sum, which MPI forms in fp32; NCCL's ring would round at each of
#     its W - 1 hops, the same single rounding at W = 2), 2 x 2^-9 = 2^-8 relative, so the
#     grad norm is within 2^-8 (observed 1.3e-4); a conversion left out or applied twice moves it by far more;
#   - 50 steps: each step's AdamW update direction m/sqrt(v) is scale-free, so a relative error of 2^-8 in the
#     gradients moves each parameter by at most lr x 2^-8 per step; to first order the loss moves by at most
#     S x lr x 2^-8 x |grad L|_1 <= S x lr x 2^-8 x sqrt(n) x max |grad L|_2 = 50 x 3e-3 x 2^-8 x 173 x 1.4 = 0.14,
#     4.4% of the loss (~3.2 at step 50): train and val losses within 4e-2 relative (observed 6e-4; the rounding
#     errors are not coherent, so the worst case is far off).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir reduce_dtype)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 20000 --val-tokens 2000 >/dev/null \
    || { fail "make shards"; finish; }
BIN=./train_gpt2_cpu
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=16,V=64" -b 2 -t 16 -d 64
      -v 25 -m 2 -s 0 -l 3e-3 --threads 1)
train() {  # train NAME ARGS...
    local name=$1; shift
    mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x CUDA_VISIBLE_DEVICES=0 -np 2 "$BIN" "${args[@]}" \
        "$@" -o "$TMP/$name" \
        >"$TMP/$name.log" 2>&1 || { fail "train $name" "$(tail -3 "$TMP/$name.log")"; return 1; }
}
reduced_bytes() { sed -nE 's/^gradient reduction: ([0-9]+) bytes.*\((f32|bf16)\)$/\1/p' "$TMP/$1.log"; }
# step1_norm A B: the relative difference of the step-1 grad norms.
step1_norm() {
    /usr/bin/python3 -c '
import json, sys
norm = lambda run: next(json.loads(l)["grad_norm"] for l in open(run + "/metrics.jsonl") if "grad_norm" in l)
a, b = norm(sys.argv[1]), norm(sys.argv[2])
print("%.3g" % (abs(a - b) / a))
sys.exit(0 if abs(a - b) <= a * 2**-8 else 1)' "$TMP/$1" "$TMP/$2"
}
expect_error "--reduce-dtype fp16 is refused" "--reduce-dtype 'fp16': expected fp32 or bf16" "$BIN" "${args[@]}" --reduce-dtype fp16
if train f32 -x 50 -z 1 && train bf16 -x 50 -z 1 --reduce-dtype bf16; then
    f=$(reduced_bytes f32) b=$(reduced_bytes bf16)
    [ -n "$f" ] && [ -n "$b" ] && [ "$f" -eq $((2 * b)) ] && pass "ZeRO 1: bf16 hands half the gradient bytes to the reductions ($b vs $f)" \
        || fail "ZeRO 1: bf16 halves the reduced bytes" "fp32 '$f', bf16 '$b'"
    d=$(step1_norm f32 bf16) && pass "ZeRO 1: step-1 grad norm within 2^-8 of fp32 ($d)" || fail "ZeRO 1: step-1 grad norm within 2^-8 of fp32" "$d"
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/f32" "$TMP/bf16" 4e-2 1 1 >"$TMP/cmp" 2>&1 \
        && pass "50 steps: bf16 reduction within 4e-2 of fp32 in every train and val loss ($(tail -1 "$TMP/cmp"))" \
        || fail "50 steps: bf16 reduction within 4e-2 of fp32" "$(tail -1 "$TMP/cmp")"
fi
# ZeRO 0 (all-reduce of each range) and ZeRO 2 (two micro-steps: reduced every micro-step, accumulated in fp32);
# then ZeRO 2 on the CUDA backend under the simulator (its conversion kernels on the comm stream, NCCL's bf16 sum).
for run in cpu:0 cpu:2 sim:2; do
    kind=${run%:*} z=${run#*:}
    BIN=$([ $kind = sim ] && echo build/train_gpt2_sim || echo ./train_gpt2_cpu)
    what="ZeRO $z$([ $kind = sim ] && echo ", simulated CUDA")"
    extra=(); [ $z = 2 ] && extra=(-d 128)
    [ -x "$BIN" ] || { fail "$BIN" "not built"; continue; }
    if train "f32_${kind}_z$z" -x 2 -z $z "${extra[@]}" && train "bf16_${kind}_z$z" -x 2 -z $z "${extra[@]}" --reduce-dtype bf16; then
        f=$(reduced_bytes "f32_${kind}_z$z") b=$(reduced_bytes "bf16_${kind}_z$z")
        [ -n "$f" ] && [ -n "$b" ] && [ "$f" -eq $((2 * b)) ] && pass "$what: bf16 halves the reduced bytes ($b vs $f)" \
            || fail "$what: bf16 halves the reduced bytes" "fp32 '$f', bf16 '$b'"
        d=$(step1_norm "f32_${kind}_z$z" "bf16_${kind}_z$z") && pass "$what: step-1 grad norm within 2^-8 of fp32 ($d)" \
            || fail "$what: step-1 grad norm within 2^-8 of fp32" "$d"
    fi
done
finish
