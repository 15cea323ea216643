// Signal handlers for preemption (see preemption.h).
#include "preemption.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "error.h"

namespace llmc {

namespace {

volatile sig_atomic_t g_received = 0;
volatile sig_atomic_t g_grace_s = 0;  // seconds the step may take after the first signal (0: no limit)
struct sigaction g_previous[NSIG];
struct sigaction g_previous_alarm;

void write_stderr(const char* msg, size_t n) {
    const ssize_t ignored = write(STDERR_FILENO, msg, n);  // write(2) is async-signal-safe; printf is not
    (void)ignored;
}

// The first signal's own default action (it ends the process, as `timeout` and a scheduler expect).
void die_by_received_signal() {
    signal(g_received, SIG_DFL);
    raise(g_received);  // delivered when the handler returns
}

void on_signal(int sig) {
    if (g_received != 0) {  // the second signal: the default action, now
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_received = sig;
    if (g_grace_s > 0) alarm((unsigned)g_grace_s);  // the step-end watchdog (on_step_overdue)
    static const char msg[] = "signal received: finishing this step, then writing a checkpoint on every rank "
                              "(a second signal stops at once)\n";
    write_stderr(msg, sizeof msg - 1);
}

// The step did not end within the grace after the first signal (a step stuck in a library, a peer that never
// answers): stop now, as the signal's default action would have; the earlier checkpoints are intact.
void on_step_overdue(int) {
    static const char msg[] = "the step did not end within the grace time after the signal (--preempt-grace): "
                              "stopping now without a checkpoint of it; the earlier checkpoints are intact\n";
    write_stderr(msg, sizeof msg - 1);
    die_by_received_signal();
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

PreemptionHandlers::PreemptionHandlers(int extra_signal, double grace_s) : grace_s_(grace_s) {
    g_received = 0;
    g_grace_s = grace_s > 0 ? (sig_atomic_t)std::ceil(grace_s) : 0;
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
    sa.sa_handler = on_step_overdue;
    if (sigaction(SIGALRM, &sa, &g_previous_alarm) != 0)
        fail("cannot install the handler of SIGALRM (%s)", std::strerror(errno));
}

PreemptionHandlers::~PreemptionHandlers() {
    alarm(0);
    sigaction(SIGALRM, &g_previous_alarm, nullptr);
    for (int s : signals_)
        if (s != 0) sigaction(s, &g_previous[s], nullptr);
}

int PreemptionHandlers::received() { return g_received; }

void PreemptionHandlers::step_took(double seconds) {
    if (grace_s_ <= 0 || !(seconds >= 0)) return;
    const double grace = std::max(grace_s_, std::ceil(3 * seconds));  // a slow step is not a stuck one
    g_grace_s = (sig_atomic_t)std::min(grace, 1e6);
}

void PreemptionHandlers::step_ended() { alarm(0); }

void wait_for_signal(int seconds, const char* who) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (g_received == 0) {
        if (std::chrono::steady_clock::now() > until) fail("%s: no signal within %d s", who, seconds);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

}  // namespace llmc
