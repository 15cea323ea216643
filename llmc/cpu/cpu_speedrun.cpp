// CpuBackend's ops of the speedrun recipe (llmc/backend.h): each forwards to the free function of its file, where the
// math is written (cpu_rmsnorm.h, cpu_qk_rotary.h, cpu_relu2.h, cpu_classifier.h, cpu_muon.h).
#include <omp.h>

#include <cstring>
#include <vector>

#include "cpu_backend.h"
#include "cpu_classifier.h"
#include "cpu_muon.h"
#include "cpu_qk_rotary.h"
#include "cpu_relu2.h"
#include "cpu_rmsnorm.h"

namespace llmc {

void CpuBackend::rmsnorm_forward(act_t* out, float* rstd, const act_t* inp, size_t N, size_t C) {
    ::llmc::rmsnorm_forward(out, rstd, inp, N, C, num_threads_);
}

void CpuBackend::fused_residual_rmsnorm_forward(act_t* residual, act_t* out, float* rstd, const act_t* inp1,
                                                const act_t* inp2, size_t N, size_t C) {
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < N * C; i++) residual[i] = inp1[i] + inp2[i];
    ::llmc::rmsnorm_forward(out, rstd, residual, N, C, num_threads_);
}

void CpuBackend::rmsnorm_backward(act_t* dinp, const act_t* dout, const act_t* inp, const float* rstd, size_t N,
                                  size_t C) {
    ::llmc::rmsnorm_backward(dinp, dout, inp, rstd, N, C, num_threads_);
}

void CpuBackend::qk_norm_rotary_forward(act_t* qkv, float* rstd, const float* table, size_t B, size_t T, size_t C,
                                        size_t NH) {
    ::llmc::qk_norm_rotary_forward(qkv, rstd, table, B, T, C, NH, num_threads_);
}

void CpuBackend::qk_norm_rotary_backward(act_t* dqkv, const act_t* qkv, const float* rstd, const float* table,
                                         size_t B, size_t T, size_t C, size_t NH) {
    ::llmc::qk_norm_rotary_backward(dqkv, qkv, rstd, table, B, T, C, NH, num_threads_);
}

void CpuBackend::relu2_forward(act_t* out, const act_t* inp, size_t n) {
    ::llmc::relu2_forward(out, inp, n, num_threads_);
}

void CpuBackend::relu2_backward_inplace(act_t* dout, const act_t* pre, size_t n) {
    ::llmc::relu2_backward_inplace(dout, pre, n, num_threads_);
}

void CpuBackend::softcap_classifier(act_t* logits, float* losses, const int* targets, float dloss, size_t N,
                                    size_t V, size_t Vp, bool write_dlogits, float cap) {
    ::llmc::softcap_classifier(logits, losses, targets, dloss, N, V, Vp, write_dlogits, cap, num_threads_);
}

// fp32 parameters need no rounding: Muon steps the master, and params is its copy (or the master itself).
void CpuBackend::muon_update(act_t* params, float* master, const float* grads, float* momentum, size_t rows,
                             size_t cols, float lr, float mu, bool nesterov, float grad_scale, uint32_t, size_t) {
    float* workspace = scratch(muon_workspace_floats(rows, cols));
    ::llmc::muon_update(master, momentum, grads, rows, cols, lr, mu, nesterov, grad_scale, workspace, num_threads_);
    if (params != master) std::memcpy(params, master, rows * cols * sizeof(float));
}

// The scalar gradients are sums over every element: per thread in double, then added in thread order (the
// result does not depend on scheduling, static chunks).
namespace {
template <class F>
void sum_per_thread(size_t n, int threads, double* out0, double* out1, F&& body) {
    const int T = threads > 0 ? threads : 1;
    std::vector<double> s0((size_t)T, 0.0), s1((size_t)T, 0.0);
#pragma omp parallel for num_threads(T) schedule(static)
    for (int t = 0; t < T; t++) {
        const size_t a = n * (size_t)t / (size_t)T, b = n * (size_t)(t + 1) / (size_t)T;
        for (size_t i = a; i < b; i++) body(i, s0[(size_t)t], s1[(size_t)t]);
    }
    for (int t = 0; t < T; t++) *out0 += s0[(size_t)t], *out1 += s1[(size_t)t];
}
}  // namespace

void CpuBackend::embed_skip_forward(act_t* out, const act_t* x, const act_t* x0, const act_t* l0, const act_t* l1,
                                    size_t n) {
    const float a = *l0, b = *l1;
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a * x[i] + b * x0[i];
}

void CpuBackend::embed_skip_backward(act_t* dx, act_t* dx0, float* dl0, float* dl1, const act_t* dout,
                                     const act_t* x, const act_t* x0, const act_t* l0, const act_t* l1, size_t n) {
    const float a = *l0, b = *l1;
    double s0 = 0, s1 = 0;
    sum_per_thread(n, num_threads_ > 0 ? num_threads_ : omp_get_max_threads(), &s0, &s1, [&](size_t i, double& t0, double& t1) {
        const float g = dout[i];
        t0 += (double)g * x[i], t1 += (double)g * x0[i];
        dx0[i] += b * g;
        dx[i] = a * g;  // after reading dout[i]: dx may alias dout
    });
    *dl0 += (float)s0, *dl1 += (float)s1;
}

void CpuBackend::value_residual_forward(act_t* qkv, act_t* v_pre, const act_t* qkv1, const act_t* lam, size_t N,
                                        size_t C) {
    const float l = *lam;
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t r = 0; r < N; r++)
        for (size_t c = 0; c < C; c++) {
            float& v = qkv[r * 3 * C + 2 * C + c];
            v_pre[r * C + c] = v;
            v = (1.0f - l) * v + l * qkv1[r * 3 * C + 2 * C + c];
        }
}

void CpuBackend::value_residual_backward(act_t* dqkv, float* dv1, float* dlam, const act_t* v_pre, const act_t* qkv1,
                                         const act_t* lam, size_t N, size_t C) {
    const float l = *lam;
    double s = 0, unused = 0;
    sum_per_thread(N * C, num_threads_ > 0 ? num_threads_ : omp_get_max_threads(), &s, &unused, [&](size_t i, double& t, double&) {
        const size_t r = i / C, c = i % C;
        float& dv = dqkv[r * 3 * C + 2 * C + c];
        t += (double)dv * (qkv1[r * 3 * C + 2 * C + c] - v_pre[i]);
        dv1[i] += l * dv;
        dv = (1.0f - l) * dv;
    });
    *dlam += (float)s;
}

void CpuBackend::value_residual_add(act_t* dqkv, const float* dv1, size_t N, size_t C) {
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t r = 0; r < N; r++)
        for (size_t c = 0; c < C; c++) dqkv[r * 3 * C + 2 * C + c] += dv1[r * C + c];
}

}  // namespace llmc
