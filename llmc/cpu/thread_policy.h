// How the CPU programs' OpenMP threads wait, chosen before OpenMP starts.
//
// libgomp's default lets an idle thread spin for a while at the end of each parallel region before it sleeps. On a
// machine of its own that saves a wake-up per region; on a shared one the spinning threads take the cores the
// working ones need, and a barrier then waits for a thread the kernel has descheduled: measured on 2 shared cores
// (docs/benchmarks.md, "Threads on a shared machine"), a training step took 4x longer with the default than with
// OMP_WAIT_POLICY=passive, where idle threads sleep at once.
//
// libgomp reads OMP_WAIT_POLICY once, when the program is loaded, before main(); so a program that wants passive
// waiting by default sets the variable and re-executes itself (same process id, arguments and name: mpirun, job
// schedulers and `ps` see nothing). An OMP_WAIT_POLICY already set (by the user, or by the re-executed program) is kept.
#pragma once

namespace llmc {

// ./generate's threads when --threads is 0: one for a model whose forward pass over its whole context is under
// 1 GFLOP (the quickstart's: about 0.1), where a parallel region costs more than its share of the work and a busy
// machine made the default 3 to 13 times slower than one thread; else 0 (one per core).
int generation_threads(double flops_per_forward);

// Call first thing in main(): re-executes the program with OMP_WAIT_POLICY=passive unless the variable is set.
// Returns normally when it is set, or when the re-execution is impossible (the program then runs as it is).
void use_passive_openmp_wait(char** argv);

}  // namespace llmc
