#!/usr/bin/env bash
# ./generate: loads a model file written by the trainer, continues a prompt, is deterministic for a seed, and refuses
# bad input. Needs GPT-2's vocabulary in data/gpt2 (fetched when missing: gpt2_vocab, test/helpers/lib.sh).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
B=${TOOL_DIR:-.}  # where the binaries are (make asan: build-asan/bin)
TMP=$(test_tmp_dir generate)
gpt2_vocab || { fail "fetch the GPT-2 vocabulary"; finish; }
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 >/dev/null
# A model with GPT-2's vocabulary (the shards use ids < 64), one step of training so it is a trainer-written file.
"$B/train_gpt2_cpu" -i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=2,C=32,T=32" -b 1 -t 32 -x 1 \
    -v 0 -s 0 -o "$TMP/run" >"$TMP/train.log" 2>&1 || { fail "train a model to sample from" "$(tail -2 "$TMP/train.log")"; finish; }
M="$TMP/run/model.bin"
a=$("$B/generate" -e "$M" -p "Hello world" -n 12 --seed 5 2>&1); rc=$?
b=$("$B/generate" -e "$M" -p "Hello world" -n 12 --seed 5 2>&1)
c=$("$B/generate" -e "$M" -p "Hello world" -n 12 --seed 6 2>&1)
[ $rc -eq 0 ] && [[ "$a" == "Hello world"* ]] && [ ${#a} -gt 11 ] && pass "generate continues the prompt" \
    || fail "generate continues the prompt" "rc=$rc output: $a"
[ "$a" == "$b" ] && pass "same seed, same text" || fail "same seed, same text"
[ "$a" != "$c" ] && pass "another seed, another text" || fail "another seed, another text"
g1=$("$B/generate" -e "$M" -p "Hello" -n 8 --temperature 0 --seed 1); g2=$("$B/generate" -e "$M" -p "Hello" -n 8 --temperature 0 --seed 2)
[ "$g1" == "$g2" ] && pass "temperature 0 is greedy (seed-independent)" || fail "temperature 0 is greedy"
expect_error "missing model" "cannot open" "$B/generate" -e "$TMP/missing.bin"
expect_error "no model flag" "-e MODEL is required" "$B/generate" -p hi
expect_error "missing vocabulary" "nowhere" "$B/generate" -e "$M" --vocab "$TMP/nowhere"
finish
