// Tests of the CUDA simulator itself (dev/cudasim): fibers, barriers, thread orders, warp shuffles, shared memory,
// atomics, the runtime API and the cuBLASLt GEMM. The kernels here are written for the test.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "dev/cudasim/include/cudasim.h"
#include "test/fixtures/death_test.h"
#include "test/fixtures/testing.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using testing::check;
using testing::aborts_with;
using testing::check_close;

// ---- kernels ---------------------------------------------------------------------------------------------------
// Tree sum of one block's 256 inputs in static shared memory.
__global__ void block_sum(const float* x, float* out) {
    __shared__ float s[256];
    const int t = threadIdx.x;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
// The same without the barrier between the loads and the tree: a race.
__global__ void block_sum_no_first_barrier(const float* x, float* out) {
    __shared__ float s[256];
    const int t = threadIdx.x;
    s[t] = x[blockIdx.x * blockDim.x + t];
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
// The same without the barrier inside the tree loop.
__global__ void block_sum_no_loop_barrier(const float* x, float* out) {
    __shared__ float s[256];
    const int t = threadIdx.x;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
    }
    __syncthreads();
    if (t == 0) out[blockIdx.x] = s[0];
}

// The block reduction of llmc/cuda/common.cuh (block_sum): warp sums, per-warp partials through `scratch`, a warp
// sum of the partials; every thread returns the block's sum. The first barrier guards against a write-after-read
// race: without it, a fast warp writes this call's partial over a slot that a slower warp is still to read in the
// previous call on the same scratch array.
template <bool kWarBarrier>
__device__ float scratch_block_sum(float v, float* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (kWarBarrier) __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < num_warps ? scratch[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
// Two consecutive block sums over one scratch array; every thread stores both results.
template <bool kWarBarrier>
__global__ void two_block_sums(const float* x, const float* y, float* out) {
    __shared__ float scratch[32];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float a = scratch_block_sum<kWarBarrier>(x[i], scratch);
    const float b = scratch_block_sum<kWarBarrier>(y[i], scratch);
    out[2 * i] = a;
    out[2 * i + 1] = b;
}
// Two values broadcast through one shared slot, the first by thread 0, the second by the last thread. Without the
// barrier between reading the first and writing the second, a warp that reads late sees the second value. Here the
// writer is the last warp and the readers include warp 0: only last-warp-first warp-serial order exposes it.
template <bool kWarBarrier>
__global__ void two_broadcasts(const float* x, float* out) {
    __shared__ float slot;
    const int t = threadIdx.x, last = blockDim.x - 1;
    if (t == 0) slot = x[0];
    __syncthreads();
    const float a = __shfl_sync(0xffffffffu, slot, 0);  // a warp collective (a yield point) after the read
    if (kWarBarrier) __syncthreads();
    if (t == last) slot = x[1];
    __syncthreads();
    out[2 * t] = a;
    out[2 * t + 1] = slot;
}

// Warp sums with xor and down shuffles, then a block sum of the warp sums (two warp levels, one barrier).
__global__ void warp_block_sum(const float* x, float* warp_out, float* block_out) {
    __shared__ float warp_sums[32];
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const float v = x[blockIdx.x * blockDim.x + t];
    float a = v, b = v;
    for (int off = 16; off > 0; off >>= 1) a += __shfl_xor_sync(0xffffffffu, a, off);
    for (int off = 16; off > 0; off >>= 1) b += __shfl_down_sync(0xffffffffu, b, off);
    if (lane == 0) warp_out[(blockIdx.x * blockDim.x + t) / 32] = b;
    if (a != __shfl_sync(0xffffffffu, a, 0)) warp_out[0] = NAN;  // every lane of the xor butterfly holds the sum
    if (lane == 0) warp_sums[warp] = a;
    __syncthreads();
    if (warp == 0) {
        float s = lane < (int)(blockDim.x / 32) ? warp_sums[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) block_out[blockIdx.x] = s;
    }
}

// Each lane records what the shuffles with segment width `width` return; value of lane l is 100 + l.
__global__ void shuffle_semantics(int width, int* out) {
    const int lane = threadIdx.x;
    const int v = 100 + lane;
    out[0 * 32 + lane] = __shfl_sync(0xffffffffu, v, 3, width);
    out[1 * 32 + lane] = __shfl_up_sync(0xffffffffu, v, 2, width);
    out[2 * 32 + lane] = __shfl_down_sync(0xffffffffu, v, 2, width);
    out[3 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 5, width);
    out[4 * 32 + lane] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    out[5 * 32 + lane] = __all_sync(0xffffffffu, lane < 32) + 2 * __any_sync(0xffffffffu, lane == 7);
}

// Records the built-in indices of a 3-D launch, and lane 0's linear id within each warp.
__global__ void indices(unsigned* out) {
    const unsigned linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const unsigned nthreads = blockDim.x * blockDim.y * blockDim.z;
    unsigned* o = out + 8 * (block * nthreads + linear);
    o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
    o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
    o[6] = __shfl_sync(0xffffffffu, linear, 0);
    o[7] = (unsigned)warpSize;
}

namespace llmc {
// Dynamic shared memory as the llmc kernels declare it: rotate a block's values through shared memory.
__global__ void rotate_dynamic(const float* x, float* out, int per_thread) {
    extern __shared__ float smem[];
    const int t = threadIdx.x, n = blockDim.x * per_thread;
    for (int i = 0; i < per_thread; i++) smem[t * per_thread + i] = x[t * per_thread + i];
    __syncthreads();
    for (int i = 0; i < per_thread; i++) out[t * per_thread + i] = smem[(t * per_thread + i + 1) % n];
}
}  // namespace llmc
// Global-namespace dynamic shared memory of another element type; reads shared memory nobody wrote.
__global__ void read_unwritten_dynamic(int* out) {
    extern __shared__ int shared[];
    out[threadIdx.x] = shared[threadIdx.x];
}
// Same data flow as rotate_dynamic with the barrier missing.
__global__ void rotate_dynamic_racy(const float* x, float* out) {
    extern __shared__ float smem[];
    const int t = threadIdx.x;
    smem[t] = x[t];
    out[t] = smem[(t + 1) % blockDim.x];
}

__global__ void atomics(float* fsum, int* isum, int* imax, unsigned* ucas_max, unsigned* count_out) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(fsum, 0.5f);
    atomicAdd(isum, g);
    atomicMax(imax, (g * 37) % 1001);
    unsigned old = *ucas_max, want = (unsigned)((g * 53) % 997);
    while (want > old) {  // max through a CAS loop
        const unsigned seen = atomicCAS(ucas_max, old, want);
        if (seen == old) break;
        old = seen;
    }
    const int c = __syncthreads_count(threadIdx.x % 4 == 0);
    if (threadIdx.x == 0) count_out[blockIdx.x] = (unsigned)c;
}

// Divergent barrier: the first 16 threads return, the rest wait at __syncthreads forever.
__global__ void divergent_barrier(float* out) {
    if (threadIdx.x < 16) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}
// A shuffle whose partner lane has exited.
__global__ void shuffle_after_exit(float* out) {
    if (threadIdx.x == 5) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}
__global__ void big_dynamic(float* out) {
    extern __shared__ float smem[];
    smem[threadIdx.x] = 1.0f;
    out[threadIdx.x] = smem[threadIdx.x];
}

// ---- helpers ---------------------------------------------------------------------------------------------------
template <class T>
T* to_device(const std::vector<T>& h) {
    T* d = nullptr;
    cudaMalloc(&d, h.size() * sizeof(T));
    cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return d;
}
template <class T>
std::vector<T> to_host(const T* d, size_t n) {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
}

std::vector<float> random_floats(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
}

// ---- tests -----------------------------------------------------------------------------------------------------
void test_reductions_and_missing_barriers() {
    const int blocks = 3, n = 256;
    // Integers in [0, 8): every partial sum is exact in fp32, so a correct reduction is bit-exact in any order.
    std::vector<float> hx(blocks * n);
    for (size_t i = 0; i < hx.size(); i++) hx[i] = (float)((i * 7 + 3) % 8);
    std::vector<float> want(blocks, 0.0f);
    for (int b = 0; b < blocks; b++)
        for (int i = 0; i < n; i++) want[b] += hx[b * n + i];
    float* x = to_device(hx);
    float* out;
    cudaMalloc(&out, blocks * sizeof(float));

    using Kernel = void (*)(const float*, float*);
    auto wrong_orders = [&](Kernel k, const char* name, bool expect_correct) {
        std::string wrong;
        cudasim::for_each_order([&](cudasim::Order o) {
            cudaMemset(out, 0, blocks * sizeof(float));
            cudasim::launch_named(name, k, dim3(blocks), dim3(n), 0, nullptr, x, out);
            auto got = to_host(out, blocks);
            if (got != want) wrong += std::string(wrong.empty() ? "" : ",") + cudasim::order_name(o);
        });
        if (expect_correct) check(std::string("reduction correct in all orders: ") + name, wrong.empty(), "wrong in %s", wrong.c_str());
        else check(std::string("missing barrier detected: ") + name, !wrong.empty(), "right answer in all orders");
        if (!expect_correct && !wrong.empty()) std::printf("  (%s: wrong in %s)\n", name, wrong.c_str());
    };
    wrong_orders(block_sum, "block_sum", true);
    wrong_orders(block_sum_no_first_barrier, "block_sum_no_first_barrier", false);
    wrong_orders(block_sum_no_loop_barrier, "block_sum_no_loop_barrier", false);

    // Several shuffled seeds give the right answer too (the correct kernel never depends on the schedule).
    bool ok = true;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        cudasim::set_thread_order(cudasim::Order::Shuffled, seed);
        cudasim::launch(block_sum, dim3(blocks), dim3(n), 0, nullptr, x, out);
        ok = ok && to_host(out, blocks) == want;
    }
    cudasim::set_thread_order(cudasim::Order::Forward);
    check("reduction correct under 5 shuffled seeds", ok);
    cudaFree(x);
    cudaFree(out);
}

// Runs `launch` under every order; returns the names of the orders in which `got()` differs from `want`.
std::string wrong_orders(const std::function<void()>& launch, const std::function<std::vector<float>()>& got,
                         const std::vector<float>& want) {
    std::string wrong;
    cudasim::for_each_order([&](cudasim::Order o) {
        launch();
        if (got() != want) wrong += std::string(wrong.empty() ? "" : ",") + cudasim::order_name(o);
    });
    return wrong;
}

// Missing write-after-read barriers between two uses of one shared array: no round-by-round order catches them, as
// every thread reads before any thread passes its next yield point; the warp-serial orders let one warp run ahead.
void test_write_after_read_barriers() {
    const int blocks = 3, n = 128;  // 4 warps per block
    std::vector<float> hx(blocks * n), hy(blocks * n);
    for (size_t i = 0; i < hx.size(); i++) {
        hx[i] = (float)((i * 7 + 3) % 8);  // small integers: the sums are exact in fp32 in any order
        hy[i] = (float)((i * 5 + 1) % 16) + 100.0f;
    }
    std::vector<float> want(2 * blocks * n);
    for (int b = 0; b < blocks; b++) {
        float sx = 0, sy = 0;
        for (int t = 0; t < n; t++) { sx += hx[b * n + t]; sy += hy[b * n + t]; }
        for (int t = 0; t < n; t++) { want[2 * (b * n + t)] = sx; want[2 * (b * n + t) + 1] = sy; }
    }
    float *x = to_device(hx), *y = to_device(hy), *out;
    cudaMalloc(&out, want.size() * sizeof(float));
    auto got = [&] { return to_host(out, want.size()); };
    const std::string good = wrong_orders(
        [&] { cudasim::launch_named("two_block_sums", two_block_sums<true>, dim3(blocks), dim3(n), 0, nullptr, x, y, out); },
        got, want);
    check("two block sums over one scratch array: correct in all orders", good.empty(), "wrong in %s", good.c_str());
    const std::string bad = wrong_orders(
        [&] { cudasim::launch_named("two_block_sums_no_war", two_block_sums<false>, dim3(blocks), dim3(n), 0, nullptr, x, y, out); },
        got, want);
    std::printf("  (two block sums without the write-after-read barrier: wrong in %s)\n", bad.empty() ? "none" : bad.c_str());
    const auto has = [](const std::string& list, const std::string& o) { return ("," + list + ",").find("," + o + ",") != std::string::npos; };
    check("missing write-after-read barrier in block_sum detected under warp-serial", has(bad, "warp-serial"));
    check("missing write-after-read barrier in block_sum detected under warp-serial-reverse", has(bad, "warp-serial-reverse"));

    std::vector<float> hb = {3.0f, 5.0f}, want_b(2 * n);
    for (int t = 0; t < n; t++) { want_b[2 * t] = 3.0f; want_b[2 * t + 1] = 5.0f; }
    float* xb = to_device(hb);
    auto got_b = [&] { return to_host(out, want_b.size()); };
    const std::string good_b = wrong_orders(
        [&] { cudasim::launch(two_broadcasts<true>, dim3(1), dim3(n), 0, nullptr, xb, out); }, got_b, want_b);
    check("two broadcasts through one shared slot: correct in all orders", good_b.empty(), "wrong in %s", good_b.c_str());
    const std::string bad_b = wrong_orders(
        [&] { cudasim::launch(two_broadcasts<false>, dim3(1), dim3(n), 0, nullptr, xb, out); }, got_b, want_b);
    std::printf("  (two broadcasts without the write-after-read barrier: wrong in %s)\n", bad_b.empty() ? "none" : bad_b.c_str());
    check("missing write-after-read barrier (late reader in a lower warp) detected under warp-serial-reverse",
          has(bad_b, "warp-serial-reverse"));
    cudaFree(x);
    cudaFree(y);
    cudaFree(xb);
    cudaFree(out);
}

void test_warp_shuffles() {
    const int blocks = 2, n = 128;
    std::vector<float> hx(blocks * n);
    for (size_t i = 0; i < hx.size(); i++) hx[i] = (float)((i * 5 + 1) % 16);  // exact sums, as above
    std::vector<float> want_warp(blocks * n / 32, 0.0f), want_block(blocks, 0.0f);
    for (size_t i = 0; i < hx.size(); i++) { want_warp[i / 32] += hx[i]; want_block[i / n] += hx[i]; }
    float* x = to_device(hx);
    float *wout, *bout;
    cudaMalloc(&wout, want_warp.size() * sizeof(float));
    cudaMalloc(&bout, blocks * sizeof(float));
    cudasim::for_each_order([&](cudasim::Order o) {
        cudasim::launch(warp_block_sum, dim3(blocks), dim3(n), 0, nullptr, x, wout, bout);
        std::string tag = std::string(" (") + cudasim::order_name(o) + ")";
        check("warp shuffle sums" + tag, to_host(wout, want_warp.size()) == want_warp);
        check("warp-then-block sums" + tag, to_host(bout, blocks) == want_block);
    });

    int* out;
    cudaMalloc(&out, 6 * 32 * sizeof(int));
    for (int width : {32, 8}) {
        cudasim::launch(shuffle_semantics, dim3(1), dim3(32), 0, nullptr, width, out);
        auto got = to_host(out, 6 * 32);
        int bad = 0;
        unsigned ballot = 0;
        for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
        for (int l = 0; l < 32; l++) {
            const int seg = l / width * width, in_seg = l % width;
            const int want[6] = {
                100 + seg + 3 % width,                                            // __shfl_sync src 3 within segment
                in_seg < 2 ? 100 + l : 100 + l - 2,                               // up by 2: own value at segment start
                in_seg + 2 >= width ? 100 + l : 100 + l + 2,                      // down by 2: own value at segment end
                (l ^ 5) >= seg + width ? 100 + l : 100 + (l ^ 5),                 // xor 5: later segment -> own value
                (int)ballot, 1 + 2};
            for (int q = 0; q < 6; q++) bad += got[q * 32 + l] != want[q];
        }
        check("shuffle/vote semantics, width " + std::to_string(width), bad == 0, "%d mismatches", bad);
    }
    cudaFree(out);
    cudaFree(x);
    cudaFree(wout);
    cudaFree(bout);
}

void test_indices() {
    const dim3 grid(3, 2, 2), block(8, 4, 2);
    const size_t nthreads = 64, total = 12 * nthreads;
    unsigned* out;
    cudaMalloc(&out, total * 8 * sizeof(unsigned));
    cudasim::set_thread_order(cudasim::Order::Shuffled, 7);
    cudasim::launch(indices, grid, block, 0, nullptr, out);
    cudasim::set_thread_order(cudasim::Order::Forward);
    auto got = to_host(out, total * 8);
    int bad = 0;
    for (unsigned b = 0; b < 12; b++)
        for (unsigned t = 0; t < nthreads; t++) {
            const unsigned* o = &got[8 * (b * nthreads + t)];
            const unsigned want[8] = {t % 8, t / 8 % 4, t / 32, b % 3, b / 3 % 2, b / 6, t / 32 * 32, 32};
            for (int q = 0; q < 8; q++) bad += o[q] != want[q];
        }
    check("threadIdx/blockIdx/blockDim/gridDim and warp lanes of a 3-D launch", bad == 0, "%d mismatches", bad);
    cudaFree(out);
}

void test_shared_memory() {
    // 64 KiB of dynamic shared memory: above the 48 KiB default, so the kernel needs the attribute, as on a GPU.
    const int n = 256, per = 64, total = n * per;
    auto hx = random_floats(total, 3);
    float* x = to_device(hx);
    float* out;
    cudaMalloc(&out, total * sizeof(float));
    check("cudaFuncSetAttribute(MaxDynamicSharedMemorySize, 64 KiB)",
          cudaFuncSetAttribute(llmc::rotate_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, total * 4) == cudaSuccess);
    cudasim::for_each_order([&](cudasim::Order o) {
        cudasim::launch(llmc::rotate_dynamic, dim3(1), dim3(n), total * sizeof(float), nullptr, x, out, per);
        auto got = to_host(out, total);
        int bad = 0;
        for (int i = 0; i < total; i++) bad += got[i] != hx[(i + 1) % total];
        check(std::string("dynamic shared memory (extern __shared__ in namespace llmc, 64 KiB) ") + cudasim::order_name(o),
              bad == 0, "%d mismatches", bad);
    });

    int* iout;
    cudaMalloc(&iout, 64 * sizeof(int));
    cudasim::launch(read_unwritten_dynamic, dim3(1), dim3(64), 64 * sizeof(int), nullptr, iout);
    auto igot = to_host(iout, 64);
    bool poisoned = true;
    for (int v : igot) poisoned = poisoned && v == -1;
    check("unwritten dynamic shared memory reads as poison (0xFF bytes)", poisoned);

    std::string wrong;
    cudasim::for_each_order([&](cudasim::Order o) {
        cudasim::launch(rotate_dynamic_racy, dim3(1), dim3(64), 64 * sizeof(float), nullptr, x, out);
        auto got = to_host(out, 64);
        for (int i = 0; i < 64; i++)
            if (got[i] != hx[(i + 1) % 64]) { wrong += std::string(" ") + cudasim::order_name(o); break; }
    });
    check("racy dynamic shared memory kernel gives a wrong answer in some order", !wrong.empty());
    cudaFree(iout);
    cudaFree(x);
    cudaFree(out);
}

void test_atomics() {
    const int blocks = 4, n = 128, total = blocks * n;
    float* fsum;
    int *isum, *imax;
    unsigned *umax, *counts;
    cudaMalloc(&fsum, sizeof(float));
    cudaMalloc(&isum, sizeof(int));
    cudaMalloc(&imax, sizeof(int));
    cudaMalloc(&umax, sizeof(unsigned));
    cudaMalloc(&counts, blocks * sizeof(unsigned));
    cudaMemset(fsum, 0, sizeof(float));
    cudaMemset(isum, 0, sizeof(int));
    cudaMemset(imax, 0, sizeof(int));
    cudaMemset(umax, 0, sizeof(unsigned));
    cudasim::set_thread_order(cudasim::Order::Shuffled, 11);
    cudasim::launch(atomics, dim3(blocks), dim3(n), 0, nullptr, fsum, isum, imax, umax, counts);
    cudasim::set_thread_order(cudasim::Order::Forward);
    int want_max = 0;
    unsigned want_umax = 0;
    for (int g = 0; g < total; g++) {
        want_max = std::max(want_max, (g * 37) % 1001);
        want_umax = std::max(want_umax, (unsigned)((g * 53) % 997));
    }
    check("atomicAdd float", to_host(fsum, 1)[0] == 0.5f * total);
    check("atomicAdd int", to_host(isum, 1)[0] == total * (total - 1) / 2);
    check("atomicMax int", to_host(imax, 1)[0] == want_max);
    check("atomicCAS loop (unsigned max)", to_host(umax, 1)[0] == want_umax);
    auto c = to_host(counts, blocks);
    bool ok = true;
    for (unsigned v : c) ok = ok && v == (unsigned)(n / 4);
    check("__syncthreads_count", ok);
    cudaFree(fsum); cudaFree(isum); cudaFree(imax); cudaFree(umax); cudaFree(counts);
}

void test_failures_are_reported() {
    float* out;
    cudaMalloc(&out, 64 * sizeof(float));
    std::string err;
    check("divergent __syncthreads aborts with a clear message",
          aborts_with([&] {
              cudasim::launch(divergent_barrier, dim3(1), dim3(64), 0, nullptr, out);
              cudaDeviceSynchronize();
          }, "Divergent __syncthreads", err), "stderr: %s", err.c_str());
    check("shuffle with an exited partner lane aborts",
          aborts_with([&] {
              cudasim::launch(shuffle_after_exit, dim3(1), dim3(32), 0, nullptr, out);
              cudaDeviceSynchronize();
          }, "exited", err), "stderr: %s", err.c_str());
    check("over 48 KiB of dynamic shared memory without cudaFuncSetAttribute: cudaErrorInvalidValue, not run",
          cudasim::launch(big_dynamic, dim3(1), dim3(32), 64 * 1024, nullptr, out) == cudaErrorInvalidValue &&
              cudaGetLastError() == cudaErrorInvalidValue && cudaGetLastError() == cudaSuccess);
    check("divergent __syncthreads aborts under warp-serial order too",
          aborts_with([&] {
              cudasim::set_thread_order(cudasim::Order::WarpSerial);
              cudasim::launch(divergent_barrier, dim3(1), dim3(64), 0, nullptr, out);
              cudaDeviceSynchronize();
          }, "Divergent __syncthreads", err), "stderr: %s", err.c_str());
    check("a block of 2048 threads: cudaErrorInvalidConfiguration, not run",
          cudasim::launch(big_dynamic, dim3(1), dim3(2048), 0, nullptr, out) == cudaErrorInvalidConfiguration &&
              cudaGetLastError() == cudaErrorInvalidConfiguration);
    cudaFree(out);
}

void test_runtime() {
    std::vector<float> h = random_floats(1000, 5), back(1000);
    float *a, *b;
    check("cudaMalloc", cudaMalloc(&a, 1000 * sizeof(float)) == cudaSuccess && cudaMalloc(&b, 1000 * sizeof(float)) == cudaSuccess);
    auto fresh = to_host(a, 1000);
    bool nan = true;
    for (float v : fresh) nan = nan && std::isnan(v);
    check("fresh cudaMalloc memory is poisoned (NaN)", nan);
    cudaStream_t s;
    cudaStreamCreate(&s);
    check("cudaMemcpy H2D, cudaMemcpyAsync D2D, D2H round trip",
          cudaMemcpy(a, h.data(), 4000, cudaMemcpyHostToDevice) == cudaSuccess &&
              cudaMemcpyAsync(b, a, 4000, cudaMemcpyDeviceToDevice, s) == cudaSuccess &&
              cudaStreamSynchronize(s) == cudaSuccess &&
              cudaMemcpy(back.data(), b, 4000, cudaMemcpyDeviceToHost) == cudaSuccess && back == h);
    std::printf("  (the next three cudasim error lines on stderr are expected)\n");
    check("cudaMemcpy in the wrong direction is an error",
          cudaMemcpy(a, h.data(), 4000, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue &&
              cudaGetLastError() == cudaErrorInvalidValue && cudaGetLastError() == cudaSuccess);
    check("cudaMemcpy past the end of an allocation is an error",
          cudaMemcpy(a + 10, h.data(), 4000, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    check("cudaMemset and cudaMemsetAsync", cudaMemset(a, 0, 4000) == cudaSuccess &&
                                                cudaMemsetAsync(b, 0, 4000, s) == cudaSuccess &&
                                                to_host(a, 1000) == std::vector<float>(1000, 0.0f));
    std::printf("  (and one more for this cudaFree)\n");
    check("cudaFree of a foreign pointer is an error", cudaFree(h.data()) == cudaErrorInvalidValue);
    cudaGetLastError();

    cudaEvent_t e0, e1, e2;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventCreateWithFlags(&e2, cudaEventDisableTiming);
    cudaEventRecord(e0, s);
    cudaEventRecord(e1, s);
    cudaEventRecord(e2, s);
    float ms = -1;
    check("cudaEventElapsedTime is cudaErrorNotReady before the events ran",
          cudaEventElapsedTime(&ms, e0, e1) == cudaErrorNotReady);
    cudaEventSynchronize(e1);
    check("cudaEventElapsedTime", cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms >= 0.0f);
    std::printf("  (one more expected error line on stderr)\n");
    check("cudaEventElapsedTime refuses a DisableTiming event", cudaEventElapsedTime(&ms, e0, e2) != cudaSuccess);
    check("cudaStreamWaitEvent / cudaEventSynchronize",
          cudaStreamWaitEvent(s, e1, 0) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess);
    cudaEventDestroy(e0); cudaEventDestroy(e1); cudaEventDestroy(e2);
    cudaStreamDestroy(s);
    cudaGetLastError();

    cudaDeviceProp p;
    int sms = 0, major = 0, optin = 0, dev = -1, count = 0, clock_khz = 0;
    size_t free_b = 0, total_b = 0;
    check("device queries", cudaGetDeviceProperties(&p, 0) == cudaSuccess && p.multiProcessorCount == 132 &&
                                p.major == 9 && p.warpSize == 32 && p.sharedMemPerBlockOptin == 227 * 1024 &&
                                cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess && sms == 132 &&
                                cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess && major == 9 &&
                                cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0) == cudaSuccess &&
                                clock_khz == 1980000 &&
                                cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0) == cudaSuccess &&
                                cudaGetDevice(&dev) == cudaSuccess && dev == 0 && cudaGetDeviceCount(&count) == cudaSuccess &&
                                count == 1 && cudaSetDevice(0) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess &&
                                free_b < total_b && std::string(cudaGetErrorString(cudaErrorMemoryAllocation)) == "out of memory");
    cudaFree(a);
    cudaFree(b);
}

// ---- cuBLASLt ----------------------------------------------------------------------------------------------------
float bf16_round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

// Column-major element (r, c) of op(X), where X has leading dimension ld.
double op_at(const std::vector<float>& X, bool trans, size_t ld, size_t off, size_t r, size_t c) {
    return trans ? X[off + r * ld + c] : X[off + c * ld + r];
}

struct GemmCase {
    std::string name;
    bool ta = false, tb = false;
    size_t m = 5, n = 7, k = 3, pad = 2;  // leading dimensions are rows + pad
    int batch = 1;
    float alpha = 1.0f, beta = 0.0f;
    bool bf16_in = false, bf16_out = false;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
};
// Elements between the bias vectors of a batch: each vector 16-byte aligned, as the fused epilogues need.
size_t bias_stride(const GemmCase& g) { return (std::max(g.m, g.n) + 7) / 8 * 8; }

template <class T>
std::vector<T> convert(const std::vector<float>& v) {
    std::vector<T> r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = (T)v[i];
    return r;
}
template <>
std::vector<__nv_bfloat16> convert(const std::vector<float>& v) {
    std::vector<__nv_bfloat16> r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = __float2bfloat16_rn(v[i]);
    return r;
}

// Device copy of v as fp32 or bf16, returned as void*.
void* upload(const std::vector<float>& v, bool bf16) {
    if (bf16) return to_device(convert<__nv_bfloat16>(v));
    return to_device(v);
}
std::vector<float> download(const void* d, size_t n, bool bf16) {
    if (!bf16) return to_host(static_cast<const float*>(d), n);
    auto h = to_host(static_cast<const __nv_bfloat16*>(d), n);
    std::vector<float> r(n);
    for (size_t i = 0; i < n; i++) r[i] = __bfloat162float(h[i]);
    return r;
}

void run_gemm_case(cublasLtHandle_t handle, const GemmCase& g) {
    const size_t arows = g.ta ? g.k : g.m, acols = g.ta ? g.m : g.k;
    const size_t brows = g.tb ? g.n : g.k, bcols = g.tb ? g.k : g.n;
    const size_t lda = arows + g.pad, ldb = brows + g.pad, ldc = g.m + g.pad;
    const size_t sa = lda * acols + 3, sb = ldb * bcols + 5, sc = ldc * g.n + 1;  // batch strides with gaps
    auto A = random_floats(sa * g.batch, 100), B = random_floats(sb * g.batch, 200);
    auto C = random_floats(sc * g.batch, 300), bias = random_floats(bias_stride(g) * g.batch, 400);
    if (g.bf16_in) for (auto* v : {&A, &B}) for (auto& x : *v) x = bf16_round(x);
    if (g.bf16_out) for (auto* v : {&C, &bias}) for (auto& x : *v) x = bf16_round(x);
    const size_t aux_ld = (g.m + 7) / 8 * 8 + 8, aux_stride = aux_ld * g.n;

    void* dA = upload(A, g.bf16_in);
    void* dB = upload(B, g.bf16_in);
    void* dD = upload(C, g.bf16_out);  // C and D share memory: beta = 1 accumulates in place
    void* dBias = upload(bias, g.bf16_out);
    void* dAux = upload(std::vector<float>(aux_stride * g.batch, 0.0f), g.bf16_out);

    const cudaDataType tin = g.bf16_in ? CUDA_R_16BF : CUDA_R_32F, tout = g.bf16_out ? CUDA_R_16BF : CUDA_R_32F;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t opa = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof g.epilogue);
    if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT && g.epilogue != CUBLASLT_EPILOGUE_GELU) {
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dBias, sizeof dBias);
        const int64_t bstride = (int64_t)bias_stride(g);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bstride, sizeof bstride);
    }
    if (g.epilogue & 128) {
        const int64_t ld = (int64_t)aux_ld, st = (int64_t)aux_stride;
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &dAux, sizeof dAux);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &st, sizeof st);
    }
    cublasLtMatrixLayoutCreate(&la, tin, arows, acols, (int64_t)lda);
    cublasLtMatrixLayoutCreate(&lb, tin, brows, bcols, (int64_t)ldb);
    cublasLtMatrixLayoutCreate(&lc, tout, g.m, g.n, (int64_t)ldc);
    if (g.batch > 1) {
        const int64_t strides[3] = {(int64_t)sa, (int64_t)sb, (int64_t)sc};
        cublasLtMatrixLayout_t ls[3] = {la, lb, lc};
        for (int i = 0; i < 3; i++) {
            cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &g.batch, sizeof g.batch);
            cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], sizeof strides[i]);
        }
    }
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    const uint64_t ws = 1 << 20;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t heur;
    int nalgo = 0;
    const bool heur_ok = cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, lc, pref, 1, &heur, &nalgo) ==
                             CUBLAS_STATUS_SUCCESS && nalgo == 1;
    const cublasStatus_t st = cublasLtMatmul(handle, desc, &g.alpha, dA, la, dB, lb, &g.beta, dD, lc, dD, lc, &heur.algo,
                                             nullptr, 0, nullptr);
    check("cuBLASLt " + g.name + ": heuristic and matmul succeed", heur_ok && st == CUBLAS_STATUS_SUCCESS,
          "heuristic %d (%d algos), matmul status %d", (int)heur_ok, nalgo, (int)st);

    // Reference from the column-major definition, in double.
    const bool bgrad = g.epilogue == CUBLASLT_EPILOGUE_BGRADB;
    const bool bias_in = !bgrad && (g.epilogue & CUBLASLT_EPILOGUE_BIAS), gelu = g.epilogue & CUBLASLT_EPILOGUE_GELU;
    std::vector<double> wantD(sc * g.batch), wantAux(aux_stride * g.batch), wantBias(g.n * g.batch);
    std::vector<char> written(sc * g.batch, 0);
    for (int bi = 0; bi < g.batch; bi++)
        for (size_t j = 0; j < g.n; j++) {
            double bsum = 0;
            for (size_t p = 0; p < g.k; p++) bsum += op_at(B, g.tb, ldb, bi * sb, p, j);
            wantBias[bi * g.n + j] = bsum;
            for (size_t i = 0; i < g.m; i++) {
                double acc = 0;
                for (size_t p = 0; p < g.k; p++) acc += op_at(A, g.ta, lda, bi * sa, i, p) * op_at(B, g.tb, ldb, bi * sb, p, j);
                acc = g.alpha * acc + g.beta * C[bi * sc + j * ldc + i];
                if (bias_in) acc += bias[bi * bias_stride(g) + i];
                wantAux[bi * aux_stride + j * aux_ld + i] = acc;
                if (gelu) acc = gelu_ref(acc);
                wantD[bi * sc + j * ldc + i] = acc;
                written[bi * sc + j * ldc + i] = 1;
            }
        }
    // fp32 output: one rounding of a double-accumulated value (<= 2^-24 relative) plus the k-term accumulation order;
    // 1e-6 relative + 1e-6 absolute covers both. bf16 output: one rounding to 8 significant bits, half an ulp = 2^-9
    // relative; 2^-8 leaves room for the fp32 intermediate the simulator rounds through.
    const double rtol = g.bf16_out ? 1.0 / 256 : 1e-6, atol = g.bf16_out ? 1e-3 : 1e-6;
    auto gotD = download(dD, sc * g.batch, g.bf16_out);
    std::vector<float> gotW, wantW, untouched_got, untouched_want;
    for (size_t i = 0; i < gotD.size(); i++) {
        if (written[i]) { gotW.push_back(gotD[i]); wantW.push_back((float)wantD[i]); }
        else { untouched_got.push_back(gotD[i]); untouched_want.push_back(C[i]); }
    }
    check_close("cuBLASLt " + g.name + ": D", gotW.data(), wantW.data(), gotW.size(), rtol, atol);
    check("cuBLASLt " + g.name + ": padding between columns and batches untouched", untouched_got == untouched_want);
    if (g.epilogue & 128) {
        auto gotAux = download(dAux, aux_stride * g.batch, g.bf16_out);
        std::vector<float> ga, wa;
        for (int bi = 0; bi < g.batch; bi++)
            for (size_t j = 0; j < g.n; j++)
                for (size_t i = 0; i < g.m; i++) {
                    ga.push_back(gotAux[bi * aux_stride + j * aux_ld + i]);
                    wa.push_back((float)wantAux[bi * aux_stride + j * aux_ld + i]);
                }
        check_close("cuBLASLt " + g.name + ": AUX pre-GELU output", ga.data(), wa.data(), ga.size(), rtol, atol);
    }
    if (bgrad) {
        auto gotBias = download(dBias, bias_stride(g) * g.batch, g.bf16_out);
        std::vector<float> gb, wb;
        for (int bi = 0; bi < g.batch; bi++)
            for (size_t j = 0; j < g.n; j++) {
                gb.push_back(gotBias[bi * bias_stride(g) + j]);
                wb.push_back((float)wantBias[bi * g.n + j]);
            }
        check_close("cuBLASLt " + g.name + ": BGRADB bias gradient", gb.data(), wb.data(), gb.size(), rtol, atol);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    for (void* p : {dA, dB, dD, dBias, dAux}) cudaFree(p);
}

void test_cublaslt() {
    cublasLtHandle_t h;
    check("cublasLtCreate", cublasLtCreate(&h) == CUBLAS_STATUS_SUCCESS);
    std::vector<GemmCase> cases;
    auto add = [&](GemmCase g) { cases.push_back(g); };
    { GemmCase g; g.name = "fp32 NN alpha=1.5"; g.alpha = 1.5f; add(g); }
    { GemmCase g; g.name = "fp32 NT"; g.tb = true; add(g); }
    { GemmCase g; g.name = "fp32 TN"; g.ta = true; add(g); }
    { GemmCase g; g.name = "fp32 TT, k=33"; g.ta = g.tb = true; g.k = 33; add(g); }
    { GemmCase g; g.name = "fp32 beta=1 accumulate into C==D"; g.tb = true; g.beta = 1.0f; add(g); }
    { GemmCase g; g.name = "fp32 strided batched x3, beta=0.5"; g.ta = true; g.batch = 3; g.beta = 0.5f; add(g); }
    { GemmCase g; g.name = "bf16 in, fp32 out, NT"; g.tb = true; g.bf16_in = true; g.k = 40; add(g); }
    { GemmCase g; g.name = "bf16 in, bf16 out, TN"; g.ta = true; g.bf16_in = g.bf16_out = true; g.k = 40; add(g); }
    { GemmCase g; g.name = "bf16 BIAS epilogue"; g.ta = true; g.bf16_in = g.bf16_out = true; g.epilogue = CUBLASLT_EPILOGUE_BIAS; add(g); }
    { GemmCase g; g.name = "fp32 BIAS epilogue, batched"; g.tb = true; g.batch = 2; g.epilogue = CUBLASLT_EPILOGUE_BIAS; add(g); }
    { GemmCase g; g.name = "fp32 GELU epilogue"; g.epilogue = CUBLASLT_EPILOGUE_GELU; add(g); }
    { GemmCase g; g.name = "fp32 GELU_AUX_BIAS epilogue"; g.ta = true; g.m = 9; g.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS; add(g); }
    { GemmCase g; g.name = "bf16 GELU_AUX epilogue"; g.ta = true; g.bf16_in = g.bf16_out = true; g.epilogue = CUBLASLT_EPILOGUE_GELU_AUX; add(g); }
    { GemmCase g; g.name = "fp32 BGRADB, NT"; g.tb = true; g.k = 17; g.epilogue = CUBLASLT_EPILOGUE_BGRADB; add(g); }
    { GemmCase g; g.name = "bf16 BGRADB, NT, beta=1"; g.tb = true; g.bf16_in = g.bf16_out = true; g.beta = 1.0f; g.epilogue = CUBLASLT_EPILOGUE_BGRADB; add(g); }
    for (const auto& g : cases) run_gemm_case(h, g);

    // The alignment preferences (uint32_t, as the backend sets them from its pointers) are accepted and ignored.
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    const uint32_t align = 16;
    const cublasLtMatmulPreferenceAttributes_t aligns[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    bool align_ok = true;
    for (auto a : aligns) align_ok = align_ok && cublasLtMatmulPreferenceSetAttribute(pref, a, &align, sizeof align) == CUBLAS_STATUS_SUCCESS;
    check("CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES accepted", align_ok);
    const uint64_t align64 = 16;
    std::printf("  (one more expected error line on stderr)\n");
    check("CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES of the wrong size refused",
          cublasLtMatmulPreferenceSetAttribute(pref, aligns[0], &align64, sizeof align64) == CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatmulPreferenceDestroy(pref);

    // API misuse returns the real library's errors.
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const int ld32 = 16;
    std::printf("  (the next two cudasim cuBLASLt error lines are expected)\n");
    check("cuBLASLt: an attribute of the wrong size is CUBLAS_STATUS_INVALID_VALUE",
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld32, sizeof ld32) ==
              CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 4, 3, 4);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 4, 5, 4);  // op(B) has 4 rows but op(A) has 3 columns
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 4, 5, 4);
    float one = 1, zero = 0, buf[64] = {};
    check("cuBLASLt: inconsistent shapes are CUBLAS_STATUS_INVALID_VALUE",
          cublasLtMatmul(h, desc, &one, buf, la, buf, lb, &zero, buf, lc, buf, lc, nullptr, nullptr, 0, nullptr) ==
              CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(h);
}

void report_speed() {
    // Not a check: how fast the fiber machinery is on this machine (one block of 1024 threads, 10 barriers each).
    const uint64_t s0 = cudasim::switch_count();
    auto t0 = std::chrono::steady_clock::now();
    std::vector<float> hx(1024, 1.0f);
    float* x = to_device(hx);
    float* out;
    cudaMalloc(&out, 4 * sizeof(float));  // one sum per block
    for (int r = 0; r < 4; r++) cudasim::launch(block_sum, dim3(4), dim3(256), 0, nullptr, x, out);
    cudaDeviceSynchronize();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t sw = cudasim::switch_count() - s0;
    std::printf("# speed: %llu context switches in %.3f s (%.0f ns each, launch overhead included)\n",
                (unsigned long long)sw, sec, sec * 1e9 / (double)sw);
    cudaFree(x);
    cudaFree(out);
}

int main() {
    // Death tests fork: run them before anything starts OpenMP threads (the cuBLASLt GEMM uses OpenMP).
    test_failures_are_reported();
    test_reductions_and_missing_barriers();
    test_write_after_read_barriers();
    test_warp_shuffles();
    test_indices();
    test_shared_memory();
    test_atomics();
    test_runtime();
    test_cublaslt();
    report_speed();
    return testing::finish();
}
