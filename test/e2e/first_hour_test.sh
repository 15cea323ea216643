#!/usr/bin/env bash
# What a new user meets in the first hour, each friction checked:
#   the CUDA trainer on a machine without a GPU (the simulator answering as CUDA does there: errors 35 and 100);
#   ./train_gpt2_cpu and the CUDA build with no flags; --help naming the binary it is run as, and its defaults;
#   nanoGPT's --lr; a missing data/brown; the CPU --dry-run (host memory, a plan beyond this machine); the default -q
#   (a decaying cosine) and the printed schedule; one process: no ZeRO lines, one memory figure; the byte-level path
#   (prepare_data --bytes, training and generate with V = 256) and UTF-8-safe samples; the plot script with any
#   Python (one without matplotlib too), several runs, a missing file; install_deps.sh where the test-only
#   disassembler cannot be installed and where apt's lock is held; the quickstart's sample against an English word
#   list (when a quickstart has run).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
PY=/usr/bin/python3
TMP=$(test_tmp_dir first_hour)
BIN=./train_gpt2_cpu SIM=build/train_gpt2_sim
for b in "$BIN" "$SIM" ./prepare_data ./generate; do [ -x "$b" ] || { fail "$b" "not built"; finish; }; done

# No GPU: one line that says what to do.
for code in 35 100; do
    expect_error "no GPU (CUDA error $code): the message names ./train_gpt2_cpu" "no GPU: CUDA reports error $code" \
        env CUDASIM_NO_GPU=$code "$SIM" -e "L=1,NH=1,C=8,T=8,V=64" -x 1
done
err=$(CUDASIM_NO_GPU=35 "$SIM" -e "L=1,NH=1,C=8,T=8,V=64" -x 1 2>&1 >/dev/null)
[[ "$err" == *"use ./train_gpt2_cpu"* ]] && [ "$(wc -l <<<"$err")" -eq 1 ] \
    && pass "no GPU: one line, naming ./train_gpt2_cpu" || fail "no GPU: one line" "$err"

# No flags: a usage with examples for this build on stderr, nothing started, status 2 (a usage error). The CPU
# build's example is the quickstart's byte-level model; the CUDA build's says nothing of CPUs and names the script
# that makes its data.
out=$(top=$PWD; cd "$TMP" && timeout 20 "$top/$BIN" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && [[ "$out" == "usage: ./train_gpt2_cpu -i"* ]] && [[ "$out" == *"scripts/quickstart.sh"* ]] \
    && [[ "$out" == *'data/brown_bytes/*train*.bin'* ]] && [ -z "$(ls "$TMP")" ] \
    && pass "./train_gpt2_cpu with no flags: a usage with the quickstart's example on stderr, status 2, nothing started" \
    || fail "./train_gpt2_cpu with no flags" "status $rc: $(head -c 300 <<<"$out")"
out=$("$SIM" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && [[ "$out" != *"CPU"* ]] && [[ "$out" == *"dev/data/prepare_brown.sh"* ]] \
    && pass "the CUDA build with no flags: no word of CPUs, names dev/data/prepare_brown.sh" \
    || fail "the CUDA build with no flags" "status $rc: $(head -c 400 <<<"$out")"
# --help: every default shown once, none as ""; nanoGPT's --lr hints at -l; missing data names the script that
# makes it.
help=$("$BIN" --help)
! grep -q '(default: "")' <<<"$help" && [ "$(grep -c "one group of every rank" <<<"$help")" -eq 1 ] \
    && ! grep -q "(default: one group of every rank) (default" <<<"$help" \
    && pass "--help shows no empty defaults and no default twice" || fail "--help defaults" "$(grep -m2 'default: ""\|one group' <<<"$help")"
refuses "--lr (nanoGPT's name) hints at -l/--learning-rate" "unknown option '--lr': here it is -l/--learning-rate" \
    "$BIN" --lr 1e-3 -x 1
refuses "a missing data/brown names dev/data/prepare_brown.sh" "dev/data/prepare_brown.sh makes data/brown/" \
    "$BIN" -i "$TMP/data/brown/brown_train_*.bin" -e "L=1,NH=1,C=8,T=8,V=64" -t 8 -x 1
# The CPU --dry-run plans host memory, and says when the plan is more than this machine has (GPT-2 124M at B=64,
# T=1024 on the CPU: about 77 GiB).
out=$("$BIN" --dry-run -e d12 -b 64 -t 1024 -i x -j y 2>&1)
mem_gib=$(awk '/MemTotal/ {printf "%.2f", $2 / 1048576}' /proc/meminfo)
[[ "$out" == "host memory plan per rank:"* ]] && grep -q "^host memory per rank: " <<<"$out" \
    && pass "CPU --dry-run: a host memory plan" || fail "CPU --dry-run heading" "$(head -1 <<<"$out")"
if awk -v m="$mem_gib" 'BEGIN { exit !(m < 70) }'; then
    grep -q "^warning: 1 rank(s) of .* GiB on a node need .* GiB, this machine has $mem_gib GiB of memory" <<<"$out" \
        && pass "CPU --dry-run beyond this machine's $mem_gib GiB: a warning" || fail "CPU --dry-run warning" "$(tail -2 <<<"$out")"
else
    skip "CPU --dry-run warning" "this machine has $mem_gib GiB, more than the plan"
fi
# --help names the binary as run.
"$BIN" --help | grep -q "^  train_gpt2_cpu \[OPTION" && pass "--help of train_gpt2_cpu names train_gpt2_cpu" \
    || fail "--help names the binary" "$("$BIN" --help | sed -n 3p)"
"$SIM" --help | grep -q "^  train_gpt2_sim \[OPTION" && pass "--help of another binary names it" \
    || fail "--help names the simulator binary" "$("$SIM" --help | sed -n 3p)"

# Default -q: cosine decays to 0.1 x peak, and the schedule line says so; one process prints no ZeRO lines.
"$PY" test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 6000 --val-tokens 1000 >/dev/null
common=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=2,C=16,T=16,V=64" -b 2 -t 16 -v 0 -s 0)
if OMP_NUM_THREADS=1 "$BIN" "${common[@]}" -x 10 -l 1e-3 -k cosine -o "$TMP/sched" >"$TMP/sched.log" 2>&1; then
    grep -q "^schedule   cosine, peak 0.001: lr 0.001 at step 1, 0.000122025 at step 10 (-q 0.1: towards 0.1 x peak)" "$TMP/sched.log" \
        && pass "default -q 0.1: the printed schedule decays to 0.1 x peak" \
        || fail "printed schedule" "$(grep ^schedule "$TMP/sched.log")"
    "$PY" -c "
import json, sys
lr = [json.loads(l)['lr'] for l in open('$TMP/sched/metrics.jsonl') if '\"lr\"' in l]
sys.exit(not (len(lr) == 10 and abs(lr[0] - 1e-3) < 1e-9 and abs(lr[-1] - 1.22025e-4) < 1e-9))" \
        && pass "default -q: -k cosine is not flat (lr 1e-3 -> 1.22e-4 over 10 steps in metrics.jsonl)" || fail "-k cosine flat by default"
    ! grep -q "ZeRO stage\|sent per rank" "$TMP/sched.log" && [ "$(grep -c "MiB" "$TMP/sched.log")" -eq 1 ] \
        && pass "one process: no ZeRO lines, one memory figure" || fail "one process start-up lines" "$(grep -E "ZeRO|MiB" "$TMP/sched.log")"
else
    fail "schedule run" "$(tail -2 "$TMP/sched.log")"
fi
OMP_NUM_THREADS=1 "$BIN" "${common[@]}" -x 3 -q 1 >"$TMP/flat.log" 2>&1
grep -q "flat: -q 1 keeps the peak" "$TMP/flat.log" && pass "-q 1 with cosine is called flat" \
    || fail "-q 1 warning" "$(grep ^schedule "$TMP/flat.log")"

# The byte-level path: shards, decode table, training with V = 256, samples and generate, all valid UTF-8.
mkdir -p "$TMP/text"
printf 'Caf\xc3\xa9 au lait, na\xc3\xafve \xe2\x82\xac %s.\n' one two three four five six seven eight >"$TMP/text/a.txt"
printf 'The quick brown fox jumps over the lazy dog. %s\n' one two three four five six seven eight nine >"$TMP/text/b.txt"
if ./prepare_data --bytes -q -o "$TMP/bytes" --val-docs 1 "$TMP/text" >"$TMP/prep.log" 2>&1; then
    "$PY" -c "
import struct, sys
raw = open('$TMP/bytes/bytes_train_000000.bin', 'rb').read()
h = struct.unpack('<256i', raw[:1024]); toks = struct.unpack('<%dH' % h[2], raw[1024:])
text = open('$TMP/text/b.txt', 'rb').read()
sys.exit(not (toks[0] == 0 and bytes(toks[1:]) == text))" \
        && pass "prepare_data --bytes: EOT (0), then one token per byte" || fail "prepare_data --bytes shard"
    [ -f "$TMP/bytes/bytes_tokenizer.bin" ] && pass "prepare_data --bytes writes its decode table" \
        || fail "prepare_data --bytes decode table"
    if OMP_NUM_THREADS=1 "$BIN" -i "$TMP/bytes/*train*.bin" -j "$TMP/bytes/*val*.bin" -e "L=1,NH=2,C=16,T=32,V=256" \
            -b 2 -t 32 -x 4 -v 0 -s 2 -g 200 --tokenizer "$TMP/bytes/bytes_tokenizer.bin" -o "$TMP/byterun" >"$TMP/byterun.log" 2>&1; then
        grep -q -- "---- sample at step" "$TMP/byterun.log" && "$PY" -c "open('$TMP/byterun.log', encoding='utf-8', errors='strict').read()" \
            && pass "V = 256: training prints samples, valid UTF-8 (an untrained byte model emits invalid bytes)" \
            || fail "byte-level samples valid UTF-8" "$(grep -A2 -- '---- sample' "$TMP/byterun.log" | head -3 | od -c | head -3)"
        ./generate -e "$TMP/byterun/model.bin" -p "Caf$(printf '\xc3\xa9') " -n 300 --temperature 1.5 >"$TMP/gen.txt" 2>"$TMP/gen.err" \
            && "$PY" -c "t = open('$TMP/gen.txt', encoding='utf-8', errors='strict').read(); assert t.startswith('Caf\u00e9 ')" \
            && pass "generate with a byte model: byte prompt, valid UTF-8 output" \
            || fail "generate with a byte model" "$(cat "$TMP/gen.err")"
    else
        fail "training with V = 256" "$(tail -2 "$TMP/byterun.log")"
    fi
else
    fail "prepare_data --bytes" "$(cat "$TMP/prep.log")"
fi
printf 'a\0b' >"$TMP/nul.txt"
expect_error "prepare_data --bytes refuses a NUL byte" "holds NUL bytes" ./prepare_data --bytes -q -o "$TMP/nul" "$TMP/nul.txt"

# A python3 on PATH without matplotlib (a virtual environment): the plot script hands the plot to /usr/bin/python3.
if "$PY" -c "import matplotlib" 2>/dev/null && "$PY" -m venv --without-pip "$TMP/venv" 2>/dev/null; then
    out=$(PATH="$TMP/venv/bin:$PATH" python3 scripts/plot_metrics.py "$TMP/sched" -o "$TMP/venv.png" 2>&1)
    [ -s "$TMP/venv.png" ] && [[ "$out" == *"has no matplotlib; plotting with /usr/bin/python3"* ]] \
        && pass "plot_metrics.py from a python3 without matplotlib: plotted with /usr/bin/python3" \
        || fail "plot_metrics.py from a virtual environment" "$out"
else
    skip "plot_metrics.py from a virtual environment" "no matplotlib in $PY, or no venv module"
fi
# The plot script: any python3 on PATH (env), several runs overlaid, a missing file in one line.
if "$PY" -c "import matplotlib" 2>/dev/null; then
    out=$(PATH="$(dirname "$PY"):$PATH" python3 scripts/plot_metrics.py "$TMP/sched" "$TMP/byterun/metrics.jsonl" -o "$TMP/two.png" 2>&1)
    [ -s "$TMP/two.png" ] && [[ "$out" == *"(2 runs)"* ]] && pass "plot_metrics.py overlays two runs" \
        || fail "plot_metrics.py two runs" "$out"
    "$PY" scripts/plot_metrics.py "$TMP/sched/metrics.jsonl" "$TMP/old.png" >/dev/null 2>&1 && [ -s "$TMP/old.png" ] \
        && pass "plot_metrics.py: the old METRICS OUT_PNG form" || fail "plot_metrics.py old form"
else
    skip "plot_metrics.py drawing" "$PY has no matplotlib"
fi
err=$("$PY" scripts/plot_metrics.py "$TMP/none/metrics.jsonl" -o "$TMP/x.png" 2>&1); rc=$?
[ $rc -ne 0 ] && [ "$(wc -l <<<"$err")" -eq 1 ] && [[ "$err" == "error: $TMP/none/metrics.jsonl: cannot open"* ]] \
    && pass "plot_metrics.py: a missing file is one line, no traceback" || fail "plot_metrics.py missing file" "$err"
grep -q "for py in python3 /usr/bin/python3" scripts/quickstart.sh && grep -q "^#!/usr/bin/env python3" scripts/plot_metrics.py \
    && pass "quickstart and plot script use the Python on PATH first" || fail "quickstart: the Python on PATH is not tried first"

# install_deps.sh: a disassembler that cannot be installed (here: apt finds no Debian source) is a warning, not a
# failure; --no-test-tools (the quickstart's) does not try.
mkdir -p "$TMP/fakebin" && printf '#!/bin/sh\nexit 1\n' >"$TMP/fakebin/apt-get" && chmod +x "$TMP/fakebin/apt-get"
out=$(PATH="$TMP/fakebin:$PATH" NVDISASM_DIR="$TMP/no_nvdisasm" CUDA_DISASM_BIN=/nonexistent bash scripts/install_deps.sh 2>&1); rc=$?
[ $rc -eq 0 ] && [[ "$out" == *"warning: no SASS disassembler installed"* ]] \
    && pass "install_deps.sh: a disassembler it cannot install is a warning (exit 0)" || fail "install_deps.sh without a disassembler" "status $rc: $out"
out=$(PATH="$TMP/fakebin:$PATH" NVDISASM_DIR="$TMP/no_nvdisasm" CUDA_DISASM_BIN=/nonexistent bash scripts/install_deps.sh --no-test-tools 2>&1); rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] && pass "install_deps.sh --no-test-tools: silent, exit 0" || fail "install_deps.sh --no-test-tools" "status $rc: $out"
grep -q "install_deps.sh --no-test-tools" scripts/quickstart.sh && pass "the quickstart skips the test-only tools" \
    || fail "the quickstart installs test-only tools"
# apt's lock held by another package manager (a fresh machine's automatic updates): install_deps.sh waits for it
# (here: apt-get fails twice with apt's lock message, then works), and gives up with a hint when it stays held.
mkdir -p "$TMP/lockbin" && printf '#!/bin/sh
exit 1
' >"$TMP/lockbin/dpkg-query" && cat >"$TMP/lockbin/apt-get" <<'EOF'
#!/bin/sh
n=$(($(cat "$APT_CALLS" 2>/dev/null || echo 0) + 1)); echo $n >"$APT_CALLS"
[ "$n" -gt "$LOCKED_CALLS" ] && exit 0
echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (unattended-upgr)" >&2
exit 100
EOF
chmod +x "$TMP/lockbin/"*
out=$(PATH="$TMP/lockbin:$PATH" APT_CALLS="$TMP/calls1" LOCKED_CALLS=2 APT_LOCK_RETRY_S=0.1 bash scripts/install_deps.sh --no-test-tools 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(cat "$TMP/calls1")" -eq 4 ] && [[ "$out" == *"another package manager holds apt's lock"* ]] \
    && pass "install_deps.sh waits for apt's lock (two refusals, then update and install)" \
    || fail "install_deps.sh waits for apt's lock" "status $rc, $(cat "$TMP/calls1") calls: $out"
out=$(PATH="$TMP/lockbin:$PATH" APT_CALLS="$TMP/calls2" LOCKED_CALLS=1000 APT_LOCK_WAIT_S=1 APT_LOCK_RETRY_S=0.2 bash scripts/install_deps.sh --no-test-tools 2>&1); rc=$?
[ $rc -ne 0 ] && [[ "$out" == *"apt's lock is still held by another package manager after 1 s"* ]] \
    && pass "install_deps.sh: a lock that stays held ends with apt's message and a hint" || fail "install_deps.sh lock hint" "status $rc: $out"

# The word-share check the quickstart prints (scripts/english_words.py): English passes, letter soup does not.
printf 'The jury said that the city had a good record of the election, and that the men who ran it did their work well. %s\n' \
    "The county clerk reported that every voter could read the notice posted outside the office before noon." >"$TMP/english.txt"
printf 'Hhe wup oth thend ofre allotoad tha wis sond ure bint aln thre cof wath ist ond hise werl tof sude inth wame rof. %s\n' \
    "Onde thar wiblet sorn mavet hurl pondre ekkis walth dorin snup trapel ondeth wirsen goll bratha." >"$TMP/soup.txt"
"$PY" scripts/english_words.py "$TMP/english.txt" 0.6 >/dev/null && pass "english_words: an English sentence passes" \
    || fail "english_words: an English sentence passes"
"$PY" scripts/english_words.py "$TMP/soup.txt" 0.6 >/dev/null && fail "english_words: letter soup fails" \
    || pass "english_words: letter soup fails"
# Single letters and function words do not count: soup made of them (46% of a 10-step sample's words were such) is
# still soup.
printf 'a e t the and of was %s\n' "thend ofre sond bint thre wath hise werl sude inth wame onde thar wiblet sorn mavet hurl pondre walth dorin snup" >"$TMP/short_words.txt"
verdict=$("$PY" scripts/english_words.py "$TMP/short_words.txt" 0 2>&1)
[[ "$verdict" == *"of 21 words of 4+ letters"* ]] && ! "$PY" scripts/english_words.py "$TMP/short_words.txt" 0.3 >/dev/null \
    && pass "english_words: single letters and function words are not counted" || fail "english_words: short words" "$verdict"
finish
