// The speedrun recipe's CUDA ops (declared, with their kernel files, in speedrun_ops.h): the one translation unit
// that includes those kernel files, so that each kernel is compiled once, by nvcc for sm_80 / sm_90 in the normal
// build (and checked there for spills, test/e2e/speedrun_kernels_check_test.sh for 128-bit accesses and resources).
#include "speedrun_ops.h"

#include "muon.cuh"
#include "qk_rotary.cuh"
#include "relu2.cuh"
#include "rmsnorm.cuh"
#include "scalar_mix.cuh"
#include "softcap_classifier.cuh"

namespace llmc {
namespace speedrun {

static_assert(kScalarMixPartials == kMaxReducePartials, "the scalar mixes sum into the reduction partials");

bool rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, size_t N, size_t C, cudaStream_t stream) {
    return llmc::rmsnorm_forward(out, rstd, inp, N, C, stream);
}
bool fused_residual_rmsnorm_forward(bf16* residual, bf16* out, float* rstd, const bf16* inp1, const bf16* inp2,
                                    size_t N, size_t C, cudaStream_t stream) {
    return llmc::fused_residual_rmsnorm_forward(residual, out, rstd, inp1, inp2, N, C, stream);
}
bool rmsnorm_backward(bf16* dinp, const bf16* dout, const bf16* inp, const float* rstd, size_t N, size_t C,
                      cudaStream_t stream) {
    return llmc::rmsnorm_backward(dinp, dout, inp, rstd, N, C, stream);
}
bool qk_norm_rotary_forward(bf16* qkv, float* rstd, const float* table, size_t B, size_t T, size_t C, size_t NH,
                            cudaStream_t stream) {
    return llmc::qk_norm_rotary_forward(qkv, rstd, table, B, T, C, NH, stream);
}
bool qk_norm_rotary_backward(bf16* dqkv, const bf16* qkv, const float* rstd, const float* table, size_t B, size_t T,
                             size_t C, size_t NH, cudaStream_t stream) {
    return llmc::qk_norm_rotary_backward(dqkv, qkv, rstd, table, B, T, C, NH, stream);
}
bool relu2_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {
    return llmc::relu2_forward(out, inp, n, stream);
}
bool relu2_backward_inplace(bf16* dout, const bf16* pre, size_t n, cudaStream_t stream) {
    return llmc::relu2_backward_inplace(dout, pre, n, stream);
}
bool softcap_classifier(bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V, size_t Vp,
                        bool write_dlogits, float cap, const DeviceLimits& limits, int sm_count, cudaStream_t stream) {
    return llmc::softcap_classifier(logits, losses, targets, dloss, N, V, Vp, write_dlogits, cap, limits, sm_count,
                                    stream);
}
bool embed_skip_forward(bf16* out, const bf16* x, const bf16* x0, const bf16* l0, const bf16* l1, size_t n,
                        cudaStream_t stream) {
    return llmc::embed_skip_forward(out, x, x0, l0, l1, n, stream);
}
bool embed_skip_backward(bf16* dx, bf16* dx0, float* dl0, float* dl1, const bf16* dout, const bf16* x, const bf16* x0,
                         const bf16* l0, const bf16* l1, size_t n, float* partials, cudaStream_t stream) {
    return llmc::embed_skip_backward(dx, dx0, dl0, dl1, dout, x, x0, l0, l1, n, partials, stream);
}
bool value_residual_forward(bf16* qkv, bf16* v_pre, const bf16* qkv1, const bf16* lam, size_t N, size_t C,
                            cudaStream_t stream) {
    return llmc::value_residual_forward(qkv, v_pre, qkv1, lam, N, C, stream);
}
bool value_residual_backward(bf16* dqkv, float* dv1, float* dlam, const bf16* v_pre, const bf16* qkv1,
                             const bf16* lam, size_t N, size_t C, float* partials, cudaStream_t stream) {
    return llmc::value_residual_backward(dqkv, dv1, dlam, v_pre, qkv1, lam, N, C, partials, stream);
}
bool value_residual_add(bf16* dqkv, const float* dv1, size_t N, size_t C, cudaStream_t stream) {
    return llmc::value_residual_add(dqkv, dv1, N, C, stream);
}
size_t muon_workspace_bytes(size_t rows, size_t cols) { return llmc::muon_workspace_bytes(rows, cols); }
bool muon_update(GemmRunner& gemm, bf16* params, float* master, const float* grads, float* momentum, size_t rows,
                 size_t cols, float lr, float mu, bool nesterov, float grad_scale, uint32_t seed, size_t seed_offset,
                 void* workspace, cudaStream_t stream) {
    return llmc::muon_update(gemm, params, master, grads, momentum, rows, cols, lr, mu, nesterov, grad_scale, seed,
                             seed_offset, workspace, stream);
}

}  // namespace speedrun
}  // namespace llmc
