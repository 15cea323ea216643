// OpenMP wait policy (see thread_policy.h).
#include "thread_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace llmc {

void use_passive_openmp_wait(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv);  // only returns on failure: then run with the default policy
}

}  // namespace llmc
