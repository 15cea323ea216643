// The device limits kernels size themselves by, read once from the device (CudaBackend's constructor, the
// benchmarks' set-up): no product-name table and no architecture's figures hard-coded, so the same binary picks
// fitting tiles on an A100 (163 KiB of shared memory per block), an RTX 3090 / 4090, A10, L4 or L40S (99 KiB) and an
// H100 (227 KiB).
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "cuda_check.h"

namespace llmc {

struct DeviceLimits {
    int cc = 0;                  // compute capability, 10 major + minor (90 for sm_90)
    size_t smem_per_block = 0;   // cudaDevAttrMaxSharedMemoryPerBlockOptin: the most one block may opt in to
    size_t smem_per_sm = 0;      // cudaDevAttrMaxSharedMemoryPerMultiprocessor: what the resident blocks share
};

// Shared memory the runtime reserves for itself in every resident block on sm_80 and later (CUDA C++ Programming
// Guide, "Shared Memory" of compute capability 8.x / 9.x: 1 KB per block, counted against the SM's capacity).
constexpr size_t kReservedSharedPerBlock = 1024;

inline DeviceLimits read_device_limits(int device) {
    int major = 0, minor = 0, per_block = 0, per_sm = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    DeviceLimits d;
    d.cc = 10 * major + minor;
    d.smem_per_block = (size_t)per_block;
    d.smem_per_sm = (size_t)per_sm;
    return d;
}

// Blocks of a kernel that needs `smem` bytes of dynamic shared memory that can be resident on one SM as far as shared
// memory goes, at most `wanted` (the occupancy the kernel is compiled for); 0 when one block does not fit.
inline int resident_blocks(size_t smem, int wanted, const DeviceLimits& d) {
    if (smem > d.smem_per_block) return 0;
    const size_t fit = d.smem_per_sm / (smem + kReservedSharedPerBlock);
    return fit < (size_t)wanted ? (int)fit : wanted;
}

// Raises a kernel's dynamic shared-memory limit when it needs more than the default 48 KiB (the caller has checked
// `bytes` against DeviceLimits::smem_per_block). Called before every launch: the attribute belongs to the current
// device, and the call costs about a microsecond.
template <class Kernel>
void allow_dynamic_shared(Kernel kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

}  // namespace llmc
