// Benchmark: GELU forward and the in-place GELU backward (llmc/cuda/gelu.cuh), on the MLP's (N, 4C) activations.
#include "bench_common.h"
#include "llmc/cuda/gelu.cuh"

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        bench::Shape s = bench::shape(argc, argv);
        const size_t n = s.N() * 4 * s.C;
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        llmc::bf16 *x = bench::alloc_bf16(n, 1, -4, 4), *y = bench::alloc_bf16(n, 2), *d = bench::alloc_bf16(n, 3);
        float ms = bench::time_ms([&](cudaStream_t q) { llmc::gelu_forward(y, x, n, q); }, st);
        bench::report(dev, "gelu_forward", ms, 2.0 * 2 * n, 0);
        ms = bench::time_ms([&](cudaStream_t q) { llmc::gelu_backward_inplace(d, x, n, q); }, st);
        bench::report(dev, "gelu_backward_inplace", ms, 2.0 * 3 * n, 0);
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
