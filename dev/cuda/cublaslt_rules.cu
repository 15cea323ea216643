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

// One case: a 64 x 64 x 64 GEMM D = A op(B) on the device buffer `buf` (65536 bf16, zeroed), with these settings.
struct Setup {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    int a_offset = 0;              // A at buf + a_offset elements (1: 2-byte aligned)
    uint32_t declare_a = 0;        // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; 0: the default (256)
    int batch = 1;                 // a strided batch of A with stride m k + 1 when 2
    int64_t aux_ld = 0;            // the GELU aux matrix at buf + 32768 with this leading dimension; 0: none
    int bias_offset = -1;          // the bias (or bias gradient) at buf + bias_offset; -1: none
    cudaDataType_t bias_type = CUDA_R_16BF;
    bool transpose_b = false, fp32_output = false;
    bool workspace = false;        // 32 MiB declared and passed (the trainer's, llmc/cuda/matmul.cuh)
};
constexpr uint64_t m = 64, n = 64, k = 64;

const char* real_outcome(const Setup& c, __nv_bfloat16* buf) {
    CublasLtCase g(m, n, k, (int64_t)m, c.batch, c.batch > 1 ? (int64_t)(m * k + 1) : 0);
    if (c.declare_a) g.declare_a(c.declare_a);
    if (c.epilogue != CUBLASLT_EPILOGUE_DEFAULT) g.epilogue(c.epilogue);
    if (c.transpose_b) g.transpose_b();
    if (c.fp32_output) g.fp32_output();
    if (c.aux_ld) g.aux(buf + 32768, c.aux_ld);
    if (c.bias_offset >= 0) g.bias(buf + c.bias_offset, c.bias_type);
    void* ws = nullptr;
    if (c.workspace) {
        if (cudaMalloc(&ws, 32u << 20) != cudaSuccess) return "no workspace memory";
        g.workspace(ws, 32u << 20);
    }
    const char* r = g.outcome(buf + c.a_offset, buf + 8192, buf + 16384);
    if (ws) cudaFree(ws);
    return r;
}

Setup declared_a(int offset, uint32_t declared, int batch = 1) {
    Setup c;
    c.a_offset = offset, c.declare_a = declared, c.batch = batch;
    return c;
}
Setup epilogue(cublasLtEpilogue_t e, int64_t aux_ld = 0, int bias_offset = -1, cudaDataType_t bias_type = CUDA_R_16BF) {
    Setup c;
    c.epilogue = e, c.aux_ld = aux_ld, c.bias_offset = bias_offset, c.bias_type = bias_type;
    return c;
}
Setup with(Setup c, bool transpose_b, bool fp32_output, bool workspace) {
    c.transpose_b = transpose_b, c.fp32_output = fp32_output, c.workspace = workspace;
    return c;
}

// The cases, in order, with what the simulator answers (and whether that is a refusal).
struct Case {
    const char* rule;
    const char* simulator;
    bool sim_refuses;
    Setup setup;
};
const Case kCases[] = {
    {"A 2-byte aligned, declared 256 (the default)", "CUBLAS_STATUS_NOT_SUPPORTED", true, declared_a(1, 0)},
    {"A 2-byte aligned, declared 2", "success", false, declared_a(1, 2)},
    {"A declared 1-byte aligned (below a bf16 element)", "no algorithm", true, declared_a(1, 1)},
    {"strided batch, odd stride (entry 1 2-byte aligned), declared 16", "CUBLAS_STATUS_NOT_SUPPORTED", true,
     declared_a(0, 16, 2)},
    {"GELU_AUX with aux LD = rows + 2 (not a multiple of 8)", "no algorithm", true,
     epilogue(CUBLASLT_EPILOGUE_GELU_AUX, m + 2)},
    {"BGRADB with an fp32 gradient for a bf16 output", "no algorithm", true,
     epilogue(CUBLASLT_EPILOGUE_BGRADB, 0, 32768, CUDA_R_32F)},
    {"DGELU without the aux (pre-GELU) input", "no algorithm", true, epilogue(CUBLASLT_EPILOGUE_DGELU)},
    {"DGELU with aux LD = rows + 2 (not a multiple of 8)", "no algorithm", true,
     epilogue(CUBLASLT_EPILOGUE_DGELU, m + 2)},
    {"DGELU with aux LD = rows (a multiple of 8)", "success", false, epilogue(CUBLASLT_EPILOGUE_DGELU, m)},
    {"DGELU_BGRAD with an fp32 bias gradient for a bf16 output", "no algorithm", true,
     epilogue(CUBLASLT_EPILOGUE_DGELU_BGRAD, m, 49152, CUDA_R_32F)},
    {"DGELU_BGRAD with a bf16 bias gradient, no workspace", "no algorithm", true,
     epilogue(CUBLASLT_EPILOGUE_DGELU_BGRAD, m, 49152)},
    {"DGELU_BGRAD with a bf16 bias gradient, 32 MiB workspace", "success", false,
     with(epilogue(CUBLASLT_EPILOGUE_DGELU_BGRAD, m, 49152), false, false, true)},
    {"BGRADB with a bf16 gradient for a bf16 output, B not transposed", "no algorithm", true,
     epilogue(CUBLASLT_EPILOGUE_BGRADB, 0, 49152)},
    {"BGRADB with an fp32 gradient for an fp32 output, B not transposed", "no algorithm", true,
     with(epilogue(CUBLASLT_EPILOGUE_BGRADB, 0, 49152, CUDA_R_32F), false, true, false)},
    {"BGRADB with a bf16 gradient for a bf16 output, B transposed", "success", false,
     with(epilogue(CUBLASLT_EPILOGUE_BGRADB, 0, 49152), true, false, false)},
    {"BGRADB, fp32 output and gradient, B transposed (the trainer's weight gradients)", "success", false,
     with(epilogue(CUBLASLT_EPILOGUE_BGRADB, 0, 49152, CUDA_R_32F), true, true, true)},
    {"BIAS epilogue with a 2-byte aligned bias (may fault)", "device fault (misaligned)", true,
     epilogue(CUBLASLT_EPILOGUE_BIAS, 0, 32769)},
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
    const char* real = real_outcome(c.setup, buf);
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
