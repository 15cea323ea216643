// The simulator's asynchronous streams (dev/cudasim/streams.cpp): CUDA's ordering rules hold under every scheduler
// seed, and each planted stream bug (a missing or misordered event wait, a non-blocking stream taken for a blocking
// one, a pinned buffer reused while its copy is pending, unordered copies or collectives) gives a wrong result in
// some seed or is reported.
#include <cuda_runtime.h>
#include <nccl.h>

#include "dev/cudasim/include/cudasim.h"
#include "test/fixtures/death_test.h"
#include "test/fixtures/testing.h"

#include <cstring>
#include <functional>
#include <string>
#include <vector>

using testing::aborts_with;
using testing::check;
using testing::runs_clean;

namespace {

constexpr int kN = 64;
constexpr int kSeeds = 16;  // scheduler seeds tried per scenario (1 .. kSeeds)

__global__ void fill(float* x, float v, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
__global__ void plus_one(const float* src, float* dst, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] + 1.0f;
}

float* device_floats(int n) {
    float* p = nullptr;
    cudaMalloc(&p, n * sizeof(float));
    return p;
}
std::vector<float> download(const float* d, int n) {
    std::vector<float> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
    return h;
}
bool all_equal(const std::vector<float>& v, float want) {
    for (float x : v)
        if (x != want) return false;
    return true;
}

// Runs `scenario(seed)` (which returns true when its result is right) under scheduler seeds 1 .. kSeeds; returns
// the seeds in which it was wrong.
std::string wrong_seeds(const std::function<bool(int)>& scenario) {
    std::string wrong;
    for (int seed = 1; seed <= kSeeds; seed++) {
        cudasim::set_stream_seed((uint64_t)seed);
        if (!scenario(seed)) wrong += (wrong.empty() ? "" : ",") + std::to_string(seed);
    }
    cudasim::set_stream_seed(1);
    return wrong;
}

// Producer on stream a writes x = seed, consumer on stream b computes y = x + 1. `order` decides how b is made to
// wait for a: 0 no wait, 1 record then wait (correct), 2 wait then record (misordered: the wait sees the event's
// previous record).
bool producer_consumer(int seed, cudaStream_t a, cudaStream_t b, int order) {
    float *x = device_floats(kN), *y = device_floats(kN);
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaEventRecord(e, a);  // an earlier record, complete long before the producer
    cudaStreamSynchronize(a);
    if (order == 2) cudaStreamWaitEvent(b, e, 0);
    cudasim::launch(fill, dim3(1), dim3(kN), 0, a, x, (float)seed, kN);
    cudaEventRecord(e, a);
    if (order == 1) cudaStreamWaitEvent(b, e, 0);
    cudasim::launch(plus_one, dim3(1), dim3(kN), 0, b, x, y, kN);
    cudaStreamSynchronize(b);
    const bool ok = all_equal(download(y, kN), (float)seed + 1.0f);
    cudaEventDestroy(e);
    cudaFree(x);
    cudaFree(y);
    return ok;
}

void test_event_waits() {
    cudaStream_t a, b;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    check("record, then cudaStreamWaitEvent: the consumer sees the producer's result under every seed",
          wrong_seeds([&](int seed) { return producer_consumer(seed, a, b, 1); }).empty());
    std::string w = wrong_seeds([&](int seed) { return producer_consumer(seed, a, b, 0); });
    check("planted bug, missing event wait: wrong in some seed", !w.empty());
    std::printf("  (missing wait: wrong in seeds %s of 1..%d)\n", w.c_str(), kSeeds);
    w = wrong_seeds([&](int seed) { return producer_consumer(seed, a, b, 2); });
    check("planted bug, cudaStreamWaitEvent before the cudaEventRecord it needs (waits for the previous record): "
          "wrong in some seed", !w.empty());
    std::printf("  (misordered wait: wrong in seeds %s of 1..%d)\n", w.c_str(), kSeeds);

    // An event that was never recorded is no wait at all (CUDA's rule): the consumer may run first.
    w = wrong_seeds([&](int seed) {
        float *x = device_floats(kN), *y = device_floats(kN);
        cudaEvent_t e;
        cudaEventCreate(&e);
        cudaStreamWaitEvent(b, e, 0);
        cudasim::launch(fill, dim3(1), dim3(kN), 0, a, x, (float)seed, kN);
        cudaEventRecord(e, a);
        cudasim::launch(plus_one, dim3(1), dim3(kN), 0, b, x, y, kN);
        cudaDeviceSynchronize();
        const bool ok = all_equal(download(y, kN), (float)seed + 1.0f);
        cudaEventDestroy(e);
        cudaFree(x);
        cudaFree(y);
        return ok;
    });
    check("a wait on a never-recorded event does not wait: wrong in some seed", !w.empty());

    cudaEvent_t never;
    cudaEventCreate(&never);
    check("cudaEventQuery / cudaEventSynchronize of a never-recorded event succeed",
          cudaEventQuery(never) == cudaSuccess && cudaEventSynchronize(never) == cudaSuccess);
    cudaEventDestroy(never);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
}

// The legacy default stream waits for the blocking streams and they wait for it; non-blocking streams do not.
void test_legacy_default_stream() {
    cudaStream_t blocking, nonblocking;
    cudaStreamCreate(&blocking);
    cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking);
    auto scenario = [&](cudaStream_t producer, cudaStream_t consumer) {
        return [=](int seed) {
            float *x = device_floats(kN), *y = device_floats(kN);
            cudasim::launch(fill, dim3(1), dim3(kN), 0, producer, x, (float)seed, kN);
            cudasim::launch(plus_one, dim3(1), dim3(kN), 0, consumer, x, y, kN);
            cudaDeviceSynchronize();
            const bool ok = all_equal(download(y, kN), (float)seed + 1.0f);
            cudaFree(x);
            cudaFree(y);
            return ok;
        };
    };
    check("legacy stream, then a blocking stream: ordered under every seed",
          wrong_seeds(scenario(nullptr, blocking)).empty());
    check("a blocking stream, then the legacy stream: ordered under every seed",
          wrong_seeds(scenario(blocking, nullptr)).empty());
    check("planted bug, legacy stream then a cudaStreamNonBlocking stream (not ordered): wrong in some seed",
          !wrong_seeds(scenario(nullptr, nonblocking)).empty());
    check("planted bug, a cudaStreamNonBlocking stream then the legacy stream (not ordered): wrong in some seed",
          !wrong_seeds(scenario(nonblocking, nullptr)).empty());
    // Synchronous cudaMemcpy runs on the legacy stream: it waits for a blocking stream's kernel, not a non-blocking one's.
    auto sync_copy = [&](cudaStream_t s) {
        return [=](int seed) {
            float* x = device_floats(kN);
            cudasim::launch(fill, dim3(1), dim3(kN), 0, s, x, (float)seed, kN);
            const bool ok = all_equal(download(x, kN), (float)seed);  // cudaMemcpy D2H
            cudaDeviceSynchronize();
            cudaFree(x);
            return ok;
        };
    };
    check("cudaMemcpy D2H waits for a blocking stream's kernel under every seed", wrong_seeds(sync_copy(blocking)).empty());
    check("planted bug, cudaMemcpy D2H after a kernel on a non-blocking stream: wrong in some seed",
          !wrong_seeds(sync_copy(nonblocking)).empty());
    cudaStreamDestroy(blocking);
    cudaStreamDestroy(nonblocking);
}

// Host memory: an async copy touches pinned memory when it runs; pageable sources are staged when it is enqueued.
void test_host_buffers() {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float* d = device_floats(kN);
    std::vector<float> pageable(kN, 1.0f);
    cudaMemcpyAsync(d, pageable.data(), kN * sizeof(float), cudaMemcpyHostToDevice, s);
    pageable.assign(kN, 2.0f);  // allowed: the pageable source was staged
    cudaStreamSynchronize(s);
    check("a pageable source may be reused as soon as cudaMemcpyAsync returns", all_equal(download(d, kN), 1.0f));

    float* pinned = nullptr;
    cudaMallocHost((void**)&pinned, kN * sizeof(float));
    for (int i = 0; i < kN; i++) pinned[i] = 3.0f;
    cudaMemcpyAsync(d, pinned, kN * sizeof(float), cudaMemcpyHostToDevice, s);
    const float first = pinned[0];  // reading a buffer a pending copy only reads is fine
    cudaStreamSynchronize(s);
    for (int i = 0; i < kN; i++) pinned[i] = 4.0f;  // after the synchronisation: fine
    check("a pinned source may be read while its copy is pending and rewritten after cudaStreamSynchronize",
          first == 3.0f && all_equal(download(d, kN), 3.0f));

    std::string err;
    check("planted bug, a pinned buffer rewritten while its cudaMemcpyAsync is pending: reported",
          aborts_with([&] {
              cudaMemcpyAsync(d, pinned, kN * sizeof(float), cudaMemcpyHostToDevice, s);
              pinned[5] = 5.0f;
          }, {"wrote pinned host memory", "cudaMemcpyAsync", "synchronise"}, err), "stderr: %s", err.c_str());
    check("planted bug, a download into pinned memory read before the stream is synchronised: reported",
          aborts_with([&] {
              cudaMemcpyAsync(pinned, d, kN * sizeof(float), cudaMemcpyDeviceToHost, s);
              volatile float v = pinned[0];
              (void)v;
          }, {"read pinned host memory", "cudaMemcpyAsync"}, err), "stderr: %s", err.c_str());
    // Two halves of one pinned buffer: filling one while the other's copy is pending is legal.
    check("writing one half of a pinned buffer while the other half's copy is pending is not reported",
          runs_clean([&] {
              cudaMemcpyAsync(d, pinned + kN / 2, (kN / 2) * sizeof(float), cudaMemcpyHostToDevice, s);
              pinned[0] = 6.0f;
              cudaStreamSynchronize(s);
          }, err), "stderr: %s", err.c_str());
    cudaFreeHost(pinned);
    cudaFree(d);
    cudaStreamDestroy(s);
}

// Copies, memsets and collectives have exact byte ranges: unordered overlapping ones are reported with both names.
void test_hazard_detector() {
    cudaStream_t a, b;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    float *x = device_floats(2 * kN), *y = device_floats(2 * kN);
    std::string err;
    check("planted bug, a cudaMemsetAsync and a cudaMemcpyAsync reading the same bytes on two unordered streams: "
          "reported with both operations",
          aborts_with([&] {
              cudaMemsetAsync(x, 0, kN * sizeof(float), a);
              cudaMemcpyAsync(y, x, kN * sizeof(float), cudaMemcpyDeviceToDevice, b);
          }, {"stream hazard", "cudaMemset", "cudaMemcpyAsync"}, err), "stderr: %s", err.c_str());
    check("the same two operations ordered by an event: not reported",
          runs_clean([&] {
              cudaEvent_t e;
              cudaEventCreate(&e);
              cudaMemsetAsync(x, 0, kN * sizeof(float), a);
              cudaEventRecord(e, a);
              cudaStreamWaitEvent(b, e, 0);
              cudaMemcpyAsync(y, x, kN * sizeof(float), cudaMemcpyDeviceToDevice, b);
              cudaDeviceSynchronize();
          }, err), "stderr: %s", err.c_str());
    check("disjoint halves of one allocation on two unordered streams (two gradient buckets): not reported",
          runs_clean([&] {
              cudaMemsetAsync(x, 0, kN * sizeof(float), a);
              cudaMemsetAsync(x + kN, 0, kN * sizeof(float), b);
              cudaDeviceSynchronize();
          }, err), "stderr: %s", err.c_str());
    check("after the host synchronised the first stream: not reported",
          runs_clean([&] {
              cudaMemsetAsync(x, 0, kN * sizeof(float), a);
              cudaStreamSynchronize(a);
              cudaMemsetAsync(x, 1, kN * sizeof(float), b);
              cudaDeviceSynchronize();
          }, err), "stderr: %s", err.c_str());
    // Two collectives of one communicator on two streams: NCCL does not order them.
    auto collectives = [&](bool ordered) {
        return [&, ordered] {
            ncclUniqueId id;
            ncclGetUniqueId(&id);
            ncclComm_t comm;
            ncclCommInitRank(&comm, 1, id, 0);
            ncclAllReduce(x, x, kN, ncclFloat32, ncclSum, comm, a);
            if (ordered) {
                cudaEvent_t e;
                cudaEventCreate(&e);
                cudaEventRecord(e, a);
                cudaStreamWaitEvent(b, e, 0);
            }
            ncclAllReduce(y, y, kN, ncclFloat32, ncclSum, comm, b);
            cudaDeviceSynchronize();
        };
    };
    check("planted bug, two collectives of one communicator on two unordered streams: reported",
          aborts_with(collectives(false), {"NCCL hazard", "ncclAllReduce"}, err), "stderr: %s", err.c_str());
    check("the same collectives ordered by an event: not reported", runs_clean(collectives(true), err),
          "stderr: %s", err.c_str());
    cudaFree(x);
    cudaFree(y);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
}

// Queries make progress, destroyed streams finish their work, cudaFree waits for the device.
void test_queries_and_lifetimes() {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *x = device_floats(kN), *y = device_floats(kN);
    cudasim::launch(fill, dim3(1), dim3(kN), 0, s, x, 7.0f, kN);
    cudasim::launch(plus_one, dim3(1), dim3(kN), 0, s, x, y, kN);
    const bool not_ready = cudaStreamQuery(s) == cudaErrorNotReady;
    int polls = 1;
    while (cudaStreamQuery(s) == cudaErrorNotReady && polls < 100) polls++;
    check("cudaStreamQuery: not ready while work is queued, ready after polling", not_ready && polls < 100,
          "polls %d", polls);
    check("the polled work ran", all_equal(download(y, kN), 8.0f));

    cudasim::launch(fill, dim3(1), dim3(kN), 0, s, y, 9.0f, kN);
    cudaStreamDestroy(s);  // the queued kernel still runs
    cudaDeviceSynchronize();
    check("work queued on a destroyed stream still runs", all_equal(download(y, kN), 9.0f));
    check("a destroyed stream's handle is invalid", cudaStreamSynchronize(s) == cudaErrorInvalidResourceHandle);
    cudaGetLastError();

    cudaStream_t t;
    cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
    cudasim::launch(plus_one, dim3(1), dim3(kN), 0, t, x, y, kN);
    cudaFree(x);  // waits for the kernel that reads x
    check("cudaFree waits for queued work that uses the buffer", all_equal(download(y, kN), 8.0f));
    cudaFree(y);
    cudaStreamDestroy(t);
}

}  // namespace

int main() {
    test_hazard_detector();  // death tests fork: before anything starts OpenMP threads
    test_host_buffers();
    test_event_waits();
    test_legacy_default_stream();
    test_queries_and_lifetimes();
    return testing::finish();
}
