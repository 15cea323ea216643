// Internal interfaces shared by the simulator's translation units (not for kernels or tests).
#pragma once

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>

namespace cudasim::detail {

// Device limits of the simulated device (an H100-like sm_90 part), used by the runtime and the launcher.
constexpr size_t kDefaultDynamicShared = 48 * 1024;       // without cudaFuncAttributeMaxDynamicSharedMemorySize
constexpr size_t kMaxDynamicShared = 227 * 1024;          // sharedMemPerBlockOptin
constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kNumSMs = 132;
constexpr int kClockRateKHz = 1980000;                    // cudaDevAttrClockRate: an H100 SXM's boost clock
constexpr size_t kDeviceMemory = size_t(80) << 30;        // reported by cudaMemGetInfo / totalGlobalMem
constexpr unsigned char kPoisonByte = 0xFF;               // fresh device and shared memory: NaN in fp32 and bf16

// The dynamic shared memory buffer (dev/cudasim/shared_memory.cpp).
unsigned char* dynamic_shared_buffer();

// The limit set with cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n), or the default.
size_t max_dynamic_shared(const void* kernel);

// Prints "<prefix><formatted message>" on stderr (after flushing stdout, so the message lands after the program's
// own lines): how every simulated library reports a misuse before returning its error code.
void report(const char* prefix, const char* fmt, va_list ap);

// Records an error for cudaGetLastError / cudaPeekAtLastError.
cudaError_t set_last_error(cudaError_t e);

}  // namespace cudasim::detail
