#!/usr/bin/env bash
# From a fresh clone to a trained GPT-2 and a sample, in one command:
#   installs the packages it needs, builds, fetches GPT-2's tokenizer and the Brown corpus, prepares token shards,
#   trains a small GPT-2 (on the GPU when one is present, else on the CPU: a few minutes on 2 cores), writes
#   runs/quickstart/metrics.jsonl and a loss-curve PNG, and prints a sample.
# Options are passed on to the trainer (e.g. scripts/quickstart.sh -x 100 to train fewer steps).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    gpu=1
else
    gpu=0
fi
echo "== build"
if [ "$gpu" = 1 ]; then make -j"$(nproc)" train_gpt2 gpt2_tokenizer prepare_data; else make -j"$(nproc)" cpu; fi
echo "== data: GPT-2 tokenizer and the Brown corpus"
bash dev/data/fetch_tokenizer.sh --no-reference
bash dev/data/prepare_brown.sh
OUT=runs/quickstart
mkdir -p "$OUT"
# A second quickstart starts over: the trainer moves the earlier run into $OUT/previous_<time>/ (never deletes it).
again=()
if [ -f "$OUT/metrics.jsonl" ] || [ -f "$OUT/model.bin" ] || compgen -G "$OUT/ckpt_*" >/dev/null; then again=(--start-over); fi
echo "== train"
if [ "$gpu" = 1 ]; then
    # GPT-2 small's width at 6 layers, T=256: a few minutes on one GPU.
    ./train_gpt2 -i "data/brown/brown_train_*.bin" -j "data/brown/brown_val_*.bin" -o "$OUT" \
        -e d6 -b 32 -t 256 -x 600 -l 1e-3 -u 50 -q 0.1 -c 0.1 -v 50 -m 8 -s 200 -g 96 "${again[@]}" "$@"
else
    # 4 layers of width 256, T=64: about a second a step on 2 cores.
    ./train_gpt2_cpu -i "data/brown/brown_train_*.bin" -j "data/brown/brown_val_*.bin" -o "$OUT" \
        -e "L=4,NH=4,C=256,T=64" -b 8 -t 64 -x 200 -l 2e-3 -u 20 -q 0.1 -c 0.1 -v 25 -m 4 -s 100 -g 64 "${again[@]}" "$@"
fi
echo "== plot"
/usr/bin/python3 scripts/plot_metrics.py "$OUT/metrics.jsonl" "$OUT/loss.png"
echo "done: $OUT/metrics.jsonl, $OUT/loss.png, $OUT/model.bin"
