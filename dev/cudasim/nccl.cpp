// NCCL on the CPU: every collective is the matching MPI collective on MPI_COMM_WORLD (duplicated per communicator),
// on the host memory that the simulator's "device" buffers are. Calls complete before they return, so streams and
// ncclGroupStart/End need no work (each rank issues the same collectives in the same order, as NCCL requires).
// bf16 reductions are done in fp32 and rounded once; ncclAvg is the fp32 sum divided by the number of ranks.
// Without MPI initialised, a communicator of one rank still works (collectives become copies).
#include <nccl.h>

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <vector>

struct ncclComm {
    int rank = 0, nranks = 1;
    MPI_Comm comm = MPI_COMM_NULL;  // null when nranks == 1 and MPI is not initialised
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

ncclResult_t mpi_ok(int rc, const char* what) {
    return rc == MPI_SUCCESS ? ncclSuccess : complain(ncclSystemError, what);
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

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm->comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm->comm);
    delete comm;
    return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
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
                           cudaStream_t) {
    MPI_Op mop;
    if (ncclResult_t r = check_args(comm, t, op, true, &mop)) return r;
    Widened w = widen(send, count, t);
    if (comm->comm != MPI_COMM_NULL && count)
        if (ncclResult_t r = mpi_ok(MPI_Allreduce(MPI_IN_PLACE, w.data(), (int)count, w.type, mop, comm->comm), "MPI_Allreduce"))
            return r;
    narrow(w, recv, count, t, op, comm->nranks);
    return ncclSuccess;
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t) {
    MPI_Op mop;
    if (ncclResult_t r = check_args(comm, t, op, true, &mop)) return r;
    if (root < 0 || root >= comm->nranks) return complain(ncclInvalidArgument, "ncclReduce: bad root");
    const bool is_root = comm->rank == root;
    Widened w = widen(send, count, t);  // a copy, so the root may reduce in place (recv == send)
    if (comm->comm != MPI_COMM_NULL && count)
        if (ncclResult_t r = mpi_ok(MPI_Reduce(is_root ? MPI_IN_PLACE : w.data(), is_root ? w.data() : nullptr,
                                               (int)count, w.type, mop, root, comm->comm),
                                    "MPI_Reduce"))
            return r;
    if (is_root) narrow(w, recv, count, t, op, comm->nranks);
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t) {
    MPI_Op mop;
    if (ncclResult_t r = check_args(comm, t, op, true, &mop)) return r;
    Widened all = widen(send, recvcount * comm->nranks, t);  // a copy, so recv may overlap send (in-place use)
    Widened mine = widen(send, recvcount, t);                  // same element type; overwritten with the result
    if (comm->comm != MPI_COMM_NULL && recvcount) {
        if (ncclResult_t r = mpi_ok(MPI_Reduce_scatter_block(all.data(), mine.data(), (int)recvcount, all.type, mop, comm->comm),
                                    "MPI_Reduce_scatter_block"))
            return r;
    } else {
        mine = std::move(all);
    }
    narrow(mine, recv, recvcount, t, op, comm->nranks);
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t t, ncclComm_t comm, cudaStream_t) {
    MPI_Op unused;
    if (ncclResult_t r = check_args(comm, t, ncclSum, false, &unused)) return r;
    const size_t bytes = sendcount * type_size(t);
    std::vector<char> mine(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);  // in-place safe
    if (comm->comm != MPI_COMM_NULL && bytes)
        return mpi_ok(MPI_Allgather(mine.data(), (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, comm->comm), "MPI_Allgather");
    if (bytes) std::memcpy(recv, mine.data(), bytes);
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t) {
    MPI_Op unused;
    if (ncclResult_t r = check_args(comm, t, ncclSum, false, &unused)) return r;
    if (root < 0 || root >= comm->nranks) return complain(ncclInvalidArgument, "ncclBroadcast: bad root");
    const size_t bytes = count * type_size(t);
    if (comm->rank == root && send != recv && bytes) std::memmove(recv, send, bytes);
    if (comm->comm != MPI_COMM_NULL && bytes)
        return mpi_ok(MPI_Bcast(recv, (int)bytes, MPI_BYTE, root, comm->comm), "MPI_Bcast");
    return ncclSuccess;
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t s) {
    return ncclBroadcast(buff, buff, count, t, root, comm, s);
}

}  // extern "C"
