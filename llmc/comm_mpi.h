// MpiComm: collectives over host buffers with MPI (the CPU backend's Comm for several processes).
//
// fp32 reductions are MPI's own (MPI_SUM, MPI_MAX on MPI_FLOAT), and so are the host channel's integer ones. bf16
// buffers (uint16 bit patterns) are widened to fp32, reduced in fp32 and rounded to bf16 once at the end, so a bf16
// sum carries a single rounding however many ranks contribute. Avg is Sum followed by a division by the world size
// (a division, not a multiplication by 1/world, so Avg of identical values returns them exactly for any world size).
// MPI counts are int: buffers longer than `max_chunk` elements (default 2^30) go in several calls.
// With a watchdog timeout (CommOptions::watchdog_s) every collective is watched (llmc/watchdog.h): a peer that does
// not arrive in time stops the job with a message naming it, instead of a hang.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "comm.h"
#include "watchdog.h"

namespace llmc {

class MpiComm final : public Comm {
public:
    // `info` must match MPI_COMM_WORLD's rank and size; MPI must be initialised (make_mpi_comm does both).
    explicit MpiComm(const DistInfo& info, size_t max_chunk = (size_t)1 << 30, double watchdog_s = 0);
    ~MpiComm() override;
    const char* name() const override { return "mpi"; }

    void all_reduce(void* buf, size_t count, DType t, ReduceOp op, Stream stream) override;
    void reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, int root, Stream stream) override;
    void reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op, Stream stream) override;
    void all_gather(const void* send, void* recv, size_t send_count, DType t, Stream stream) override;
    void broadcast(void* buf, size_t count, DType t, int root, Stream stream) override;
    void barrier() override;
    // MPI_Comm_split of this comm; the new comm registers its collectives with this comm's watchdog.
    std::unique_ptr<Comm> split(int color, int key) override;

protected:
    void host_all_reduce(void* buf, size_t count, DType t, ReduceOp op) override;
    void host_all_gather(const void* send, void* recv, size_t count, DType t) override;

private:
    // A comm over `comm` (owned), watched by `watch` (a parent's watchdog, or null).
    MpiComm(const DistInfo& info, MPI_Comm comm, size_t max_chunk, CommWatchdog* watch);
    void gather(const void* send, void* recv, size_t send_count, DType t);
    void all_reduce_f32(float* buf, size_t count, ReduceOp op);
    void reduce_f32(const float* send, float* recv, size_t count, ReduceOp op, int root);
    void reduce_scatter_f32(const float* send, float* recv, size_t recv_count, ReduceOp op);
    void divide_by_world(float* x, size_t n) const;

    MPI_Comm comm_ = MPI_COMM_NULL;
    size_t max_chunk_;
    std::unique_ptr<CommWatchdog> watchdog_;  // null: off, or a split comm (its parent's watches it)
    CommWatchdog* watch_ = nullptr;           // the watchdog its collectives register with (own or the parent's)
    std::vector<float> scratch_send_, scratch_recv_;  // fp32 copies of bf16 buffers; packed chunks
};

}  // namespace llmc
