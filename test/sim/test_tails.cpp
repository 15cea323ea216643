// Shapes and values that exercise the CUDA kernels' tails and numerics, under the simulator:
//   - bias gradients and matmuls with N = 257 and N > 1000 rows (partial row blocks, several column chunks), where a
//     partial sum accumulated in bf16 instead of fp32 leaves the fp32 bound;
//   - layernorm on constant rows (variance 0: only epsilon keeps rstd finite) and low-variance rows (variance about
//     epsilon), with the error bounded from the fp32 two-pass formula;
//   - every op with scratch state run small, then large, then small again: the two small runs must be bitwise equal
//     (a kernel that reads partials or scratch it did not write sees the large run's leftovers);
//   - AdamW over shards of one tensor with non-zero seed offsets: bitwise the update of the whole tensor.
// References are computed in double from the same bf16 inputs. Notation (as in test_kernels.cpp): U = 2^-8 is bf16's
// unit roundoff, u = 2^-24 fp32's; an fp32 sum of n terms is off by at most (n + 2) u times the sum of magnitudes.
#include <cuda_bf16.h>

#include "llmc/bf16.h"
#include "llmc/cuda/cuda_backend.h"
#include "test/fixtures/testing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using llmc::CudaBackend;
using bf16 = __nv_bfloat16;
using Vec = std::vector<float>;

namespace {

constexpr double U = 1.0 / 256.0;
constexpr double u = 0x1p-24;
constexpr double kEps = 1e-5;  // llmc's layernorm epsilon

std::mt19937_64 rng(20251123);

Vec random_bf16(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    Vec v(n);
    for (auto& x : v) x = llmc::bf16_to_float(llmc::float_to_bf16(d(rng)));
    return v;
}

// Device buffers of one check, freed with it.
struct Buffers {
    CudaBackend& be;
    std::vector<void*> ptrs;
    explicit Buffers(CudaBackend& b) : be(b) {}
    ~Buffers() {
        for (void* p : ptrs) be.free(p);
    }
    bf16* bf(const Vec& h) {
        auto* p = (bf16*)be.alloc(h.size() * sizeof(bf16));
        ptrs.push_back(p);
        be.upload_floats(p, h.data(), h.size());
        return p;
    }
    float* f32(const Vec& h) {
        auto* p = (float*)be.alloc(h.size() * sizeof(float));
        ptrs.push_back(p);
        be.copy_to_device(p, h.data(), h.size() * sizeof(float));
        return p;
    }
    Vec get(const bf16* d, size_t n) {
        Vec h(n);
        be.download_floats(h.data(), d, n);
        return h;
    }
    Vec get(const float* d, size_t n) {
        Vec h(n);
        be.copy_to_host(h.data(), d, n * sizeof(float));
        return h;
    }
};

// PASS if |got - want| <= bound elementwise (NaN fails); prints the largest error / bound.
void check_bound(const std::string& name, const Vec& got, const std::vector<double>& want,
                 const std::vector<double>& bound) {
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double e = std::fabs((double)got[i] - want[i]);
        if (!(e <= bound[i])) {
            if (!bad) first = i;
            bad++;
        }
        if (bound[i] > 0) worst = std::max(worst, std::isnan(e) ? INFINITY : e / bound[i]);
    }
    if (bad) {
        testing::fail(name, "%zu of %zu elements outside the bound; first at %zu: got %.9g want %.9g bound %.3g", bad,
                      got.size(), first, (double)got[first], want[first], bound[first]);
        return;
    }
    std::printf("PASS %s (max err/bound %.3f)\n", name.c_str(), worst);
    testing::counts().passed++;
}

bool bitwise_equal(const Vec& a, const Vec& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- bias gradients and matmul backward at long row counts ------------------------------------------------------
// dout random, or with constant columns: then every row block's partial sum rounds the same way, so a partial sum
// accumulated in bf16 is off coherently, far outside the fp32 bound (random signs would let its errors cancel).
Vec gradient_rows(size_t N, size_t OC, bool constant_columns) {
    if (!constant_columns) return random_bf16(N * OC, -1.0f, 1.0f);
    const Vec col = random_bf16(OC, 0.2f, 0.45f);
    Vec v(N * OC);
    for (size_t i = 0; i < v.size(); i++) v[i] = col[i % OC];
    return v;
}

void test_matmul_backward_rows(CudaBackend& be, size_t N, size_t C, size_t OC, bool constant_columns = false) {
    Buffers b(be);
    const Vec dout = gradient_rows(N, OC, constant_columns), inp = random_bf16(N * C, -1.0f, 1.0f);
    const Vec w = random_bf16(OC * C, -1.0f, 1.0f);
    const Vec dw0 = random_bf16(OC * C, -1.0f, 1.0f), db0 = random_bf16(OC, -1.0f, 1.0f);
    bf16 *d_dout = b.bf(dout), *d_inp = b.bf(inp), *d_w = b.bf(w), *d_dinp = b.bf(Vec(N * C, 0.0f));
    float *d_dw = b.f32(dw0), *d_db = b.f32(db0);
    be.matmul_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC);
    const std::string tag = " (N=" + std::to_string(N) + ", C=" + std::to_string(C) + ", OC=" + std::to_string(OC) +
                            (constant_columns ? ", constant columns)" : ")");

    // dbias[o] += sum_n dout[n, o]: two fp32 stages (row blocks, then their partials), each a sum of at most N terms.
    std::vector<double> want(OC), bound(OC);
    for (size_t o = 0; o < OC; o++) {
        double s = db0[o], mag = std::fabs(db0[o]);
        for (size_t n = 0; n < N; n++) s += dout[n * OC + o], mag += std::fabs(dout[n * OC + o]);
        want[o] = s;
        bound[o] = 2.0 * (N + 4) * u * mag;
    }
    check_bound("matmul_backward dbias, fp32 row-block sums" + tag, b.get(d_db, OC), want, bound);

    // dinp = dout @ w (bf16 output: one rounding of the double-accumulated GEMM); dweight += dout^T inp in fp32.
    std::vector<double> wi(N * C), bi(N * C);
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < C; c++) {
            double s = 0, mag = 0;
            for (size_t o = 0; o < OC; o++) s += (double)dout[n * OC + o] * w[o * C + c], mag += std::fabs(dout[n * OC + o] * w[o * C + c]);
            wi[n * C + c] = s;
            bi[n * C + c] = U * std::fabs(s) + 2.0 * (OC + 2) * u * mag;
        }
    check_bound("matmul_backward dinp" + tag, b.get(d_dinp, N * C), wi, bi);
    std::vector<double> ww(OC * C), bw(OC * C);
    for (size_t o = 0; o < OC; o++)
        for (size_t c = 0; c < C; c++) {
            double s = dw0[o * C + c], mag = std::fabs(dw0[o * C + c]);
            for (size_t n = 0; n < N; n++) s += (double)dout[n * OC + o] * inp[n * C + c], mag += std::fabs(dout[n * OC + o] * inp[n * C + c]);
            ww[o * C + c] = s;
            bw[o * C + c] = 2.0 * (N + 4) * u * mag;
        }
    check_bound("matmul_backward dweight" + tag, b.get(d_dw, OC * C), ww, bw);
}

// ---- layernorm forward on constant and low-variance rows --------------------------------------------------------
// Rows: kind 0 random in [-2, 2]; kind 1 constant (variance 0); kind 2 low variance: 1 + k 2^-7 for k in {-1, 0, 1}
// (bf16's spacing at 1), so var ~ 4e-5, a few times epsilon: dropping epsilon changes rstd by ~10%.
//
// Bound, from the fp32 two-pass formula against exact arithmetic on the same inputs:
//   dm = (C + 2) u mean|x|                      (the mean: a sum of C terms and a division)
//   |d_c - (x_c - m)| <= dm + u |x_c - m|        (each centred value)
//   dvar <= 2 dm mean|d| + dm^2 + (C + 4) u mean(d^2) + 2 u (var + eps) (the centred sum of squares, + eps)
//   dr / r <= dvar / (2 (var + eps)) + 2 u      (rsqrt, with its own rounding)
//   out = d r w + b: |dout| <= |w| (|dd| r + |d| r (dr/r)) + 3 u (|d r w| + |b|) + U |out|   (final bf16 rounding)
void test_layernorm_rows(CudaBackend& be, size_t N, size_t C) {
    Buffers b(be);
    Vec x(N * C);
    std::uniform_real_distribution<float> d(-2.0f, 2.0f);
    std::uniform_int_distribution<int> k(-1, 1);
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < C; c++) {
            float v = n % 3 == 0 ? d(rng) : n % 3 == 1 ? 0.75f : 1.0f + (float)k(rng) * 0x1p-7f;
            x[n * C + c] = llmc::bf16_to_float(llmc::float_to_bf16(v));
        }
    const Vec w = random_bf16(C, 0.5f, 1.5f), bias = random_bf16(C, -0.5f, 0.5f);
    bf16 *d_x = b.bf(x), *d_w = b.bf(w), *d_b = b.bf(bias), *d_out = b.bf(Vec(N * C, 0.0f));
    float *d_mean = b.f32(Vec(N, 0.0f)), *d_rstd = b.f32(Vec(N, 0.0f));
    be.layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C);
    std::vector<double> want(N * C), bound(N * C), want_r(N), bound_r(N);
    for (size_t n = 0; n < N; n++) {
        const float* row = &x[n * C];
        double m = 0, mabs = 0;
        for (size_t c = 0; c < C; c++) m += row[c], mabs += std::fabs(row[c]);
        m /= C, mabs /= C;
        double var = 0, dabs = 0;
        for (size_t c = 0; c < C; c++) var += (row[c] - m) * (row[c] - m), dabs += std::fabs(row[c] - m);
        var /= C, dabs /= C;
        const double r = 1.0 / std::sqrt(var + kEps);
        const double dm = (C + 2) * u * mabs;
        const double dvar = 2 * dm * dabs + dm * dm + (C + 4) * u * var + 2 * u * (var + kEps);
        const double rel_r = dvar / (2 * (var + kEps)) + 2 * u;
        want_r[n] = r;
        bound_r[n] = rel_r * r;
        for (size_t c = 0; c < C; c++) {
            const double dc = row[c] - m, o = dc * r * w[c] + bias[c];
            const double ddc = dm + u * std::fabs(dc);
            want[n * C + c] = o;
            bound[n * C + c] = std::fabs(w[c]) * (ddc * r + std::fabs(dc) * r * rel_r) +
                               3 * u * (std::fabs(dc * r * w[c]) + std::fabs(bias[c])) + U * std::fabs(o) * (1 + U);
        }
    }
    const std::string tag = " (N=" + std::to_string(N) + ", C=" + std::to_string(C) +
                            ": random, constant and low-variance rows)";
    check_bound("layernorm_forward out" + tag, b.get(d_out, N * C), want, bound);
    check_bound("layernorm_forward rstd" + tag, b.get(d_rstd, N), want_r, bound_r);
}

// Layernorm backward's parameter gradients over many rows: dbias[c] += sum_n dout, dweight[c] += sum_n dout xhat
// (xhat from the forward's saved fp32 mean and rstd, recomputed here in double: 2 u relative for its two roundings).
void test_layernorm_backward_sums(CudaBackend& be, size_t N, size_t C) {
    Buffers b(be);
    const Vec x = random_bf16(N * C, -2, 2), dy = gradient_rows(N, C, true), w = random_bf16(C, 0.5f, 1.5f);
    bf16 *d_x = b.bf(x), *d_dy = b.bf(dy), *d_w = b.bf(w), *d_out = b.bf(Vec(N * C, 0.0f)),
         *d_dx = b.bf(Vec(N * C, 0.0f));
    float *d_mean = b.f32(Vec(N, 0.0f)), *d_rstd = b.f32(Vec(N, 0.0f)), *d_dw = b.f32(Vec(C, 0.0f)),
          *d_db = b.f32(Vec(C, 0.0f));
    be.layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_w, N, C);
    be.layernorm_backward(d_dx, d_dw, d_db, d_dy, d_x, d_w, d_mean, d_rstd, N, C);
    const Vec mean = b.get(d_mean, N), rstd = b.get(d_rstd, N);
    std::vector<double> wb(C), bb(C), ww(C), bw(C);
    for (size_t c = 0; c < C; c++) {
        double sb = 0, mb = 0, sw = 0, mw = 0;
        for (size_t n = 0; n < N; n++) {
            const double g = dy[n * C + c], xhat = ((double)x[n * C + c] - mean[n]) * rstd[n];
            sb += g, mb += std::fabs(g), sw += g * xhat, mw += std::fabs(g * xhat);
        }
        wb[c] = sb, bb[c] = 2.0 * (N + 4) * u * mb;
        ww[c] = sw, bw[c] = 2.0 * (N + 6) * u * mw + 4 * u * mw;
    }
    const std::string tag = " (N=" + std::to_string(N) + ", C=" + std::to_string(C) + ", constant-column dout)";
    check_bound("layernorm_backward dbias" + tag, b.get(d_db, C), wb, bb);
    check_bound("layernorm_backward dweight" + tag, b.get(d_dw, C), ww, bw);
}

// ---- small, large, small ----------------------------------------------------------------------------------------
// Runs op(size) for the small size, the large one and the small one again (op resets its own inputs and outputs);
// the two small runs must agree bitwise.
void check_small_large_small(const std::string& name, size_t small, size_t large,
                             const std::function<std::vector<Vec>(size_t)>& op) {
    const std::vector<Vec> first = op(small);
    (void)op(large);
    const std::vector<Vec> again = op(small);
    bool same = first.size() == again.size();
    for (size_t i = 0; same && i < first.size(); i++) same = bitwise_equal(first[i], again[i]);
    testing::check(name + ": size " + std::to_string(small) + " gives the same bits before and after size " +
                   std::to_string(large), same, "the small run changed after the large one (stale scratch?)");
}

void test_size_orders(CudaBackend& be) {
    const size_t C = 40, OC = 24, NH = 2;
    check_small_large_small("layernorm_backward", 13, 1031, [&](size_t N) {
        Buffers b(be);
        std::mt19937_64 local(7);  // the same inputs for the same N
        std::swap(local, rng);
        const Vec x = random_bf16(N * C, -2, 2), dy = random_bf16(N * C, -1, 1), w = random_bf16(C, 0.5f, 1.5f);
        std::swap(local, rng);
        bf16 *d_x = b.bf(x), *d_dy = b.bf(dy), *d_w = b.bf(w), *d_out = b.bf(Vec(N * C, 0.0f)),
             *d_dx = b.bf(Vec(N * C, 0.0f));
        float *d_mean = b.f32(Vec(N, 0.0f)), *d_rstd = b.f32(Vec(N, 0.0f)), *d_dw = b.f32(Vec(C, 0.0f)),
              *d_db = b.f32(Vec(C, 0.0f));
        be.layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_w, N, C);
        be.layernorm_backward(d_dx, d_dw, d_db, d_dy, d_x, d_w, d_mean, d_rstd, N, C);
        return std::vector<Vec>{b.get(d_dx, N * C), b.get(d_dw, C), b.get(d_db, C)};
    });
    check_small_large_small("matmul_backward (bias gradient partials)", 13, 4099, [&](size_t N) {
        Buffers b(be);
        std::mt19937_64 local(8);
        std::swap(local, rng);
        const Vec dy = random_bf16(N * OC, -1, 1), x = random_bf16(N * C, -1, 1), w = random_bf16(OC * C, -1, 1);
        std::swap(local, rng);
        bf16 *d_dy = b.bf(dy), *d_x = b.bf(x), *d_w = b.bf(w), *d_dx = b.bf(Vec(N * C, 0.0f));
        float *d_dw = b.f32(Vec(OC * C, 0.0f)), *d_db = b.f32(Vec(OC, 0.0f));
        be.matmul_backward(d_dx, d_dw, d_db, d_dy, d_x, d_w, N, C, OC);
        return std::vector<Vec>{b.get(d_db, OC), b.get(d_dx, N * C)};
    });
    check_small_large_small("sum_into / norm_squared_into (reduction partials)", 37, 530000, [&](size_t n) {
        Buffers b(be);
        Vec x(n);
        // Values from a 64-bit generator (no short period: a wrong index in a later loop iteration reads a different
        // value), multiples of 1/64 in [-0.75, 0.81].
        std::mt19937_64 values(10);
        for (size_t i = 0; i < n; i++) x[i] = (float)(values() % 101) / 64.0f - 0.75f;
        float *d_x = b.f32(x), *d_acc = b.f32(Vec(2, 0.5f));
        be.sum_into(d_acc, d_x, n, 0.25f);
        be.norm_squared_into(d_acc + 1, d_x, n);
        return std::vector<Vec>{b.get(d_acc, 2)};
    });
    check_small_large_small("attention forward and backward (row-dot scratch)", 5, 37, [&](size_t T) {
        Buffers b(be);
        const size_t B = 2, Ca = 32;  // head size 16
        std::mt19937_64 local(9);
        std::swap(local, rng);
        const Vec qkv = random_bf16(B * T * 3 * Ca, -1, 1), dy = random_bf16(B * T * Ca, -1, 1);
        std::swap(local, rng);
        bf16 *d_qkv = b.bf(qkv), *d_dy = b.bf(dy), *d_out = b.bf(Vec(B * T * Ca, 0.0f)),
             *d_dqkv = b.bf(Vec(B * T * 3 * Ca, 0.0f));
        float* d_state = b.f32(Vec(CudaBackend::attention_state_elems(B, T, NH), 0.0f));
        be.attention_forward(d_out, d_state, d_qkv, B, T, Ca, NH);
        be.attention_backward(d_dqkv, d_dy, d_qkv, d_out, d_state, B, T, Ca, NH);
        return std::vector<Vec>{b.get(d_out, B * T * Ca), b.get(d_dqkv, B * T * 3 * Ca)};
    });
    check_small_large_small("encoder_backward (token grouping)", 6, 1500, [&](size_t T) {
        Buffers b(be);
        const size_t B = 2, V = 50, Ce = 8;
        std::vector<int> tokens(B * T);
        for (size_t i = 0; i < tokens.size(); i++) tokens[i] = (int)((i * 31 + 7) % V);
        std::mt19937_64 local(10);
        std::swap(local, rng);
        const Vec dy = random_bf16(B * T * Ce, -1, 1);
        std::swap(local, rng);
        auto* d_tok = (int*)be.alloc(tokens.size() * sizeof(int));
        b.ptrs.push_back(d_tok);
        be.copy_to_device(d_tok, tokens.data(), tokens.size() * sizeof(int));
        bf16* d_dy = b.bf(dy);
        float *d_dwte = b.f32(Vec(V * Ce, 0.0f)), *d_dwpe = b.f32(Vec(T * Ce, 0.0f));
        be.encoder_backward(d_dwte, d_dwpe, d_dy, d_tok, B, T, Ce);
        return std::vector<Vec>{b.get(d_dwte, V * Ce), b.get(d_dwpe, T * Ce)};
    });
}

// ---- AdamW over shards ------------------------------------------------------------------------------------------
void test_adamw_shards(CudaBackend& be) {
    const size_t n = 1000;
    const Vec p0 = random_bf16(n, -1, 1), g = random_bf16(n, -1, 1), m0 = random_bf16(n, -0.1f, 0.1f);
    Vec v0 = random_bf16(n, 0.0f, 0.01f), master0 = p0;
    // Whole tensor, then the same update as pieces [0, k) and [k, n) with seed_offset = k for the second.
    auto update = [&](std::vector<size_t> cuts) {
        Buffers b(be);
        bf16* d_p = b.bf(p0);
        float *d_master = b.f32(master0), *d_g = b.f32(g), *d_m = b.f32(m0), *d_v = b.f32(v0);
        for (size_t i = 0; i + 1 < cuts.size(); i++) {
            const size_t off = cuts[i], len = cuts[i + 1] - cuts[i];
            be.adamw_update(d_p + off, d_master + off, d_g + off, d_m + off, d_v + off, len, 1e-3f, 0.9f, 0.95f,
                            1e-8f, 0.1f, 0.5f, 3, 12345u, off);
        }
        return std::vector<Vec>{b.get(d_p, n), b.get(d_master, n), b.get(d_m, n), b.get(d_v, n)};
    };
    const auto whole = update({0, n});
    for (std::vector<size_t> cuts : {std::vector<size_t>{0, 333, n}, std::vector<size_t>{0, 1, 512, 999, n}}) {
        const auto pieces = update(cuts);
        bool same = true;
        for (size_t i = 0; i < whole.size(); i++) same = same && bitwise_equal(whole[i], pieces[i]);
        std::string desc;
        for (size_t c : cuts) desc += (desc.empty() ? "" : ",") + std::to_string(c);
        testing::check("adamw_update in shards cut at " + desc + " with their offsets as seed_offset: bitwise the "
                       "whole-tensor update (params, master, m, v)", same);
    }
    // Stochastic rounding picks one of the two bf16 neighbours of the new master value: within one ulp of it.
    bool neighbours = true;
    for (size_t i = 0; i < n; i++) {
        const float mv = whole[1][i], p = whole[0][i];
        neighbours = neighbours && std::fabs(p - mv) <= std::fabs(mv) * 2 * U;  // bf16's ulp is 2^-7 relative
    }
    testing::check("adamw_update: each bf16 parameter within one bf16 ulp of its master value", neighbours);
}

}  // namespace

int main() {
    CudaBackend be;
    for (size_t N : {257, 1031}) test_matmul_backward_rows(be, N, 16, 40);
    test_matmul_backward_rows(be, 257, 8, 300);
    test_matmul_backward_rows(be, 4099, 8, 40);
    test_matmul_backward_rows(be, 1031, 8, 40, true);
    test_matmul_backward_rows(be, 4099, 8, 300, true);
    test_layernorm_backward_sums(be, 1031, 40);
    test_layernorm_backward_sums(be, 4099, 24);
    test_layernorm_rows(be, 257, 64);
    test_layernorm_rows(be, 1031, 40);
    test_size_orders(be);
    test_adamw_shards(be);
    return testing::finish();
}
