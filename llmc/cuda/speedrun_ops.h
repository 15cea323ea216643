// The speedrun recipe's CUDA ops, compiled once in speedrun_ops.cu (nvcc in the normal build; g++ against the
// simulator in the tests), as free functions: the entry points the CUDA backend's members for the recipe call
// (cuda_backend.cu; docs/speedrun.md, "What the wiring needs"). Each forwards to the launcher of its kernel file,
// where the math and the conventions are written; each returns true when its memory-bound kernels took their 16-byte
// vector paths.
//
//   rmsnorm.cuh             rmsnorm_forward / rmsnorm_backward            RMSNorm without a gain (dinp +=)
//                           fused_residual_rmsnorm_forward                residual = inp1 + inp2, then its RMSNorm
//   qk_rotary.cuh           qk_norm_rotary_forward / _backward            QK-norm + rotary, in place on qkv / dqkv
//   relu2.cuh               relu2_forward / relu2_backward_inplace        ReLU^2
//   softcap_classifier.cuh  softcap_classifier                            the fused classifier on cap tanh(z / cap)
//   muon.cuh                muon_update (+ muon_workspace_bytes)          Muon on one matrix, Newton-Schulz as GEMMs
//   scalar_mix.cuh          embed_skip_forward / _backward                the embedding skip l0 x + l1 x0
//                           value_residual_forward / _backward / _add     the value residual (1 - lam) v + lam v1
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "device_limits.h"

namespace llmc {

class GemmRunner;

namespace speedrun {

using bf16 = __nv_bfloat16;

bool rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, size_t N, size_t C, cudaStream_t stream);
bool fused_residual_rmsnorm_forward(bf16* residual, bf16* out, float* rstd, const bf16* inp1, const bf16* inp2,
                                    size_t N, size_t C, cudaStream_t stream);
bool rmsnorm_backward(bf16* dinp, const bf16* dout, const bf16* inp, const float* rstd, size_t N, size_t C,
                      cudaStream_t stream);
bool qk_norm_rotary_forward(bf16* qkv, float* rstd, const float* table, size_t B, size_t T, size_t C, size_t NH,
                            cudaStream_t stream);
bool qk_norm_rotary_backward(bf16* dqkv, const bf16* qkv, const float* rstd, const float* table, size_t B, size_t T,
                             size_t C, size_t NH, cudaStream_t stream);
bool relu2_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream);
bool relu2_backward_inplace(bf16* dout, const bf16* pre, size_t n, cudaStream_t stream);
bool softcap_classifier(bf16* logits, float* losses, const int* targets, float dloss, size_t N, size_t V, size_t Vp,
                        bool write_dlogits, float cap, const DeviceLimits& limits, int sm_count, cudaStream_t stream);
size_t muon_workspace_bytes(size_t rows, size_t cols);
// The scalar mixes' backward ops reduce into `partials`, kScalarMixPartials floats of scratch (the backend passes its
// reduction partials: reduce.cuh's kMaxReducePartials, asserted equal in speedrun_ops.cu).
constexpr size_t kScalarMixPartials = 1024;
bool embed_skip_forward(bf16* out, const bf16* x, const bf16* x0, const bf16* l0, const bf16* l1, size_t n,
                        cudaStream_t stream);
bool embed_skip_backward(bf16* dx, bf16* dx0, float* dl0, float* dl1, const bf16* dout, const bf16* x, const bf16* x0,
                         const bf16* l0, const bf16* l1, size_t n, float* partials, cudaStream_t stream);
bool value_residual_forward(bf16* qkv, bf16* v_pre, const bf16* qkv1, const bf16* lam, size_t N, size_t C,
                            cudaStream_t stream);
bool value_residual_backward(bf16* dqkv, float* dv1, float* dlam, const bf16* v_pre, const bf16* qkv1,
                             const bf16* lam, size_t N, size_t C, float* partials, cudaStream_t stream);
bool value_residual_add(bf16* dqkv, const float* dv1, size_t N, size_t C, cudaStream_t stream);
bool muon_update(GemmRunner& gemm, bf16* params, float* master, const float* grads, float* momentum, size_t rows,
                 size_t cols, float lr, float mu, bool nesterov, float grad_scale, uint32_t seed, size_t seed_offset,
                 void* workspace, cudaStream_t stream);

}  // namespace speedrun
}  // namespace llmc
