// CPU: Muon's update of one 2-D parameter matrix (rows x cols, row-major; fp32 parameters are their own master copy).
//
//   g = grad_scale grad;   buf = mu buf + g;   u = g + mu buf (Nesterov) or buf
//   O = newton_schulz(u)   (cpu_newton_schulz.h: 5 quintic iterations on u / (||u||_F + eps))
//   param -= lr sqrt(max(1, rows / cols)) O
// mu is the momentum of this step (kMuonMomentum, or muon_momentum_at(step, ...) for the warm-up: the caller's
// choice). No weight decay (the records use none). The records' Nesterov form: buf.mul_(mu).add_(g); g.add_(buf, mu).
// A fused qkv matrix (3C, C) is three matrices for Muon: call this once per C x C block of rows (q, k, v).
#pragma once

#include <cstddef>

namespace llmc {

// Floats of scratch muon_update needs: the update u (rows x cols) and newton_schulz's workspace.
size_t muon_workspace_floats(size_t rows, size_t cols);

void muon_update(float* param, float* momentum_buf, const float* grad, size_t rows, size_t cols, float lr, float mu,
                 bool nesterov, float grad_scale, float* workspace, int num_threads);

}  // namespace llmc
