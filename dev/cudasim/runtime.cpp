// The CUDA runtime API on the CPU: device memory is host memory, streams and events are trivially ordered because
// every launch and copy completes before the call returns, and the device is a plausible fake sm_90 part.
//
// The API functions are declared by the CUDA toolkit's own cuda_runtime_api.h (extern "C"); this file defines them.
// Copies and memsets check their pointers against the live allocations, so a copy in the wrong direction or past the
// end of a buffer fails here instead of only on a GPU.
#include <cuda_runtime.h>

#include "dev/cudasim/state.h"

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

struct CUstream_st { int id; };
struct CUevent_st {
    unsigned flags = 0;
    bool recorded = false;
    std::chrono::steady_clock::time_point time;
};

namespace cudasim::detail {
namespace {

struct Runtime {
    std::mutex mu;
    std::map<const char*, size_t> device;  // device allocations: start -> bytes
    std::map<const char*, size_t> pinned;  // cudaMallocHost allocations
    size_t device_bytes = 0;
    std::set<cudaStream_t> streams;
    std::set<cudaEvent_t> events;
    std::unordered_map<const void*, size_t> dynamic_shared_limit;
    cudaError_t last_error = cudaSuccess;
    int next_stream_id = 1;
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

// Does [p, p+n) lie inside one allocation of `m`?
bool inside(const std::map<const char*, size_t>& m, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    auto it = m.upper_bound(c);
    if (it == m.begin()) return false;
    --it;
    return c >= it->first && c + n <= it->first + it->second;
}
bool is_device(const void* p, size_t n) { return inside(rt().device, p, n); }

cudaError_t check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, const char* fn) {
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return fail(cudaErrorInvalidValue, "%s: null pointer", fn);
    std::lock_guard<std::mutex> lock(rt().mu);
    const bool dst_dev = is_device(dst, n), src_dev = is_device(src, n);
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
                    "cudaMalloc allocation)", fn, dst, src, n, (int)kind,
                    dst_dev ? "device memory" : "not a device range", src_dev ? "device memory" : "not a device range");
    return cudaSuccess;
}

}  // namespace

void report(const char* prefix, const char* fmt, va_list ap) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s", prefix);
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
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
    std::lock_guard<std::mutex> lock(rt().mu);
    if (rt().device_bytes + size > kDeviceMemory)
        return fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu): out of the simulated device's %zu bytes", size,
                    kDeviceMemory);
    void* p = std::aligned_alloc(256, (size + 255) / 256 * 256);
    if (!p) return fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu): host allocation failed", size);
    std::memset(p, kPoisonByte, size);  // fresh device memory is garbage: make reads before writes give NaN
    rt().device[static_cast<const char*>(p)] = size;
    rt().device_bytes += size;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
    if (!ptr) return cudaSuccess;
    std::lock_guard<std::mutex> lock(rt().mu);
    auto it = rt().device.find(static_cast<const char*>(ptr));
    if (it == rt().device.end()) return fail(cudaErrorInvalidValue, "cudaFree(%p): not a cudaMalloc pointer", ptr);
    rt().device_bytes -= it->second;
    rt().device.erase(it);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
    if (!ptr) return set_last_error(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (size == 0) return cudaSuccess;
    void* p = std::aligned_alloc(256, (size + 255) / 256 * 256);
    if (!p) return fail(cudaErrorMemoryAllocation, "cudaMallocHost(%zu): host allocation failed", size);
    std::lock_guard<std::mutex> lock(rt().mu);
    rt().pinned[static_cast<const char*>(p)] = size;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) { return cudaMallocHost(ptr, size); }

cudaError_t cudaFreeHost(void* ptr) {
    if (!ptr) return cudaSuccess;
    std::lock_guard<std::mutex> lock(rt().mu);
    auto it = rt().pinned.find(static_cast<const char*>(ptr));
    if (it == rt().pinned.end()) return fail(cudaErrorInvalidValue, "cudaFreeHost(%p): not a cudaMallocHost pointer", ptr);
    rt().pinned.erase(it);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
    if (cudaError_t e = check_copy(dst, src, count, kind, "cudaMemcpy")) return e;
    if (count) std::memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t) {
    if (cudaError_t e = check_copy(dst, src, count, kind, "cudaMemcpyAsync")) return e;
    if (count) std::memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t count) {
    if (count == 0) return cudaSuccess;
    {
        std::lock_guard<std::mutex> lock(rt().mu);
        if (!is_device(ptr, count))
            return fail(cudaErrorInvalidValue, "cudaMemset(%p, %d, %zu): not inside one cudaMalloc allocation", ptr,
                        value, count);
    }
    std::memset(ptr, value, count);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t) { return cudaMemset(ptr, value, count); }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (free_bytes) *free_bytes = kDeviceMemory - rt().device_bytes;
    if (total) *total = kDeviceMemory;
    return cudaSuccess;
}

// ---- streams and events: everything completes before the call returns -----------------------------------------
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
    if (!s) return set_last_error(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lock(rt().mu);
    *s = new CUstream_st{rt().next_stream_id++};
    rt().streams.insert(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (!rt().streams.erase(s)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy(%p): unknown stream", (void*)s);
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned int) {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (!rt().events.count(e)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: unknown event %p", (void*)e);
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
    if (!e) return set_last_error(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lock(rt().mu);
    *e = new CUevent_st;
    (*e)->flags = flags;
    rt().events.insert(*e);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (!rt().events.erase(e)) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy(%p): unknown event", (void*)e);
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (!rt().events.count(e)) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord(%p): unknown event", (void*)e);
    e->recorded = true;
    e->time = std::chrono::steady_clock::now();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (!rt().events.count(e)) return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize(%p): unknown event", (void*)e);
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (!ms || !rt().events.count(start) || !rt().events.count(end))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: unknown event");
    if ((start->flags | end->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: event created with cudaEventDisableTiming");
    if (!start->recorded || !end->recorded)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: event not recorded");
    *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaDeviceReset(void) { return cudaSuccess; }

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
        default: return "unknown error (cudasim)";
    }
}

// ---- device --------------------------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count) { if (count) *count = 1; return cudaSuccess; }
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
