#!/usr/bin/env bash
# The CPU backend against the PyTorch reference at GPT-2 124M's size (d12: L=12 NH=12 C=768 maxT=1024 V=50257, a
# batch of B=4 x T=64 as llm.c's own test uses): logits, loss, the 16 gradients, 10 AdamW steps (losses, gradient
# norms, parameters), and the same batch as llm.c's debug state (docs/formats.md). A developer's check, not part of
# `make test`: 27 minutes and 7 GiB on a busy 2-core machine (docs/reference.md has that run's figures; make test
# covers the same code at small shapes: test/e2e/reference_test.sh).
#
#   dev/reference/check_d12.sh                  generate build/ref/d12 and check ./test_gpt2_cpu against it
#   dev/reference/check_d12.sh LLMC_DIR         also check llm.c's own files there: gpt2_124M.bin and
#                                               gpt2_124M_debug_state.bin (written by llm.c's train_gpt2.py)
# Exit status: 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=build/ref/d12
[ -x ./test_gpt2_cpu ] || make --no-print-directory -s test_gpt2_cpu || exit 1
rc=0
rm -rf "$OUT"
/usr/bin/python3 dev/reference/gpt2_reference.py --out "$OUT" --layers 12 --heads 12 --channels 768 --max-seq-len 1024 \
    --vocab 50257 --batch 4 --seq-len 64 --seed 42 --llmc-debug-state "$OUT/debug_state.bin" || exit 1
echo "== ./test_gpt2_cpu --ref $OUT"
./test_gpt2_cpu --ref "$OUT" || rc=1
echo "== ./test_gpt2_cpu --model $OUT/model.bin --llmc-debug-state $OUT/debug_state.bin"
./test_gpt2_cpu --model "$OUT/model.bin" --llmc-debug-state "$OUT/debug_state.bin" || rc=1
if [ $# -ge 1 ]; then
    echo "== llm.c's files in $1"
    ./test_gpt2_cpu --model "$1/gpt2_124M.bin" --llmc-debug-state "$1/gpt2_124M_debug_state.bin" || rc=1
fi
exit $rc
