// CPU: the speedrun attention's QK-norm and rotary embeddings, in place on the q and k parts of a qkv buffer.
//
// qkv (B, T, 3C): at each position q, k, v side by side, each C wide with NH heads of hs = C / NH channels (the layout
// of the attention op). For q and k of every head at position t (v is left alone):
//   forward:  r = 1 / sqrt(mean(x^2) + eps);  n = x r                       (QK-norm: RMSNorm per head, no gain)
//             y_i = n_i cos + n_{i+h} sin;  y_{i+h} = -n_i sin + n_{i+h} cos,   i < h = hs/2, angle t theta_i
//             x <- y in place; rstd (B*T, 2*NH) saves r: row b*T + t, the NH q heads, then the NH k heads.
//   backward: in place on dqkv's q and k parts (dv untouched), from the forward's output y (still in qkv: attention
//             reads it) and rstd. The rotation R is orthogonal, so n = R^T y and the gradient through it is R^T dy:
//             g = R^T dy;  n = R^T y;  dx = r (g - n mean(g n))       (the RMSNorm backward, cpu_rmsnorm.h)
// table: the rotary table (llmc/rotary_table.h) with at least T rows for head size hs.
#pragma once

#include <cstddef>

namespace llmc {

inline size_t qk_rotary_rstd_floats(size_t B, size_t T, size_t NH) { return B * T * 2 * NH; }

void qk_norm_rotary_forward(float* qkv, float* rstd, const float* table, size_t B, size_t T, size_t C, size_t NH,
                            int num_threads);
void qk_norm_rotary_backward(float* dqkv, const float* qkv, const float* rstd, const float* table, size_t B,
                             size_t T, size_t C, size_t NH, int num_threads);

}  // namespace llmc
