#!/usr/bin/env bash
# The Makefile rebuilds the top-level binaries (train_gpt2_cpu, test_gpt2_cpu, the tools, train_gpt2, test_gpt2) when
# a header they include changes: each binary's own source is compiled to an object under build/ (build/main/NAME.o,
# build/main/NAME_cuda.o for nvcc's, build/tools/NAME.o) whose dependency file -MMD writes beside it, and the Makefile
# must include those, or `make` (and `make test`) would run a stale binary after a header edit.
#
# Two checks, neither touches a file (make -n -W pretends a file changed without changing it):
#   1. make's database: each object's rule lists every header its .d file names;
#   2. behaviour: with a header that only the binary's own source includes (no object in build/core, build/cpu or
#      build/cuda depends on it, so nothing else could trigger the relink), `make -n -W HEADER BINARY` relinks the
#      binary.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
DB=$(make -pqn 2>/dev/null)
dep_file() {  # dep_file BINARY: the .d file of the object made from the binary's own source
    case "$1" in
        train_gpt2|test_gpt2) echo "build/main/$1_cuda.d" ;;
        train_gpt2_cpu|test_gpt2_cpu) echo "build/main/$1.d" ;;
        *) echo "build/tools/$1.d" ;;
    esac
}
checked=0
for bin in train_gpt2_cpu test_gpt2_cpu generate prepare_data export_hf gpt2_tokenizer train_gpt2 test_gpt2; do
    d=$(dep_file "$bin")
    [ -f "$d" ] || continue
    obj=${d%.d}.o
    rule=$(grep -E "^$obj:" <<<"$DB" | head -1)
    missing=()
    for h in $(tr ' \\' '\n\n' <"$d" | grep -E '^(llmc|dev)/.*\.(h|cuh)$' | sort -u); do
        [[ " $rule " == *" $h "* ]] || missing+=("$h")
    done
    if [ -n "$rule" ] && [ ${#missing[@]} -eq 0 ]; then pass "make knows the headers $d lists"
    else fail "make knows the headers $d lists" "missing from the rule of $obj: ${missing[*]:0:5}"; fi
    checked=$((checked + 1))
done
[ "$checked" -ge 2 ] || fail "dependency files present" "only $checked .d files of the binaries' own sources (build the binaries first)"

# A header private to one binary's source: changing it must relink that binary.
relinks() {  # relinks HEADER BINARY
    make -n -W "$1" "$2" 2>/dev/null | grep -q -- "-o $2\b"
}
for pair in "llmc/trainer.h train_gpt2_cpu" "llmc/sampler.h generate" "llmc/trainer.h train_gpt2"; do
    set -- $pair
    [ -f "$(dep_file "$2")" ] || continue
    objs_using=$(grep -l -- "$1" $(find build/core build/cpu build/cuda -name '*.d' 2>/dev/null) 2>/dev/null | head -1)
    if [ -n "$objs_using" ]; then skip "$2 relinked after $1 changes" "$objs_using depends on it too"; continue; fi
    relinks "$1" "$2" && pass "$2 relinked after $1 changes (make -n -W)" \
        || fail "$2 relinked after $1 changes (make -n -W)" "make -n -W $1 $2 does not link $2"
done
finish
