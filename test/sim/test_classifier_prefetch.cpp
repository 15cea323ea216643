// The fused classifier's two kernels (llmc/cuda/classifier.cuh) under the simulator: the persistent kernel that
// prefetches the next row into shared memory gives the same bits as the one-block-per-row kernel, for every row, in
// every thread order, with and without dlogits, at odd row counts, rows fewer than the grid, rows many times the grid
// (grid 1), a last round of rows that only some blocks get (T-like tails), V not a multiple of 8 (the last pack
// masked), rows longer than the registers, and invalid targets (NaN losses). No tolerance: both kernels hold the same
// packs in the same threads and do the same arithmetic in the same order, so anything but equal bits is a bug (a
// missing wait on the copies, a buffer slot read after the next row's copy, partials of two rows mixed).
// Then the host's choice (classifier_launch) from the device limits of each architecture, and the backend's own call.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cudasim.h"
#include "llmc/bf16.h"
#include "llmc/cuda/classifier.cuh"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/error.h"
#include "test/fixtures/testing.h"

namespace {

using llmc::bf16;
using llmc::ClassifierLaunch;
using llmc::CudaBackend;
using llmc::DeviceLimits;
using Vec = std::vector<float>;
constexpr size_t KiB = 1024;

std::mt19937 rng(1234);

bool same_bits(const Vec& a, const Vec& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One shape's inputs on the device: random logits in [-4, 4] rounded to bf16 (padded columns 100, which the kernels
// must ignore), targets with an invalid one (-1 and V) in rows 1 and 2 when there are enough rows.
struct Case {
    size_t N, V, Vp;
    Vec logits;
    std::vector<int> targets;
    bf16* d_logits = nullptr;
    float* d_losses = nullptr;
    int* d_targets = nullptr;
    CudaBackend& gpu;

    Case(CudaBackend& g, size_t n, size_t v, size_t vp) : N(n), V(v), Vp(vp), logits(n * vp), targets(n), gpu(g) {
        std::uniform_real_distribution<float> dx(-4.0f, 4.0f);
        for (size_t i = 0; i < N * Vp; i++)
            logits[i] = (i % Vp) < V ? llmc::bf16_to_float(llmc::float_to_bf16(dx(rng))) : 100.0f;
        std::uniform_int_distribution<int> dt(0, (int)V - 1);
        for (auto& t : targets) t = dt(rng);
        targets[0] = (int)V - 1;
        if (N > 3) targets[1] = -1, targets[2] = (int)V;
        d_logits = (bf16*)gpu.alloc(N * Vp * sizeof(bf16));
        d_losses = (float*)gpu.alloc(N * sizeof(float));
        d_targets = (int*)gpu.alloc(N * sizeof(int));
        gpu.copy_to_device(d_targets, targets.data(), N * sizeof(int));
    }
    ~Case() {
        gpu.free(d_logits);
        gpu.free(d_losses);
        gpu.free(d_targets);
    }
    // Losses, then the logits after the call (dlogits, or the untouched logits without them).
    std::vector<Vec> run(const ClassifierLaunch& L, bool write_dlogits) {
        gpu.upload_floats(d_logits, logits.data(), N * Vp);
        const float dloss = 1.0f / (float)(3 * N);
        llmc::fused_classifier(d_logits, d_losses, d_targets, dloss, N, V, Vp, write_dlogits, L, gpu.stream());
        Vec losses(N), out(N * Vp);
        gpu.copy_to_host(losses.data(), d_losses, N * sizeof(float));
        gpu.download_floats(out.data(), d_logits, N * Vp);
        return {losses, out};
    }
    std::string tag() const {
        return "N=" + std::to_string(N) + " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp);
    }
};

ClassifierLaunch row_per_block(size_t N, size_t Vp) {
    ClassifierLaunch L;
    L.vector = Vp % 8 == 0;
    const size_t packs = L.vector ? Vp / 8 : Vp;
    L.block = packs >= 1024 ? 1024 : 32 * ((packs + 31) / 32);
    L.grid = N;
    return L;
}

// The prefetch kernel at `grid` persistent blocks against the one-block-per-row kernel, under every thread order.
void check_prefetch_equals_rows(CudaBackend& gpu, size_t N, size_t V, size_t Vp, size_t grid) {
    Case c(gpu, N, V, Vp);
    const ClassifierLaunch old_launch = row_per_block(N, Vp);
    ClassifierLaunch L = old_launch;
    L.prefetch = true;
    L.grid = grid;
    L.smem = llmc::classifier_prefetch_bytes(Vp / 8, L.block);
    const std::string tag = "prefetch kernel " + c.tag() + " grid=" + std::to_string(grid);
    for (bool dl : {true, false}) {
        const std::vector<Vec> want = c.run(old_launch, dl);
        std::vector<std::vector<Vec>> got;
        cudasim::for_each_order([&](cudasim::Order) { got.push_back(c.run(L, dl)); });
        bool same = true;
        for (const auto& g : got) same = same && same_bits(g[0], want[0]) && same_bits(g[1], want[1]);
        size_t nan_losses = 0;
        for (float l : want[0]) nan_losses += l != l;
        testing::check(tag + (dl ? " with dlogits" : " loss only") +
                           ": losses and logits bitwise equal to one block per row, every thread order",
                       same && nan_losses == (N > 3 ? 2u : 0u), "%s (NaN losses %zu)",
                       same ? "equal" : "bits differ", nan_losses);
    }
}

DeviceLimits limits(size_t per_block, size_t per_sm) {
    DeviceLimits d;
    d.cc = 90;
    d.smem_per_block = per_block;
    d.smem_per_sm = per_sm;
    return d;
}

// The host's choice: the prefetch kernel wherever its buffer (plus 512 bytes of static partials) fits one block and
// one SM (with the runtime's 1 KiB per block), one block per row otherwise and on the scalar path.
void check_launch_choice() {
    const DeviceLimits h100 = limits(227 * KiB, 228 * KiB), a100 = limits(163 * KiB, 164 * KiB),
                       ada = limits(99 * KiB, 100 * KiB), small = limits(48 * KiB, 64 * KiB);
    const bf16* aligned = reinterpret_cast<const bf16*>(uintptr_t(4096));
    const bf16* unaligned = aligned + 1;
    auto expect = [](const std::string& name, const ClassifierLaunch& L, bool vector, bool prefetch, size_t block,
                     size_t grid, size_t smem) {
        testing::check("classifier_launch " + name, L.vector == vector && L.prefetch == prefetch &&
                           L.block == block && L.grid == grid && L.smem == smem,
                       "got vector %d prefetch %d block %zu grid %zu smem %zu; want %d %d %zu %zu %zu", L.vector,
                       L.prefetch, L.block, L.grid, L.smem, vector, prefetch, block, grid, smem);
    };
    const size_t cap132 = llmc::loop_blocks_cap(132), cap108 = llmc::loop_blocks_cap(108);
    // GPT-2: 6288 packs, 100,608 bytes: fits H100, A100 and the 99 KiB of sm_86 / sm_89 (102,144 of 102,400 bytes
    // per SM).
    expect("Vp=50304 N=4096 H100", llmc::classifier_launch(4096, 50304, aligned, h100, 132), true, true, 1024, cap132,
           100608);
    expect("Vp=50304 N=4096 A100", llmc::classifier_launch(4096, 50304, aligned, a100, 108), true, true, 1024, cap108,
           100608);
    expect("Vp=50304 N=4096 99 KiB", llmc::classifier_launch(4096, 50304, aligned, ada, 84), true, true, 1024,
           llmc::loop_blocks_cap(84), 100608);
    expect("Vp=50304 rows fewer than the SMs", llmc::classifier_launch(100, 50304, aligned, h100, 132), true, true,
           1024, std::min<size_t>(100, cap132), 100608);
    // Beyond the registers: the buffer holds 7 x 1024 slots (114,688 bytes): H100 and A100 only.
    expect("Vp=60008 H100", llmc::classifier_launch(4096, 60008, aligned, h100, 132), true, true, 1024, cap132,
           114688);
    expect("Vp=60008 99 KiB: one block per row", llmc::classifier_launch(4096, 60008, aligned, ada, 84), true, false,
           1024, 4096, 0);
    expect("Vp=50304 48 KiB device: one block per row", llmc::classifier_launch(4096, 50304, aligned, small, 16),
           true, false, 1024, 4096, 0);
    // Small rows: 10 packs in a block of 32; 32 such blocks per SM by registers.
    expect("Vp=80 block 32", llmc::classifier_launch(100000, 80, aligned, h100, 132), true, true, 32,
           llmc::loop_blocks_cap(132 * 32), 160);
    // The scalar path: Vp not a multiple of 8 (V = Vp = 50257) or rows not 16-byte aligned.
    expect("Vp=50257 scalar: one block per row", llmc::classifier_launch(4096, 50257, aligned, h100, 132), false,
           false, 1024, 4096, 0);
    expect("unaligned logits scalar: one block per row", llmc::classifier_launch(64, 50304, unaligned, h100, 132),
           false, false, 1024, 64, 0);
}

// The backend's own call (its device's choice) gives the bits of one block per row, and counts the path it took.
void check_backend(CudaBackend& gpu, size_t N, size_t V, size_t Vp, bool expect_prefetch) {
    Case c(gpu, N, V, Vp);
    const std::vector<Vec> want = c.run(row_per_block(N, Vp), true);
    gpu.upload_floats(c.d_logits, c.logits.data(), N * Vp);
    const size_t vec0 = gpu.vector_path_calls(), sca0 = gpu.scalar_path_calls();
    gpu.fused_classifier(c.d_logits, c.d_losses, c.d_targets, 1.0f / (float)(3 * N), N, V, Vp, true);
    Vec losses(N), out(N * Vp);
    gpu.copy_to_host(losses.data(), c.d_losses, N * sizeof(float));
    gpu.download_floats(out.data(), c.d_logits, N * Vp);
    const ClassifierLaunch L =
        llmc::classifier_launch(N, Vp, c.d_logits, gpu.device_limits(), gpu.sm_count());
    const bool vector = Vp % 8 == 0;
    const bool path_ok = vector ? gpu.vector_path_calls() == vec0 + 1 : gpu.scalar_path_calls() == sca0 + 1;
    testing::check("backend fused_classifier " + c.tag() + (L.prefetch ? " (prefetch kernel, grid " +
                       std::to_string(L.grid) + ")" : " (one block per row)") + ": bitwise equal to one block per row",
                   same_bits(losses, want[0]) && same_bits(out, want[1]) && path_ok && L.prefetch == expect_prefetch,
                   "bits %s, path %s, prefetch %d (want %d)", same_bits(losses, want[0]) && same_bits(out, want[1]) ?
                   "equal" : "differ", path_ok ? "ok" : "wrong", L.prefetch, expect_prefetch);
}

}  // namespace

int main() {
    try {
        CudaBackend gpu;
        std::printf("# cudasim: %d SMs, sm_%d, %zu bytes of shared memory per block\n", gpu.sm_count(),
                    gpu.compute_capability(), gpu.device_limits().smem_per_block);
        check_launch_choice();
        check_prefetch_equals_rows(gpu, 7, 77, 80, 1);       // every row by one block; V % 8 != 0: last pack masked
        check_prefetch_equals_rows(gpu, 7, 77, 80, 2);       // odd rows: block 0 does 4, block 1 does 3
        check_prefetch_equals_rows(gpu, 7, 77, 80, 3);
        check_prefetch_equals_rows(gpu, 7, 77, 80, 7);       // one row per block
        check_prefetch_equals_rows(gpu, 18, 67, 72, 4);      // 2 sequences of T = 9: 4.5 rows per block
        check_prefetch_equals_rows(gpu, 13, 1500, 1536, 4);  // 192 packs per row; the last round has one row
        check_prefetch_equals_rows(gpu, 5, 8000, 8000, 2);   // 1000 packs: a block of 1024, threads without a pack
        // Rows beyond the 7 x 1024 packs kept in registers: a 114,688-byte buffer, which the 99 KiB of sm_86 / sm_89
        // cannot hold (there the backend runs one block per row).
        const DeviceLimits& d = gpu.device_limits();
        const size_t big = 114688 + llmc::kClassifierPrefetchStatic;
        const bool big_fits = big <= d.smem_per_block && big + llmc::kReservedSharedPerBlock <= d.smem_per_sm;
        if (big_fits) check_prefetch_equals_rows(gpu, 3, 60000, 60008, 2);
        check_backend(gpu, 2, 60000, 60008, big_fits);
        check_backend(gpu, 3, 50257, 50304, true);  // GPT-2's row: a 100,608-byte buffer, on every profile
        check_backend(gpu, 5, 77, 80, true);     // rows fewer than the SMs: one row per block
        check_backend(gpu, 5, 77, 77, false);    // the scalar path: one block per row
        check_backend(gpu, 300, 67, 72, true);   // more rows than the SMs (or than CUDASIM_GRID_CAP's blocks)
    } catch (const llmc::Error& e) {
        testing::fail("sim_classifier_prefetch", "%s", e.what());
    }
    return testing::finish();
}
