#!/usr/bin/env bash
# The Makefile rebuilds the top-level binaries (train_gpt2_cpu, test_gpt2_cpu, the tools, train_gpt2, test_gpt2) when
# a header they include changes: their dependency files (train_gpt2_cpu.d, ...) are written next to them by -MMD and
# must be included by the Makefile, or `make` (and `make test`) would run a stale binary after a header edit.
#
# Two checks, neither touches a file (make -n -W pretends a file changed without changing it):
#   1. make's database: each binary's rule lists every header its .d file names;
#   2. behaviour: with a header that only the binary's own source includes (no object in build/ depends on it, so
#      nothing else could trigger the relink), `make -n -W HEADER BINARY` relinks the binary.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
DB=$(make -pqn 2>/dev/null)
checked=0
for bin in train_gpt2_cpu test_gpt2_cpu generate prepare_data export_hf gpt2_tokenizer train_gpt2 test_gpt2; do
    [ -f "$bin.d" ] || continue
    rule=$(grep -E "^$bin:" <<<"$DB" | head -1)
    missing=()
    for h in $(tr ' \\' '\n\n' <"$bin.d" | grep -E '^(llmc|dev)/.*\.(h|cuh)$' | sort -u); do
        [[ " $rule " == *" $h "* ]] || missing+=("$h")
    done
    if [ -n "$rule" ] && [ ${#missing[@]} -eq 0 ]; then pass "make knows the headers $bin.d lists"
    else fail "make knows the headers $bin.d lists" "missing from the rule of $bin: ${missing[*]:0:5}"; fi
    checked=$((checked + 1))
done
[ "$checked" -ge 2 ] || fail "dependency files present" "only $checked top-level .d files (build the binaries first)"

# A header private to one binary's source: changing it must relink that binary.
relinks() {  # relinks HEADER BINARY
    make -n -W "$1" "$2" 2>/dev/null | grep -q -- "-o $2\b"
}
for pair in "llmc/trainer.h train_gpt2_cpu" "llmc/sampler.h generate" "llmc/trainer.h train_gpt2"; do
    set -- $pair
    [ -f "$2.d" ] || continue
    objs_using=$(grep -l -- "$1" $(find build/core build/cpu build/cuda -name '*.d' 2>/dev/null) 2>/dev/null | head -1)
    if [ -n "$objs_using" ]; then skip "$2 relinked after $1 changes" "$objs_using depends on it too"; continue; fi
    relinks "$1" "$2" && pass "$2 relinked after $1 changes (make -n -W)" \
        || fail "$2 relinked after $1 changes (make -n -W)" "make -n -W $1 $2 does not link $2"
done
finish
