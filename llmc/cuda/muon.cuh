// Muon's update of one 2-D parameter matrix on the GPU (the CPU op, with the math, is llmc/cpu/cpu_muon.h): fp32
// gradients, momentum and master weights, bf16 parameters written by stochastic rounding as AdamW does (adamw.cuh).
//
//   momentum:  g = grad_scale grad;  buf = mu buf + g;  u = g + mu buf (Nesterov) or buf     (fp32, in the workspace)
//   O = newton_schulz(u)                                 (newton_schulz.cuh: bf16 GEMMs, fp32 accumulation)
//   apply:     master -= lr sqrt(max(1, rows / cols)) O;  param = stochastic_round_bf16(master, hash(seed, offset + i))
//
// A fused qkv matrix (3C, C) is three C x C matrices for Muon (the records orthogonalise q, k and v separately): one
// call per block of C rows, each with its own seed_offset. Calls on the same stream may share one workspace.
#pragma once

#include "common.cuh"
#include "newton_schulz.cuh"
#include "../speedrun_recipe.h"

namespace llmc {

template <int W>
__global__ void muon_momentum_kernel(float* __restrict__ update, float* __restrict__ buf,
                                     const float* __restrict__ grad, size_t n, float mu, bool nesterov,
                                     float grad_scale) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    float g[W], b[W], u[W];
    load_floats(g, grad + i);
    load_floats(b, buf + i);
LLMC_UNROLL
    for (int e = 0; e < W; e++) {
        g[e] *= grad_scale;
        b[e] = mu * b[e] + g[e];
        u[e] = nesterov ? g[e] + mu * b[e] : b[e];
    }
    store_floats(buf + i, b);
    store_floats(update + i, u);
}

template <int W>
__global__ void muon_apply_kernel(bf16* __restrict__ params, float* __restrict__ master, const bf16* __restrict__ O,
                                  size_t n, float step, uint32_t seed, size_t seed_offset) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    float w[W], o[W];
    load_floats(w, master + i);
    load_floats(o, O + i);
    Pack<bf16, W> p;
LLMC_UNROLL
    for (int e = 0; e < W; e++) {
        w[e] -= step * o[e];
        p[e] = stochastic_round_bf16(w[e], hash_index(seed, seed_offset + i + e));
    }
    store_floats(master + i, w);
    p.store(params + i);
}

// Bytes of workspace muon_update needs for a rows x cols matrix: the fp32 update u and the iteration's buffers.
inline size_t muon_workspace_bytes(size_t rows, size_t cols) {
    return align256(rows * cols * sizeof(float)) + newton_schulz_workspace_bytes(rows, cols);
}

// Returns true when every element-wise kernel took its vector path (n a multiple of 8, aligned pointers).
inline bool muon_update(GemmRunner& gemm, bf16* params, float* master, const float* grads, float* momentum,
                        size_t rows, size_t cols, float lr, float mu, bool nesterov, float grad_scale, uint32_t seed,
                        size_t seed_offset, void* workspace, cudaStream_t stream) {
    const size_t n = rows * cols;
    if (n == 0) return true;
    float* u = static_cast<float*>(workspace);
    const NewtonSchulzBuffers w =
        newton_schulz_buffers(static_cast<char*>(workspace) + align256(n * sizeof(float)), rows, cols);
    bool vec = launch_elementwise(vector_ok(n, kPackBf16, u, momentum, grads), muon_momentum_kernel<kPackBf16>,
                                  muon_momentum_kernel<1>, kPackBf16, n, stream, u, momentum, grads, n, mu, nesterov,
                                  grad_scale);
    bool vec_ns = true;
    const bf16* O = newton_schulz(gemm, u, rows, cols, w, stream, kNewtonSchulzSteps, &vec_ns);
    const float step = lr * muon_update_scale(rows, cols);
    vec = launch_elementwise(vector_ok(n, kPackBf16, params, master, O), muon_apply_kernel<kPackBf16>,
                             muon_apply_kernel<1>, kPackBf16, n, stream, params, master, O, n, step, seed,
                             seed_offset) && vec && vec_ns;
    return vec;
}

}  // namespace llmc
