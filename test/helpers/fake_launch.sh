#!/usr/bin/env bash
# Runs a command under OpenMPI's mpirun as if a broken launch had started it, for test/e2e/launch_check_test.sh:
#
#   mpirun -np 2 test/helpers/fake_launch.sh MODE ./train_gpt2_cpu ...
#
#   hydra      MPICH/Intel MPI's mpiexec (Hydra) inside an srun step: the step's Slurm variables say one task
#              (rank 0 of 1, Hydra's proxy), PMI_RANK / PMI_SIZE say rank r of N (the N processes Hydra started)
#   world1     rank 0 sees that Slurm step of one task and no PMI_* variables (only MPI itself knows there are N
#              processes); the other ranks see a consistent step of N tasks
#   dup-local  a Slurm step of N tasks in which every task says it is local rank 0 on node 0
# OpenMPI's own OMPI_COMM_WORLD_* variables are removed; MPI still connects the ranks through PMIx.
set -euo pipefail
mode=$1; shift
rank=${OMPI_COMM_WORLD_RANK:?not started by OpenMPI\'s mpirun}
world=${OMPI_COMM_WORLD_SIZE:?not started by OpenMPI\'s mpirun}
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE \
      OMPI_COMM_WORLD_NODE_RANK
export SLURM_JOB_ID=4343 SLURM_STEP_ID=0 SLURM_NODEID=0 SLURM_LOCALID=0
case "$mode" in
    hydra)
        export SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_NUM_TASKS=1 SLURM_STEP_NUM_NODES=1 SLURM_STEP_TASKS_PER_NODE=1
        export PMI_RANK=$rank PMI_SIZE=$world
        ;;
    world1)
        n=$([ "$rank" = 0 ] && echo 1 || echo "$world")
        export SLURM_PROCID=$rank SLURM_NTASKS=$n SLURM_STEP_NUM_TASKS=$n SLURM_STEP_NUM_NODES=1 \
               SLURM_STEP_TASKS_PER_NODE=$n SLURM_LOCALID=$rank
        ;;
    dup-local)
        export SLURM_PROCID=$rank SLURM_NTASKS=$world SLURM_STEP_NUM_TASKS=$world SLURM_STEP_NUM_NODES=1 \
               SLURM_STEP_TASKS_PER_NODE=$world
        ;;
    *) echo "error: fake_launch.sh: unknown mode '$mode' (hydra, world1, dup-local)" >&2; exit 1 ;;
esac
exec "$@"
