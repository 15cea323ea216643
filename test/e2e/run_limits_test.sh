#!/usr/bin/env bash
# The trainer at the edges of its environment (docs/checkpoints.md, README.md "Troubleshooting"):
#   K. the output directory's lock file is never written through a symbolic or hard link (it truncated the target)
#   N. the process keeps its name after re-executing itself (ps, pgrep and job scripts saw "exe")
#   M. an address-space limit (ulimit -v) ends in one error line or a finished run, never in a spin (OpenBLAS
#      retried its buffer allocation for ever inside the first sgemm)
#   W. a step that does not end after a signal: the process stops by that signal after --preempt-grace seconds,
#      the earlier checkpoints intact (`timeout` signals once)
# Signals are sent once the run says it is waiting for one (LLMC_TEST_WAIT_FOR_SIGNAL, llmc/preemption.h).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
BIN=${TOOL_DIR:-.}/train_gpt2_cpu  # TOOL_DIR: where the binaries are (make asan: build-asan/bin)
TMP=$(test_tmp_dir run_limits)
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
export OMP_NUM_THREADS=1
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 >/dev/null || { fail "make shards"; finish; }
common=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=32,V=64" -t 32 -b 4 -s 0
        --threads 1 -l 3e-3 -x 6 -v 0 -n 2)
wait_for() {  # LOG PATTERN PID: until LOG has a line matching PATTERN (true), or PID has ended (false)
    until grep -q -- "$2" "$1" 2>/dev/null; do kill -0 "$3" 2>/dev/null || return 1; sleep 0.05; done
}

# ---- K. the lock file ---------------------------------------------------------------------------------------------
$BIN "${common[@]}" -o "$TMP/other" >"$TMP/other.log" 2>&1 || { fail "a first run" "$(tail -2 "$TMP/other.log")"; finish; }
victim=$TMP/other/model.bin
before=$(sha256sum "$victim")
mkdir -p "$TMP/k1" && ln -s "$victim" "$TMP/k1/.lock"
refuses "K1 -o/.lock a symbolic link to another run's model.bin: refused" "$TMP/k1/.lock is a symbolic link: the lock file is never written through one" \
    $BIN "${common[@]}" -o "$TMP/k1"
mkdir -p "$TMP/k2" && ln "$victim" "$TMP/k2/.lock"
refuses "K2 -o/.lock a hard link to it: refused" "$TMP/k2/.lock is not a plain file of its own (a hard link)" \
    $BIN "${common[@]}" -o "$TMP/k2"
[ "$before" = "$(sha256sum "$victim")" ] && pass "K1/K2 ... and the other run's model.bin is intact" \
    || fail "K1/K2 the other run's model.bin was written"
mkdir -p "$TMP/k3" && cp -r "$TMP/other/ckpt_00000002" "$TMP/k3/" \
    && ln -s "$TMP/other/metrics.jsonl" "$TMP/k3/metrics.jsonl"
metrics_before=$(sha256sum "$TMP/other/metrics.jsonl")
refuses "K3 -y 1 with -o/metrics.jsonl a symbolic link: refused" "$TMP/k3/metrics.jsonl is a symbolic link" \
    $BIN "${common[@]}" -o "$TMP/k3" -y 1
[ "$metrics_before" = "$(sha256sum "$TMP/other/metrics.jsonl")" ] && pass "K3 ... and the file it names is not cut" \
    || fail "K3 the other run's metrics.jsonl changed"

# ---- N. the process name ------------------------------------------------------------------------------------------
LLMC_TEST_WAIT_FOR_SIGNAL=0:2 $BIN "${common[@]}" -o "$TMP/n1" >"$TMP/n1.log" 2>&1 &
pid=$!
if wait_for "$TMP/n1.log" "waits for a signal" $pid; then
    name=$(cat /proc/$pid/comm)
    [ "$name" = train_gpt2_cpu ] && pgrep -x train_gpt2_cpu | grep -qx "$pid" \
        && pass "N1 the running trainer is named train_gpt2_cpu (pgrep -x finds it)" || fail "N1 process name" "'$name'"
    kill -TERM $pid
else
    fail "N1 the trainer did not start" "$(tail -2 "$TMP/n1.log")"
fi
wait $pid

# ---- M. an address-space limit ------------------------------------------------------------------------------------
# The byte-level quickstart's shape (its first sgemm spun under 400000 and 600000 KiB; 250000 failed cleanly at the
# model's allocation). Each limit ends within 120 s: one error line about memory, or the run finished.
quick=(-i "$TMP/data256/syn_train_*.bin" -j "$TMP/data256/syn_val_*.bin" -e "L=4,NH=4,C=128,T=64,V=256" -b 32 -t 64
       -x 2 -v 0 -s 0 --threads 2)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data256" --vocab 256 >/dev/null
for kib in 250000 400000 600000; do
    out=$( (ulimit -v $kib; exec timeout -s KILL 120 $BIN "${quick[@]}") 2>&1); rc=$?
    err=$(grep '^error: ' <<<"$out")
    if [ $rc -eq 137 ]; then fail "M1 ulimit -v $kib" "still running after 120 s (killed)"
    elif [ $rc -eq 0 ] && grep -q "^step 2/2" <<<"$out"; then pass "M1 ulimit -v $kib: the run finishes"
    elif [ $rc -ne 1 ] || [ "$(grep -c '^error: ' <<<"$out")" -ne 1 ]; then fail "M1 ulimit -v $kib" "status $rc: $(tail -c 300 <<<"$out")"
    elif ! grep -q -e "^error: cpu backend: the address-space limit (ulimit -v $kib KiB)" -e "^error: cpu backend: out of memory" <<<"$err"
    then fail "M1 ulimit -v $kib" "$err"
    else pass "M1 ulimit -v $kib: one error line about memory, no spin ($(grep -o 'address-space limit\|out of memory' <<<"$err" | head -1))"; fi
done
out=$( (ulimit -v 2000000; exec timeout -s KILL 300 $BIN "${quick[@]}") 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^step 2/2" <<<"$out" && pass "M2 ulimit -v 2000000: the run finishes" \
    || fail "M2 ulimit -v 2000000" "status $rc: $(tail -2 <<<"$out")"

# ---- W. a step that does not end after the signal -----------------------------------------------------------------
d=$TMP/w1
LLMC_TEST_WAIT_FOR_SIGNAL=0:3:hang $BIN "${common[@]}" --preempt-grace 2 -o "$d" >"$d.log" 2>&1 &
pid=$!
start=$SECONDS
wait_for "$d.log" "waits for a signal" $pid && kill -TERM $pid
wait $pid; rc=$?
took=$((SECONDS - start))
[ $rc -eq 143 ] && grep -q "the step did not end within the grace time after the signal (--preempt-grace)" "$d.log" \
    && [ -f "$d/ckpt_00000002/meta.json" ] && [ ! -e "$d/ckpt_00000003" ] \
    && pass "W1 one SIGTERM, a step that never ends: stopped by SIGTERM after the grace ($took s), checkpoint 2 intact" \
    || fail "W1 watchdog" "status $rc after $took s: $(tail -3 "$d.log")"
$BIN "${common[@]}" -o "$d" -y 1 >"$d.resume.log" 2>&1 && grep -q "^resume .*ckpt_00000002: step 2" "$d.resume.log" \
    && pass "W1 ... -y 1 resumes from checkpoint 2" || fail "W1 resume" "$(grep -m2 -e resume -e error "$d.resume.log")"
finish
