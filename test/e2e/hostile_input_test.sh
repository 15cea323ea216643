#!/usr/bin/env bash
# The tools used as a careless or hostile user would: every case ends in a clean refusal (non-zero exit
# and an "error: " line naming the file, flag, field or rank) or in a correct result, and no earlier run's file is
# lost (the files' contents are compared before and after). The mpirun cases finish in seconds: the watchdog's
# timeout is set low (--comm-timeout / LLMC_COMM_TIMEOUT).
#   A. the output directory: a fresh run never truncates or overwrites an earlier run; --start-over moves it aside
#   B. meta.json: its checksum, and every field checked against the run; an invalid checkpoint falls back to the
#      previous one (and the run then ends bit-identical to an uninterrupted one), another run's is refused
#   C. no hangs: ranks with different data are refused before step 1; a stopped rank stops the job, named
#   D. token shards: out-of-vocabulary ids found when the shards are opened (shard and offset named); bad headers
#   E. vocabulary files: anything but GPT-2's exact vocabulary is refused (a vocab.bpe cut at a line boundary)
#   F. prepare_data never reads its own output or any shard as text
#   G. generate: the model's vocabulary is checked before printing; a failed write is an error
#   H. model headers whose byte count wraps size_t
# TOOL_DIR / BUILD_DIR: where the binaries and the test binaries are (make asan: build-asan/bin, build-asan).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TOOLS=${TOOL_DIR:-.}
BIN=$TOOLS/train_gpt2_cpu
SIM=${BUILD_DIR:-build}/train_gpt2_sim
TMP=$(test_tmp_dir hostile)  # absolute: the left-behind-process check below matches it
export OMP_NUM_THREADS=1
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 >/dev/null || { fail "make shards"; finish; }
common=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=32,V=64" -t 32 -s 0
        --threads 1 -l 3e-3 -b 4)
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)

# refuses NAME WANT CMD...: CMD exits non-zero, and its stderr has exactly one "error: " line, which contains WANT.
refuses() {
    local n="$1" want="$2"; shift 2
    local err rc lines
    err=$("$@" 2>&1 >/dev/null); rc=$?
    lines=$(grep -c '^error: ' <<<"$err")
    if [ $rc -eq 0 ]; then fail "$n" "exited 0, expected a refusal"
    elif [ "$lines" -ne 1 ]; then fail "$n" "$lines 'error: ' lines (status $rc): $(head -c 400 <<<"$err")"
    elif ! grep '^error: ' <<<"$err" | grep -qF -- "$want"; then fail "$n" "the error lacks '$want': $(grep '^error: ' <<<"$err" | head -c 400)"
    else pass "$n"; fi
}
# contents DIR: the sorted checksums of every file below DIR, whatever their names (a file moved aside keeps its
# line): "no file of the earlier run is lost or changed" is contents-before == contents-after. The output
# directory's lock file (.lock, llmc/run_lock.h: the PID of its last holder) is no part of a run.
contents() { find "$1" -type f ! -name .lock -exec sha256sum {} + | cut -d' ' -f1 | sort; }
# tree DIR: names and checksums (nothing moved, nothing changed).
tree() { (cd "$1" && find . -type f ! -name .lock -exec sha256sum {} + | sort -k2); }
steps_of() { /usr/bin/python3 -c "
import json, sys
print(' '.join(str(r['step']) for r in map(json.loads, open(sys.argv[1])) if 'train_loss' in r))" "$1"; }

# ---- A. the output directory -------------------------------------------------------------------------------------
$BIN "${common[@]}" -x 12 -v 4 -m 1 -n 4 -o "$TMP/ref" >"$TMP/ref.log" 2>&1 || { fail "reference run" "$(tail -2 "$TMP/ref.log")"; finish; }
cp -r "$TMP/ref" "$TMP/a1"
before=$(tree "$TMP/a1")
# No -y, -n 0 (an earlier refusal needed -n > 0, so this truncated metrics.jsonl and overwrote model.bin).
refuses "A1 a fresh run (-n 0) into an earlier run's -o is refused, naming -y 1 and --start-over" \
    "holds an earlier run (metrics.jsonl, model.bin and 3 checkpoint(s) (ckpt_00000004 ... ckpt_00000012)): resume it with -y 1" \
    $BIN "${common[@]}" -x 5 -v 0 -o "$TMP/a1"
[ "$before" = "$(tree "$TMP/a1")" ] && pass "A1 ... and nothing in -o changed" || fail "A1 -o changed"
mkdir -p "$TMP/a2" && cp "$TMP/ref/metrics.jsonl" "$TMP/ref/model.bin" "$TMP/a2/"
before=$(tree "$TMP/a2")
refuses "A2 an -o with only metrics.jsonl and model.bin (a run without checkpoints) is refused too" \
    "holds an earlier run (metrics.jsonl, model.bin)" $BIN "${common[@]}" -x 5 -v 0 -o "$TMP/a2"
[ "$before" = "$(tree "$TMP/a2")" ] && pass "A2 ... and nothing in -o changed" || fail "A2 -o changed"
# --start-over: the earlier files are moved into previous_<time>/ (renamed, contents intact); a fresh history.
before=$(contents "$TMP/a1")
if $BIN "${common[@]}" -x 5 -v 0 -o "$TMP/a1" --start-over >"$TMP/a3.log" 2>&1 && grep -q "^note .*moved into $TMP/a1/previous_" "$TMP/a3.log"; then
    pass "A3 --start-over starts afresh and says where the earlier run went"
else
    fail "A3 --start-over" "$(tail -3 "$TMP/a3.log")"
fi
[ "$before" = "$(contents "$TMP/a1"/previous_*)" ] && pass "A3 ... every earlier file is in previous_*/, unchanged" \
    || fail "A3 earlier files lost or changed"
[ "$(steps_of "$TMP/a1/metrics.jsonl")" = "1 2 3 4 5" ] && pass "A3 ... and the new metrics.jsonl has only the new run" \
    || fail "A3 new metrics" "$(steps_of "$TMP/a1/metrics.jsonl")"
refuses "A4 -y 1 with --start-over is refused" "--start-over and -y 1 exclude each other" \
    $BIN "${common[@]}" -x 5 -o "$TMP/a1" -y 1 --start-over
# -y 1 with nothing to resume (a crash before the first checkpoint): the earlier files go aside, not overwritten.
before=$(contents "$TMP/a2")
$BIN "${common[@]}" -x 3 -v 0 -o "$TMP/a2" -y 1 >"$TMP/a5.log" 2>&1 && grep -q "^note .*moved into" "$TMP/a5.log" \
    && [ "$before" = "$(contents "$TMP/a2"/previous_*)" ] \
    && pass "A5 -y 1 without a checkpoint moves the earlier metrics.jsonl and model.bin aside" \
    || fail "A5 -y 1 without a checkpoint" "$(tail -3 "$TMP/a5.log")"
# What that refusal protects: a later -y 1 after a refused fresh run has every step exactly once.
cp -r "$TMP/ref" "$TMP/a6"
$BIN "${common[@]}" -x 5 -v 0 -o "$TMP/a6" >/dev/null 2>&1
$BIN "${common[@]}" -x 16 -v 4 -m 1 -n 4 -o "$TMP/a6" -y 1 >"$TMP/a6.log" 2>&1 \
    && [ "$(steps_of "$TMP/a6/metrics.jsonl")" = "$(seq -s ' ' 1 16)" ] \
    && pass "A6 refused fresh run, then -y 1: the history has steps 1..16 exactly once" \
    || fail "A6 history after -y 1" "$(steps_of "$TMP/a6/metrics.jsonl")"

# ---- B. meta.json ------------------------------------------------------------------------------------------------
# Each case edits the newest checkpoint (12) of a copy of the reference run and resumes with -y 1 to -x 12. An
# invalid checkpoint must be named (file and field) and skipped: the run goes on from checkpoint 8 and ends
# bit-identical to the reference (test/helpers/same_run.py: every loss and model.bin).
fallback_case() {  # NAME EXPECTED-STDERR PYTHON (run by test/helpers/meta_tool.py on meta.json) [raw]
    local name="$1" want="$2" code="$3" d="$TMP/b_$1"
    rm -rf "$d" && cp -r "$TMP/ref" "$d"
    if [ "${4:-}" = raw ]; then
        /usr/bin/python3 -c "import sys; p = sys.argv[1]; $code" "$d/ckpt_00000012/meta.json"
    else
        /usr/bin/python3 test/helpers/meta_tool.py "$d/ckpt_00000012/meta.json" "$code"
    fi
    $BIN "${common[@]}" -x 12 -v 4 -m 1 -n 4 -o "$d" -y 1 >"$d.log" 2>"$d.err"
    local rc=$?
    if [ $rc -eq 0 ] && grep -qF -- "$want" "$d.err" && grep -q "refusing $d/ckpt_00000012; falling back" "$d.err" \
        && grep -q "^resume .*ckpt_00000008" "$d.log" && /usr/bin/python3 test/helpers/same_run.py "$TMP/ref" "$d" >/dev/null 2>&1; then
        pass "B $name: refused naming it, resumed from 8, ended bit-identical"
    else
        fail "B $name" "status $rc: $(head -c 500 "$d.err")"
    fi
}
# Edited without fixing the checksum (each once went through: -4 read before the order vector; sequence and
# metrics_bytes silently reordered data or dropped/duplicated metrics lines).
fallback_case edited-sequence "ckpt_00000012/meta.json: checksum mismatch: crc32c" \
    "t = open(p).read(); open(p, 'w').write(t.replace('\"sequence\": 48', '\"sequence\": -4'))" raw
fallback_case edited-metrics-bytes "meta.json: checksum mismatch" \
    "import re; t = open(p).read(); open(p, 'w').write(re.sub(r'\"metrics_bytes\": (\\d+)', lambda m: '\"metrics_bytes\": %d' % (int(m.group(1)) - 200), t))" raw
fallback_case truncated-json "meta.json: not valid JSON" "t = open(p).read(); open(p, 'w').write(t[:200])" raw
# Forged: the checksum recomputed, so only the field checks stand between the file and the run.
fallback_case negative-sequence 'field "data.sequence" is -4, expected 0 ..' "m['data']['sequence'] = -4"
fallback_case wrapped-sequence "data.sequence 18446744073709551612 is out of range" "m['data']['sequence'] = 2**64 - 4"
fallback_case other-sequence 'field "data" (epoch 0, shard 0, sequence 16) is not where 12 steps leave the data (epoch 0, shard 0, sequence 48)' \
    "m['data']['sequence'] = 16"
fallback_case shard-out-of-range "data.shard 7 is out of range (the data has 1 shard(s))" "m['data']['shard'] = 7"
fallback_case mid-step 'field "data.micro_step" is 1, expected 0 .. 0' "m['data']['micro_step'] = 1"
fallback_case metrics-bytes-short "which is not the end of step 12's line" "m['metrics_bytes'] -= 7"
fallback_case metrics-bytes-earlier-line "which is not the end of step 12's line" \
    "m['metrics_bytes'] = sum(len(l) for l in open(p.replace('ckpt_00000012/meta.json', 'metrics.jsonl'), 'rb').readlines()[:3])"
fallback_case metrics-bytes-past-end "recorded metrics_bytes = 99999999" "m['metrics_bytes'] = 99999999"
fallback_case step-as-string 'field "step" is "12", expected an integer' "m['step'] = '12'"
fallback_case step-other-dir 'field "step" is 11, the directory is for step 12' "m['step'] = 11"
fallback_case guard-garbage 'field "guard": outlier detector state' "m['guard']['loss'] = [1, 2]"
fallback_case guard-nan 'field "guard": outlier detector state: value' "m['guard']['loss']['values'] = ['nan']; m['guard']['loss']['next'] = 1"
fallback_case num-params-wrap 'field "num_params" is 18446744073709551615' "m['num_params'] = 2**64 - 1"
fallback_case file-range-wrap 'field "files[1].end" is 18446744073709551615' "m['files'][1]['end'] = 2**64 - 1"
fallback_case file-range-gap "the optimizer files cover 100 of" \
    "m['files'][1]['end'] = 100; m['files'][1]['bytes'] = 1024 + 1200"
fallback_case optim-header "optim_00000.bin: bad magic" \
    "import os; q = os.path.dirname(p) + '/optim_00000.bin'; b = bytearray(open(q, 'rb').read()); b[0] ^= 1; open(q, 'wb').write(b); refresh('optim_00000.bin')"
fallback_case missing-field 'field "data" is missing' "del m['data']"
fallback_case version-1 "metadata version 1, this program reads versions 2 to 4" "m['version'] = 1"
# metrics.jsonl losing lines after the checkpoint's: the checkpoints whose lines are gone are skipped.
d="$TMP/b_metrics_cut"; rm -rf "$d" && cp -r "$TMP/ref" "$d"
head -n 11 "$TMP/ref/metrics.jsonl" >"$d/metrics.jsonl"   # up to step 8's val line: checkpoint 8's lines are all there
$BIN "${common[@]}" -x 12 -v 4 -m 1 -n 4 -o "$d" -y 1 >"$d.log" 2>"$d.err" && grep -q "^resume .*ckpt_00000008" "$d.log" \
    && grep -q "metrics.jsonl: .* bytes, but the checkpoint of step 12 recorded metrics_bytes" "$d.err" \
    && /usr/bin/python3 test/helpers/same_run.py "$TMP/ref" "$d" >/dev/null 2>&1 \
    && pass "B metrics.jsonl cut by hand: checkpoint 12 skipped (its lines are gone), resumed from 8, identical" \
    || fail "B metrics.jsonl cut" "$(head -c 400 "$d.err")"
# Every checkpoint invalid: refused, nothing changed.
d="$TMP/b_all"; rm -rf "$d" && cp -r "$TMP/ref" "$d"
for c in "$d"/ckpt_*; do /usr/bin/python3 test/helpers/meta_tool.py "$c/meta.json" "m['data']['sequence'] = -4"; done
before=$(tree "$d")
refuses "B every checkpoint invalid: refused" "none of the 3 checkpoint(s) in $d is complete, intact and valid" \
    $BIN "${common[@]}" -x 12 -v 4 -m 1 -n 4 -o "$d" -y 1
[ "$before" = "$(tree "$d")" ] && pass "B ... and nothing in -o changed" || fail "B every checkpoint invalid: -o changed"
# Another run's checkpoint (valid, but other flags or data): refused outright, naming the flag.
d="$TMP/b_other"; rm -rf "$d" && cp -r "$TMP/ref" "$d"
refuses "B resuming with another -d is refused naming -d" "this run has -d 256" \
    $BIN "${common[@]}" -d 256 -x 12 -v 4 -m 1 -n 4 -o "$d" -y 1
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data_other" --vocab 64 --seed 5 >/dev/null
refuses "B resuming on other training data is refused naming -i" "written for training data of 1 shard(s), 20000 tokens" \
    $BIN "${common[@]}" -i "$TMP/data_other/syn_train_*.bin" -x 12 -v 4 -m 1 -n 4 -o "$d" -y 1
# --shuffle 0: the edited position used to train silently on other bytes (exit 0).
$BIN "${common[@]}" --shuffle 0 -x 8 -v 0 -n 4 -o "$TMP/s_ref" >/dev/null 2>&1
d="$TMP/b_noshuffle"; rm -rf "$d" && cp -r "$TMP/s_ref" "$d"
/usr/bin/python3 test/helpers/meta_tool.py "$d/ckpt_00000008/meta.json" "m['data']['sequence'] = 20"
$BIN "${common[@]}" --shuffle 0 -x 8 -v 0 -n 4 -o "$d" -y 1 >"$d.log" 2>"$d.err" && grep -q "resume .*ckpt_00000004" "$d.log" \
    && grep -qF 'sequence 20) is not where 8 steps leave the data' "$d.err" && /usr/bin/python3 test/helpers/same_run.py "$TMP/s_ref" "$d" >/dev/null \
    && pass "B --shuffle 0: an in-range but wrong sequence is refused, the run ends identical" \
    || fail "B --shuffle 0 sequence" "$(head -c 400 "$d.err")"

# ---- C. no hangs -------------------------------------------------------------------------------------------------
# bounded NAME SECONDS WANT CMD...: CMD exits non-zero within SECONDS, an "error: " line contains WANT, and no
# process of it is left (a stopped rank included).
bounded() {
    local n="$1" limit="$2" want="$3"; shift 3
    local t0=$SECONDS out rc
    out=$(timeout -k 5 "$limit" "$@" 2>&1); rc=$?
    local took=$((SECONDS - t0)) left
    sleep 1
    left=$(ps -eo args | grep -F -- "$TMP/" | grep -v -e grep -e timeout -e mpirun | head -3)
    if [ $rc -eq 0 ]; then fail "$n" "exited 0"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then fail "$n" "still running after ${limit}s (a hang)"
    elif ! grep '^error: ' <<<"$out" | grep -qF -- "$want"; then fail "$n" "no error line with '$want': $(grep -v '^ ' <<<"$out" | head -c 600)"
    elif [ -n "$left" ]; then fail "$n" "processes left behind: $left"
    else pass "$n (status $rc after ${took}s)"; fi
}
if command -v mpirun >/dev/null; then
    # Ranks whose shards differ in size: with -x -1 they computed different step counts and one blocked forever.
    /usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data_big" --vocab 64 --train-tokens 30000 >/dev/null
    mp=(-j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=32,V=64" -t 32 -s 0 --threads 1 -b 1 -d 64 -x -1 -v 0)
    bounded "C1 ranks with differently sized shards are refused before step 1 on every rank" 60 \
        "the ranks disagree on -i (the training data): rank 0 has 1 shard(s), 20000 tokens" \
        "${MPI[@]}" -np 1 $BIN -i "$TMP/data/syn_train_*.bin" "${mp[@]}" -o "$TMP/c1" : \
                    -np 1 $BIN -i "$TMP/data_big/syn_train_*.bin" "${mp[@]}" -o "$TMP/c1"
    # A stopped rank (SIGSTOP before step 3): every other rank stops within --comm-timeout + the census, naming it.
    ma=(-i "$TMP/data/syn_train_*.bin" "${mp[@]}" -d 96 -x 10)
    bounded "C2 mpirun -np 3, rank 2 stopped: the job ends, naming rank 2 (--comm-timeout 2)" 60 \
        "rank 2 did not answer (stopped, hung or dead)" \
        "${MPI[@]}" -x LLMC_TEST_STOP_RANK=2:3 -np 3 $BIN "${ma[@]}" --comm-timeout 2 -o "$TMP/c2"
    bounded "C3 ... the timeout from LLMC_COMM_TIMEOUT, rank 0 stopped" 60 \
        "rank 0 did not answer (stopped, hung or dead)" \
        "${MPI[@]}" -x LLMC_TEST_STOP_RANK=0:2 -x LLMC_COMM_TIMEOUT=2 -np 2 $BIN "${ma[@]}" -d 64 -o "$TMP/c3"
    refuses "C4 a bad LLMC_COMM_TIMEOUT is named" "LLMC_COMM_TIMEOUT 'soon': expected seconds >= 0" \
        env LLMC_COMM_TIMEOUT=soon $BIN "${common[@]}" -x 1
    # The NCCL communicator under the simulator (NCCL over MPI): id over MPI, and through the -pf directory.
    if [ -x "$SIM" ]; then
        /usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/sdata" --vocab 64 --train-tokens 3000 --val-tokens 600 >/dev/null
        sa=(-i "$TMP/sdata/syn_train_*.bin" -j "$TMP/sdata/syn_val_*.bin" -e "L=1,NH=2,C=32,T=8,V=64" -b 1 -t 8 -d 16
            -x 6 -v 0 -s 0 --threads 1 --comm-timeout 2)
        bounded "C5 simulated NCCL, rank 1 stopped: the job ends, naming rank 1" 90 \
            "rank 1 did not answer (stopped, hung or dead)" \
            "${MPI[@]}" -x CUDA_VISIBLE_DEVICES=0 -x LLMC_TEST_STOP_RANK=1:3 -np 2 "$SIM" "${sa[@]}" -o "$TMP/c5"
        mkdir -p "$TMP/c6_rv"
        bounded "C6 ... the same with the -pi fs rendezvous (census through the -pf directory)" 90 \
            "rank 1 did not answer (stopped, hung or dead)" \
            env LLMC_RUN_ID=hostile "${MPI[@]}" -x LLMC_RUN_ID -x CUDA_VISIBLE_DEVICES=0 -x LLMC_TEST_STOP_RANK=1:3 \
                -np 2 "$SIM" "${sa[@]}" -pi fs -pf "$TMP/c6_rv" -o "$TMP/c6"
    else
        skip "C5/C6 simulated NCCL watchdog" "$SIM not built"
    fi
else
    skip "C mpirun cases" "mpirun not found"
fi

# ---- D. token shards ---------------------------------------------------------------------------------------------
# An id >= V in the second of two shards: found before step 1 (it used to stop the run mid-way when its batch came
# up, naming neither shard nor offset); under mpirun the rank that scans that shard finds it and every rank stops.
mkdir -p "$TMP/oov" && cp "$TMP/data/syn_train_000000.bin" "$TMP/oov/syn_train_000000.bin"
cp "$TMP/data/syn_train_000000.bin" "$TMP/oov/syn_train_000001.bin"
/usr/bin/python3 -c "
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[1024 + 2 * 12345:1024 + 2 * 12346] = struct.pack('<H', 64)
open(p, 'wb').write(b)" "$TMP/oov/syn_train_000001.bin"
oov_want="-i: $TMP/oov/syn_train_000001.bin: token 64 at token offset 12345 (byte 25714) is outside the model's vocabulary [0, 64)"
refuses "D1 an out-of-vocabulary token is refused at start, naming the shard and the offset" "$oov_want" \
    $BIN "${common[@]}" -i "$TMP/oov/syn_train_*.bin" -x 1 -v 0
command -v mpirun >/dev/null && bounded "D2 ... under mpirun -np 2 (rank 1 scans that shard), every rank stops" 60 "$oov_want" \
    "${MPI[@]}" -np 2 $BIN "${common[@]}" -b 1 -d 64 -i "$TMP/oov/syn_train_*.bin" -x 1 -v 0
/usr/bin/python3 - "$TMP" <<'PY'
import struct, sys
d = sys.argv[1]
good = open(d + "/data/syn_val_000000.bin", "rb").read()
open(d + "/trunc_val.bin", "wb").write(good[:-10])
open(d + "/magic_val.bin", "wb").write(struct.pack("<i", 12345) + good[4:])
hdr = list(struct.unpack("<256i", good[:1024])); hdr[2] = -5
open(d + "/neg_val.bin", "wb").write(struct.pack("<256i", *hdr) + good[1024:])
open(d + "/short_val.bin", "wb").write(good[:500])
PY
refuses "D3 a truncated shard names the file and both sizes" "trunc_val.bin: the header says 4000 tokens" \
    $BIN "${common[@]}" -j "$TMP/trunc_val.bin" -x 1
refuses "D4 a shard with a wrong magic" "magic_val.bin: bad magic 12345" $BIN "${common[@]}" -j "$TMP/magic_val.bin" -x 1
refuses "D5 a negative token count" "neg_val.bin: negative token count -5" $BIN "${common[@]}" -j "$TMP/neg_val.bin" -x 1
refuses "D6 a file shorter than the header" "short_val.bin: truncated data shard (500 bytes" \
    $BIN "${common[@]}" -j "$TMP/short_val.bin" -x 1

# ---- E. vocabulary files -----------------------------------------------------------------------------------------
if gpt2_vocab; then
    mkdir -p "$TMP/v_cut" "$TMP/v_swap" "$TMP/v_ids" "$TMP/v_fmt"
    cp data/gpt2/encoder.json "$TMP/v_cut/" && head -n 49001 data/gpt2/vocab.bpe >"$TMP/v_cut/vocab.bpe"
    refuses "E1 a vocab.bpe cut at a line boundary (it tokenized silently differently)" \
        "v_cut/vocab.bpe: 49000 merges, GPT-2's vocabulary has 50000" $TOOLS/gpt2_tokenizer encode --vocab "$TMP/v_cut" /dev/null
    cp data/gpt2/encoder.json "$TMP/v_swap/" && /usr/bin/python3 -c "
import sys
l = open('data/gpt2/vocab.bpe', encoding='utf-8').read().split('\n'); l[1000], l[30000] = l[30000], l[1000]
open(sys.argv[1], 'w', encoding='utf-8').write('\n'.join(l))" "$TMP/v_swap/vocab.bpe"
    refuses "E2 two merges swapped (same count, well-formed)" "v_swap/vocab.bpe: the merges differ from GPT-2's" \
        $TOOLS/gpt2_tokenizer encode --vocab "$TMP/v_swap" /dev/null
    cp data/gpt2/vocab.bpe "$TMP/v_ids/" && /usr/bin/python3 -c "
import json, sys
e = json.load(open('data/gpt2/encoder.json')); e['hello'], e['world'] = e['world'], e['hello']
json.dump(e, open(sys.argv[1], 'w'))" "$TMP/v_ids/encoder.json"
    refuses "E3 two token ids swapped in encoder.json" "v_ids/encoder.json: the tokens differ from GPT-2's" \
        $TOOLS/gpt2_tokenizer encode --vocab "$TMP/v_ids" /dev/null
    cp data/gpt2/vocab.bpe "$TMP/v_fmt/" && /usr/bin/python3 -c "
import json, sys
json.dump(json.load(open('data/gpt2/encoder.json')), open(sys.argv[1], 'w'), indent=2)" "$TMP/v_fmt/encoder.json"
    [ "$(echo 'Hello world' | $TOOLS/gpt2_tokenizer encode --vocab "$TMP/v_fmt")" = "15496 995 198" ] \
        && pass "E4 the same vocabulary formatted differently is accepted (the check is on the content)" \
        || fail "E4 reformatted encoder.json"
    refuses "E5 prepare_data refuses the cut vocabulary too" "49000 merges" \
        $TOOLS/prepare_data -q -o "$TMP/e5" --vocab "$TMP/v_cut" data/gpt2/vocab.bpe
else
    skip "E, F, G vocabulary files, prepare_data, generate" "no data/gpt2, and dev/data/fetch_tokenizer.sh cannot fetch it"
fi

# ---- F. prepare_data -----------------------------------------------------------------------------------------------
if [ -f data/gpt2/encoder.json ]; then
    mkdir -p "$TMP/f/in"
    for i in 1 2 3 4; do printf 'Document %s: the quick brown fox.\n' "$i" >"$TMP/f/in/d$i.txt"; done
    $TOOLS/prepare_data -q -o "$TMP/f/in/shards" --val-docs 1 "$TMP/f/in" >/dev/null 2>&1
    cp -r "$TMP/f/in/shards" "$TMP/f/first"
    $TOOLS/prepare_data -q -o "$TMP/f/in/shards" --val-docs 1 "$TMP/f/in" >/dev/null 2>"$TMP/f/second.err"
    diff -r "$TMP/f/first" "$TMP/f/in/shards" >/dev/null && grep -q "skipping $TMP/f/in/shards: it is the output directory" "$TMP/f/second.err" \
        && pass "F1 -o inside the input directory: a rerun skips its own shards (same output, not re-read as text)" \
        || fail "F1 -o inside the input" "$(cat "$TMP/f/second.err")"
    refuses "F2 -o equal to an input directory is refused" "$TMP/f/in/shards: this input is the output directory (-o)" \
        $TOOLS/prepare_data -q -o "$TMP/f/in/shards" "$TMP/f/in/shards"
    refuses "F3 a token shard given as text is refused, naming it" "$TMP/f/first/shards_train_000000.bin: a token shard, not text" \
        $TOOLS/prepare_data -q -o "$TMP/f/out3" "$TMP/f/in/d1.txt" "$TMP/f/first/shards_train_000000.bin"
    refuses "F4 ... also found inside an input directory" "a token shard, not text" \
        $TOOLS/prepare_data -q -o "$TMP/f/out4" "$TMP/f"
    err=$($TOOLS/prepare_data -q -o "$TMP/f/out5" --val-docs 1 "$TMP/f/in/d1.txt" "$TMP/f/in/d2.txt" 2>&1 >/dev/full); rc=$?
    [ $rc -ne 0 ] && grep -q "^error: stdout: write failed" <<<"$err" && pass "F5 prepare_data with its summary into /dev/full: an error" \
        || fail "F5 prepare_data into /dev/full" "status $rc: $err"
fi

# ---- G. generate -------------------------------------------------------------------------------------------------
if [ -f data/gpt2/encoder.json ]; then
    out=$($TOOLS/generate -e "$TMP/ref/model.bin" -p "Hello" -n 4 2>"$TMP/g1.err"); rc=$?
    [ $rc -ne 0 ] && [ -z "$out" ] && grep -q "^error: .*model.bin: the model's vocabulary has 64 tokens, GPT-2's tokenizer 50257" "$TMP/g1.err" \
        && pass "G1 generate on a V=64 model: refused before printing anything (it failed on EOT after the prompt)" \
        || fail "G1 generate on a V=64 model" "status $rc, stdout '$out': $(cat "$TMP/g1.err")"
    $BIN -i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=2,C=32,T=32" -b 1 -t 32 -x 1 -v 0 -s 0 \
        --threads 1 -o "$TMP/g_model" >/dev/null 2>&1
    err=$($TOOLS/generate -e "$TMP/g_model/model.bin" -p "Hello" -n 4 2>&1 >/dev/full); rc=$?
    [ $rc -ne 0 ] && grep -q "^error: stdout: write failed (No space left on device)" <<<"$err" \
        && pass "G2 generate into /dev/full: non-zero exit, stdout named" || fail "G2 generate into /dev/full" "status $rc: $err"
fi

# ---- H. model files --------------------------------------------------------------------------------------------
# A header whose parameter byte count wraps size_t: 4 * params = 2^64 + (file size - 1024). The old size check
# accepted it and the reader died in std::vector (vector::_M_default_append). A sparse file of that size is made.
/usr/bin/python3 - "$TMP/wrap.bin" <<'PY'
import struct, sys
L, NH = 4096, 1
for C in range(9_680_000, 9_700_000):  # 12 L C^2 just below 2^62, then Vp + maxT fill the gap
    t0 = L * (12 * C * C + 13 * C) + 2 * C
    if t0 > 2**62: break
    k = -(-(2**62 - t0) // C)
    if 2 <= k <= 2 * 2**24 - 2:
        vp = min(2**24, k - 1); maxT = k - vp
        total = t0 + k * C
        break
size = 1024 + (4 * total - 2**64)
hdr = [20240326, 3, maxT, 64, L, NH, C, vp] + [0] * 248
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", *hdr)); f.truncate(size)
PY
refuses "H1 a model header whose byte count wraps size_t" "parameters, more than the 2^40 this program handles" \
    $BIN -e "$TMP/wrap.bin" -i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -t 32 -x 1
refuses "H2 ... and in generate" "parameters, more than the 2^40" $TOOLS/generate -e "$TMP/wrap.bin"
printf 'not a model' >"$TMP/bad_model.bin"
refuses "H3 a model file shorter than its header" "bad_model.bin: 11 bytes is too short" \
    $BIN -e "$TMP/bad_model.bin" -i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -t 32 -x 1

# ---- I. error paths inside the training loop -------------------------------------------------------------------
# A run stopped by non-finite losses leaves through an exception after every buffer is allocated: it must free them
# (make asan runs this script with LeakSanitizer; the loss accumulator leaked here).
refuses "I1 a run stopped by --max-bad-steps exits with one error line" "2 steps in a row had a non-finite loss" \
    env LLMC_TEST_NAN_STEPS=1,2 $BIN "${common[@]}" -x 4 -v 0 --max-bad-steps 2
/usr/bin/python3 - "$TMP/hs_bad.bin" <<'PY'
import struct, sys
ex = [65535, 0, 0, 0, 4, 3, 1, 2, 3]  # delimiter, bytes (below), index 0, label 0, 4 completions, 3 context tokens
for c in range(4): ex += [2, 5, 64 if c == 2 else 6]  # completion 2 holds id 64 (V is 64)
ex[1] = 2 * len(ex)
open(sys.argv[1], "wb").write(struct.pack("<256i", *([20240522, 1, 1, ex[1]] + [0] * 252)) + struct.pack("<%dH" % len(ex), *ex))
PY
refuses "I2 a HellaSwag file with a token outside the vocabulary is refused at start" \
    "--hellaswag $TMP/hs_bad.bin: example 0 has token 64, outside the model's vocabulary [0, 64)" \
    $BIN "${common[@]}" -x 2 -v 1 -m 1 --hellaswag "$TMP/hs_bad.bin"
finish
