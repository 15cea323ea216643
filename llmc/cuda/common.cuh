// Device helpers shared by the kernel files: bf16 <-> float, warp and block reductions, stochastic rounding.
//
// Reductions are deterministic: a fixed tree (xor-shuffles inside a warp, then warp 0's lanes over the per-warp
// partials in shared memory), so the result never depends on scheduling. Everything accumulates in fp32.
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "launch.cuh"

namespace llmc {

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ bf16 to_bf16(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
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
__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < num_warps ? scratch[lane] : -3.402823466e38f;
    return warp_max(v);
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
