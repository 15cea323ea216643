// Hooks the tests use to put a run where they want to check it: a rank that stops itself before a step (a hung peer,
// llmc/watchdog.h), a rank that waits for a signal before a step (preemption at a known step), losses treated as NaN
// (the step guard's skipping and stopping, llmc/outlier.h), a writer killed inside a checkpoint (atomic writes). The
// trainer and the checkpointer call them at fixed points; they are empty unless the program's main fills them from
// the LLMC_TEST_* variables (hooks_from_environment), so nothing inside a step reads the environment.
#pragma once

#include <functional>

namespace llmc {

struct TestHooks {
    std::function<void(int rank, int step)> before_step;  // before step `step` (1-based) computes anything
    std::function<bool(int step)> nan_loss;               // this step's loss is treated as NaN
    std::function<void(int step)> inside_checkpoint;      // a state file of checkpoint `step` written, not yet renamed

    void step_starts(int rank, int step) const {
        if (before_step) before_step(rank, step);
    }
    bool loss_is_nan(int step) const { return nan_loss && nan_loss(step); }
};

// The hooks the variables ask for:
//   LLMC_TEST_STOP_RANK=<rank>:<step>             that rank stops itself (SIGSTOP) before that step
//   LLMC_TEST_WAIT_FOR_SIGNAL=<rank>:<step>       that rank prints "... (pid P) waits for a signal before step S" on
//                                                 stderr and waits (at most 300 s) until a signal was received;
//                                                 with ":hang" appended its step then does not end (a stuck step)
//   LLMC_TEST_NAN_STEPS=3,4                       the losses of those steps are NaN
//   LLMC_TEST_CRASH_IN_CHECKPOINT=<step>          the writer of that step's checkpoint kills itself (SIGKILL) after
//                                                 its optimizer-state file's temporary is written, before the rename
TestHooks hooks_from_environment();

}  // namespace llmc
