// Checks for test programs that run as several MPI processes (mpirun -np N build/test/test_x).
//
// Every rank evaluates every check; the verdicts are combined over ranks (a check passes only if it passed on
// every rank) and rank 0 alone prints the PASS/FAIL line, so the runner counts each check once whatever N is.
// A rank whose own check failed prints its detail as "  rank R: ..." (not a counted line) before the verdict.
// The combining uses MPI_COMM_WORLD directly, never a Comm, so it does not disturb the collective counters.
// MPI must be initialised before the first check (make_mpi_comm does it).
#pragma once

#include <mpi.h>

#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "llmc/comm.h"
#include "llmc/dist_info.h"
#include "llmc/error.h"
#include "llmc/mpi_env.h"
#include "testing.h"

namespace dist_testing {

inline int rank() { int r = 0; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
inline int world() { int w = 1; MPI_Comm_size(MPI_COMM_WORLD, &w); return w; }
inline int& global_failures() { static int n = 0; return n; }

// Every rank must call it with the same name, in the same order.
inline bool check(const std::string& name, bool ok, const char* fmt = "", ...) {
    if (!ok) {
        char buf[1024];
        va_list ap; va_start(ap, fmt); std::vsnprintf(buf, sizeof buf, fmt, ap); va_end(ap);
        std::printf("  rank %d: %s: %s\n", rank(), name.c_str(), buf);
        std::fflush(stdout);
    }
    int bad = ok ? 0 : 1, nbad = 0, first = ok ? world() : rank(), first_bad = 0;
    MPI_Allreduce(&bad, &nbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&first, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (nbad) global_failures()++;
    if (rank() == 0) {
        if (nbad == 0) testing::pass(name + " [np " + std::to_string(world()) + "]");
        else testing::fail(name + " [np " + std::to_string(world()) + "]", "failed on %d of %d ranks, first rank %d",
                           nbad, world(), first_bad);
    }
    return nbad == 0;
}

// "" when every |got-want| <= rtol*|want| + atol (NaN fails), else a description of the first bad element.
template <class A, class B>
std::string close_error(const A* got, const B* want, size_t n, double rtol, double atol) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double g = (double)got[i], w = (double)want[i];
        if (!(std::fabs(g - w) <= rtol * std::fabs(w) + atol)) { if (!bad) first = i; bad++; }
    }
    if (!bad) return "";
    char buf[256];
    std::snprintf(buf, sizeof buf, "%zu of %zu elements outside rtol=%g atol=%g; first at %zu: got %.9g want %.9g",
                  bad, n, rtol, atol, first, (double)got[first], (double)want[first]);
    return buf;
}

template <class A, class B>
bool check_close(const std::string& name, const A* got, const B* want, size_t n, double rtol, double atol) {
    std::string err = close_error(got, want, n, rtol, atol);
    return check(name, err.empty(), "%s", err.c_str());
}

// All ranks: rank 0 prints the summary line; the exit status is non-zero on every rank if any check failed.
inline int finish() {
    if (rank() == 0) testing::finish();
    return global_failures() ? 1 : 0;
}

// The main of an MPI test program: an MpiComm for the launched ranks, `body(comm)`, then finish() and MPI's
// shutdown. An llmc::Error ends the whole job (mpi_abort) with its message instead of leaving ranks waiting.
inline int run_main(const std::function<void(llmc::Comm&)>& body) {
    try {
        std::unique_ptr<llmc::Comm> comm = llmc::make_mpi_comm(llmc::compute_dist_info(llmc::current_environment()));
        body(*comm);
        int status = finish();
        comm.reset();
        llmc::mpi_finalize();
        return status;
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        llmc::mpi_abort(1);
        return 1;
    }
}

}  // namespace dist_testing
