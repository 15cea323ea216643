#!/usr/bin/env bash
# The trainer's --dry-run (llmc/memory_plan.h): the device memory plan per rank, printed before anything is allocated
# and without data files (-i / -j name files that do not exist), ending with "device memory per rank: X.XX GiB" and
# exit status 0. The limits it must meet: GPT-2 124M at B=64, T=1024 within 22 GiB (the classifier holds one chunk
# of logits, never the whole (B, T, Vp): docs/cuda.md, "Classifier"), and 1.5B at B=16, T=1024, -r 2
# within 76 GiB (an 80 GB GPU). Then -pn/-z, --shard-group and --sync-every (sizes derived here), the CPU build, the errors a real run would stop with, and the
# unsupported head size refused by a real (simulated CUDA) training run at start-up.
# (test/sim/test_memory_plan.cpp checks that the plan equals what a training step allocates, to the byte.)
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
SIM=build/train_gpt2_sim
for bin in "$SIM" ./train_gpt2_cpu; do
    if [ ! -x "$bin" ]; then fail "$bin" "not built"; finish; fi
done
NODATA=(-i /nonexistent/train_*.bin -j /nonexistent/val_*.bin)

# plan NAME MAX_GIB BINARY ARGS...: exit 0, last line exactly "device memory per rank: X.XX GiB" (the CPU build: "host
# memory"), X <= MAX_GIB.
plan() {
    local name="$1" max="$2" bin="$3"; shift 3
    local out rc last gib
    out=$("$bin" --dry-run "${NODATA[@]}" "$@" 2>&1); rc=$?
    last=$(printf '%s\n' "$out" | grep -v '^warning: ' | tail -n 1)
    if [ $rc -ne 0 ]; then fail "$name" "exit status $rc: $(printf '%s' "$out" | tail -n 2)"; return; fi
    if ! [[ "$last" =~ ^(device|host)\ memory\ per\ rank:\ ([0-9]+\.[0-9][0-9])\ GiB$ ]]; then
        fail "$name" "last line is '$last'"; return
    fi
    gib=${BASH_REMATCH[2]}
    if awk -v g="$gib" -v m="$max" 'BEGIN { exit !(g <= m) }'; then pass "$name: $gib GiB <= $max GiB"
    else fail "$name" "$gib GiB > $max GiB"; fi
    PLAN_OUT=$(printf '%s\n' "$out" | grep -v '^warning: ')  # the plan itself (a CPU plan may warn on stderr)
}

plan "dry-run GPT-2 124M B=64 T=1024 (simulated CUDA build)" 22 "$SIM" -e d12 -b 64 -t 1024
for what in "parameters" "gradients" "master weights" "AdamW m and v" "qkv" "attention state" "logits" \
            "attention backward D" "cuBLASLt workspace"; do
    if [[ "$PLAN_OUT" == *"$what"* ]]; then pass "dry-run lists '$what'"; else fail "dry-run lists '$what'" "missing"; fi
done
if [[ "$PLAN_OUT" == *"L x B x NH x T (log-sum-exp)"* && "$PLAN_OUT" != *"T x T"* ]]; then
    pass "dry-run: the CUDA backend keeps no (T, T) attention buffer"
else
    fail "dry-run: the CUDA backend keeps no (T, T) attention buffer" "$(printf '%s\n' "$PLAN_OUT" | grep -i attention)"
fi
# One chunk of 4096 rows x Vp = 50304 bf16 logits (393.0 MiB), not N = 65536 rows (6288.0 MiB).
logits_line=$(printf '%s\n' "$PLAN_OUT" | grep "logits (one chunk)")
if [[ "$logits_line" == *" 393.0 MiB" ]]; then pass "dry-run: the logits buffer is one classifier chunk (393.0 MiB)"
else fail "dry-run: the logits buffer is one classifier chunk (393.0 MiB)" "'$logits_line'"; fi
plan "dry-run GPT-2 1.5B B=16 T=1024 -r 2 (simulated CUDA build)" 76 "$SIM" -e d48 -b 16 -t 1024 -r 2
one=$(printf '%s\n' "$PLAN_OUT" | tail -n 1)
plan "dry-run GPT-2 1.5B planned for 8 ranks (-pn 8, ZeRO-1 by default)" 76 "$SIM" -e d48 -b 16 -t 1024 -r 2 -pn 8
eight=$(printf '%s\n' "$PLAN_OUT" | tail -n 1)
if [[ "$PLAN_OUT" == *"8 ranks, ZeRO-1"* && "$one" != "$eight" ]]; then pass "-pn 8 shards the optimizer state"
else fail "-pn 8 shards the optimizer state" "1 rank: $one, 8 ranks: $eight"; fi
plan "dry-run -pn 8 -z 2" 76 "$SIM" -e d24 -b 8 -t 1024 -pn 8 -z 2
if [[ "$PLAN_OUT" == *"fp32, shard of 8 ranks (ZeRO-2)"* ]]; then pass "-z 2 plans the sharded gradient accumulator"
else fail "-z 2 plans the sharded gradient accumulator" "no ZeRO-2 line"; fi
plan "dry-run GPT-2 1.5B -pn 8 -z 2" 76 "$SIM" -e d48 -b 16 -t 1024 -r 2 -pn 8 -z 2
z2=$(printf '%s\n' "$PLAN_OUT" | tail -n 1 | awk '{print $5}')
if awk -v a="$z2" -v b="$(printf '%s' "$eight" | awk '{print $5}')" 'BEGIN { exit !(a < b) }'; then
    pass "-z 2 needs less than ZeRO-1 on 8 ranks ($z2 GiB < $(printf '%s' "$eight" | awk '{print $5}') GiB)"
else fail "-z 2 needs less than ZeRO-1 on 8 ranks" "ZeRO-2 $z2 GiB, ZeRO-1: $eight"; fi
plan "dry-run in the CPU build" 8 ./train_gpt2_cpu -e d12 -b 4 -t 256 --threads 2
if [[ "$PLAN_OUT" == *"B x NH x T x T (probabilities)"* ]]; then pass "CPU plan keeps the (T, T) probabilities"
else fail "CPU plan keeps the (T, T) probabilities" "not listed"; fi

# --shard-group and --sync-every: the optimizer state is the shard of the sharding group, not of the world. The
# expected sizes are derived here from GPT-2 124M's N = 124,475,904 parameters (docs/distributed.md): a group of G
# ranks pads N to a multiple of G x 128 and each rank holds 1/G of it; the model's buffers are padded for the world.
# (test/unit/test_optimizer.cpp checks these plans against what the model and the optimizer allocate, byte for byte.)
N124=124475904
padded() { echo $(( (N124 + $1 * 128 - 1) / ($1 * 128) * $1 * 128 )); }          # padded G: N padded for G ranks
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
# line NAME: the size column of the plan line NAME in $PLAN_OUT
line() { printf '%s\n' "$PLAN_OUT" | grep -E "^    $1 " | awk '{print $(NF-1), $NF}'; }
# expect_sizes TEST NAME=BYTES...: each plan line NAME shows BYTES in MiB
expect_sizes() {
    local name="$1" bad="" kv; shift
    for kv in "$@"; do
        local item="${kv%=*}" want; want=$(mib "${kv##*=}")
        [ "$(line "$item")" == "$want" ] || bad+="$item: '$(line "$item")', expected '$want'; "
    done
    if [ -z "$bad" ]; then pass "$name"; else fail "$name" "$bad"; fi
}
S16=$(( $(padded 16) / 16 )); S8=$(( $(padded 8) / 8 ))
plan "dry-run -pn 16 --shard-group 8 (CPU build)" 8 ./train_gpt2_cpu -e d12 -b 4 -t 256 -pn 16 --shard-group 8
expect_sizes "-pn 16 --shard-group 8: m, v and master are 1/8 of N padded for 8, parameters padded for 16" \
    "master weights=$((4 * S8))" "AdamW m and v=$((8 * S8))" "parameters=$((4 * $(padded 16)))" \
    "gradients=$((4 * $(padded 16)))"
[ "$(line "master weights")" != "$(mib $((4 * S16)))" ] && pass "-pn 16 --shard-group 8 is not planned as 16-way" \
    || fail "-pn 16 --shard-group 8 is not planned as 16-way" "$(line "master weights")"
[[ "$PLAN_OUT" == *"ZeRO-1 within 2 group(s) of 8 rank(s)"* ]] && pass "the heading names the groups" \
    || fail "the heading names the groups" "$(printf '%s' "$PLAN_OUT" | head -1)"
grouped8="$PLAN_OUT"
plan "dry-run -pn 16 --shard-group 8 -z 2" 8 ./train_gpt2_cpu -e d12 -b 4 -t 256 -pn 16 --shard-group 8 -z 2
expect_sizes "-z 2 --shard-group 8: the gradient accumulator is the group's shard" \
    "gradient accumulator=$((4 * S8))" "master weights=$((4 * S8))" "gradients=0"
plan "dry-run -pn 16 -pg 8 --shard-group node" 8 ./train_gpt2_cpu -e d12 -b 4 -t 256 -pn 16 -pg 8 --shard-group node
[ "$(printf '%s' "$PLAN_OUT" | tail -n +2)" == "$(printf '%s' "$grouped8" | tail -n +2)" ] \
    && pass "--shard-group node with -pg 8 plans what --shard-group 8 does" \
    || fail "--shard-group node with -pg 8 plans what --shard-group 8 does" "the plans differ"
expect_error "dry-run refuses --shard-group node without the ranks per node" "give -pg N (ranks per node)" \
    ./train_gpt2_cpu --dry-run "${NODATA[@]}" -e d12 -pn 16 --shard-group node
# Started by a launcher (OpenMPI's variables: 16 ranks, 8 per node), node means the launcher's 8 ranks per node.
launched_cpu() {
    OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=16 OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=8 \
        ./train_gpt2_cpu "$@"
}
plan "dry-run under a launcher of 16 ranks, 8 per node, --shard-group node" 8 launched_cpu -e d12 -b 4 -t 256 \
    --shard-group node
[ "$(printf '%s' "$PLAN_OUT" | tail -n +2)" == "$(printf '%s' "$grouped8" | tail -n +2)" ] \
    && pass "--shard-group node under the launcher plans what --shard-group 8 does" \
    || fail "--shard-group node under the launcher plans what --shard-group 8 does" "the plans differ"
expect_error "... but not for another world size (-pn 32): the launcher's nodes are not that run's" "give -pg N" \
    launched_cpu --dry-run "${NODATA[@]}" -e d12 -pn 32 --shard-group node
expect_error "dry-run refuses a group size that does not divide -pn" "--shard-group 3: the group size must divide" \
    ./train_gpt2_cpu --dry-run "${NODATA[@]}" -e d12 -pn 16 --shard-group 3
plan "dry-run -pn 16 --sync-every 4" 8 ./train_gpt2_cpu -e d12 -b 4 -t 256 -pn 16 --sync-every 4
expect_sizes "--sync-every alone: every rank holds its replica's whole state, the outer state on the host" \
    "master weights=$((4 * $(padded 1)))" "AdamW m and v=$((8 * $(padded 1)))" \
    "outer state \(--sync-every\)=$((12 * $(padded 1)))"
plan "dry-run -pn 16 --sync-every 4 --shard-group 8" 8 ./train_gpt2_cpu -e d12 -b 4 -t 256 -pn 16 --sync-every 4 \
    --shard-group 8
expect_sizes "--sync-every with --shard-group 8: replicas of 8 ranks, the state and the outer state per shard" \
    "master weights=$((4 * S8))" "AdamW m and v=$((8 * S8))" "outer state \(--sync-every\)=$((12 * S8))"
plan "dry-run -pn 16 --sync-every 4 --shard-group 8 (simulated CUDA build)" 8 "$SIM" -e d12 -b 4 -t 256 -pn 16 \
    --sync-every 4 --shard-group 8
expect_sizes "the simulated CUDA build plans the same shards (bf16 parameters)" \
    "master weights=$((4 * S8))" "parameters=$((2 * $(padded 16)))" "outer state \(--sync-every\)=$((12 * S8))"

expect_error "dry-run refuses head size 48 before any allocation" "head size C/NH = 144/3 = 48" \
    "$SIM" --dry-run "${NODATA[@]}" -e "L=2,NH=3,C=144" -b 1 -t 8
expect_error "dry-run refuses -d not divisible by B*T*ranks" "-d 100 is not divisible" \
    "$SIM" --dry-run "${NODATA[@]}" -e d12 -b 4 -t 64 -d 100
expect_error "dry-run refuses -t beyond the model's maxT" "longer than the model's maximum" \
    "$SIM" --dry-run "${NODATA[@]}" -e d12 -b 4 -t 2048
expect_error "dry-run refuses -pn 0" "-pn 0" "$SIM" --dry-run "${NODATA[@]}" -e d12 -pn 0
expect_error "dry-run refuses --classifier-chunk 0" "--classifier-chunk 0: must be >= 1" \
    "$SIM" --dry-run "${NODATA[@]}" -e d12 --classifier-chunk 0
# --classifier-chunk sets the logits buffer's rows: 8192 rows of Vp = 50304 bf16 = 786.0 MiB.
out=$("$SIM" --dry-run "${NODATA[@]}" -e d12 -b 64 -t 1024 --classifier-chunk 8192 2>&1 | grep "logits (one chunk)")
if [[ "$out" == *" 786.0 MiB" ]]; then pass "dry-run: --classifier-chunk 8192 plans 8192 rows of logits"
else fail "dry-run: --classifier-chunk 8192 plans 8192 rows of logits" "'$out'"; fi
# A training run (not a dry run) refuses the unsupported head size when it creates the model, before any step.
TMP=$(test_tmp_dir dry_run)
if /usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 2000 --val-tokens 400 >/dev/null; then
    expect_error "the simulated CUDA trainer refuses head size 48 at start-up" "head size C/NH = 96/2 = 48"         "$SIM" -i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=2,C=96,T=8,V=64" -b 1 -t 8 -x 2
else
    fail "make shards" "test/helpers/make_synthetic_shards.py failed"
fi
if ./train_gpt2_cpu --help | grep -q -- "--dry-run"; then pass "--help lists --dry-run"; else fail "--help lists --dry-run" "missing"; fi
finish
