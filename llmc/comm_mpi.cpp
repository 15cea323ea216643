// MpiComm: collectives over host buffers with MPI (see comm_mpi.h for the numerics contract).
//
// Chunking: MPI counts are int, so no single MPI call gets a count above max_chunk_ elements. For reduce_scatter
// and all_gather, whose buffers hold world_size blocks, a call moves world_size * n elements; when that is above
// max_chunk_ the blocks are processed n = max_chunk_ / world_size elements at a time through packed scratch
// buffers (block r's [c, c+n) for every r side by side), which keeps each MPI call's total within the limit too.
#include "comm_mpi.h"

#include <algorithm>
#include <cstring>

#include "bf16.h"
#include "error.h"
#include "mpi_env.h"

namespace llmc {

namespace {

MPI_Op mpi_op(ReduceOp op) {
    // Avg is reduced as a Sum and divided afterwards.
    return op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
}

MPI_Datatype mpi_type(DType t) {
    switch (t) {
        case DType::F32: return MPI_FLOAT;
        case DType::BF16: return MPI_UINT16_T;  // bit patterns; reductions widen them to fp32 first
        case DType::I32: return MPI_INT32_T;
        case DType::U64: return MPI_UINT64_T;
    }
    fail("MPI: unknown dtype %d", (int)t);
}

// The device-buffer reductions compute in fp32; integers are control data, reduced by the host channel.
void require_float(DType t, const char* what) {
    if (t != DType::F32 && t != DType::BF16)
        fail("%s: dtype %s, expected f32 or bf16 (integers go through all_reduce_host)", what, dtype_name(t));
}

void widen(float* dst, const uint16_t* src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]);
}
void narrow(uint16_t* dst, const float* src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = float_to_bf16(src[i]);
}

}  // namespace

MpiComm::MpiComm(const DistInfo& info, size_t max_chunk, double watchdog_s) : max_chunk_(max_chunk) {
    if (!mpi_is_initialized()) fail("MpiComm: MPI is not initialised (create it with make_mpi_comm)");
    if (max_chunk == 0 || max_chunk > (size_t)INT32_MAX)
        fail("MpiComm: max_chunk %zu, expected 1 .. %d elements per MPI call", max_chunk, INT32_MAX);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != info.rank || size != info.world_size)
        fail("MpiComm: MPI sees rank %d of %d but the layout says rank %d of %d", rank, size, info.rank,
             info.world_size);
    info_ = info;
    // A communicator of our own, so our collectives never match messages of other code using MPI_COMM_WORLD.
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    if (watchdog_s > 0 && info.world_size > 1)
        watchdog_ = std::make_unique<CommWatchdog>(info.rank, info.world_size, watchdog_s, make_mpi_census(),
                                                   WatchdogHooks());
    watch_ = watchdog_.get();
}

MpiComm::MpiComm(const DistInfo& info, MPI_Comm comm, size_t max_chunk, CommWatchdog* watch)
    : comm_(comm), max_chunk_(max_chunk), watch_(watch) {
    info_ = info;
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

std::unique_ptr<Comm> MpiComm::split(int color, int key) {
    MPI_Comm sub = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
    DistInfo info = info_;
    MPI_Comm_rank(sub, &info.rank);
    MPI_Comm_size(sub, &info.world_size);
    return std::unique_ptr<Comm>(new MpiComm(info, sub, max_chunk_, watch_));
}

MpiComm::~MpiComm() {
    watchdog_.reset();
    if (comm_ != MPI_COMM_NULL && mpi_is_initialized()) MPI_Comm_free(&comm_);
}

void MpiComm::divide_by_world(float* x, size_t n) const {
    const float w = (float)info_.world_size;
    for (size_t i = 0; i < n; i++) x[i] /= w;
}

void MpiComm::all_reduce_f32(float* buf, size_t count, ReduceOp op) {
    for (size_t off = 0; off < count; off += max_chunk_) {
        int n = (int)std::min(count - off, max_chunk_);
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf + off, n, MPI_FLOAT, mpi_op(op), comm_), "MPI_Allreduce");
    }
    if (op == ReduceOp::Avg) divide_by_world(buf, count);
}

// MPI_IN_PLACE on the root when send == recv; the other ranks only send (their recv is not touched).
void MpiComm::reduce_f32(const float* send, float* recv, size_t count, ReduceOp op, int root) {
    const bool is_root = info_.rank == root;
    for (size_t off = 0; off < count; off += max_chunk_) {
        int n = (int)std::min(count - off, max_chunk_);
        const void* s = is_root && send == recv ? MPI_IN_PLACE : (const void*)(send + off);
        check_mpi(MPI_Reduce(s, is_root ? recv + off : nullptr, n, MPI_FLOAT, mpi_op(op), root, comm_), "MPI_Reduce");
    }
    if (is_root && op == ReduceOp::Avg) divide_by_world(recv, count);
}

void MpiComm::reduce_scatter_f32(const float* send, float* recv, size_t recv_count, ReduceOp op) {
    const size_t W = (size_t)info_.world_size;
    if (recv_count * W <= max_chunk_) {
        if (recv_count)
            check_mpi(MPI_Reduce_scatter_block(send, recv, (int)recv_count, MPI_FLOAT, mpi_op(op), comm_),
                      "MPI_Reduce_scatter_block");
    } else {
        const size_t n_max = std::max<size_t>(1, max_chunk_ / W);
        scratch_send_.resize(W * std::min(n_max, recv_count));
        for (size_t c = 0; c < recv_count; c += n_max) {
            size_t n = std::min(n_max, recv_count - c);
            for (size_t r = 0; r < W; r++) std::memcpy(&scratch_send_[r * n], send + r * recv_count + c, n * 4);
            check_mpi(MPI_Reduce_scatter_block(scratch_send_.data(), recv + c, (int)n, MPI_FLOAT, mpi_op(op), comm_),
                      "MPI_Reduce_scatter_block");
        }
    }
    if (op == ReduceOp::Avg) divide_by_world(recv, recv_count);
}

void MpiComm::all_reduce(void* buf, size_t count, DType t, ReduceOp op, Stream) {
    WatchedCall watched(watch_, CollectiveKind::AllReduce);
    require_float(t, "all_reduce");
    counters.all_reduce++;
    counters.bytes += count * dtype_size(t);
    if (t == DType::F32) {
        all_reduce_f32(static_cast<float*>(buf), count, op);
    } else {
        uint16_t* b = static_cast<uint16_t*>(buf);
        scratch_recv_.resize(count);
        widen(scratch_recv_.data(), b, count);
        all_reduce_f32(scratch_recv_.data(), count, op);
        narrow(b, scratch_recv_.data(), count);
    }
}

void MpiComm::reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, int root, Stream) {
    WatchedCall watched(watch_, CollectiveKind::Reduce);
    require_float(t, "reduce");
    if (root < 0 || root >= info_.world_size)
        fail("reduce: root %d, expected 0 <= root < world size %d", root, info_.world_size);
    counters.reduce++;
    counters.bytes += count * dtype_size(t);
    const size_t es = dtype_size(t);
    const char *s = static_cast<const char*>(send), *r = static_cast<const char*>(recv);
    if (info_.rank == root && s != r && r < s + count * es && s < r + count * es)
        fail("reduce: the receive buffer overlaps the send buffer without being it (in place needs send == recv)");
    if (t == DType::F32) {
        reduce_f32(static_cast<const float*>(send), static_cast<float*>(recv), count, op, root);
    } else {
        scratch_recv_.resize(count);
        widen(scratch_recv_.data(), static_cast<const uint16_t*>(send), count);
        reduce_f32(scratch_recv_.data(), scratch_recv_.data(), count, op, root);  // in place on the root
        if (info_.rank == root) narrow(static_cast<uint16_t*>(recv), scratch_recv_.data(), count);
    }
}

void MpiComm::reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op, Stream) {
    WatchedCall watched(watch_, CollectiveKind::ReduceScatter);
    require_float(t, "reduce_scatter");
    const size_t W = (size_t)info_.world_size;
    counters.reduce_scatter++;
    counters.bytes += W * recv_count * dtype_size(t);
    if (t == DType::F32) {
        const float* s = static_cast<const float*>(send);
        float* r = static_cast<float*>(recv);
        // MPI forbids overlapping send and receive buffers (Comm's in-place layout, recv = send + rank * count).
        std::vector<float> tmp;
        if (r + recv_count > s && r < s + W * recv_count) {
            tmp.resize(recv_count);
            r = tmp.data();
        }
        reduce_scatter_f32(s, r, recv_count, op);
        if (!tmp.empty()) std::memcpy(recv, tmp.data(), recv_count * 4);
    } else {
        std::vector<float> wide(W * recv_count);
        widen(wide.data(), static_cast<const uint16_t*>(send), W * recv_count);
        scratch_recv_.resize(recv_count);
        reduce_scatter_f32(wide.data(), scratch_recv_.data(), recv_count, op);
        narrow(static_cast<uint16_t*>(recv), scratch_recv_.data(), recv_count);
    }
}

void MpiComm::all_gather(const void* send, void* recv, size_t send_count, DType t, Stream) {
    WatchedCall watched(watch_, CollectiveKind::AllGather);
    counters.all_gather++;
    counters.bytes += send_count * dtype_size(t);
    gather(send, recv, send_count, t);
}

void MpiComm::gather(const void* send, void* recv, size_t send_count, DType t) {
    const size_t W = (size_t)info_.world_size, es = dtype_size(t);
    if (send_count == 0) return;
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    const bool in_place = s == r + (size_t)info_.rank * send_count * es;
    if (send_count * W <= max_chunk_) {
        check_mpi(MPI_Allgather(in_place ? MPI_IN_PLACE : s, (int)send_count, mpi_type(t), r, (int)send_count,
                                mpi_type(t), comm_),
                  "MPI_Allgather");
        return;
    }
    // Chunked: gather block pieces [c, c+n) of every rank side by side, then move them into place.
    const size_t n_max = std::max<size_t>(1, max_chunk_ / W);
    std::vector<char> packed(W * std::min(n_max, send_count) * es);
    for (size_t c = 0; c < send_count; c += n_max) {
        size_t n = std::min(n_max, send_count - c);
        check_mpi(MPI_Allgather(s + c * es, (int)n, mpi_type(t), packed.data(), (int)n, mpi_type(t), comm_),
                  "MPI_Allgather");
        // In place, the rank's own block is both read (s) and written (r): its piece is identical, so the copy is
        // harmless, but it must not run before MPI has read it, which the blocking call above guarantees.
        for (size_t k = 0; k < W; k++) std::memmove(r + (k * send_count + c) * es, packed.data() + k * n * es, n * es);
    }
}

void MpiComm::broadcast(void* buf, size_t count, DType t, int root, Stream) {
    WatchedCall watched(watch_, CollectiveKind::Broadcast);
    if (root < 0 || root >= info_.world_size)
        fail("broadcast: root %d, expected 0 <= root < world size %d", root, info_.world_size);
    counters.broadcast++;
    counters.bytes += count * dtype_size(t);
    char* b = static_cast<char*>(buf);
    for (size_t off = 0; off < count; off += max_chunk_) {
        int n = (int)std::min(count - off, max_chunk_);
        check_mpi(MPI_Bcast(b + off * dtype_size(t), n, mpi_type(t), root, comm_), "MPI_Bcast");
    }
}

void MpiComm::barrier() {
    WatchedCall watched(watch_, CollectiveKind::Barrier);
    counters.barrier++;
    check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

void MpiComm::host_all_reduce(void* buf, size_t count, DType t, ReduceOp op) {
    WatchedCall watched(watch_, CollectiveKind::AllReduce);
    char* b = static_cast<char*>(buf);
    for (size_t off = 0; off < count; off += max_chunk_) {
        int n = (int)std::min(count - off, max_chunk_);
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, b + off * dtype_size(t), n, mpi_type(t), mpi_op(op), comm_),
                  "MPI_Allreduce");
    }
    if (op == ReduceOp::Avg) divide_by_world(static_cast<float*>(buf), count);  // f32 only (Comm checks)
}

void MpiComm::host_all_gather(const void* send, void* recv, size_t count, DType t) {
    WatchedCall watched(watch_, CollectiveKind::AllGather);
    gather(send, recv, count, t);
}

std::unique_ptr<Comm> make_mpi_comm(const DistInfo& info, const CommOptions& opt) {
    mpi_init_once(info);
    return std::make_unique<MpiComm>(mpi_refine_dist_info(info, current_environment()), (size_t)1 << 30,
                                     opt.watchdog_s);
}

}  // namespace llmc
