// CPU backend: construction, memory, conversions and the small reductions (sum_into, norm_squared_into, add_into).
//
// "Device" memory is host memory: alloc returns zero-initialised, 64-byte aligned blocks (one cache line, the widest
// vector register). Every op is synchronous, so synchronize() and the stream calls have nothing to do.
//
// The reductions accumulate in double over fixed chunks whose partial sums are added in order: the result does not
// depend on the number of threads, and it is the double sum rounded once when it is added into the float.
#include "cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../bf16.h"
#include "../error.h"
#include "blas_probe.h"

namespace llmc {

CpuBackend::CpuBackend(const BackendOptions& opt) : device_(opt.device) {
    if (opt.num_threads < 0) fail("cpu backend: number of threads %d is negative (expected 0 for the default, or > 0)",
                                  opt.num_threads);
    num_threads_ = opt.num_threads > 0 ? opt.num_threads : omp_get_max_threads();
    if (opt.num_threads > 0) openblas_set_num_threads(opt.num_threads);
    claim_blas_buffers(num_threads_);  // before the model: a memory limit then ends in a message, not a spin
}

CpuBackend::~CpuBackend() { std::free(scratch_); }

float* CpuBackend::scratch(size_t count) {
    if (count > scratch_count_) {
        std::free(scratch_);
        scratch_ = nullptr;
        scratch_count_ = 0;
        scratch_ = static_cast<float*>(alloc(count * sizeof(float)));
        scratch_count_ = count;
    }
    return scratch_;
}

// ---- memory ----------------------------------------------------------------------------------------------------

// The kernel's estimate of the memory available without swapping (MemAvailable in /proc/meminfo), or SIZE_MAX when it
// cannot be read (not Linux).
static size_t available_memory_bytes() {
    FILE* f = std::fopen("/proc/meminfo", "r");
    if (!f) return SIZE_MAX;
    char line[256];
    size_t kib = SIZE_MAX;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "MemAvailable: %zu kB", &kib) == 1) break;
    std::fclose(f);
    return kib == SIZE_MAX ? SIZE_MAX : kib * 1024;
}

void* CpuBackend::alloc(size_t bytes) {
    // aligned_alloc wants a multiple of the alignment; a zero-byte request still gets a distinct valid block.
    size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    if (rounded < bytes) fail("cpu backend: cannot allocate %zu bytes (size overflow)", bytes);
    // Every block is zeroed (touched) at once, so a request beyond the available memory would not fail here but
    // get the process killed by the kernel: refuse it with a message instead (large requests only: the check reads
    // /proc/meminfo).
    if (rounded >= ((size_t)64 << 20)) {
        size_t avail = available_memory_bytes();
        if (rounded > avail)
            fail("cpu backend: out of memory: %.2f GiB requested, %.2f GiB available (lower -b or -t, or use a "
                 "smaller model)", rounded / 1073741824.0, avail / 1073741824.0);
    }
    void* p = std::aligned_alloc(64, rounded);
    if (!p) fail("cpu backend: out of memory allocating %zu bytes (%.2f GiB)", bytes, bytes / 1073741824.0);
    memset_zero(p, rounded);
    return p;
}

void CpuBackend::free(void* p) { std::free(p); }

void CpuBackend::memset_zero(void* p, size_t bytes) {
    // Large buffers (gradients, activations) are zeroed in parallel chunks; small ones in one call.
    const size_t chunk = size_t(1) << 20;
    if (bytes <= chunk) { std::memset(p, 0, bytes); return; }
    size_t nchunks = (bytes + chunk - 1) / chunk;
    char* c = static_cast<char*>(p);
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < nchunks; i++) std::memset(c + i * chunk, 0, std::min(chunk, bytes - i * chunk));
}

void CpuBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) { std::memmove(dst, host_src, bytes); }
void CpuBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) { std::memmove(host_dst, src, bytes); }
void CpuBackend::copy_on_device(void* dst, const void* src, size_t bytes) { std::memmove(dst, src, bytes); }
void CpuBackend::upload_tokens(int* dst, const int* host_src, size_t n) { std::memmove(dst, host_src, n * 4); }

// act_t is float: the conversions are copies.
void CpuBackend::upload_floats(act_t* dst, const float* host_src, size_t n) { std::memmove(dst, host_src, n * 4); }
void CpuBackend::download_floats(float* host_dst, const act_t* src, size_t n) { std::memmove(host_dst, src, n * 4); }
void CpuBackend::floats_to_act(act_t* dst, const float* src, size_t n) { std::memmove(dst, src, n * 4); }
void CpuBackend::act_to_floats(float* dst, const act_t* src, size_t n) { std::memmove(dst, src, n * 4); }

void CpuBackend::synchronize() {}

// ---- reductions ------------------------------------------------------------------------------------------------

namespace {
constexpr size_t kReduceChunk = 4096;

// Sum of f(x[i]) in double: fixed chunks summed in parallel, then the chunk sums in order.
template <class F>
double chunked_sum(const float* x, size_t n, int threads, F f) {
    size_t nchunks = (n + kReduceChunk - 1) / kReduceChunk;
    double total = 0.0;
    // Partial sums of up to 1024 chunks at a time live on the stack.
    constexpr size_t kBatch = 1024;
    double part[kBatch];
    for (size_t c0 = 0; c0 < nchunks; c0 += kBatch) {
        size_t nc = std::min(kBatch, nchunks - c0);
#pragma omp parallel for num_threads(threads) schedule(static)
        for (size_t c = 0; c < nc; c++) {
            size_t lo = (c0 + c) * kReduceChunk, hi = std::min(n, lo + kReduceChunk);
            double s = 0.0;
            for (size_t i = lo; i < hi; i++) s += f(x[i]);
            part[c] = s;
        }
        for (size_t c = 0; c < nc; c++) total += part[c];
    }
    return total;
}
}  // namespace

void CpuBackend::sum_into(float* acc, const float* x, size_t n, float scale) {
    double s = chunked_sum(x, n, num_threads_, [](float v) { return (double)v; });
    *acc = (float)((double)*acc + (double)scale * s);
}

void CpuBackend::norm_squared_into(float* acc, const float* g, size_t n) {
    double s = chunked_sum(g, n, num_threads_, [](float v) { return (double)v * (double)v; });
    *acc = (float)((double)*acc + s);
}

void CpuBackend::add_into(float* dst, const float* src, size_t n) {
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

void CpuBackend::grads_to_bf16(void* dst, const float* src, size_t n, Stream) {
    uint16_t* d = static_cast<uint16_t*>(dst);
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < n; i++) d[i] = float_to_bf16(src[i]);
}

void CpuBackend::grads_from_bf16(float* dst, const void* src, size_t n, Stream) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float(s[i]);
}

}  // namespace llmc
