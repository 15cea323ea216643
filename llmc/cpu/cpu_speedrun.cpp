// CpuBackend's ops of the speedrun recipe (llmc/backend.h): each forwards to the free function of its file, where the
// math is written (cpu_rmsnorm.h, cpu_qk_rotary.h, cpu_relu2.h, cpu_classifier.h, cpu_muon.h).
#include <cstring>

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

}  // namespace llmc
