#!/usr/bin/env bash
# Several nodes on one machine: mpirun -np 6 ranks of the CPU trainer told by their launcher environment
# (test/helpers/fake_nodes.sh: a Slurm job step's variables) that they sit on 2 or 3 nodes, so each rank's local rank differs
# from its global rank. Against the same run on one node (where local and global ranks agree, so a mix-up goes
# unnoticed), the multi-node runs must show:
#   - the placement every rank prints (--show-placement): node, local rank and GPU from the layout (the GPU a CUDA
#     rank would drive is its local rank), but the same data slice and ZeRO shard per global rank;
#   - bit-identical training: losses, grad norms and final parameters (ZeRO 1 on three layouts, ZeRO 2 on one);
#   - byte-identical checkpoints (model, every rank's optimizer state, meta.json);
#   - a resume on another layout (3 nodes) from the one-node run's checkpoint that ends where the one-node run ends.
# Bit-identity is a property of the math here, not luck: every layout runs the same 6 ranks with the same
# collectives (same kind, count and root per call) on MPI_COMM_WORLD, and MPI's reduction order depends on those and
# the communicator's size only (the layout changes launcher variables, not the communicator), so every sum is formed
# in the same order. A comparison across world sizes or collectives would need a tolerance (docs/distributed.md).
# A data loader or ZeRO plan fed the local rank reads or owns another rank's part on every node but the first, which
# changes the placement lines, the losses and the checkpoints.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir multinode)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 20000 >/dev/null || { fail "make shards"; finish; }
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -np 6)
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=3,NH=2,C=32,T=32,V=64" -b 1 -t 32 -d 384
      -x 6 -v 3 -m 2 -s 0 -l 3e-3 -n 3 --threads 1 --show-placement)

train() {  # train NAME LAYOUT ARGS...: LAYOUT "one" is a plain mpirun (one node)
    local name=$1 layout=$2; shift 2
    local wrap=(); [ "$layout" != one ] && wrap=(test/helpers/fake_nodes.sh "$layout")
    "${MPI[@]}" "${wrap[@]}" ./train_gpt2_cpu "${args[@]}" "$@" -o "$TMP/$name" >"$TMP/$name.log" 2>&1 \
        || { fail "train $name ($layout)" "$(tail -3 "$TMP/$name.log")"; return 1; }
}
# same ONE MULTI LAYOUT: the multi-node run against the one-node run.
same() {
    local one=$1 multi=$2 layout=$3
    /usr/bin/python3 test/helpers/multinode_check.py placement "$TMP/$one.log" "$TMP/$multi.log" "$layout" >"$TMP/$multi.place" 2>&1 \
        && pass "$multi: $(tail -1 "$TMP/$multi.place")" || fail "$multi: placement" "$(tail -1 "$TMP/$multi.place")"
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/$one" "$TMP/$multi" 0 0 >"$TMP/$multi.cmp" 2>&1 \
        && pass "$multi: losses, grad norms and parameters bit-identical to one node" \
        || fail "$multi: training bit-identical to one node" "$(tail -2 "$TMP/$multi.cmp")"
    /usr/bin/python3 test/helpers/multinode_check.py checkpoints "$TMP/$one" "$TMP/$multi" >"$TMP/$multi.ckpt" 2>&1 \
        && pass "$multi: $(tail -1 "$TMP/$multi.ckpt") to one node's" || fail "$multi: checkpoints" "$(tail -1 "$TMP/$multi.ckpt")"
}

if train one_z1 one -z 1; then
    train two_nodes_z1 "3(x2)" -z 1 && same one_z1 two_nodes_z1 "3(x2)"
    train three_nodes_z1 "2(x3)" -z 1 && same one_z1 three_nodes_z1 "2(x3)"
    train uneven_z1 "4,2" -z 1 && same one_z1 uneven_z1 "4,2"
    # The checker itself: the two-node run does not pass for a three-node layout.
    /usr/bin/python3 test/helpers/multinode_check.py placement "$TMP/one_z1.log" "$TMP/two_nodes_z1.log" "2(x3)" >/dev/null 2>&1 \
        && fail "the placement check notices a wrong layout" "passed" || pass "the placement check notices a wrong layout"
    # Resume on 3 nodes from the one-node run's checkpoint of step 3.
    mkdir -p "$TMP/resumed" && cp -r "$TMP/one_z1/ckpt_00000003" "$TMP/one_z1/metrics.jsonl" "$TMP/resumed/"
    if train resumed "2(x3)" -z 1 -y 1; then
        grep -q "^resume .*step 3" "$TMP/resumed.log" && /usr/bin/python3 test/helpers/compare_runs.py "$TMP/one_z1" "$TMP/resumed" 0 0 >"$TMP/resumed.cmp" 2>&1 \
            && pass "resumed on 3 nodes from the one-node checkpoint: bit-identical to the uninterrupted run" \
            || fail "resumed on 3 nodes from the one-node checkpoint" "$(tail -2 "$TMP/resumed.cmp" 2>/dev/null; grep resume "$TMP/resumed.log")"
    fi
fi
if train one_z2 one -z 2; then
    train three_nodes_z2 "2(x3)" -z 2 && same one_z2 three_nodes_z2 "2(x3)"
fi
finish
