// The CUDA runtime API on the CPU: memory (device_memory.cpp), copies and memsets as deferred stream operations
// (streams.cpp) with CUDA's synchronisation rules, errors, and a plausible fake sm_90 device.
//
// The API functions are declared by the CUDA toolkit's own cuda_runtime_api.h (extern "C"); this file defines them.
// Copies and memsets check their pointers against the live allocations, so a copy in the wrong direction or past the
// end of a buffer fails when it is issued instead of only on a GPU.
#include <cuda_runtime.h>

#include "dev/cudasim/include/cudasim.h"
#include "dev/cudasim/state.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cudasim::detail {
namespace {

struct Runtime {
    std::mutex mu;
    std::unordered_map<const void*, size_t> dynamic_shared_limit;
    cudaError_t last_error = cudaSuccess;
};
Runtime& rt() { static Runtime r; return r; }

cudaError_t fail(cudaError_t e, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
cudaError_t fail(cudaError_t e, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report("cudasim: ", fmt, ap);
    va_end(ap);
    return set_last_error(e);
}

enum class Mem { Device, Pinned, Pageable };
Mem classify(const void* p, size_t n) {
    if (is_device_range(p, n)) return Mem::Device;
    if (is_pinned_range(p, n)) return Mem::Pinned;
    return Mem::Pageable;
}
const char* mem_name(Mem m) { return m == Mem::Device ? "device memory" : m == Mem::Pinned ? "pinned host memory"
                                                                                            : "pageable host memory"; }

cudaError_t check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, const char* fn, Mem& dm, Mem& sm) {
    if (!dst || !src) return fail(cudaErrorInvalidValue, "%s: null pointer", fn);
    dm = classify(dst, n);
    sm = classify(src, n);
    const bool dst_dev = dm == Mem::Device, src_dev = sm == Mem::Device;
    bool ok = true;
    switch (kind) {
        case cudaMemcpyHostToHost: ok = !dst_dev && !src_dev; break;
        case cudaMemcpyHostToDevice: ok = dst_dev && !src_dev; break;
        case cudaMemcpyDeviceToHost: ok = !dst_dev && src_dev; break;
        case cudaMemcpyDeviceToDevice: ok = dst_dev && src_dev; break;
        case cudaMemcpyDefault: ok = true; break;
        default: return fail(cudaErrorInvalidMemcpyDirection, "%s: invalid cudaMemcpyKind %d", fn, (int)kind);
    }
    if (!ok)
        return fail(cudaErrorInvalidValue,
                    "%s(dst=%p, src=%p, %zu bytes, kind=%d): dst is %s, src is %s (a device range must lie inside one "
                    "cudaMalloc allocation)", fn, dst, src, n, (int)kind, mem_name(dm), mem_name(sm));
    return cudaSuccess;
}

// Ranges the hazard detector and the pinned-page protection know about.
void add_range(Work& w, const void* p, size_t n, Mem m, bool write) {
    Range r{static_cast<const char*>(p), n};
    (write ? w.writes : w.reads).push_back(r);
    if (m == Mem::Pinned) w.pinned.push_back({p, n, write});
}

// A copy as a stream operation. Pageable host sources are staged when the call is made (as the driver does), so
// the caller may reuse them; everything else is read and written when the operation runs.
Work copy_work(void* dst, const void* src, size_t n, Mem dm, Mem sm, const char* fn) {
    Work w;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s %zu bytes %s -> %s (dst %p, src %p)", fn, n, mem_name(sm), mem_name(dm), dst,
                  src);
    w.what = buf;
    if (sm == Mem::Pageable) {
        auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                          static_cast<const char*>(src) + n);
        w.run = [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); };
    } else {
        add_range(w, src, n, sm, false);
        w.run = [dst, src, n] { std::memmove(dst, src, n); };
    }
    add_range(w, dst, n, dm, true);
    return w;
}

}  // namespace

void report(const char* prefix, const char* fmt, va_list ap) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s", prefix);
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
}

void fatal(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report("cudasim: ", fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "cudasim: (stream scheduler seed %llu: CUDASIM_STREAM_SEED; thread order %s)\n",
                 (unsigned long long)stream_seed(), order_name(thread_order()));
    std::abort();
}

cudaError_t set_last_error(cudaError_t e) {
    if (e != cudaSuccess) rt().last_error = e;
    return e;
}

size_t max_dynamic_shared(const void* kernel) {
    std::lock_guard<std::mutex> lock(rt().mu);
    auto it = rt().dynamic_shared_limit.find(kernel);
    return it == rt().dynamic_shared_limit.end() ? kDefaultDynamicShared : it->second;
}

}  // namespace cudasim::detail

using namespace cudasim::detail;

// ---- memory --------------------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** ptr, size_t size) {
    if (!ptr) return set_last_error(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (size == 0) return cudaSuccess;
    void* p = device_alloc(size);
    if (!p)
        return fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu): out of the simulated device's %zu bytes (%zu in use)",
                    size, kDeviceMemory, device_bytes_in_use());
    *ptr = p;
    return cudaSuccess;
}

// cudaFree synchronises the device (work still queued may use the buffer), then unmaps it.
cudaError_t cudaFree(void* ptr) {
    if (!ptr) return cudaSuccess;
    synchronize_device();
    if (!device_free(ptr)) return fail(cudaErrorInvalidValue, "cudaFree(%p): not a cudaMalloc pointer", ptr);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
    if (!ptr) return set_last_error(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (size == 0) return cudaSuccess;
    void* p = pinned_alloc(size);
    if (!p) return fail(cudaErrorMemoryAllocation, "cudaMallocHost(%zu): host allocation failed", size);
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) { return cudaMallocHost(ptr, size); }

cudaError_t cudaFreeHost(void* ptr) {
    if (!ptr) return cudaSuccess;
    synchronize_device();
    if (!pinned_free(ptr)) return fail(cudaErrorInvalidValue, "cudaFreeHost(%p): not a cudaMallocHost pointer", ptr);
    return cudaSuccess;
}

// Synchronous copies follow CUDA's "API synchronization behavior" rules: device -> host, pinned host -> device and
// host -> host return when the copy is done; pageable host -> device synchronises the legacy stream, stages the
// source and returns before the device is written; device -> device does not wait.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
    if (count == 0) return cudaSuccess;
    Mem dm, sm;
    if (cudaError_t e = check_copy(dst, src, count, kind, "cudaMemcpy", dm, sm)) return e;
    if (sm == Mem::Pageable && dm == Mem::Device) synchronize_stream(nullptr);
    enqueue(nullptr, copy_work(dst, src, count, dm, sm, "cudaMemcpy"));
    const bool waits = dm != Mem::Device || sm == Mem::Pinned;
    if (waits) synchronize_stream(nullptr);
    return cudaSuccess;
}

// Asynchronous copies run when the stream gets to them; only a host-to-host copy completes before returning.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    Mem dm, sm;
    if (cudaError_t e = check_copy(dst, src, count, kind, "cudaMemcpyAsync", dm, sm)) return e;
    if (cudaError_t e = enqueue(stream, copy_work(dst, src, count, dm, sm, "cudaMemcpyAsync")))
        return fail(e, "cudaMemcpyAsync: unknown stream %p", (void*)stream);
    if (dm != Mem::Device && sm != Mem::Device) return synchronize_stream(stream);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    if (!is_device_range(ptr, count))
        return fail(cudaErrorInvalidValue, "cudaMemset(%p, %d, %zu): not inside one cudaMalloc allocation", ptr, value,
                    count);
    Work w;
    char buf[128];
    std::snprintf(buf, sizeof buf, "cudaMemset %zu bytes at %p", count, ptr);
    w.what = buf;
    w.writes.push_back({static_cast<const char*>(ptr), count});
    w.run = [ptr, value, count] { std::memset(ptr, value, count); };
    if (cudaError_t e = enqueue(stream, std::move(w))) return fail(e, "cudaMemsetAsync: unknown stream %p", (void*)stream);
    return cudaSuccess;
}

// cudaMemset on device memory is asynchronous with respect to the host (on the legacy default stream).
cudaError_t cudaMemset(void* ptr, int value, size_t count) { return cudaMemsetAsync(ptr, value, count, nullptr); }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
    const size_t used = device_bytes_in_use();
    if (free_bytes) *free_bytes = kDeviceMemory - used;
    if (total) *total = kDeviceMemory;
    return cudaSuccess;
}

cudaError_t cudaDeviceReset(void) {
    synchronize_device();
    return cudaSuccess;
}

// ---- errors --------------------------------------------------------------------------------------------------
cudaError_t cudaGetLastError(void) {
    cudaError_t e = rt().last_error;
    rt().last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return rt().last_error; }

const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorNotReady: return "cudaErrorNotReady";
        case cudaErrorNotSupported: return "cudaErrorNotSupported";
        default: return "cudaErrorUnknown";
    }
}
const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorNotSupported: return "operation not supported";
        case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        default: return "unknown error (cudasim)";
    }
}

// ---- device --------------------------------------------------------------------------------------------------
// CUDASIM_NO_GPU=35 (no driver) or 100 (no device): answer as CUDA does on a machine without a usable GPU, so the
// trainer's start-up message for that case can be tested (test/e2e/first_hour_test.sh).
cudaError_t cudaGetDeviceCount(int* count) {
    if (const char* no_gpu = std::getenv("CUDASIM_NO_GPU")) {
        if (count) *count = 0;
        return (cudaError_t)std::atoi(no_gpu);
    }
    if (count) *count = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) { if (device) *device = 0; return cudaSuccess; }
cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice, "cudaSetDevice(%d): the simulator has one device", device);
}
cudaError_t cudaRuntimeGetVersion(int* v) { if (v) *v = CUDART_VERSION; return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int* v) { if (v) *v = CUDART_VERSION; return cudaSuccess; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    if (!p) return set_last_error(cudaErrorInvalidValue);
    if (device != 0) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties(%d): the simulator has one device", device);
    std::memset(p, 0, sizeof *p);
    std::snprintf(p->name, sizeof p->name, "cudasim (simulated sm_90 on the CPU)");
    p->totalGlobalMem = kDeviceMemory;
    p->sharedMemPerBlock = kDefaultDynamicShared;
    p->sharedMemPerBlockOptin = kMaxDynamicShared;
    p->sharedMemPerMultiprocessor = 228 * 1024;
    p->regsPerBlock = 65536;
    p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = kMaxThreadsPerBlock;
    p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = kNumSMs;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxBlocksPerMultiProcessor = 32;
    p->l2CacheSize = 50 * 1024 * 1024;
    p->memoryBusWidth = 5120;
    p->concurrentKernels = 1;
    p->unifiedAddressing = 1;
    p->managedMemory = 1;
    p->asyncEngineCount = 2;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    if (!value) return set_last_error(cudaErrorInvalidValue);
    if (device != 0) return fail(cudaErrorInvalidDevice, "cudaDeviceGetAttribute: the simulator has one device");
    switch (attr) {
        case cudaDevAttrMultiProcessorCount: *value = kNumSMs; break;
        case cudaDevAttrClockRate: *value = kClockRateKHz; break;
        case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
        case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
        case cudaDevAttrMaxThreadsPerBlock: *value = kMaxThreadsPerBlock; break;
        case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; break;
        case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)kDefaultDynamicShared; break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)kMaxDynamicShared; break;
        case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = 228 * 1024; break;
        case cudaDevAttrWarpSize: *value = 32; break;
        case cudaDevAttrMaxBlockDimX: *value = 1024; break;
        case cudaDevAttrMaxBlockDimY: *value = 1024; break;
        case cudaDevAttrMaxBlockDimZ: *value = 64; break;
        case cudaDevAttrMaxGridDimX: *value = 2147483647; break;
        case cudaDevAttrMaxGridDimY: *value = 65535; break;
        case cudaDevAttrMaxGridDimZ: *value = 65535; break;
        case cudaDevAttrL2CacheSize: *value = 50 * 1024 * 1024; break;
        case cudaDevAttrMaxRegistersPerBlock: *value = 65536; break;
        default: return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d not simulated", (int)attr);
    }
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
    if (!func) return set_last_error(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > kMaxDynamicShared)
            return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: MaxDynamicSharedMemorySize %d exceeds the "
                        "device's %zu", value, kMaxDynamicShared);
        std::lock_guard<std::mutex> lock(rt().mu);
        rt().dynamic_shared_limit[func] = (size_t)value;
    }
    return cudaSuccess;  // other attributes (carveout, ...) are accepted and ignored
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
    if (!attr || !func) return set_last_error(cudaErrorInvalidValue);
    std::memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = kMaxThreadsPerBlock;
    attr->maxDynamicSharedSizeBytes = (int)max_dynamic_shared(func);
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    return cudaSuccess;
}
