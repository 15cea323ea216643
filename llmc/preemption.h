// Preemption: a signal saves the run instead of losing it (docs/checkpoints.md, "Preemption").
//
// SIGTERM, SIGINT and one more configurable signal (--preempt-signal, default SIGUSR1: `sbatch --signal`) only set a
// flag. At the end of each step the ranks combine their flags in one collective (a max over ranks), so a signal
// that reached any one rank stops every rank at the same step: each finishes the step it is computing, all write a
// checkpoint of it together (no rank saves alone), rank 0 says so, and the trainer exits with EXIT_PREEMPTED, which
// scripts/autoresume.sh reads as "requeue the job". A second signal of any of these kinds ends the process at once
// (the default action of that signal): checkpoints are written atomically, so the previous ones stay intact. So does
// a step that has not ended --preempt-grace seconds after the first signal (at least 3 times the slowest step so
// far): a step stuck in a library or waiting on a dead peer never keeps a signalled process alive (SIGALRM, then the
// first signal's default action, so `timeout`, which signals once, always ends the run).
#pragma once

#include <string>

namespace llmc {

// The trainer's exit status after a signal-triggered save (sysexits.h's EX_TEMPFAIL: "try again later").
constexpr int EXIT_PREEMPTED = 75;

// "USR1", "SIGUSR1", "USR2", "HUP", "none" (0: no extra signal). Fails on anything else.
int parse_preempt_signal(const std::string& name);
const char* signal_name(int sig);  // "SIGTERM"

// Installs the handlers for its lifetime (the previous dispositions come back when it ends).
class PreemptionHandlers {
public:
    // grace_s: the step-end watchdog's base (0: none).
    PreemptionHandlers(int extra_signal, double grace_s);
    ~PreemptionHandlers();
    PreemptionHandlers(const PreemptionHandlers&) = delete;
    PreemptionHandlers& operator=(const PreemptionHandlers&) = delete;
    // The first signal this process received since the handlers were installed (0: none).
    static int received();
    // The last step's wall time: the watchdog allows 3 times the slowest, and at least grace_s.
    void step_took(double seconds);
    // The step ended after a signal (the save begins): the watchdog is off; a second signal still stops at once.
    static void step_ended();

private:
    int signals_[3] = {0, 0, 0};
    double grace_s_ = 0;
};

// Waits until one of the handled signals has been received; fails (naming `who`) after `seconds` without one. For
// a test that signals a run at a known step on a loaded machine (llmc/test_hooks.h).
void wait_for_signal(int seconds, const char* who);

}  // namespace llmc
