// Benchmark: fused causal attention forward and backward (llmc/cuda/attention.cuh, tensor cores), at GPT-2 124M
// shapes: B = 64 by default (the first argument overrides it), T = 1024, NH = 12, hs = 64.
//
// FLOPs, the FlashAttention papers' convention for causal attention (half of the full T x T work):
//   forward   2 products (Q K^T, P V) of B NH T^2 hs multiply-adds, halved:      4 B NH T^2 hs / 2
//   backward  5 products (S, dP, dV, dQ, dK), halved: 2.5 x the forward
// The backward executes 7 (its two kernels each recompute S and P): its own throughput is 7/5 of the figure printed,
// which is the one comparable with other implementations.
//
// Implementations timed in the same call: the kernels this GPU gets (attention_kernels_for), every other compiled
// forward variant that fits its shared memory, and the backward with the other dQ key tile where it fits (the same
// bits: checked); then each backward kernel alone. dev/bench/pytorch_sdpa.py times PyTorch's flash and cuDNN
// attention at the same shapes (dev/gpu/run_checks.sh runs both). The backward that stored dS for a separate dQ
// kernel, and the older kernels, were measured against these on an H200 (docs/benchmarks.md) and are gone.
//
// Before timing, each implementation's outputs are checked against a plain fp32 reference computed on the GPU (one
// warp per row, no tensor cores, no tiling) from the same bf16 inputs: every element within 2^-6 of the reference
// relative to the largest reference value of its tensor, a loose check meant to catch indexing and layout errors (the
// simulator tests in test/sim/test_attention.cpp hold the kernels to bounds derived from the arithmetic).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "llmc/cuda/attention.cuh"

namespace {

using llmc::bf16;
constexpr int kHS = 64;  // GPT-2's head size; the reference kernels are written for it
constexpr int kDims = kHS / 32;  // per lane

// Forward reference: one warp per (b, h, row i); lane l owns dimensions l, l + 32. Writes out (fp32) and the natural
// log-sum-exp of the row (for the backward reference).
__global__ void reference_forward(float* out, float* lse, const bf16* qkv, int B, int T, int NH, float scale) {
    const int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (row >= B * NH * T) return;
    const int i = row % T, h = (row / T) % NH, b = row / (T * NH);
    const size_t C = (size_t)NH * kHS;
    const bf16* q = qkv + ((size_t)b * T + i) * 3 * C + h * kHS;
    float m = -INFINITY, l = 0.0f, o[kDims] = {};
    for (int j = 0; j <= i; j++) {
        const bf16* k = qkv + ((size_t)b * T + j) * 3 * C + C + h * kHS;
        float s = 0.0f;
        for (int d = 0; d < kDims; d++) s += llmc::to_float(q[lane + 32 * d]) * llmc::to_float(k[lane + 32 * d]);
        s = llmc::warp_sum(s) * scale;
        const float m_new = fmaxf(m, s), alpha = expf(m - m_new), p = expf(s - m_new);
        l = l * alpha + p;
        for (int d = 0; d < kDims; d++) o[d] = o[d] * alpha + p * llmc::to_float(k[C + lane + 32 * d]);
        m = m_new;
    }
    for (int d = 0; d < kDims; d++) out[((size_t)b * T + i) * C + h * kHS + lane + 32 * d] = o[d] / l;
    if (lane == 0) lse[row] = m + logf(l);
}

// Backward reference, part 1: one warp per query row i: D_i = sum_j P_ij dP_ij and dQ_i = scale sum_j dS_ij k_j.
__global__ void reference_backward_dq(float* dqkv, float* rowdot, const bf16* qkv, const bf16* dout, const float* lse,
                                      int B, int T, int NH, float scale) {
    const int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (row >= B * NH * T) return;
    const int i = row % T, h = (row / T) % NH, b = row / (T * NH);
    const size_t C = (size_t)NH * kHS;
    const bf16* q = qkv + ((size_t)b * T + i) * 3 * C + h * kHS;
    const bf16* dO = dout + ((size_t)b * T + i) * C + h * kHS;
    float D = 0.0f, dq[kDims] = {};
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j <= i; j++) {
            const bf16* k = qkv + ((size_t)b * T + j) * 3 * C + C + h * kHS;
            float s = 0.0f, dp = 0.0f;
            for (int d = 0; d < kDims; d++) {
                s += llmc::to_float(q[lane + 32 * d]) * llmc::to_float(k[lane + 32 * d]);
                dp += llmc::to_float(dO[lane + 32 * d]) * llmc::to_float(k[C + lane + 32 * d]);
            }
            const float p = expf(llmc::warp_sum(s) * scale - lse[row]);
            dp = llmc::warp_sum(dp);
            if (pass == 0) D += p * dp;
            else
                for (int d = 0; d < kDims; d++) dq[d] += p * (dp - D) * llmc::to_float(k[lane + 32 * d]);
        }
    for (int d = 0; d < kDims; d++) dqkv[((size_t)b * T + i) * 3 * C + h * kHS + lane + 32 * d] = scale * dq[d];
    if (lane == 0) rowdot[row] = D;
}

// Part 2: one warp per key j: dK_j = scale sum_{i >= j} dS_ij q_i, dV_j = sum_{i >= j} P_ij dO_i.
__global__ void reference_backward_dkv(float* dqkv, const bf16* qkv, const bf16* dout, const float* lse,
                                       const float* rowdot, int B, int T, int NH, float scale) {
    const int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (row >= B * NH * T) return;
    const int j = row % T, h = (row / T) % NH, b = row / (T * NH);
    const size_t C = (size_t)NH * kHS;
    const bf16* k = qkv + ((size_t)b * T + j) * 3 * C + C + h * kHS;
    float dk[kDims] = {}, dv[kDims] = {};
    for (int i = j; i < T; i++) {
        const bf16* q = qkv + ((size_t)b * T + i) * 3 * C + h * kHS;
        const bf16* dO = dout + ((size_t)b * T + i) * C + h * kHS;
        float s = 0.0f, dp = 0.0f;
        for (int d = 0; d < kDims; d++) {
            s += llmc::to_float(q[lane + 32 * d]) * llmc::to_float(k[lane + 32 * d]);
            dp += llmc::to_float(dO[lane + 32 * d]) * llmc::to_float(k[C + lane + 32 * d]);
        }
        const int irow = (b * NH + h) * T + i;
        const float p = expf(llmc::warp_sum(s) * scale - lse[irow]), ds = p * (llmc::warp_sum(dp) - rowdot[irow]);
        for (int d = 0; d < kDims; d++) {
            dk[d] += ds * llmc::to_float(q[lane + 32 * d]);
            dv[d] += p * llmc::to_float(dO[lane + 32 * d]);
        }
    }
    for (int d = 0; d < kDims; d++) {
        dqkv[((size_t)b * T + j) * 3 * C + C + h * kHS + lane + 32 * d] = scale * dk[d];
        dqkv[((size_t)b * T + j) * 3 * C + 2 * C + h * kHS + lane + 32 * d] = dv[d];
    }
}

template <class T>
std::vector<T> to_host(const T* d, size_t n) {
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// Largest |got - want| relative to the largest |want|; prints it and returns whether it is within 2^-6.
bool compare(const char* what, const bf16* got_dev, const float* want_dev, size_t n) {
    const std::vector<bf16> got = to_host(got_dev, n);
    const std::vector<float> want = to_host(want_dev, n);
    double scale = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        scale = std::max(scale, (double)std::fabs(want[i]));
        const double e = std::fabs((double)__bfloat162float(got[i]) - want[i]);
        err = std::isnan(e) ? INFINITY : std::max(err, e);
    }
    const bool ok = err <= scale / 64;
    std::printf("# check %-16s max |err| %.3g, max |reference| %.3g: %s\n", what, err, scale, ok ? "ok" : "FAILED");
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        char b64[] = "64";
        char* defaults[] = {argv[0], b64};
        bench::Shape s = argc > 1 ? bench::shape(argc, argv) : bench::shape(2, defaults);
        const size_t B = s.B, T = s.T, C = s.C, NH = s.NH, hs = C / NH;
        if (hs != kHS) llmc::fail("the reference kernels are written for head size %d, not %zu", kHS, hs);
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        bf16 *qkv = bench::alloc_bf16(B * T * 3 * C, 1, -2.0f, 2.0f), *out = bench::alloc_bf16(B * T * C, 2);
        bf16 *dout = bench::alloc_bf16(B * T * C, 3), *dqkv = bench::alloc_bf16(B * T * 3 * C, 4);
        float *lse = bench::alloc_f32(llmc::attention_lse_elems(B, T, NH), 5);
        float *rowdot = bench::alloc_f32(llmc::attention_rowdot_elems(B, T, NH), 6);
        float *ref_out = bench::alloc_f32(B * T * C, 7), *ref_dqkv = bench::alloc_f32(B * T * 3 * C, 8);
        float *ref_lse = bench::alloc_f32(B * NH * T, 9), *ref_rowdot = bench::alloc_f32(B * NH * T, 10);

        const float scale = llmc::attention_scale(hs);
        const unsigned grid = llmc::grid_size(B * NH * T * 32, 256);
        LLMC_LAUNCH(reference_forward, grid, 256, 0, st, ref_out, ref_lse, (const bf16*)qkv, (int)B, (int)T, (int)NH,
                    scale);
        LLMC_LAUNCH(reference_backward_dq, grid, 256, 0, st, ref_dqkv, ref_rowdot, (const bf16*)qkv,
                    (const bf16*)dout, (const float*)ref_lse, (int)B, (int)T, (int)NH, scale);
        LLMC_LAUNCH(reference_backward_dkv, grid, 256, 0, st, ref_dqkv, (const bf16*)qkv, (const bf16*)dout,
                    (const float*)ref_lse, (const float*)ref_rowdot, (int)B, (int)T, (int)NH, scale);

        // The implementations: this GPU's choice first, then the other variants that fit.
        struct Impl {
            std::string name;
            std::function<void(cudaStream_t)> fwd, bwd;
            bool same_bits_as_first;  // checked: the backward's gradients equal the first implementation's bits
        };
        std::vector<Impl> impls;
        const llmc::DeviceLimits limits = llmc::read_device_limits(0);
        const llmc::AttentionKernels mine = llmc::attention_kernels_or_fail(hs, limits);
        auto fwd_with = [=](const llmc::AttentionKernels& k) {
            return [=](cudaStream_t q) { llmc::attention_forward(out, lse, qkv, B, T, C, NH, k, q); };
        };
        auto bwd_with = [=](const llmc::AttentionKernels& k) {
            return [=](cudaStream_t q) { llmc::attention_backward(dqkv, rowdot, dout, qkv, out, lse, B, T, C, NH, k, q); };
        };
        impls.push_back({"this GPU's choice: forward " + std::to_string(mine.fwd_keys) + " keys x " +
                             std::to_string(mine.fwd_stages) + " stages, dQ " + std::to_string(mine.dq_keys) + " keys",
                         fwd_with(mine), bwd_with(mine), false});
        const int fwd_variants[][2] = {{64, 3}, {64, 2}, {32, 2}};
        for (const auto& f : fwd_variants) {
            llmc::AttentionKernels k = mine;
            k.fwd_keys = f[0], k.fwd_stages = f[1];
            if ((k.fwd_keys == mine.fwd_keys && k.fwd_stages == mine.fwd_stages) ||
                llmc::AttentionTiles<kHS>::fwd_smem(k.fwd_keys, k.fwd_stages) > limits.smem_per_block)
                continue;
            impls.push_back({"forward " + std::to_string(k.fwd_keys) + " keys x " + std::to_string(k.fwd_stages) +
                                 " stages", fwd_with(k), bwd_with(k), false});
        }
        llmc::AttentionKernels other_dq = mine;
        other_dq.dq_keys = mine.dq_keys == 64 ? 32 : 64;
        if (llmc::AttentionTiles<kHS>::dq_smem(other_dq.dq_keys) <= limits.smem_per_block)
            impls.push_back({"dQ " + std::to_string(other_dq.dq_keys) + " keys (forward: this GPU's choice)",
                             fwd_with(mine), bwd_with(other_dq), true});

        const double fwd_flops = 4.0 * B * NH * T * T * hs / 2;
        bool ok = true;
        std::vector<bf16> dqkv_mine;  // this GPU's choice's gradients, for the bitwise comparisons
        for (size_t n = 0; n < impls.size(); n++) {
            const Impl& im = impls[n];
            std::printf("# %s\n", im.name.c_str());
            CUDA_CHECK(cudaMemsetAsync(out, 0, B * T * C * sizeof(bf16), st));
            CUDA_CHECK(cudaMemsetAsync(dqkv, 0, B * T * 3 * C * sizeof(bf16), st));
            im.fwd(st);
            im.bwd(st);
            CUDA_CHECK(cudaStreamSynchronize(st));
            ok = compare("forward out", out, ref_out, B * T * C) & ok;
            ok = compare("backward dqkv", dqkv, ref_dqkv, B * T * 3 * C) & ok;
            if (n == 0) dqkv_mine = to_host(dqkv, B * T * 3 * C);
            if (im.same_bits_as_first) {  // every sum keeps its fp32 order: the same bits
                const std::vector<bf16> d = to_host(dqkv, B * T * 3 * C);
                const bool same = std::memcmp(d.data(), dqkv_mine.data(), d.size() * sizeof(bf16)) == 0;
                std::printf("# check backward bits against the first implementation: %s\n",
                            same ? "identical" : "DIFFER");
                ok = same && ok;
            }
            const float fwd_ms = bench::time_ms(im.fwd, st);
            bench::report(dev, "attention_forward (causal, FA convention)", fwd_ms, 0, fwd_flops);
            const float bwd_ms = bench::time_ms(im.bwd, st);
            bench::report(dev, "attention_backward (causal, FA convention)", bwd_ms, 0, 2.5 * fwd_flops);
            bench::report(dev, "attention forward + backward", fwd_ms + bwd_ms, 0, 3.5 * fwd_flops);
            std::printf("# per training step of GPT-2 124M (12 layers): %.2f ms of attention\n",
                        12 * (fwd_ms + bwd_ms));
        }
        // Each backward kernel alone, with this GPU's variants (the dK/dV kernel reads the D the dQ kernel wrote).
        const std::pair<const char*, std::function<void(cudaStream_t)>> kernels[] = {
            {"dQ (and D)", [=](cudaStream_t q) {
                 if (mine.dq_keys == 64)
                     llmc::launch_attention_dq<kHS, 64>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, q);
                 else
                     llmc::launch_attention_dq<kHS, 32>(dqkv, rowdot, dout, qkv, out, lse, B, T, NH, q);
             }},
            {"dK/dV", [=](cudaStream_t q) { llmc::launch_attention_dkv<kHS>(dqkv, dout, qkv, lse, rowdot, B, T, NH, q); }},
        };
        for (const auto& k : kernels) std::printf("# kernel %-12s %.3f ms\n", k.first, bench::time_ms(k.second, st));
        for (void* p : {(void*)qkv, (void*)out, (void*)dout, (void*)dqkv, (void*)lse, (void*)rowdot, (void*)ref_out,
                        (void*)ref_dqkv, (void*)ref_lse, (void*)ref_rowdot})
            CUDA_CHECK(cudaFree(p));
        if (!ok) {
            std::fprintf(stderr, "error: the attention kernels disagree with the reference\n");
            return 1;
        }
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
