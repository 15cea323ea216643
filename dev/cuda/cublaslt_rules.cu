// GPU probe (not a benchmark): what the real cuBLASLt does with each configuration the simulator's cuBLASLt refuses
// (dev/cudasim/cublaslt.cpp, docs/cudasim.md "cuBLASLt"). For each rule it prints the simulator's answer and the real
// library's. The simulator must be at least as strict as the real library, so the trainer's fallbacks run in CI: a
// configuration the real library refuses but the simulator accepts is a MISMATCH (exit status 1). One the real
// library accepts but the simulator refuses is fine (the simulator is stricter) and is only noted.
// The misaligned-bias case goes last: if the real library faults, the CUDA context is lost.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

int mismatches = 0;

struct Gemm {
    cublasLtHandle_t h = nullptr;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    Gemm(uint64_t m, uint64_t n, uint64_t k, int batch = 1, int64_t stride_a = 0) {
        cublasLtCreate(&h);
        cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, k, (int64_t)m);
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
        const uint64_t ws = 0;
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    }
    ~Gemm() {
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatmulDescDestroy(desc);
        cublasLtDestroy(h);
    }
    void declare_a(uint32_t bytes) {
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &bytes, sizeof bytes);
    }
    int heuristic(cublasLtMatmulHeuristicResult_t& r) {
        int n = 0;
        if (cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 1, &r, &n) != CUBLAS_STATUS_SUCCESS) return 0;
        return n;
    }
    // The matmul's status, then the device's (a fault shows up at the synchronisation).
    const char* run(const void* a, const void* b, void* d, const cublasLtMatmulHeuristicResult_t& r) {
        const float one = 1.0f, zero = 0.0f;
        cublasStatus_t s = cublasLtMatmul(h, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &r.algo, nullptr, 0, 0);
        if (s != CUBLAS_STATUS_SUCCESS) return cublasLtGetStatusName(s);
        cudaError_t e = cudaDeviceSynchronize();
        return e == cudaSuccess ? "success" : cudaGetErrorName(e);
    }
};

// real_refuses: the real library refused (no algorithm, an error status or a fault).
void report(const char* rule, const char* simulator, bool sim_refuses, const char* real, bool real_refuses) {
    const char* verdict = real_refuses && !sim_refuses ? "MISMATCH (the simulator is laxer)"
                          : !real_refuses && sim_refuses ? "ok (the simulator is stricter)"
                                                         : "ok";
    if (real_refuses && !sim_refuses) mismatches++;
    std::printf("%-70s | simulator: %-28s | real: %-32s | %s\n", rule, simulator, real, verdict);
}

}  // namespace

int main() {
    const uint64_t m = 64, n = 64, k = 64;
    __nv_bfloat16* buf = nullptr;
    if (cudaMalloc(&buf, 65536 * sizeof(__nv_bfloat16)) != cudaSuccess) {
        std::fprintf(stderr, "error: cudaMalloc failed (no GPU?)\n");
        return 1;
    }
    cudaMemset(buf, 0, 65536 * sizeof(__nv_bfloat16));
    __nv_bfloat16 *a = buf, *b = buf + 8192, *d = buf + 16384;
    cublasLtMatmulHeuristicResult_t r;
    {
        Gemm g(m, n, k);
        const int found = g.heuristic(r);
        const char* s = found ? g.run(a + 1, b, d, r) : "no algorithm";
        report("A 2-byte aligned, declared 256 (the default)", "CUBLAS_STATUS_NOT_SUPPORTED", true, s,
               std::strcmp(s, "success") != 0);
        g.declare_a(2);
        const int found2 = g.heuristic(r);
        const char* s2 = found2 ? g.run(a + 1, b, d, r) : "no algorithm";
        report("A 2-byte aligned, declared 2", "success", false, s2, std::strcmp(s2, "success") != 0);
        g.declare_a(1);
        report("A declared 1-byte aligned (below a bf16 element)", "no algorithm", true,
               g.heuristic(r) ? "an algorithm" : "no algorithm", g.heuristic(r) == 0);
    }
    {
        Gemm g(m, n, k, 2, (int64_t)(m * k + 1));
        g.declare_a(16);
        const int found = g.heuristic(r);
        const char* s = found ? g.run(a, b, d, r) : "no algorithm";
        report("strided batch, odd stride (entry 1 2-byte aligned), declared 16", "CUBLAS_STATUS_NOT_SUPPORTED", true,
               s, std::strcmp(s, "success") != 0);
    }
    {
        Gemm g(m, n, k);
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_AUX;
        cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        void* aux = buf + 32768;
        cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        const int64_t aux_ld = (int64_t)m + 2;
        cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
        const int found = g.heuristic(r);
        const char* s = found ? g.run(a, b, d, r) : "no algorithm";
        report("GELU_AUX with aux LD = rows + 2 (not a multiple of 8)", "no algorithm", true, s,
               std::strcmp(s, "success") != 0);
    }
    {
        Gemm g(m, n, k);
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BGRADB;
        cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        void* grad = buf + 32768;
        cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &grad, sizeof grad);
        const cudaDataType_t f32 = CUDA_R_32F;
        cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32, sizeof f32);
        const int found = g.heuristic(r);
        const char* s = found ? g.run(a, b, d, r) : "no algorithm";
        report("BGRADB with an fp32 gradient for a bf16 output", "no algorithm", true, s,
               std::strcmp(s, "success") != 0);
    }
    {
        Gemm g(m, n, k);
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        void* bias = buf + 32769;  // 2-byte aligned
        cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        const int found = g.heuristic(r);
        const char* s = found ? g.run(a, b, d, r) : "no algorithm";
        report("BIAS epilogue with a 2-byte aligned bias (last: may fault)", "device fault (misaligned)", true, s,
               std::strcmp(s, "success") != 0);
    }
    std::printf("# %d mismatch(es)\n", mismatches);
    return mismatches ? 1 : 0;
}
