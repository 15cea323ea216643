// Tensor-core and asynchronous-copy primitives (sm_80 and later): the only inline PTX in llmc/cuda.
//
//   mma_bf16_16816(d, a, b, c)   d = a b + c for one warp: A 16x16 bf16 (row-major), B 16x8 bf16 (column-major),
//                                C and D 16x8 fp32 (mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32)
//   ldmatrix_x4(r, row)          four 8x8 bf16 matrices from shared memory (ldmatrix.sync.aligned.m8n8.x4.b16)
//   ldmatrix_x4_trans(r, row)    the same, each matrix transposed (.trans)
//   cp_async_16(dst, src, ok)    16 bytes global -> shared without registers; zero-fill when !ok (cp.async.cg)
//   cp_async_4(dst, src, ok)     4 bytes likewise (cp.async.ca: .cg copies 16 bytes only), for fp32 rows that are not
//                                16-byte aligned
//   cp_async_commit(), cp_async_wait<N>()   close the thread's group of copies; wait until at most N groups pend
//   exp2_approx(x)               2^x by the special-function unit (ex2.approx.ftz.f32: relative error below 2^-22,
//                                denormal results flushed to 0), one instruction instead of exp2f's range handling
//
// Fragment layouts (PTX ISA 9.0, section 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type";
// lane = 4 g + t, g = lane / 4, t = lane % 4; each 32-bit register holds two bf16, the lower index in the low half):
//   A: a[0] = (g, 2t..2t+1)   a[1] = (g+8, 2t..2t+1)   a[2] = (g, 2t+8..2t+9)   a[3] = (g+8, 2t+8..2t+9)
//   B: b[0] = (2t..2t+1, g)   b[1] = (2t+8..2t+9, g)                            (row = k, column = n)
//   C, D: c[0], c[1] = (g, 2t), (g, 2t+1);   c[2], c[3] = (g+8, 2t), (g+8, 2t+1)
// ldmatrix: lane l passes the (16-byte aligned) address of row l % 8 of matrix l / 8 and receives in r[m] row l / 4,
// columns 2 (l % 4), +1 of matrix m (with .trans: column l / 4, rows 2 (l % 4), +1). So four 8x8 blocks of a
// row-major tile in shared memory become an A fragment, or B fragments of two n8 tiles, without any shuffles.
//
// Under the simulator (g++ -DLLMC_CUDASIM) the same instruction strings are executed by dev/cudasim (cudasim::ptx,
// include/cudasim_mma.h), which implements these layouts exactly as warp collectives, so CI runs the kernels' real
// fragment index arithmetic and the exact PTX text the GPU build compiles.
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#ifdef LLMC_CUDASIM
#include "cudasim_mma.h"
#endif

namespace llmc {

// The instruction text of each primitive: nvcc compiles it (asm), the simulator parses and executes the same string
// (cudasim::ptx, dev/cudasim/ptx.cpp), so the two cannot diverge. The operand lists below are in the same order in
// both branches: the asm statement's outputs, then its inputs.
#define LLMC_PTX_MMA_BF16_16816 \
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
#define LLMC_PTX_LDMATRIX_X4 "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
#define LLMC_PTX_LDMATRIX_X4_TRANS "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
#define LLMC_PTX_CP_ASYNC_16 "cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
#define LLMC_PTX_CP_ASYNC_4 "cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
#define LLMC_PTX_CP_ASYNC_COMMIT "cp.async.commit_group;\n"
#define LLMC_PTX_CP_ASYNC_WAIT "cp.async.wait_group %0;\n"
#define LLMC_PTX_EX2_APPROX "ex2.approx.ftz.f32 %0, %1;\n"

#ifdef LLMC_CUDASIM

__device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2],
                                               const float c[4]) {
    cudasim::ptx(LLMC_PTX_MMA_BF16_16816, {&d[0], &d[1], &d[2], &d[3], &a[0], &a[1], &a[2], &a[3], &b[0], &b[1],
                                           &c[0], &c[1], &c[2], &c[3]});
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* row) {
    cudasim::ptx(LLMC_PTX_LDMATRIX_X4, {&r[0], &r[1], &r[2], &r[3], row});
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* row) {
    cudasim::ptx(LLMC_PTX_LDMATRIX_X4_TRANS, {&r[0], &r[1], &r[2], &r[3], row});
}
__device__ __forceinline__ void cp_async_16(void* dst_shared, const void* src_global, bool ok) {
    const int src_size = ok ? 16 : 0;
    cudasim::ptx(LLMC_PTX_CP_ASYNC_16, {dst_shared, src_global, &src_size});
}
__device__ __forceinline__ void cp_async_4(void* dst_shared, const void* src_global, bool ok) {
    const int src_size = ok ? 4 : 0;
    cudasim::ptx(LLMC_PTX_CP_ASYNC_4, {dst_shared, src_global, &src_size});
}
__device__ __forceinline__ void cp_async_commit() { cudasim::ptx(LLMC_PTX_CP_ASYNC_COMMIT, {}); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    const int n = N;
    cudasim::ptx(LLMC_PTX_CP_ASYNC_WAIT, {&n});
}
// The hardware's approximation error (< 2^-22 relative) is not reproduced (the simulator uses exp2f); tests bound it.
__device__ __forceinline__ float exp2_approx(float x) {
    float r;
    cudasim::ptx(LLMC_PTX_EX2_APPROX, {&r, &x});
    return r;
}

#else

__device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2],
                                               const float c[4]) {
    asm(LLMC_PTX_MMA_BF16_16816
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
}
__device__ __forceinline__ uint32_t shared_address(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* row) {
    asm volatile(LLMC_PTX_LDMATRIX_X4
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row))
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* row) {
    asm volatile(LLMC_PTX_LDMATRIX_X4_TRANS
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row))
                 : "memory");
}
__device__ __forceinline__ void cp_async_16(void* dst_shared, const void* src_global, bool ok) {
    asm volatile(LLMC_PTX_CP_ASYNC_16 ::"r"(shared_address(dst_shared)), "l"(src_global), "r"(ok ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_4(void* dst_shared, const void* src_global, bool ok) {
    asm volatile(LLMC_PTX_CP_ASYNC_4 ::"r"(shared_address(dst_shared)), "l"(src_global), "r"(ok ? 4 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile(LLMC_PTX_CP_ASYNC_COMMIT ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile(LLMC_PTX_CP_ASYNC_WAIT ::"n"(N) : "memory");
}
__device__ __forceinline__ float exp2_approx(float x) {
    float r;
    asm(LLMC_PTX_EX2_APPROX : "=f"(r) : "f"(x));
    return r;
}

#endif

// Two floats as one register of two bf16 (round to nearest even; x in the low half): an A or B fragment register.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

}  // namespace llmc
