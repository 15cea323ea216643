// The simulator's device profiles (dev/cudasim/device_profile.cpp): each architecture reports its own limits through
// cudaDeviceGetAttribute and cudaGetDeviceProperties, and enforces them as the driver does: cudaFuncSetAttribute
// beyond the opt-in limit fails, a launch with more dynamic shared memory than the kernel's limit (or more threads
// than a block can have) fails with the driver's error code and does not run.
//
// The expected figures below are written out again from the CUDA C++ Programming Guide's "Technical Specifications
// per Compute Capability" table and the products' data sheets (docs/cudasim.md), so that a wrong entry in the
// simulator's table fails here.
#include <cuda_runtime.h>

#include "dev/cudasim/include/cudasim.h"
#include "test/fixtures/death_test.h"
#include "test/fixtures/testing.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using testing::check;

namespace {

constexpr int KiB = 1024;

struct Expected {
    const char* arch;
    int major, minor, sms;
    int smem_block, smem_optin, smem_sm, smem_reserved;
    int regs_sm, regs_block;
    int threads_block, threads_sm, blocks_sm;
    long long l2;
};
const Expected kExpected[] = {
    // arch    cc     SMs  48K default, opt-in,    per SM,     reserved  regs/SM regs/blk thr/blk thr/SM blk/SM L2
    {"sm_80", 8, 0, 108, 48 * KiB, 163 * KiB, 164 * KiB, 1 * KiB, 65536, 65536, 1024, 2048, 32, 40LL << 20},
    {"sm_86", 8, 6, 72, 48 * KiB, 99 * KiB, 100 * KiB, 1 * KiB, 65536, 65536, 1024, 1536, 16, 6LL << 20},
    {"sm_89", 8, 9, 142, 48 * KiB, 99 * KiB, 100 * KiB, 1 * KiB, 65536, 65536, 1024, 1536, 24, 96LL << 20},
    {"sm_90", 9, 0, 132, 48 * KiB, 227 * KiB, 228 * KiB, 1 * KiB, 65536, 65536, 1024, 2048, 32, 50LL << 20},
};

int attr(cudaDeviceAttr a) {
    int v = -1;
    if (cudaDeviceGetAttribute(&v, a, 0) != cudaSuccess) return -1;
    return v;
}

// Writes every byte of its dynamic shared memory, then copies it out: runs only if the launch was accepted.
__global__ void fill_dynamic(unsigned char* out, int bytes) {
    extern __shared__ unsigned char shared[];
    for (int i = threadIdx.x; i < bytes; i += blockDim.x) shared[i] = (unsigned char)(i * 7 + 1);
    __syncthreads();
    for (int i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = shared[i];
}

// 8 KiB of static shared memory besides the dynamic part: counts against the opt-in limit.
__global__ void static_and_dynamic(float* out) {
    __shared__ float tile[2048];
    tile[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = tile[(threadIdx.x + 1) % blockDim.x];
}

void test_reported_limits(const Expected& e) {
    const std::string p = std::string(e.arch) + ": ";
    check(p + "cudasim::set_device_profile selects it", cudasim::set_device_profile(e.arch) &&
                                                            std::strcmp(cudasim::device_profile(), e.arch) == 0);
    check(p + "compute capability", attr(cudaDevAttrComputeCapabilityMajor) == e.major &&
                                         attr(cudaDevAttrComputeCapabilityMinor) == e.minor);
    check(p + "SM count", attr(cudaDevAttrMultiProcessorCount) == e.sms);
    check(p + "shared memory per block (default), opt-in, per SM, reserved per block",
          attr(cudaDevAttrMaxSharedMemoryPerBlock) == e.smem_block &&
              attr(cudaDevAttrMaxSharedMemoryPerBlockOptin) == e.smem_optin &&
              attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor) == e.smem_sm &&
              attr(cudaDevAttrReservedSharedMemoryPerBlock) == e.smem_reserved);
    check(p + "registers per SM and per block", attr(cudaDevAttrMaxRegistersPerMultiprocessor) == e.regs_sm &&
                                                    attr(cudaDevAttrMaxRegistersPerBlock) == e.regs_block);
    check(p + "threads per block, per SM, blocks per SM, warp size",
          attr(cudaDevAttrMaxThreadsPerBlock) == e.threads_block &&
              attr(cudaDevAttrMaxThreadsPerMultiProcessor) == e.threads_sm &&
              attr(cudaDevAttrMaxBlocksPerMultiprocessor) == e.blocks_sm && attr(cudaDevAttrWarpSize) == 32);
    check(p + "L2 size", attr(cudaDevAttrL2CacheSize) == e.l2);
    cudaDeviceProp prop;
    const bool ok = cudaGetDeviceProperties(&prop, 0) == cudaSuccess;
    check(p + "cudaGetDeviceProperties agrees with cudaDeviceGetAttribute",
          ok && prop.major == e.major && prop.minor == e.minor && prop.multiProcessorCount == e.sms &&
              (int)prop.sharedMemPerBlock == e.smem_block && (int)prop.sharedMemPerBlockOptin == e.smem_optin &&
              (int)prop.sharedMemPerMultiprocessor == e.smem_sm &&
              (int)prop.reservedSharedMemPerBlock == e.smem_reserved && prop.regsPerMultiprocessor == e.regs_sm &&
              prop.regsPerBlock == e.regs_block && prop.maxThreadsPerBlock == e.threads_block &&
              prop.maxThreadsPerMultiProcessor == e.threads_sm && prop.maxBlocksPerMultiProcessor == e.blocks_sm &&
              prop.warpSize == 32 && prop.l2CacheSize == e.l2 && std::strstr(prop.name, e.arch) != nullptr,
          "name %s", prop.name);
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    check(p + "cudaMemGetInfo's total is totalGlobalMem", total == prop.totalGlobalMem && total > 0);
}

void test_enforced_limits(const Expected& e) {
    const std::string p = std::string(e.arch) + ": ";
    cudasim::set_device_profile(e.arch);
    cudaGetLastError();
    unsigned char* out;
    cudaMalloc(&out, (size_t)e.smem_optin);
    cudaMemset(out, 0, (size_t)e.smem_optin);

    check(p + "a launch above 48 KiB without cudaFuncSetAttribute fails with cudaErrorInvalidValue",
          cudasim::launch(fill_dynamic, 1, 256, 48 * KiB + 16, nullptr, out, 48 * KiB + 16) == cudaErrorInvalidValue &&
              cudaGetLastError() == cudaErrorInvalidValue);
    check(p + "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, opt-in + 1) fails with cudaErrorInvalidValue",
          cudaFuncSetAttribute(fill_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, e.smem_optin + 1) ==
                  cudaErrorInvalidValue &&
              cudaGetLastError() == cudaErrorInvalidValue);
    cudaFuncAttributes fa;
    cudaFuncGetAttributes(&fa, fill_dynamic);
    check(p + "a refused cudaFuncSetAttribute leaves the kernel's limit at 48 KiB",
          fa.maxDynamicSharedSizeBytes == 48 * KiB, "got %d", fa.maxDynamicSharedSizeBytes);
    check(p + "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, opt-in) succeeds",
          cudaFuncSetAttribute(fill_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, e.smem_optin) ==
              cudaSuccess);
    check(p + "a launch of exactly the opt-in limit runs",
          cudasim::launch(fill_dynamic, 1, 256, (size_t)e.smem_optin, nullptr, out, e.smem_optin) == cudaSuccess);
    std::vector<unsigned char> h((size_t)e.smem_optin);
    cudaMemcpy(h.data(), out, h.size(), cudaMemcpyDeviceToHost);
    bool all = true;
    for (size_t i = 0; i < h.size(); i++) all = all && h[i] == (unsigned char)(i * 7 + 1);
    check(p + "... and every byte of its dynamic shared memory is usable", all);
    cudaMemset(out, 0, (size_t)e.smem_optin);
    check(p + "a launch one byte above the kernel's limit fails with cudaErrorInvalidValue and does not run",
          cudasim::launch(fill_dynamic, 1, 256, (size_t)e.smem_optin + 1, nullptr, out, 16) == cudaErrorInvalidValue &&
              cudaGetLastError() == cudaErrorInvalidValue);
    cudaMemcpy(h.data(), out, 16, cudaMemcpyDeviceToHost);
    check(p + "... (its output is untouched)", h[0] == 0 && h[15] == 0);

    // Static shared memory counts against the opt-in limit: 8 KiB static leaves opt-in - 8 KiB for the dynamic part.
    cudaFuncGetAttributes(&fa, static_and_dynamic);
    check(p + "cudaFuncGetAttributes reports the kernel's 8 KiB of static shared memory", fa.sharedSizeBytes == 8192,
          "got %zu", fa.sharedSizeBytes);
    check(p + "static + dynamic above the opt-in limit: cudaFuncSetAttribute fails",
          cudaFuncSetAttribute(static_and_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               e.smem_optin - 8192 + 1) == cudaErrorInvalidValue &&
              cudaGetLastError() == cudaErrorInvalidValue);
    check(p + "static + dynamic at the opt-in limit: cudaFuncSetAttribute succeeds",
          cudaFuncSetAttribute(static_and_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               e.smem_optin - 8192) == cudaSuccess);

    check(p + "a block of max threads per block runs, one more thread fails with cudaErrorInvalidConfiguration",
          cudasim::launch(static_and_dynamic, 1, e.threads_block, 0, nullptr, (float*)out) == cudaSuccess &&
              cudasim::launch(static_and_dynamic, 1, e.threads_block + 1, 0, nullptr, (float*)out) ==
                  cudaErrorInvalidConfiguration &&
              cudaGetLastError() == cudaErrorInvalidConfiguration);
    cudaDeviceSynchronize();
    cudaFree(out);
}

// A profile switch is a new device: a limit raised on the old one is gone.
void test_switch_forgets_attributes() {
    cudasim::set_device_profile("sm_90");
    cudaFuncSetAttribute(fill_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * KiB);
    cudasim::set_device_profile("sm_86");
    cudaFuncAttributes fa;
    cudaFuncGetAttributes(&fa, fill_dynamic);
    check("switching the profile forgets cudaFuncSetAttribute limits", fa.maxDynamicSharedSizeBytes == 48 * KiB);
    check("an unknown profile name is refused", !cudasim::set_device_profile("sm_75") &&
                                                    std::strcmp(cudasim::device_profile(), "sm_86") == 0);
}

// CUDASIM_DEVICE selects the profile for a whole program; an unknown value stops it with one line naming it.
void test_environment(const char* self) {
    for (const Expected& e : kExpected) {
        std::string err;
        const int status = testing::run_child([&] {
            setenv("CUDASIM_DEVICE", e.arch, 1);
            execl(self, self, "--print-device", (char*)nullptr);
            _exit(127);
        }, err);
        check(std::string("CUDASIM_DEVICE=") + e.arch + " selects that profile",
              WIFEXITED(status) && WEXITSTATUS(status) == 10 * e.major + e.minor, "status %d, stderr %s", status,
              err.c_str());
    }
    std::string err;
    const int status = testing::run_child([&] {
        setenv("CUDASIM_DEVICE", "sm_75", 1);
        execl(self, self, "--print-device", (char*)nullptr);
        _exit(127);
    }, err);
    check("CUDASIM_DEVICE=sm_75: exit 1 with a message naming the value and the choices",
          WIFEXITED(status) && WEXITSTATUS(status) == 1 && err.find("CUDASIM_DEVICE=sm_75") != std::string::npos &&
              err.find("sm_80, sm_86, sm_89, sm_90") != std::string::npos,
          "stderr: %s", err.c_str());
    unsetenv("CUDASIM_DEVICE");
    const int plain = testing::run_child([&] {
        execl(self, self, "--print-device", (char*)nullptr);
        _exit(127);
    }, err);
    check("without CUDASIM_DEVICE the device is sm_90", WIFEXITED(plain) && WEXITSTATUS(plain) == 90);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "--print-device") == 0) {
        // The child of test_environment: exit status = the compute capability the environment selected.
        return 10 * attr(cudaDevAttrComputeCapabilityMajor) + attr(cudaDevAttrComputeCapabilityMinor);
    }
    test_environment("/proc/self/exe");
    for (const Expected& e : kExpected) test_reported_limits(e);
    for (const Expected& e : kExpected) test_enforced_limits(e);
    test_switch_forgets_attributes();
    return testing::finish();
}
