// OpenBLAS's work buffers at start-up (see blas_probe.h).
#include "blas_probe.h"

#include <cblas.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <vector>

#include "../error.h"

namespace llmc {

namespace {

// Address space a GEMM thread takes on its first call, measured with Debian's OpenBLAS 0.3.21 and glibc: the pool's
// work buffer (128 MiB and a guard page, rounded up here), and for a thread other than the caller its stack (8 MiB)
// and malloc arena (64 MiB).
constexpr size_t MiB = size_t(1) << 20, BUFFER_BYTES = 136 * MiB, THREAD_BYTES = 72 * MiB;

// Under an address-space limit, the room for `buffers` work buffers and `threads` threads must be free: reserved
// (not touched) and released at once, or the limit is too small.
void reserve_or_fail(size_t buffers, size_t threads) {
    struct rlimit lim;
    if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return;
    const size_t need = buffers * BUFFER_BYTES + threads * THREAD_BYTES;
    void* room = mmap(nullptr, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (room == MAP_FAILED)
        fail("cpu backend: the address-space limit (ulimit -v %llu KiB) leaves less than the %zu MiB the BLAS "
             "library's work buffers need with %zu thread(s): raise the limit, or use fewer --threads",
             (unsigned long long)(lim.rlim_cur / 1024), need / MiB, std::max(buffers, threads));
    munmap(room, need);
}

void small_sgemm(float* c, const std::vector<float>& a, int n) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, a.data(), n, 0.0f, c, n);
}

}  // namespace

void claim_blas_buffers(int threads) {
    const int blas_threads = openblas_get_num_threads();
    reserve_or_fail((size_t)std::max(blas_threads, threads), (size_t)threads);
    // 256^3 is above OpenBLAS's threshold for splitting a GEMM over its threads, and cheap (34 MFLOP).
    const int n = 256;
    const std::vector<float> a((size_t)n * n, 1.0f);
    std::vector<float> c((size_t)n * n * (size_t)threads);
    small_sgemm(c.data(), a, n);  // the matmuls: one GEMM over OpenBLAS's threads
    openblas_set_num_threads(1);  // attention: every OpenMP thread its own single-threaded GEMM, at once
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int t = 0; t < threads; t++) small_sgemm(c.data() + (size_t)t * n * n, a, n);
    openblas_set_num_threads(blas_threads);
}

}  // namespace llmc
