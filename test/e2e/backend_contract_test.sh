#!/usr/bin/env bash
# The backend contract is checked by the compiler (llmc/backend.h, satisfies_backend_contract): a copy of llmc/ in
# which one backend header lacks an op, or declares one with another signature, must fail to compile with a message
# naming that op, and only that op. The unmodified headers must compile (so a failure is the contract's, not the
# harness's). The CPU header compiles with g++; the CUDA header with g++ and the simulator's CUDA headers (the
# nvcc build includes the same header and the same static_assert).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
read -ra CXX_CMD <<<"${CXX:-g++}"  # may be a launcher and a compiler ("ccache g++")
NVCC=$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME=${CUDA_HOME:-${NVCC%/bin/nvcc}}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# compile HEADER: -fsyntax-only of a file that includes llmc/HEADER from the copy in $TMP/tree; stderr in $TMP/err.
compile() {
    local flags=(-std=c++17 -fsyntax-only -Wall -Wextra -Werror -Wno-unused-parameter -I"$TMP/tree")
    [[ "$1" == cuda/* ]] && flags+=(-DLLMC_CUDASIM -Idev/cudasim/include -isystem "$CUDA_HOME/include")
    echo "#include \"llmc/$1\"" >"$TMP/tu.cpp"
    "${CXX_CMD[@]}" "${flags[@]}" "$TMP/tu.cpp" 2>"$TMP/err" >/dev/null
}

# edit HEADER PYTHON: a fresh copy of llmc/ with HEADER changed by the Python expression (s is the file's text).
edit() {
    rm -rf "$TMP/tree" && mkdir -p "$TMP/tree" && cp -r llmc "$TMP/tree/"
    python3 - "$TMP/tree/llmc/$1" "$2" <<'EOF'
import re, sys
path, expr = sys.argv[1], sys.argv[2]
s = open(path).read()
def drop(name):
    # the declaration of `name`: from its line to the line that ends it with ';' or '}'
    lines = s.split("\n")
    i = next(k for k, l in enumerate(lines) if re.search(r"\b" + name + r"\(", l))
    j = i
    while not lines[j].rstrip().endswith((";", "}")):
        j += 1
    return "\n".join(lines[:i] + lines[j + 1:])
new = eval(expr)
if new == s:
    sys.exit("the edit changed nothing: " + expr)
open(path, "w").write(new)
EOF
}

# expect_op_error NAME HEADER EDIT OP KIND: the edited header fails to compile, and the only contract message is
# KIND ("is missing" or "does not have the signature") for OP.
expect_op_error() {
    local name="$1" header="$2" expr="$3" op="$4" kind="$5"
    if ! edit "$header" "$expr"; then fail "$name" "could not apply the edit"; return; fi
    if compile "$header"; then fail "$name" "compiled"; return; fi
    local msgs
    msgs=$(grep -o "backend op '[a-z_]*' [a-z ]*" "$TMP/err" | sort -u)
    if [[ "$msgs" == "backend op '$op' $kind"* && $(wc -l <<<"$msgs") -eq 1 ]]; then pass "$name"
    else fail "$name" "expected only \"backend op '$op' $kind\", got: $(head -c 400 <<<"${msgs:-$(cat "$TMP/err")}")"; fi
}

for h in cpu/cpu_backend.h cuda/cuda_backend.h; do
    edit "$h" "s + '\n'" && compile "$h" && pass "the unmodified $h satisfies the contract" ||
        fail "the unmodified $h satisfies the contract" "$(head -c 600 "$TMP/err")"
done

# header | edit | the op it breaks | the message | what the edit does
while IFS='|' read -r header expr op kind what; do
    expect_op_error "${header%%/*}: $what fails the build naming $op" "$header" "$expr" "$op" "$kind"
done <<'CASES'
cpu/cpu_backend.h|drop('layernorm_backward')|layernorm_backward|is missing|dropping an op
cpu/cpu_backend.h|drop('check_attention_shape')|check_attention_shape|is missing|dropping a static op
cpu/cpu_backend.h|drop('upload_tokens')|upload_tokens|is missing|dropping an op
cpu/cpu_backend.h|s.replace('const act_t* inp, size_t n);', 'const act_t* inp, int n);')|gelu_forward|does not have the signature|an int count
cpu/cpu_backend.h|s.replace('double peak_flops() const', 'float peak_flops() const')|peak_flops|does not have the signature|another return type
cuda/cuda_backend.h|drop('encoder_backward')|encoder_backward|is missing|dropping an op
cuda/cuda_backend.h|drop('stream_wait_event')|stream_wait_event|is missing|dropping an op
cuda/cuda_backend.h|drop('attention_state_elems')|attention_state_elems|is missing|dropping a static op
cuda/cuda_backend.h|s.replace('event_record(Event event, Stream stream)', 'event_record(Stream stream, Event event)')|event_record|does not have the signature|swapped handles
cuda/cuda_backend.h|s.replace('Stream comm_stream() { return Stream(comm_); }', 'void* comm_stream() { return comm_; }')|comm_stream|does not have the signature|a void* stream
CASES
finish
