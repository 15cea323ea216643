// One bf16 GEMM for cuBLASLt, D (m x n) = A (m x k) B (k x n) column-major, with the knobs the simulator's refusal
// rules are about: A's leading dimension and declared alignment, a strided batch, the epilogue and its bias / aux
// pointers. Shared by the GPU probe of those rules (dev/cuda/cublaslt_rules.cu, the real library) and their test
// under the simulator (test/sim/test_cudasim_cublaslt.cpp), so both ask exactly the same questions.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>

struct CublasLtCase {
    cublasLtHandle_t h = nullptr;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t result;
    uint64_t rows, cols, inner;
    void* ws = nullptr;
    uint64_t ws_bytes = 0;

    CublasLtCase(uint64_t m, uint64_t n, uint64_t k, int64_t lda, int batch = 1, int64_t stride_a = 0)
        : rows(m), cols(n), inner(k) {
        cublasLtCreate(&h);
        cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, k, lda);
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, (int64_t)k);
        cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, (int64_t)m);
        if (batch > 1) {
            const int64_t strides[3] = {stride_a, (int64_t)(k * n), (int64_t)(m * n)};
            cublasLtMatrixLayout_t ls[3] = {la, lb, ld};
            for (int i = 0; i < 3; i++) {
                cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
                cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                                 sizeof strides[i]);
            }
        }
        cublasLtMatmulPreferenceCreate(&pref);
        const uint64_t workspace = 0;
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                             sizeof workspace);
    }
    ~CublasLtCase() {
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatmulDescDestroy(desc);
        cublasLtDestroy(h);
    }
    CublasLtCase(const CublasLtCase&) = delete;
    CublasLtCase& operator=(const CublasLtCase&) = delete;

    void declare_a(uint32_t bytes) {
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &bytes, sizeof bytes);
    }
    void epilogue(cublasLtEpilogue_t e) {
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    }
    void bias(void* p, cudaDataType_t type) {
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof p);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof type);
    }
    // A workspace the heuristic may count on (default: none) and the matmul gets.
    void workspace(void* p, uint64_t bytes) {
        ws = p, ws_bytes = bytes;
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
    }
    // D in fp32 (m x n, ld m) instead of bf16, as for the trainer's weight gradients.
    void fp32_output() {
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, rows, cols, (int64_t)rows);
    }
    // op(B) = B^T, B stored n x k (ld n), as for the trainer's weight gradients.
    void transpose_b() {
        const cublasOperation_t t = CUBLAS_OP_T;
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &t, sizeof t);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, cols, inner, (int64_t)cols);
    }
    void aux(void* p, int64_t aux_ld) {
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p, sizeof p);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
    }
    // True when the heuristic returns an algorithm (kept in `result`).
    bool heuristic() {
        int n = 0;
        return cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 1, &result, &n) ==
                   CUBLAS_STATUS_SUCCESS && n == 1;
    }
    // The matmul with the heuristic's algorithm (D = A op(B), beta 0, the workspace if any, the legacy stream).
    cublasStatus_t matmul(const void* a, const void* b, void* d) {
        const float one = 1.0f, zero = 0.0f;
        return cublasLtMatmul(h, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &result.algo, ws, ws_bytes, 0);
    }
    // What happens end to end: "no algorithm", the matmul's error status, the device's error at the synchronisation
    // (a fault), or "success".
    const char* outcome(const void* a, const void* b, void* d) {
        if (!heuristic()) return "no algorithm";
        const cublasStatus_t s = matmul(a, b, d);
        if (s != CUBLAS_STATUS_SUCCESS) return cublasLtGetStatusName(s);
        const cudaError_t e = cudaDeviceSynchronize();
        return e == cudaSuccess ? "success" : cudaGetErrorName(e);
    }
};
