// Error checks for the CUDA runtime and cuBLASLt: a failed call throws llmc::Error naming the call site
// (file:line), the expression and the library's error string. The mains catch llmc::Error like any other error.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "../error.h"

namespace llmc {

inline void cuda_check(cudaError_t err, const char* expr, const char* file, int line) {
    if (err != cudaSuccess)
        fail("%s:%d: CUDA error %d (%s) in %s", file, line, (int)err, cudaGetErrorString(err), expr);
}

inline const char* cublas_status_string(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        default: return "unknown cuBLAS status";
    }
}

inline void cublas_check(cublasStatus_t s, const char* expr, const char* file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS)
        fail("%s:%d: cuBLASLt error %d (%s) in %s", file, line, (int)s, cublas_status_string(s), expr);
}

}  // namespace llmc

#define CUDA_CHECK(expr) ::llmc::cuda_check((expr), #expr, __FILE__, __LINE__)
#define CUBLAS_CHECK(expr) ::llmc::cublas_check((expr), #expr, __FILE__, __LINE__)
