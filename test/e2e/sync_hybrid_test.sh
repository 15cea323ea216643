#!/usr/bin/env bash
# --sync-every H with --shard-group N (docs/distributed.md, "Periodic synchronisation of sharding groups"): each
# sharding group of N ranks is one replica, trained with ZeRO within the group and no gradient reduction across
# groups; every H steps the outer step averages each rank's shard across the groups. CPU trainer under mpirun, a tiny
# model (L=2, C=32, V=64: 30,080 parameters), then the simulated CUDA trainer.
#
#   (a) H=1, outer lr 1, momentum 0 (parameter averaging after every step) on 4 ranks in groups of 2 (and 6 ranks in
#       groups of 3) against the flat --sync-every run on 2 ranks with -b 2 (-b 3): replica r reads the same sequences
#       in both (dp ranks rN .. rN+N-1 read the blocks of B = 1 that make up rank r's block of B = N), so the runs
#       are the same mathematics and differ only in fp32 summation order: one backward over N sequences against N
#       backwards of one sequence summed by the group's reduction. Tolerance of test/e2e/train_mpi_test.sh, for its
#       reason: losses and norms ~1e-7 relative (checked at 2e-5), parameters ~1e-6 absolute, AdamW turning rounding
#       noise of near-zero gradients into steps of up to lr (checked at 1e-4, a thirtieth of one step's movement at
#       lr 3e-3). The check can fail: plain hybrid sharding (gradients averaged across the groups, one AdamW) is a
#       different algorithm and lies outside it. DiLoCo's outer step (0.7, 0.9) with H = 2 is compared the same way:
#       the Nesterov step is elementwise, each rank applying it to its shard, and multiplies a difference between the
#       runs by at most lr (1 + mu / (1 - mu)) = 7 (docs/distributed.md), which the tolerance's 30x margin over the
#       observed 3e-6 of plain averaging covers. Exactly: --shard-group node on 2 fake nodes with round-robin rank
#       placement is the one-node run bit for bit (parameters and norms), and --shard-group 1 --sync-every 2 is
#       --sync-every 2 byte for byte (the same collectives on the same data; checkpoints included).
#   (b) bytes across groups (--show-placement's per-rank counters of the replica comm): with H = 4 over 8 steps each
#       rank hands exactly 1/4 of what plain hybrid sharding hands (8 gradient-shard all-reduces against 2 outer
#       all-reduces of the same shard), for ZeRO 1 and 2; and in all R x 4 bytes x parameters x outer steps.
#   (c) a run killed inside its step-8 checkpoint (the writers SIGKILL themselves, LLMC_TEST_CRASH_IN_CHECKPOINT)
#       resumes from step 6, mid-period, and ends with the uninterrupted run's metrics.jsonl (timings aside), model.bin and
#       step-8 checkpoint files, byte for byte; the checkpoint is meta.json version 4 with its files per shard.
#   (d) another layout: the same number of replicas with another group size resumes (4 ranks in groups of 2 from 2
#       flat ranks and back, -b scaled so each replica reads the same sequences: the tolerances of (a)); another number
#       of replicas is refused with one line naming both layouts, and the checkpoint is left as it was.
#   (sim) the CUDA backend under the simulator (bf16 parameters, NCCL over MPI, groups made with ncclCommSplit), 4
#       ranks in groups of 2, H=2: after each outer step both replicas hold the same bf16 parameters and fp32 masters
#       shard by shard (and different ones mid-period), a resume mid-period is exact, and the run matches 2 flat
#       replicas with -b 2.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir sync_hybrid)
BIN=./train_gpt2_cpu
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 20000 --val-tokens 2000 >/dev/null \
    || { fail "make shards"; finish; }
P=30080
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=16,V=64" -t 16 -v 4 -m 2 -s 0
      -l 3e-3 --threads 1 -x 8 --show-placement)
train() {  # train NP NAME ARGS...
    local np=$1 name=$2; shift 2
    "${MPI[@]}" -np "$np" "$BIN" "${args[@]}" -o "$TMP/$name" "$@" >"$TMP/$name.log" 2>&1 \
        || { fail "train $name" "$(grep -m1 error "$TMP/$name.log" || tail -3 "$TMP/$name.log")"; return 1; }
}
close() {  # close A B WHAT: compare_runs at (a)'s tolerances
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/$1" "$TMP/$2" 2e-5 1e-4 >"$TMP/$2.cmp" 2>&1 \
        && pass "$3 ($(tail -1 "$TMP/$2.cmp"))" || fail "$3" "$(tail -2 "$TMP/$2.cmp")"
}
# same_run A B: metrics.jsonl without timings, model.bin and every checkpoint file both have (meta.json without its
# checksum and metrics_bytes, which follow the timings' text).
same_run() {
    diff <(jq -c 'del(.ms, .tokens_per_sec, .mfu)' "$TMP/$1/metrics.jsonl") \
         <(jq -c 'del(.ms, .tokens_per_sec, .mfu)' "$TMP/$2/metrics.jsonl") >/dev/null || { echo "metrics.jsonl differs"; return 1; }
    cmp -s "$TMP/$1/model.bin" "$TMP/$2/model.bin" || { echo "model.bin differs"; return 1; }
    local f n=0
    for f in $(cd "$TMP/$1" && ls -d ckpt_*/* 2>/dev/null); do
        [ -e "$TMP/$2/$f" ] || continue
        n=$((n + 1))
        if [[ $f == */meta.json ]]; then
            diff <(jq 'del(.meta_crc32c, .metrics_bytes)' "$TMP/$1/$f") <(jq 'del(.meta_crc32c, .metrics_bytes)' "$TMP/$2/$f") \
                >/dev/null || { echo "$f differs"; return 1; }
        else
            cmp -s "$TMP/$1/$f" "$TMP/$2/$f" || { echo "$f differs"; return 1; }
        fi
    done
    [ "$n" -gt 0 ] || { echo "no checkpoint file in common"; return 1; }  # every comparison here checkpoints
    echo "$n checkpoint files"
}
across() { sed -nE 's/^comm bytes: rank ([0-9]+) .*across groups ([0-9]+)$/\1 \2/p' "$TMP/$1.log" | sort -n; }

# ---- what stays refused: one line, before step 1, nothing written ---------------------------------------------------
refused() {  # refused NAME WANT ARGS...
    local name=$1 want=$2; shift 2
    expect_error "$name" "$want" "${MPI[@]}" -np 4 "$BIN" "${args[@]}" -b 1 -d 128 -o "$TMP/refused" "$@"
    [ ! -e "$TMP/refused" ] || fail "$name: nothing written" "$(ls "$TMP/refused")"
}
refused "--reduce-dtype bf16 with --sync-every and --shard-group" "--reduce-dtype bf16 with --sync-every 4" \
    --sync-every 4 --shard-group 2 --reduce-dtype bf16
refused "ZeRO 0 in groups smaller than the world, with --sync-every" "groups of 2 ranks need ZeRO 1 or 2" \
    --sync-every 4 --shard-group 2 -z 0

# ---- (a) parameter averaging after every step equals the flat run with the same data per replica ------------------
avg=(--sync-every 1 --outer-lr 1 --outer-momentum 0)
if train 4 g4_avg -b 1 -d 128 --shard-group 2 "${avg[@]}" && train 2 f2_avg -b 2 -d 128 "${avg[@]}"; then
    close f2_avg g4_avg "4 ranks in groups of 2, H=1, lr 1, mu 0 = 2 flat replicas with -b 2"
    grep -q "^sync .*over 2 replica(s) of 2 rank(s)" "$TMP/g4_avg.log" && pass "the start-up line names 2 replicas of 2 ranks" \
        || fail "the sync start-up line" "$(grep '^sync' "$TMP/g4_avg.log")"
    if train 4 g4_plain -b 1 -d 128 --shard-group 2; then  # gradients averaged across groups: another algorithm
        /usr/bin/python3 test/helpers/compare_runs.py "$TMP/f2_avg" "$TMP/g4_plain" 2e-5 1e-4 >/dev/null 2>&1 \
            && fail "the comparison can fail: plain hybrid sharding is outside it" "it passed" \
            || pass "the comparison can fail: plain hybrid sharding (no averaging of replicas) is outside it"
    fi
fi
# Round-robin placement on 2 nodes (test/helpers/fake_nodes.sh, srun --distribution=cyclic) with --shard-group node:
# the mesh orders the ranks by node, so each node is a replica reading the blocks of its dp ranks; every sum of
# parameters or gradients has two terms (fl(a + b) = fl(b + a)), so parameters and norms must equal the one-node
# run's bit for bit; only the logged loss, a mean over the 4 world ranks in world-rank order, may differ in rounding.
if [ -f "$TMP/g4_avg/model.bin" ] && FAKE_NODES_CYCLIC=1 "${MPI[@]}" -x FAKE_NODES_CYCLIC -np 4 test/helpers/fake_nodes.sh "2(x2)" \
    "$BIN" "${args[@]}" -o "$TMP/g4_cyclic" -b 1 -d 128 --shard-group node "${avg[@]}" >"$TMP/g4_cyclic.log" 2>&1; then
    /usr/bin/python3 test/helpers/hybrid_check.py placement "$TMP/g4_cyclic.log" 2 >"$TMP/g4_cyclic.place" 2>&1 \
        && pass "round-robin on 2 nodes, --shard-group node: $(tail -1 "$TMP/g4_cyclic.place")" \
        || fail "round-robin on 2 nodes: placement" "$(tail -1 "$TMP/g4_cyclic.place")"
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/g4_avg" "$TMP/g4_cyclic" 2e-5 0 0 >"$TMP/g4_cyclic.cmp" 2>&1 \
        && pass "round-robin on 2 nodes, a replica per node: parameters and norms bit-identical to one node ($(tail -1 "$TMP/g4_cyclic.cmp"))" \
        || fail "round-robin on 2 nodes = one node" "$(tail -2 "$TMP/g4_cyclic.cmp")"
elif [ -f "$TMP/g4_avg/model.bin" ]; then
    fail "round-robin on 2 nodes, --shard-group node" "$(grep -m1 error "$TMP/g4_cyclic.log" || tail -3 "$TMP/g4_cyclic.log")"
fi
if train 6 g6_avg -b 1 -d 192 --shard-group 3 "${avg[@]}" && train 2 f2b3_avg -b 3 -d 192 "${avg[@]}"; then
    close f2b3_avg g6_avg "6 ranks in groups of 3, H=1, lr 1, mu 0 = 2 flat replicas with -b 3"
fi
# DiLoCo's outer step (lr 0.7, Nesterov momentum 0.9) per shard: the same comparison, H = 2.
if train 4 g4_nesterov -b 1 -d 128 --shard-group 2 --sync-every 2 && train 2 f2_nesterov -b 2 -d 128 --sync-every 2; then
    close f2_nesterov g4_nesterov "4 ranks in groups of 2, H=2, outer lr 0.7, momentum 0.9 = 2 flat replicas with -b 2"
fi
if train 2 f2_h2 -b 1 -d 64 -n 3 --sync-every 2 && train 2 g2x1_h2 -b 1 -d 64 -n 3 --sync-every 2 --shard-group 1; then
    d=$(same_run f2_h2 g2x1_h2) && pass "--shard-group 1 --sync-every 2 is --sync-every 2 byte for byte ($d)" \
        || fail "--shard-group 1 --sync-every 2 is --sync-every 2" "$d"
fi

# ---- (b) bytes across groups: 1/H of hybrid sharding's -------------------------------------------------------------
sync4=(--sync-every 4 --shard-group 2 -b 1 -d 128)
for z in 1 2; do
    [ $z = 1 ] && { train 4 g4_h4 -n 2 "${sync4[@]}" || continue; s=g4_h4 p=g4_plain; }
    [ $z = 2 ] && { train 4 g4_h4_z2 -z 2 "${sync4[@]}" && train 4 g4_plain_z2 -z 2 -b 1 -d 128 --shard-group 2 || continue; s=g4_h4_z2 p=g4_plain_z2; }
    [ -f "$TMP/$p.log" ] || continue
    got=$(join <(across "$s") <(across "$p") | awk '{ n++; if ($2 * 4 != $3 || $2 == 0) bad = bad " rank " $1 ": " $2 " vs " $3;
                                                     sum += $2 } END { print n, sum, (bad == "" ? "ok" : bad) }')
    read -r n sum verdict <<<"$got"
    [ "$n" = 4 ] && [ "$verdict" = ok ] && [ "$sum" = $((2 * 4 * P * 2)) ] \
        && pass "ZeRO-$z, H=4, 8 steps: every rank hands exactly 1/4 of hybrid sharding's bytes across groups ($sum in all = R x 4 x $P x 2 outer steps)" \
        || fail "ZeRO-$z: bytes across groups 1/H of hybrid sharding's" "$got"
done
[ -f "$TMP/g4_h4_z2/model.bin" ] && close g4_h4 g4_h4_z2 "ZeRO-2 replicas = ZeRO-1 replicas (reduction order within the group)"

# ---- (c) killed inside a checkpoint, resumed mid-period: byte for byte ------------------------------------------------
if [ -f "$TMP/g4_h4/model.bin" ]; then
    v=$(jq -c '[.version, .world_size, .sync.shard_group, .sync.last_sync_step, (.files | map(.name))]' "$TMP/g4_h4/ckpt_00000006/meta.json")
    [ "$v" = '[4,4,2,4,["model.bin","replica_00000_shard_00000.bin","replica_00000_shard_00001.bin","replica_00001_shard_00000.bin","replica_00001_shard_00001.bin","outer_shard_00000.bin","outer_shard_00001.bin"]]' ] \
        && pass "the checkpoint: meta.json version 4, 2 replicas x 2 shard files, the outer state per shard" \
        || fail "the version-4 checkpoint layout" "$v"
    if "${MPI[@]}" -x LLMC_TEST_CRASH_IN_CHECKPOINT=8 -np 4 "$BIN" "${args[@]}" -o "$TMP/killed" -n 2 "${sync4[@]}" \
        >"$TMP/killed_1.log" 2>&1; then
        fail "the run killed inside checkpoint 8" "it exited 0"
    elif [ -e "$TMP/killed/ckpt_00000008/meta.json" ] || [ ! -e "$TMP/killed/ckpt_00000006/meta.json" ]; then
        fail "the run killed inside checkpoint 8" "$(ls "$TMP/killed"/ckpt_*)"
    elif train 4 killed -n 2 "${sync4[@]}" -y 1; then
        grep -q "^resume .*step 6" "$TMP/killed.log" || fail "resume from step 6" "$(grep resume "$TMP/killed.log")"
        d=$(same_run g4_h4 killed) && pass "killed in checkpoint 8, resumed at step 6 (mid-period): metrics, model and checkpoints byte for byte ($d)" \
            || fail "killed, resumed mid-period: byte for byte" "$d"
    fi
fi

# ---- (d) another layout: the same replicas resume, other replicas are refused -----------------------------------------
resume_from() {  # resume_from SRC STEP NAME NP ARGS...: NAME starts from SRC's checkpoint STEP and metrics
    local src=$1 step=$2 name=$3 np=$4; shift 4
    mkdir -p "$TMP/$name" && cp -r "$TMP/$src/$(printf 'ckpt_%08d' "$step")" "$TMP/$src/metrics.jsonl" "$TMP/$name/"
    train "$np" "$name" -y 1 "$@" && grep -q "^resume .*step $step" "$TMP/$name.log"
}
if [ -f "$TMP/g4_h4/model.bin" ]; then
    resume_from g4_h4 6 g4_to_f2 2 -b 2 -d 128 --sync-every 4 \
        && close g4_h4 g4_to_f2 "2 replicas of 2 ranks -> 2 replicas of 1 rank (-b 2), resumed at step 6"
    ! grep -q "^note: each replica" "$TMP/g4_to_f2.log" \
        && pass "... each replica takes the same sequences (2 ranks x -b 1 = 1 x -b 2): no note" \
        || fail "a note on a resume whose replicas take the same sequences" "$(grep '^note' "$TMP/g4_to_f2.log")"
    # The same replicas with another number of ranks each and -b kept: each replica now takes 1 sequence of each
    # micro-step instead of 2, other sequences than the checkpoint's run would have: accepted, and said.
    resume_from g4_h4 6 g4_to_f2_b1 2 -b 1 -d 128 --sync-every 4 \
        && grep -q "^note: each replica of the checkpoint's run took 2 sequence(s) of each micro-step (2 rank(s) x -b 1), this run's take 1 (1 x -b 1)" "$TMP/g4_to_f2_b1.log" \
        && pass "2 replicas of 2 ranks -> 2 replicas of 1 rank with -b kept: the note says each replica takes other sequences" \
        || fail "a resume on fewer ranks per replica says nothing" "$(grep -m2 -e '^note' -e '^resume' -e error "$TMP/g4_to_f2_b1.log")"
    before=$(cd "$TMP/g4_h4" && md5sum ckpt_00000006/* metrics.jsonl)
    expect_error "another number of replicas is refused, naming both layouts" \
        "written by 4 rank(s) as 2 replica(s) of 2 ranks with --sync-every 4, this run has 4 rank(s) as 4 replica(s) of 1 rank" \
        "${MPI[@]}" -np 4 "$BIN" "${args[@]}" -o "$TMP/g4_h4" -y 1 -b 1 -d 128 --sync-every 4
    expect_error "one replica of 4 ranks is refused too" \
        "this run has 4 rank(s) as 1 replica(s) of 4 ranks" \
        "${MPI[@]}" -np 4 "$BIN" "${args[@]}" -o "$TMP/g4_h4" -y 1 -b 1 -d 128 --sync-every 4 --shard-group 4
    [ "$before" = "$(cd "$TMP/g4_h4" && md5sum ckpt_00000006/* metrics.jsonl)" ] \
        && pass "the refused resumes left the checkpoint and metrics.jsonl as they were" || fail "refused resumes changed files"
fi
if train 2 f2_h4 -n 2 -b 2 -d 128 --sync-every 4; then
    resume_from f2_h4 6 f2_to_g4 4 -b 1 "${sync4[@]}" \
        && close f2_h4 f2_to_g4 "2 replicas of 1 rank (version 3) -> 2 replicas of 2 ranks (-b 1), resumed at step 6"
fi

# ---- (sim) the CUDA backend under the simulator --------------------------------------------------------------------
SIM=build/train_gpt2_sim
if [ -x "$SIM" ]; then
    /usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/simdata" --vocab 64 --train-tokens 4000 --val-tokens 1000 >/dev/null
    simargs=(-i "$TMP/simdata/syn_train_*.bin" -j "$TMP/simdata/syn_val_*.bin" -e "L=1,NH=2,C=32,T=8,V=64" -t 8
             -d 32 -x 4 -v 2 -m 1 -s 0 --threads 1 --sync-every 2)
    sim() {  # sim NP NAME ARGS...
        local np=$1 name=$2; shift 2
        "${MPI[@]}" -x CUDA_VISIBLE_DEVICES=0 -np "$np" "$SIM" "${simargs[@]}" -o "$TMP/$name" "$@" >"$TMP/$name.log" 2>&1 \
            || { fail "simulated $name" "$(grep -m1 error "$TMP/$name.log" || tail -3 "$TMP/$name.log")"; return 1; }
    }
    if sim 4 sim_full -b 1 --shard-group 2 -n 1; then
        bad=""
        shard_bytes() {  # shard_bytes CKPT REPLICA SHARD ARRAY: that array of the shard file
            local f=$TMP/sim_full/$1/replica_0000$2_shard_0000$3.bin
            local n=$(( ($(stat -c %s "$f") - 1024) / 16 ))
            tail -c +$((1025 + $4 * 4 * n)) "$f" | head -c $((4 * n))
        }
        for s in 2 4; do
            for sh in 0 1; do
                for a in 0 3; do  # parameters and master weights; m and v are each replica's own
                    cmp -s <(shard_bytes "ckpt_0000000$s" 0 $sh $a) <(shard_bytes "ckpt_0000000$s" 1 $sh $a) \
                        || bad="$bad step $s shard $sh array $a;"
                done
            done
        done
        cmp -s <(shard_bytes ckpt_00000003 0 0 0) <(shard_bytes ckpt_00000003 1 0 0) && bad="$bad step 3 identical (no local step?)"
        [ -z "$bad" ] && pass "simulated CUDA, 2 replicas of 2 ranks, H=2: both replicas' bf16 parameters and masters identical shard by shard after each outer step, not in between" \
            || fail "simulated CUDA: replicas identical after each outer step" "$bad"
        mkdir -p "$TMP/sim_resumed" && cp -r "$TMP/sim_full/." "$TMP/sim_resumed/" \
            && rm -rf "$TMP/sim_resumed/ckpt_00000004" "$TMP/sim_resumed/model.bin"
        if sim 4 sim_resumed -b 1 --shard-group 2 -n 1 -y 1; then
            d=$(same_run sim_full sim_resumed) && pass "simulated CUDA, resumed at step 3 (mid-period): model, metrics and step-4 checkpoint byte for byte ($d)" \
                || fail "simulated CUDA, resume mid-period is exact" "$d"
        fi
        # Against 2 flat replicas with -b 2 (the same sequences per replica): the tolerances of
        # test/e2e/train_sim_world_test.sh (losses 1e-5, norms 1e-4 relative, parameters 2 lr x steps = 2.4e-3), for
        # its reason: the runs differ only in the order of fp32 sums.
        if sim 2 sim_flat -b 2; then
            /usr/bin/python3 test/helpers/compare_runs.py "$TMP/sim_flat" "$TMP/sim_full" 1e-5 2.4e-3 1e-4 >"$TMP/sim.cmp" 2>&1 \
                && pass "simulated CUDA, 2 replicas of 2 ranks = 2 flat replicas with -b 2 ($(tail -1 "$TMP/sim.cmp"))" \
                || fail "simulated CUDA, 2 replicas of 2 ranks = 2 flat replicas" "$(tail -2 "$TMP/sim.cmp")"
        fi
    fi
else
    fail "$SIM" "not built"
fi
finish
