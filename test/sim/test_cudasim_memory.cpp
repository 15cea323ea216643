// The simulator's memory checks (dev/cudasim/device_memory.cpp, shared_memory.cpp): out-of-bounds device accesses are
// reported with the kernel, block, thread and address; static and dynamic shared memory is poisoned in every block,
// so a read of a slot no thread of the block wrote gives garbage (NaN) instead of a stale value.
#include <cuda_runtime.h>

#include "dev/cudasim/include/cudasim.h"
#include "test/fixtures/death_test.h"
#include "test/fixtures/testing.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using testing::aborts_with;
using testing::check;
using testing::runs_clean;

namespace {

// Planted bugs: each thread reads (or writes) one element, with an off-by-`past` index.
__global__ void shifted_read(const float* x, float* out, int n, int shift) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i + shift];
}
__global__ void shifted_write(float* x, int n, int shift) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i + shift] = 1.0f;
}
__global__ void vector_read(const float4* x, float4* out, int n4) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) out[i] = x[i];
}

// Planted bug: block b's threads publish b + t in a static shared array, but only the first `written` slots are
// written; every thread then reads its own slot. Slots >= written were never written in this block.
__global__ void partially_written_shared(float* out, int written) {
    __shared__ float slots[64];
    const int t = threadIdx.x;
    if (t < written) slots[t] = (float)(blockIdx.x + t);
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = slots[t];
}
// The same through dynamic shared memory.
__global__ void partially_written_dynamic(float* out, int written) {
    extern __shared__ float smem[];
    const int t = threadIdx.x;
    if (t < written) smem[t] = (float)(blockIdx.x + t);
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = smem[t];
}

float* device_floats(size_t n) {
    float* p = nullptr;
    cudaMalloc(&p, n * sizeof(float));
    cudaMemset(p, 0, n * sizeof(float));
    return p;
}

void test_out_of_bounds() {
    const int n = 1024;  // 4096 bytes: a multiple of 256, so the element past the end is in the guard page
    float *x = device_floats(n), *out = device_floats(n);
    std::string err;
    check("in-bounds reads and writes run clean", runs_clean([&] {
              cudasim::launch(shifted_read, dim3(4), dim3(256), 0, nullptr, x, out, n, 0);
              cudaDeviceSynchronize();
          }, err), "stderr: %s", err.c_str());
    check("planted bug, a read one element past the end: reported with kernel, block, thread and address",
          aborts_with([&] {
              cudasim::launch(shifted_read, dim3(4), dim3(256), 0, nullptr, x, out, n, 1);
              cudaDeviceSynchronize();
          }, {"out-of-bounds read by kernel", "shifted_read", "block (3,0,0), thread (255,0,0)", "0 bytes past the end",
              "4096-byte device allocation"}, err), "stderr: %s", err.c_str());
    check("planted bug, a read before the start: reported",
          aborts_with([&] {
              cudasim::launch(shifted_read, dim3(4), dim3(256), 0, nullptr, x, out, n, -1);
              cudaDeviceSynchronize();
          }, {"out-of-bounds read", "before the start"}, err), "stderr: %s", err.c_str());
    check("planted bug, a write past the end: reported",
          aborts_with([&] {
              cudasim::launch(shifted_write, dim3(4), dim3(256), 0, nullptr, x, n, 1);
              cudaDeviceSynchronize();
          }, {"out-of-bounds write by kernel", "shifted_write", "past the end"}, err), "stderr: %s", err.c_str());
    // 1001 floats: the end is 4 bytes into a 256-byte rounding slack. A write there is found after the kernel.
    float* odd = device_floats(1001);
    check("planted bug, a write into the rounding slack past the end: reported after the kernel",
          aborts_with([&] {
              cudasim::launch(shifted_write, dim3(4), dim3(256), 0, nullptr, odd, 1001, 1);
              cudaDeviceSynchronize();
          }, {"out-of-bounds write by kernel", "shifted_write", "byte 0 past the end", "4004-byte"}, err),
          "stderr: %s", err.c_str());
    // 16-byte vector loads: cudaMalloc's 256-byte alignment holds, so float4 accesses of a whole buffer are fine.
    check("device allocations are 256-byte aligned", ((uintptr_t)x % 256) == 0 && ((uintptr_t)odd % 256) == 0);
    check("float4 loads over a whole allocation run clean", runs_clean([&] {
              cudasim::launch(vector_read, dim3(1), dim3(256), 0, nullptr, (const float4*)x, (float4*)out, n / 4);
              cudaDeviceSynchronize();
          }, err), "stderr: %s", err.c_str());
    check("planted bug, a float4 load one vector past the end: reported",
          aborts_with([&] {
              cudasim::launch(vector_read, dim3(2), dim3(256), 0, nullptr, (const float4*)x, (float4*)out, n / 4 + 1);
              cudaDeviceSynchronize();
          }, {"out-of-bounds read", "vector_read", "block (1,0,0), thread (0,0,0)"}, err), "stderr: %s", err.c_str());
    check("planted bug, a host write past a device buffer's end (the simulator's device memory is host memory): "
          "reported", aborts_with([&] { x[n] = 1.0f; }, {"host code", "past the end"}, err),
          "stderr: %s", err.c_str());
    cudaFree(x);
    cudaFree(out);
    cudaFree(odd);
}

void test_shared_memory_poison() {
    const int blocks = 3, threads = 64, written = 48;
    float* out = device_floats(blocks * threads);
    auto check_poison = [&](const char* what) {
        std::vector<float> h(blocks * threads);
        cudaMemcpy(h.data(), out, h.size() * sizeof(float), cudaMemcpyDeviceToHost);
        bool written_ok = true, unwritten_nan = true;
        for (int b = 0; b < blocks; b++)
            for (int t = 0; t < threads; t++) {
                const float v = h[b * threads + t];
                if (t < written) written_ok = written_ok && v == (float)(b + t);
                else unwritten_nan = unwritten_nan && std::isnan(v);
            }
        check(std::string(what) + ": written slots read back", written_ok);
        check(std::string("planted bug, ") + what + " slots no thread of the block wrote read as poison (NaN) in "
              "every block, not what an earlier block or launch left", unwritten_nan);
    };
    // A full launch first leaves every slot written (the stale values a non-poisoning simulator would show).
    cudasim::launch(partially_written_shared, dim3(blocks), dim3(threads), 0, nullptr, out, threads);
    cudasim::launch(partially_written_shared, dim3(blocks), dim3(threads), 0, nullptr, out, written);
    check_poison("static __shared__");
    cudasim::launch(partially_written_dynamic, dim3(blocks), dim3(threads), threads * sizeof(float), nullptr, out,
                    threads);
    cudasim::launch(partially_written_dynamic, dim3(blocks), dim3(threads), threads * sizeof(float), nullptr, out,
                    written);
    check_poison("dynamic extern __shared__");
    cudaFree(out);
}

}  // namespace

int main() {
    test_out_of_bounds();
    test_shared_memory_poison();
    return testing::finish();
}
