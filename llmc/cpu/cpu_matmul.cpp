// CPU backend: the linear layer (OpenBLAS sgemm) and GELU.
//
//   forward   out (N,OC) = inp (N,C) @ w^T + bias,  w is (OC,C) row-major;  with pre_gelu: pre_gelu = that, out = gelu
//   backward  dinp (N,C) = dout @ w               (activation gradient: written)
//             dw (OC,C)  += dout^T @ inp          (parameter gradients: accumulated, sgemm with beta = 1)
//             dbias (OC) += column sums of dout
//             with pre_gelu: first dout *= gelu'(pre_gelu), in place.
//
// GELU is the tanh approximation gelu(x) = 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2/pi), whose derivative is
// gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) k (1 + 3 * 0.044715 x^2),  u = k (x + 0.044715 x^3).
#include "cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "../error.h"

namespace llmc {

namespace {
// BLAS takes int dimensions.
void check_dims(const char* op, size_t N, size_t C, size_t OC) {
    if (N > INT_MAX || C > INT_MAX || OC > INT_MAX || N * C > SIZE_MAX / 4)
        fail("%s: shape N=%zu C=%zu OC=%zu exceeds BLAS's int dimensions", op, N, C, OC);
}

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

inline float gelu(float x) { return 0.5f * x * (1.0f + std::tanh(kGeluK * (x + kGeluA * x * x * x))); }
inline float gelu_grad(float x) {
    float t = std::tanh(kGeluK * (x + kGeluA * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluA * x * x);
}
}  // namespace

void CpuBackend::gelu_forward(act_t* out, const act_t* inp, size_t n) {
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = gelu(inp[i]);
}

void CpuBackend::matmul_forward(act_t* out, const act_t* inp, const act_t* w, const act_t* bias,
                                size_t N, size_t C, size_t OC, act_t* pre_gelu) {
    check_dims("matmul_forward", N, C, OC);
    float* dst = pre_gelu ? pre_gelu : out;
    // Start from the bias (or zero) in every row, then dst += inp @ w^T.
    if (bias) {
#pragma omp parallel for num_threads(num_threads_) schedule(static)
        for (size_t i = 0; i < N; i++) std::copy(bias, bias + OC, dst + i * OC);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)OC, (int)C, 1.0f, inp, (int)C, w, (int)C,
                bias ? 1.0f : 0.0f, dst, (int)OC);
    if (pre_gelu) gelu_forward(out, pre_gelu, N * OC);
}

void CpuBackend::matmul_backward(act_t* dinp, float* dweight, float* dbias, act_t* dout, const act_t* inp,
                                 const act_t* w, size_t N, size_t C, size_t OC, const act_t* pre_gelu,
                                 const act_t* dinp_pre_gelu) {
    check_dims("matmul_backward", N, C, OC);
    if (pre_gelu) {
#pragma omp parallel for num_threads(num_threads_) schedule(static)
        for (size_t i = 0; i < N * OC; i++) dout[i] *= gelu_grad(pre_gelu[i]);
    }
    // dinp (N,C) = dout (N,OC) @ w (OC,C)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)C, (int)OC, 1.0f, dout, (int)OC, w, (int)C,
                0.0f, dinp, (int)C);
    if (dinp_pre_gelu) {
#pragma omp parallel for num_threads(num_threads_) schedule(static)
        for (size_t i = 0; i < N * C; i++) dinp[i] *= gelu_grad(dinp_pre_gelu[i]);
    }
    // dweight (OC,C) += dout^T (OC,N) @ inp (N,C)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)OC, (int)C, (int)N, 1.0f, dout, (int)OC, inp, (int)C,
                1.0f, dweight, (int)C);
    if (dbias) {
        // Blocks of 16 columns, all rows in order, double accumulators: deterministic and accurate.
        const size_t blk = 16, nblk = (OC + blk - 1) / blk;
#pragma omp parallel for num_threads(num_threads_) schedule(static)
        for (size_t ib = 0; ib < nblk; ib++) {
            size_t o0 = ib * blk, o1 = std::min(OC, o0 + blk);
            double s[blk] = {};
            for (size_t i = 0; i < N; i++) {
                const float* g = dout + i * OC;
                for (size_t o = o0; o < o1; o++) s[o - o0] += (double)g[o];
            }
            for (size_t o = o0; o < o1; o++) dbias[o] += (float)s[o - o0];
        }
    }
}

}  // namespace llmc
