// Shared helpers of the kernel benchmarks (dev/cuda/*.cu, built by `make cuda-bench` into build/cuda-bench/, nvcc
// only; they need a GPU). Each benchmark includes the kernel family's .cuh directly, fills its inputs with
// deterministic pseudo-random values, times the host launcher with cudaEvents and prints time per call and the
// achieved rate against the device's peak (bandwidth for memory-bound kernels, bf16 tensor FLOP/s for matmuls).
//
// Memory-bound lines: "bytes" is the traffic the kernel cannot avoid (every input read once, every output written
// once; docs/cuda.md lists it per kernel), so GB/s = bytes / time and "% of peak" compares with the device's peak
// bandwidth, read from the device: 2 (double data rate) x memory clock x bus width (cudaDevAttrMemoryClockRate and
// cudaDevAttrGlobalMemoryBusWidth: CUDA 13 removed cudaDeviceProp::memoryClockRate but keeps these attributes). The
// line also prints the time the bytes would take at that peak. Shapes: GPT-2 124M at B = 64, T = 1024 by default.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/cuda_check.h"
#include "llmc/cuda/device_info.h"

namespace bench {

using llmc::bf16;

struct Device {
    char name[256];
    int sms, cc_major, cc_minor;
    double peak_flops, peak_bandwidth;
};

inline Device device() {
    Device d;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::snprintf(d.name, sizeof d.name, "%s", prop.name);
    int clock = 0, mem_clock = 0, bus = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, 0));
    CUDA_CHECK(cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, 0));
    CUDA_CHECK(cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, 0));
    // Optional attributes: a driver that does not report one leaves the corresponding peak at 0 ("peak unknown").
    if (cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, 0) != cudaSuccess) clock = 0;
    if (cudaDeviceGetAttribute(&mem_clock, cudaDevAttrMemoryClockRate, 0) != cudaSuccess) mem_clock = 0;
    if (cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, 0) != cudaSuccess) bus = 0;
    cudaGetLastError();
    d.peak_flops = llmc::cuda_peak_bf16_flops(d.sms, d.cc_major, d.cc_minor, clock);
    d.peak_bandwidth = llmc::cuda_peak_bandwidth(mem_clock, bus);
    std::printf("# %s: %d SMs, sm_%d%d, clock %.2f GHz, peak bf16 %.1f TFLOP/s; memory clock %.0f MHz x %d bits: "
                "peak bandwidth %.0f GB/s\n", d.name, d.sms, d.cc_major, d.cc_minor, clock * 1e-6, d.peak_flops * 1e-12,
                mem_clock * 1e-3, bus, d.peak_bandwidth * 1e-9);
    return d;
}

// Deterministic pseudo-random fill in [lo, hi).
__global__ void fill_kernel(bf16* p, size_t n, uint32_t seed, float lo, float hi) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = __float2bfloat16_rn(lo + (hi - lo) * (llmc::hash_index(seed, i) >> 8) * (1.0f / 16777216.0f));
}
__global__ void fill_kernel_f32(float* p, size_t n, uint32_t seed, float lo, float hi) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = lo + (hi - lo) * (llmc::hash_index(seed, i) >> 8) * (1.0f / 16777216.0f);
}
__global__ void fill_tokens_kernel(int* p, size_t n, uint32_t seed, int vocab) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = (int)(llmc::hash_index(seed, i) % (uint32_t)vocab);
}

inline bf16* alloc_bf16(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    bf16* p;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(bf16)));
    LLMC_LAUNCH(fill_kernel, llmc::grid_size(n, 256), 256, 0, (cudaStream_t)0, p, n, seed, lo, hi);
    return p;
}
inline float* alloc_f32(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    float* p;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)));
    LLMC_LAUNCH(fill_kernel_f32, llmc::grid_size(n, 256), 256, 0, (cudaStream_t)0, p, n, seed, lo, hi);
    return p;
}
inline int* alloc_tokens(size_t n, uint32_t seed, int vocab) {
    int* p;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(int)));
    LLMC_LAUNCH(fill_tokens_kernel, llmc::grid_size(n, 256), 256, 0, (cudaStream_t)0, p, n, seed, vocab);
    return p;
}

// Mean milliseconds per call of fn(stream) over `iters` calls after 3 warm-up calls.
template <class F>
float time_ms(F fn, cudaStream_t stream, int iters = 20) {
    for (int i = 0; i < 3; i++) fn(stream);
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    CUDA_CHECK(cudaEventRecord(a, stream));
    for (int i = 0; i < iters; i++) fn(stream);
    CUDA_CHECK(cudaEventRecord(b, stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    return ms / iters;
}

// One result line: bytes moved (0: not reported) and FLOPs (0: not reported) per call.
inline void report(const Device& d, const std::string& what, float ms, double bytes, double flops) {
    std::printf("%-48s %9.3f ms", what.c_str(), ms);
    if (bytes > 0) {
        const double bw = bytes / (ms * 1e-3);
        std::printf("  %8.1f MB  %8.1f GB/s", bytes * 1e-6, bw * 1e-9);
        if (d.peak_bandwidth > 0)
            std::printf(" (%5.1f%% of peak; %.3f ms at peak)", 100.0 * bw / d.peak_bandwidth,
                        1e3 * bytes / d.peak_bandwidth);
        else
            std::printf(" (peak bandwidth unknown)");
    }
    if (flops > 0) {
        double f = flops / (ms * 1e-3);
        std::printf("  %7.1f TFLOP/s (%5.1f%% of peak)", f * 1e-12, d.peak_flops > 0 ? 100.0 * f / d.peak_flops : 0.0);
    }
    std::printf("\n");
    std::fflush(stdout);
}

// GPT-2 124M training shapes at B = 64, T = 1024 by default; `B` can be given as the first argument.
struct Shape {
    size_t B = 64, T = 1024, C = 768, NH = 12, V = 50257, Vp = 50304;
    size_t N() const { return B * T; }
};
inline Shape shape(int argc, char** argv) {
    Shape s;
    if (argc > 1) s.B = (size_t)std::strtoul(argv[1], nullptr, 10);
    std::printf("# B=%zu T=%zu C=%zu NH=%zu Vp=%zu\n", s.B, s.T, s.C, s.NH, s.Vp);
    return s;
}

}  // namespace bench
