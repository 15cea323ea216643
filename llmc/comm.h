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
    // Payload bytes handed to collectives by this rank: the buffer for all_reduce, reduce and broadcast, the whole
    // send buffer (world_size * recv_count elements) for reduce_scatter, the rank's own block for all_gather.
    uint64_t bytes = 0;
    uint64_t total() const { return all_reduce + reduce + reduce_scatter + all_gather + broadcast + barrier; }
};

class Comm {
public:
    virtual ~Comm() = default;
    const DistInfo& info() const { return info_; }
    int rank() const { return info_.rank; }
    int world_size() const { return info_.world_size; }
    virtual const char* name() const = 0;

    // In place: buf (count elements) becomes the reduction over ranks.
    virtual void all_reduce(void* buf, size_t count, DType t, ReduceOp op, void* stream) = 0;
    // Rank `root` receives the reduction over ranks of `send` (count elements) in recv; recv is not touched on the
    // other ranks. In place on the root when send == recv.
    virtual void reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, int root,
                        void* stream) = 0;
    // send holds world_size * recv_count elements; rank r receives the reduction of block r into recv.
    virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op,
                                void* stream) = 0;
    // Each rank contributes send_count elements; recv (world_size * send_count) receives them in rank order.
    // In place when send == recv + rank * send_count.
    virtual void all_gather(const void* send, void* recv, size_t send_count, DType t, void* stream) = 0;
    virtual void broadcast(void* buf, size_t count, DType t, int root, void* stream) = 0;
    virtual void barrier() = 0;
    // Group several collectives into one launch (NCCL group); no-op elsewhere.
    virtual void group_start() {}
    virtual void group_end() {}

    CommCounters counters;

protected:
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
using CommCopyFn = void (*)(void* dst, const void* src, size_t bytes, void* stream);
std::unique_ptr<Comm> make_single_comm(CommCopyFn copy = nullptr);

// MpiComm over host buffers (llmc/comm_mpi.h). Initialises MPI if needed (mpi_env.h) and refines the layout.
std::unique_ptr<Comm> make_mpi_comm(const DistInfo& info, const CommOptions& opt = CommOptions());

// The Comm for host buffers (the CPU backend): SingleComm for one process, MpiComm otherwise. Fails with a clear
// message when several processes were launched without MPI. Backends wrap this: llmc/cpu/cpu_comm.h,
// llmc/cuda/cuda_comm.h (device buffers, NCCL).
std::unique_ptr<Comm> create_host_comm(const DistInfo& info, const CommOptions& opt = CommOptions());

// Every rank's `mine` (the same length on every rank), concatenated in rank order, through the comm's float
// all-gather on backend buffers: each value travels as four 16-bit pieces in floats (exact; no NaN bit patterns).
// Collective.
template <class Backend>
std::vector<uint64_t> all_gather_u64(Backend& be, Comm& comm, const std::vector<uint64_t>& mine) {
    const size_t n = mine.size() * 4, world = (size_t)comm.world_size(), rank = (size_t)comm.rank();
    std::vector<float> host(n * world, 0.0f);
    for (size_t i = 0; i < mine.size(); i++)
        for (size_t k = 0; k < 4; k++) host[rank * n + 4 * i + k] = (float)((mine[i] >> (16 * k)) & 0xFFFF);
    DeviceArray<Backend, float> dev(be, host.size());
    be.copy_to_device(dev.get(), host.data(), host.size() * sizeof(float));
    comm.all_gather(dev.get() + rank * n, dev.get(), n, DType::F32, be.main_stream());
    be.copy_to_host(host.data(), dev.get(), host.size() * sizeof(float));
    std::vector<uint64_t> all(mine.size() * world, 0);
    for (size_t i = 0; i < all.size(); i++)
        for (size_t k = 0; k < 4; k++) all[i] |= (uint64_t)host[4 * i + k] << (16 * k);
    return all;
}

}  // namespace llmc
