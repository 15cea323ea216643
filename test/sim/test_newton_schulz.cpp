// Muon on the GPU under the simulator (llmc/cuda/newton_schulz.cuh, llmc/cuda/muon.cuh): the Newton-Schulz iteration
// as cuBLASLt GEMMs on bf16 operands, and the update of one matrix.
//
// - Each iteration from the GPU's own previous iterate (downloaded: exact bf16 values) against the iteration in
//   double, within the elementwise bound of test/fixtures/newton_schulz_bound.h with U = 2^-8 (every GEMM rounds its
//   fp32 result to bf16): wide, tall, square and odd shapes, all five iterations.
// - The normalisation X = bf16(u / (||u||_F + eps)) against double: U |want| + |want| (G(n) / 2 + 4 u32) (the sum of
//   squares on both sides, sqrt, the division and the product), under every thread order (its kernels' threads).
// - newton_schulz (normalise + five iterations) bitwise equal to those steps run one by one, and its output
//   near-orthogonal (the Gram matrix's eigenvalues in [0.3, 1.6], wider than the fp32 test's [0.4, 1.5] by the bf16
//   iterates' rounding).
// - muon_update: the momentum and the Nesterov update against double (4 u32 of the terms), the Newton-Schulz of that
//   update bitwise equal to newton_schulz run on it, the master weights (2 u32 of the terms), and the bf16 parameters
//   bit for bit: the stochastic rounding of the new master value with the bits of hash(seed, seed_offset + i).
// - CudaBackend::muon_update: the free function's bits with a workspace of its own, at a small, a large (the backend
//   grows its workspace) and the small shape again (the grown workspace reused), each counted on its path.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cudasim.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/muon.cuh"
#include "llmc/cuda/newton_schulz.cuh"
#include "llmc/cuda/speedrun_ops.h"
#include "llmc/error.h"
#include "test/fixtures/newton_schulz_bound.h"
#include "test/fixtures/sim_check.h"
#include "test/fixtures/testing.h"

using llmc::CudaBackend;
using llmc::GemmRunner;
using namespace simcheck;
using DVec = std::vector<double>;

namespace {

std::mt19937_64 rng(31337);

Vec randn(size_t n, float scale = 1.0f) { return nsref::random_matrix(rng, n, scale); }
DVec to_d(const Vec& v) { return DVec(v.begin(), v.end()); }
bool same_bits(const Vec& a, const Vec& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
std::string shape(size_t rows, size_t cols) { return std::to_string(rows) + "x" + std::to_string(cols); }

// Normalisation and the five iterations, one by one; then newton_schulz in one call, bitwise the same.
void test_iterations(CudaBackend& gpu, GemmRunner& gemm, size_t rows, size_t cols) {
    const std::string tag = "newton_schulz " + shape(rows, cols);
    const size_t n = rows * cols;
    const bool vector = n % 8 == 0;
    Arena a(gpu);
    const Vec u = randn(n, 0.3f);
    float* d_u = a.f32(n);
    put(gpu, d_u, u);
    void* ws = a.raw(llmc::newton_schulz_workspace_bytes(rows, cols));
    const llmc::NewtonSchulzBuffers w = llmc::newton_schulz_buffers(ws, rows, cols);
    const Outputs f = run_orders_on_path(tag + " normalise", vector, [&](bool& vec) {
        vec = llmc::newton_schulz_normalize(w.x, d_u, w.sumsq, w.partials, n, gpu.stream());
        return Outputs{get(gpu, w.x, n)};
    });
    double ss = 0;
    for (float x : u) ss += (double)x * x;
    Vec want(n);
    Bound b0(n);
    for (size_t i = 0; i < n; i++) {
        want[i] = (float)(u[i] / (std::sqrt(ss) + (double)llmc::kNewtonSchulzEps));
        b0[i] = std::fabs(want[i]) * (U + G(n) / 2 + 4 * u32);
    }
    check_bound(tag + " normalised into bf16", f[0], want, b0);

    Vec prev = f[0];
    bf16 *cur = w.x, *next = w.y;
    for (int k = 1; k <= llmc::kNewtonSchulzSteps; k++) {
        llmc::newton_schulz_step(gemm, next, cur, w.a, w.b, rows, cols, gpu.stream());
        const Vec got = get(gpu, next, n);
        const nsref::StepResult s = nsref::step(to_d(prev), rows, cols, U);
        const Vec yf(s.y.begin(), s.y.end());
        check_bound(tag + " iteration " + std::to_string(k) + " from its own bf16 input", got, yf, s.bound);
        prev = got;
        std::swap(cur, next);
    }
    const bf16* out = llmc::newton_schulz(gemm, d_u, rows, cols, w, gpu.stream());
    testing::check(tag + ": one call is bitwise the five iterations run one by one", same_bits(get(gpu, out, n), prev));

    // Near-orthogonal: extreme eigenvalues of the Gram matrix by power iteration in double.
    const size_t m = std::min(rows, cols), big = std::max(rows, cols);
    const DVec X = rows > cols ? nsref::transpose(to_d(prev), rows, cols) : to_d(prev);
    const DVec S = nsref::matmul(X, false, X, true, m, m, big);
    auto top = [&](double shift) {
        DVec v(m, 1.0), y(m);
        double lambda = 0;
        for (int it = 0; it < 2000; it++) {
            for (size_t i = 0; i < m; i++) {
                double s = shift * v[i];
                for (size_t j = 0; j < m; j++) s += (shift != 0 ? -1.0 : 1.0) * S[i * m + j] * v[j];
                y[i] = s;
            }
            lambda = nsref::frobenius(y) / nsref::frobenius(v);
            for (size_t i = 0; i < m; i++) v[i] = y[i] / nsref::frobenius(y);
        }
        return lambda;
    };
    const double hi = top(0.0), lo = 2.0 - top(2.0);
    testing::check(tag + ": eigenvalues of the Gram matrix of the output in [0.3, 1.6]", lo > 0.3 && hi < 1.6,
                   "[%.3f, %.3f]", lo, hi);
}

// The bf16 value stochastic rounding gives x with the random bits r (common.cuh's rule, written out again).
float stochastic_round(float x, uint32_t r) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    bits = (bits + (r & 0xffffu)) & 0xffff0000u;
    float y;
    std::memcpy(&y, &bits, 4);
    return y;
}

void test_muon_update(CudaBackend& gpu, GemmRunner& gemm, size_t rows, size_t cols, bool nesterov) {
    const std::string tag = "muon_update " + shape(rows, cols) + (nesterov ? " nesterov" : " plain");
    const size_t n = rows * cols, offset = 1000;
    const bool vector = n % 8 == 0;
    const float lr = 0.02f, mu = 0.9f, gs = 0.5f;
    const uint32_t seed = 4242;
    Arena a(gpu);
    const Vec master0 = randn(n), buf0 = randn(n, 0.1f), g = randn(n);
    bf16* d_p = a.bf(n);
    float *d_master = a.f32(n), *d_buf = a.f32(n), *d_g = a.f32(n);
    void* ws = a.raw(llmc::speedrun::muon_workspace_bytes(rows, cols));
    put(gpu, d_g, g);
    const Outputs f = run_orders_on_path(tag, vector, [&](bool& vec) {
        put(gpu, d_master, master0);
        put(gpu, d_buf, buf0);
        vec = llmc::speedrun::muon_update(gemm, d_p, d_master, d_g, d_buf, rows, cols, lr, mu, nesterov, gs, seed,
                                          offset, ws, gpu.stream());
        // The workspace starts with the fp32 update u (muon.cuh).
        return Outputs{get(gpu, d_p, n), get(gpu, d_master, n), get(gpu, d_buf, n), get(gpu, (const float*)ws, n)};
    });
    Vec want_buf(n), want_u(n);
    Bound bb(n), bu(n);
    for (size_t i = 0; i < n; i++) {
        const double gi = (double)gs * g[i], b = (double)mu * buf0[i] + gi;
        want_buf[i] = (float)b;
        bb[i] = 4 * u32 * (std::fabs((double)mu * buf0[i]) + std::fabs(gi));
        want_u[i] = (float)(nesterov ? gi + mu * b : b);
        bu[i] = nesterov ? 4 * u32 * (std::fabs(gi) + mu * (std::fabs((double)mu * buf0[i]) + std::fabs(gi))) : bb[i];
    }
    check_bound(tag + ": momentum buffer = mu buf + g", f[2], want_buf, bb);
    check_bound(tag + ": the update u (Nesterov: g + mu buf)", f[3], want_u, bu);

    // The orthogonalised update: newton_schulz on the same u gives the same bits (checked against double above).
    float* d_u = a.f32(n);
    put(gpu, d_u, f[3]);
    void* ws2 = a.raw(llmc::newton_schulz_workspace_bytes(rows, cols));
    const Vec O = get(gpu, llmc::newton_schulz(gemm, d_u, rows, cols, llmc::newton_schulz_buffers(ws2, rows, cols),
                                            gpu.stream()), n);
    const double step = (double)lr * std::sqrt(std::max(1.0, (double)rows / cols));
    Vec want_master(n), want_p(n);
    Bound bm(n);
    for (size_t i = 0; i < n; i++) {
        want_master[i] = (float)(master0[i] - step * O[i]);
        bm[i] = 2 * u32 * (std::fabs(master0[i]) + std::fabs(step * O[i]));
    }
    check_bound(tag + ": master -= lr sqrt(max(1, rows/cols)) NS(u)", f[1], want_master, bm);
    for (size_t i = 0; i < n; i++) want_p[i] = stochastic_round(f[1][i], llmc::hash_index(seed, offset + i));
    testing::check(tag + ": params = stochastic rounding of master with hash(seed, seed_offset + i)",
                   same_bits(f[0], want_p));
}

// Both sides without GEMM tuning (the heuristic's first algorithm), so that they run the same GEMMs.
void test_backend_muon(size_t rows, size_t cols, CudaBackend& be, GemmRunner& plain) {
    const std::string tag = "CudaBackend::muon_update " + shape(rows, cols);
    const size_t n = rows * cols, offset = 77;
    const bool vector = n % 8 == 0;
    Arena a(be);
    const Vec master0 = randn(n), buf0 = randn(n, 0.1f), g = randn(n);
    bf16* d_p = a.bf(n);
    float *d_master = a.f32(n), *d_buf = a.f32(n), *d_g = a.f32(n);
    void* ws = a.raw(llmc::speedrun::muon_workspace_bytes(rows, cols));
    put(be, d_g, g);
    auto run = [&](bool member) {
        put(be, d_master, master0);
        put(be, d_buf, buf0);
        if (member)
            be.muon_update(d_p, d_master, d_g, d_buf, rows, cols, 0.02f, 0.95f, true, 0.5f, 99, offset);
        else
            llmc::speedrun::muon_update(plain, d_p, d_master, d_g, d_buf, rows, cols, 0.02f, 0.95f, true, 0.5f, 99,
                                        offset, ws, be.stream());
        return Outputs{get(be, d_p, n), get(be, d_master, n), get(be, d_buf, n)};
    };
    const Outputs want = run(false);
    const size_t v0 = be.vector_path_calls(), s0 = be.scalar_path_calls();
    const Outputs got = run(true);
    const size_t dv = be.vector_path_calls() - v0, ds = be.scalar_path_calls() - s0;
    testing::check(tag + ": params, master and momentum bitwise the free function's",
                   same_bits(got[0], want[0]) && same_bits(got[1], want[1]) && same_bits(got[2], want[2]));
    testing::check(tag + (vector ? ": counted on the vector path" : ": counted on the scalar path"),
                   dv == (vector ? 1u : 0u) && ds == (vector ? 0u : 1u), "%zu vector, %zu scalar", dv, ds);
}

}  // namespace

int main() {
    try {
        CudaBackend gpu;
        GemmRunner gemm;
        test_iterations(gpu, gemm, 24, 40);  // wide
        test_iterations(gpu, gemm, 40, 24);  // tall: X^T X and X B
        test_iterations(gpu, gemm, 32, 32);
        test_iterations(gpu, gemm, 20, 36);  // leading dimensions not multiples of 8
        test_iterations(gpu, gemm, 13, 7);   // 91 elements: the scalar paths
        test_muon_update(gpu, gemm, 24, 40, true);
        test_muon_update(gpu, gemm, 40, 24, true);  // scale sqrt(40 / 24)
        test_muon_update(gpu, gemm, 16, 16, false);
        test_muon_update(gpu, gemm, 7, 13, true);
        llmc::BackendOptions untuned;
        untuned.gemm_tuning = false;
        CudaBackend be(untuned);
        GemmRunner plain(false);
        test_backend_muon(7, 13, be, plain);
        test_backend_muon(64, 16, be, plain);  // the MLP's 4C x C at C = 16
        test_backend_muon(7, 13, be, plain);
    } catch (const std::exception& e) {
        testing::fail("newton_schulz", "exception: %s", e.what());
    }
    return testing::finish();
}
