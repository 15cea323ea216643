#!/usr/bin/env bash
# Hybrid sharding on the CUDA backend under the simulator (the real llmc/cuda kernels on the CPU, NCCL served by MPI,
# the groups made with ncclCommSplit): groups of 2 and 3 on 4 and 6 ranks, ZeRO 1 and 2, on fake multi-node layouts
# (test/helpers/fake_nodes.sh, by node and round-robin), against one rank; and the bytes across groups against flat
# ZeRO-1's. docs/distributed.md, "Hybrid sharding".
#
# Tolerance: test/e2e/train_sim_world_test.sh's, derived there (test/helpers/sim_world_compare.sh), for its reason:
# each micro-batch's gradient is computed alike whatever the split, and the runs differ only in the order of the fp32
# sums (within a group, then across groups). A group left out of the sum, or
# a shard all-reduced into the wrong owner, changes the step-1 norm by far more.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
source test/helpers/sim_world_compare.sh
TMP=$(test_tmp_dir hybrid_shard_sim)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 6000 --val-tokens 600 >/dev/null \
    || { fail "make shards"; finish; }
BIN=build/train_gpt2_sim
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
STEPS=3
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=2,C=32,T=8,V=64" -b 1 -t 8 -d 96 -x $STEPS
      -v 3 -m 1 -s 0 -l 1e-2 --threads 1 --show-placement)
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x CUDA_VISIBLE_DEVICES=0 -x FAKE_NODES_CYCLIC)
if CUDA_VISIBLE_DEVICES=0 "$BIN" "${args[@]}" -o "$TMP/one" >"$TMP/one.log" 2>&1; then pass "simulated CUDA trainer, 1 rank"
else fail "simulated CUDA trainer, 1 rank" "$(tail -3 "$TMP/one.log")"; finish; fi

# NAME NP LAYOUT(one | nodes list | cyclic:list) GROUP-SIZE ARGS...
for run in "h4_node_z1 4 cyclic:2(x2) 2 -z 1 --shard-group node" "h4_2_z2 4 one 2 -z 2 --shard-group 2" \
           "h6_node_z2 6 cyclic:3(x2) 3 -z 2 --shard-group node" "h6_2_z1 6 3(x2) 2 -z 1 --shard-group 2" \
           "flat4_z1 4 one 4 -z 1"; do
    set -- $run
    name=$1 np=$2 layout=$3 n=$4; shift 4
    cyc=0 wrap=()
    [[ "$layout" == cyclic:* ]] && cyc=1 layout=${layout#cyclic:}
    [ "$layout" != one ] && wrap=(test/helpers/fake_nodes.sh "$layout")
    what="$np ranks ($layout$([ $cyc = 1 ] && echo ", round-robin")), $*"
    if ! FAKE_NODES_CYCLIC=$cyc "${MPI[@]}" -np "$np" "${wrap[@]}" "$BIN" "${args[@]}" "$@" -o "$TMP/$name" \
        >"$TMP/$name.log" 2>&1; then
        fail "simulated CUDA trainer, $what" "$(tail -3 "$TMP/$name.log")"; continue
    fi
    sim_world_compare "$TMP/one" "$TMP/$name" 1 12 0.06 >"$TMP/$name.cmp" 2>&1 \
        && pass "simulated CUDA trainer: $what matches one rank ($(tail -1 "$TMP/$name.cmp"))" \
        || fail "simulated CUDA trainer: $what matches one rank" "$(tail -2 "$TMP/$name.cmp")"
    [ "$n" = "$np" ] && continue
    /usr/bin/python3 test/helpers/hybrid_check.py placement "$TMP/$name.log" "$n" >"$TMP/$name.place" 2>&1 \
        && pass "simulated CUDA trainer, $what: $(tail -1 "$TMP/$name.place")" \
        || fail "simulated CUDA trainer, $what: placement" "$(tail -1 "$TMP/$name.place")"
done
/usr/bin/python3 test/helpers/hybrid_check.py bytes "$TMP/flat4_z1.log" "$TMP/h4_node_z1.log" 2 $STEPS >"$TMP/bytes4" 2>&1 \
    && pass "simulated NCCL, groups of 2 on 4 ranks: $(tail -1 "$TMP/bytes4")" \
    || fail "simulated NCCL, groups of 2 on 4 ranks: bytes across groups" "$(tail -1 "$TMP/bytes4")"
finish
