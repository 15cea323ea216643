// Benchmark: what the host side of a one-GPU step used to cost (docs/cuda.md, "Host side of a step"), measured
// against what replaced it.
//
// 1. One-rank NCCL all-reduces. At world size 1 the trainer's Comm does nothing; before, an NCCL communicator of
//    one rank ran one in-place fp32 all-reduce ("average") per flat gradient range of GPT-2 124M, 148 per step
//    (12 layers x 12 tensors, then wte, wpe, lnfw, lnfb), each reading and rewriting its range. Timed with events
//    around the 148 calls on a stream of their own; bytes = 8 per gradient element.
// 2. The batch upload. The trainer's inputs and targets, 2 x B x T int32 (512 KiB at B = 64, T = 1024), are copied
//    while the stream is still busy with the previous step's work. From pageable memory `cudaMemcpyAsync` holds the
//    host until the stream reaches the copy; from pinned memory (the trainer's staging ring) it returns at once.
//    Measured: the host time of the two calls (and, pinned, of the copy into the staging buffer) behind a kernel that
//    keeps the stream busy for 2 ms.
#include <chrono>
#include <vector>

#include <nccl.h>

#include "bench_common.h"

namespace {

#define NCCL_OK(call)                                                                                                  \
    do {                                                                                                               \
        ncclResult_t r_ = (call);                                                                                      \
        if (r_ != ncclSuccess) throw llmc::Error(std::string("NCCL: ") + ncclGetErrorString(r_) + " in " #call);      \
    } while (0)

// GPT-2 124M's gradient ranges as the trainer reduces them: each layer's 12 tensors, then the 4 unstacked ones.
std::vector<size_t> gradient_ranges() {
    const size_t L = 12, C = 768, maxT = 1024, Vp = 50304;
    std::vector<size_t> r;
    for (size_t l = 0; l < L; l++)
        for (size_t n : {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C}) r.push_back(n);
    for (size_t n : {Vp * C, maxT * C, C, C}) r.push_back(n);
    return r;
}

__global__ void busy_kernel(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

// Host microseconds of uploading the two halves of `host` behind `busy_cycles` of work on the stream; with `staging`
// (pinned), the halves are first copied into it, as the trainer's staging ring does.
double host_us_of_upload(int* dev, const int* host, int* staging, size_t bytes, cudaStream_t stream,
                         long long busy_cycles) {
    LLMC_LAUNCH(busy_kernel, 1, 1, 0, stream, busy_cycles);
    const auto t0 = std::chrono::steady_clock::now();
    if (staging) host = static_cast<const int*>(std::memcpy(staging, host, 2 * bytes));
    CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(dev + bytes / sizeof(int), host + bytes / sizeof(int), bytes, cudaMemcpyHostToDevice,
                               stream));
    const auto t1 = std::chrono::steady_clock::now();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

void bench_one_rank_allreduce(const bench::Device& dev, cudaStream_t stream) {
    const std::vector<size_t> ranges = gradient_ranges();
    size_t n = 0;
    for (size_t r : ranges) n += r;
    float* grads = bench::alloc_f32(n, 1);
    ncclUniqueId id;
    ncclComm_t comm;
    NCCL_OK(ncclGetUniqueId(&id));
    NCCL_OK(ncclCommInitRank(&comm, 1, id, 0));
    const float ms = bench::time_ms([&](cudaStream_t q) {
        size_t offset = 0;
        for (size_t r : ranges) {
            NCCL_OK(ncclAllReduce(grads + offset, grads + offset, r, ncclFloat32, ncclAvg, comm, q));
            offset += r;
        }
    }, stream, 10);
    bench::report(dev, "one-rank NCCL: " + std::to_string(ranges.size()) + " all-reduces (before)", ms, 8.0 * n, 0);
    std::printf("# now: no collective at world size 1 (the single-process Comm), so none of this time\n");
    NCCL_OK(ncclCommDestroy(comm));
    CUDA_CHECK(cudaFree(grads));
}

void bench_upload(cudaStream_t stream) {
    const size_t B = 64, T = 1024, bytes = B * T * sizeof(int);
    int clock_khz = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    const long long busy = 2LL * clock_khz;  // 2 ms of the SM clock
    int* dev = nullptr;
    int* pinned = nullptr;
    CUDA_CHECK(cudaMalloc(&dev, 2 * bytes));
    CUDA_CHECK(cudaMallocHost(&pinned, 2 * bytes));
    std::vector<int> pageable(2 * bytes / sizeof(int), 7);
    for (int pass = 0; pass < 2; pass++) {  // the first pass warms up
        const double us_pageable = host_us_of_upload(dev, pageable.data(), nullptr, bytes, stream, busy);
        const double us_pinned = host_us_of_upload(dev, pageable.data(), pinned, bytes, stream, busy);
        if (pass == 0) continue;
        const char* line = "%-48s %9.3f ms  (host blocked, stream busy for 2 ms)\n";
        std::printf(line, "batch upload from pageable memory (before)", us_pageable * 1e-3);
        std::printf(line, "batch upload through pinned memory (now)", us_pinned * 1e-3);
    }
    CUDA_CHECK(cudaFreeHost(pinned));
    CUDA_CHECK(cudaFree(dev));
}

}  // namespace

int main() {
    try {
        bench::Device dev = bench::device();
        cudaStream_t stream;
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        bench_one_rank_allreduce(dev, stream);
        bench_upload(stream);
        CUDA_CHECK(cudaStreamDestroy(stream));
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
