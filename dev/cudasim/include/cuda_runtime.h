// cudasim replacement for <cuda_runtime.h>: the CUDA toolkit's own runtime header for every type, enum and host API
// declaration (its functions are defined on the CPU in dev/cudasim/runtime.cpp), plus the device-side built-ins a
// kernel needs when g++ compiles it (threadIdx, __syncthreads, shuffles, atomics, ...) from cudasim_device.h.
//
// Found before the toolkit's header because the simulator build puts -Idev/cudasim/include ahead of
// -isystem $(CUDA_HOME)/include; #include_next then reaches the real one.
#pragma once

#include_next <cuda_runtime.h>

// The toolkit header defines these C++ conveniences only for nvcc (__CUDACC__): provide them for g++.
template <class T>
static inline cudaError_t cudaFuncSetAttribute(T* func, cudaFuncAttribute attr, int value) {
    return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value);
}
template <class T>
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T* func) {
    return ::cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(func));
}

#include "cudasim_device.h"
