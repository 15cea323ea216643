// Inline PTX under the simulator: llmc/cuda/mma.cuh, compiled with g++ -DLLMC_CUDASIM, hands the instruction text it
// gives nvcc's `asm` to ptx(), which parses and executes it (dev/cudasim/ptx.cpp: the supported instructions), with
// the operands in the asm statement's order (outputs, then inputs; an address operand is the pointer). The
// instructions themselves are implemented in dev/cudasim/warp_mma.cpp:
//
//   mma_m16n8k16_bf16   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c
//   ldmatrix            ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16 r, [row]
//   cp_async            cp.async.{ca,cg}.shared.global [dst], [src], size, src_bytes   (size 4, 8 or 16)
//   cp_async_commit     cp.async.commit_group
//   cp_async_wait       cp.async.wait_group n
//
// mma and ldmatrix are warp collectives (built on the scheduler's warp_collective, so they are yield points like a
// shuffle): every one of the 32 lanes must call them, and each lane gets exactly the registers the PTX ISA's fragment
// tables give it (PTX ISA 9.0, section 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type" and
// section 9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix"; docs/cudasim.md has the tables). The product
// of the 16 exact bf16 x bf16 terms is summed in double and added to c, then rounded once to fp32.
//
// cp.async is emulated strictly: by default a copy happens when the issuing thread waits for its group (cp_async_wait),
// not when it is issued. So a thread that reads the destination before waiting, or another thread that reads it
// before the barrier that follows the wait, sees the old (poisoned) shared memory, as it may on a GPU. A GPU may also
// land a copy as soon as it is issued: set_cp_async_landing(CpAsyncLanding::AtIssue) (or CUDASIM_CP_ASYNC=at-issue)
// writes the destination at the issue instead, so a copy issued into a buffer that another warp may still be reading
// (no barrier between that warp's last read and the issue) overwrites it under a warp-serial order.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace cudasim {

// Executes one inline-PTX instruction given as the text nvcc compiles (dev/cudasim/ptx.cpp).
void ptx(const char* text, std::initializer_list<const void*> operands);

// d = a * b + c for one warp: A 16x16 bf16 (row-major), B 16x8 bf16 (column-major), C and D 16x8 fp32. Each lane
// passes its fragments: a = 4 registers of two bf16 each (low half first), b = 2 registers, c = 4 floats.
void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);

// `count` (1, 2 or 4) 8x8 b16 matrices from shared memory: lane l < 8 count passes the address of row l % 8 of
// matrix l / 8 (16-byte aligned). Lane l receives in r[m] two elements of matrix m: without trans, row l / 4 and
// columns 2 (l % 4), +1; with trans, column l / 4 and rows 2 (l % 4), +1 (the element with the lower index in the
// low half).
void ldmatrix(uint32_t* r, int count, const void* row, bool trans);

// An asynchronous copy of `size` (4, 8 or 16) bytes global -> shared (both aligned to size); src_bytes (0..size)
// bytes are read and the rest is zero-filled. Pending until the issuing thread's cp_async_wait covers its group.
void cp_async(void* dst_shared, const void* src_global, int size, int src_bytes);
// Closes the thread's current group of copies.
void cp_async_commit();
// Completes the thread's committed groups except the newest `pending` ones (cp.async.wait_group pending).
void cp_async_wait(int pending);

// When a copy writes its destination: at the wait that covers its group (the latest a GPU may: exposes reads before
// the wait or the barrier after it), or when it is issued (the earliest: exposes a copy issued into a buffer still
// being read). Either way a block must wait for every copy it issued. The initial mode comes from the environment
// variable CUDASIM_CP_ASYNC=at-wait|at-issue (default at-wait). A change applies to the copies executed after it
// (grids run when the stream scheduler reaches them: synchronise before changing it).
enum class CpAsyncLanding { AtWait, AtIssue };
void set_cp_async_landing(CpAsyncLanding landing);
CpAsyncLanding cp_async_landing();

}  // namespace cudasim
