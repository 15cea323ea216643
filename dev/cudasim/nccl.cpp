// NCCL on the CPU: every collective is the matching MPI collective on MPI_COMM_WORLD (duplicated per communicator),
// on the host memory that the simulator's "device" buffers are. A collective is an operation on its stream: it runs
// when the stream scheduler gets to it (dev/cudasim/streams.cpp), and this rank's collectives run in the order they
// were issued, over all communicators. NCCL requires every rank to issue the collectives of a communicator in the
// same order; with that, the ranks' MPI calls match and cannot deadlock (the restriction the simulator adds: ranks
// must also agree on the order across communicators, which NCCL recommends to avoid deadlocks anyway). The MPI
// calls are non-blocking and waited for with a timeout (CUDASIM_NCCL_TIMEOUT_S, default 300 s): a rank whose peer
// never runs its matching collective (it exited, or never synchronised the stream holding it) is reported instead
// of hanging. ncclGroupStart/End need no work (each collective is enqueued when it is called, in order).
// bf16 reductions are done in fp32 and rounded once; ncclAvg is the fp32 sum divided by the number of ranks.
// Without MPI initialised, a communicator of one rank still works (collectives become copies).
#include <nccl.h>

#include <mpi.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dev/cudasim/state.h"

struct ncclComm {
    int rank = 0, nranks = 1;
    MPI_Comm comm = MPI_COMM_NULL;  // null when nranks == 1 and MPI is not initialised
    std::atomic<bool> aborted{false};  // ncclCommAbort: queued collectives are dropped, a waiting one gives up
};

namespace {

ncclResult_t complain(ncclResult_t r, const char* what) {
    std::fflush(stdout);
    std::fprintf(stderr, "cudasim NCCL: %s\n", what);
    return r;
}

size_t type_size(ncclDataType_t t) {
    switch (t) {
        case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
        case ncclFloat16: case ncclBfloat16: return 2;
        case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
        case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
        default: return 0;
    }
}

// The MPI type for reductions computed directly in the element type (bf16 goes through fp32 instead).
MPI_Datatype mpi_type(ncclDataType_t t) {
    switch (t) {
        case ncclInt8: return MPI_INT8_T;
        case ncclUint8: return MPI_UINT8_T;
        case ncclInt32: return MPI_INT32_T;
        case ncclUint32: return MPI_UINT32_T;
        case ncclInt64: return MPI_INT64_T;
        case ncclUint64: return MPI_UINT64_T;
        case ncclFloat32: return MPI_FLOAT;
        case ncclFloat64: return MPI_DOUBLE;
        default: return MPI_DATATYPE_NULL;
    }
}

bool mpi_op(ncclRedOp_t op, MPI_Op& out) {
    switch (op) {
        case ncclSum: case ncclAvg: out = MPI_SUM; return true;
        case ncclProd: out = MPI_PROD; return true;
        case ncclMax: out = MPI_MAX; return true;
        case ncclMin: out = MPI_MIN; return true;
        default: return false;
    }
}

// Reduction buffers: bf16 is widened to fp32, other types stay as they are.
struct Widened {
    std::vector<float> f;
    std::vector<char> raw;
    MPI_Datatype type;
    void* data() { return f.empty() ? (void*)raw.data() : (void*)f.data(); }
};
Widened widen(const void* src, size_t count, ncclDataType_t t) {
    Widened w;
    if (t == ncclBfloat16) {
        w.f.resize(count);
        const __nv_bfloat16* s = static_cast<const __nv_bfloat16*>(src);
        for (size_t i = 0; i < count; i++) w.f[i] = __bfloat162float(s[i]);
        w.type = MPI_FLOAT;
    } else {
        w.raw.assign(static_cast<const char*>(src), static_cast<const char*>(src) + count * type_size(t));
        w.type = mpi_type(t);
    }
    return w;
}
// Writes `count` reduced values to dst in type t; ncclAvg divides by nranks first.
void narrow(Widened& w, void* dst, size_t count, ncclDataType_t t, ncclRedOp_t op, int nranks) {
    if (op == ncclAvg) {
        if (t == ncclBfloat16 || t == ncclFloat32) {
            float* f = t == ncclBfloat16 ? w.f.data() : reinterpret_cast<float*>(w.raw.data());
            for (size_t i = 0; i < count; i++) f[i] /= (float)nranks;
        } else if (t == ncclFloat64) {
            double* d = reinterpret_cast<double*>(w.raw.data());
            for (size_t i = 0; i < count; i++) d[i] /= nranks;
        }
    }
    if (t == ncclBfloat16) {
        __nv_bfloat16* d = static_cast<__nv_bfloat16*>(dst);
        for (size_t i = 0; i < count; i++) d[i] = __float2bfloat16_rn(w.f[i]);
    } else {
        std::memcpy(dst, w.raw.data(), count * type_size(t));
    }
}

ncclResult_t check_args(ncclComm_t comm, ncclDataType_t t, ncclRedOp_t op, bool reduction, MPI_Op* mop) {
    if (!comm) return complain(ncclInvalidArgument, "null communicator");
    if (!type_size(t) || (t != ncclBfloat16 && mpi_type(t) == MPI_DATATYPE_NULL && reduction))
        return complain(ncclInvalidArgument, "data type not simulated");
    if (reduction) {
        if (!mpi_op(op, *mop)) return complain(ncclInvalidArgument, "reduction op not simulated");
        if (op == ncclAvg && t != ncclBfloat16 && t != ncclFloat32 && t != ncclFloat64)
            return complain(ncclInvalidArgument, "ncclAvg on an integer type");
    }
    return ncclSuccess;
}

double timeout_seconds() {
    const char* e = std::getenv("CUDASIM_NCCL_TIMEOUT_S");
    return e && *e ? std::atof(e) : 300.0;
}

// Completes a started non-blocking MPI collective. A failure here is an asynchronous error of the collective's
// kernel on a GPU: reported, and the process stops.
void wait_for(ncclComm* comm, int rc, MPI_Request& req, const std::string& what) {
    if (rc != MPI_SUCCESS) cudasim::detail::fatal("%s: the MPI call failed (code %d)", what.c_str(), rc);
    static const double timeout = timeout_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (long spins = 0;; spins++) {
        int flag = 0;
        if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            cudasim::detail::fatal("%s: MPI_Test failed", what.c_str());
        if (flag) return;
        if (comm->aborted) return;  // ncclCommAbort from another thread: give up (the request is abandoned)
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (waited > timeout)
            cudasim::detail::fatal("%s (rank %d of %d) waited %.0f s for the other ranks: one of them never ran its "
                                   "matching collective (it exited or failed, never synchronised the stream holding "
                                   "it, or issued collectives in a different order)",
                                   what.c_str(), comm->rank, comm->nranks, waited);
        if (spins > 1000) usleep(50);  // leave the cores to the peer ranks (tests oversubscribe)
    }
}

// Enqueues a collective: `run` does the MPI work when the stream scheduler gets to it.
ncclResult_t enqueue_collective(ncclComm* comm, cudaStream_t stream, std::string what, const void* send,
                                size_t send_bytes, const void* recv, size_t recv_bytes, std::function<void()> run) {
    cudasim::detail::Work w;
    w.what = std::move(what);
    w.collective = true;
    w.comm = comm;
    if (send && send_bytes) w.reads.push_back({static_cast<const char*>(send), send_bytes});
    if (recv && recv_bytes) w.writes.push_back({static_cast<const char*>(recv), recv_bytes});
    w.run = [comm, run = std::move(run)] {
        if (!comm->aborted) run();
    };
    if (cudasim::detail::enqueue(stream, std::move(w)) != cudaSuccess)
        return complain(ncclInvalidArgument, "collective on an unknown stream");
    return ncclSuccess;
}

const char* type_name(ncclDataType_t t) {
    switch (t) {
        case ncclInt8: return "int8";
        case ncclUint8: return "uint8";
        case ncclInt32: return "int32";
        case ncclUint32: return "uint32";
        case ncclInt64: return "int64";
        case ncclUint64: return "uint64";
        case ncclFloat16: return "fp16";
        case ncclFloat32: return "fp32";
        case ncclFloat64: return "fp64";
        case ncclBfloat16: return "bf16";
        default: return "other";
    }
}

std::string describe(const char* fn, size_t count, ncclDataType_t t, const ncclComm* comm) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s of %zu %s elements (communicator %p)", fn, count, type_name(t),
                  (const void*)comm);
    return buf;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    if (!id) return ncclInvalidArgument;
    std::memset(id, 0, sizeof *id);
    std::snprintf(id->internal, sizeof id->internal, "cudasim-nccl-over-mpi");
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId, int rank) {
    if (!out || nranks < 1 || rank < 0 || rank >= nranks) return complain(ncclInvalidArgument, "ncclCommInitRank: bad rank/size");
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!(initialized && !finalized) && nranks != 1) {
        // The program did not initialise MPI (llm.c's -pi fs: the NCCL id came through a shared file). A real NCCL
        // brings its own transport; the simulator's is MPI, so it initialises MPI itself (the program's
        // mpi_finalize() at exit, which finalises an MPI initialised by anyone, closes it). It needs an MPI launcher.
        int provided = 0;
        if (finalized || MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return complain(ncclInvalidUsage, "ncclCommInitRank: more than one rank needs MPI, which could not be "
                                              "initialised (launch with mpirun)");
        initialized = 1;
    }
    auto* c = new ncclComm;
    c->rank = rank;
    c->nranks = nranks;
    if (initialized && !finalized) {
        int wrank = 0, wsize = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
        MPI_Comm_size(MPI_COMM_WORLD, &wsize);
        if (wrank != rank || wsize != nranks) {
            delete c;
            return complain(ncclInvalidArgument,
                            "ncclCommInitRank: the simulator maps NCCL ranks to MPI_COMM_WORLD, whose rank/size differ");
        }
        MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    }
    *out = c;
    return ncclSuccess;
}

// The ranks of `comm` with the same color form a new communicator over MPI_Comm_split of its MPI communicator.
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* out, ncclConfig_t*) {
    if (!comm || !out) return complain(ncclInvalidArgument, "ncclCommSplit: null communicator");
    *out = nullptr;
    if (comm->comm == MPI_COMM_NULL) {  // one rank without MPI: the split is itself
        if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
        *out = new ncclComm;
        return ncclSuccess;
    }
    MPI_Comm sub = MPI_COMM_NULL;
    if (MPI_Comm_split(comm->comm, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &sub) != MPI_SUCCESS)
        return complain(ncclSystemError, "ncclCommSplit: MPI_Comm_split failed");
    if (sub == MPI_COMM_NULL) return ncclSuccess;
    auto* c = new ncclComm;
    MPI_Comm_rank(sub, &c->rank);
    MPI_Comm_size(sub, &c->nranks);
    c->comm = sub;
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    cudasim::detail::drain_communicator(comm);  // its queued collectives complete first
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm->comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm->comm);
    delete comm;
    return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
// Abort: queued collectives of the communicator are dropped and one waiting for its peers gives up. The object is
// leaked on purpose: queued operations still refer to it.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (comm) comm->aborted = true;
    return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    if (!comm || !count) return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    if (!comm || !rank) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
    if (!comm || !device) return ncclInvalidArgument;
    *device = 0;
    return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* err) {
    if (!err) return ncclInvalidArgument;
    *err = ncclSuccess;
    return ncclSuccess;
}
ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

const char* ncclGetErrorString(ncclResult_t r) {
    switch (r) {
        case ncclSuccess: return "no error";
        case ncclUnhandledCudaError: return "unhandled cuda error";
        case ncclSystemError: return "unhandled system error (cudasim: an MPI call failed)";
        case ncclInternalError: return "internal error";
        case ncclInvalidArgument: return "invalid argument";
        case ncclInvalidUsage: return "invalid usage";
        default: return "unknown result code (cudasim)";
    }
}
const char* ncclGetLastError(ncclComm_t) { return ""; }

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
    MPI_Op mop;
    if (ncclResult_t r = check_args(comm, t, op, true, &mop)) return r;
    const std::string what = describe("ncclAllReduce", count, t, comm);
    const size_t bytes = count * type_size(t);
    return enqueue_collective(comm, stream, what, send, bytes, recv, bytes, [=] {
        Widened w = widen(send, count, t);
        if (comm->comm != MPI_COMM_NULL && count) {
            MPI_Request req;
            wait_for(comm, MPI_Iallreduce(MPI_IN_PLACE, w.data(), (int)count, w.type, mop, comm->comm, &req), req, what);
        }
        narrow(w, recv, count, t, op, comm->nranks);
    });
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
    MPI_Op mop;
    if (ncclResult_t r = check_args(comm, t, op, true, &mop)) return r;
    if (root < 0 || root >= comm->nranks) return complain(ncclInvalidArgument, "ncclReduce: bad root");
    const bool is_root = comm->rank == root;
    const std::string what = describe("ncclReduce", count, t, comm);
    const size_t bytes = count * type_size(t);
    return enqueue_collective(comm, stream, what, send, bytes, recv, is_root ? bytes : 0, [=] {
        Widened w = widen(send, count, t);  // a copy, so the root may reduce in place (recv == send)
        if (comm->comm != MPI_COMM_NULL && count) {
            MPI_Request req;
            wait_for(comm, MPI_Ireduce(is_root ? MPI_IN_PLACE : w.data(), is_root ? w.data() : nullptr, (int)count,
                                       w.type, mop, root, comm->comm, &req), req, what);
        }
        if (is_root) narrow(w, recv, count, t, op, comm->nranks);
    });
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
    MPI_Op mop;
    if (ncclResult_t r = check_args(comm, t, op, true, &mop)) return r;
    const std::string what = describe("ncclReduceScatter", recvcount, t, comm);
    const size_t bytes = recvcount * type_size(t);
    return enqueue_collective(comm, stream, what, send, bytes * comm->nranks, recv, bytes, [=] {
        Widened all = widen(send, recvcount * comm->nranks, t);  // a copy, so recv may overlap send (in-place use)
        Widened mine = widen(send, recvcount, t);                  // same element type; overwritten with the result
        if (comm->comm != MPI_COMM_NULL && recvcount) {
            MPI_Request req;
            wait_for(comm, MPI_Ireduce_scatter_block(all.data(), mine.data(), (int)recvcount, all.type, mop,
                                                     comm->comm, &req), req, what);
        } else {
            mine = std::move(all);
        }
        narrow(mine, recv, recvcount, t, op, comm->nranks);
    });
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t stream) {
    MPI_Op unused;
    if (ncclResult_t r = check_args(comm, t, ncclSum, false, &unused)) return r;
    const std::string what = describe("ncclAllGather", sendcount, t, comm);
    const size_t bytes = sendcount * type_size(t);
    return enqueue_collective(comm, stream, what, send, bytes, recv, bytes * comm->nranks, [=] {
        std::vector<char> mine(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);  // in place
        if (comm->comm != MPI_COMM_NULL && bytes) {
            MPI_Request req;
            wait_for(comm, MPI_Iallgather(mine.data(), (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, comm->comm,
                                          &req), req, what);
        } else if (bytes) {
            std::memcpy(recv, mine.data(), bytes);
        }
    });
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    MPI_Op unused;
    if (ncclResult_t r = check_args(comm, t, ncclSum, false, &unused)) return r;
    if (root < 0 || root >= comm->nranks) return complain(ncclInvalidArgument, "ncclBroadcast: bad root");
    const std::string what = describe("ncclBroadcast", count, t, comm);
    const size_t bytes = count * type_size(t);
    const bool is_root = comm->rank == root;
    return enqueue_collective(comm, stream, what, is_root ? send : nullptr, bytes, recv, bytes, [=] {
        if (is_root && send != recv && bytes) std::memmove(recv, send, bytes);
        if (comm->comm != MPI_COMM_NULL && bytes) {
            MPI_Request req;
            wait_for(comm, MPI_Ibcast(recv, (int)bytes, MPI_BYTE, root, comm->comm, &req), req, what);
        }
    });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t s) {
    return ncclBroadcast(buff, buff, count, t, root, comm, s);
}

}  // extern "C"
