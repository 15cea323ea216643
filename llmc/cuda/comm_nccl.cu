// NcclComm: collectives over device buffers with NCCL, enqueued on the caller's stream (see cuda_comm.h).
//
// Watchdog (CommOptions::watchdog_s, llmc/watchdog.h): after each collective (or NCCL group) a CUDA event from a
// pool is recorded on its stream; the watchdog thread polls the oldest one with cudaEventQuery and
// ncclCommGetAsyncError, so a peer that never arrives (its kernel spins on the GPU while the host waits in a
// synchronisation) stops every rank with a message naming it. The census goes over MPI (-pi mpi) or through files
// in the -pf directory (-pi fs); without MPI the communicator is aborted (ncclCommAbort) before the exit.
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../file_util.h"
#include "../mpi_env.h"
#include "../watchdog.h"
#include "cuda_check.h"
#include "cuda_comm.h"

namespace llmc {

namespace {

void nccl_check(ncclResult_t r, const char* expr, const char* file, int line) {
    if (r != ncclSuccess) fail("%s:%d: NCCL error %d (%s) in %s", file, line, (int)r, ncclGetErrorString(r), expr);
}
#define NCCL_CHECK(expr) nccl_check((expr), #expr, __FILE__, __LINE__)

ncclDataType_t nccl_type(DType t) {
    switch (t) {
        case DType::F32: return ncclFloat32;
        case DType::BF16: return ncclBfloat16;
        case DType::I32: return ncclInt32;
        case DType::U64: return ncclUint64;
    }
    fail("NCCL: unknown dtype %d", (int)t);
}

ncclRedOp_t nccl_op(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum: return ncclSum;
        case ReduceOp::Avg: return ncclAvg;
        case ReduceOp::Max: return ncclMax;
    }
    fail("NCCL: unknown reduction %d", (int)op);
}

// The rendezvous file of this launch: named by the launch tag (Slurm job/step, torchrun id, LLMC_RUN_ID, ...).
std::string id_file_path(const CommOptions& opt) {
    return opt.rendezvous_dir + "/nccl_id_" + launch_tag(current_environment()) + ".bin";
}

// What rank 0 publishes at the rendezvous: NCCL's id, and a nonce of this launch that names the watchdog's census
// files (the simulator's id is the same in every launch).
struct Rendezvous {
    ncclUniqueId id;
    uint64_t nonce;
};

// Rank 0 writes the id atomically (temp + rename), so a reader never sees half a file; the others poll for it.
Rendezvous exchange_id_by_file(const DistInfo& info, const CommOptions& opt, const ncclUniqueId& id) {
    if (opt.rendezvous_dir.empty()) fail("-pi fs needs -pf DIR: a directory every rank can read");
    const std::string path = id_file_path(opt);
    Rendezvous rv;
    rv.id = id;
    if (info.rank == 0) {
        rv.nonce = (uint64_t)std::chrono::system_clock::now().time_since_epoch().count() ^ ((uint64_t)getpid() << 32);
        write_atomically(path, [&](FILE* f) { write_exact(f, &rv, sizeof rv, path); });
        return rv;
    }
    auto start = std::chrono::steady_clock::now();
    for (;;) {
        if (FILE* f = std::fopen(path.c_str(), "rb")) {
            read_exact(f, &rv, sizeof rv, path);
            std::fclose(f);
            return rv;
        }
        double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (waited > opt.timeout_s)
            fail("%s: rank 0 did not write NCCL's id within %.0f s (is -pf a directory shared by every node?)",
                 path.c_str(), opt.timeout_s);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

class NcclComm final : public Comm {
public:
    NcclComm(const DistInfo& info, const CommOptions& opt) {
        info_ = info;
        // ncclCommSplit (hybrid sharding) exists from NCCL 2.18 on, ncclAvg and ncclBfloat16 from 2.10: an older
        // library would fail at the first split or reduction; say so here instead.
        int version = 0;
        NCCL_CHECK(ncclGetVersion(&version));
        if (version < 21800)  // codes are major*10000 + minor*100 + patch since 2.9 (major*1000 + ... before)
            fail("NCCL version code %d found, but at least 2.18 (21800) is needed (ncclCommSplit)", version);
        ncclUniqueId id;
        std::memset(&id, 0, sizeof id);
        if (info.rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
        CommInit how = CommInit::Auto;
        uint64_t nonce = 0;
        mpi_check_launch(info);  // MPI's view must be the environment's, even for one rank (mpi_env.h)
        // One rank (forced, see make_nccl_comm) needs no rendezvous; with -pf it goes through the file one, and the
        // watchdog runs, as on many ranks.
        if (info.world_size > 1 || !opt.rendezvous_dir.empty()) {
            how = opt.init;
            if (how == CommInit::Auto)
                how = launched_with_mpi(current_environment()) ? CommInit::Mpi
                      : !opt.rendezvous_dir.empty()            ? CommInit::File
                                                               : CommInit::Auto;
            if (how == CommInit::Auto)
                fail("%d ranks (from the %s environment) but neither an MPI launcher nor -pf DIR: launch with mpirun, "
                     "or give a shared directory with -pi fs -pf DIR",
                     info.world_size, info.launcher.c_str());
            if (how == CommInit::Mpi) {
                mpi_init_once(info);
                mpi_broadcast_bytes(&id, sizeof id, 0);
            } else {
                const Rendezvous rv = exchange_id_by_file(info, opt, id);
                id = rv.id, nonce = rv.nonce;
                id_file_ = id_file_path(opt);
            }
        }
        NCCL_CHECK(ncclCommInitRank(&comm_, info.world_size, id, info.rank));
        // ncclCommInitRank returns once every rank joined, so every rank has read the id: rank 0 removes the file,
        // so that a later launch with the same tag cannot pick up this run's stale id.
        if (info.rank == 0 && !id_file_.empty()) std::remove(id_file_.c_str());
        grow_staging(256);
        if (opt.watchdog_s > 0 && how != CommInit::Auto) start_watchdog(info, opt, how, nonce);
    }
    // A comm split from `root`'s (ncclCommSplit): `comm` is owned; the root's watchdog watches its collectives, and
    // aborts this communicator with the root's.
    NcclComm(NcclComm* root, ncclComm_t comm, const DistInfo& info) : root_(root), comm_(comm) {
        info_ = info;
        grow_staging(256);
        std::lock_guard<std::mutex> lock(root_->comms_mu_);
        root_->splits_.push_back(comm_);
    }
    ~NcclComm() override {
        if (root_ != this) {
            std::lock_guard<std::mutex> lock(root_->comms_mu_);
            auto& v = root_->splits_;
            v.erase(std::remove(v.begin(), v.end(), comm_), v.end());
        }
        watchdog_.reset();  // joins its thread before the communicator and the events go
        for (cudaEvent_t e : all_events_) cudaEventDestroy(e);
        // While an exception unwinds (this rank failed; main() will abort the job), collectives may be in flight
        // whose peers never arrive: ncclCommDestroy could wait for them and cudaFree synchronises the device, so
        // either could hang this rank before it reports the error. Abort the communicator and leak the buffer.
        if (std::uncaught_exceptions() > 0) {
            if (comm_) ncclCommAbort(comm_);
            return;
        }
        if (staging_) cudaFree(staging_);
        if (comm_) ncclCommDestroy(comm_);
    }
    const char* name() const override { return "nccl"; }

    void all_reduce(void* buf, size_t count, DType t, ReduceOp op, Stream stream) override {
        counters.all_reduce++;
        counters.bytes += count * dtype_size(t);
        const uint64_t id = watch(CollectiveKind::AllReduce);
        NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_type(t), nccl_op(op), comm_, cuda_stream(stream)));
        enqueued(id, stream);
    }
    void reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, int root, Stream stream) override {
        if (root < 0 || root >= info_.world_size)
            fail("reduce: root %d, expected 0 <= root < world size %d", root, info_.world_size);
        counters.reduce++;
        counters.bytes += count * dtype_size(t);
        const uint64_t id = watch(CollectiveKind::Reduce);
        NCCL_CHECK(ncclReduce(send, recv, count, nccl_type(t), nccl_op(op), root, comm_, cuda_stream(stream)));
        enqueued(id, stream);
    }
    void reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op,
                        Stream stream) override {
        counters.reduce_scatter++;
        counters.bytes += recv_count * (size_t)info_.world_size * dtype_size(t);
        const uint64_t id = watch(CollectiveKind::ReduceScatter);
        NCCL_CHECK(ncclReduceScatter(send, recv, recv_count, nccl_type(t), nccl_op(op), comm_, cuda_stream(stream)));
        enqueued(id, stream);
    }
    void all_gather(const void* send, void* recv, size_t send_count, DType t, Stream stream) override {
        counters.all_gather++;
        counters.bytes += send_count * dtype_size(t);
        const uint64_t id = watch(CollectiveKind::AllGather);
        NCCL_CHECK(ncclAllGather(send, recv, send_count, nccl_type(t), comm_, cuda_stream(stream)));
        enqueued(id, stream);
    }
    void broadcast(void* buf, size_t count, DType t, int root, Stream stream) override {
        counters.broadcast++;
        counters.bytes += count * dtype_size(t);
        const uint64_t id = watch(CollectiveKind::Broadcast);
        NCCL_CHECK(ncclBroadcast(buf, buf, count, nccl_type(t), root, comm_, cuda_stream(stream)));
        enqueued(id, stream);
    }
    // A 1-element all-reduce, waited for: every rank has reached this point. The backend's streams are non-blocking,
    // so the legacy default stream used here is NOT ordered after them: without the device synchronisation, this
    // all-reduce could run concurrently with (or before) a collective still queued on the comm or main stream, and
    // two unordered NCCL kernels of one communicator can deadlock. Barriers are rare (checkpoints), so this is cheap.
    void barrier() override {
        counters.barrier++;
        WatchedCall watched(root_->watchdog_.get(), CollectiveKind::Barrier);  // the host waits for it to complete
        CUDA_CHECK(cudaDeviceSynchronize());
        NCCL_CHECK(ncclAllReduce(staging_, staging_, 1, ncclFloat32, ncclSum, comm_, (cudaStream_t)0));
        CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)0));
    }
    // NCCL's groups are per thread, not per communicator: the root comm keeps the one group state for its splits.
    void group_start() override {
        NCCL_CHECK(ncclGroupStart());
        root_->group_depth_++;
    }
    void group_end() override {
        NCCL_CHECK(ncclGroupEnd());
        // The group's collectives are launched here: one event after them stands for all of them.
        NcclComm& r = *root_;
        if (--r.group_depth_ == 0 && r.group_id_ != 0) {
            const uint64_t id = r.group_id_;
            r.group_id_ = 0;
            r.enqueued(id, r.group_stream_);
        }
    }
    std::unique_ptr<Comm> split(int color, int key) override {
        CUDA_CHECK(cudaDeviceSynchronize());  // nothing of this communicator in flight
        ncclComm_t sub = nullptr;
        NCCL_CHECK(ncclCommSplit(comm_, color, key, &sub, nullptr));
        DistInfo info = info_;
        NCCL_CHECK(ncclCommUserRank(sub, &info.rank));
        NCCL_CHECK(ncclCommCount(sub, &info.world_size));
        return std::make_unique<NcclComm>(root_, sub, info);
    }

protected:
    // The host channel goes through staging_, a device buffer this comm owns, on the legacy default stream after a
    // device synchronisation, as the barrier above does (and for the same reason: no other collective of this
    // communicator can still be queued when it runs). Control data is small: staging_ grows only for a larger call.
    void host_all_reduce(void* buf, size_t count, DType t, ReduceOp op) override {
        WatchedCall watched(root_->watchdog_.get(), CollectiveKind::AllReduce);
        const size_t bytes = count * dtype_size(t);
        CUDA_CHECK(cudaDeviceSynchronize());
        grow_staging(bytes);
        CUDA_CHECK(cudaMemcpy(staging_, buf, bytes, cudaMemcpyHostToDevice));
        NCCL_CHECK(ncclAllReduce(staging_, staging_, count, nccl_type(t), nccl_op(op), comm_, (cudaStream_t)0));
        CUDA_CHECK(cudaMemcpy(buf, staging_, bytes, cudaMemcpyDeviceToHost));  // waits for the all-reduce
    }
    void host_all_gather(const void* send, void* recv, size_t count, DType t) override {
        WatchedCall watched(root_->watchdog_.get(), CollectiveKind::AllGather);
        const size_t bytes = count * dtype_size(t), world = (size_t)info_.world_size;
        CUDA_CHECK(cudaDeviceSynchronize());
        grow_staging(bytes * world);
        char* mine = static_cast<char*>(staging_) + (size_t)info_.rank * bytes;
        CUDA_CHECK(cudaMemcpy(mine, send, bytes, cudaMemcpyHostToDevice));
        NCCL_CHECK(ncclAllGather(mine, staging_, count, nccl_type(t), comm_, (cudaStream_t)0));
        CUDA_CHECK(cudaMemcpy(recv, staging_, bytes * world, cudaMemcpyDeviceToHost));
    }

private:
    void grow_staging(size_t bytes) {
        if (bytes <= staging_bytes_) return;
        if (staging_) CUDA_CHECK(cudaFree(staging_));
        staging_ = nullptr;
        staging_bytes_ = 0;
        CUDA_CHECK(cudaMalloc(&staging_, bytes));
        CUDA_CHECK(cudaMemset(staging_, 0, bytes));
        staging_bytes_ = bytes;
    }

    // The watchdog sees one unit per ungrouped collective or per group (its first collective's kind).
    uint64_t watch(CollectiveKind kind) {
        NcclComm& r = *root_;
        if (!r.watchdog_) return 0;
        if (r.group_depth_ == 0) return r.watchdog_->enter(kind);
        if (r.group_id_ == 0) r.group_id_ = r.watchdog_->enter(kind);
        return 0;
    }
    // The call of unit `id` returned (a no-op inside a group: the group's end stands for it). An event recorded
    // on its stream tells the watchdog when the GPU has run it. Events come from a pool: the watchdog hands each
    // back once it has seen it complete (hooks.retired); the pool grows to the number of collectives in flight,
    // which the host's per-step synchronisation bounds.
    void enqueued(uint64_t id, Stream stream) {
        if (root_ != this) return root_->enqueued(id, stream);
        if (!watchdog_) return;
        if (group_depth_ > 0) {
            group_stream_ = stream;
            return;
        }
        cudaEvent_t ev = nullptr;
        {
            std::lock_guard<std::mutex> lock(events_mu_);
            if (free_events_.empty()) {
                CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
                all_events_.push_back(ev);
            } else {
                ev = free_events_.back();
                free_events_.pop_back();
            }
        }
        CUDA_CHECK(cudaEventRecord(ev, cuda_stream(stream)));
        watchdog_->leave(id, ev);
    }
    void start_watchdog(const DistInfo& info, const CommOptions& opt, CommInit how, uint64_t nonce) {
        std::unique_ptr<Census> census;
        if (how == CommInit::Mpi) {
            census = make_mpi_census();  // collective: every rank creates it here
        } else {
            char hex[24];
            std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)nonce);
            census = make_file_census(opt.rendezvous_dir, hex, info.rank, info.world_size);
        }
        WatchdogHooks hooks;
        const int device = info.device;
        hooks.thread_start = [device] { cudaSetDevice(device); };
        hooks.completed = [](void* ev) { return cudaEventQuery((cudaEvent_t)ev) != cudaErrorNotReady; };
        hooks.retired = [this](void* ev) {
            std::lock_guard<std::mutex> lock(events_mu_);
            free_events_.push_back((cudaEvent_t)ev);
        };
        ncclComm_t comm = comm_;
        hooks.async_error = [comm]() -> std::string {
            ncclResult_t r = ncclSuccess;
            if (ncclCommGetAsyncError(comm, &r) != ncclSuccess || r == ncclSuccess || r == ncclInProgress) return "";
            return std::string("NCCL reports an asynchronous error: ") + ncclGetErrorString(r);
        };
        // Every communicator of this process: a split's kernels would otherwise spin on after the root's abort.
        hooks.abort = [this] {
            std::lock_guard<std::mutex> lock(comms_mu_);
            for (ncclComm_t c : splits_) ncclCommAbort(c);
            ncclCommAbort(comm_);
        };
        watchdog_ = std::make_unique<CommWatchdog>(info.rank, info.world_size, opt.watchdog_s, std::move(census),
                                                   std::move(hooks));
    }

    NcclComm* root_ = this;                    // the comm this one was split from (itself for the world's)
    std::unique_ptr<CommWatchdog> watchdog_;  // null: off (one rank, or no timeout, or a split comm)
    std::mutex comms_mu_;                      // the root's: splits_ is shared with the watchdog's thread
    std::vector<ncclComm_t> splits_;           // the root's: the live communicators split from it
    std::mutex events_mu_;                     // the pool is shared with the watchdog's thread
    std::vector<cudaEvent_t> all_events_, free_events_;
    int group_depth_ = 0;
    uint64_t group_id_ = 0;    // the watchdog unit of the open group (0: none yet)
    Stream group_stream_;
    ncclComm_t comm_ = nullptr;
    void* staging_ = nullptr;  // the host channel's device buffer (and the barrier's one float)
    size_t staging_bytes_ = 0;
    std::string id_file_;  // -pi fs: the rendezvous file rank 0 wrote (removed once every rank joined)
};

// SingleComm's copy for a collective whose receive buffer is not its send buffer: a device copy on the stream.
void device_copy(void* dst, const void* src, size_t bytes, Stream stream) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_stream(stream)));
}

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(const DistInfo& info, const CommOptions& opt) {
    // One rank: every reduction is the identity, so no NCCL communicator and no collective kernel. An NCCL all-reduce
    // over one rank still reads and rewrites its buffer: ~148 of them per step rewrote the ~0.5 GB of fp32
    // gradients of GPT-2 124M. The calls are still counted (CommCounters), as on every Comm. LLMC_NCCL_ONE_RANK=1
    // makes one rank use NCCL anyway, so that a single GPU runs the NCCL path (docs/distributed.md).
    const char* force = std::getenv("LLMC_NCCL_ONE_RANK");
    if (info.world_size == 1 && !(force && std::strcmp(force, "1") == 0)) {
        mpi_check_launch(info);  // MPI's view must be the environment's, even for one rank (mpi_env.h)
        return make_single_comm(device_copy);
    }
    return std::make_unique<NcclComm>(info, opt);
}

}  // namespace llmc
