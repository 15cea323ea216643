// Benchmark: the fp32 reductions and element-wise helpers (llmc/cuda/reduce.cuh) over a 124M-element buffer.
#include "bench_common.h"
#include "llmc/cuda/reduce.cuh"

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        const size_t n = 124475904;
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        float *x = bench::alloc_f32(n, 1), *y = bench::alloc_f32(n, 2), *acc = bench::alloc_f32(1, 3);
        float* partials = bench::alloc_f32(llmc::kMaxReducePartials, 4);
        llmc::bf16* h = bench::alloc_bf16(n, 5);
        float ms = bench::time_ms([&](cudaStream_t q) { llmc::reduce_into<true>(acc, x, n, 1.0f, partials, q); }, st);
        bench::report(dev, "norm_squared_into", ms, 4.0 * n, 0);
        ms = bench::time_ms([&](cudaStream_t q) { llmc::add_into(y, x, n, q); }, st);
        bench::report(dev, "add_into", ms, 12.0 * n, 0);
        ms = bench::time_ms([&](cudaStream_t q) { llmc::reduce_into<false>(acc, x, n, 1.0f, partials, q); }, st);
        bench::report(dev, "sum_into", ms, 4.0 * n, 0);
        ms = bench::time_ms([&](cudaStream_t q) { llmc::floats_to_bf16(h, x, n, q); }, st);
        bench::report(dev, "floats_to_bf16", ms, 6.0 * n, 0);
        ms = bench::time_ms([&](cudaStream_t q) { llmc::bf16_to_floats(y, h, n, q); }, st);
        bench::report(dev, "bf16_to_floats", ms, 6.0 * n, 0);
        // The column sums of the layernorm / bias gradients: G = 1024 partial rows of C = 768 (layernorm at B = 64)
        // and of OC = 3072 (fc's bias). Two stages (32-row segments, then their sums) against the one-stage kernel
        // they replaced (one block of 32 x 4 columns looping over all G rows: 6 blocks at C = 768).
        const size_t G = 1024;
        for (size_t C : {(size_t)768, (size_t)3072}) {
            const std::string shape = " (1024 x " + std::to_string(C) + ")";
            ms = bench::time_ms([&](cudaStream_t q) { llmc::column_sums_into(y, x, G, C, q); }, st);
            bench::report(dev, ("column_sums_into, two stages" + shape).c_str(), ms, 4.0 * G * C + 8.0 * C, 0);
            ms = bench::time_ms([&](cudaStream_t q) {
                LLMC_LAUNCH(llmc::column_sums_into_kernel<llmc::kPackF32>, llmc::grid_size(C, 32 * llmc::kPackF32),
                            32 * llmc::kColumnSumWarps, 0, q, y, (const float*)x, G, C, (size_t)1);
            }, st);
            bench::report(dev, ("column_sums_into, one stage (before)" + shape).c_str(), ms, 4.0 * G * C + 8.0 * C, 0);
        }
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
