// CPU: Muon's orthogonalisation, the Newton-Schulz iteration, as OpenBLAS sgemm calls (fp32).
//
// X is a rows x cols matrix, row-major. With m = min(rows, cols) and (a, b, c) = kNewtonSchulz{A,B,C}
// (llmc/speedrun_recipe.h), one iteration is the quintic
//   wide (rows <= cols):  A = X X^T (m x m);  B = b A + c A A;  X <- a X + B X
//   tall (rows > cols):   A = X^T X (m x m);  B = b A + c A A;  X <- a X + X B
// The tall case is the wide iteration on X^T written without transposing anything ((B X^T)^T = X B, B symmetric):
// the records transpose a tall matrix first, iterate, and transpose back, which is the same arithmetic. B X with
// B = b A + c A^2 is the records' b (A X) + c A (A X) regrouped: 2 m^2 n + 2 m^3 FLOPs for the three products instead
// of 6 m^2 n (m <= n). The combinations ride on sgemm's beta: B starts as a copy of A (beta = b, alpha = c), the
// next X as a copy of X (beta = a).
// newton_schulz first divides X by (||X||_F + eps), eps = kNewtonSchulzEps, so that every singular value is <= 1.
#pragma once

#include <cstddef>

#include "../speedrun_recipe.h"

namespace llmc {

// Floats of the scratch newton_schulz needs besides X: the next iterate (rows x cols), A and B (m x m each).
size_t newton_schulz_workspace_floats(size_t rows, size_t cols);

// One iteration: Y = the next iterate of X (both rows x cols); A, B: m x m scratch. Y must not alias X.
void newton_schulz_step(float* Y, const float* X, float* A, float* B, size_t rows, size_t cols);

// In place: X <- `steps` iterations from X / (||X||_F + eps). workspace: newton_schulz_workspace_floats floats.
void newton_schulz(float* X, size_t rows, size_t cols, float* workspace, int steps = kNewtonSchulzSteps);

}  // namespace llmc
