#include "test_hooks.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "preemption.h"

namespace llmc {

namespace {

// "<rank>:<step>" of variable `name` names this rank and step.
bool names(const char* name, int rank, int step) {
    const char* s = std::getenv(name);
    int r = -1, k = -1;
    return s && std::sscanf(s, "%d:%d", &r, &k) == 2 && r == rank && k == step;
}

}  // namespace

TestHooks hooks_from_environment() {
    TestHooks h;
    if (std::getenv("LLMC_TEST_STOP_RANK") || std::getenv("LLMC_TEST_WAIT_FOR_SIGNAL"))
        h.before_step = [](int rank, int step) {
            if (names("LLMC_TEST_STOP_RANK", rank, step)) {
                std::fprintf(stderr, "LLMC_TEST_STOP_RANK: rank %d stops itself before step %d\n", rank, step);
                std::fflush(stderr);
                raise(SIGSTOP);
            }
            if (names("LLMC_TEST_WAIT_FOR_SIGNAL", rank, step)) {
                std::fprintf(stderr, "LLMC_TEST_WAIT_FOR_SIGNAL: rank %d (pid %ld) waits for a signal before step %d\n",
                             rank, (long)getpid(), step);
                std::fflush(stderr);
                wait_for_signal(300, "LLMC_TEST_WAIT_FOR_SIGNAL");
                if (std::strstr(std::getenv("LLMC_TEST_WAIT_FOR_SIGNAL"), ":hang") == nullptr) return;
                // a step stuck in a library: it does not end after the signal (--preempt-grace, llmc/preemption.h)
                std::fprintf(stderr, "LLMC_TEST_WAIT_FOR_SIGNAL: rank %d's step does not end\n", rank);
                std::fflush(stderr);
                const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(300);
                while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                std::fprintf(stderr, "LLMC_TEST_WAIT_FOR_SIGNAL: still running 300 s after the signal\n");
                std::_Exit(1);
            }
        };
    if (const char* s = std::getenv("LLMC_TEST_NAN_STEPS")) {
        const std::string list = std::string(",") + s + ",";
        h.nan_loss = [list](int step) { return list.find("," + std::to_string(step) + ",") != std::string::npos; };
    }
    if (const char* s = std::getenv("LLMC_TEST_CRASH_IN_CHECKPOINT")) {
        const int crash_step = std::atoi(s);
        h.inside_checkpoint = [crash_step](int step) {
            if (step != crash_step) return;
            std::fprintf(stderr, "LLMC_TEST_CRASH_IN_CHECKPOINT: killing myself inside checkpoint %d\n", step);
            raise(SIGKILL);
        };
    }
    return h;
}

}  // namespace llmc
