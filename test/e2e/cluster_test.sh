#!/usr/bin/env bash
# Cluster life (docs/checkpoints.md, docs/distributed.md): each case ends in a clean refusal or a correct result.
#   L. one writer per output directory: a second trainer on a locked -o stops at once, naming the holder
#   R. the ranks agree before step 1: mpirun with per-rank -e, -l, -b, --seed, -o stops before step 1, naming the
#      item, with nothing written
#   P. preemption: a signal finishes the step, every rank saves it, exit status 75; -y 1 then ends exactly like an
#      uninterrupted run; a second signal stops at once and leaves the earlier checkpoints intact; Ctrl-C to mpirun
#   A. scripts/autoresume.sh forwards a signal, waits, leaves no trainer behind, keeps every earlier log
#   M. metrics.jsonl on a full disk: never half a line
#   T. the tools: generate's stray words, export_hf and write-table overwrites, prepare_data on compressed or binary
#      input, a FIFO as -e, -i, -j
# Signals are sent once the run says it is waiting for one (LLMC_TEST_WAIT_FOR_SIGNAL, llmc/preemption.h): no
# timing assumption, however loaded the machine.
# TOOL_DIR: where the binaries are (make asan: build-asan/bin).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TOOLS=${TOOL_DIR:-.}
BIN=$TOOLS/train_gpt2_cpu
TMP=$(test_tmp_dir cluster)
export OMP_NUM_THREADS=1
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 >/dev/null || { fail "make shards"; finish; }
common=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=32,V=64" -t 32 -s 0
        --threads 1 -l 3e-3 -b 4 -x 12 -v 4 -m 1 -n 4)
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)

steps_of() { /usr/bin/python3 -c "
import json, sys
print(' '.join(str(r['step']) for r in map(json.loads, open(sys.argv[1])) if 'train_loss' in r))" "$1"; }
# wait_for LOG PATTERN PID: until LOG has a line matching PATTERN (true), or PID has ended (false).
wait_for() {
    until grep -q -- "$2" "$1" 2>/dev/null; do kill -0 "$3" 2>/dev/null || return 1; sleep 0.05; done
}
# waiting_pid LOG: the PID the test hook printed.
waiting_pid() { sed -n 's/^LLMC_TEST_WAIT_FOR_SIGNAL: .*(pid \([0-9]*\)).*/\1/p' "$1" | head -1; }
same_run() { /usr/bin/python3 test/helpers/same_run.py "$@" >/dev/null 2>&1; }

$BIN "${common[@]}" -o "$TMP/ref" >"$TMP/ref.log" 2>&1 || { fail "reference run" "$(tail -2 "$TMP/ref.log")"; finish; }

# ---- P. preemption, one process -------------------------------------------------------------------------------
# SIGTERM while step 6 runs: step 6 is finished and saved (not only checkpoint 4), exit 75, and -y 1 goes on from 7.
d=$TMP/p1
LLMC_TEST_WAIT_FOR_SIGNAL=0:6 $BIN "${common[@]}" -o "$d" >"$d.log" 2>&1 &
pid=$!
wait_for "$d.log" "waits for a signal" $pid && kill -TERM $pid
wait $pid; rc=$?
[ $rc -eq 75 ] && grep -q "^preempted  by SIGTERM here after step 6 of 12: every rank saved it in $d/ckpt_00000006; exiting with status 75" "$d.log" \
    && [ -f "$d/ckpt_00000006/meta.json" ] && [ "$(steps_of "$d/metrics.jsonl")" = "1 2 3 4 5 6" ] \
    && pass "P1 SIGTERM during step 6: the step is finished and saved, exit 75, the message names the checkpoint" \
    || fail "P1 SIGTERM" "status $rc: $(tail -3 "$d.log")"
$BIN "${common[@]}" -o "$d" -y 1 >"$d.resume.log" 2>&1 && grep -q "^resume .*ckpt_00000006: step 6" "$d.resume.log" \
    && same_run "$TMP/ref" "$d" \
    && pass "P1 ... -y 1 starts at step 7 and ends bit-identical to the uninterrupted run" \
    || fail "P1 resume" "$(grep -m2 -e resume -e error "$d.resume.log")"
# --preempt-signal: SIGUSR1 (sbatch --signal=USR1@...) saves too; SIGUSR2 does not by default (the shell's default
# action ends the process).
d=$TMP/p2
LLMC_TEST_WAIT_FOR_SIGNAL=0:3 $BIN "${common[@]}" -o "$d" >"$d.log" 2>&1 &
pid=$!
wait_for "$d.log" "waits for a signal" $pid && kill -USR1 $pid
wait $pid; rc=$?
[ $rc -eq 75 ] && grep -q "^preempted  by SIGUSR1 here after step 3" "$d.log" && [ -f "$d/ckpt_00000003/meta.json" ] \
    && pass "P2 SIGUSR1 (the default --preempt-signal) saves and exits 75" || fail "P2 SIGUSR1" "status $rc: $(tail -2 "$d.log")"
d=$TMP/p3
LLMC_TEST_WAIT_FOR_SIGNAL=0:3 $BIN "${common[@]}" --preempt-signal USR2 -o "$d" >"$d.log" 2>&1 &
pid=$!
wait_for "$d.log" "waits for a signal" $pid && kill -USR2 $pid
wait $pid; rc=$?
[ $rc -eq 75 ] && [ -f "$d/ckpt_00000003/meta.json" ] && pass "P3 --preempt-signal USR2" || fail "P3 --preempt-signal USR2" "status $rc"
# Two signals (SIGINT and SIGTERM, both pending at once): the second ends the process at once, by its signal, with no
# checkpoint of step 6; checkpoint 4 stays intact and -y 1 still ends bit-identical.
d=$TMP/p4
LLMC_TEST_WAIT_FOR_SIGNAL=0:6 $BIN "${common[@]}" -o "$d" >"$d.log" 2>&1 &
pid=$!
wait_for "$d.log" "waits for a signal" $pid && kill -INT $pid && kill -TERM $pid
wait $pid; rc=$?
{ [ $rc -eq 130 ] || [ $rc -eq 143 ]; } && [ ! -f "$d/ckpt_00000006/meta.json" ] && [ -f "$d/ckpt_00000004/meta.json" ] \
    && pass "P4 a second signal stops at once (status $rc), no checkpoint of the step" \
    || fail "P4 second signal" "status $rc: $(tail -2 "$d.log")"
$BIN "${common[@]}" -o "$d" -y 1 >"$d.resume.log" 2>&1 && grep -q "^resume .*ckpt_00000004" "$d.resume.log" \
    && same_run "$TMP/ref" "$d" && pass "P4 ... -y 1 from checkpoint 4 ends bit-identical" \
    || fail "P4 resume" "$(grep -m2 -e resume -e error "$d.resume.log")"

# ---- L. one writer per output directory ---------------------------------------------------------------------------
# A run holds -o (waiting before step 3, no checkpoint yet); a second trainer on it, with -y 1 (a requeued job while
# the old one still runs: it used to move the live run's metrics.jsonl aside) or without, stops at once naming the
# holder, and changes nothing; the history ends with every step once.
d=$TMP/l1
LLMC_TEST_WAIT_FOR_SIGNAL=0:3 $BIN "${common[@]}" -o "$d" >"$d.log" 2>&1 &
pid=$!
if wait_for "$d.log" "waits for a signal" $pid; then
    before=$(cd "$d" && find . -type f -exec sha256sum {} + | sort -k2)
    for resume in 1 0; do
        err=$(timeout 60 $BIN "${common[@]}" -o "$d" -y $resume 2>&1 >/dev/null); rc2=$?
        [ $rc2 -ne 0 ] && [ $rc2 -ne 124 ] && [ "$(grep -c '^error: ' <<<"$err")" -eq 1 ] \
            && grep -q "^error: -o $d is in use by another trainer (PID $pid on host $(hostname); lock file $d/.lock)" <<<"$err" \
            && pass "L1 a second trainer (-y $resume) on a locked -o stops at once, naming the holder's PID and host" \
            || fail "L1 second trainer -y $resume" "status $rc2: $err"
    done
    [ "$before" = "$(cd "$d" && find . -type f -exec sha256sum {} + | sort -k2)" ] \
        && pass "L1 ... and nothing in -o changed" || fail "L1 -o changed under the running trainer"
    kill -TERM $pid
fi
wait $pid; rc=$?
$BIN "${common[@]}" -o "$d" -y 1 >"$d.resume.log" 2>&1 && [ "$(steps_of "$d/metrics.jsonl")" = "$(seq -s ' ' 1 12)" ] \
    && same_run "$TMP/ref" "$d" && pass "L1 ... the holder saved (status $rc), -y 1 finished: steps 1..12 once, bit-identical" \
    || fail "L1 history" "status $rc; steps $(steps_of "$d/metrics.jsonl")"
# A run that died (SIGKILL) holds nothing: the kernel released its lock, -y 1 goes on.
d=$TMP/l2
LLMC_TEST_WAIT_FOR_SIGNAL=0:2 $BIN "${common[@]}" -o "$d" >"$d.log" 2>&1 &
pid=$!
wait_for "$d.log" "waits for a signal" $pid && kill -KILL $pid
{ wait $pid; } 2>/dev/null  # (no "Killed" line)
$BIN "${common[@]}" -o "$d" -y 1 >"$d.resume.log" 2>&1 && same_run "$TMP/ref" "$d" \
    && pass "L2 the lock of a killed trainer is gone with it: -y 1 runs (no checkpoint yet: afresh), identical" \
    || fail "L2 after SIGKILL" "$(tail -2 "$d.resume.log")"

# ---- A. scripts/autoresume.sh -------------------------------------------------------------------------------------
# An earlier job's attempt_1.log is there; SIGTERM to the script (not to the trainer) while step 6 runs: it is
# forwarded (as SIGUSR1), the trainer saves step 6 and exits 75, the script exits 75 (requeue) and no trainer is left after 10 s;
# its log is attempt_2.log, attempt_1.log is intact. The next job finishes the run bit-identically.
d=$TMP/a1
mkdir -p "$d" && echo "an earlier job's log" >"$d/attempt_1.log"
LLMC_TEST_WAIT_FOR_SIGNAL=0:6 RESTART_DELAY=0 bash scripts/autoresume.sh "$d" $BIN "${common[@]}" -o "$d" -y 1 >"$d.out" 2>&1 &
apid=$!
wait_for "$d/attempt_2.log" "waits for a signal" $apid && kill -TERM $apid
wait $apid; rc=$?
left=1
for _ in $(seq 100); do
    ps -eo args | grep -F -- "-o $d " | grep -qv grep || { left=0; break; }
    sleep 0.1
done
[ $rc -eq 75 ] && [ $left -eq 0 ] && grep -q "^preempted  by SIGUSR1 here after step 6" "$d/attempt_2.log" \
    && pass "A1 autoresume.sh killed with SIGTERM: forwarded, step 6 saved, exit 75, no trainer left within 10 s" \
    || fail "A1 autoresume.sh SIGTERM" "status $rc, trainer left: $left: $(tail -3 "$d.out")"
[ "$(cat "$d/attempt_1.log")" = "an earlier job's log" ] && pass "A1 ... the earlier job's attempt_1.log is intact" \
    || fail "A1 attempt_1.log overwritten"
RESTART_DELAY=0 bash scripts/autoresume.sh "$d" $BIN "${common[@]}" -o "$d" -y 1 >"$d.out2" 2>&1 \
    && grep -q "^resume .*ckpt_00000006: step 6" "$d/attempt_3.log" && same_run "$TMP/ref" "$d" \
    && pass "A1 ... the next job (attempt_3.log) resumes from step 6 and ends bit-identical" \
    || fail "A1 next job" "$(tail -3 "$d.out2")"

# ---- M. metrics.jsonl never holds half a line ---------------------------------------------------------------------
# A file-size limit (ulimit -f, with SIGXFSZ ignored: writes past it fail like on a full disk, the first one part-way)
# stops the run with an error; every line of metrics.jsonl is whole JSON. The lines' lengths vary with their timings,
# so now and then whole lines fill the 2048 bytes exactly and the failing write is the next one's first byte.
d=$TMP/m1
mkdir -p "$d"
err=$( (trap '' XFSZ; ulimit -f 2; exec $BIN "${common[@]}" -x 40 -n 0 -o "$d") 2>&1 >/dev/null); rc=$?
size=$(stat -c %s "$d/metrics.jsonl" 2>/dev/null || echo 0)
[ $rc -ne 0 ] && grep -q "^error: $d/metrics.jsonl: write failed (File too large); the file is as it was before this line" <<<"$err" \
    && [ "$size" -gt 0 ] && [ "$size" -le 2048 ] && [ "$(tail -c 1 "$d/metrics.jsonl" | od -An -c | tr -d ' ')" = '\n' ] \
    && /usr/bin/python3 -c "import json, sys; [json.loads(l) for l in open(sys.argv[1])]" "$d/metrics.jsonl" \
    && pass "M1 a metrics write that fails part-way is cut back out: $size bytes of whole lines" \
    || fail "M1 metrics.jsonl on a full disk" "status $rc, $size bytes: $err"

# ---- T. tools refuse what they would misread ----------------------------------------------------------------------
refuses "T1 generate refuses an unquoted prompt's other words" "unexpected argument 'jury'" \
    $TOOLS/generate -e "$TMP/ref/model.bin" -p The jury said -n 4
mkdir -p "$TMP/hf"
$TOOLS/export_hf "$TMP/ref/model.bin" "$TMP/hf" >/dev/null || fail "T2 export_hf"
before=$(sha256sum "$TMP/hf"/*)
refuses "T2 export_hf refuses to overwrite an earlier export" "$TMP/hf/model.safetensors exists; export_hf does not overwrite" \
    $TOOLS/export_hf "$TMP/ref/ckpt_00000004/model.bin" "$TMP/hf"
[ "$before" = "$(sha256sum "$TMP/hf"/*)" ] && pass "T2 ... and left it as it was" || fail "T2 the export changed"
$TOOLS/export_hf --force "$TMP/ref/ckpt_00000004/model.bin" "$TMP/hf" >/dev/null && [ "$before" != "$(sha256sum "$TMP/hf"/*)" ] \
    && pass "T2 ... --force replaces it" || fail "T2 --force"
if gpt2_vocab; then
    echo "not a table" >"$TMP/table.bin"
    refuses "T3 gpt2_tokenizer write-table refuses to overwrite a file" "$TMP/table.bin exists; write-table does not overwrite" \
        $TOOLS/gpt2_tokenizer write-table "$TMP/table.bin"
    [ "$(cat "$TMP/table.bin")" = "not a table" ] && $TOOLS/gpt2_tokenizer write-table --force "$TMP/table.bin" 2>/dev/null \
        && [ "$(head -c 4 "$TMP/table.bin" | od -An -tu4 | tr -d ' ')" = 20240328 ] \
        && pass "T3 ... kept it; --force replaces it with a decode table" || fail "T3 write-table --force"
else
    skip "T3 write-table" "no data/gpt2, and dev/data/fetch_tokenizer.sh cannot fetch it"
fi
mkdir -p "$TMP/text" && printf 'Some text.\n' >"$TMP/text/doc.txt" && gzip -k "$TMP/text/doc.txt"
refuses "T4 prepare_data refuses a .gz input" "$TMP/text/doc.txt.gz: a gzip-compressed file (decompress it first: gunzip -k), not text" \
    $TOOLS/prepare_data -q -o "$TMP/t4" "$TMP/text/doc.txt.gz"
refuses "T4 ... inside an input directory too" "doc.txt.gz: a gzip-compressed file" $TOOLS/prepare_data -q -o "$TMP/t4" "$TMP/text"
head -c 3000 "$BIN" >"$TMP/binary.dat"
refuses "T4 ... and a binary file (NUL bytes)" "$TMP/binary.dat: a binary file (it holds NUL bytes; text never does), not text" \
    $TOOLS/prepare_data -q -o "$TMP/t4" "$TMP/binary.dat"
[ -e "$TMP/t4" ] && fail "T4 prepare_data wrote $TMP/t4" || pass "T4 ... nothing written"
mkfifo "$TMP/fifo.bin"
refuses "T5 -e naming a FIFO is refused before it is opened (it hung)" "$TMP/fifo.bin: a FIFO (named pipe), expected a regular file" \
    timeout 30 $BIN -e "$TMP/fifo.bin" -i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -t 32 -x 1
refuses "T5 ... -i naming a FIFO" "$TMP/fifo.bin: a FIFO (named pipe), expected a regular file" \
    timeout 30 $BIN "${common[@]}" -n 0 -i "$TMP/fifo.bin"
refuses "T5 ... -j naming a FIFO" "$TMP/fifo.bin: a FIFO (named pipe), expected a regular file" \
    timeout 30 $BIN "${common[@]}" -n 0 -j "$TMP/fifo.bin"
refuses "T5 ... generate -e naming a FIFO" "$TMP/fifo.bin: a FIFO (named pipe), expected a regular file" \
    timeout 30 $TOOLS/generate -e "$TMP/fifo.bin"

if ! command -v mpirun >/dev/null; then skip "R and P5 mpirun cases" "mpirun not found"; finish; fi

# ---- R. the ranks agree before step 1 -----------------------------------------------------------------------------
# disagree NAME WANT DIR ARGS-RANK-0 -- ARGS-RANK-1: mpirun -np 1 ... : -np 1 ... stops within 60 s with an error
# line containing WANT, before step 1 (no step line), and writes nothing (DIR, the -o of both, does not exist).
disagree() {
    local n="$1" want="$2" dir="$3"; shift 3
    local a=() b=() side=a x
    for x in "$@"; do
        if [ "$x" = "--" ]; then side=b; elif [ $side = a ]; then a+=("$x"); else b+=("$x"); fi
    done
    local out rc
    out=$(timeout -k 5 60 "${MPI[@]}" -np 1 $BIN "${a[@]}" : -np 1 $BIN "${b[@]}" 2>&1); rc=$?
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ $rc -eq 137 ]; then fail "$n" "status $rc: $(grep -v '^ ' <<<"$out" | tail -3)"
    elif ! grep '^error: ' <<<"$out" | grep -qF -- "$want"; then fail "$n" "no error line with '$want': $(grep -m2 '^error' <<<"$out")"
    elif grep -q '^step ' <<<"$out"; then fail "$n" "a step ran: $(grep -m1 '^step ' <<<"$out")"
    elif [ -e "$dir" ]; then fail "$n" "$dir was written"
    else pass "$n"; fi
}
mp=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -t 32 -s 0 --threads 1 -b 2 -x 4 -v 2 -m 1 -n 2)
e=(-e "L=2,NH=2,C=32,T=32,V=64")
disagree "R1 per-rank -e of other shapes (it crashed in the gradient reduction)" \
    "the ranks disagree on -e (the model): rank 0 has L=2 NH=2 C=32 maxT=32 V=64 Vp=128 (a fresh GPT-2 initialisation), rank 1 has L=3" \
    "$TMP/r1" "${mp[@]}" "${e[@]}" -o "$TMP/r1" -- "${mp[@]}" -e "L=3,NH=2,C=32,T=32,V=64" -o "$TMP/r1"
disagree "R2 per-rank -e: two model files of the same shape (it trained a mix of both)" \
    "the ranks disagree on -e (the model): rank 0 has L=2 NH=2 C=32 maxT=32 V=64 Vp=128 (a model file, crc32c" \
    "$TMP/r2" "${mp[@]}" -e "$TMP/ref/model.bin" -o "$TMP/r2" -- "${mp[@]}" -e "$TMP/ref/ckpt_00000004/model.bin" -o "$TMP/r2"
disagree "R3 per-rank -l" "the ranks disagree on -l: rank 0 has 0.00300000003, rank 1 has 0.00100000005" \
    "$TMP/r3" "${mp[@]}" "${e[@]}" -l 3e-3 -o "$TMP/r3" -- "${mp[@]}" "${e[@]}" -l 1e-3 -o "$TMP/r3"
disagree "R4 per-rank -b" "the ranks disagree on -b: rank 0 has 2, rank 1 has 1" \
    "$TMP/r4" "${mp[@]}" "${e[@]}" -o "$TMP/r4" -- "${mp[@]}" "${e[@]}" -b 1 -o "$TMP/r4"
disagree "R5 per-rank --seed" "the ranks disagree on --seed: rank 0 has 1337, rank 1 has 7" \
    "$TMP/r5" "${mp[@]}" "${e[@]}" -o "$TMP/r5" -- "${mp[@]}" "${e[@]}" --seed 7 -o "$TMP/r5"
# (The message shows a long path's first characters and a checksum, so only its start is expected: the clone's
# folder decides the path's length.)
disagree "R6 per-rank -o" "the ranks disagree on -o: rank 0 has '${TMP:0:20}" \
    "$TMP/r6a" "${mp[@]}" "${e[@]}" -o "$TMP/r6a" -- "${mp[@]}" "${e[@]}" -o "$TMP/r6b"
[ -e "$TMP/r6b" ] && fail "R6 $TMP/r6b was written" || pass "R6 ... neither -o was created"
# The same -o name, other contents (node-local disks; here: a relative -o in each rank's own working directory): the
# ranks must see the same checkpoints before one is resumed.
mkdir -p "$TMP/r7a/out" "$TMP/r7b/out" && cp -r "$TMP/ref/ckpt_00000004" "$TMP/ref/metrics.jsonl" "$TMP/r7a/out/" \
    && cp -r "$TMP/ref/ckpt_00000004" "$TMP/ref/ckpt_00000008" "$TMP/ref/metrics.jsonl" "$TMP/r7b/out/"
before=$(cd "$TMP" && find r7a r7b -type f -exec sha256sum {} + | sort -k2)
abs=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
out=$(timeout -k 5 60 "${MPI[@]}" -np 1 -wdir "$TMP/r7a" "$abs" "${common[@]}" -b 2 -d 128 -o out -y 1 : \
      -np 1 -wdir "$TMP/r7b" "$abs" "${common[@]}" -b 2 -d 128 -o out -y 1 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "^error: the ranks disagree on the checkpoints in -o: rank 0 has 1 checkpoint(s), the newest of step 4, digest .*, rank 1 has 2 checkpoint(s), the newest of step 8" <<<"$out" \
    && ! grep -q '^step ' <<<"$out" && pass "R7 the same -o with other checkpoints on each rank: refused before step 1" \
    || fail "R7 per-rank checkpoints" "status $rc: $(grep -m2 -e '^error' -e '^step' <<<"$out")"
[ "$before" = "$(cd "$TMP" && find r7a r7b -type f ! -name .lock -exec sha256sum {} + | sort -k2)" ] \
    && pass "R7 ... and neither -o changed" || fail "R7 -o changed"

# Flags that change the arithmetic or the handling of signals: mixed reduce dtypes trained a model neither run's (and
# are undefined behaviour on NCCL); with USR1 saving on one rank and not on the other, the preemption signal killed
# the second rank (no checkpoint, exit 138).
disagree "R8 per-rank --reduce-dtype" "the ranks disagree on --reduce-dtype: rank 0 has 'fp32', rank 1 has 'bf16'" \
    "$TMP/r8" "${mp[@]}" "${e[@]}" -o "$TMP/r8" -- "${mp[@]}" "${e[@]}" --reduce-dtype bf16 -o "$TMP/r8"
disagree "R9 per-rank --preempt-signal" "the ranks disagree on --preempt-signal: rank 0 has 'SIGUSR1', rank 1 has 'none'" \
    "$TMP/r9" "${mp[@]}" "${e[@]}" -o "$TMP/r9" -- "${mp[@]}" "${e[@]}" --preempt-signal none -o "$TMP/r9"
disagree "R10 per-rank --classifier-chunk" "the ranks disagree on --classifier-chunk: rank 0 has 4096, rank 1 has 64" \
    "$TMP/r10" "${mp[@]}" "${e[@]}" -o "$TMP/r10" -- "${mp[@]}" "${e[@]}" --classifier-chunk 64 -o "$TMP/r10"

# ---- P5. preemption under mpirun -------------------------------------------------------------------------------
# SIGTERM to rank 1 of 3 only, while step 3 runs: the other ranks learn it at the step's end, every rank writes its
# part of checkpoint 3 (one optimizer file per rank, meta.json), the job exits 75, and -y 1 resumes exactly.
m=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=32,V=64" -t 32 -s 0 --threads 1
   -l 3e-3 -b 1 -d 96 -x 6 -v 3 -m 1 -n 4)
"${MPI[@]}" -np 3 $BIN "${m[@]}" -o "$TMP/p5ref" >"$TMP/p5ref.log" 2>&1 || fail "P5 reference" "$(tail -2 "$TMP/p5ref.log")"
d=$TMP/p5
"${MPI[@]}" -x LLMC_TEST_WAIT_FOR_SIGNAL=1:3 -np 3 $BIN "${m[@]}" -o "$d" >"$d.log" 2>&1 &
pid=$!
wait_for "$d.log" "waits for a signal" $pid && kill -TERM "$(waiting_pid "$d.log")"
wait $pid; rc=$?
files=$(cd "$d/ckpt_00000003" 2>/dev/null && ls | tr '\n' ' ')
[ $rc -eq 75 ] && [ "$files" = "meta.json model.bin optim_00000.bin optim_00001.bin optim_00002.bin " ] \
    && grep -q "^preempted  by a signal on another rank after step 3 of 6: every rank saved it" "$d.log" \
    && pass "P5 mpirun -np 3, SIGTERM to rank 1: every rank saved step 3, exit 75" \
    || fail "P5 mpirun preemption" "status $rc, files '$files': $(grep -m3 -e preempted -e error "$d.log")"
"${MPI[@]}" -np 3 $BIN "${m[@]}" -o "$d" -y 1 >"$d.resume.log" 2>&1 && grep -q "^resume .*ckpt_00000003: step 3" "$d.resume.log" \
    && same_run "$TMP/p5ref" "$d" && pass "P5 ... -y 1 resumes from step 3 and ends bit-identical" \
    || fail "P5 resume" "$(grep -m2 -e resume -e error "$d.resume.log")"

# ---- P6. Ctrl-C to mpirun ---------------------------------------------------------------------------------------
# SIGINT to mpirun (a Ctrl-C in its terminal): Open MPI sends every rank SIGTERM, they save step 3 and say where the
# SIGTERM came from; mpirun's own status is 1 (a job it was told to end). SIGUSR1 to mpirun is forwarded as SIGUSR1:
# the same save, and mpirun exits with the ranks' 75.
for sig in INT USR1; do
    d=$TMP/p6_$sig
    "${MPI[@]}" -x LLMC_TEST_WAIT_FOR_SIGNAL=0:3 -np 3 $BIN "${m[@]}" -o "$d" >"$d.log" 2>&1 &
    pid=$!
    wait_for "$d.log" "waits for a signal" $pid && kill -$sig $pid
    wait $pid; rc=$?
    files=$(cd "$d/ckpt_00000003" 2>/dev/null && ls | tr '\n' ' ')
    if [ $sig = INT ]; then want_rc=1 want="preempted  by SIGTERM here (from mpirun: a Ctrl-C or a SIGTERM to it) after step 3"
    else want_rc=75 want="preempted  by SIGUSR1 here after step 3"; fi
    [ $rc -eq $want_rc ] && [ "$files" = "meta.json model.bin optim_00000.bin optim_00001.bin optim_00002.bin " ] \
        && grep -qF "$want" "$d.log" && pass "P6 SIG$sig to mpirun: every rank saved step 3, mpirun exits $rc" \
        || fail "P6 SIG$sig to mpirun" "status $rc, files '$files': $(grep -m2 -e preempted -e error "$d.log")"
done
finish
