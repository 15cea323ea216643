// CPU: the fused classifier's rows as a free function, with an optional logit soft-cap (the speedrun's head).
//
// For row i of logits (N, Vp), V real columns, target y:
//   c_j = cap tanh(z_j / cap)   (cap > 0; cap == 0: c_j = z_j, the plain classifier of CpuBackend::fused_classifier)
//   losses[i] = -log softmax(c_{<V})[y] = log(sum_{j<V} exp(c_j - max)) - (c_y - max)    (the sum in double)
//   with write_dlogits: z_j <- dloss (softmax(c)_j - [j == y]) dc_j/dz_j for j < V, 0 for V <= j < Vp, where
//   dc/dz = 1 - tanh^2(z / cap) = 1 - (c / cap)^2 (1 without the cap).
// Targets outside [0, V) are refused with a message.
#pragma once

#include <cstddef>

namespace llmc {

void softcap_classifier(float* logits, float* losses, const int* targets, float dloss, size_t N, size_t V, size_t Vp,
                        bool write_dlogits, float cap, int num_threads);

}  // namespace llmc
