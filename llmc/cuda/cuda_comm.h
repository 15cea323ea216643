// The CUDA backend's Comm: NCCL over device buffers (llmc/cuda/comm_nccl.cu) for two ranks or more; for one rank the
// single-process Comm (every reduction is the identity: no communicator, no collective kernel, a device copy where
// the receive buffer differs). Under the CUDA simulator NCCL is served by MPI.
//
// How the ranks find each other (CommOptions::init, llm.c's -pi):
//   mpi   rank 0 creates NCCL's unique id and broadcasts it over MPI (mpirun, srun --mpi=pmix)
//   fs    rank 0 writes the id into CommOptions::rendezvous_dir (a directory every rank can read: -pf), the others
//         wait for the file; no MPI needed (torchrun-style or plain srun launches)
//   auto  one rank: no exchange; else mpi when an MPI launcher started the process, else fs when -pf was given
#pragma once

#include <memory>

#include "../comm.h"
#include "cuda_backend.h"
#include "cuda_check.h"

namespace llmc {

std::unique_ptr<Comm> make_nccl_comm(const DistInfo& info, const CommOptions& opt);

inline std::unique_ptr<Comm> create_comm(CudaBackend&, const DistInfo& info, const CommOptions& opt) {
    return make_nccl_comm(info, opt);
}

// A one-rank Comm for a replica of its own (--sync-every, llmc/outer_sync.h): its collectives are identities, and
// a collective with separate send and receive buffers copies on the device, on the collective's stream.
inline std::unique_ptr<Comm> create_replica_comm(CudaBackend&) {
    return make_single_comm([](void* dst, const void* src, size_t bytes, Stream stream) {
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_stream(stream)));
    });
}

}  // namespace llmc
