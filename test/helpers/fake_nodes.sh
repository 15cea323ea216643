#!/usr/bin/env bash
# Runs a command as if `srun --mpi=pmix` had started it on several nodes, for tests on one machine:
#
#   mpirun -np 6 test/helpers/fake_nodes.sh "3(x2)" ./train_gpt2_cpu ...
#
# Each rank's OpenMPI environment (OMPI_COMM_WORLD_*) is replaced by a Slurm job step's (SLURM_PROCID,
# SLURM_NODEID, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE, ...) with the ranks laid out node by node as the
# tasks-per-node list says (Slurm's syntax: "3(x2)" = 3,3; "4,2"). MPI still connects the ranks (through PMIx, as
# under srun), but every rank is told it runs on its own node, so its local rank differs from its global rank:
# llmc/dist_info.h keeps the layout Slurm states (DistInfo::node_exact).
# FAKE_NODES_CYCLIC=1 places the ranks round-robin instead (srun --distribution=cyclic; every node must hold as
# many): rank r on node r % nodes, local rank r / nodes, so a node's ranks are not consecutive.
set -euo pipefail
list=$1; shift
rank=${OMPI_COMM_WORLD_RANK:?not started by OpenMPI\'s mpirun}
world=${OMPI_COMM_WORLD_SIZE:?not started by OpenMPI\'s mpirun}
counts=()
IFS=, read -ra entries <<<"$list"
for e in "${entries[@]}"; do
    if [[ "$e" =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
        for ((i = 0; i < BASH_REMATCH[2]; i++)); do counts+=("${BASH_REMATCH[1]}"); done
    elif [[ "$e" =~ ^[0-9]+$ ]]; then counts+=("$e")
    else echo "error: fake_nodes.sh: bad tasks-per-node list '$list' (e.g. \"3(x2)\" or \"4,2\")" >&2; exit 1; fi
done
first=0 node=-1 total=0
for ((n = 0; n < ${#counts[@]}; n++)); do
    if ((node < 0 && rank < total + counts[n])); then node=$n first=$total; fi
    total=$((total + counts[n]))
done
if ((total != world || node < 0)); then
    echo "error: fake_nodes.sh: '$list' places $total tasks, mpirun started $world" >&2; exit 1
fi
local_id=$((rank - first))
if [ "${FAKE_NODES_CYCLIC:-0}" = 1 ]; then
    for c in "${counts[@]}"; do
        if ((c != counts[0])); then echo "error: fake_nodes.sh: cyclic placement needs equal nodes, got '$list'" >&2; exit 1; fi
    done
    node=$((rank % ${#counts[@]})) local_id=$((rank / ${#counts[@]}))
fi
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE \
      OMPI_COMM_WORLD_NODE_RANK
export SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=$rank SLURM_NTASKS=$world SLURM_STEP_NUM_TASKS=$world \
       SLURM_NODEID=$node SLURM_LOCALID=$local_id SLURM_STEP_NUM_NODES=${#counts[@]} \
       SLURM_STEP_TASKS_PER_NODE=$list
# FAKE_SLURM_PMI2=1: as under srun --mpi=pmi2, which also sets PMI's variables (test/helpers/fake_slurm/srun).
if [ "${FAKE_SLURM_PMI2:-0}" = 1 ]; then export PMI_RANK=$rank PMI_SIZE=$world; fi
exec "$@"
