// The simulated device's limits: one profile per GPU architecture the CUDA backend is built for, chosen with the
// environment variable CUDASIM_DEVICE=sm_80|sm_86|sm_89|sm_90 (default sm_90) or cudasim::set_device_profile.
//
// The per-architecture limits come from the CUDA C++ Programming Guide, "Compute Capabilities", table "Technical
// Specifications per Compute Capability" (shared memory per SM and per block with opt-in, registers, threads and
// blocks per SM), and its sections on compute capabilities 8.x and 9.0 (the 1 KiB of shared memory the system
// reserves per block, which is why the opt-in limit is 1 KiB below the SM's carve-out). The per-product figures (SM
// count, L2, memory, clocks, bus width) are those the named products report in cudaGetDeviceProperties (NVIDIA's
// data sheets: A100 SXM4 80GB, A10, L40S, H100 SXM5 80GB). docs/cudasim.md has the table.
#include "dev/cudasim/include/cudasim.h"
#include "dev/cudasim/state.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cudasim::detail {
namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

// Fields: arch, product, cc major/minor, SMs, shared per block (default), per block (opt-in), per SM, reserved per
// block, registers per SM / per block / per thread, threads per block / per SM, blocks per SM, L2, memory, clock
// (kHz), memory clock (kHz), bus width (bits).
const DeviceProfile kProfiles[] = {
    {"sm_80", "NVIDIA A100-SXM4-80GB", 8, 0, 108, 48 * KiB, 163 * KiB, 164 * KiB, 1 * KiB, 65536, 65536, 255, 1024,
     2048, 32, 40 * MiB, 80 * GiB, 1410000, 1593000, 5120},
    {"sm_86", "NVIDIA A10", 8, 6, 72, 48 * KiB, 99 * KiB, 100 * KiB, 1 * KiB, 65536, 65536, 255, 1024, 1536, 16,
     6 * MiB, 24 * GiB, 1695000, 6251000, 384},
    {"sm_89", "NVIDIA L40S", 8, 9, 142, 48 * KiB, 99 * KiB, 100 * KiB, 1 * KiB, 65536, 65536, 255, 1024, 1536, 24,
     96 * MiB, 48 * GiB, 2520000, 9001000, 384},
    {"sm_90", "NVIDIA H100 80GB HBM3", 9, 0, 132, 48 * KiB, 227 * KiB, 228 * KiB, 1 * KiB, 65536, 65536, 255, 1024,
     2048, 32, 50 * MiB, 80 * GiB, 1980000, 2619000, 5120},
};

const DeviceProfile* g_profile = nullptr;

const DeviceProfile& initial_profile() {
    const char* e = std::getenv("CUDASIM_DEVICE");
    if (!e || !*e) return *find_device_profile("sm_90");
    if (const DeviceProfile* p = find_device_profile(e)) return *p;
    std::fprintf(stderr, "cudasim: CUDASIM_DEVICE=%s: expected one of sm_80, sm_86, sm_89, sm_90\n", e);
    std::exit(1);
}

}  // namespace

const DeviceProfile* find_device_profile(const char* arch) {
    for (const DeviceProfile& p : kProfiles)
        if (std::strcmp(p.arch, arch) == 0) return &p;
    return nullptr;
}

const DeviceProfile& device() {
    if (!g_profile) g_profile = &initial_profile();
    return *g_profile;
}

}  // namespace cudasim::detail

namespace cudasim {

bool set_device_profile(const char* arch) {
    const detail::DeviceProfile* p = detail::find_device_profile(arch);
    if (!p) return false;
    cudaDeviceSynchronize();             // work launched for the old device runs on it
    detail::forget_function_attributes();  // a new device: no kernel has raised its limits yet
    detail::g_profile = p;
    return true;
}

const char* device_profile() { return detail::device().arch; }

// The test mode of llmc/cuda/loop_cap.h: CUDASIM_GRID_CAP=n (n >= 1) caps every grid-stride or chunked launch at
// n blocks, so the loops run several iterations at test shapes; unset or empty: no cap (0).
size_t grid_cap() {
    static const size_t cap = [] {
        const char* e = std::getenv("CUDASIM_GRID_CAP");
        if (!e || !*e) return (size_t)0;
        char* end = nullptr;
        const long v = std::strtol(e, &end, 10);
        if (*end || v < 1) detail::fatal("CUDASIM_GRID_CAP='%s': expected a whole number of blocks >= 1", e);
        return (size_t)v;
    }();
    return cap;
}

}  // namespace cudasim
