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
// Under the simulator (g++ -DLLMC_CUDASIM) the same instruction strings, with the same operand lists, are executed by
// dev/cudasim (cudasim::ptx, include/cudasim_mma.h), which implements these layouts exactly as warp collectives, so
// CI runs the kernels' real fragment index arithmetic and the exact PTX text and operand order the GPU build
// compiles; only the operand-kind macros differ between the two builds (llmc/cuda/platform.cuh).
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "platform.cuh"

namespace llmc {

// The instruction text of each primitive: nvcc compiles it (asm), the simulator parses and executes the same string
// (cudasim::ptx, dev/cudasim/ptx.cpp), so the two cannot diverge.
#define LLMC_PTX_MMA_BF16_16816 \
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
#define LLMC_PTX_LDMATRIX_X4 "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
#define LLMC_PTX_LDMATRIX_X4_TRANS "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
#define LLMC_PTX_CP_ASYNC_16 "cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
#define LLMC_PTX_CP_ASYNC_4 "cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
#define LLMC_PTX_CP_ASYNC_COMMIT "cp.async.commit_group;\n"
#define LLMC_PTX_CP_ASYNC_WAIT "cp.async.wait_group %0;\n"
#define LLMC_PTX_EX2_APPROX "ex2.approx.ftz.f32 %0, %1;\n"

__device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2],
                                               const float c[4]) {
    LLMC_ASM(LLMC_PTX_MMA_BF16_16816,
             (LLMC_OUT_F(d[0]), LLMC_OUT_F(d[1]), LLMC_OUT_F(d[2]), LLMC_OUT_F(d[3])),
             (LLMC_IN_R(a[0]), LLMC_IN_R(a[1]), LLMC_IN_R(a[2]), LLMC_IN_R(a[3]), LLMC_IN_R(b[0]), LLMC_IN_R(b[1]),
              LLMC_IN_F(c[0]), LLMC_IN_F(c[1]), LLMC_IN_F(c[2]), LLMC_IN_F(c[3])));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* row) {
    LLMC_ASM_MEM(LLMC_PTX_LDMATRIX_X4, (LLMC_OUT_R(r[0]), LLMC_OUT_R(r[1]), LLMC_OUT_R(r[2]), LLMC_OUT_R(r[3])),
                 (LLMC_SHARED_ADDR(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* row) {
    LLMC_ASM_MEM(LLMC_PTX_LDMATRIX_X4_TRANS, (LLMC_OUT_R(r[0]), LLMC_OUT_R(r[1]), LLMC_OUT_R(r[2]), LLMC_OUT_R(r[3])),
                 (LLMC_SHARED_ADDR(row)));
}
__device__ __forceinline__ void cp_async_16(void* dst_shared, const void* src_global, bool ok) {
    const int src_size = ok ? 16 : 0;
    LLMC_ASM_MEM_IN(LLMC_PTX_CP_ASYNC_16,
                    (LLMC_SHARED_ADDR(dst_shared), LLMC_GLOBAL_ADDR(src_global), LLMC_IN_R(src_size)));
}
__device__ __forceinline__ void cp_async_4(void* dst_shared, const void* src_global, bool ok) {
    const int src_size = ok ? 4 : 0;
    LLMC_ASM_MEM_IN(LLMC_PTX_CP_ASYNC_4,
                    (LLMC_SHARED_ADDR(dst_shared), LLMC_GLOBAL_ADDR(src_global), LLMC_IN_R(src_size)));
}
__device__ __forceinline__ void cp_async_commit() { LLMC_ASM_MEM_NONE(LLMC_PTX_CP_ASYNC_COMMIT); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    constexpr int n = N;
    LLMC_ASM_MEM_IN(LLMC_PTX_CP_ASYNC_WAIT, (LLMC_CONST(n)));
}
// The hardware's approximation error (< 2^-22 relative) is not reproduced by the simulator (it uses exp2f); tests
// bound it.
__device__ __forceinline__ float exp2_approx(float x) {
    float r;
    LLMC_ASM(LLMC_PTX_EX2_APPROX, (LLMC_OUT_F(r)), (LLMC_IN_F(x)));
    return r;
}

// Two floats as one register of two bf16 (round to nearest even; x in the low half): an A or B fragment register.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

}  // namespace llmc
