#!/usr/bin/env bash
# A ZeRO shard made only of padding (docs/checkpoints.md, "Layout"): a model of 796 parameters on 8 ranks is padded to
# 1024 (a multiple of 8 x 128), so rank 7's shard [896, 1024) holds no parameter. Its optimizer file has the empty
# range [796, 796) (ShardPlan::logical_begin), and every checkpoint the run writes resumes with -y 1: on the same
# ranks bit for bit (ZeRO 0, 1, 2), on other world sizes within the reduction-order rounding of
# test/e2e/checkpoint_test.sh; a checkpoint of an earlier writer, which recorded that range as [896, 896), resumes
# too; a checkpoint whose files leave a gap is still refused; --sync-every replicas of sharding groups too. CPU
# trainer under mpirun, then the simulated CUDA trainer on 16 ranks.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir padding_shard)
BIN=${TRAIN_BIN:-./train_gpt2_cpu}
if ! command -v mpirun >/dev/null; then skip "padding-only shard" "mpirun not found"; finish; fi
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 >/dev/null || { fail "make shards"; finish; }
MPI=(mpirun --oversubscribe --allow-run-as-root)
# L=1, C=4, T=8, V=64 (Vp 128): wte 512 + wpe 32 + one layer 244 + lnf 8 = 796 parameters. -d 192 = 24 sequences of
# 8 tokens: whole micro-steps of -b 1 on 2, 3 and 8 ranks. A constant learning rate, so that a run of 4 steps
# resumed to 6 is the run of 6 (-x does not change the schedule).
run=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=1,C=4,T=8,V=64" -t 8 -b 1 -d 192 -v 3 -m 1
     -s 0 --threads 1 -l 3e-3 -k constant -n 2)
same_run() { /usr/bin/python3 test/helpers/same_run.py "$@"; }
# ranges META: num_params, then name:begin-end of every state file
ranges() {
    /usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))
print(m["num_params"], " ".join("%s:%d-%d" % (f["name"], f["begin"], f["end"]) for f in m["files"][1:]))' "$1"
}
# train NP OUT ARGS...: a run of NP ranks into OUT (log OUT.log); fails the test named $name on a non-zero exit.
train() {
    local np="$1" out="$2"; shift 2
    "${MPI[@]}" -np "$np" "$BIN" "${run[@]}" -o "$out" "$@" >"$out.log" 2>&1 || { fail "$name" "$(tail -2 "$out.log")"; return 1; }
}
# at_step DIR [RUN STEP]: RUN's (default: the reference's) checkpoint of STEP (default 4), and its metrics.jsonl as it
# was then (metrics_bytes), in DIR.
at_step() {
    local run="${2:-$TMP/full}" ckpt; ckpt=$(printf 'ckpt_%08d' "${3:-4}")
    mkdir -p "$1" && cp -r "$run/$ckpt" "$1/" && /usr/bin/python3 -c 'import json,sys; d=sys.argv[1]
n=json.load(open(d+"/"+sys.argv[3]+"/meta.json"))["metrics_bytes"]
open(d+"/metrics.jsonl","wb").write(open(sys.argv[2],"rb").read()[:n])' "$1" "$run/metrics.jsonl" "$ckpt"
}
# forge CKPT BEGIN FILE: FILE's range set to [BEGIN, BEGIN) in its header (uint64 begin and end at header words
# 6..9; the file cut to its 1024-byte header) and in meta.json, with the file's size and CRC and meta.json's checksum
# recomputed (test/helpers/meta_tool.py).
forge() {
    /usr/bin/python3 -c 'import struct,sys
with open(sys.argv[1], "r+b") as f: f.seek(24); f.write(struct.pack("<QQ", int(sys.argv[2]), int(sys.argv[2]))); f.truncate(1024)' \
        "$1/$3" "$2" &&
        /usr/bin/python3 test/helpers/meta_tool.py "$1/meta.json" "f('$3')['begin'] = $2; f('$3')['end'] = $2; refresh('$3')"
}

# The uninterrupted references, one per stage (ZeRO 0 all-reduces, 1 and 2 reduce: other sums, other bits).
for z in 0 1 2; do name="8 ranks, ZeRO $z, 6 steps (the uninterrupted reference)"; train 8 "$TMP/full$z" -x 6 -z $z; done
ln -s full1 "$TMP/full"
for z in 0 1 2; do
    name="8 ranks, ZeRO $z, 4 steps"; train 8 "$TMP/z$z" -x 4 -z $z || continue
    got=$(ranges "$TMP/z$z/ckpt_00000004/meta.json")
    if [[ "$got" == "796 "*"optim_00006.bin:768-796 optim_00007.bin:796-796" ]]; then
        pass "ZeRO $z: rank 7's shard lies in the padding and its file has the empty range [796, 796)"
    else fail "ZeRO $z: rank 7's file has the empty range [796, 796)" "$got"; fi
    name="ZeRO $z: the checkpoint of step 4 resumed with -y 1 on 8 ranks"; train 8 "$TMP/z$z" -x 6 -z $z -y 1 || continue
    grep -q "^resume .*step 4 (ZeRO-[0-9], optimizer state in 8 shard(s))" "$TMP/z$z.log" || { fail "$name" "no resume line"; continue; }
    same_run "$TMP/full$z" "$TMP/z$z" >/dev/null && pass "$name: bit-identical to the uninterrupted run" \
        || fail "$name: bit-identical to the uninterrupted run" "$(same_run "$TMP/full$z" "$TMP/z$z" 2>&1 | tail -1)"
done

# Other world sizes: 8 -> 3 (ZeRO 2) and 2 -> 8, where the resumed rank 7 reads nothing. Tolerances: those of
# test/e2e/checkpoint_test.sh (the fp32 gradient sums run in another order).
name="8 -> 3 ranks"; at_step "$TMP/re3"
if train 3 "$TMP/re3" -x 6 -z 2 -y 1; then
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/full" "$TMP/re3" 2e-5 1e-4 >"$TMP/re3.cmp" 2>&1 \
        && pass "8 ranks -> 3 ranks (ZeRO 2): $(tail -1 "$TMP/re3.cmp")" || fail "8 -> 3 ranks" "$(tail -2 "$TMP/re3.cmp")"
fi
name="2 ranks, 4 steps"; train 2 "$TMP/re8" -x 4 && rm -rf "$TMP/re8/ckpt_00000002"
name="2 -> 8 ranks"
if train 8 "$TMP/re8" -x 6 -y 1; then
    /usr/bin/python3 test/helpers/compare_runs.py "$TMP/full" "$TMP/re8" 2e-5 1e-4 >"$TMP/re8.cmp" 2>&1 \
        && pass "2 ranks -> 8 ranks: $(tail -1 "$TMP/re8.cmp")" || fail "2 -> 8 ranks" "$(tail -2 "$TMP/re8.cmp")"
fi

# An earlier writer's checkpoint: the empty range recorded at the shard's start, [896, 896), with valid checksums.
at_step "$TMP/legacy" && forge "$TMP/legacy/ckpt_00000004" 896 optim_00007.bin
if [[ "$(ranges "$TMP/legacy/ckpt_00000004/meta.json")" == *"optim_00007.bin:896-896" ]]; then
    name="an earlier writer's checkpoint ([896, 896)) resumes"
    if train 8 "$TMP/legacy" -x 6 -y 1; then
        same_run "$TMP/full" "$TMP/legacy" >/dev/null && pass "$name, bit-identical to the uninterrupted run" \
            || fail "$name, bit-identical" "$(same_run "$TMP/full" "$TMP/legacy" 2>&1 | tail -1)"
    fi
else fail "forge the earlier writer's range" "$(ranges "$TMP/legacy/ckpt_00000004/meta.json")"; fi

# Still refused: rank 6's range cut to [768, 768), so the files leave [768, 796) uncovered.
at_step "$TMP/gap" && forge "$TMP/gap/ckpt_00000004" 768 optim_00006.bin
expect_error "a checkpoint whose files leave a gap is refused" \
    "optim_00007.bin covers [796, 796), expected a range starting at 768" \
    "${MPI[@]}" -np 8 "$BIN" "${run[@]}" -o "$TMP/gap" -x 6 -y 1

# --sync-every with --shard-group 8 on 16 ranks: two replicas of 8 ranks, each group's plan padded to 1024, so shard 7
# of each replica (and of the outer state) is padding only; its replica and outer files have the empty range too.
name="--sync-every 2 --shard-group 8 on 16 ranks, 3 steps"
hyb=(-d 128 -x 3 --sync-every 2 --shard-group 8)
if train 16 "$TMP/sync" "${hyb[@]}"; then
    got=$(ranges "$TMP/sync/ckpt_00000002/meta.json")
    [[ "$got" == *"replica_00000_shard_00007.bin:796-796 "*"replica_00001_shard_00007.bin:796-796 "*"outer_shard_00007.bin:796-796" ]] \
        && pass "--sync-every --shard-group 8: shard 7's replica and outer files have the empty range [796, 796)" \
        || fail "--sync-every --shard-group 8: shard 7's files have the empty range" "$got"
    at_step "$TMP/sync_re" "$TMP/sync" 2
    name="--sync-every --shard-group 8: the checkpoint of step 2 resumed on 16 ranks"
    if train 16 "$TMP/sync_re" "${hyb[@]}" -y 1; then
        same_run "$TMP/sync" "$TMP/sync_re" >/dev/null && pass "$name, bit-identical" \
            || fail "$name, bit-identical" "$(same_run "$TMP/sync" "$TMP/sync_re" 2>&1 | tail -1)"
    fi
fi

# The simulated CUDA trainer (the same checkpoint code over the CUDA backend): L=1, NH=1, C=16 (head size 16, the
# smallest the attention kernels take), V=64: 5488 parameters, on 16 ranks padded to 6144, so rank 15's shard
# [5760, 6144) lies in the padding. Written at step 2, resumed to step 3: bit-identical to the run that went on.
SIM=build/train_gpt2_sim
if [ -x "$SIM" ]; then
    sim=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=1,C=16,T=8,V=64" -t 8 -b 1 -d 128 -v 0
         -s 0 -k constant -n 2 -x 3)
    SMPI=("${MPI[@]}" -x OMP_NUM_THREADS=1 -x CUDA_VISIBLE_DEVICES=0 -np 16 "$SIM" "${sim[@]}")
    if "${SMPI[@]}" -o "$TMP/sim" >"$TMP/sim.log" 2>&1; then
        got=$(ranges "$TMP/sim/ckpt_00000002/meta.json")
        [[ "$got" == "5488 "*"optim_00014.bin:5376-5488 optim_00015.bin:5488-5488" ]] \
            && pass "simulated CUDA, 16 ranks: rank 15's file has the empty range [5488, 5488)" \
            || fail "simulated CUDA, 16 ranks: rank 15's file has the empty range [5488, 5488)" "$got"
        at_step "$TMP/sim_re" "$TMP/sim" 2
        if "${SMPI[@]}" -o "$TMP/sim_re" -y 1 >"$TMP/sim_re.log" 2>&1; then
            same_run "$TMP/sim" "$TMP/sim_re" >/dev/null \
                && pass "simulated CUDA: the checkpoint of step 2 resumes on 16 ranks, bit-identical" \
                || fail "simulated CUDA: resumed bit-identical" "$(same_run "$TMP/sim" "$TMP/sim_re" 2>&1 | tail -1)"
        else fail "simulated CUDA: the checkpoint of step 2 resumes on 16 ranks" "$(tail -2 "$TMP/sim_re.log")"; fi
    else fail "simulated CUDA, 16 ranks, 3 steps" "$(tail -2 "$TMP/sim.log")"; fi
else
    fail "$SIM" "not built"
fi
finish
