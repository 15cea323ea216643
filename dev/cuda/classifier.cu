// Benchmark: the fused classifier (llmc/cuda/classifier.cuh): N rows of Vp bf16 logits, read once (the row stays in
// registers) and, with dlogits, written once; plus the targets and losses (8 N).
#include "bench_common.h"
#include "llmc/cuda/classifier.cuh"

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        bench::Shape s = bench::shape(argc, argv);
        const size_t N = s.N();
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        llmc::bf16* logits = bench::alloc_bf16(N * s.Vp, 1, -8, 8);
        int* targets = bench::alloc_tokens(N, 2, (int)s.V);
        float* losses = bench::alloc_f32(N, 3);
        float ms = bench::time_ms([&](cudaStream_t q) {
            llmc::fused_classifier(logits, losses, targets, 1.0f / N, N, s.V, s.Vp, true, q);
        }, st);
        bench::report(dev, "fused_classifier (with dlogits)", ms, 2.0 * 2 * N * s.Vp + 8.0 * N, 0);
        ms = bench::time_ms([&](cudaStream_t q) {
            llmc::fused_classifier(logits, losses, targets, 1.0f / N, N, s.V, s.Vp, false, q);
        }, st);
        bench::report(dev, "fused_classifier (loss only)", ms, 2.0 * N * s.Vp + 8.0 * N, 0);
        // As the model runs it: chunks of 4096 rows (llmc/model.h), one launch each; each launch ends with a partial
        // wave of blocks, which the one launch over N rows has once.
        const size_t chunk = 4096;
        ms = bench::time_ms([&](cudaStream_t q) {
            for (size_t r = 0; r < N; r += chunk) {
                const size_t n = N - r < chunk ? N - r : chunk;
                llmc::fused_classifier(logits + r * s.Vp, losses + r, targets + r, 1.0f / N, n, s.V, s.Vp, true, q);
            }
        }, st);
        bench::report(dev, "fused_classifier (with dlogits), in chunks of 4096 rows", ms, 2.0 * 2 * N * s.Vp + 8.0 * N,
                      0);
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
