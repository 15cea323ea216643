// The NanoGPT speedrun recipe's numbers, shared by the CPU ops (llmc/cpu/), the CUDA kernels (llmc/cuda/) and their
// tests: one place for every constant the published records fix (docs/speedrun.md lists them with their sources).
// Host code only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace llmc {

// RMSNorm without a gain: out = x / sqrt(mean(x^2) + eps). The records call PyTorch's rms_norm without eps, which
// takes the machine epsilon of the input type; for fp32 inputs that is 2^-23.
constexpr float kRmsNormEps = 1.1920928955078125e-07f;

// Rotary embeddings: base of the frequencies theta_i = base^(-2i / hs) (llmc/rotary_table.h).
constexpr double kRotaryBase = 10000.0;

// Logit soft-cap: z -> cap * tanh(z / cap) before the softmax.
constexpr float kLogitSoftCap = 30.0f;

// Newton-Schulz: X <- a X + b (X X^T) X + c (X X^T)^2 X, five times, on X / (||X||_F + eps).
constexpr float kNewtonSchulzA = 3.4445f;
constexpr float kNewtonSchulzB = -4.7750f;
constexpr float kNewtonSchulzC = 2.0315f;
constexpr int kNewtonSchulzSteps = 5;
constexpr float kNewtonSchulzEps = 1e-7f;

// Muon: SGD momentum 0.95 with Nesterov, the orthogonalised update scaled by sqrt(max(1, rows / cols)).
constexpr float kMuonMomentum = 0.95f;
inline float muon_update_scale(size_t rows, size_t cols) {
    return (float)std::sqrt(std::max(1.0, (double)rows / (double)cols));
}

// The optional momentum warm-up: linear from `start` at step 0 to `end` at step `warmup_steps` (0-based optimizer
// steps), then `end`. The ShortcutsTweaks record warms up from 0.85 over 500 steps.
inline float muon_momentum_at(int step, int warmup_steps, float start = 0.85f, float end = kMuonMomentum) {
    if (warmup_steps <= 0 || step >= warmup_steps) return end;
    const double frac = (double)std::max(step, 0) / warmup_steps;
    return (float)((1.0 - frac) * start + frac * end);
}

}  // namespace llmc
