// CPU backend: the fused classifier (softmax + cross-entropy + its gradient), one row of logits at a time.
//
//   logits (N,Vp): only the V real columns take part; the Vp - V padded columns are ignored (and zeroed in dlogits).
//   losses[i] = -log p[target],  p = softmax(logits[i,:V]),  computed as logsumexp - logit[target] with the row
//   maximum subtracted (stable for any logit magnitude), the sum of exponentials in double.
//   With write_dlogits: logits[i,c] = dloss * (p[c] - [c == target]) for c < V, 0 for c >= V.
#include "cpu_backend.h"

#include <cmath>

#include "../error.h"

namespace llmc {

void CpuBackend::fused_classifier(act_t* logits, float* losses, const int* targets, float dloss,
                                  size_t N, size_t V, size_t Vp, bool write_dlogits) {
    if (V == 0 || V > Vp) fail("fused_classifier: vocabulary V=%zu must be in [1, Vp=%zu]", V, Vp);
    for (size_t i = 0; i < N; i++)
        if (targets[i] < 0 || (size_t)targets[i] >= V)
            fail("fused_classifier: target %d at position %zu is outside the vocabulary [0, %zu)", targets[i], i, V);
#pragma omp parallel for num_threads(num_threads_) schedule(static)
    for (size_t i = 0; i < N; i++) {
        float* row = logits + i * Vp;
        float maxv = -INFINITY;
        for (size_t c = 0; c < V; c++) maxv = row[c] > maxv ? row[c] : maxv;
        double sum = 0.0;
        for (size_t c = 0; c < V; c++) sum += std::exp((double)(row[c] - maxv));
        const size_t tgt = (size_t)targets[i];
        losses[i] = (float)(std::log(sum) - (double)(row[tgt] - maxv));
        if (!write_dlogits) continue;
        const float inv = (float)(1.0 / sum);
        for (size_t c = 0; c < V; c++) {
            float p = std::exp(row[c] - maxv) * inv;
            row[c] = dloss * (p - (c == tgt ? 1.0f : 0.0f));
        }
        for (size_t c = V; c < Vp; c++) row[c] = 0.0f;
    }
}

}  // namespace llmc
