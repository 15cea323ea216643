// CPU: the speedrun MLP's activation, ReLU squared (fp32, OpenMP), n elements.
//
//   forward:  out = max(x, 0)^2
//   backward: dout *= 2 max(pre, 0), in place: dout becomes the gradient with respect to the pre-activation (the
//             convention of the GELU backward in matmul_backward)
#pragma once

#include <cstddef>

namespace llmc {

void relu2_forward(float* out, const float* inp, size_t n, int num_threads);
void relu2_backward_inplace(float* dout, const float* pre, size_t n, int num_threads);

}  // namespace llmc
