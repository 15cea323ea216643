// The collectives' watchdog (llmc/watchdog.h) without MPI: its report line for the census outcomes, and the thread in
// a forked child (it ends the process): a collective that never completes fires after the timeout, naming the
// rank that did not answer; collectives that complete, also through an event polled later (NCCL), never fire; a
// census started by another rank is joined. The census goes through a directory (the -pi fs channel), with the
// "peer" played by the test. The MPI and NCCL paths end to end: test/e2e/hostile_input_test.sh (mpirun, SIGSTOP).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "llmc/watchdog.h"
#include "test/fixtures/testing.h"

using namespace llmc;

static RankStatus waiting(int rank, uint64_t id, CollectiveKind k, double s) {
    RankStatus r;
    r.rank = rank, r.waiting_id = id, r.waiting_kind = (int32_t)k, r.entered = id, r.seconds = s;
    return r;
}

static void test_report() {
    const double T = 5;
    std::vector<RankStatus> st = {waiting(0, 65, CollectiveKind::Reduce, 6.1), waiting(1, 67, CollectiveKind::Reduce, 6.0),
                                  RankStatus()};
    std::string m = CommWatchdog::report(0, st, T, true);
    testing::check("report: the silent rank is named, the waiting ones listed by collective",
                   m.find("rank 0's collective #65 (reduce) made no progress for 6.1 s") != std::string::npos &&
                       m.find(": rank 2 did not answer (stopped, hung or dead)") != std::string::npos &&
                       m.find("waiting: rank 0 in #65 (reduce), rank 1 in #67 (reduce); stopping every rank") !=
                           std::string::npos,
                   "%s", m.c_str());
    RankStatus busy;
    busy.rank = 2, busy.entered = 64, busy.seconds = 42;
    st[2] = busy;
    st[1] = waiting(1, 65, CollectiveKind::Reduce, 6.0);
    m = CommWatchdog::report(1, st, T, true);
    testing::check("report: a rank that answers from outside any collective is named with its time away",
                   m.find("no collective: rank 2 (outside collectives for 42.0 s, after #64)") != std::string::npos &&
                       m.find("waiting: ranks 0, 1 in #65 (reduce)") != std::string::npos,
                   "%s", m.c_str());
    st[2] = waiting(2, 65, CollectiveKind::Reduce, 5.5);
    m = CommWatchdog::report(2, st, T, true);
    testing::check("report: every rank waiting means the communicator (or mismatched collectives)",
                   m.find("every rank waits in a collective") != std::string::npos, "%s", m.c_str());
    m = CommWatchdog::report(0, {waiting(0, 3, CollectiveKind::Barrier, 9), RankStatus()}, T, false);
    testing::check("report: without a census channel it says so instead of guessing",
                   m.find("a peer rank is stopped, hung or dead (no census channel") != std::string::npos, "%s",
                   m.c_str());
}

// Runs `body` in a child process with stderr captured; returns (exit status, stderr). -1: killed or timed out.
static std::string tmp;  // this program's directory

static std::pair<int, std::string> in_child(const std::string& tag, const std::function<void()>& body, double limit_s) {
    const std::string err = tmp + "/" + tag + ".err";
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        if (!std::freopen(err.c_str(), "w", stderr)) std::_Exit(99);
        body();
        std::_Exit(0);
    }
    int status = 0;
    const auto start = std::chrono::steady_clock::now();
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return {-1, "(timed out)"};
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::ifstream in(err);
    std::stringstream ss;
    ss << in.rdbuf();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

int main() {
    test_report();
    tmp = testing::tmp_dir("test_watchdog");
    const std::string& dir = tmp;

    // Rank 0 of 2 enters a collective that never returns; rank 1 never answers: the watchdog fires after the
    // timeout (0.3 s) and the census grace (3 ticks + 1 s), naming rank 1, with exit status 1.
    auto t0 = std::chrono::steady_clock::now();
    auto r = in_child("stuck", [&] {
        CommWatchdog w(0, 2, 0.3, make_file_census(dir, "stuck", 0, 2), WatchdogHooks());
        w.enter(CollectiveKind::AllReduce);
        std::this_thread::sleep_for(std::chrono::seconds(20));
    }, 15);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    testing::check("a collective that never returns: exit status 1 within timeout + grace", r.first == 1 && took < 5,
                   "status %d after %.1f s: %s", r.first, took, r.second.c_str());
    testing::check("... one error line naming the silent rank",
                   r.second.rfind("error: comm watchdog on rank 0: rank 0's collective #1 (all_reduce)", 0) == 0 &&
                       r.second.find("rank 1 did not answer") != std::string::npos,
                   "%s", r.second.c_str());

    // Collectives that complete in time never fire, also when their completion is an event seen later (NCCL): the
    // clock of a queued one starts when it becomes the oldest.
    r = in_child("busy", [&] {
        std::atomic<int> done{0}, retired{0};
        WatchdogHooks h;
        h.completed = [&](void* ev) { return (int)(intptr_t)ev <= done.load(); };
        h.retired = [&](void* ev) {
            if ((intptr_t)ev != retired + 1) std::_Exit(4);  // handed back once each, in order
            retired++;
        };
        CommWatchdog w(0, 2, 0.3, make_file_census(dir, "busy", 0, 2), h);
        for (int i = 1; i <= 40; i++) {
            uint64_t id = w.enter(CollectiveKind::Reduce);
            w.leave(id, (void*)(intptr_t)i);  // "enqueued"; completes 50 ms later
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            done = i;
        }
        for (int i = 0; i < 100 && w.unfinished() > 0; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (w.unfinished() != 0 || retired != 40) std::_Exit(3);
    }, 15);
    testing::check("collectives that complete through events for 2 s with a 0.3 s timeout: no alarm, every event "
                   "handed back once, in order", r.first == 0, "status %d: %s", r.first, r.second.c_str());

    // An event that never completes fires like a blocked call (the GPU never ran the collective).
    r = in_child("event", [&] {
        WatchdogHooks h;
        h.completed = [](void*) { return false; };
        CommWatchdog w(0, 2, 0.3, make_file_census(dir, "event", 0, 2), h);
        w.leave(w.enter(CollectiveKind::AllGather), (void*)1);
        std::this_thread::sleep_for(std::chrono::seconds(20));
    }, 15);
    testing::check("an enqueued collective whose event never completes fires",
                   r.first == 1 && r.second.find("collective #1 (all_gather)") != std::string::npos, "status %d: %s",
                   r.first, r.second.c_str());

    // Another rank's census is joined at once, also by a rank that is computing (no collective pending): it
    // answers, reports what the other rank wrote (rank 0 waits in #7), names itself as the one outside any
    // collective, and ends too. Rank 0's status file and the alarm are written before the child starts.
    std::ofstream(dir + "/watchdog_join_0") << "0 0 7 7 31.000\n";
    std::ofstream(dir + "/watchdog_join.alarm") << "0 0 7 7 31.000\n";
    r = in_child("join", [&] {
        CommWatchdog w(1, 2, 30, make_file_census(dir, "join", 1, 2), WatchdogHooks());
        w.leave(w.enter(CollectiveKind::Barrier));
        std::this_thread::sleep_for(std::chrono::seconds(20));
    }, 15);
    testing::check("a census started by another rank is joined by a computing rank, which reports and ends",
                   r.first == 1 &&
                       r.second.find("comm watchdog on rank 1: rank 0's collective #7 (all_reduce) made no progress "
                                     "for 31.0 s") != std::string::npos &&
                       r.second.find("no collective: rank 1 (outside collectives for") != std::string::npos &&
                       r.second.find("waiting: rank 0 in #7 (all_reduce)") != std::string::npos,
                   "status %d: %s", r.first, r.second.c_str());
    struct stat st;
    testing::check("... and wrote its own status for the others", stat((dir + "/watchdog_join_1").c_str(), &st) == 0);
    return testing::finish();
}
