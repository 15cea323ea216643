// Benchmark: the fused classifier (llmc/cuda/classifier.cuh): N rows of Vp bf16 logits, read once (the row stays in
// registers) and, with dlogits, written once; plus the targets and losses (8 N). Both kernels in the same run: one
// block per row ("rows", the kernel before the prefetch) and the persistent blocks that prefetch the next row into
// shared memory ("prefetch", what the backend runs when its buffer fits the device). First they are checked to give
// the same bits on every row (losses and dlogits; exit status 1 otherwise), since nvcc compiles them separately.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "llmc/cuda/classifier.cuh"

namespace {

// Counts the 16-bit words where a and b differ.
__global__ void count_differences_kernel(const uint16_t* a, const uint16_t* b, size_t n, unsigned long long* count) {
    unsigned long long local = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        local += a[i] != b[i];
    if (local) atomicAdd(count, local);
}

unsigned long long count_differences(const void* a, const void* b, size_t bytes) {
    unsigned long long* d;
    CUDA_CHECK(cudaMalloc(&d, sizeof *d));
    CUDA_CHECK(cudaMemset(d, 0, sizeof *d));
    LLMC_LAUNCH(count_differences_kernel, 1024, 256, 0, (cudaStream_t)0, (const uint16_t*)a, (const uint16_t*)b,
                bytes / 2, d);
    unsigned long long h = 0;
    CUDA_CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(d));
    return h;
}

}  // namespace

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
        const llmc::DeviceLimits limits = llmc::read_device_limits(0);
        const llmc::ClassifierLaunch chosen = llmc::classifier_launch(N, s.Vp, logits, limits, dev.sms);
        llmc::ClassifierLaunch rows = chosen;
        rows.prefetch = false;
        rows.grid = N;
        rows.smem = 0;
        std::printf("# prefetch kernel: %s (grid %zu, block %zu, %zu bytes of shared memory; %zu per block allowed)\n",
                    chosen.prefetch ? "chosen" : "does not fit this device", chosen.grid, chosen.block, chosen.smem,
                    limits.smem_per_block);
        std::vector<std::pair<std::string, llmc::ClassifierLaunch>> kernels = {{"rows", rows}};
        if (chosen.prefetch) kernels.push_back({"prefetch", chosen});

        // Same bits: both kernels on copies of the same logits.
        if (chosen.prefetch) {
            const size_t bytes = N * s.Vp * sizeof(llmc::bf16);
            llmc::bf16* copy;
            float* losses2;
            CUDA_CHECK(cudaMalloc(&copy, bytes));
            CUDA_CHECK(cudaMalloc(&losses2, N * sizeof(float)));
            CUDA_CHECK(cudaMemcpy(copy, logits, bytes, cudaMemcpyDeviceToDevice));
            llmc::fused_classifier(logits, losses, targets, 1.0f / N, N, s.V, s.Vp, true, rows, st);
            llmc::fused_classifier(copy, losses2, targets, 1.0f / N, N, s.V, s.Vp, true, chosen, st);
            CUDA_CHECK(cudaStreamSynchronize(st));
            const unsigned long long dl = count_differences(logits, copy, bytes),
                                     dn = count_differences(losses, losses2, N * sizeof(float));
            std::printf("# check prefetch vs rows: %llu of %zu dlogits and %llu of %zu losses (16-bit halves) differ: "
                        "%s\n", dl, N * s.Vp, dn, 2 * N, dl + dn == 0 ? "ok" : "FAILED");
            CUDA_CHECK(cudaFree(copy));
            CUDA_CHECK(cudaFree(losses2));
            if (dl + dn != 0) return 1;
        }

        const double bytes_dl = 2.0 * 2 * N * s.Vp + 8.0 * N, bytes_loss = 2.0 * N * s.Vp + 8.0 * N;
        for (const auto& kernel : kernels) {
            const std::string& name = kernel.first;
            const llmc::ClassifierLaunch& L = kernel.second;
            float ms = bench::time_ms([&](cudaStream_t q) {
                llmc::fused_classifier(logits, losses, targets, 1.0f / N, N, s.V, s.Vp, true, L, q);
            }, st);
            bench::report(dev, "fused_classifier " + name + " (with dlogits)", ms, bytes_dl, 0);
            ms = bench::time_ms([&](cudaStream_t q) {
                llmc::fused_classifier(logits, losses, targets, 1.0f / N, N, s.V, s.Vp, false, L, q);
            }, st);
            bench::report(dev, "fused_classifier " + name + " (loss only)", ms, bytes_loss, 0);
            // As the model runs it: chunks of 4096 rows (llmc/model.h), one launch each; each launch ends with a
            // partial round of rows, which the one launch over N rows has once.
            const size_t chunk = 4096;
            ms = bench::time_ms([&](cudaStream_t q) {
                for (size_t r = 0; r < N; r += chunk) {
                    const size_t n = N - r < chunk ? N - r : chunk;
                    llmc::ClassifierLaunch Lc = L;
                    Lc.grid = L.prefetch ? std::min(L.grid, n) : n;
                    llmc::fused_classifier(logits + r * s.Vp, losses + r, targets + r, 1.0f / N, n, s.V, s.Vp, true,
                                           Lc, q);
                }
            }, st);
            bench::report(dev, "fused_classifier " + name + " (with dlogits), in chunks of 4096 rows", ms, bytes_dl,
                          0);
        }
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
