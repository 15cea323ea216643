// Signal handlers for preemption (see preemption.h).
#include "preemption.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "error.h"

namespace llmc {

namespace {

volatile sig_atomic_t g_received = 0;
struct sigaction g_previous[NSIG];

void on_signal(int sig) {
    if (g_received != 0) {  // the second signal: the default action, now
        signal(sig, SIG_DFL);
        raise(sig);  // delivered when this handler returns
        return;
    }
    g_received = sig;
    // write(2) is async-signal-safe; printf is not.
    static const char msg[] = "signal received: finishing this step, then writing a checkpoint on every rank "
                              "(a second signal stops at once)\n";
    const ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
}

}  // namespace

int parse_preempt_signal(const std::string& name) {
    std::string n = name.rfind("SIG", 0) == 0 ? name.substr(3) : name;
    if (n == "none") return 0;
    if (n == "USR1") return SIGUSR1;
    if (n == "USR2") return SIGUSR2;
    if (n == "HUP") return SIGHUP;
    fail("--preempt-signal %s: expected USR1, USR2, HUP or none (SIGTERM and SIGINT always save and stop)",
         name.c_str());
}

const char* signal_name(int sig) {
    switch (sig) {
        case SIGTERM: return "SIGTERM";
        case SIGINT: return "SIGINT";
        case SIGUSR1: return "SIGUSR1";
        case SIGUSR2: return "SIGUSR2";
        case SIGHUP: return "SIGHUP";
        default: return "a signal";
    }
}

PreemptionHandlers::PreemptionHandlers(int extra_signal) {
    g_received = 0;
    signals_[0] = SIGTERM, signals_[1] = SIGINT, signals_[2] = extra_signal;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;  // the step's reads, writes and collectives go on undisturbed
    sigemptyset(&sa.sa_mask);
    for (int s : signals_)
        if (s != 0) sigaddset(&sa.sa_mask, s);  // one handler at a time
    for (int s : signals_)
        if (s != 0 && sigaction(s, &sa, &g_previous[s]) != 0)
            fail("cannot install the handler of %s (%s)", signal_name(s), std::strerror(errno));
}

PreemptionHandlers::~PreemptionHandlers() {
    for (int s : signals_)
        if (s != 0) sigaction(s, &g_previous[s], nullptr);
}

int PreemptionHandlers::received() { return g_received; }

void wait_for_signal(int seconds, const char* who) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (g_received == 0) {
        if (std::chrono::steady_clock::now() > until) fail("%s: no signal within %d s", who, seconds);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

}  // namespace llmc
