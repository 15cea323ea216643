#!/usr/bin/env bash
# --sync-every H (llmc/outer_sync.h, docs/distributed.md "Periodic synchronisation") on the CPU trainer under mpirun:
# a tiny model (L=2, C=32, V=64: 30,080 parameters, a multiple of 128, so the replica's state is exactly n floats).
#   - refusals: H < 0, outer momentum outside [0, 1), outer lr <= 0, --reduce-dtype bf16 with it, -z 2 without
#     --shard-group; a resume with another H, other outer hyperparameters or another number of replicas; every one a
#     single line, nothing trained; a resume whose replicas take other sequences (another -b) is told so
#     (--sync-every with --shard-group: test/e2e/sync_hybrid_test.sh);
#   - the default (no flag) and --sync-every 0 are the same run byte for byte: model.bin, metrics.jsonl (timings
#     aside), every checkpoint file (meta.json included: version 2, as before the flag existed);
#   - one rank, H = 1, outer lr 1, momentum 0: averaging one replica is the identity, so the run is bit-identical
#     to plain training (model.bin and every loss and norm);
#   - two ranks, H = 1, outer lr 1, momentum 0: every checkpoint's replica files hold the same parameters on both
#     ranks (every outer step leaves the replicas identical); the averaging itself is checked exactly against an
#     independent average in test/unit/test_outer_sync_mpi.cpp;
#   - collectives: 8 steps with H = 1, 4, 8: 8/H outer steps, and the bytes rank 0 hands to collectives differ
#     between H and H' by exactly (8/H - 8/H') x 4n (one fp32 all-reduce of the replica per outer step; the
#     per-step loss all-reduce and validation are the same in every run); plain data parallelism hands more than
#     H = 1 does (gradients and the parameter gather every step);
#   - resume mid-period is exact: H = 4, checkpoints every 2 steps, the run resumed from step 6 (2 steps into its
#     second period) ends with the uninterrupted run's model.bin, metrics.jsonl (timings aside) and step-8
#     checkpoint files, byte for byte;
#   - the simulated CUDA trainer (bf16 parameters, NCCL served by MPI), H = 2: after each outer step both replicas
#     hold the same bf16 parameters and fp32 masters (and different ones mid-period), and a resume mid-period is
#     exact.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir sync_every)
BIN=./train_gpt2_cpu
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 20000 --val-tokens 2000 >/dev/null \
    || { fail "make shards"; finish; }
N=30080
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=16,V=64" -b 2 -t 16
      -v 4 -m 2 -s 0 -l 3e-3 --threads 1 -x 8)
train() {  # train NP NAME ARGS...
    local np=$1 name=$2; shift 2
    mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -np "$np" "$BIN" "${args[@]}" -d $((32 * np)) \
        -o "$TMP/$name" "$@" >"$TMP/$name.log" 2>&1 || { fail "train $name" "$(tail -3 "$TMP/$name.log")"; return 1; }
}
# same_run A B: metrics.jsonl without timings, model.bin and (when both have them) every checkpoint file.
same_run() {
    diff <(jq -c 'del(.ms, .tokens_per_sec, .mfu)' "$TMP/$1/metrics.jsonl") \
         <(jq -c 'del(.ms, .tokens_per_sec, .mfu)' "$TMP/$2/metrics.jsonl") >/dev/null || { echo "metrics.jsonl differs"; return 1; }
    cmp -s "$TMP/$1/model.bin" "$TMP/$2/model.bin" || { echo "model.bin differs"; return 1; }
    local f
    for f in $(cd "$TMP/$1" && ls -d ckpt_*/* 2>/dev/null); do
        [ -e "$TMP/$2/$f" ] || continue
        if [[ $f == */meta.json ]]; then  # metrics.jsonl's length (and so the checksum) varies with the timings
            diff <(jq 'del(.meta_crc32c, .metrics_bytes)' "$TMP/$1/$f") <(jq 'del(.meta_crc32c, .metrics_bytes)' "$TMP/$2/$f") \
                >/dev/null || { echo "$f differs"; return 1; }
        else
            cmp -s "$TMP/$1/$f" "$TMP/$2/$f" || { echo "$f differs"; return 1; }
        fi
    done
}
bytes() { sed -nE 's/^collectives: ([0-9]+) bytes.*/\1/p' "$TMP/$1.log"; }
outer_steps() { sed -nE 's/^outer sync: ([0-9]+) outer steps.*/\1/p' "$TMP/$1.log"; }

# ---- refusals ----------------------------------------------------------------------------------------------------
one=("$BIN" "${args[@]}" -d 32)
expect_error "--sync-every -1 is refused" "--sync-every -1: must be >= 0" "${one[@]}" --sync-every -1
expect_error "--outer-momentum 1 is refused" "--outer-momentum 1: must be in [0, 1)" "${one[@]}" --sync-every 4 --outer-momentum 1
expect_error "--outer-momentum -0.1 is refused" "--outer-momentum -0.1: must be in [0, 1)" "${one[@]}" --sync-every 4 --outer-momentum -0.1
expect_error "--outer-lr 0 is refused" "--outer-lr 0: must be in (0, 16]" "${one[@]}" --sync-every 4 --outer-lr 0
expect_error "--reduce-dtype bf16 with --sync-every is refused" "--reduce-dtype bf16 with --sync-every 4" \
    "${one[@]}" --sync-every 4 --reduce-dtype bf16

# ---- the default is today's run ------------------------------------------------------------------------------------
if train 2 plain -n 4 && train 2 zero -n 4 --sync-every 0; then
    d=$(same_run plain zero) && pass "--sync-every 0 is the default run byte for byte (model, metrics, checkpoints)" \
        || fail "--sync-every 0 is the default run byte for byte" "$d"
    v=$(jq .version "$TMP/plain/ckpt_00000004/meta.json")
    [ "$v" = 2 ] && ! grep -q '"sync"' "$TMP/plain/ckpt_00000004/meta.json" \
        && pass "without --sync-every checkpoints stay meta.json version 2, with no sync field" \
        || fail "without --sync-every checkpoints stay version 2" "version $v"
fi

# ---- one rank: averaging one replica is the identity -------------------------------------------------------------
if train 1 single && train 1 single_h1 --sync-every 1 --outer-lr 1 --outer-momentum 0; then
    d=$(same_run single single_h1) && pass "1 rank, --sync-every 1 --outer-lr 1 --outer-momentum 0: bit-identical to plain training" \
        || fail "1 rank, H=1 lr 1 mu 0: bit-identical to plain training" "$d"
fi

# ---- two ranks, H = 1, lr 1, momentum 0: the replicas leave every outer step identical ---------------------------
if train 2 avg -n 1 --sync-every 1 --outer-lr 1 --outer-momentum 0; then
    bad=""
    for s in 1 2 3 4 5 6 7 8; do
        c=$TMP/avg/$(printf 'ckpt_%08d' $s)
        # the first array of a replica file (after its 1024-byte header) is the replica's parameters
        cmp -s <(tail -c +1025 "$c/replica_00000.bin" | head -c $((4 * N))) \
               <(tail -c +1025 "$c/replica_00001.bin" | head -c $((4 * N))) || bad="$bad $s"
    done
    [ -z "$bad" ] && pass "2 ranks, H=1, lr 1, mu 0: both replicas hold the same parameters after every step" \
        || fail "2 ranks, H=1: replicas identical after every outer step" "differ at steps$bad"
    v=$(jq -c '[.version, .sync.every, .sync.last_sync_step, (.files | map(.name))]' "$TMP/avg/ckpt_00000003/meta.json")
    [ "$v" = '[3,1,3,["model.bin","replica_00000.bin","replica_00001.bin","outer.bin"]]' ] \
        && pass "--sync-every checkpoints: meta.json version 3 with sync, replica files and outer.bin" \
        || fail "--sync-every checkpoint layout" "$v"
fi

# ---- collectives: 1/H of the outer all-reduces ---------------------------------------------------------------------
# H=1 is the run above (the outer hyperparameters do not change the bytes), H=4 the one resumed below.
if train 2 h8 --sync-every 8 && train 2 h4 -n 2 --sync-every 4; then
    cp "$TMP/avg.log" "$TMP/h1.log"
    bad=""
    for H in 1 4 8; do
        o=$(outer_steps "h$H")
        [ "$o" = $((8 / H)) ] || bad="$bad H=$H: $o outer steps;"
        diff=$(( $(bytes h1) - $(bytes "h$H") ))
        [ "$diff" = $(( (8 - 8 / H) * 4 * N )) ] || bad="$bad H=$H: $diff bytes fewer than H=1;"
    done
    [ -z "$bad" ] && pass "8 steps: H=1, 4, 8 take 8/H outer steps, each one fp32 all-reduce of the $N parameters ($(bytes h1) .. $(bytes h8) bytes)" \
        || fail "8 steps: 8/H outer all-reduces" "$bad"
    [ "$(bytes plain)" -gt "$(bytes h1)" ] && pass "plain data parallelism hands more bytes to collectives than H=1 ($(bytes plain) vs $(bytes h1))" \
        || fail "plain data parallelism sends more than H=1" "$(bytes plain) vs $(bytes h1)"
fi

# ---- resume mid-period is exact ------------------------------------------------------------------------------------
if [ -f "$TMP/h4/model.bin" ]; then
    mkdir -p "$TMP/resumed" && cp -r "$TMP/h4/." "$TMP/resumed/" && rm -rf "$TMP/resumed/ckpt_00000008" "$TMP/resumed/model.bin"
    if train 2 resumed -n 2 --sync-every 4 -y 1; then
        grep -q "resume .*step 6" "$TMP/resumed.log" || fail "resume from step 6" "$(grep resume "$TMP/resumed.log")"
        d=$(same_run h4 resumed) && pass "H=4, resumed at step 6 (mid-period): model, metrics and step-8 checkpoint byte for byte" \
            || fail "H=4, resume mid-period is exact" "$d"
    fi
    ! grep -q "^note: each replica" "$TMP/resumed.log" && pass "the same -b and ranks per replica: no note" \
        || fail "a note on an exact resume" "$(grep '^note' "$TMP/resumed.log")"
    # Another -b: each replica now takes 1 sequence of each micro-step instead of 2 (other sequences, the same step's
    # in all): said, not silent.
    mkdir -p "$TMP/rb" && cp -r "$TMP/h4/." "$TMP/rb/" && rm -rf "$TMP/rb/ckpt_00000008" "$TMP/rb/model.bin"
    if train 2 rb -n 2 --sync-every 4 -y 1 -b 1; then
        grep -q "^note: each replica of the checkpoint's run took 2 sequence(s) of each micro-step (1 rank(s) x -b 2), this run's take 1 (1 x -b 1)" "$TMP/rb.log" \
            && pass "a resume whose replicas take other sequences (-b 2 -> 1) says so" || fail "no note on a resume with another -b" "$(grep -m2 -e '^note' -e '^resume' "$TMP/rb.log")"
    fi
    expect_error "-z 2 with --sync-every alone is refused (every rank a replica: nothing to shard)" \
        "-z 2 with --sync-every 4 and no --shard-group: every rank trains its own replica" \
        "$BIN" "${args[@]}" -d 64 -o "$TMP/z2" --sync-every 4 -z 2
    expect_error "a resume with another --sync-every is refused" "written with --sync-every 4, this run has --sync-every 2" \
        mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -np 2 "$BIN" "${args[@]}" -d 64 -o "$TMP/h4" -y 1 --sync-every 2
    expect_error "a resume with another --outer-lr is refused" "--outer-lr" \
        mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -np 2 "$BIN" "${args[@]}" -d 64 -o "$TMP/h4" -y 1 --sync-every 4 --outer-lr 0.5
    expect_error "a resume on another number of replicas is refused" "written by 2 rank(s) as 2 replica(s) of 1 rank with --sync-every 4, this run has 1 rank(s) as 1 replica(s) of 1 rank" \
        "$BIN" "${args[@]}" -d 64 -o "$TMP/h4" -y 1 --sync-every 4
    expect_error "a --sync-every checkpoint is not resumed without it" "written with --sync-every 4, this run has --sync-every 0" \
        mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -np 2 "$BIN" "${args[@]}" -d 64 -o "$TMP/h4" -y 1
fi

# ---- the CUDA backend under the simulator (NCCL served by MPI): bf16 parameters, the device copies ----------------
SIM=build/train_gpt2_sim
if [ -x "$SIM" ]; then
    /usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/simdata" --vocab 64 --train-tokens 4000 --val-tokens 1000 >/dev/null
    simargs=(-i "$TMP/simdata/syn_train_*.bin" -j "$TMP/simdata/syn_val_*.bin" -e "L=1,NH=2,C=32,T=8,V=64" -b 1 -t 8
             -d 16 -x 4 -v 2 -m 1 -s 0 --threads 1 --sync-every 2 -n 1)
    sim() {  # sim NAME ARGS...
        local name=$1; shift
        mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x CUDA_VISIBLE_DEVICES=0 -np 2 "$SIM" \
            "${simargs[@]}" -o "$TMP/$name" "$@" >"$TMP/$name.log" 2>&1 || { fail "simulated $name" "$(tail -3 "$TMP/$name.log")"; return 1; }
    }
    if sim sim_full; then
        NS=17120  # the parameters of L=1, C=32, V=64, T=8
        bad=""
        for s in 2 4; do
            c=$TMP/sim_full/ckpt_0000000$s
            for a in 0 3; do  # parameters and master weights; m and v are each replica's own
                cmp -s <(tail -c +$((1025 + a * 4 * NS)) "$c/replica_00000.bin" | head -c $((4 * NS))) \
                       <(tail -c +$((1025 + a * 4 * NS)) "$c/replica_00001.bin" | head -c $((4 * NS))) || bad="$bad step $s array $a;"
            done
        done
        cmp -s <(tail -c +1025 "$TMP/sim_full/ckpt_00000003/replica_00000.bin" | head -c $((4 * NS))) \
               <(tail -c +1025 "$TMP/sim_full/ckpt_00000003/replica_00001.bin" | head -c $((4 * NS))) && bad="$bad step 3 identical (no local step?)"
        [ -z "$bad" ] && pass "simulated CUDA, H=2: the replicas' bf16 parameters and masters are identical after each outer step, not in between" \
            || fail "simulated CUDA, H=2: replicas identical after each outer step" "$bad"
        mkdir -p "$TMP/sim_resumed" && cp -r "$TMP/sim_full/." "$TMP/sim_resumed/" \
            && rm -rf "$TMP/sim_resumed/ckpt_00000004" "$TMP/sim_resumed/model.bin"
        if sim sim_resumed -y 1; then
            d=$(same_run sim_full sim_resumed) && pass "simulated CUDA, H=2, resumed at step 3 (mid-period): model, metrics and step-4 checkpoint byte for byte" \
                || fail "simulated CUDA, resume mid-period is exact" "$d"
        fi
    fi
else
    fail "$SIM" "not built"
fi
finish
