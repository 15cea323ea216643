// The simulated cuBLASLt refuses what the real one refuses (docs/cudasim.md, "cuBLASLt"), and the CUDA backend's
// GEMM runner (llmc/cuda/matmul.cuh) takes its fallbacks for misaligned operands: odd element offsets, misaligned
// bias and aux (pre-GELU) buffers, aux leading dimensions that are not multiples of 8.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "dev/cuda/cublaslt_case.h"
#include "llmc/bf16.h"
#include "llmc/cuda/cuda_backend.h"
#include "test/fixtures/death_test.h"
#include "test/fixtures/testing.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using testing::aborts_with;
using testing::check;

namespace {

using bf16 = __nv_bfloat16;
constexpr double U = 1.0 / 256.0;  // bf16 unit roundoff: half an ulp of 8 significant bits

std::vector<float> random_bf16(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = llmc::bf16_to_float(llmc::float_to_bf16(u(rng)));
    return v;
}

// ---- the library's rules, called directly (the same cases dev/cuda/cublaslt_rules.cu asks a real GPU) --------
void test_library_rules() {
    const uint64_t m = 16, n = 8, k = 16;
    bf16* buf = nullptr;
    cudaMalloc(&buf, 4096 * sizeof(bf16));
    cudaMemset(buf, 0, 4096 * sizeof(bf16));
    bf16 *a = buf, *b = buf + 1024, *d = buf + 2048;
    std::printf("  (the cudasim cuBLASLt lines on stderr below are expected)\n");
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        check("aligned operands with the default declared alignment (256 bytes): an algorithm, and it runs",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
        check("planted bug, A 2-byte aligned but declared 256 (the default): cublasLtMatmul is "
              "CUBLAS_STATUS_NOT_SUPPORTED", g.heuristic() && g.matmul(a + 1, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
        g.declare_a(2);
        check("A 2-byte aligned and declared so: an algorithm, and it runs",
              g.heuristic() && g.matmul(a + 1, b, d) == CUBLAS_STATUS_SUCCESS);
        g.declare_a(1);
        check("A declared 1-byte aligned (less than a bf16 element): no algorithm", !g.heuristic());
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m + 1);  // ld 17: columns 34 bytes apart, the heuristic picks a 2-byte kernel
        check("an odd leading dimension with aligned pointers: the heuristic picks a kernel for it",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m, 2, (int64_t)(m * k + 1));  // batch entry 1 of A starts 2 bytes off
        g.declare_a(16);
        check("planted bug, a strided batch whose odd stride misaligns entry 1, declared 16: NOT_SUPPORTED",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
        g.declare_a(2);
        check("the same batch declared 2-byte aligned: runs", g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_GELU_AUX);
        g.aux(buf + 3072, (int64_t)m + 2);
        check("GELU_AUX with an aux leading dimension not divisible by 8: no algorithm", !g.heuristic());
        g.aux(buf + 3072, (int64_t)m + 8);
        check("GELU_AUX with aux LD = rows + 8: an algorithm, and it runs",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_BGRADB);
        g.bias(buf + 3072, CUDA_R_32F);
        check("BGRADB with an fp32 gradient for a bf16 output (the gradient must have the output's type): no algorithm",
              !g.heuristic());
    }
    std::string err;
    check("planted bug, the BIAS epilogue with a bias pointer that is not 16-byte aligned: reported as the device "
          "fault (misaligned address) it is",
          aborts_with([&] {
              CublasLtCase g(m, n, k, (int64_t)m);
              g.epilogue(CUBLASLT_EPILOGUE_BIAS);
              g.bias(buf + 3073, CUDA_R_16BF);
              std::printf("%s\n", g.outcome(a, b, d));
          }, {"misaligned address", "bias"}, err), "stderr: %s", err.c_str());
    cudaFree(buf);
}

// ---- the backend's fallbacks -----------------------------------------------------------------------------------
// out (N, OC) = inp (N, C) @ w^T + bias [then GELU], with every device operand placed `offset` elements into its
// buffer: offset 1 makes it only 2-byte aligned. Compared with a double reference on the same bf16 inputs.
//
// Bound: the fused path rounds out = bf16(dot + b) once; the fallback rounds the GEMM to bf16, adds the bias and
// rounds again: |err| <= U |dot| + U (|dot| + |b|) (1 + U) <= 1.01 U (2 |dot| + |b|). The simulator's GEMM
// accumulates in double, so no accumulation term. With GELU: pre is bounded so, out = bf16(gelu(pre)) adds
// U |gelu| and propagates the pre error by |gelu'| <= 1.13.
void matmul_case(llmc::CudaBackend& be, const char* what, size_t N, size_t C, size_t OC, size_t inp_off,
                 size_t bias_off, size_t out_off, bool gelu) {
    const size_t pad = 8;
    auto inp = random_bf16(N * C, 1), w = random_bf16(OC * C, 2), bias = random_bf16(OC, 3);
    auto* dinp = (bf16*)be.alloc((N * C + pad) * sizeof(bf16));
    auto* dw = (bf16*)be.alloc(OC * C * sizeof(bf16));
    auto* dbias = (bf16*)be.alloc((OC + pad) * sizeof(bf16));
    auto* dout = (bf16*)be.alloc((N * OC + pad) * sizeof(bf16));
    auto* dpre = (bf16*)be.alloc((N * OC + pad) * sizeof(bf16));
    be.upload_floats(dinp + inp_off, inp.data(), inp.size());
    be.upload_floats(dw, w.data(), w.size());
    be.upload_floats(dbias + bias_off, bias.data(), bias.size());
    be.matmul_forward(dout + out_off, dinp + inp_off, dw, dbias + bias_off, N, C, OC,
                      gelu ? dpre + out_off : nullptr);
    std::vector<float> got(N * OC);
    be.download_floats(got.data(), dout + out_off, got.size());
    size_t bad = 0;
    for (size_t i = 0; i < N; i++)
        for (size_t o = 0; o < OC; o++) {
            double dot = 0, mag = 0;
            for (size_t c = 0; c < C; c++) {
                dot += (double)inp[i * C + c] * w[o * C + c];
                mag += std::fabs((double)inp[i * C + c] * w[o * C + c]);
            }
            const double pre = dot + bias[o], pre_bound = 1.01 * U * (2 * mag + std::fabs(bias[o]));
            double want = pre, bound = pre_bound;
            if (gelu) {
                want = 0.5 * pre * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (pre + 0.044715 * pre * pre * pre)));
                bound = U * std::fabs(want) + 1.13 * pre_bound;
            }
            if (!(std::fabs(got[i * OC + o] - want) <= bound + 1e-7)) bad++;
        }
    check(std::string("CudaBackend matmul_forward, ") + what + ": right result", bad == 0, "%zu of %zu outside the bound",
          bad, N * OC);
    for (void* p : {(void*)dinp, (void*)dw, (void*)dbias, (void*)dout, (void*)dpre}) be.free(p);
}

void test_backend_fallbacks() {
    llmc::CudaBackend be;
    matmul_case(be, "aligned operands (fused BIAS epilogue)", 9, 32, 24, 0, 0, 0, false);
    matmul_case(be, "planted misalignment, a bias 2 bytes off 16-byte alignment (unfused fallback)", 9, 32, 24, 0, 1, 0,
                false);
    matmul_case(be, "planted misalignment, input and output at odd element offsets", 9, 32, 24, 1, 0, 1, false);
    matmul_case(be, "GELU, aligned (fused GELU_AUX_BIAS)", 9, 32, 24, 0, 0, 0, true);
    matmul_case(be, "planted misalignment, GELU with the pre-GELU (aux) buffer 2 bytes off (fallback)", 9, 32, 24, 0, 0,
                1, true);
    matmul_case(be, "GELU with OC = 20, not a multiple of 8 (fallback)", 9, 32, 20, 0, 0, 0, true);
    matmul_case(be, "odd shapes: N = 7, C = 33, OC = 13, every operand at an odd offset", 7, 33, 13, 1, 1, 1, true);
}

}  // namespace

int main() {
    test_library_rules();  // its death test forks: before the backend starts OpenMP threads
    test_backend_fallbacks();
    return testing::finish();
}
