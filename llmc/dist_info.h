// Where this process sits in a distributed run: rank, world size, local rank/size, node, GPU.
//
// Computed in ONE place from the launcher's environment, as a pure function of an environment map so that every
// layout (1 GPU, 8 GPUs on one node, several nodes, uneven Slurm layouts) is unit-tested (test/unit/test_dist_info.cpp).
//
// Launchers recognised, first match wins (an inner launcher is checked before an outer one, so torchrun started by
// srun reports torchrun's layout, and mpirun inside a Slurm allocation reports mpirun's):
//   openmpi    OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE            (mpirun, OpenMPI)
//   mvapich    MV2_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE              (mpirun_rsh, MVAPICH2)
//   pmi        PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS                 (MPICH Hydra, Intel MPI)
//   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK           (torchrun-style launchers)
//   slurm      SLURM_PROCID, SLURM_STEP_NUM_TASKS / SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
//              SLURM_STEP_NUM_NODES / SLURM_NNODES, SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE
//              (only inside an srun job step: the batch script itself is one process, not task 0 of N)
//   single     none of the above: one process
// Command-line overrides (llm.c's -pn processes, -pr rank, -pg GPUs per node) replace the environment's answer.
//
// The GPU a rank drives is its local rank, unless CUDA_VISIBLE_DEVICES lists fewer devices than there are local
// ranks (e.g. Slurm's --gpus-per-task=1 shows each task exactly one GPU): then it is local_rank modulo that count.
// The data loader and the ZeRO plan use the GLOBAL rank only; the local rank picks the GPU and nothing else
// (test/e2e/multinode_test.sh runs ranks that believe they are on 2 or 3 nodes and checks this).
#pragma once

#include <map>
#include <string>

namespace llmc {

struct DistInfo {
    int rank = 0, world_size = 1;        // global
    int local_rank = 0, local_size = 1;  // within this node
    int node = 0, num_nodes = 1;
    int device = 0;                      // GPU this rank drives (normally = local_rank)
    std::string launcher = "single";     // which environment it came from (see above)
    // True when the node index was derived by assuming ranks are placed node by node (rank / local_size); an MPI
    // launcher does not export the node index, so MpiComm replaces it with the real mapping (mpi_env.h).
    bool node_assumed = false;
    // True when the launcher named this rank's node and local rank itself (Slurm's SLURM_NODEID / SLURM_LOCALID,
    // torchrun's GROUP_RANK / LOCAL_RANK, the command line's -pn/-pr/-pg): MpiComm keeps that layout as it is.
    bool node_exact = false;

    bool is_main() const { return rank == 0; }
    std::string describe() const;  // "rank 3/8 (local 3/8, node 0/1, gpu 3, openmpi)"
};

using EnvMap = std::map<std::string, std::string>;

// The process environment as a map (the only impure step; everything else takes the map).
EnvMap current_environment();

// Command-line overrides; a value < 0 means "not given".
struct DistOverrides {
    int num_processes = -1;  // -pn
    int process_rank = -1;   // -pr
    int gpus_per_node = -1;  // -pg
};

// The layout for this process. Fails (llmc::fail) with the variable, its value and what was expected when a
// variable is not an integer or the layout is inconsistent (rank >= world size, local rank >= local size, ...).
DistInfo compute_dist_info(const EnvMap& env, const DistOverrides& overrides = DistOverrides());

// Throws unless 0 <= rank < world_size, 0 <= local_rank < local_size <= world_size, 0 <= node < num_nodes <=
// world_size, device >= 0. `source` names where the values came from, for the message.
void validate_dist_info(const DistInfo& d, const std::string& source);

// True when the process was started by an MPI launcher (mpirun/mpiexec of OpenMPI, MPICH, Intel MPI, MVAPICH2, or
// srun with a PMI/PMIx plugin), i.e. MPI_Init will find its peers. A plain `./train_gpt2_cpu` returns false and
// never touches MPI.
bool launched_with_mpi(const EnvMap& env);

// A tag that identifies this launch (job, step, restart), for naming rendezvous files: LLMC_RUN_ID if set, else
// Slurm's job.step[.restart], torchrun's run id[.restart], MASTER_ADDR:MASTER_PORT, or "default".
std::string launch_tag(const EnvMap& env);

// The GPU a rank with this local rank drives under this environment's CUDA_VISIBLE_DEVICES (see above).
int device_for_local_rank(const EnvMap& env, int local_rank, int local_size);

// Parses Slurm's compressed tasks-per-node list ("4(x2),3" = 4,4,3) and returns the entry of node `node`.
// Fails on a malformed list or a node past its end.
int slurm_tasks_on_node(const std::string& list, int node);

}  // namespace llmc
