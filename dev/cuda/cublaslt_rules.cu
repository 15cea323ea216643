// GPU probe (not a benchmark): what the real cuBLASLt does with each configuration the simulator's cuBLASLt refuses
// (dev/cudasim/cublaslt.cpp, docs/cudasim.md "cuBLASLt"). For each rule it prints the simulator's answer and the real
// library's. The simulator must be at least as strict as the real library, so the trainer's fallbacks run in CI: a
// configuration the real library refuses but the simulator accepts is a MISMATCH (exit status 1). One the real
// library accepts but the simulator refuses is fine (the simulator is stricter) and is only noted.
// The misaligned-bias case goes last: if the real library faults, the CUDA context is lost.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "dev/cuda/cublaslt_case.h"

namespace {

int mismatches = 0;

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
    // Each case: its description, what the simulator does (and whether that is a refusal), and the real outcome.
    auto probe = [&](const char* rule, const char* simulator, bool sim_refuses, const char* real) {
        report(rule, simulator, sim_refuses, real, std::strcmp(real, "success") != 0);
    };
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        probe("A 2-byte aligned, declared 256 (the default)", "CUBLAS_STATUS_NOT_SUPPORTED", true,
              g.outcome(a + 1, b, d));
        g.declare_a(2);
        probe("A 2-byte aligned, declared 2", "success", false, g.outcome(a + 1, b, d));
        g.declare_a(1);
        probe("A declared 1-byte aligned (below a bf16 element)", "no algorithm", true, g.outcome(a + 1, b, d));
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m, 2, (int64_t)(m * k + 1));
        g.declare_a(16);
        probe("strided batch, odd stride (entry 1 2-byte aligned), declared 16", "CUBLAS_STATUS_NOT_SUPPORTED", true,
              g.outcome(a, b, d));
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_GELU_AUX);
        g.aux(buf + 32768, (int64_t)m + 2);
        probe("GELU_AUX with aux LD = rows + 2 (not a multiple of 8)", "no algorithm", true, g.outcome(a, b, d));
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_BGRADB);
        g.bias(buf + 32768, CUDA_R_32F);
        probe("BGRADB with an fp32 gradient for a bf16 output", "no algorithm", true, g.outcome(a, b, d));
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_DGELU);
        probe("DGELU without the aux (pre-GELU) input", "no algorithm", true, g.outcome(a, b, d));
        g.aux(buf + 32768, (int64_t)m + 2);
        probe("DGELU with aux LD = rows + 2 (not a multiple of 8)", "no algorithm", true, g.outcome(a, b, d));
        g.aux(buf + 32768, (int64_t)m);
        probe("DGELU with aux LD = rows (a multiple of 8)", "success", false, g.outcome(a, b, d));
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_DGELU_BGRAD);
        g.aux(buf + 32768, (int64_t)m);
        g.bias(buf + 49152, CUDA_R_32F);
        probe("DGELU_BGRAD with an fp32 bias gradient for a bf16 output", "no algorithm", true, g.outcome(a, b, d));
        g.bias(buf + 49152, CUDA_R_16BF);
        probe("DGELU_BGRAD with a bf16 bias gradient", "success", false, g.outcome(a, b, d));
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_BGRADB);
        g.bias(buf + 49152, CUDA_R_16BF);
        probe("BGRADB with a bf16 gradient for a bf16 output (NN layout)", "success", false, g.outcome(a, b, d));
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_BIAS);
        g.bias(buf + 32769, CUDA_R_16BF);  // 2-byte aligned
        probe("BIAS epilogue with a 2-byte aligned bias (last: may fault)", "device fault (misaligned)", true,
              g.outcome(a, b, d));
    }
    std::printf("# %d mismatch(es)\n", mismatches);
    return mismatches ? 1 : 0;
}
