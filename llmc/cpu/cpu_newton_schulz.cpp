// CPU: the Newton-Schulz iteration (the math is in cpu_newton_schulz.h).
#include "cpu_newton_schulz.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "../error.h"

namespace llmc {

namespace {
void check_dims(size_t rows, size_t cols) {
    if (rows == 0 || cols == 0 || rows > INT_MAX || cols > INT_MAX || rows * cols > INT_MAX)
        fail("newton_schulz: a %zu x %zu matrix is empty or exceeds BLAS's int dimensions", rows, cols);
}
}  // namespace

size_t newton_schulz_workspace_floats(size_t rows, size_t cols) {
    const size_t m = std::min(rows, cols);
    return rows * cols + 2 * m * m;
}

void newton_schulz_step(float* Y, const float* X, float* A, float* B, size_t rows, size_t cols) {
    check_dims(rows, cols);
    const bool tall = rows > cols;
    const int m = (int)std::min(rows, cols), n = (int)std::max(rows, cols);
    // A = X X^T (wide) or X^T X (tall): m x m.
    if (tall)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, m, n, 1.0f, X, m, X, m, 0.0f, A, m);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, n, 1.0f, X, n, X, n, 0.0f, A, m);
    // B = c A A + b A.
    std::memcpy(B, A, (size_t)m * m * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, kNewtonSchulzC, A, m, A, m, kNewtonSchulzB, B, m);
    // Y = B X + a X (wide) or X B + a X (tall).
    std::memcpy(Y, X, rows * cols * sizeof(float));
    if (tall)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, m, m, 1.0f, X, m, B, m, kNewtonSchulzA, Y, m);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, m, 1.0f, B, m, X, n, kNewtonSchulzA, Y, n);
}

void newton_schulz(float* X, size_t rows, size_t cols, float* workspace, int steps) {
    check_dims(rows, cols);
    const size_t count = rows * cols, m = std::min(rows, cols);
    double ss = 0.0;
    for (size_t i = 0; i < count; i++) ss += (double)X[i] * X[i];
    const float inv = (float)(1.0 / (std::sqrt(ss) + kNewtonSchulzEps));
    for (size_t i = 0; i < count; i++) X[i] *= inv;
    float *cur = X, *next = workspace, *A = workspace + count, *B = A + m * m;
    for (int s = 0; s < steps; s++) {
        newton_schulz_step(next, cur, A, B, rows, cols);
        std::swap(cur, next);
    }
    if (cur != X) std::memcpy(X, cur, count * sizeof(float));
}

}  // namespace llmc
