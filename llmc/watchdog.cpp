// The collectives' watchdog and its census channels (see watchdog.h).
#include "watchdog.h"

#include <mpi.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "error.h"
#include "file_util.h"
#include "mpi_env.h"

namespace llmc {

using Clock = std::chrono::steady_clock;

const char* collective_name(CollectiveKind k) {
    switch (k) {
        case CollectiveKind::AllReduce: return "all_reduce";
        case CollectiveKind::Reduce: return "reduce";
        case CollectiveKind::ReduceScatter: return "reduce_scatter";
        case CollectiveKind::AllGather: return "all_gather";
        case CollectiveKind::Broadcast: return "broadcast";
        case CollectiveKind::Barrier: return "barrier";
    }
    return "?";
}

// ---- census over MPI -------------------------------------------------------------------------------------------

namespace {

constexpr int CENSUS_TAG = 0x57444f47;  // "WDOG"

class MpiCensus final : public Census {
public:
    MpiCensus() {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &world_);
    }
    ~MpiCensus() override {
        // Sends of an aborted census stay pending (the job is ending); otherwise the communicator is idle.
        if (sends_.empty() && mpi_is_initialized()) MPI_Comm_free(&comm_);
    }
    const char* name() const override { return "MPI"; }
    bool started_elsewhere() override {
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, CENSUS_TAG, comm_, &flag, MPI_STATUS_IGNORE);
        return flag != 0;
    }
    void announce(const RankStatus& mine) override {
        mine_ = mine;
        sends_.resize((size_t)world_, MPI_REQUEST_NULL);
        for (int r = 0; r < world_; r++)
            if (r != rank_) MPI_Isend(&mine_, (int)sizeof mine_, MPI_BYTE, r, CENSUS_TAG, comm_, &sends_[(size_t)r]);
    }
    void collect(std::vector<RankStatus>& got) override {
        for (;;) {
            int flag = 0;
            MPI_Status st;
            MPI_Iprobe(MPI_ANY_SOURCE, CENSUS_TAG, comm_, &flag, &st);
            if (!flag) break;
            RankStatus s;
            MPI_Recv(&s, (int)sizeof s, MPI_BYTE, st.MPI_SOURCE, CENSUS_TAG, comm_, MPI_STATUS_IGNORE);
            if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < (int)got.size() && s.rank == st.MPI_SOURCE)
                got[(size_t)st.MPI_SOURCE] = s;
        }
    }

private:
    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0, world_ = 1;
    RankStatus mine_;
    std::vector<MPI_Request> sends_;
};

// ---- census through a shared directory ------------------------------------------------------------------------

class FileCensus final : public Census {
public:
    FileCensus(const std::string& dir, const std::string& nonce, int rank, int world)
        : prefix_(dir + "/watchdog_" + nonce), rank_(rank), world_(world) {}
    const char* name() const override { return "shared directory"; }
    bool started_elsewhere() override {
        struct stat st;
        return stat((prefix_ + ".alarm").c_str(), &st) == 0;
    }
    void announce(const RankStatus& s) override {
        char text[160];
        const int n = std::snprintf(text, sizeof text, "%d %d %llu %llu %.3f\n", s.rank, s.waiting_kind,
                                    (unsigned long long)s.waiting_id, (unsigned long long)s.entered, s.seconds);
        try {
            const std::string mine = prefix_ + "_" + std::to_string(rank_);
            write_atomically(mine, [&](FILE* f) { write_exact(f, text, (size_t)n, mine); });
            if (!started_elsewhere()) {
                const std::string alarm = prefix_ + ".alarm";
                write_atomically(alarm, [&](FILE* f) { write_exact(f, text, (size_t)n, alarm); });
            }
        } catch (const Error& e) {
            std::fprintf(stderr, "comm watchdog: cannot write the census file (%s)\n", e.what());
        }
    }
    void collect(std::vector<RankStatus>& got) override {
        for (int r = 0; r < world_; r++) {
            if (r == rank_ || got[(size_t)r].rank >= 0) continue;
            std::ifstream in(prefix_ + "_" + std::to_string(r));
            RankStatus s;
            unsigned long long id = 0, entered = 0;
            if (in >> s.rank >> s.waiting_kind >> id >> entered >> s.seconds && s.rank == r) {
                s.waiting_id = id, s.entered = entered;
                got[(size_t)r] = s;
            }
        }
    }

private:
    std::string prefix_;
    int rank_, world_;
};

}  // namespace

std::unique_ptr<Census> make_mpi_census() {
    if (!mpi_thread_multiple()) return nullptr;
    return std::make_unique<MpiCensus>();
}

std::unique_ptr<Census> make_file_census(const std::string& dir, const std::string& nonce, int rank, int world) {
    return std::make_unique<FileCensus>(dir, nonce, rank, world);
}

// ---- the watchdog ----------------------------------------------------------------------------------------------

CommWatchdog::CommWatchdog(int rank, int world_size, double timeout_s, std::unique_ptr<Census> census,
                           WatchdogHooks hooks)
    : rank_(rank), world_(world_size), timeout_s_(timeout_s),
      // Checks ten times per timeout (at most once a second); the census waits for the others long enough for
      // their watchdogs to notice it (a tick) and answer, with a second to spare.
      tick_s_(std::clamp(timeout_s / 10, 0.02, 1.0)), grace_s_(3 * std::clamp(timeout_s / 10, 0.02, 1.0) + 1.0),
      census_(std::move(census)), hooks_(std::move(hooks)), last_done_(Clock::now()) {
    if (!(timeout_s > 0)) fail("comm watchdog: timeout %g s, expected > 0", timeout_s);
    thread_ = std::thread([this] { run(); });
}

CommWatchdog::~CommWatchdog() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

uint64_t CommWatchdog::enter(CollectiveKind kind) {
    std::lock_guard<std::mutex> lock(mu_);
    call_ = Pending{++entered_, kind, nullptr, Clock::now()};
    in_call_ = true;
    return call_.id;
}

void CommWatchdog::leave(uint64_t id, void* event) {
    std::lock_guard<std::mutex> lock(mu_);
    in_call_ = false;
    if (event) {
        // It waits behind the unfinished ones before it (one communicator runs its collectives in order): its
        // clock starts when it becomes the oldest (see run()).
        pending_.push_back(Pending{id, call_.kind, event, Clock::now()});
    } else if (pending_.empty()) {
        last_done_ = Clock::now();
    }
}

size_t CommWatchdog::unfinished() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size() + (in_call_ ? 1 : 0);
}

RankStatus CommWatchdog::status_now() {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    RankStatus s;
    s.rank = rank_;
    s.entered = entered_;
    const Pending* oldest = !pending_.empty() ? &pending_.front() : in_call_ ? &call_ : nullptr;
    if (oldest) {
        s.waiting_kind = (int32_t)oldest->kind;
        s.waiting_id = oldest->id;
        s.seconds = std::chrono::duration<double>(now - oldest->since).count();
    } else {
        s.seconds = std::chrono::duration<double>(now - last_done_).count();
    }
    return s;
}

void CommWatchdog::run() {
    if (hooks_.thread_start) hooks_.thread_start();
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            wake_.wait_for(lock, std::chrono::duration<double>(tick_s_), [this] { return stop_; });
            if (stop_) return;
        }
        if (hooks_.async_error) {
            const std::string err = hooks_.async_error();
            if (!err.empty()) fire(err);
        }
        // Retire the collectives the device has finished, oldest first. Only this thread pops, so the front stays
        // put while its event is queried without the lock (the main thread only appends).
        for (;;) {
            void* ev = nullptr;
            {
                std::lock_guard<std::mutex> lock(mu_);
                if (pending_.empty()) break;
                ev = pending_.front().event;
            }
            if (hooks_.completed && !hooks_.completed(ev)) break;
            {
                std::lock_guard<std::mutex> lock(mu_);
                pending_.pop_front();
                const auto now = Clock::now();
                if (!pending_.empty()) pending_.front().since = std::max(pending_.front().since, now);
                else if (!in_call_) last_done_ = now;
            }
            if (hooks_.retired) hooks_.retired(ev);
        }
        const RankStatus s = status_now();
        if (s.waiting_id != 0 && s.seconds > timeout_s_) {
            char why[160];
            std::snprintf(why, sizeof why, "collective #%llu (%s) made no progress for %.1f s",
                          (unsigned long long)s.waiting_id, collective_name((CollectiveKind)s.waiting_kind), s.seconds);
            fire(why);
        }
        if (census_ && census_->started_elsewhere()) fire("");
    }
}

std::string CommWatchdog::report(int self, const std::vector<RankStatus>& st, double timeout_s, bool have_census) {
    // The head is about this rank's own wait, or (a rank that joined a census while computing) the longest one.
    const RankStatus* head_of = &st[(size_t)self];
    for (const RankStatus& s : st)
        if (head_of->waiting_id == 0 && s.rank >= 0 && s.waiting_id != 0 && s.seconds > head_of->seconds) head_of = &s;
    char buf[256];
    if (head_of->waiting_id != 0)
        std::snprintf(buf, sizeof buf, "comm watchdog on rank %d: rank %d's collective #%llu (%s) made no progress for "
                      "%.1f s (--comm-timeout / LLMC_COMM_TIMEOUT is %g s)", self, head_of->rank,
                      (unsigned long long)head_of->waiting_id, collective_name((CollectiveKind)head_of->waiting_kind),
                      head_of->seconds, timeout_s);
    else
        std::snprintf(buf, sizeof buf, "comm watchdog on rank %d: a collective made no progress for %g s "
                      "(--comm-timeout / LLMC_COMM_TIMEOUT)", self, timeout_s);
    std::string msg = buf;
    if (!have_census)
        return msg + ": a peer rank is stopped, hung or dead (no census channel to tell which: MPI without "
                     "MPI_THREAD_MULTIPLE); stopping every rank";
    // Who did not answer (stopped, hung or dead: the stuck ones), who answered from outside any collective (a main
    // thread that does not come back), and where the others wait, grouped by collective (a rooted collective
    // returns on non-root ranks before the root has everything, so waiting ranks may be a few collectives apart).
    std::string silent, computing;
    std::vector<std::pair<std::pair<uint64_t, int32_t>, std::string>> waiting;
    auto add = [](std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; };
    for (size_t r = 0; r < st.size(); r++) {
        const RankStatus& s = st[r];
        if (s.rank < 0) {
            add(silent, std::to_string(r));
        } else if (s.waiting_id == 0) {
            std::snprintf(buf, sizeof buf, "rank %zu (outside collectives for %.1f s, after #%llu)", r, s.seconds,
                          (unsigned long long)s.entered);
            add(computing, buf);
        } else {
            const std::pair<uint64_t, int32_t> key{s.waiting_id, s.waiting_kind};
            auto it = std::find_if(waiting.begin(), waiting.end(), [&](const auto& w) { return w.first == key; });
            if (it == waiting.end()) waiting.push_back({key, std::to_string(r)});
            else it->second += ", " + std::to_string(r);
        }
    }
    std::string parts;
    if (!silent.empty())
        parts = std::string(silent.find(',') != std::string::npos ? "ranks " : "rank ") + silent +
                " did not answer (stopped, hung or dead)";
    if (!computing.empty()) parts += (parts.empty() ? "no collective: " : "; no collective: ") + computing;
    if (parts.empty()) parts = "every rank waits in a collective (they issued different collectives, or the "
                               "communicator is stuck)";
    std::string where;
    for (const auto& w : waiting) {
        std::snprintf(buf, sizeof buf, " in #%llu (%s)", (unsigned long long)w.first.first,
                      collective_name((CollectiveKind)w.first.second));
        add(where, std::string(w.second.find(',') != std::string::npos ? "ranks " : "rank ") + w.second + buf);
    }
    if (!where.empty()) parts += "; waiting: " + where;
    return msg + ": " + parts + "; stopping every rank";
}

void CommWatchdog::fire(const std::string& reason) {
    std::vector<RankStatus> got((size_t)world_);
    got[(size_t)rank_] = status_now();
    if (census_) {
        census_->announce(got[(size_t)rank_]);
        const auto deadline = Clock::now() + std::chrono::duration<double>(grace_s_);
        for (;;) {
            census_->collect(got);
            bool all = true;
            for (const RankStatus& s : got) all = all && s.rank >= 0;
            if (all || Clock::now() >= deadline) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    std::string msg = report(rank_, got, timeout_s_, census_ != nullptr);
    if (!reason.empty() && reason.rfind("collective #", 0) != 0) msg = reason + "; " + msg;  // an async error
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", msg.c_str());
    std::fflush(stderr);
    // MPI_Abort ends every process of the job (a stopped one too); without MPI the communicator is aborted (its
    // kernels stop) and this process exits; the launcher ends the others, or their own watchdogs do.
    if (mpi_is_initialized()) mpi_abort(1);
    if (hooks_.abort) {  // given 10 s: an abort that hangs must not keep this rank alive
        auto done = std::make_shared<std::atomic<bool>>(false);
        std::thread([abort = hooks_.abort, done] {
            abort();
            *done = true;
        }).detach();
        for (int i = 0; i < 1000 && !*done; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::_Exit(1);
}

}  // namespace llmc
