#!/usr/bin/env bash
# ./import_hf (llmc/import_hf.h): Hugging Face GPT-2 checkpoints into llm.c model files.
#   1. export_hf -> import_hf gives identical bits, fp32 and bf16 (into directories that do not exist yet).
#   2. A checkpoint written from PyTorch with HF's names and (in, out) Conv1D shapes, as the hub's gpt2 files are (no
#      "transformer." prefix, causal-mask buffers, a tied lm_head), imports to the reference model's exact bits and
#      ./test_gpt2_cpu gives the reference logits, loss, gradients and AdamW steps on it; the "transformer." prefix,
#      F16 and BF16 checkpoints import too (BF16 bit-exactly to --bf16 of the F32 one).
#   3. Training starts from an imported model (-e imported.bin) and learns (one batch, -a 1: a fast, certain drop).
#   4. Refusals, one line each: truncated file, wrong dtype, missing tensor, shape mismatch, unsupported config,
#      untied lm_head, a file given as the directory.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
PY=/usr/bin/python3
TMP=$(test_tmp_dir import_hf)
if ! "$PY" -c "import torch" 2>/dev/null; then fail "pytorch" "$PY cannot import torch (make deps installs it)"; finish; fi
for bin in ./import_hf ./export_hf ./test_gpt2_cpu ./train_gpt2_cpu; do
    [ -x "$bin" ] || { fail "$bin" "not built"; finish; }
done
# The odd shape of test/e2e/reference_test.sh: C=96 with 3 heads, V=100 padded to 128, random biases and gains.
"$PY" dev/reference/gpt2_reference.py --out "$TMP/ref" --layers 3 --heads 3 --channels 96 --max-seq-len 32 \
    --vocab 100 --batch 3 --seq-len 24 --seed 7 --perturb >/dev/null || { fail "generate reference"; finish; }
REF="$TMP/ref/model.bin"

# 1. round trips
check "export_hf into a missing directory" ./export_hf "$REF" "$TMP/new/dir/hf"
check "import_hf into a missing directory" ./import_hf "$TMP/new/dir/hf" "$TMP/out/rt_fp32.bin"
check "fp32: export_hf -> import_hf gives identical bits" cmp "$REF" "$TMP/out/rt_fp32.bin"
./import_hf "$TMP/new/dir/hf" "$TMP/out/b1.bin" --bf16 >/dev/null
./export_hf "$TMP/out/b1.bin" "$TMP/hf_bf16" >/dev/null
./import_hf "$TMP/hf_bf16" "$TMP/out/b2.bin" --bf16 >/dev/null
check "bf16: export_hf -> import_hf --bf16 gives identical bits" cmp "$TMP/out/b1.bin" "$TMP/out/b2.bin"
check "bf16 file is version 5" "$PY" -c "import struct,sys; sys.exit(struct.unpack('<2i', open('$TMP/out/b2.bin','rb').read(8))[1] != 5)"

# 2. written from PyTorch with HF's names and shapes
if "$PY" test/helpers/make_hf_checkpoint.py "$TMP/ref" "$TMP/hub" --extras; then
    pass "PyTorch-written HF checkpoint: HF's forward of it matches the reference model"
    check "hub layout (no prefix, mask buffers, tied lm_head) imports" ./import_hf "$TMP/hub" "$TMP/hub.bin"
    check "hub layout import gives the reference's exact bits" cmp "$REF" "$TMP/hub.bin"
    mkdir -p "$TMP/ref_imported" && cp "$TMP/ref/reference.bin" "$TMP/ref_imported/" && cp "$TMP/hub.bin" "$TMP/ref_imported/model.bin"
    ./test_gpt2_cpu --ref "$TMP/ref_imported" >"$TMP/test_gpt2.log" 2>&1
    rc=$?
    sed -E 's/^(PASS|FAIL|SKIP) /\1 [imported from HF] /' "$TMP/test_gpt2.log" | grep -E '^(PASS|FAIL|SKIP)'
    [ $rc -eq 0 ] && pass "test_gpt2_cpu on the imported model: reference logits" || fail "test_gpt2_cpu on the imported model" "status $rc, see $TMP/test_gpt2.log"
else
    fail "make_hf_checkpoint.py" "could not write the PyTorch checkpoint"
fi
"$PY" test/helpers/make_hf_checkpoint.py "$TMP/ref" "$TMP/prefixed" --prefix transformer. >/dev/null
check "transformer.-prefixed names import to the same bits" bash -c "./import_hf $TMP/prefixed $TMP/prefixed.bin >/dev/null && cmp $REF $TMP/prefixed.bin"
"$PY" test/helpers/make_hf_checkpoint.py "$TMP/ref" "$TMP/hub_bf16" --dtype BF16 >/dev/null
./import_hf "$TMP/new/dir/hf" "$TMP/out/ref_bf16.bin" --bf16 >/dev/null
check "BF16 checkpoint (torch's rounding) imports to the bits of our fp32 -> bf16 rounding" \
    bash -c "./import_hf $TMP/hub_bf16 $TMP/hub_bf16.bin --bf16 >/dev/null && cmp $TMP/out/ref_bf16.bin $TMP/hub_bf16.bin"
"$PY" test/helpers/make_hf_checkpoint.py "$TMP/ref" "$TMP/hub_f16" --dtype F16 >/dev/null
check "F16 checkpoint imports to exactly the fp16 values" bash -c "./import_hf $TMP/hub_f16 $TMP/hub_f16.bin >/dev/null &&
    $PY -c \"import numpy as np, sys
a = np.fromfile('$REF', dtype='<f4')[256:]; b = np.fromfile('$TMP/hub_f16.bin', dtype='<f4')[256:]
sys.exit(not np.array_equal(a.astype(np.float16).astype(np.float32), b))\""

# 3. fine-tuning from the imported model
"$PY" test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 100 --train-tokens 6000 --val-tokens 1000 >/dev/null
if OMP_NUM_THREADS=1 ./train_gpt2_cpu -e "$TMP/hub.bin" -i "$TMP/data/*train*.bin" -j "$TMP/data/*val*.bin" \
        -b 4 -t 32 -x 15 -l 3e-3 -a 1 -v 15 -m 2 -s 0 -o "$TMP/ft" >"$TMP/ft.log" 2>&1; then
    check "fine-tuning from the imported model runs (-a 1: the loss on its batch falls by > 1)" "$PY" -c "
import json, sys
rows = [json.loads(l) for l in open('$TMP/ft/metrics.jsonl') if '\"train_loss\"' in l]
sys.exit(not (len(rows) == 15 and rows[-1]['train_loss'] < rows[0]['train_loss'] - 1.0))"
else
    fail "fine-tuning from the imported model" "train_gpt2_cpu failed, see $TMP/ft.log"
fi

# 4. refusals
cp -r "$TMP/hub" "$TMP/trunc" && truncate -s -100 "$TMP/trunc/model.safetensors"
expect_error "truncated model.safetensors" "truncated" ./import_hf "$TMP/trunc" "$TMP/x.bin"
"$PY" test/helpers/make_hf_checkpoint.py "$TMP/ref" "$TMP/f64" --as-f64 h.1.ln_2.bias >/dev/null
expect_error "wrong dtype" "h.1.ln_2.bias has dtype F64 (expected F32, F16 or BF16)" ./import_hf "$TMP/f64" "$TMP/x.bin"
"$PY" test/helpers/make_hf_checkpoint.py "$TMP/ref" "$TMP/drop" --drop h.2.mlp.c_fc.bias >/dev/null
expect_error "missing tensor" "missing tensor h.2.mlp.c_fc.bias" ./import_hf "$TMP/drop" "$TMP/x.bin"
"$PY" test/helpers/make_hf_checkpoint.py "$TMP/ref" "$TMP/untr" --untransposed h.0.attn.c_attn.weight >/dev/null
expect_error "shape mismatch (Conv1D weight in (out, in))" "has shape (288, 96), config.json implies (96, 288)" \
    ./import_hf "$TMP/untr" "$TMP/x.bin"
"$PY" test/helpers/make_hf_checkpoint.py "$TMP/ref" "$TMP/relu" --config-set 'activation_function="relu"' >/dev/null
expect_error "unsupported activation" "activation_function" ./import_hf "$TMP/relu" "$TMP/x.bin"
"$PY" test/helpers/make_hf_checkpoint.py "$TMP/ref" "$TMP/wide" --config-set 'n_embd=192' >/dev/null
expect_error "config.json disagrees with the tensors" "config.json implies" ./import_hf "$TMP/wide" "$TMP/x.bin"
"$PY" test/helpers/make_hf_checkpoint.py "$TMP/ref" "$TMP/untied" --untied-head >/dev/null
expect_error "untied lm_head" "lm_head.weight differs from wte" ./import_hf "$TMP/untied" "$TMP/x.bin"
expect_error "a model file given as the directory" "not a directory" ./import_hf "$REF" "$TMP/x.bin"
expect_error "missing directory" "cannot open" ./import_hf "$TMP/nothing_here" "$TMP/x.bin"
check "no output file after the refusals" test ! -e "$TMP/x.bin"

# 5. dev/data/fetch_gpt2_weights.sh with a stand-in for curl that serves the PyTorch-written checkpoint (nothing is
#    downloaded here): the URLs asked for, and the converted model file.
cat >"$TMP/fake_curl" <<FAKE
#!/usr/bin/env bash
echo "\$*" >>"$TMP/curl_calls"
out="" url=""
while [ \$# -gt 0 ]; do case "\$1" in -o) out="\$2"; shift 2 ;; -C|--retry) shift 2 ;; -*) shift ;; *) url="\$1"; shift ;; esac; done
cp "$TMP/hub/\${url##*/}" "\$out"
FAKE
chmod +x "$TMP/fake_curl"
if CURL="$TMP/fake_curl" HF_ENDPOINT=https://hub.example HF_DOWNLOAD_DIR="$TMP/dl" MODELS_DIR="$TMP/models" dev/data/fetch_gpt2_weights.sh gpt2-medium >"$TMP/fetch.log" 2>&1; then
    check "fetch_gpt2_weights.sh asks the hub for config.json and model.safetensors" grep -q \
        "https://hub.example/openai-community/gpt2-medium/resolve/main/model.safetensors" "$TMP/curl_calls"
    check "fetch_gpt2_weights.sh converts to MODELS_DIR/gpt2_350M.bin" cmp "$REF" "$TMP/models/gpt2_350M.bin"
else
    fail "fetch_gpt2_weights.sh" "$(tail -3 "$TMP/fetch.log")"
fi
expect_error "fetch_gpt2_weights.sh refuses an unknown model" "unknown argument 'gpt3'" dev/data/fetch_gpt2_weights.sh gpt3
finish
