#!/usr/bin/env bash
# Hybrid sharding on the CPU trainer (--shard-group, docs/distributed.md "Hybrid sharding"): mpirun -np 4 and 6 with
# groups of 2 and 3, ZeRO 1 and 2, on fake multi-node layouts (test/helpers/fake_nodes.sh, by node and round-robin)
# against one process; where each rank sits in the mesh; the bytes each rank sends across groups against flat
# ZeRO-1's; a resume from 6 ranks in groups of 3 onto 6 ranks alike, 4 ranks in groups of 2 and 1 rank; and the
# refusals of bad values before step 1, with nothing written into -o.
#
# Tolerance: test/e2e/train_mpi_test.sh's, for its reason: the runs differ from one process only in the order of the
# fp32 gradient sums (over micro-steps, within a group, then across groups): losses and norms ~1e-7 relative
# (checked at 2e-5), parameters ~1e-5 absolute after AdamW turns rounding noise of near-zero gradients into steps of
# up to lr (checked at 1e-4, a thirtieth of one step's movement at lr 3e-3). A missing group, a group summed twice, a
# wrong data block or a shard reduced to the wrong owner changes a whole step's update: outside.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir hybrid_shard)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 30000 >/dev/null || { fail "make shards"; finish; }
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x FAKE_NODES_CYCLIC)
STEPS=12
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=32,V=64" -b 1 -t 32 -d 384
      -x $STEPS -v 6 -m 2 -s 0 -l 3e-3 -c 0.1 -n 6 --threads 1 --show-placement)
export FAKE_NODES_CYCLIC=0

train() {  # train NAME NP LAYOUT ARGS...: LAYOUT "one" is a plain mpirun (one node), "cyclic:L" round-robin
    local name=$1 np=$2 layout=$3; shift 3
    local wrap=() cyc=0
    [[ "$layout" == cyclic:* ]] && cyc=1 layout=${layout#cyclic:}
    [ "$layout" != one ] && wrap=(test/helpers/fake_nodes.sh "$layout")
    FAKE_NODES_CYCLIC=$cyc "${MPI[@]}" -np "$np" "${wrap[@]}" ./train_gpt2_cpu "${args[@]}" "$@" -o "$TMP/$name" \
        >"$TMP/$name.log" 2>&1 || { fail "train $name ($np ranks, $layout)" "$(tail -3 "$TMP/$name.log")"; return 1; }
}
same_as_one() {  # same_as_one NAME WHAT [N]: NAME against the one-process run; with N, its placement too
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/one" "$TMP/$1" 2e-5 1e-4 >"$TMP/$1.cmp" 2>&1 \
        && pass "$2 matches one process ($(tail -1 "$TMP/$1.cmp"))" || fail "$2 matches one process" "$(tail -2 "$TMP/$1.cmp")"
    [ -z "${3:-}" ] && return
    /usr/bin/python3 test/helpers/hybrid_check.py placement "$TMP/$1.log" "$3" >"$TMP/$1.place" 2>&1 \
        && pass "$2: $(tail -1 "$TMP/$1.place")" || fail "$2: placement" "$(tail -1 "$TMP/$1.place")"
}

OMP_NUM_THREADS=1 ./train_gpt2_cpu "${args[@]}" -o "$TMP/one" >"$TMP/one.log" 2>&1 || { fail "one process" "$(tail -2 "$TMP/one.log")"; finish; }
train h4_node_z1 4 "cyclic:2(x2)" -z 1 --shard-group node && same_as_one h4_node_z1 "4 ranks round-robin on 2 nodes, --shard-group node, ZeRO-1" 2
train h4_2_z2 4 one -z 2 --shard-group 2 && same_as_one h4_2_z2 "4 ranks, --shard-group 2, ZeRO-2" 2
train h6_node_z1 6 "cyclic:3(x2)" -z 1 --shard-group node && same_as_one h6_node_z1 "6 ranks round-robin on 2 nodes, --shard-group node (3), ZeRO-1" 3
train h6_node_z2 6 "2(x3)" -z 2 --shard-group node && same_as_one h6_node_z2 "6 ranks on 3 nodes, --shard-group node (2), ZeRO-2" 2
# --reduce-dtype bf16 within and across groups (ZeRO 1: per bucket; ZeRO 2: the shard accumulator in chunks through
# the staging buffer). Tolerance of test/e2e/reduce_dtype_test.sh: each reduced gradient within ~2^-8 relative, a
# first-order bound of 12 coherent 2^-8 errors on the losses and norms (4e-2), and parameters within 2 lr x steps
# (0.072: each step moves a parameter by at most ~lr). A group missing from the sum halves the norm: outside.
for z in 1 2; do
    train h6_3_bf16_z$z 6 one -z $z --shard-group 3 --reduce-dtype bf16 || continue
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/one" "$TMP/h6_3_bf16_z$z" 4e-2 0.072 >"$TMP/bf16_z$z.cmp" 2>&1 \
        && pass "6 ranks, --shard-group 3, ZeRO-$z, --reduce-dtype bf16 within bf16 tolerance of one process ($(tail -1 "$TMP/bf16_z$z.cmp"))" \
        || fail "6 ranks, --shard-group 3, ZeRO-$z, --reduce-dtype bf16" "$(tail -2 "$TMP/bf16_z$z.cmp")"
done
# The placement check can fail: the groups of 3 are not groups of 2.
/usr/bin/python3 test/helpers/hybrid_check.py placement "$TMP/h6_node_z1.log" 2 >/dev/null 2>&1 \
    && fail "the placement check notices a wrong group size" "passed" || pass "the placement check notices a wrong group size"

# Bytes across groups: at most 1/N of flat ZeRO-1's per rank (test/helpers/hybrid_check.py).
train flat4_z1 4 one -z 1 && /usr/bin/python3 test/helpers/hybrid_check.py bytes "$TMP/flat4_z1.log" "$TMP/h4_node_z1.log" 2 $STEPS >"$TMP/bytes4" 2>&1 \
    && pass "groups of 2 on 4 ranks: $(tail -1 "$TMP/bytes4")" || fail "groups of 2 on 4 ranks: bytes across groups" "$(tail -1 "$TMP/bytes4")"
train flat6_z1 6 one -z 1 && /usr/bin/python3 test/helpers/hybrid_check.py bytes "$TMP/flat6_z1.log" "$TMP/h6_node_z1.log" 3 $STEPS >"$TMP/bytes6" 2>&1 \
    && pass "groups of 3 on 6 ranks: $(tail -1 "$TMP/bytes6")" || fail "groups of 3 on 6 ranks: bytes across groups" "$(tail -1 "$TMP/bytes6")"
# ... and that check can fail: groups of 3 are not within 1/3 of flat 4-rank ZeRO-1's bytes... per group of 2.
/usr/bin/python3 test/helpers/hybrid_check.py bytes "$TMP/flat4_z1.log" "$TMP/flat4_z1.log" 2 $STEPS >/dev/null 2>&1 \
    && fail "the byte check notices a run without groups" "passed" || pass "the byte check notices a run without groups"

# Resume: the 6-rank run in groups of 3 wrote its checkpoints with group 0's 3 ranks (its optimizer state is the
# same in both groups). From step 6 onto 6 ranks in groups of 3 (bit-identical), 4 ranks in groups of 2 and 1 rank
# (checkpoint_test.sh's cross-world-size resume: the tolerances above).
ck="$TMP/h6_node_z1/ckpt_00000006"
files=$(cd "$ck" && ls optim_*.bin 2>/dev/null | tr '\n' ' ')
[ "$files" = "optim_00000.bin optim_00001.bin optim_00002.bin " ] && grep -q '"world_size": *3' "$ck/meta.json" \
    && pass "groups of 3: the checkpoint holds group 0's 3 optimizer files" || fail "checkpoint of groups of 3" "files: $files"
for re in "re6 6 cyclic:3(x2) -z 1 --shard-group node" "re4 4 2(x2) -z 1 --shard-group node" "re1 1 one -z 0"; do
    set -- $re
    name=$1; mkdir -p "$TMP/$name" && cp -r "$ck" "$TMP/h6_node_z1/metrics.jsonl" "$TMP/$name/"
    train "$@" -y 1 || continue
    grep -q "^resume .*step 6" "$TMP/$name.log" || { fail "$name resumed at step 6" "$(grep resume "$TMP/$name.log")"; continue; }
    # The resume line counts what meta.json's world_size counts here: group 0's optimizer files, not the 6 ranks.
    grep -q "^resume .*step 6 (ZeRO-1, optimizer state in 3 shard(s))" "$TMP/$name.log" \
        && pass "$name: the resume line says 3 optimizer shards (it said 'written by 3 rank(s)' of a 6-rank run)" \
        || fail "$name: resume line" "$(grep '^resume' "$TMP/$name.log")"
    if [ "$name" = re6 ]; then
        /usr/bin/python3 test/helpers/compare_runs.py "$TMP/h6_node_z1" "$TMP/re6" 0 0 >"$TMP/re6.cmp" 2>&1 \
            && pass "6 ranks in groups of 3 -> the same: bit-identical" || fail "6 -> 6 ranks in groups of 3" "$(tail -2 "$TMP/re6.cmp")"
    else
        /usr/bin/python3 test/helpers/compare_runs.py "$TMP/h6_node_z1" "$TMP/$name" 2e-5 1e-4 >"$TMP/$name.cmp" 2>&1 \
            && pass "6 ranks in groups of 3 -> $2 rank(s) ${*:4}: $(tail -1 "$TMP/$name.cmp")" \
            || fail "6 ranks in groups of 3 -> $2 rank(s)" "$(tail -2 "$TMP/$name.cmp")"
    fi
done

# Refusals: one line, before step 1, nothing in -o.
refused() {  # refused NAME WANT NP LAYOUT ARGS...
    local name=$1 want=$2 np=$3 layout=$4; shift 4
    local wrap=(); [ "$layout" != one ] && wrap=(test/helpers/fake_nodes.sh "$layout")
    expect_error "$name" "$want" "${MPI[@]}" -np "$np" "${wrap[@]}" ./train_gpt2_cpu "${args[@]}" "$@" -o "$TMP/refused_$np"
    [ ! -e "$TMP/refused_$np" ] && pass "$name: nothing written" || fail "$name: nothing written" "$(ls "$TMP/refused_$np")"
}
refused "--shard-group 4 on 6 ranks" "--shard-group 4: the group size must divide the world size 6" 6 one --shard-group 4
refused "--shard-group node on nodes of 4 and 2 ranks" "unequal numbers of ranks (node 0 has 4, node 1 has 2)" 6 "4,2" --shard-group node
refused "--shard-group 2 with ZeRO 0" "groups of 2 ranks need ZeRO 1 or 2" 4 one --shard-group 2 -z 0
expect_error "--shard-group 0" "--shard-group '0': expected a number of ranks per sharding group >= 1" \
    ./train_gpt2_cpu "${args[@]}" --shard-group 0
finish
