#!/usr/bin/env bash
# One rank through a real NCCL communicator (LLMC_NCCL_ONE_RANK=1, docs/distributed.md) under the CUDA simulator:
# the switch a one-GPU machine uses to exercise the NCCL path (the GPU kit's one-rank check). Against the same run on
# the single-process Comm: every collective over one rank is the identity (a sum or an average of one term is that
# term, exactly), so ZeRO 0 and ZeRO 1 (all-reduce; grouped reduces and all-gathers) must give the same bits. The file
# rendezvous (-pi fs) and the watchdog run too; rank 0 removes the id file once every rank joined. And an NCCL older
# than 2.18 (ncclCommSplit) is refused at start-up with its version.
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
BIN=build/train_gpt2_sim
[ -x "$BIN" ] || { fail "$BIN" "not built"; finish; }
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 3000 --val-tokens 600 >/dev/null \
    || { fail "make shards"; finish; }
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=2,NH=2,C=32,T=8,V=64" -b 2 -t 8 -x 3 -v 3
      -m 1 -s 0 -l 1e-2 --threads 1 --show-placement)
for z in 0 1; do
    CUDA_VISIBLE_DEVICES=0 "$BIN" "${args[@]}" -z $z -o "$TMP/single_z$z" >"$TMP/single_z$z.log" 2>&1 ||
        { fail "single-process comm, ZeRO-$z" "$(tail -2 "$TMP/single_z$z.log")"; continue; }
    mkdir -p "$TMP/rv_z$z"
    if ! LLMC_NCCL_ONE_RANK=1 CUDA_VISIBLE_DEVICES=0 "$BIN" "${args[@]}" -z $z -pi fs -pf "$TMP/rv_z$z" \
        --comm-timeout 60 -o "$TMP/nccl_z$z" >"$TMP/nccl_z$z.log" 2>&1; then
        fail "LLMC_NCCL_ONE_RANK=1, ZeRO-$z" "$(tail -2 "$TMP/nccl_z$z.log")"
        continue
    fi
    check "ZeRO-$z: the placement line names the comm (single / nccl)" \
        bash -c "grep -q '| comm single\$' '$TMP/single_z$z.log' && grep -q '| comm nccl\$' '$TMP/nccl_z$z.log'"
    check "ZeRO-$z: one rank through NCCL gives the single-process comm's bits (metrics and model.bin)" \
        /usr/bin/python3 test/helpers/same_run.py "$TMP/single_z$z" "$TMP/nccl_z$z" 0
    check "ZeRO-$z: the NCCL id file is removed once every rank joined" \
        bash -c "! ls '$TMP/rv_z$z' | grep -q nccl_id"
done
expect_error "an NCCL older than 2.18 is refused with its version" "at least 2.18 (21800) is needed (ncclCommSplit)" \
    env CUDASIM_NCCL_VERSION=21703 LLMC_NCCL_ONE_RANK=1 CUDA_VISIBLE_DEVICES=0 "$BIN" "${args[@]}" -o "$TMP/old"
finish
