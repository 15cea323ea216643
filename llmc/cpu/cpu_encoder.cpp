// CPU backend: the token + position embedding.
//
//   forward   out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
//   backward  dwte[inp[b,t],:] += dout[b,t,:]   and   dwpe[t,:] += sum_b dout[b,t,:]   (parameter gradients: +=)
//
// The backward scatter must be deterministic. Several positions can hold the same token, so parallelising over
// positions would race; instead each thread owns a block of channels and walks every position in order, so each
// element of dwte receives its additions in one fixed order whatever the number of threads.
#include "cpu_backend.h"

#include <algorithm>

#include "../error.h"

namespace llmc {

namespace {
void check_tokens(const char* op, const int* inp, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (inp[i] < 0) fail("%s: token %d at position %zu is negative (expected a vocabulary index)", op, inp[i], i);
}
}  // namespace

void CpuBackend::encoder_forward(act_t* out, const int* inp, const act_t* wte, const act_t* wpe,
                                 size_t B, size_t T, size_t C) {
    check_tokens("encoder_forward", inp, B * T);
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t bt = 0; bt < B * T; bt++) {
        const float* e = wte + (size_t)inp[bt] * C;
        float* o = out + bt * C;
        if (!wpe) {
            for (size_t c = 0; c < C; c++) o[c] = e[c];
            continue;
        }
        const float* p = wpe + (bt % T) * C;
        for (size_t c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}

void CpuBackend::encoder_backward(float* dwte, float* dwpe, const act_t* dout, const int* inp,
                                  size_t B, size_t T, size_t C) {
    check_tokens("encoder_backward", inp, B * T);
    // dwpe: one thread per position, summing over b in order.
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t t = 0; t < (dwpe ? T : 0); t++) {
        float* d = dwpe + t * C;
        for (size_t b = 0; b < B; b++) {
            const float* g = dout + (b * T + t) * C;
            for (size_t c = 0; c < C; c++) d[c] += g[c];
        }
    }
    // dwte: blocks of 16 channels (one 64-byte cache line), each block walks all positions in order.
    const size_t blk = 16, nblk = (C + blk - 1) / blk;
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t ib = 0; ib < nblk; ib++) {
        size_t c0 = ib * blk, c1 = std::min(C, c0 + blk);
        for (size_t bt = 0; bt < B * T; bt++) {
            float* d = dwte + (size_t)inp[bt] * C;
            const float* g = dout + bt * C;
            for (size_t c = c0; c < c1; c++) d[c] += g[c];
        }
    }
}

}  // namespace llmc
