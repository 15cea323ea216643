// MPI's lifetime, kept in one place.
//
// MPI is initialised only when a process needs it (a collective over several processes, or NCCL's id exchange) and
// was started by an MPI launcher; a plain `./train_gpt2_cpu` never touches MPI, so it needs no mpirun.
//
// Shutdown contract for every program main that may have created an MPI-backed Comm:
//   success path: call mpi_finalize() before returning 0 (a process that exits without it makes mpirun fail the job);
//   error path:   after printing "error: ...", call mpi_abort(1), which ends every rank of the job at once when MPI
//                 runs with several processes (a rank that finalized or exited while the others wait in a collective
//                 would leave the job hanging). Both are no-ops when MPI was never initialised.
#pragma once

#include <cstddef>

#include "dist_info.h"

namespace llmc {

bool mpi_is_initialized();

// Turns an MPI return code other than MPI_SUCCESS into llmc::Error: "MPI error in <what>: <MPI's message>".
void check_mpi(int rc, const char* what);

// Initialises MPI once, asking for MPI_THREAD_MULTIPLE (the comm watchdog's thread talks to its peers while the main
// thread waits in a collective: llmc/watchdog.h); idempotent, and accepts an MPI that someone else initialised.
// `info` is what the environment said: MPI's own rank and size must agree with it, otherwise this fails with a
// message on how the job was probably launched wrongly (e.g. srun without a PMI plugin gives N singletons).
void mpi_init_once(const DistInfo& info);
// MPI is initialised with MPI_THREAD_MULTIPLE (by mpi_init_once or whoever initialised it).
bool mpi_thread_multiple();

// The environment's layout corrected by MPI: the real local rank/size (ranks sharing a node's memory) and node
// index/count (nodes numbered by their lowest rank). `env` gives CUDA_VISIBLE_DEVICES for the device. A layout the
// launcher stated itself (DistInfo::node_exact: Slurm, torchrun with GROUP_RANK, -pn/-pr/-pg) is kept as it is:
// the launcher placed the ranks. MPI must be initialised. Collective: every rank must call it.
DistInfo mpi_refine_dist_info(const DistInfo& info, const EnvMap& env);

// Broadcast raw bytes from `root` over MPI_COMM_WORLD (NCCL's unique id exchange). MPI must be initialised.
void mpi_broadcast_bytes(void* buf, size_t bytes, int root);

void mpi_finalize();
void mpi_abort(int code);

}  // namespace llmc
