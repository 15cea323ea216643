// GPU probe (not a benchmark): what the real cuBLASLt does with each configuration the simulator's cuBLASLt refuses
// (dev/cudasim/cublaslt.cpp, docs/cudasim.md "cuBLASLt"). For each rule it prints the simulator's answer and the real
// library's. The simulator must be at least as strict as the real library, so the trainer's fallbacks run in CI: a
// configuration the real library refuses but the simulator accepts is a MISMATCH (exit status 1). One the real
// library accepts but the simulator refuses is fine (the simulator is stricter) and is only noted.
// Each case runs in a process of its own: a case that faults on the device loses the CUDA context, and every later
// call of that process would fail (seen on an H200: after the GELU_AUX fault every case answered "no algorithm").
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>

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

// The case's outcome with a 32 MiB workspace (the trainer's, llmc/cuda/matmul.cuh) declared and passed.
template <class F>
const char* with_workspace(CublasLtCase& g, F outcome) {
    void* ws = nullptr;
    if (cudaMalloc(&ws, 32u << 20) != cudaSuccess) return "no workspace memory";
    g.workspace(ws, 32u << 20);
    const char* r = outcome();
    cudaFree(ws);
    return r;
}

// The cases, in order: each returns the real library's outcome on the device buffer `buf` (65536 bf16, zeroed).
struct Case {
    const char* rule;
    const char* simulator;
    bool sim_refuses;
    const char* (*real)(__nv_bfloat16* buf);
};
constexpr uint64_t m = 64, n = 64, k = 64;
const Case kCases[] = {
    {"A 2-byte aligned, declared 256 (the default)", "CUBLAS_STATUS_NOT_SUPPORTED", true,
     [](__nv_bfloat16* buf) { CublasLtCase g(m, n, k, (int64_t)m); return g.outcome(buf + 1, buf + 8192, buf + 16384); }},
    {"A 2-byte aligned, declared 2", "success", false, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.declare_a(2);
         return g.outcome(buf + 1, buf + 8192, buf + 16384);
     }},
    {"A declared 1-byte aligned (below a bf16 element)", "no algorithm", true, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.declare_a(1);
         return g.outcome(buf + 1, buf + 8192, buf + 16384);
     }},
    {"strided batch, odd stride (entry 1 2-byte aligned), declared 16", "CUBLAS_STATUS_NOT_SUPPORTED", true,
     [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m, 2, (int64_t)(m * k + 1));
         g.declare_a(16);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"GELU_AUX with aux LD = rows + 2 (not a multiple of 8)", "no algorithm", true, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_GELU_AUX);
         g.aux(buf + 32768, (int64_t)m + 2);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"BGRADB with an fp32 gradient for a bf16 output", "no algorithm", true, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_BGRADB);
         g.bias(buf + 32768, CUDA_R_32F);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"DGELU without the aux (pre-GELU) input", "no algorithm", true, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_DGELU);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"DGELU with aux LD = rows + 2 (not a multiple of 8)", "no algorithm", true, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_DGELU);
         g.aux(buf + 32768, (int64_t)m + 2);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"DGELU with aux LD = rows (a multiple of 8)", "success", false, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_DGELU);
         g.aux(buf + 32768, (int64_t)m);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"DGELU_BGRAD with an fp32 bias gradient for a bf16 output", "no algorithm", true, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_DGELU_BGRAD);
         g.aux(buf + 32768, (int64_t)m);
         g.bias(buf + 49152, CUDA_R_32F);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"DGELU_BGRAD with a bf16 bias gradient, no workspace", "no algorithm", true, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_DGELU_BGRAD);
         g.aux(buf + 32768, (int64_t)m);
         g.bias(buf + 49152, CUDA_R_16BF);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"DGELU_BGRAD with a bf16 bias gradient, 32 MiB workspace", "success", false, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_DGELU_BGRAD);
         g.aux(buf + 32768, (int64_t)m);
         g.bias(buf + 49152, CUDA_R_16BF);
         return with_workspace(g, [&] { return g.outcome(buf, buf + 8192, buf + 16384); });
     }},
    {"BGRADB with a bf16 gradient for a bf16 output, B not transposed", "no algorithm", true, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_BGRADB);
         g.bias(buf + 49152, CUDA_R_16BF);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"BGRADB with an fp32 gradient for an fp32 output, B not transposed", "no algorithm", true,
     [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_BGRADB);
         g.fp32_output();
         g.bias(buf + 49152, CUDA_R_32F);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"BGRADB with a bf16 gradient for a bf16 output, B transposed", "success", false, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_BGRADB);
         g.transpose_b();
         g.bias(buf + 49152, CUDA_R_16BF);
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
    {"BGRADB, fp32 output and gradient, B transposed (the trainer's weight gradients)", "success", false,
     [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_BGRADB);
         g.transpose_b();
         g.fp32_output();
         g.bias(buf + 49152, CUDA_R_32F);
         return with_workspace(g, [&] { return g.outcome(buf, buf + 8192, buf + 16384); });
     }},
    {"BIAS epilogue with a 2-byte aligned bias (may fault)", "device fault (misaligned)", true, [](__nv_bfloat16* buf) {
         CublasLtCase g(m, n, k, (int64_t)m);
         g.epilogue(CUBLASLT_EPILOGUE_BIAS);
         g.bias(buf + 32769, CUDA_R_16BF);  // 2-byte aligned
         return g.outcome(buf, buf + 8192, buf + 16384);
     }},
};
constexpr int kNumCases = (int)(sizeof kCases / sizeof kCases[0]);

// One case in this process: prints its line; exit status 1 on a mismatch, 2 when the GPU is missing.
int run_case(int i) {
    __nv_bfloat16* buf = nullptr;
    if (cudaMalloc(&buf, 65536 * sizeof(__nv_bfloat16)) != cudaSuccess) {
        std::fprintf(stderr, "error: cudaMalloc failed (no GPU?)\n");
        return 2;
    }
    cudaMemset(buf, 0, 65536 * sizeof(__nv_bfloat16));
    const Case& c = kCases[i];
    const int before = mismatches;
    const char* real = c.real(buf);
    report(c.rule, c.simulator, c.sim_refuses, real, std::strcmp(real, "success") != 0);
    return mismatches > before ? 1 : 0;
}

}  // namespace

// Without arguments: every case, each in a child process of its own (`--case I`), since a case that faults on the
// device leaves the context unusable, and every later call in that process would fail too.
int main(int argc, char** argv) {
    if (argc == 3 && std::strcmp(argv[1], "--case") == 0) return run_case(std::atoi(argv[2]));
    int mismatched = 0;
    for (int i = 0; i < kNumCases; i++) {
        const std::string cmd = std::string("'") + argv[0] + "' --case " + std::to_string(i);
        std::fflush(stdout);
        const int st = std::system(cmd.c_str());
        if (!WIFEXITED(st) || WEXITSTATUS(st) == 2) {
            std::fprintf(stderr, "error: case %d (%s) did not run (status %d)\n", i, kCases[i].rule, st);
            return 1;
        }
        mismatched += WEXITSTATUS(st) == 1;
    }
    std::printf("# %d mismatch(es)\n", mismatched);
    return mismatched ? 1 : 0;
}
