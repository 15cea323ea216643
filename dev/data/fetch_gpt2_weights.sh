#!/usr/bin/env bash
# Download OpenAI's GPT-2 weights from the Hugging Face hub and convert them into an llm.c model file.
#
# Usage: dev/data/fetch_gpt2_weights.sh gpt2|gpt2-medium|gpt2-large|gpt2-xl [--bf16] [--force]
#   gpt2         124M  ->  models/gpt2_124M.bin    (548 MB download)
#   gpt2-medium  350M  ->  models/gpt2_350M.bin    (1.5 GB)
#   gpt2-large   774M  ->  models/gpt2_774M.bin    (3.2 GB)
#   gpt2-xl     1558M  ->  models/gpt2_1558M.bin   (6.4 GB)
#   --bf16       write the model file in bf16 (half the size; the CUDA trainer computes in bf16 anyway)
#   --force      replace an existing model file of that name (refused otherwise, before anything is downloaded)
# config.json and model.safetensors go to data/hf/<name>/ (curl, resumed when interrupted); ./import_hf converts
# them (built first when missing). Needs internet access. Environment: HF_ENDPOINT (default https://huggingface.co)
# for a mirror, HF_REPO_OWNER (default openai-community), CURL (default curl), HF_DOWNLOAD_DIR (default data/hf),
# MODELS_DIR (default models).
# Then: ./train_gpt2_cpu -e models/gpt2_124M.bin ... (fine-tuning, README "Fine-tuning from GPT-2") or
#       ./generate -e models/gpt2_124M.bin -p "Hello"
set -euo pipefail
cd "$(dirname "$0")/../.."

usage() { sed -n '4,18p' "$0" | sed 's/^# \{0,1\}//'; }
name="" bf16=() force=()
for a in "$@"; do
    case "$a" in
        gpt2) name=gpt2 size=124M ;;
        gpt2-medium) name=gpt2-medium size=350M ;;
        gpt2-large) name=gpt2-large size=774M ;;
        gpt2-xl) name=gpt2-xl size=1558M ;;
        --bf16) bf16=(--bf16) ;;
        --force) force=(--force) ;;
        -h|--help) usage; exit 0 ;;
        *) echo "error: unknown argument '$a': expected gpt2, gpt2-medium, gpt2-large or gpt2-xl (see --help)" >&2; exit 1 ;;
    esac
done
[ -n "$name" ] || { echo "error: which model? gpt2, gpt2-medium, gpt2-large or gpt2-xl (see --help)" >&2; exit 1; }

endpoint="${HF_ENDPOINT:-https://huggingface.co}"
owner="${HF_REPO_OWNER:-openai-community}"
curl_cmd="${CURL:-curl}"
dir="${HF_DOWNLOAD_DIR:-data/hf}/$name"
out="${MODELS_DIR:-models}/gpt2_${size}.bin"
if [ -e "$out" ] && [ ${#force[@]} -eq 0 ]; then
    echo "error: $out exists; --force replaces it" >&2
    exit 1
fi
mkdir -p "$dir"
for file in config.json model.safetensors; do
    url="$endpoint/$owner/$name/resolve/main/$file"
    echo "fetch $url"
    # -C -: resume a partial download; the .part name keeps an interrupted file from passing for a complete one.
    if ! "$curl_cmd" -fL --retry 3 -C - -o "$dir/$file.part" "$url"; then
        echo "error: download of $url failed (is there internet access? HF_ENDPOINT for a mirror)" >&2
        exit 1
    fi
    mv "$dir/$file.part" "$dir/$file"
done
[ -x ./import_hf ] || make --no-print-directory -s import_hf
./import_hf "$dir" "$out" "${bf16[@]}" "${force[@]}"
echo "next: ./generate -e $out -p \"Hello, I'm a language model,\"   (GPT-2's tokenizer: dev/data/fetch_tokenizer.sh)"
