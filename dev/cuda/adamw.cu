// Benchmark: AdamW over GPT-2 124M's parameters (llmc/cuda/adamw.cuh). Per element: read grad, m, v, master (16 B),
// write m, v, master (12 B) and the bf16 param (2 B).
#include "bench_common.h"
#include "llmc/cuda/adamw.cuh"

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        const size_t n = 124475904;  // GPT-2 124M with Vp = 50304
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        llmc::bf16* params = bench::alloc_bf16(n, 1);
        float *master = bench::alloc_f32(n, 2), *grads = bench::alloc_f32(n, 3), *m = bench::alloc_f32(n, 4, -0.01f, 0.01f);
        float* v = bench::alloc_f32(n, 5, 0.0f, 1e-4f);
        int t = 1;
        float ms = bench::time_ms([&](cudaStream_t q) {
            llmc::adamw_update(params, master, grads, m, v, n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, t, (uint32_t)t, 0, q);
            t++;
        }, st);
        bench::report(dev, "adamw_update (124M params)", ms, 30.0 * n, 0);
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
