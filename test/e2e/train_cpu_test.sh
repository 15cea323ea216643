#!/usr/bin/env bash
# End-to-end checks of ./train_gpt2_cpu on a tiny model and synthetic shards: the loss falls, metrics.jsonl has the
# contract's fields, gradient accumulation matches a larger batch, and bad input stops with one clear error.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir train_cpu)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 >/dev/null || { fail "make shards"; finish; }
TR="$TMP/data/syn_train_*.bin"; VA="$TMP/data/syn_val_*.bin"
MODEL="L=2,NH=2,C=32,T=32,V=64"
BIN=${TOOL_DIR:-.}/train_gpt2_cpu  # TOOL_DIR: where the binaries are (make asan: build-asan/bin)
common=(-i "$TR" -j "$VA" -e "$MODEL" -t 32 -s 0 --threads 2)

# 1. Training: 40 steps, loss falls, metrics written.
if $BIN "${common[@]}" -b 4 -x 40 -l 3e-3 -v 20 -m 2 -o "$TMP/run" >"$TMP/run.log" 2>&1; then
    pass "train 40 steps"
else
    fail "train 40 steps" "$(tail -3 "$TMP/run.log")"
fi
/usr/bin/python3 - "$TMP/run/metrics.jsonl" <<'PY' && pass "loss falls and metrics.jsonl has the contract's fields" || fail "metrics" "see above"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in rows if "train_loss" in r]
val = [r for r in rows if "val_loss" in r]
assert len(train) == 40, len(train)
for r in train:
    for k in ("step", "train_loss", "lr", "grad_norm", "tokens_per_sec", "mfu", "ms"):
        assert k in r, (k, r)
assert [r["step"] for r in train] == list(range(1, 41))
assert len(val) == 3, val   # steps 0, 20, 40
first = sum(r["train_loss"] for r in train[:3]) / 3
last = sum(r["train_loss"] for r in train[-3:]) / 3
print("train loss %.3f -> %.3f, val %.3f -> %.3f" % (first, last, val[0]["val_loss"], val[-1]["val_loss"]))
assert last < first - 0.5, (first, last)
assert val[-1]["val_loss"] < val[0]["val_loss"] - 0.5
PY
[ -f "$TMP/run/model.bin" ] && pass "final model written" || fail "final model written"

# 2. Gradient accumulation: B=4 in one micro-step == B=2 in two micro-steps (same global batch, fp32 sums in a
#    different order: the losses agree to ~1e-5 relative, checked at 1e-4).
$BIN "${common[@]}" -b 4 -d 128 -x 5 -v 0 -o "$TMP/acc1" >/dev/null 2>&1
$BIN "${common[@]}" -b 2 -d 128 -x 5 -v 0 -o "$TMP/acc2" >/dev/null 2>&1
/usr/bin/python3 - "$TMP/acc1/metrics.jsonl" "$TMP/acc2/metrics.jsonl" <<'PY' && pass "grad accumulation equals the larger batch" || fail "grad accumulation" "losses differ"
import json, sys
a = [json.loads(l)["train_loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["train_loss"] for l in open(sys.argv[2])]
assert len(a) == len(b) == 5
for x, y in zip(a, b):
    assert abs(x - y) <= 1e-4 * abs(x), (a, b)
PY

# 2b. Recomputation (-r 1: GELU, -r 2: GELU and layernorms) repeats the forward's ops on the same inputs: on the CPU
#     backend the losses and the final parameters are bit-identical to keeping the activations (the CUDA backend's
#     recomputed GELU is within a stated bound instead: llmc/model.h, test/sim/test_kernels.cpp).
for r in 0 1 2; do
    $BIN "${common[@]}" -b 2 -x 4 -v 0 -r $r -o "$TMP/r$r" >/dev/null 2>&1
done
for r in 1 2; do
    if cmp -s "$TMP/r0/model.bin" "$TMP/r$r/model.bin" && \
       [ "$(grep -o '"train_loss":[^,}]*' "$TMP/r0/metrics.jsonl")" == "$(grep -o '"train_loss":[^,}]*' "$TMP/r$r/metrics.jsonl")" ]; then
        pass "-r $r is bit-identical to -r 0"
    else
        fail "-r $r is bit-identical to -r 0"
    fi
done

# 3. -a 1 overfits the first batch.
$BIN "${common[@]}" -b 4 -x 30 -l 1e-2 -a 1 -v 0 -o "$TMP/overfit" >/dev/null 2>&1
/usr/bin/python3 - "$TMP/overfit/metrics.jsonl" <<'PY' && pass "-a 1 overfits one batch" || fail "-a 1 overfits one batch"
import json, sys
l = [json.loads(x)["train_loss"] for x in open(sys.argv[1])]
assert l[-1] < 0.5 * l[0], (l[0], l[-1])
PY

# 4. llm.c's two-letter flags are accepted (rewritten to long options before parsing).
$BIN "${common[@]}" -b 4 -x 1 -v 0 -nk 2 -nm 10 -sl 0 -sg 0 -pi auto >/dev/null 2>&1 && pass "two-letter flags accepted" || fail "two-letter flags accepted"

# 5. Bad input: one clear line on stderr, non-zero exit.
$BIN --help >/dev/null 2>&1 && pass "--help exits 0" || fail "--help exits 0"
expect_error "unknown flag" "zzz" $BIN --zzz 1
expect_error "missing train data" "no data files" $BIN -i "$TMP/none_*.bin" -j "$VA" -e "$MODEL" -t 32
expect_error "-d not divisible" "not divisible" $BIN "${common[@]}" -b 4 -d 100
expect_error "T longer than maxT" "longer than" $BIN -i "$TR" -j "$VA" -e "$MODEL" -t 64
expect_error "ZeRO stage 3" "ZeRO stage" $BIN "${common[@]}" -z 3
expect_error "negative lr" "learning rate" $BIN "${common[@]}" -l -1
printf 'not a model' > "$TMP/bad_model.bin"
expect_error "model file too short" "bad_model.bin" $BIN -i "$TR" -j "$VA" -e "$TMP/bad_model.bin" -t 32
expect_error "missing model file" "cannot open" $BIN -i "$TR" -j "$VA" -e "$TMP/missing.bin" -t 32
# A model far larger than any machine's memory (L=8, C=65536: ~1.6 TB of parameters) is refused before it is touched.
expect_error "model larger than memory" "out of memory" $BIN -i "$TR" -j "$VA" -e "L=8,NH=2,C=65536,T=32,V=64" -b 1 -t 32 -v 0 -s 0

# 6. More bad input (host review): each names the flag or the file, none crashes or runs on.
expect_error "a value that does not parse names its flag" "-l 'nan'" $BIN "${common[@]}" -l nan
expect_error "... also as --flag=value" "--eps 'inf'" $BIN "${common[@]}" --eps=inf
expect_error "... and for a two-letter flag" "-nk 'x'" $BIN "${common[@]}" -nk x
expect_error "--threads beyond what OpenMP can start (it crashed)" "--threads 100000" $BIN "${common[@]}" --threads 100000
expect_error "-n without -o (no checkpoint would be written)" "-n 5: checkpoints are written into -o" \
    $BIN "${common[@]}" -x 2 -n 5
expect_error "llm.c's -h 1 (HellaSwag there, --help here)" "--hellaswag FILE" $BIN "${common[@]}" -h 1
# A batch larger than the data is refused by the data check before the activations are allocated (-b 2e9 would
# ask for 256 GB; a -b between the two used to be killed by the OOM killer while zeroing them).
expect_error "-b larger than the data: refused before allocating" "-i: $TMP/data/syn_train_000000.bin: 20000 tokens is fewer" \
    $BIN "${common[@]}" -b 2000000000
expect_error "a val set smaller than one global batch names -j" "(-v 0 turns validation off)" \
    $BIN "${common[@]}" -b 4 -d 4096 -x 1 -v 1
/usr/bin/python3 - "$TMP" <<'PY'
import struct, sys
d = sys.argv[1]
m = open(d + "/run/model.bin", "rb").read()
open(d + "/nan_model.bin", "wb").write(m[:2000] + struct.pack("<f", float("nan")) + m[2004:])
# llm.c decode tables (magic 20240328, version 2, [2] = vocab size, [3] = EOT): 64 tokens with EOT 0 fit the test
# model (V = 64); GPT-2's 50257 with EOT 50256 do not.
def table(path, n, eot):
    hdr = struct.pack("<256i", *([20240328, 2, n, eot] + [0] * 252))
    body = b"".join(bytes([len(t)]) + t for t in (b"<|eot|>" if i == eot else b"t%d " % i for i in range(n)))
    open(path, "wb").write(hdr + body)
table(d + "/tok64.bin", 64, 0)
table(d + "/tok_gpt2.bin", 50257, 50256)
PY
expect_error "a NaN in the model file is refused when read" "parameter 244 (wte, element 244) is nan" \
    $BIN -i "$TR" -j "$VA" -e "$TMP/nan_model.bin" -t 32 -x 1 -s 0
# 7. Samples (-s): with a fitting tokenizer they are printed; with GPT-2's (EOT 50256 >= V = 64) the first sample
#    used to stop the run ("input token 50256 is outside the vocabulary"): now samples are off, with a note.
out=$($BIN "${common[@]}" -b 4 -x 2 -v 0 -s 1 -g 4 --tokenizer "$TMP/tok64.bin" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(grep -c -- '---- sample at step' <<<"$out")" -eq 2 ] && pass "samples printed at steps 1 and 2" \
    || fail "samples printed" "status $rc: $(tail -3 <<<"$out")"
out=$($BIN "${common[@]}" -b 4 -x 2 -v 0 -s 1 -g 4 --tokenizer "$TMP/tok_gpt2.bin" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "note: the tokenizer .* does not fit the model's vocabulary of 64, samples are off" <<<"$out" \
    && pass "a tokenizer that does not fit the model turns samples off (the run completes)" \
    || fail "a tokenizer that does not fit the model" "status $rc: $(tail -2 <<<"$out")"
# 8. A fresh run (no -y) writing checkpoints into an -o that holds an earlier run's: refused (a later -y 1 would
#    resume the earlier run's newest checkpoint with both runs' metrics); -y 1 continues it.
rm -rf "$TMP/again"
$BIN "${common[@]}" -b 4 -x 4 -v 0 -n 2 -o "$TMP/again" >/dev/null 2>&1 || fail "checkpointed run"
expect_error "a fresh run into an -o with checkpoints is refused" "holds an earlier run" \
    $BIN "${common[@]}" -b 4 -x 6 -v 0 -n 2 -o "$TMP/again"
$BIN "${common[@]}" -b 4 -x 6 -v 0 -n 2 -o "$TMP/again" -y 1 >"$TMP/again.log" 2>&1 \
    && [ "$(grep -c train_loss "$TMP/again/metrics.jsonl")" -eq 6 ] && pass "... and -y 1 continues it to step 6" \
    || fail "-y 1 continues the checkpointed run"
grep -q "note: the checkpoint's run had 4 steps, this one has 6: the learning-rate schedule" "$TMP/again.log" \
    && pass "resuming with another -x says that the schedule changes" || fail "resume with another -x: no note"
finish
