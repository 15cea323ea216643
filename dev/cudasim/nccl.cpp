// NCCL on the CPU: every collective moves its data with MPI on MPI_COMM_WORLD (duplicated per communicator), on the
// host memory that the simulator's "device" buffers are. A collective is an operation on its stream: it runs
// when the stream scheduler gets to it (dev/cudasim/streams.cpp), and this rank's collectives run in the order they
// were issued, over all communicators. NCCL requires every rank to issue the collectives of a communicator in the
// same order; with that, the ranks' MPI calls match and cannot deadlock (the restriction the simulator adds: ranks
// must also agree on the order across communicators, which NCCL recommends to avoid deadlocks anyway). The MPI
// calls are non-blocking and waited for with a timeout (CUDASIM_NCCL_TIMEOUT_S, default 300 s): a rank whose peer
// never runs its matching collective (it exited, or never synchronised the stream holding it) is reported instead
// of hanging. ncclGroupStart/End need no work (each collective is enqueued when it is called, in order).
// Reductions gather every rank's contribution and sum each element in the order NCCL's ring algorithm would (see
// "Reduction orders" below), so a test cannot pass by assuming rank order or one order for every collective.
// Without MPI initialised, a communicator of one rank still works (collectives become copies).
#include <nccl.h>

#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
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

// Element types the simulated reductions support (fp16 and fp8 are not simulated).
bool reducible(ncclDataType_t t) {
    switch (t) {
        case ncclInt8: case ncclUint8: case ncclInt32: case ncclUint32: case ncclInt64: case ncclUint64:
        case ncclFloat32: case ncclFloat64: case ncclBfloat16: return true;
        default: return false;
    }
}

ncclResult_t check_args(ncclComm_t comm, ncclDataType_t t, ncclRedOp_t op, bool reduction) {
    if (!comm) return complain(ncclInvalidArgument, "null communicator");
    if (!type_size(t) || (reduction && !reducible(t))) return complain(ncclInvalidArgument, "data type not simulated");
    if (reduction) {
        if (op != ncclSum && op != ncclAvg && op != ncclProd && op != ncclMax && op != ncclMin)
            return complain(ncclInvalidArgument, "reduction op not simulated");
        if (op == ncclAvg && t != ncclBfloat16 && t != ncclFloat32 && t != ncclFloat64)
            return complain(ncclInvalidArgument, "ncclAvg on an integer type");
    }
    return ncclSuccess;
}

// ---- Reduction orders -------------------------------------------------------------------------------------------
// Real NCCL never sums in rank order: each element is summed along a chain of ranks that depends on the collective
// and on the algorithm. The simulator gathers every rank's contribution (over MPI) and sums each element along the
// chain of NCCL's ring algorithm, one hop at a time, rounding to the element type after every hop as NCCL's kernels
// do (a bf16 sum is rounded to bf16 at each of its n - 1 additions). A chain "from s" is ranks s, s+1, ..., s-1
// (mod n): ((x_s + x_s+1) + x_s+2) + ... + x_s-1. (docs/cudasim.md, "NCCL reduction orders".)
//   ncclAllReduce     ring all-reduce: the buffer is cut into loops of channels x n chunks; chunk c of a channel
//                     is summed from rank c + 1 and completed at rank c, so the chain's first rank rotates from
//                     chunk to chunk (NCCL's runRing: rank r starts chunk r - 1 and finishes chunk r)
//   ncclReduce        ring reduce: every element from root + 1, completed at the root
//   ncclReduceScatter ring reduce-scatter: rank r's block from r + 1, completed at r
// So at 3 or more ranks an all-reduce and a reduce (or reduce-scatter) of the same data generally differ in the
// last bits. The orders depend only on (collective, count, element size, world size, root): deterministic.
// ncclAvg on floating types is NCCL's pre-multiplied sum: every contribution is multiplied by 1/n (rounded to the
// element type) before the chain. Integer sums, max and min do not depend on the order.
constexpr size_t kRingChunkBytes = 128 * 1024;  // bytes per chunk of one ring step (the "Simple" protocol's slice)
constexpr size_t kChannelBytes = 64 * 1024;     // one ring channel per 64 KiB of message, at most kMaxChannels
constexpr int kMaxChannels = 8;

struct Segment {
    size_t begin, end;  // element range
    int first;          // the chain's first rank
};

// The all-reduce's segments, as NCCL's ring kernel walks the buffer: per loop of channels x n chunks, channel b
// covers n consecutive chunks of the loop's real chunk size (rounded up to 16 bytes), chunk c from rank c + 1.
std::vector<Segment> all_reduce_segments(size_t count, size_t elem, int n) {
    const size_t bytes = count * elem;
    const int channels = (int)std::max<size_t>(1, std::min<size_t>(kMaxChannels, bytes / kChannelBytes));
    const size_t grain = std::max<size_t>(1, 16 / elem), chunk = kRingChunkBytes / elem;
    std::vector<Segment> out;
    for (size_t loop = 0; loop < count;) {
        const size_t per = (size_t)channels * n;
        size_t real = std::min(chunk, (count - loop + per - 1) / per);
        real = (real + grain - 1) / grain * grain;
        for (int b = 0; b < channels; b++)
            for (int c = 0; c < n; c++) {
                const size_t lo = loop + ((size_t)b * n + c) * real;
                if (lo < count) out.push_back({lo, std::min(count, lo + real), (c + 1) % n});
            }
        loop += real * per;
    }
    return out;
}

// Element access in the reduction's working type: bf16 and fp32 as float, fp64 as double, integers as themselves.
template <class T>
struct Elem {
    using Acc = T;
    static Acc load(const void* p, size_t i) { return static_cast<const T*>(p)[i]; }
    static Acc round(Acc v) { return v; }
    static void store(void* p, size_t i, Acc v) { static_cast<T*>(p)[i] = v; }
};
template <> struct Elem<__nv_bfloat16> {
    using Acc = float;
    static Acc load(const void* p, size_t i) { return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]); }
    static Acc round(Acc v) { return __bfloat162float(__float2bfloat16_rn(v)); }
    static void store(void* p, size_t i, Acc v) { static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); }
};

template <class T>
void chain_elements(const char* contrib, size_t stride, void* dst, const Segment& seg, int n, ncclRedOp_t op) {
    using E = Elem<T>;
    using Acc = typename E::Acc;
    const Acc scale = op == ncclAvg ? E::round((Acc)(1.0 / n)) : (Acc)1;
    for (size_t i = seg.begin; i < seg.end; i++) {
        Acc acc = 0;
        for (int h = 0; h < n; h++) {
            Acc x = E::load(contrib + (size_t)((seg.first + h) % n) * stride, i);
            if (op == ncclAvg) x = E::round(x * scale);
            if (h == 0) acc = x;
            else if (op == ncclSum || op == ncclAvg) acc = E::round(acc + x);
            else if (op == ncclProd) acc = E::round(acc * x);
            else if (op == ncclMax) acc = x > acc ? x : acc;
            else acc = x < acc ? x : acc;
        }
        E::store(dst, i, acc);
    }
}

// dst[i] for i in each segment = the chain reduction of contrib (n rank-major buffers, `stride` bytes apart).
void reduce_segments(const char* contrib, size_t stride, void* dst, const std::vector<Segment>& segs, int n,
                     ncclDataType_t t, ncclRedOp_t op) {
    for (const Segment& s : segs) switch (t) {
            case ncclInt8: chain_elements<int8_t>(contrib, stride, dst, s, n, op); break;
            case ncclUint8: chain_elements<uint8_t>(contrib, stride, dst, s, n, op); break;
            case ncclInt32: chain_elements<int32_t>(contrib, stride, dst, s, n, op); break;
            case ncclUint32: chain_elements<uint32_t>(contrib, stride, dst, s, n, op); break;
            case ncclInt64: chain_elements<int64_t>(contrib, stride, dst, s, n, op); break;
            case ncclUint64: chain_elements<uint64_t>(contrib, stride, dst, s, n, op); break;
            case ncclFloat32: chain_elements<float>(contrib, stride, dst, s, n, op); break;
            case ncclFloat64: chain_elements<double>(contrib, stride, dst, s, n, op); break;
            default: chain_elements<__nv_bfloat16>(contrib, stride, dst, s, n, op); break;
        }
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

// An MPI count of bytes (int): the simulator's buffers are small; a larger one stops the program.
int mpi_count(size_t bytes, const std::string& what) {
    if (bytes > 2147483647u) cudasim::detail::fatal("%s: %zu bytes exceed one MPI call's count", what.c_str(), bytes);
    return (int)bytes;
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

// The header's version, or CUDASIM_NCCL_VERSION's (a test of the trainer's refusal of an old library).
ncclResult_t ncclGetVersion(int* version) {
    if (!version) return ncclInvalidArgument;
    const char* env = std::getenv("CUDASIM_NCCL_VERSION");
    *version = env ? std::atoi(env) : NCCL_VERSION_CODE;
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
    if (ncclResult_t r = check_args(comm, t, op, true)) return r;
    const std::string what = describe("ncclAllReduce", count, t, comm);
    const size_t bytes = count * type_size(t);
    return enqueue_collective(comm, stream, what, send, bytes, recv, bytes, [=] {
        const int n = comm->nranks;
        std::vector<char> all(bytes * n);  // every rank's contribution, rank-major (so recv may be send)
        if (bytes) std::memcpy(all.data() + (size_t)comm->rank * bytes, send, bytes);
        if (comm->comm != MPI_COMM_NULL && bytes) {
            MPI_Request req;
            wait_for(comm, MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(), mpi_count(bytes, what),
                                          MPI_BYTE, comm->comm, &req), req, what);
        }
        reduce_segments(all.data(), bytes, recv, all_reduce_segments(count, type_size(t), n), n, t, op);
    });
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
    if (ncclResult_t r = check_args(comm, t, op, true)) return r;
    if (root < 0 || root >= comm->nranks) return complain(ncclInvalidArgument, "ncclReduce: bad root");
    const bool is_root = comm->rank == root;
    const std::string what = describe("ncclReduce", count, t, comm);
    const size_t bytes = count * type_size(t);
    return enqueue_collective(comm, stream, what, send, bytes, recv, is_root ? bytes : 0, [=] {
        const int n = comm->nranks;
        std::vector<char> mine(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
        std::vector<char> all(is_root ? bytes * n : 0);
        if (comm->comm != MPI_COMM_NULL && bytes) {
            MPI_Request req;
            wait_for(comm, MPI_Igather(mine.data(), mpi_count(bytes, what), MPI_BYTE, all.data(),
                                       mpi_count(bytes, what), MPI_BYTE, root, comm->comm, &req), req, what);
        } else {
            all = mine;
        }
        if (is_root) reduce_segments(all.data(), bytes, recv, {{0, count, (root + 1) % n}}, n, t, op);
    });
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
    if (ncclResult_t r = check_args(comm, t, op, true)) return r;
    const std::string what = describe("ncclReduceScatter", recvcount, t, comm);
    const size_t bytes = recvcount * type_size(t);
    return enqueue_collective(comm, stream, what, send, bytes * comm->nranks, recv, bytes, [=] {
        const int n = comm->nranks;
        // A copy of the send buffer, so recv may overlap it (in-place use); then block r of every rank, rank-major.
        std::vector<char> blocks(static_cast<const char*>(send), static_cast<const char*>(send) + bytes * n);
        std::vector<char> all(bytes * n);
        if (comm->comm != MPI_COMM_NULL && bytes) {
            MPI_Request req;
            wait_for(comm, MPI_Ialltoall(blocks.data(), mpi_count(bytes, what), MPI_BYTE, all.data(),
                                         mpi_count(bytes, what), MPI_BYTE, comm->comm, &req), req, what);
        } else {
            all = blocks;
        }
        reduce_segments(all.data(), bytes, recv, {{0, recvcount, (comm->rank + 1) % n}}, n, t, op);
    });
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t stream) {
    if (ncclResult_t r = check_args(comm, t, ncclSum, false)) return r;
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
    if (ncclResult_t r = check_args(comm, t, ncclSum, false)) return r;
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
