// Device helpers shared by the kernel files: bf16 <-> float, 16-byte vector access (Pack, load_floats /
// store_floats, RowSlice), warp and block reductions, stochastic rounding.
//
// Reductions are deterministic: a fixed tree (xor-shuffles inside a warp, then warp 0's lanes over the per-warp
// partials in shared memory), so the result never depends on scheduling. Everything accumulates in fp32.
//
// Vector access. The memory-bound kernels are templates over W, the number of consecutive elements a thread moves
// per access: W = 8 for bf16 (kPackBf16) and W = 4 for fp32 (kPackF32) make every access one 16-byte instruction
// (LDG.E.128 / STG.E.128 in the SASS, checked by test/e2e/sass_check_test.py); W = 1 is the scalar path, the same source
// with one element per access. The host chooses once per launch (vector_ok): the vector path needs every pointer
// 16-byte aligned and the row length / element count a multiple of the pack width; anything else (odd test shapes)
// takes the scalar path, so no access is ever misaligned. docs/cuda.md ("Vector access") says where the model's
// pointers get their alignment. Under the simulator every Pack access checks its alignment and aborts if it is off.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "launch.cuh"

// Full unrolling of a loop with a compile-time trip count (register arrays are indexed by its variable, so it must
// unroll to keep them in registers); g++ (the simulator build) spells the pragma differently.
#ifdef __CUDACC__
#define LLMC_UNROLL _Pragma("unroll")
#else
#define LLMC_UNROLL _Pragma("GCC unroll 32")
#endif

namespace llmc {

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ bf16 to_bf16(float x) { return __float2bfloat16_rn(x); }

// ---- 16-byte vector access ---------------------------------------------------------------------------------------

constexpr int kPackBf16 = 8;  // bf16 elements per 16-byte access
constexpr int kPackF32 = 4;   // fp32 elements per 16-byte access

// Host: the precondition of the vector path. Every pointer 16-byte aligned (cudaMalloc gives 256) and `n` (a row
// length or an element count) a multiple of `width`, so that every pack the kernel touches is aligned too.
inline bool aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }
template <class... Ptrs>
inline bool vector_ok(size_t n, size_t width, const Ptrs*... ptrs) {
    return n % width == 0 && (aligned16(ptrs) && ...);
}

// N consecutive elements of T moved by one access of N * sizeof(T) bytes (16: one 128-bit instruction; N = 1: a
// scalar access). The address must be a multiple of that size.
template <class T, int N>
struct alignas(N * sizeof(T)) Pack {
    static_assert(N * sizeof(T) <= 16 && (N & (N - 1)) == 0, "a pack is one access of at most 16 bytes");
    T v[N];
    __device__ __forceinline__ T& operator[](int i) { return v[i]; }
    __device__ __forceinline__ const T& operator[](int i) const { return v[i]; }

    // One access (llmc/cuda/platform.cuh: the simulator checks its alignment).
    __device__ __forceinline__ static Pack load(const T* p) { return load_vector<Pack>(p); }
    __device__ __forceinline__ void store(T* p) const { store_vector<Pack>(p, *this); }
};

// W consecutive elements at p, converted to float: 16-byte packs when W fills them (8 bf16 or 4, 8 fp32), one
// scalar access when W == 1.
template <int W, class T>
__device__ __forceinline__ void load_floats(float (&out)[W], const T* p) {
    constexpr int N = W * sizeof(T) >= 16 ? 16 / (int)sizeof(T) : W;
    static_assert(W % N == 0 && (N == W || N * sizeof(T) == 16), "W elements must be whole 16-byte packs, or 1");
LLMC_UNROLL
    for (int i = 0; i < W; i += N) {
        Pack<T, N> q = Pack<T, N>::load(p + i);
LLMC_UNROLL
        for (int e = 0; e < N; e++) out[i + e] = to_float(q[e]);
    }
}
template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) { return to_bf16(x); }
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
// Stores W floats at p, rounded to T (bf16: to nearest even), in the same accesses as load_floats.
template <int W, class T>
__device__ __forceinline__ void store_floats(T* p, const float (&in)[W]) {
    constexpr int N = W * sizeof(T) >= 16 ? 16 / (int)sizeof(T) : W;
    static_assert(W % N == 0 && (N == W || N * sizeof(T) == 16), "W elements must be whole 16-byte packs, or 1");
LLMC_UNROLL
    for (int i = 0; i < W; i += N) {
        Pack<T, N> q;
LLMC_UNROLL
        for (int e = 0; e < N; e++) q[e] = from_float<T>(in[i + e]);
        q.store(p + i);
    }
}

// p[e] += a[e] for the W fp32 values at p (16-byte accesses when W fills them).
template <int W>
__device__ __forceinline__ void add_floats(float* p, const float (&a)[W]) {
    float cur[W];
    load_floats(cur, p);
LLMC_UNROLL
    for (int e = 0; e < W; e++) cur[e] += a[e];
    store_floats(p, cur);
}

// acc[e] += sum over i < n of row(i)[e], e < W: the sum of n rows of W elements (row(i) is a pointer), added in
// order of i, with kReduceUnroll rows' loads issued together before they are added (several loads in flight per
// thread; the result is the same as one at a time).
constexpr int kReduceUnroll = 4;
template <int W, class RowPtr>
__device__ __forceinline__ void sum_rows(float (&acc)[W], size_t n, RowPtr&& row) {
    size_t i = 0;
    for (; i + kReduceUnroll <= n; i += kReduceUnroll) {
        float v[kReduceUnroll][W];
LLMC_UNROLL
        for (int u = 0; u < kReduceUnroll; u++) load_floats(v[u], row(i + u));
LLMC_UNROLL
        for (int u = 0; u < kReduceUnroll; u++)
LLMC_UNROLL
            for (int e = 0; e < W; e++) acc[e] += v[u][e];
    }
    for (; i < n; i++) {
        float v[W];
        load_floats(v, row(i));
LLMC_UNROLL
        for (int e = 0; e < W; e++) acc[e] += v[e];
    }
}

// Host: launches an element-wise kernel with one thread per W elements, W = `width` when `vector` (the vector_ok
// test of the caller) and 1 otherwise; returns `vector`. The two kernels are the W = width and W = 1 instantiations.
template <class Kernel, class... Args>
inline bool launch_elementwise(bool vector, Kernel vector_kernel, Kernel scalar_kernel, size_t width, size_t n,
                               cudaStream_t stream, Args... args) {
    const size_t block = 256;
    if (vector)
        LLMC_LAUNCH(vector_kernel, grid_size(n / width, block), block, 0, stream, args...);
    else
        LLMC_LAUNCH(scalar_kernel, grid_size(n, block), block, 0, stream, args...);
    return vector;
}

// The packs j = first, first + stride, first + 2 stride, ... (j < packs) of one row that a thread (or lane) handles,
// pack j covering elements [j W, j W + W). The first P of them are loaded once into registers (all P loads in flight
// together); a row longer than stride P packs reloads the rest from memory on every pass. Row kernels make two or
// three passes over a row, so rows up to stride P W elements are read from memory once.
template <class T, int W, int P>
struct RowSlice {
    Pack<T, W> reg[P];
    const T* src;
    unsigned packs, first, stride;  // pack indices inside one row (the launchers check row lengths < 2^31)

    // Loads the slice's first P packs (unless load is false: see set()).
    __device__ __forceinline__ RowSlice(const T* row, unsigned num_packs, unsigned first_pack, unsigned pack_stride,
                                        bool load = true)
        : src(row), packs(num_packs), first(first_pack), stride(pack_stride) {
        if (!load) return;
LLMC_UNROLL
        for (int k = 0; k < P; k++) {
            const unsigned j = first + k * stride;
            if (j < packs) reg[k] = Pack<T, W>::load(src + j * W);
        }
    }
    // f(k, j, pack) for every pack of the slice, in order; k < P for the packs held in registers, k == P after.
    template <class F>
    __device__ __forceinline__ void for_each(F&& f) const {
LLMC_UNROLL
        for (int k = 0; k < P; k++) {
            const unsigned j = first + k * stride;
            if (j < packs) f(k, j, reg[k]);
        }
        for (unsigned j = first + P * stride; j < packs; j += stride) f(P, j, Pack<T, W>::load(src + j * W));
    }
    // The pack visited as (k, j) by for_each of a slice of the same shape (a second row read in step with this one).
    __device__ __forceinline__ Pack<T, W> get(int k, unsigned j) const {
        return k < P ? reg[k] : Pack<T, W>::load(src + j * W);
    }
    // Hides the register values from the optimiser, so that it keeps the packs as they are (W bf16 in W / 2
    // registers) between two passes instead of keeping their conversions to float (W registers), which would not fit.
    __device__ __forceinline__ void keep_packed() {
LLMC_UNROLL
        for (int k = 0; k < P; k++) {
            static_assert(sizeof(Pack<T, W>) % 4 == 0 || W == 1, "packs of whole 32-bit registers");
            if constexpr (sizeof(Pack<T, W>) % 4 == 0) {
                uint32_t* r = reinterpret_cast<uint32_t*>(&reg[k]);
LLMC_UNROLL
                for (int q = 0; q < (int)(sizeof(Pack<T, W>) / 4); q++) keep_in_register(r[q]);
            }
        }
    }
    // Keeps a pack computed by the kernel (which also stored it at src + j W, where later passes reload the packs
    // beyond the registers).
    __device__ __forceinline__ void set(int k, const Pack<T, W>& p) {
        if (k < P) reg[k] = p;
    }
};

// The first pass of a fused residual norm (one warp per row): residual = inp1 + inp2, summed in fp32 and stored
// rounded to bf16, and the slice of the stored row that the norm then reads (its first P packs in registers). The norm
// normalises exactly the stored values, which its backward reads. Each lane re-reads (beyond the registers) only the
// residual packs it wrote itself: no barrier needed.
template <int W, int P>
__device__ __forceinline__ RowSlice<bf16, W, P> residual_sum_row(bf16* __restrict__ residual,
                                                                 const bf16* __restrict__ inp1,
                                                                 const bf16* __restrict__ inp2, unsigned packs,
                                                                 int lane) {
    const RowSlice<bf16, W, P> a(inp1, packs, lane, 32), b(inp2, packs, lane, 32);
    RowSlice<bf16, W, P> x(residual, packs, lane, 32, false);
    a.for_each([&](int k, unsigned j, const Pack<bf16, W>& pa) {
        const Pack<bf16, W> pb = b.get(k, j);
        Pack<bf16, W> r;
LLMC_UNROLL
        for (int e = 0; e < W; e++) r[e] = to_bf16(to_float(pa[e]) + to_float(pb[e]));
        r.store(residual + j * W);
        x.set(k, r);
    });
    return x;
}

// Host: the row kernels index inside a row with 32-bit integers.
inline void check_row_length(const char* op, size_t n) {
    if (n >= 2147483648u) fail("%s: row length %zu does not fit the kernels' 32-bit row indices", op, n);
}

// The dynamic shared memory of the running kernel. Kernels templates get it from here rather than declaring
// `extern __shared__` themselves: under the simulator (where __shared__ is thread_local) g++ reaches an extern
// thread_local declared inside a function template through a TLS wrapper function that the simulator does not define.
__device__ __forceinline__ float* dynamic_shared_floats() {
    extern __shared__ float smem[];
    return smem;
}

// ---- reductions ----------------------------------------------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// Sum of v over the whole block, returned to every thread. blockDim.x must be a multiple of 32 (at most 1024) and
// the block 1-D. `scratch` is __shared__ float[32]. The first barrier protects scratch from a previous call whose
// readers may still be reading it; the second makes the per-warp partials visible before they are read.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < num_warps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

// A 32-bit integer hash (a multiply-xorshift finalizer) for stochastic rounding: well mixed, stateless, identical on
// every device and rank for the same (seed, index).
__host__ __device__ __forceinline__ uint32_t hash_u32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}
__host__ __device__ __forceinline__ uint32_t hash_index(uint32_t seed, size_t i) {
    return hash_u32(seed ^ hash_u32((uint32_t)i ^ hash_u32((uint32_t)(i >> 32) + 0x9e3779b9U)));
}

// Round x to bf16 stochastically: add 16 random bits below bf16's last mantissa bit, then truncate. The result is
// one of the two bf16 neighbours of x, the upper one with probability equal to x's distance from the lower one (in
// units of the gap), so the rounding is unbiased. Non-finite values round to nearest.
__device__ __forceinline__ bf16 stochastic_round_bf16(float x, uint32_t random) {
    if (!isfinite(x)) return __float2bfloat16_rn(x);
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + (random & 0xffffu)) & 0xffff0000u;
    __nv_bfloat16_raw raw;
    raw.x = (unsigned short)(u >> 16);
    return bf16(raw);
}

}  // namespace llmc
