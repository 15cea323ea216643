// Device-side CUDA built-ins for kernels compiled by g++ under the simulator (included by cudasim's cuda_runtime.h).
//
// Every simulated CUDA thread is a fiber (dev/cudasim/fiber.h); the scheduler (dev/cudasim/scheduler.cpp) sets the
// globals behind threadIdx/blockIdx/... before it resumes a fiber. Fibers switch only at __syncthreads, __syncwarp and
// warp collectives (shuffles, votes), so everything else, atomics included, runs without interruption.
#pragma once

#include <math.h>  // expf, sqrtf, isfinite, ... in the global namespace, as device code spells them

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda_bf16.h>
#include <vector_types.h>

// ---- qualifiers ----------------------------------------------------------------------------------------------
// The toolkit's host_defines.h already makes __global__, __device__, __host__ empty and __forceinline__ an inline
// attribute under a host compiler. __shared__ variables must be one object per block shared by all the block's
// fibers: blocks run one after another on this OS thread, so a thread_local static object is exactly that. Every
// such object is poisoned at the start of every block (found in the executable's symbol table, see
// dev/cudasim/shared_memory.cpp). thread_local (unlike static) also makes `extern __shared__ T smem[];` valid: it
// names the simulator's dynamic shared memory buffer (see shared_memory.cpp for the names that are bound).
#undef __shared__
#define __shared__ thread_local
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
#ifndef __grid_constant__
#define __grid_constant__
#endif

static constexpr int warpSize = 32;

namespace cudasim::detail {

// Set by the scheduler before each fiber runs.
extern uint3 g_threadIdx;
extern uint3 g_blockIdx;
extern dim3 g_blockDim;
extern dim3 g_gridDim;

void syncthreads();
int syncthreads_count(int predicate);  // __syncthreads_count: barrier + number of threads with predicate != 0

// A warp collective: the calling lane contributes `value`, waits until every existing lane of `mask` arrived, and
// gets all contributions. Lanes of `mask` that do not exist in the block read as all-ones bits (NaN) in `values`.
struct WarpView {
    uint64_t values[32];
    unsigned present;  // lanes of mask that exist and contributed
    int lane;          // the calling lane
};
const WarpView& warp_collective(unsigned mask, uint64_t value);
unsigned active_mask();
[[noreturn]] void device_fail(const char* what);

template <class T>
inline uint64_t to_bits(const T& v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "warp shuffle of a type wider than 8 bytes");
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T>
inline T from_bits(uint64_t b) {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}
// Reads lane `src` of a collective, or the caller's own value when the shuffle rules say so (src < 0).
template <class T>
inline T shfl_read(const WarpView& w, int src, const T& own) {
    if (src < 0) return own;
    return from_bits<T>(w.values[src]);
}

}  // namespace cudasim::detail

#define threadIdx (static_cast<const uint3&>(::cudasim::detail::g_threadIdx))
#define blockIdx (static_cast<const uint3&>(::cudasim::detail::g_blockIdx))
#define blockDim (static_cast<const dim3&>(::cudasim::detail::g_blockDim))
#define gridDim (static_cast<const dim3&>(::cudasim::detail::g_gridDim))

// ---- synchronisation -----------------------------------------------------------------------------------------
inline void __syncthreads() { cudasim::detail::syncthreads(); }
inline int __syncthreads_count(int p) { return cudasim::detail::syncthreads_count(p); }
inline int __syncthreads_or(int p) { return cudasim::detail::syncthreads_count(p) != 0; }
inline int __syncthreads_and(int p) {
    return cudasim::detail::syncthreads_count(p) == (int)(blockDim.x * blockDim.y * blockDim.z);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)cudasim::detail::warp_collective(mask, 0); }
inline void __threadfence() {}
inline void __threadfence_block() {}
inline unsigned __activemask() { return cudasim::detail::active_mask(); }

// ---- warp shuffles and votes ---------------------------------------------------------------------------------
// width: a power of two <= 32 splitting the warp into independent segments, as on the hardware.
template <class T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize) {
    const auto& w = cudasim::detail::warp_collective(mask, cudasim::detail::to_bits(var));
    int src = (w.lane & ~(width - 1)) + (srcLane & (width - 1));
    return cudasim::detail::shfl_read(w, src, var);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize) {
    const auto& w = cudasim::detail::warp_collective(mask, cudasim::detail::to_bits(var));
    int src = w.lane ^ laneMask;
    // A lane may read from its own or an earlier segment; a later segment gives back its own value.
    if (src >= ((w.lane & ~(width - 1)) + width) || src > 31) src = -1;
    return cudasim::detail::shfl_read(w, src, var);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    const auto& w = cudasim::detail::warp_collective(mask, cudasim::detail::to_bits(var));
    int src = ((w.lane & (width - 1)) + (int)delta >= width) ? -1 : w.lane + (int)delta;
    return cudasim::detail::shfl_read(w, src, var);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    const auto& w = cudasim::detail::warp_collective(mask, cudasim::detail::to_bits(var));
    int src = ((w.lane & (width - 1)) < (int)delta) ? -1 : w.lane - (int)delta;
    return cudasim::detail::shfl_read(w, src, var);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
    const auto& w = cudasim::detail::warp_collective(mask, predicate != 0);
    unsigned r = 0;
    for (int l = 0; l < 32; l++)
        if ((w.present >> l & 1u) && w.values[l]) r |= 1u << l;
    return r;
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) {
    const auto& w = cudasim::detail::warp_collective(mask, predicate != 0);
    for (int l = 0; l < 32; l++)
        if ((w.present >> l & 1u) && !w.values[l]) return 0;
    return 1;
}

// ---- atomics (fibers never switch inside these, so plain read-modify-write is atomic) ------------------------
template <class T>
inline T cudasim_atomic_add(T* p, T v) { T old = *p; *p = old + v; return old; }
inline float atomicAdd(float* p, float v) { return cudasim_atomic_add(p, v); }
inline double atomicAdd(double* p, double v) { return cudasim_atomic_add(p, v); }
inline int atomicAdd(int* p, int v) { return cudasim_atomic_add(p, v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return cudasim_atomic_add(p, v); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return cudasim_atomic_add(p, v); }
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) {
    __nv_bfloat16 old = *p; *p = __float2bfloat16_rn(__bfloat162float(old) + __bfloat162float(v)); return old;
}
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* p, __nv_bfloat162 v) {
    __nv_bfloat162 old = *p;
    *p = __floats2bfloat162_rn(__bfloat162float(old.x) + __bfloat162float(v.x),
                               __bfloat162float(old.y) + __bfloat162float(v.y));
    return old;
}
inline int atomicSub(int* p, int v) { int old = *p; *p = old - v; return old; }
inline unsigned atomicSub(unsigned* p, unsigned v) { unsigned old = *p; *p = old - v; return old; }
inline int atomicMax(int* p, int v) { int old = *p; if (v > old) *p = v; return old; }
inline unsigned atomicMax(unsigned* p, unsigned v) { unsigned old = *p; if (v > old) *p = v; return old; }
inline int atomicMin(int* p, int v) { int old = *p; if (v < old) *p = v; return old; }
inline unsigned atomicMin(unsigned* p, unsigned v) { unsigned old = *p; if (v < old) *p = v; return old; }
inline int atomicExch(int* p, int v) { int old = *p; *p = v; return old; }
inline unsigned atomicExch(unsigned* p, unsigned v) { unsigned old = *p; *p = v; return old; }
inline float atomicExch(float* p, float v) { float old = *p; *p = v; return old; }
inline int atomicCAS(int* p, int cmp, int v) { int old = *p; if (old == cmp) *p = v; return old; }
inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) { unsigned old = *p; if (old == cmp) *p = v; return old; }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v) {
    unsigned long long old = *p; if (old == cmp) *p = v; return old;
}

// ---- memory hints: plain loads and stores (memcpy, so any trivially copyable type works) -------------------------
template <class T> inline T cudasim_load(const T* p) { T v; std::memcpy(static_cast<void*>(&v), p, sizeof(T)); return v; }
template <class T> inline void cudasim_store(T* p, const T& v) { std::memcpy(static_cast<void*>(p), &v, sizeof(T)); }
template <class T> inline T __ldg(const T* p) { return cudasim_load(p); }
template <class T> inline T __ldcs(const T* p) { return cudasim_load(p); }
template <class T> inline T __ldcg(const T* p) { return cudasim_load(p); }
template <class T> inline T __ldlu(const T* p) { return cudasim_load(p); }
template <class T> inline T __ldcv(const T* p) { return cudasim_load(p); }
template <class T> inline void __stcs(T* p, T v) { cudasim_store(p, v); }
template <class T> inline void __stcg(T* p, T v) { cudasim_store(p, v); }
template <class T> inline void __stwb(T* p, T v) { cudasim_store(p, v); }
template <class T> inline void __stwt(T* p, T v) { cudasim_store(p, v); }

// ---- math intrinsics missing from the C library ---------------------------------------------------------------
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; std::memcpy(&x, &i, 4); return x; }
inline float __uint_as_float(unsigned i) { float x; std::memcpy(&x, &i, 4); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __ffs(int x) { return __builtin_ffs(x); }

// CUDA's global min/max overloads (same-type, plus the mixed int/unsigned and float/double pairs).
#define CUDASIM_MINMAX(A, B, R)                                       \
    inline R min(A a, B b) { return (R)a < (R)b ? (R)a : (R)b; }      \
    inline R max(A a, B b) { return (R)a > (R)b ? (R)a : (R)b; }
CUDASIM_MINMAX(int, int, int)
CUDASIM_MINMAX(unsigned, unsigned, unsigned)
CUDASIM_MINMAX(int, unsigned, unsigned)
CUDASIM_MINMAX(unsigned, int, unsigned)
CUDASIM_MINMAX(long, long, long)
CUDASIM_MINMAX(unsigned long, unsigned long, unsigned long)
CUDASIM_MINMAX(long long, long long, long long)
CUDASIM_MINMAX(unsigned long long, unsigned long long, unsigned long long)
CUDASIM_MINMAX(float, float, float)
CUDASIM_MINMAX(double, double, double)
CUDASIM_MINMAX(float, double, double)
CUDASIM_MINMAX(double, float, double)
#undef CUDASIM_MINMAX
