// Benchmark: the speedrun recipe's own kernels (llmc/cuda/speedrun_ops.h) at GPT-2 124M's width with the records'
// 6 heads of 128, and what they add to a training step of 12 layers on one rank: Muon on every block matrix
// (Newton-Schulz as cuBLASLt GEMMs, llmc/cuda/muon.cuh), ReLU^2 (a pass of its own: cuBLASLt has no ReLU^2
// epilogue, where GPT-2's GELU is fused into the fc GEMM), RMSNorm and QK-norm + rotary (docs/speedrun.md).
#include <vector>

#include "bench_common.h"
#include "llmc/cuda/matmul.cuh"
#include "llmc/cuda/muon.cuh"
#include "llmc/cuda/qk_rotary.cuh"
#include "llmc/cuda/relu2.cuh"
#include "llmc/cuda/rmsnorm.cuh"
#include "llmc/rotary_table.h"

namespace {

// Muon's update of one rows x cols matrix (momentum, Newton-Schulz, apply), its FLOPs those of the 5 quintic steps:
// per step X X^T (2 m^2 n), A A (2 m^3) and B X (2 m^2 n), m = min(rows, cols), n = max(rows, cols).
float bench_muon(const bench::Device& dev, llmc::GemmRunner& gemm, size_t rows, size_t cols, cudaStream_t st) {
    const size_t n = rows * cols;
    llmc::bf16* params = bench::alloc_bf16(n, 11, -0.05f, 0.05f);
    float *master = bench::alloc_f32(n, 12, -0.05f, 0.05f), *grads = bench::alloc_f32(n, 13, -1e-3f, 1e-3f);
    float* momentum = bench::alloc_f32(n, 14, -1e-3f, 1e-3f);
    void* workspace;
    CUDA_CHECK(cudaMalloc(&workspace, llmc::muon_workspace_bytes(rows, cols)));
    float ms = bench::time_ms([&](cudaStream_t q) {
        llmc::muon_update(gemm, params, master, grads, momentum, rows, cols, 0.02f, 0.95f, true, 1.0f, 1, 0,
                          workspace, q);
    }, st);
    const double m = (double)std::min(rows, cols), big = (double)std::max(rows, cols);
    const double flops = llmc::kNewtonSchulzSteps * (4 * m * m * big + 2 * m * m * m);
    bench::report(dev, "muon_update " + std::to_string(rows) + " x " + std::to_string(cols), ms, 0, flops);
    CUDA_CHECK(cudaFree(workspace));
    for (void* p : {(void*)params, (void*)master, (void*)grads, (void*)momentum}) CUDA_CHECK(cudaFree(p));
    return ms;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        bench::Shape s = bench::shape(argc, argv);
        const size_t N = s.N(), C = s.C, L = 12, NH = 6, hs = C / NH;
        std::printf("# speedrun: L=%zu NH=%zu (head size %zu)\n", L, NH, hs);
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));

        // Muon: per layer q, k, v and attproj (C x C each: qkv is three matrices), fc (4C x C), fcproj (C x 4C).
        llmc::GemmRunner gemm(true);
        const float cc = bench_muon(dev, gemm, C, C, st), fc = bench_muon(dev, gemm, 4 * C, C, st),
                    fcproj = bench_muon(dev, gemm, C, 4 * C, st);
        const float muon_step = L * (4 * cc + fc + fcproj);

        // ReLU^2 on the MLP's (N, 4C) activations; GPT-2 fuses its GELU into the fc GEMM's epilogue instead.
        const size_t n4 = N * 4 * C;
        llmc::bf16 *pre = bench::alloc_bf16(n4, 1, -4, 4), *act = bench::alloc_bf16(n4, 2),
                   *dact = bench::alloc_bf16(n4, 3);
        const float relu_f = bench::time_ms([&](cudaStream_t q) { llmc::relu2_forward(act, pre, n4, q); }, st);
        bench::report(dev, "relu2_forward", relu_f, 2.0 * 2 * n4, 0);
        const float relu_b =
            bench::time_ms([&](cudaStream_t q) { llmc::relu2_backward_inplace(dact, pre, n4, q); }, st);
        bench::report(dev, "relu2_backward_inplace", relu_b, 2.0 * 3 * n4, 0);
        for (void* p : {(void*)pre, (void*)act, (void*)dact}) CUDA_CHECK(cudaFree(p));

        // RMSNorm (no gain) on (N, C): the fused residual form runs twice per layer, the backward twice per layer.
        const size_t nc = N * C;
        llmc::bf16 *a = bench::alloc_bf16(nc, 4), *b = bench::alloc_bf16(nc, 5), *res = bench::alloc_bf16(nc, 6),
                   *out = bench::alloc_bf16(nc, 7), *dout = bench::alloc_bf16(nc, 8), *dinp = bench::alloc_bf16(nc, 9);
        float* rstd = bench::alloc_f32(N * 2 * NH, 10);
        const float rms_f = bench::time_ms([&](cudaStream_t q) { llmc::rmsnorm_forward(out, rstd, a, N, C, q); }, st);
        bench::report(dev, "rmsnorm_forward", rms_f, 2.0 * 2 * nc + 4.0 * N, 0);
        const float rms_fused = bench::time_ms(
            [&](cudaStream_t q) { llmc::fused_residual_rmsnorm_forward(res, out, rstd, a, b, N, C, q); }, st);
        bench::report(dev, "fused_residual_rmsnorm_forward", rms_fused, 2.0 * 4 * nc + 4.0 * N, 0);
        const float rms_b = bench::time_ms(
            [&](cudaStream_t q) { llmc::rmsnorm_backward(dinp, dout, a, rstd, N, C, q); }, st);
        bench::report(dev, "rmsnorm_backward (dinp +=)", rms_b, 2.0 * 4 * nc + 4.0 * N, 0);
        for (void* p : {(void*)a, (void*)b, (void*)res, (void*)out, (void*)dout, (void*)dinp}) CUDA_CHECK(cudaFree(p));

        // QK-norm + rotary, in place on the q and k thirds of qkv (B, T, 3C).
        const size_t n3 = N * 3 * C;
        llmc::bf16 *qkv = bench::alloc_bf16(n3, 15), *dqkv = bench::alloc_bf16(n3, 16);
        std::vector<float> host_table = llmc::rotary_table(s.T, hs);
        float* table;
        CUDA_CHECK(cudaMalloc(&table, host_table.size() * sizeof(float)));
        CUDA_CHECK(cudaMemcpy(table, host_table.data(), host_table.size() * sizeof(float), cudaMemcpyHostToDevice));
        const float qk_f = bench::time_ms(
            [&](cudaStream_t q) { llmc::qk_norm_rotary_forward(qkv, rstd, table, s.B, s.T, C, NH, q); }, st);
        bench::report(dev, "qk_norm_rotary_forward", qk_f, 2.0 * 2 * 2 * nc + 4.0 * N * 2 * NH, 0);
        const float qk_b = bench::time_ms(
            [&](cudaStream_t q) { llmc::qk_norm_rotary_backward(dqkv, qkv, rstd, table, s.B, s.T, C, NH, q); }, st);
        bench::report(dev, "qk_norm_rotary_backward", qk_b, 2.0 * 3 * 2 * nc + 4.0 * N * 2 * NH, 0);
        for (void* p : {(void*)qkv, (void*)dqkv, (void*)table, (void*)rstd}) CUDA_CHECK(cudaFree(p));

        std::printf("# per training step (12 layers, one rank): Muon %.2f ms, ReLU^2 %.2f ms, RMSNorm %.2f ms "
                    "(2 fused forwards, 2 backwards per layer), QK-norm + rotary %.2f ms\n",
                    muon_step, L * (relu_f + relu_b), L * 2 * (rms_fused + rms_b), L * (qk_f + qk_b));
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
