// Muon's orthogonalisation on the GPU: the Newton-Schulz iteration as cuBLASLt GEMMs (GemmRunner, matmul.cuh) on
// bf16 operands with fp32 accumulation, the records' precision. The math, and the wide / tall forms, are those of the
// CPU op (llmc/cpu/cpu_newton_schulz.h); X is rows x cols, row-major, m = min(rows, cols):
//
//   normalise:  X = bf16(u / (||u||_F + eps))          u fp32; ||u||^2 by reduce.cuh's sum of squares (fixed tree)
//   iteration:  A = X X^T (wide) or X^T X (tall)                                 GEMM, bf16 out
//               B = c A A + b A            (B starts as a copy of A: GEMM alpha c, beta b), bf16 out
//               Y = B X + a X (wide) or X B + a X (tall)   (Y starts as a copy of X: GEMM beta a), bf16 out
// Each GEMM rounds its fp32 result to bf16 once: the combinations ride in cuBLASLt's alpha / beta (computed in fp32
// before that rounding) instead of separate element-wise passes; the copies that seed C are device-to-device copies
// of m^2 and rows x cols bf16. Nothing is transposed in memory: the tall form is the wide one with the operands'
// transposes (cuBLASLt's op flags). FLOPs per iteration: 2 m^2 n (A, symmetric but computed in full) + 2 m^3 (A A)
// + 2 m^2 n (B X), n = max(rows, cols).
#pragma once

#include "common.cuh"
#include "matmul.cuh"
#include "reduce.cuh"
#include "../speedrun_recipe.h"

namespace llmc {

// Row-major D (M x N) = alpha op(P) op(Q) + beta D, P M x K (stored K x M when tp), Q K x N (stored N x K when tq).
// cuBLASLt is column-major: a row-major matrix is its transpose there, so this is D^T = op(Q)^T op(P)^T.
inline void gemm_row_major(GemmRunner& gemm, bf16* D, const bf16* P, bool tp, const bf16* Q, bool tq, size_t M,
                           size_t N, size_t K, float alpha, float beta, cudaStream_t stream) {
    GemmArgs g;
    g.d = D; g.a = Q; g.b = P;
    g.trans_a = tq; g.trans_b = tp;
    g.m = N; g.n = M; g.k = K;
    g.lda = tq ? K : N; g.ldb = tp ? M : K; g.ldd = N;
    g.alpha = alpha; g.beta = beta;
    gemm.run(g, stream);
}

template <int W>
__global__ void newton_schulz_normalize_kernel(bf16* __restrict__ x, const float* __restrict__ u,
                                               const float* __restrict__ sumsq, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= n) return;
    const float inv = 1.0f / (sqrtf(*sumsq) + kNewtonSchulzEps);
    float v[W];
    load_floats(v, u + i);
LLMC_UNROLL
    for (int e = 0; e < W; e++) v[e] *= inv;
    store_floats(x + i, v);
}

// The iteration's buffers, carved from one workspace (each piece 256-byte aligned: the GEMMs' declared alignment).
struct NewtonSchulzBuffers {
    bf16 *x = nullptr, *y = nullptr;  // rows x cols: the iterate and the next one
    bf16 *a = nullptr, *b = nullptr;  // m x m
    float* sumsq = nullptr;           // one float
    float* partials = nullptr;        // kMaxReducePartials floats (the norm's first stage)
};

inline size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

inline size_t newton_schulz_workspace_bytes(size_t rows, size_t cols) {
    const size_t m = rows < cols ? rows : cols;
    return 2 * align256(rows * cols * sizeof(bf16)) + 2 * align256(m * m * sizeof(bf16)) + align256(sizeof(float)) +
           align256(kMaxReducePartials * sizeof(float));
}

inline NewtonSchulzBuffers newton_schulz_buffers(void* workspace, size_t rows, size_t cols) {
    const size_t m = rows < cols ? rows : cols;
    char* p = static_cast<char*>(workspace);
    auto take = [&](size_t bytes) {
        char* q = p;
        p += align256(bytes);
        return q;
    };
    NewtonSchulzBuffers w;
    w.x = reinterpret_cast<bf16*>(take(rows * cols * sizeof(bf16)));
    w.y = reinterpret_cast<bf16*>(take(rows * cols * sizeof(bf16)));
    w.a = reinterpret_cast<bf16*>(take(m * m * sizeof(bf16)));
    w.b = reinterpret_cast<bf16*>(take(m * m * sizeof(bf16)));
    w.sumsq = reinterpret_cast<float*>(take(sizeof(float)));
    w.partials = reinterpret_cast<float*>(take(kMaxReducePartials * sizeof(float)));
    return w;
}

// x = bf16(u / (||u||_F + eps)); returns true when the element-wise kernels took their vector paths.
inline bool newton_schulz_normalize(bf16* x, const float* u, float* sumsq, float* partials, size_t n,
                                    cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(sumsq, 0, sizeof(float), stream));
    const bool vec_norm = reduce_into<true>(sumsq, u, n, 1.0f, partials, stream);
    const bool vec = launch_elementwise(vector_ok(n, kPackBf16, x, u), newton_schulz_normalize_kernel<kPackBf16>,
                                        newton_schulz_normalize_kernel<1>, kPackBf16, n, stream, x, u,
                                        (const float*)sumsq, n);
    return vec && vec_norm;
}

// One iteration: y = the next iterate of x (rows x cols); a, b: m x m scratch. y must not alias x.
inline void newton_schulz_step(GemmRunner& gemm, bf16* y, const bf16* x, bf16* a, bf16* b, size_t rows, size_t cols,
                               cudaStream_t stream) {
    const bool tall = rows > cols;
    const size_t m = tall ? cols : rows, n = tall ? rows : cols;
    if (tall)
        gemm_row_major(gemm, a, x, true, x, false, m, m, n, 1.0f, 0.0f, stream);  // A = X^T X
    else
        gemm_row_major(gemm, a, x, false, x, true, m, m, n, 1.0f, 0.0f, stream);  // A = X X^T
    CUDA_CHECK(cudaMemcpyAsync(b, a, m * m * sizeof(bf16), cudaMemcpyDeviceToDevice, stream));
    gemm_row_major(gemm, b, a, false, a, false, m, m, m, kNewtonSchulzC, kNewtonSchulzB, stream);  // B = c A A + b A
    CUDA_CHECK(cudaMemcpyAsync(y, x, rows * cols * sizeof(bf16), cudaMemcpyDeviceToDevice, stream));
    if (tall)
        gemm_row_major(gemm, y, x, false, b, false, n, m, m, 1.0f, kNewtonSchulzA, stream);  // Y = X B + a X
    else
        gemm_row_major(gemm, y, b, false, x, false, m, n, m, 1.0f, kNewtonSchulzA, stream);  // Y = B X + a X
}

// The orthogonalised u (rows x cols, fp32): normalise into w.x, then `steps` iterations between w.x and w.y.
// Returns the buffer holding the result (w.x or w.y); *vector (if given) whether the element-wise kernels took their
// vector paths.
inline bf16* newton_schulz(GemmRunner& gemm, const float* u, size_t rows, size_t cols, const NewtonSchulzBuffers& w,
                           cudaStream_t stream, int steps = kNewtonSchulzSteps, bool* vector = nullptr) {
    if (rows == 0 || cols == 0) fail("newton_schulz: empty %zu x %zu matrix", rows, cols);
    const bool vec = newton_schulz_normalize(w.x, u, w.sumsq, w.partials, rows * cols, stream);
    if (vector) *vector = vec;
    bf16 *cur = w.x, *next = w.y;
    for (int s = 0; s < steps; s++) {
        newton_schulz_step(gemm, next, cur, w.a, w.b, rows, cols, stream);
        bf16* t = cur;
        cur = next;
        next = t;
    }
    return cur;
}

}  // namespace llmc
