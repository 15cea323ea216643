// The collectives' watchdog: no rank waits forever for a peer (docs/distributed.md, "Watchdog").
//
// A Comm tells its watchdog when it enters a collective and when the call returns (enter/leave). On the MPI comm
// the call returns when the collective is done; on NCCL it returns once the collective is enqueued, and `leave`
// gets a CUDA event recorded after it, which the watchdog polls (hooks.completed) until the GPU has run it. A
// thread checks every `tick`: when the oldest unfinished collective has waited longer than `timeout_s`, this rank
// starts a *census*: it sends its status (which collective it waits in, how many it has entered) to every peer
// over a side channel that needs no cooperation from a stuck rank, and every live rank joins as soon as it sees
// the census (its own watchdog thread answers even while its main thread computes). After a grace period each
// participant prints one line naming the ranks that did not answer (stopped, hung or dead) or that have not
// reached the collective, and the job ends: MPI_Abort when MPI runs (it also kills a stopped rank), else
// hooks.abort (ncclCommAbort) and exit status 1.
//
// Side channels (Census): MPI point-to-point messages on a communicator of their own (MPI initialised with
// MPI_THREAD_MULTIPLE, so the watchdog thread may use MPI while the main thread is blocked in a collective), or
// files in a directory every rank shares (NCCL's -pi fs rendezvous directory). Without one, the message says that
// a peer is stuck without naming it.
//
// The watchdog only sees collectives issued through a Comm; the time between two of them (a step's compute, rank 0
// writing a checkpoint's model.bin while the others wait at the barrier) must stay below the timeout.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace llmc {

enum class CollectiveKind : int32_t { AllReduce, Reduce, ReduceScatter, AllGather, Broadcast, Barrier };
const char* collective_name(CollectiveKind k);

// One rank's answer in a census.
struct RankStatus {
    int32_t rank = -1;            // -1: no answer
    int32_t waiting_kind = -1;    // the collective it waits in (a CollectiveKind), -1: it is not in a collective
    uint64_t waiting_id = 0;      // that collective's number on this rank (1, 2, ... in issue order), 0: none
    uint64_t entered = 0;         // collectives this rank has entered so far
    double seconds = 0;           // how long it has waited in it (not waiting: since its last collective returned)
};

// A side channel for the census (see above). Used from the watchdog thread only.
class Census {
public:
    virtual ~Census() = default;
    virtual const char* name() const = 0;
    // Another rank has started a census.
    virtual bool started_elsewhere() = 0;
    // Tells every other rank this rank's status (once).
    virtual void announce(const RankStatus& mine) = 0;
    // Adds the statuses that have arrived: got[r] for rank r (got has world_size entries).
    virtual void collect(std::vector<RankStatus>& got) = 0;
};

// MPI point-to-point on a duplicate of MPI_COMM_WORLD. Collective (every rank constructs it, in the same order as
// its other communicators); nullptr when MPI does not provide MPI_THREAD_MULTIPLE.
std::unique_ptr<Census> make_mpi_census();
// Files <dir>/watchdog_<nonce>_<rank> and <dir>/watchdog_<nonce>.alarm; `nonce` is the same on every rank of one
// launch and differs between launches (files of an earlier launch are never mistaken for this one's).
std::unique_ptr<Census> make_file_census(const std::string& dir, const std::string& nonce, int rank, int world);

struct WatchdogHooks {
    std::function<void()> thread_start;        // run first in the watchdog thread (CUDA: select the device)
    std::function<bool(void*)> completed;      // has the event passed to leave() completed? (CUDA: cudaEventQuery)
    std::function<void(void*)> retired;        // the watchdog is done with that event (NCCL: back to the pool)
    std::function<std::string()> async_error;  // "" or an error the communicator reports asynchronously (NCCL)
    std::function<void()> abort;               // before exiting, when MPI cannot end the job (ncclCommAbort)
};

class CommWatchdog {
public:
    // timeout_s > 0. The thread starts at once.
    CommWatchdog(int rank, int world_size, double timeout_s, std::unique_ptr<Census> census, WatchdogHooks hooks);
    ~CommWatchdog();
    CommWatchdog(const CommWatchdog&) = delete;
    CommWatchdog& operator=(const CommWatchdog&) = delete;

    // Main thread, around every collective: the id from enter() goes to leave(). `event`: null when the collective
    // is complete when the call returns, else polled with hooks.completed until it is.
    uint64_t enter(CollectiveKind kind);
    void leave(uint64_t id, void* event = nullptr);
    // Collectives entered but not yet known to be complete (NCCL: enqueued ones the GPU has not finished).
    size_t unfinished() const;

    // The one-line report of a census: `statuses[r]` is rank r's answer (rank -1: none); `self` is this rank.
    // Public for the tests.
    static std::string report(int self, const std::vector<RankStatus>& statuses, double timeout_s, bool have_census);

private:
    struct Pending {
        uint64_t id;
        CollectiveKind kind;
        void* event;
        std::chrono::steady_clock::time_point since;  // when it became the oldest unfinished one (or was entered)
    };
    void run();
    RankStatus status_now();
    [[noreturn]] void fire(const std::string& reason);

    const int rank_, world_;
    const double timeout_s_, tick_s_, grace_s_;
    std::unique_ptr<Census> census_;
    WatchdogHooks hooks_;
    mutable std::mutex mu_;
    std::condition_variable wake_;
    bool stop_ = false;
    uint64_t entered_ = 0;
    bool in_call_ = false;
    Pending call_{};                // the collective whose call has not returned yet (in_call_)
    std::deque<Pending> pending_;   // returned, not yet complete, oldest first
    std::chrono::steady_clock::time_point last_done_;
    std::thread thread_;
};

// One collective that is complete when its call returns: enter() on construction, leave() on destruction (also when
// the call throws). A null watchdog makes it a no-op.
class WatchedCall {
public:
    WatchedCall(CommWatchdog* w, CollectiveKind kind) : w_(w), id_(w ? w->enter(kind) : 0) {}
    ~WatchedCall() {
        if (w_) w_->leave(id_);
    }
    WatchedCall(const WatchedCall&) = delete;
    WatchedCall& operator=(const WatchedCall&) = delete;

private:
    CommWatchdog* w_;
    uint64_t id_;
};

}  // namespace llmc
