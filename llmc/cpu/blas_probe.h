// OpenBLAS's work buffers, claimed at start-up, while there is room for them.
//
// OpenBLAS takes one work buffer (a 128 MiB malloc in Debian's 0.3.21) for each thread that runs a GEMM, the first
// time it does, and keeps it in a pool; when that malloc fails (an address-space limit, ulimit -v) it retries for
// ever. A run whose model and activations left too little room under the limit spun in its first sgemm, and a
// signal's save never came (the step never ended). So the CPU backend runs its GEMM patterns once when it is
// created, before the model exists: every buffer a run uses is in the pool from then on, and an allocation that
// does not fit later is the backend's own, which fails with a message. Under a limit, the room the buffers need is
// reserved first, so a limit too small even for them is an error too, not a spin.
#pragma once

namespace llmc {

// `threads`: the OpenMP threads of the backend's ops (each may run a single-threaded GEMM at once, as attention
// does). Fails naming the limit when the address space it leaves cannot hold the buffers.
void claim_blas_buffers(int threads);

}  // namespace llmc
