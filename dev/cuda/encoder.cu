// Benchmark: encoder forward and backward (llmc/cuda/encoder.cuh). Memory-bound: rates are against peak bandwidth.
#include <chrono>
#include <vector>

#include "bench_common.h"
#include "llmc/cuda/encoder.cuh"

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        bench::Shape s = bench::shape(argc, argv);
        const size_t N = s.N(), C = s.C;
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        int* tok = bench::alloc_tokens(N, 1, (int)s.V);
        llmc::bf16 *wte = bench::alloc_bf16(s.Vp * C, 2), *wpe = bench::alloc_bf16(s.T * C, 3);
        llmc::bf16 *out = bench::alloc_bf16(N * C, 4), *dout = bench::alloc_bf16(N * C, 5);
        float *dwte = bench::alloc_f32(s.Vp * C, 6), *dwpe = bench::alloc_f32(s.T * C, 7);
        float ms = bench::time_ms([&](cudaStream_t q) { llmc::encoder_forward(out, tok, wte, wpe, s.B, s.T, C, q); }, st);
        bench::report(dev, "encoder_forward", ms, 2.0 * (3 * N * C), 0);
        ms = bench::time_ms([&](cudaStream_t q) { llmc::encoder_backward_wpe(dwpe, dout, s.B, s.T, C, q); }, st);
        bench::report(dev, "encoder_backward dwpe", ms, 2.0 * N * C + 8.0 * s.T * C, 0);

        // dwte: the host grouping (timed separately on the CPU) and the gather kernel.
        std::vector<int> h_tok(N), packed(3 * N + 1), count(s.Vp, 0), next(s.Vp, 0);
        CUDA_CHECK(cudaMemcpy(h_tok.data(), tok, N * sizeof(int), cudaMemcpyDeviceToHost));
        auto t0 = std::chrono::steady_clock::now();
        size_t K = llmc::encoder_group_positions(packed.data(), h_tok.data(), N, count.data(), next.data(), s.Vp);
        double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::printf("%-44s %9.3f ms  (host, %zu distinct tokens)\n", "encoder_backward grouping", host_ms, K);
        int* groups;
        CUDA_CHECK(cudaMalloc(&groups, packed.size() * sizeof(int)));
        CUDA_CHECK(cudaMemcpy(groups, packed.data(), packed.size() * sizeof(int), cudaMemcpyHostToDevice));
        ms = bench::time_ms([&](cudaStream_t q) { llmc::encoder_backward_wte(dwte, dout, groups, N, K, C, q); }, st);
        bench::report(dev, "encoder_backward dwte gather", ms, 2.0 * N * C + 8.0 * K * C, 0);
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
