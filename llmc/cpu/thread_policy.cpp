// OpenMP wait policy (see thread_policy.h).
#include "thread_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace llmc {

int generation_threads(double flops_per_forward) { return flops_per_forward < 1e9 ? 1 : 0; }

void use_passive_openmp_wait(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
    // The program's own path, not /proc/self/exe: the kernel names a process after the file it executes, and
    // `ps`, `top` and `pgrep train_gpt2_cpu` would see "exe".
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || n >= (ssize_t)sizeof self - 1) return;
    self[n] = '\0';
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv(self, argv);  // only returns on failure (the file was replaced or removed): run with the default policy
    unsetenv("OMP_WAIT_POLICY");
}

}  // namespace llmc
