#!/usr/bin/env bash
# Launches that cannot go wrong (docs/distributed.md, "Launching"): a launch whose ranks would not form one run stops
# before step 1, with a message naming the variables, and writes nothing into -o:
#   - MPICH/Intel MPI's Hydra inside an srun step (test/helpers/fake_launch.sh hydra: the step says 1 task, PMI says 2), and
#     rank 0 told of a one-task step while MPI started two processes (world1: only MPI_Comm_size knows), on the
#     CPU trainer (MpiComm) and the simulated CUDA trainer (NCCL);
#   - two ranks claiming the same (node, local rank) (dup-local).
# And scripts/multi_node/run_slurm.sbatch under a fake Slurm (test/helpers/fake_slurm/srun): its MPI plugin is SRUN_MPI,
# pmix by default, pmi2, or none with the -pi fs rendezvous; the three launches train alike (bit-identical to a plain
# mpirun run of the simulated CUDA trainer).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir launch_check)
/usr/bin/python3 test/helpers/make_synthetic_shards.py "$TMP/data" --vocab 64 --train-tokens 3000 --val-tokens 600 >/dev/null \
    || { fail "make shards"; finish; }
args=(-i "$TMP/data/syn_train_*.bin" -j "$TMP/data/syn_val_*.bin" -e "L=1,NH=2,C=32,T=8,V=64" -b 1 -t 8 -d 16 -x 2
      -v 2 -m 1 -s 0 -l 1e-2 --threads 1)
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x CUDA_VISIBLE_DEVICES=0 -np 2)

# refused NAME MODE BIN WANT...: the launch fails, its output has every WANT, and -o was not created.
refused() {
    local name=$1 mode=$2 bin=$3; shift 3
    local out="$TMP/out_${mode}_$(basename "$bin")" log="$TMP/${mode}_$(basename "$bin").log"
    if "${MPI[@]}" test/helpers/fake_launch.sh "$mode" "$bin" "${args[@]}" -o "$out" >"$log" 2>&1; then
        fail "$name" "the launch was accepted"; return
    fi
    local w
    for w in "$@"; do
        grep -qF -- "$w" "$log" || { fail "$name" "no '$w' in: $(grep error "$log" | head -2)"; return; }
    done
    [ -e "$out" ] && { fail "$name" "-o $out was created: $(ls -A "$out")"; return; }
    pass "$name: stopped before step 1, nothing written to -o"
}
for bin in ./train_gpt2_cpu build/train_gpt2_sim; do
    [ -x "$bin" ] || { fail "$bin" "not built"; continue; }
    refused "hydra inside srun ($bin)" hydra "$bin" "disagrees with the slurm environment's" "SLURM_STEP_NUM_TASKS=1"
    refused "rank 0 told of one task, MPI started two ($bin)" world1 "$bin" \
        "MPI sees rank 0 of 2 but the launcher's environment (slurm) says rank 0 of 1 (SLURM_PROCID=0, SLURM_STEP_NUM_TASKS=1)"
    refused "duplicate local ranks ($bin)" dup-local "$bin" "both say they are local rank 0 on node 0" \
        "SLURM_NODEID/SLURM_LOCALID"
done
# run_slurm.sbatch under the fake Slurm: 2 tasks on 2 nodes.
BIN=build/train_gpt2_sim
if [ -x "$BIN" ]; then
    "${MPI[@]}" "$BIN" "${args[@]}" -o "$TMP/plain" >"$TMP/plain.log" 2>&1 || fail "plain mpirun run" "$(tail -3 "$TMP/plain.log")"
    export FAKE_SRUN_LOG="$TMP/srun.log"
    for plugin in default pmi2 none; do
        env_plugin=(); [ "$plugin" != default ] && env_plugin=(SRUN_MPI=$plugin)
        env PATH="$PWD/test/helpers/fake_slurm:$PATH" SLURM_NTASKS=2 SLURM_TASKS_PER_NODE="1(x2)" SLURM_JOB_ID=4242 \
            SLURM_JOB_NUM_NODES=2 SLURM_SUBMIT_DIR="$PWD" TRAIN="$BIN" RENDEZVOUS_DIR="$TMP/rendezvous" "${env_plugin[@]}" \
            bash scripts/multi_node/run_slurm.sbatch "${args[@]}" -o "$TMP/slurm_$plugin" >"$TMP/slurm_$plugin.log" 2>&1 \
            || { fail "run_slurm.sbatch, SRUN_MPI=$plugin" "$(tail -3 "$TMP/slurm_$plugin.log")"; continue; }
        want=$([ "$plugin" = default ] && echo pmix || echo "$plugin")
        [ "$(tail -1 "$FAKE_SRUN_LOG")" = "--mpi=$want" ] || fail "run_slurm.sbatch, SRUN_MPI=$plugin" "srun got $(tail -1 "$FAKE_SRUN_LOG")"
        /usr/bin/python3 test/helpers/compare_runs.py "$TMP/plain" "$TMP/slurm_$plugin" 0 0 >"$TMP/cmp_$plugin" 2>&1 \
            && pass "run_slurm.sbatch with srun --mpi=$want: the plain mpirun run, bit for bit" \
            || fail "run_slurm.sbatch with srun --mpi=$want" "$(tail -2 "$TMP/cmp_$plugin")"
    done
    grep -q -- "-pi fs -pf $TMP/rendezvous" "$TMP/slurm_none.log" && [ -z "$(ls -A "$TMP/rendezvous")" ] \
        && pass "SRUN_MPI=none: the NCCL id went through RENDEZVOUS_DIR (-pi fs), removed after the rendezvous" \
        || fail "SRUN_MPI=none: -pi fs -pf RENDEZVOUS_DIR" "$(grep job "$TMP/slurm_none.log"; ls -A "$TMP/rendezvous")"
    expect_error "run_slurm.sbatch refuses an unknown SRUN_MPI" "expected pmix, pmi2 or none" \
        env PRINT_ONLY=1 SLURM_NTASKS=2 SRUN_MPI=pmi3 bash scripts/multi_node/run_slurm.sbatch -e d12
fi
finish
