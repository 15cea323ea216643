#!/usr/bin/env bash
# Checkpoints end to end on ./train_gpt2_cpu, a tiny model and synthetic shards:
#   1. kill -9 at random steps (twice) and resume with -y 1: losses and the final model.bin are bit-identical to an
#      uninterrupted run (the CPU backend is deterministic; the outlier detectors -sl/-sg are on and survive resume)
#   2. killed DURING a checkpoint write (test hook): the half-written checkpoint is ignored, -y 1 falls back
#   3. resharding: written by 4 MPI ranks (ZeRO 1), resumed on 1, 2, 3 ranks (and 4: bit-identical)
#   4. corruption: flipped byte, truncated file, broken meta.json, wrong magic, all corrupt
#   5. retention: -nk / -nm
#   6. non-finite steps: skipped and logged; the run stops after --max-bad-steps in a row
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir checkpoint)
BIN=${TRAIN_BIN:-${TOOL_DIR:-.}/train_gpt2_cpu}
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 >/dev/null || { fail "make shards"; finish; }
common=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=32,V=64" -t 32 -s 0
        --threads 1 -l 3e-3)
MPI=(mpirun --oversubscribe --allow-run-as-root)

# same_run A B [rtol]: test/helpers/same_run.py (metrics and model.bin of two runs agree; exactly when rtol is 0).
same_run() { /usr/bin/python3 test/helpers/same_run.py "$@"; }
# train_steps DIR: the number of train-step lines in DIR/metrics.jsonl
train_steps() { local n; n=$(grep -c '"train_loss"' "$1/metrics.jsonl" 2>/dev/null); echo "${n:-0}"; }
tree_hash() { (cd "$1" && find . -type f ! -name .lock | sort | xargs sha256sum) | sha256sum; }  # .lock: llmc/run_lock.h

# ---- 1. kill -9 at random steps ---------------------------------------------------------------------------------
# 200 steps (> the 128-step outlier window, so -sl/-sg decide from step 129 on), a checkpoint every 10 steps.
# Thresholds of 1.5 skip a few of steps 129-200 (the z-scores of this run reach ~1.9), so the skip decisions and
# the detectors' windows are part of what must survive the kills.
run1=("${common[@]}" -b 4 -x 200 -v 50 -m 2 -n 10 -nk 3 -sl 1.5 -sg 1.5)
$BIN "${run1[@]}" -o "$TMP/ref" >"$TMP/ref.log" 2>&1 || fail "uninterrupted run" "$(tail -2 "$TMP/ref.log")"
n_skipped=$(grep -c '"skipped":"[a-z-]* outlier"' "$TMP/ref/metrics.jsonl")
[ "$n_skipped" -gt 0 ] && pass "-sl/-sg 1.5 skipped $n_skipped outlier step(s)" || fail "-sl/-sg skipped no step"
killed_ok=1
for attempt in 1 2; do
    # Kill when the log has passed a random step 15-75 steps past where the run starts (polling: it lands a few
    # steps later); the resumed run (attempt 2) starts from the last checkpoint before the first kill.
    target=$(( $(train_steps "$TMP/kill") + 15 + RANDOM % 61 ))
    if [ $attempt -eq 1 ]; then $BIN "${run1[@]}" -o "$TMP/kill" >"$TMP/kill$attempt.log" 2>&1 &
    else $BIN "${run1[@]}" -o "$TMP/kill" -y 1 >"$TMP/kill$attempt.log" 2>&1 & fi
    pid=$!
    while kill -0 $pid 2>/dev/null && [ "$(train_steps "$TMP/kill")" -lt $target ]; do sleep 0.005; done
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    rc=$?
    echo "attempt $attempt: killed near step $target (at $(train_steps "$TMP/kill") metrics lines), status $rc"
    [ $rc -eq 137 ] || killed_ok=0
done
[ $killed_ok -eq 1 ] && pass "SIGKILL landed mid-run (twice)" || fail "SIGKILL landed mid-run" "a run ended before the kill"
$BIN "${run1[@]}" -o "$TMP/kill" -y 1 >"$TMP/kill3.log" 2>&1 || fail "resume after kill" "$(tail -2 "$TMP/kill3.log")"
grep -q "^resume .*ckpt_" "$TMP/kill3.log" && pass "resume after kill found a checkpoint" \
    || fail "resume after kill found a checkpoint" "$(grep resume "$TMP/kill3.log")"
same_run "$TMP/ref" "$TMP/kill" && pass "killed twice + resumed == uninterrupted (losses, model.bin bit-identical)" \
    || fail "killed + resumed == uninterrupted"
ls -d "$TMP/kill"/ckpt_* | sed 's|.*/||' | tr '\n' ' ' | grep -qx "ckpt_00000180 ckpt_00000190 ckpt_00000200 " \
    && pass "-nk 3 keeps the last three" || fail "-nk 3 keeps the last three" "$(ls "$TMP/kill")"

# ---- 2. killed while writing a checkpoint ------------------------------------------------------------------------
run2=("${common[@]}" -b 4 -x 30 -v 10 -m 2 -n 5)
$BIN "${run2[@]}" -o "$TMP/ref2" >/dev/null 2>&1 || fail "uninterrupted run 2"
LLMC_TEST_CRASH_IN_CHECKPOINT=20 $BIN "${run2[@]}" -o "$TMP/mid" >"$TMP/mid1.log" 2>&1
rc=$?
[ $rc -eq 137 ] && [ ! -f "$TMP/mid/ckpt_00000020/meta.json" ] && ls "$TMP/mid/ckpt_00000020/" | grep -q '\.tmp\.' \
    && pass "killed inside checkpoint 20: temp file written, no meta.json" \
    || fail "killed inside checkpoint 20" "status $rc, $(ls "$TMP/mid/ckpt_00000020/" 2>&1)"
$BIN "${run2[@]}" -o "$TMP/mid" -y 1 >"$TMP/mid2.log" 2>"$TMP/mid2.err"
grep -q "ckpt_00000020 is incomplete" "$TMP/mid2.err" && grep -q "falling back" "$TMP/mid2.err" \
    && grep -q "resume .*ckpt_00000015" "$TMP/mid2.log" \
    && pass "-y 1 skips the half-written checkpoint (stderr says so) and resumes from 15" \
    || fail "-y 1 skips the half-written checkpoint" "$(cat "$TMP/mid2.err")"
same_run "$TMP/ref2" "$TMP/mid" && pass "killed mid-checkpoint + resumed == uninterrupted (bit-identical)" \
    || fail "killed mid-checkpoint + resumed == uninterrupted"
ls "$TMP/mid/ckpt_00000020/" | grep -q '\.tmp\.' && fail "rewritten checkpoint 20 still holds the stale temp file" \
    || pass "rewritten checkpoint 20 has no stale temp file"

# ---- 3. resharding: 4 ranks -> 1, 2, 3 (and 4) ranks -------------------------------------------------------------
# -d 384 = 12 sequences of 32: divisible by B*T*ranks for 1, 2, 3 and 4 ranks (12, 6, 4, 3 micro-steps per rank).
if command -v mpirun >/dev/null; then
    run3=("${common[@]}" -b 1 -d 384 -x 12 -v 6 -m 1 -n 6)
    "${MPI[@]}" -np 4 $BIN "${run3[@]}" -z 1 -o "$TMP/r4" >"$TMP/r4.log" 2>&1 || fail "4-rank run" "$(tail -3 "$TMP/r4.log")"
    for n in 1 2 3 4; do
        mkdir -p "$TMP/re$n" && cp -r "$TMP/r4/ckpt_00000006" "$TMP/r4/metrics.jsonl" "$TMP/re$n/"
        z=1; [ $n -eq 3 ] && z=2; [ $n -eq 1 ] && z=0
        "${MPI[@]}" -np $n $BIN "${run3[@]}" -z $z -o "$TMP/re$n" -y 1 >"$TMP/re$n.log" 2>&1 \
            || fail "resume on $n rank(s)" "$(tail -3 "$TMP/re$n.log")"
    done
    same_run "$TMP/r4" "$TMP/re4" && pass "4 ranks -> 4 ranks: bit-identical" || fail "4 ranks -> 4 ranks bit-identical"
    # Other world sizes reduce the gradients in another order (MPI's sum over ranks, then the micro-steps), so the
    # fp32 results differ by rounding; the tolerances and their reasoning are test/e2e/train_mpi_test.sh's: losses
    # ~1e-7 relative (measured 1.2e-7, checked at 2e-5); AdamW turns the rounding noise of near-zero gradient
    # elements into steps of up to lr, so parameters are checked at 1e-4 absolute (a thirtieth of one step's
    # movement at lr 3e-3: a wrong or missing range of m, v or the master weights moves parameters by ~lr).
    for n in 1 2 3; do
        z=1; [ $n -eq 3 ] && z=2; [ $n -eq 1 ] && z=0
        /usr/bin/python3 test/helpers/compare_runs.py "$TMP/r4" "$TMP/re$n" 2e-5 1e-4 >"$TMP/re$n.cmp" 2>&1 \
            && pass "4 ranks (ZeRO 1) -> $n rank(s) (ZeRO $z): $(tail -1 "$TMP/re$n.cmp")" \
            || fail "4 ranks -> $n rank(s)" "$(tail -2 "$TMP/re$n.cmp")"
    done
    # ... and the check can fail: a fresh 1-rank run from step 0 of other data order (--seed 7) is not a resume.
    "${MPI[@]}" -np 1 $BIN "${run3[@]}" --seed 7 -o "$TMP/other" >/dev/null 2>&1
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/r4" "$TMP/other" 2e-5 1e-4 >/dev/null 2>&1 \
        && fail "the comparison notices a different run" || pass "the comparison notices a different run"
else
    skip "resharding" "mpirun not found"
fi

# ---- 4. corruption -----------------------------------------------------------------------------------------------
# ref2 has checkpoints 5..30; each case works on a copy. The runs resume to -x 30 like ref2.
corrupt_case() {  # NAME EXPECTED-STDERR MUTATION-PYTHON
    local name="$1" want="$2" code="$3" d="$TMP/c_$1"
    rm -rf "$d" && cp -r "$TMP/ref2" "$d"
    /usr/bin/python3 -c "import sys; d = sys.argv[1]; $code" "$d"
    $BIN "${run2[@]}" -o "$d" -y 1 >"$d.log" 2>"$d.err"
    if grep -qF "$want" "$d.err" && grep -q "falling back" "$d.err" && grep -q "resume .*ckpt_00000025" "$d.log" \
        && same_run "$TMP/ref2" "$d" >/dev/null; then
        pass "corrupt ($name): refused with '$want', fell back to 25, finished identically"
    else
        fail "corrupt ($name)" "$(head -c 400 "$d.err")"
    fi
}
corrupt_case flipped-byte "optim_00000.bin: checksum mismatch: crc32c" "
p = d + '/ckpt_00000030/optim_00000.bin'; b = bytearray(open(p, 'rb').read()); b[5000] ^= 0x10; open(p, 'wb').write(b)"
corrupt_case truncated "model.bin: 60000 bytes, meta.json records" "
p = d + '/ckpt_00000030/model.bin'; b = open(p, 'rb').read(); open(p, 'wb').write(b[:60000])"
corrupt_case broken-meta "meta.json: not valid JSON" "
p = d + '/ckpt_00000030/meta.json'; b = open(p).read(); open(p, 'w').write(b[:len(b) // 2])"
# The checksum names the exact file and both CRCs.
grep -qE "ckpt_00000030/optim_00000.bin: checksum mismatch: crc32c [0-9a-f]{8} computed, [0-9a-f]{8} recorded" \
    "$TMP/c_flipped-byte.err" && pass "the message names the file and both checksums" \
    || fail "the message names the file and both checksums" "$(cat "$TMP/c_flipped-byte.err")"

# Wrong magic with a matching checksum (meta.json's entry and its own checksum recomputed, as a forger would): the
# header check refuses the file, and -y 1 falls back to the previous checkpoint like for any other corruption.
corrupt_case wrong-magic "optim_00000.bin: bad magic" "
import subprocess
p = d + '/ckpt_00000030/optim_00000.bin'; b = bytearray(open(p, 'rb').read()); b[0] ^= 0xFF; open(p, 'wb').write(b)
subprocess.check_call(['/usr/bin/python3', 'test/helpers/meta_tool.py', d + '/ckpt_00000030/meta.json', 'refresh(\"optim_00000.bin\")'])"
# Every checkpoint corrupt: -y 1 refuses to start (it would silently restart from scratch); nothing is changed.
d="$TMP/c_all"; rm -rf "$d" && cp -r "$TMP/ref2" "$d"
for c in "$d"/ckpt_*; do printf 'x' | dd of="$c/model.bin" bs=1 seek=2000 conv=notrunc status=none; done
before=$(tree_hash "$d")
expect_error "all checkpoints corrupt: refused" "none of the 6 checkpoint(s)" $BIN "${run2[@]}" -o "$d" -y 1
[ "$before" = "$(tree_hash "$d")" ] && pass "all corrupt: nothing in -o changed" || fail "all corrupt: -o changed"
# A flag that must match is checked.
d="$TMP/c_flags"; rm -rf "$d" && cp -r "$TMP/ref2" "$d"
expect_error "-d differs from the checkpoint's" "written with -d 128, this run has -d 256" \
    $BIN "${common[@]}" -b 4 -d 256 -x 30 -v 10 -m 2 -n 5 -o "$d" -y 1
# Another -b with the same -d (another number of ranks, say) resumes: the same sequences per step, in 2 micro-steps.
d="$TMP/c_b2"; rm -rf "$d" && cp -r "$TMP/ref2" "$d" && rm -rf "$d"/ckpt_00000030 "$d"/ckpt_00000025 "$d/model.bin"
if $BIN "${common[@]}" -b 2 -d 128 -x 30 -v 10 -m 2 -n 5 -o "$d" -y 1 >"$TMP/c_b2.log" 2>&1 \
        && grep -q "^resume .*step 20" "$TMP/c_b2.log"; then
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/ref2" "$d" 2e-5 1e-4 >"$TMP/cmp_b2" 2>&1 \
        && pass "-b 2 -d 128 resumes a -b 4 run and follows it ($(tail -1 "$TMP/cmp_b2"))" \
        || fail "-b 2 -d 128 resumes a -b 4 run and follows it" "$(tail -2 "$TMP/cmp_b2")"
else
    fail "-b 2 -d 128 resumes a -b 4 run" "$(tail -2 "$TMP/c_b2.log")"
fi

# ---- 5. retention ------------------------------------------------------------------------------------------------
$BIN "${common[@]}" -b 4 -x 20 -v 0 -n 2 -nk 2 -nm 5 -o "$TMP/keep" >/dev/null 2>&1 || fail "retention run"
kept=$(ls -d "$TMP/keep"/ckpt_* | sed 's|.*ckpt_0*||' | sort -n | tr '\n' ' ')
# multiples of 5 among the written ones (2, 4, ..., 20): 10, 20; plus the last two: 18, 20
[ "$kept" = "10 18 20 " ] && pass "-n 2 -nk 2 -nm 5 keeps 10 18 20" || fail "-n 2 -nk 2 -nm 5" "kept: $kept"

# ---- 6. non-finite steps -----------------------------------------------------------------------------------------
# A skipped step changes nothing: with a constant lr, 3 steps whose 3rd is NaN == 2 steps (same model.bin).
nanrun=("${common[@]}" -b 4 -v 0 -k constant)
$BIN "${nanrun[@]}" -x 2 -o "$TMP/nan2" >/dev/null 2>&1
LLMC_TEST_NAN_STEPS=3 $BIN "${nanrun[@]}" -x 3 -o "$TMP/nan3" >"$TMP/nan3.log" 2>&1
cmp -s "$TMP/nan2/model.bin" "$TMP/nan3/model.bin" && pass "a NaN step is skipped: parameters unchanged" \
    || fail "a NaN step is skipped: parameters unchanged"
grep -q "step 3/3 | loss nan .*SKIPPED (non-finite)" "$TMP/nan3.log" && pass "skipped step on the console" \
    || fail "skipped step on the console" "$(grep 'step 3' "$TMP/nan3.log")"
LLMC_TEST_NAN_STEPS=3,4 $BIN "${nanrun[@]}" -x 8 -o "$TMP/nan8" >/dev/null 2>&1 && /usr/bin/python3 - "$TMP/nan8" <<'PY' \
    && pass "NaN steps 3, 4 skipped and logged; the run goes on" || fail "NaN steps logged"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
assert [r["step"] for r in rows if r.get("skipped") == "non-finite"] == [3, 4], rows
assert len(rows) == 8 and rows[-1]["train_loss"] is not None
PY
expect_error "stops after --max-bad-steps non-finite steps" "3 steps in a row had a non-finite loss" \
    env LLMC_TEST_NAN_STEPS=2,3,4,5 $BIN "${nanrun[@]}" -x 8 --max-bad-steps 3
# A real divergence: an absurd learning rate blows the parameters up; the default limit (5) stops the run.
expect_error "-l 1e30 diverges and stops" "5 steps in a row had a non-finite loss" $BIN "${nanrun[@]}" -x 20 -l 1e30
# ---- 7. --hellaswag in the trainer ---------------------------------------------------------------------------------
# Examples made from the first training batch (-a 1 --shuffle 0 trains on sequences 0-3): the context is a sequence's
# first 20 tokens, the right completion its next 8, the wrong ones 8 random tokens. A model that has overfit that
# batch answers all four (step 0, untrained: whatever chance gives). (The scoring itself is checked exactly in
# build/test/test_hellaswag.)
/usr/bin/python3 - "$TMP/data/syn_train_000000.bin" "$TMP/hs.bin" <<'PY'
import random, struct, sys
raw = open(sys.argv[1], "rb").read()
tok = struct.unpack("<%dH" % ((len(raw) - 1024) // 2), raw[1024:])
rng = random.Random(4)
stream, longest = [], 0
for i in range(4):
    seq = tok[i * 32:i * 32 + 33]
    label = rng.randrange(4)
    comps = [[rng.randrange(1, 64) for _ in range(8)] for _ in range(4)]
    comps[label] = list(seq[20:28])
    ex = [65535, 0, i, label, 4, 20] + list(seq[:20])
    for c in comps: ex += [len(c)] + c
    ex[1] = 2 * len(ex); longest = max(longest, ex[1]); stream += ex
hdr = [20240522, 1, 4, longest] + [0] * 252
open(sys.argv[2], "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % len(stream), *stream))
PY
$BIN "${common[@]}" -b 4 -x 60 -l 1e-2 -a 1 --shuffle 0 -v 30 -m 1 --hellaswag "$TMP/hs.bin" -o "$TMP/hs" \
    >"$TMP/hs.log" 2>&1 || fail "training with --hellaswag" "$(tail -2 "$TMP/hs.log")"
/usr/bin/python3 - "$TMP/hs/metrics.jsonl" <<'PY' && pass "--hellaswag: hellaswag_acc at each -v, 1.0 after overfitting" \
    || fail "--hellaswag" "$(grep hellaswag "$TMP/hs/metrics.jsonl")"
import json, sys
acc = [(r["step"], r["hellaswag_acc"]) for r in map(json.loads, open(sys.argv[1])) if "val_loss" in r]
print(acc)
assert [s for s, _ in acc] == [0, 30, 60] and acc[-1][1] == 1.0, acc
PY
grep -q "val loss .* | hellaswag 1.0000" "$TMP/hs.log" && pass "--hellaswag on the console" || fail "--hellaswag on the console"
expect_error "--hellaswag: a bad file is refused" "bad magic" $BIN "${common[@]}" -b 4 -x 1 --hellaswag "$TMP/data/syn_val_000000.bin"
# ---- 8. scripts/autoresume.sh (the loop of scripts/run_gpt2_*.sh) ------------------------------------------------
# First attempt killed inside checkpoint 20 (a crash), second attempt finishes: exit 0, identical to ref2.
cat >"$TMP/flaky.sh" <<SH
#!/usr/bin/env bash
if [ ! -f "$TMP/flaky.once" ]; then touch "$TMP/flaky.once"; export LLMC_TEST_CRASH_IN_CHECKPOINT=20; fi
exec $BIN "\$@"
SH
RESTART_DELAY=0 bash scripts/autoresume.sh "$TMP/auto" bash "$TMP/flaky.sh" "${run2[@]}" -o "$TMP/auto" -y 1 \
    >"$TMP/auto.log" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "finished after 2 attempt(s)" "$TMP/auto.log" && same_run "$TMP/ref2" "$TMP/auto" >/dev/null \
    && pass "autoresume: crash, restart, finished identically" || fail "autoresume" "status $rc: $(tail -3 "$TMP/auto.log")"
# A non-restartable error (no progress, the trainer's error line) stops the loop at once.
RESTART_DELAY=0 bash scripts/autoresume.sh "$TMP/auto_bad" $BIN "${run2[@]}" -l -1 -o "$TMP/auto_bad" -y 1 \
    >"$TMP/auto_bad.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "not retrying" "$TMP/auto_bad.log" && [ ! -f "$TMP/auto_bad/attempt_2.log" ] \
    && pass "autoresume: a bad flag is not retried" || fail "autoresume: a bad flag" "status $rc: $(tail -3 "$TMP/auto_bad.log")"
finish
