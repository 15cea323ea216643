#!/usr/bin/env bash
# The tools against careless and hostile input (docs/formats.md): each case ends in one error line naming the file
# and the field, or flag, with nothing existing overwritten.
#   O. ./import_hf never overwrites without --force, and never its own input, whatever the output's name
#   S. forged model.safetensors headers: overlapping data_offsets, a tensor named twice, fractional offsets and shapes,
#      shapes that are not arrays
#   C. forged config.json: a field nested 100,000 deep (the error message's dump overflowed the stack), fields of the
#      wrong type, text after the object, a width whose parameters the file does not hold (it zero-filled gigabytes)
#   E. ./export_hf into '-'
#   G. ./generate's bad numbers name their flag; sample.py's flag names get a hint
# TOOL_DIR: where the binaries are (make asan: build-asan/bin).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TOOLS=${TOOL_DIR:-.}
PY=/usr/bin/python3
TMP=$(test_tmp_dir tool_refusals)
for b in import_hf export_hf generate; do [ -x "$TOOLS/$b" ] || { fail "$b" "not built"; finish; }; done

# A small model file (llm.c format, random weights) and its export: the checkpoint every case starts from.
"$PY" - "$TMP/model.bin" <<'EOF' || { fail "write a model file"; finish; }
import sys, numpy as np
L, NH, C, T, V, Vp = 2, 2, 32, 16, 64, 128
n = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
h = np.zeros(256, "<i4"); h[:8] = [20240326, 3, T, V, L, NH, C, Vp]
w = (np.random.default_rng(1).standard_normal(n) * 0.02).astype("<f4")
w[V * C:Vp * C] = 0  # padded wte rows
open(sys.argv[1], "wb").write(h.tobytes() + w.tobytes())
EOF
"$TOOLS/export_hf" "$TMP/model.bin" "$TMP/hf" >/dev/null || { fail "export_hf of the model"; finish; }
HF=$TMP/hf
digest() { sha256sum "$@" | cut -d' ' -f1 | tr '\n' ' '; }

# ---- O. import_hf's output (on a copy of the checkpoint: the cases below start from the untouched one) ------------
cp -r "$HF" "$TMP/hf_o" && HF=$TMP/hf_o
echo "my notes" >"$TMP/notes.txt"
refuses "O1 import_hf onto an existing file is refused" "$TMP/notes.txt exists; import_hf does not overwrite a file unless --force" \
    "$TOOLS/import_hf" "$HF" "$TMP/notes.txt"
[ "$(cat "$TMP/notes.txt")" = "my notes" ] && pass "O1 ... and the file is intact" || fail "O1 notes.txt changed"
before=$(digest "$HF"/*)
for force in "" --force; do
    refuses "O2 import_hf onto its own model.safetensors ${force:-without --force} is refused" \
        "$HF/model.safetensors is $HF/model.safetensors, which import_hf reads" \
        "$TOOLS/import_hf" "$HF" "$HF/model.safetensors" $force
done
ln -s "$HF/config.json" "$TMP/cfg_link.bin"
refuses "O2 ... and a link to its config.json, with --force" "$TMP/cfg_link.bin is $HF/config.json, which import_hf reads" \
    "$TOOLS/import_hf" "$HF" "$TMP/cfg_link.bin" --force
[ "$before" = "$(digest "$HF"/*)" ] && pass "O2 ... the checkpoint is intact" || fail "O2 the checkpoint changed"
mkdir -p "$TMP/run" && cp "$TMP/model.bin" "$TMP/run/model.bin" && printf 'x' >>"$TMP/run/model.bin"
run_before=$(digest "$TMP/run/model.bin")
refuses "O3 import_hf onto a run's model.bin is refused" "exists; import_hf does not overwrite" \
    "$TOOLS/import_hf" "$HF" "$TMP/run/model.bin"
[ "$run_before" = "$(digest "$TMP/run/model.bin")" ] && pass "O3 ... and it is intact" || fail "O3 model.bin changed"
"$TOOLS/import_hf" "$HF" "$TMP/run/model.bin" --force >/dev/null && cmp -s "$TMP/model.bin" "$TMP/run/model.bin" \
    && pass "O3 ... --force replaces it (with the imported model's exact bits)" || fail "O3 --force"
echo "the link's target" >"$TMP/target.txt" && ln -s "$TMP/target.txt" "$TMP/link.bin"
"$TOOLS/import_hf" "$HF" "$TMP/link.bin" --force >/dev/null && [ ! -L "$TMP/link.bin" ] \
    && [ "$(cat "$TMP/target.txt")" = "the link's target" ] && cmp -s "$TMP/model.bin" "$TMP/link.bin" \
    && pass "O4 --force onto a symbolic link replaces the link, not its target" || fail "O4 symbolic link"
refuses "O5 a directory as the output" "$TMP/run is a directory" "$TOOLS/import_hf" "$HF" "$TMP/run"

# ---- S. forged safetensors headers ------------------------------------------------------------------------------
HF=$TMP/hf
forged() {  # NAME FORGERY WANT: the forged checkpoint is refused with WANT, naming model.safetensors
    "$PY" test/helpers/forge_hf_checkpoint.py "$HF" "$TMP/$2" "$2" || { fail "$1" "forging $2"; return; }
    refuses "$1" "$3" "$TOOLS/import_hf" "$TMP/$2" "$TMP/out_$2.bin"
    [ -e "$TMP/out_$2.bin" ] && fail "$1: an output file was written"
}
forged "S1 overlapping data_offsets" overlap "$TMP/overlap/model.safetensors: tensors transformer.wte.weight [0, 8192) and transformer.wpe.weight [8188, 10236) overlap"
forged "S2 a tensor named twice" duplicate "$TMP/duplicate/model.safetensors: the header names tensor transformer.ln_f.weight twice"
forged "S3 fractional data_offsets" fractional-offset "model.safetensors: tensor transformer.ln_f.bias: data_offsets holds"
forged "S3 a fractional shape" fractional-shape "model.safetensors: tensor transformer.ln_f.bias: shape holds 32.5, expected non-negative integers"
forged "S4 a shape given as a number" shape-number "model.safetensors: tensor transformer.ln_f.bias: shape is of JSON type number, expected an array"
forged "S4 a shape given as an object" shape-object "model.safetensors: tensor transformer.ln_f.bias: shape is of JSON type object, expected an array"

# ---- C. forged config.json --------------------------------------------------------------------------------------
# conf NAME FORGERY WANT: refused in one line of at most 400 bytes containing WANT (no crash, no screenful).
conf() {
    "$PY" test/helpers/forge_hf_checkpoint.py "$HF" "$TMP/c$4" $2 || { fail "$1" "forging $2"; return; }
    local err rc
    err=$(timeout 60 "$TOOLS/import_hf" "$TMP/c$4" "$TMP/out.bin" 2>&1 >/dev/null); rc=$?
    if [ $rc -ne 1 ]; then fail "$1" "status $rc (a crash is 134 or 139)"
    elif [ "$(wc -l <<<"$err")" -ne 1 ] || [ ${#err} -gt 400 ]; then fail "$1" "$(wc -l <<<"$err") line(s), ${#err} bytes"
    elif [[ "$err" != *"$3"* ]]; then fail "$1" "lacks '$3': $(head -c 300 <<<"$err")"
    else pass "$1"; fi
}
conf "C1 n_inner nested 100,000 deep: one short line, no crash" "deep:n_inner:100000" \
    "$TMP/c1/config.json: \"n_inner\" is an array of 1 element(s), this model supports only 128" 1
conf "C1 activation_function nested 30,000 deep" "deep:activation_function:30000" \
    "\"activation_function\" is an array of 1 element(s), this model supports only \"gelu_new\"" 2
conf "C2 layer_norm_epsilon as a string" 'config:layer_norm_epsilon="1e-5"' \
    "$TMP/c3/config.json: \"layer_norm_epsilon\" is \"1e-5\", this model's layernorm uses 1e-5" 3
conf "C2 model_type as a number" 'config:model_type=2' "$TMP/c4/config.json: model_type is 2 (expected \"gpt2\")" 4
conf "C2 n_layer as a string" 'config:n_layer="2"' "$TMP/c5/config.json: \"n_layer\" is \"2\", expected a positive integer" 5
conf "C2 n_head fractional" 'config:n_head=2.5' "$TMP/c6/config.json: \"n_head\" is 2.5, expected a positive integer" 6
conf "C3 text after the object" trailing "$TMP/c7/config.json: not valid JSON (syntax error at byte" 7
# A width the file does not hold: refused from the header alone, before memory for 3 TB of parameters is asked for.
conf "C4 n_embd 262144 with the file of a C = 32 model" 'config:n_embd=262144 config:n_layer=1' \
    "$TMP/c8/model.safetensors: tensor transformer.wte.weight has shape (64, 32), config.json implies (64, 262144)" 8

# ---- E. export_hf -----------------------------------------------------------------------------------------------
mkdir -p "$TMP/cwd"
export_hf_path=$(cd "$TOOLS" && pwd)/export_hf
cd "$TMP/cwd" || finish
refuses "E1 export_hf into '-' is refused" "OUT_DIR '-': export_hf writes two files into a directory" \
    "$export_hf_path" "$TMP/model.bin" -
cd "$OLDPWD" || finish
[ -z "$(ls -A "$TMP/cwd")" ] && pass "E1 ... and no directory '-' is made" || fail "E1 something was written" "$(ls -A "$TMP/cwd")"

# ---- G. generate's flags ----------------------------------------------------------------------------------------
refuses "G1 --temperature nan names the flag" "--temperature 'nan': not a valid value for this flag" \
    "$TOOLS/generate" -e "$TMP/model.bin" --temperature nan
refuses "G1 -n 1.5 names the flag" "-n '1.5': not a valid value for this flag" "$TOOLS/generate" -e "$TMP/model.bin" -n 1.5
refuses "G1 --seed=x names the flag" "--seed 'x': not a valid value for this flag" "$TOOLS/generate" -e "$TMP/model.bin" --seed=x
refuses "G2 sample.py's --max_new_tokens gets a hint" "unknown option '--max_new_tokens': here it is -n/--tokens" \
    "$TOOLS/generate" -e "$TMP/model.bin" --max_new_tokens 5
finish
