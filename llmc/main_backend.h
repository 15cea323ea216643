// The backend a main program (train_gpt2.cu, test_gpt2.cu) is built for, decided by how it is compiled:
//   nvcc, or the host compiler with -DLLMC_CUDA   the CUDA backend (bf16 kernels, cuBLASLt, NCCL); against the CUDA
//                                                 simulator's headers (-DLLMC_CUDASIM too), its real sources on the CPU
//   the host compiler                             the CPU backend (fp32, OpenMP, OpenBLAS)
// The main programs hold no device code (the kernels are llmc/cuda's objects), so the Makefile compiles ./train_gpt2's
// and ./test_gpt2's with g++ -DLLMC_CUDA, in half nvcc's time, and links them with nvcc; plain nvcc works as well.
#pragma once

#if defined(__CUDACC__) || defined(LLMC_CUDA)
#define LLMC_MAIN_CUDA 1
#include "cuda/cuda_backend.h"
#include "cuda/cuda_comm.h"
namespace llmc {
using MainBackend = CudaBackend;
}  // namespace llmc
#else
#define LLMC_MAIN_CUDA 0
#include "cpu/cpu_backend.h"
#include "cpu/cpu_comm.h"
#include "cpu/thread_policy.h"
namespace llmc {
using MainBackend = CpuBackend;
}  // namespace llmc
#endif
