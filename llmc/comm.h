// Collective communication over flat buffers (docs/distributed.md).
//
// A collective takes (buffer, count, dtype, op) and is enqueued: on the CUDA backend (NCCL) on the given stream,
// ordered by the caller through streams and events; on the CPU backend (MPI) it runs immediately on host buffers.
// Implementations:
//   SingleComm  one process: every collective is a no-op (or a copy where send and receive buffers differ)
//   MpiComm     host buffers, MPI (llmc/comm_mpi.cpp)
//   NcclComm    device buffers, NCCL (llmc/cuda/comm_nccl.cu); served by MPI under the CUDA simulator
// Every implementation counts the collectives it issues, so tests can check "exactly one reduction per bucket per
// optimizer step". MpiComm and NcclComm register every collective with a watchdog when CommOptions::watchdog_s > 0
// (llmc/watchdog.h): a peer that makes no progress stops every rank with a message naming it, never a hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "dist_info.h"

namespace llmc {

enum class ReduceOp { Sum, Avg, Max };

// Where this process sits (DistInfo): computed in one place, llmc/dist_info.h, from the launcher's environment.
const char* reduce_op_name(ReduceOp op);  // "sum", "avg", "max"

struct CommCounters {
    uint64_t all_reduce = 0, reduce = 0, reduce_scatter = 0, all_gather = 0, broadcast = 0, barrier = 0;
    uint64_t host = 0;  // host-channel collectives (all_reduce_host, all_gather_host, any)
    // Payload bytes handed to collectives by this rank: the buffer for all_reduce, reduce and broadcast, the whole
    // send buffer (world_size * recv_count elements) for reduce_scatter, the rank's own block for all_gather.
    uint64_t bytes = 0;
    uint64_t total() const { return all_reduce + reduce + reduce_scatter + all_gather + broadcast + barrier + host; }
};

class Comm {
public:
    virtual ~Comm() = default;
    const DistInfo& info() const { return info_; }
    int rank() const { return info_.rank; }
    int world_size() const { return info_.world_size; }
    virtual const char* name() const = 0;

    // In place: buf (count elements) becomes the reduction over ranks.
    virtual void all_reduce(void* buf, size_t count, DType t, ReduceOp op, Stream stream) = 0;
    // Rank `root` receives the reduction over ranks of `send` (count elements) in recv; recv is not touched on the
    // other ranks. In place on the root when send == recv.
    virtual void reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, int root,
                        Stream stream) = 0;
    // send holds world_size * recv_count elements; rank r receives the reduction of block r into recv.
    virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op,
                                Stream stream) = 0;
    // Each rank contributes send_count elements; recv (world_size * send_count) receives them in rank order.
    // In place when send == recv + rank * send_count.
    virtual void all_gather(const void* send, void* recv, size_t send_count, DType t, Stream stream) = 0;
    virtual void broadcast(void* buf, size_t count, DType t, int root, Stream stream) = 0;
    virtual void barrier() = 0;
    // Group several collectives into one launch (NCCL group); no-op elsewhere.
    virtual void group_start() {}
    virtual void group_end() {}
    // A communicator of the ranks that pass the same `color`, numbered by `key` (ties by rank): MPI_Comm_split,
    // ncclCommSplit. Collective: every rank of this comm calls it, with nothing of this comm in flight. The new
    // comm's info() is this one's with its own rank and world size (node, local rank and GPU unchanged); its
    // collectives are watched by this comm's watchdog, so it must be destroyed before this one. Hybrid sharding's
    // groups (llmc/dp_groups.h). The default fails (a comm that only stands in for one in a test).
    virtual std::unique_ptr<Comm> split(int color, int key);

    // ---- the host channel: small control data (flags, sizes, checksums, identities) in host memory -------------
    // Blocking and exact on every Comm: integers travel as integers. The caller allocates no device memory (NcclComm
    // stages the values through a small device buffer of its own). Each call waits for the rank's device work
    // enqueued so far, so keep it to control decisions, not bulk data.
    // In place: buf (count elements of I32, U64 or F32; Avg only for F32) becomes the reduction over ranks.
    void all_reduce_host(void* buf, size_t count, DType t, ReduceOp op);
    // Each rank's `send` (count elements) lands in recv (world_size * count elements) in rank order.
    void all_gather_host(const void* send, void* recv, size_t count, DType t);
    // Every rank's `mine` (the same length on every rank), concatenated in rank order.
    std::vector<uint64_t> all_gather_host(const std::vector<uint64_t>& mine);
    // True on every rank when at least one rank passed true.
    bool any(bool mine);

    CommCounters counters;

protected:
    // The host channel's transport (the public functions above check the arguments and count the call).
    virtual void host_all_reduce(void* buf, size_t count, DType t, ReduceOp op) = 0;
    virtual void host_all_gather(const void* send, void* recv, size_t count, DType t) = 0;

    DistInfo info_;
};

// How the processes of a multi-process NCCL run find each other (llm.c's -pi): MPI broadcasts NCCL's unique id
// (mpirun, srun --mpi=pmix), or rank 0 writes it to a file in a directory all ranks share (-pf), for launchers
// without MPI (torchrun-style, plain srun). Auto: MPI when launched by an MPI launcher, else the file when a
// directory was given, else a clear error. Host-buffer (CPU) runs always use MPI.
enum class CommInit { Auto, Mpi, File };
CommInit parse_comm_init(const std::string& s);  // "auto", "mpi", "fs" (or "file"); fails on anything else

struct CommOptions {
    CommInit init = CommInit::Auto;
    std::string rendezvous_dir;  // -pf: shared directory for CommInit::File
    double timeout_s = 300;      // how long ranks wait for each other at the rendezvous
    double watchdog_s = 0;       // a collective waiting longer than this stops every rank (llmc/watchdog.h); 0: off
};

// SingleComm copies with `copy` when send and receive buffers differ (nullptr: host memcpy; the CUDA backend passes
// an asynchronous device copy on the given stream).
using CommCopyFn = void (*)(void* dst, const void* src, size_t bytes, Stream stream);
std::unique_ptr<Comm> make_single_comm(CommCopyFn copy = nullptr);

// MpiComm over host buffers (llmc/comm_mpi.h). Initialises MPI if needed (mpi_env.h) and refines the layout.
std::unique_ptr<Comm> make_mpi_comm(const DistInfo& info, const CommOptions& opt = CommOptions());

// The Comm for host buffers (the CPU backend): SingleComm for one process, MpiComm otherwise. Fails with a clear
// message when several processes were launched without MPI. Backends wrap this: llmc/cpu/cpu_comm.h,
// llmc/cuda/cuda_comm.h (device buffers, NCCL).
std::unique_ptr<Comm> create_host_comm(const DistInfo& info, const CommOptions& opt = CommOptions());

}  // namespace llmc
