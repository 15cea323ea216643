// Benchmark: layernorm forward, fused residual + layernorm forward, layernorm backward (llmc/cuda/layernorm.cuh).
// Bytes: forward reads x and writes out (2 N C each) plus mean / rstd (8 N); the fused one reads two inputs and writes
// the residual and out; the backward reads dout, x, dinp and writes dinp (8 N C), reads mean / rstd, and writes and
// reads its per-block partial sums (2 x 2 G C floats).
#include "bench_common.h"
#include "llmc/cuda/layernorm.cuh"

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        bench::Shape s = bench::shape(argc, argv);
        const size_t N = s.N(), C = s.C;
        const llmc::DeviceLimits limits = llmc::read_device_limits(0);
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        llmc::bf16 *x = bench::alloc_bf16(N * C, 1), *x2 = bench::alloc_bf16(N * C, 2), *out = bench::alloc_bf16(N * C, 3);
        llmc::bf16 *res = bench::alloc_bf16(N * C, 4), *w = bench::alloc_bf16(C, 5), *b = bench::alloc_bf16(C, 6);
        llmc::bf16 *dout = bench::alloc_bf16(N * C, 7), *dinp = bench::alloc_bf16(N * C, 8);
        float *mean = bench::alloc_f32(N, 9), *rstd = bench::alloc_f32(N, 10, 0.5f, 2.0f);
        float *dw = bench::alloc_f32(C, 11), *db = bench::alloc_f32(C, 12);
        float* partials = bench::alloc_f32(llmc::layernorm_backward_scratch_floats(N, C), 13);
        float ms = bench::time_ms([&](cudaStream_t q) { llmc::layernorm_forward(out, mean, rstd, x, w, b, N, C, q); }, st);
        bench::report(dev, "layernorm_forward", ms, 2.0 * 2 * N * C + 8.0 * N, 0);
        ms = bench::time_ms([&](cudaStream_t q) {
            llmc::fused_residual_layernorm_forward(res, out, mean, rstd, x, x2, w, b, N, C, q);
        }, st);
        bench::report(dev, "fused_residual_layernorm_forward", ms, 2.0 * 4 * N * C + 8.0 * N, 0);
        ms = bench::time_ms([&](cudaStream_t q) {
            llmc::layernorm_backward(dinp, dw, db, partials, dout, x, w, mean, rstd, N, C, limits, q);
        }, st);
        const double partial_bytes = 2.0 * 4 * llmc::layernorm_backward_scratch_floats(N, C);
        std::printf("# layernorm_backward: %zu warps per block (device allows %zu bytes of shared memory per block)\n",
                    llmc::layernorm_backward_warps(C, limits), limits.smem_per_block);
        bench::report(dev, "layernorm_backward", ms, 2.0 * 4 * N * C + 8.0 * N + partial_bytes, 0);
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
