// CPU backend: the fused classifier (softmax + cross-entropy + its gradient), one row of logits at a time, with the
// speedrun's optional soft-cap (formulas in cpu_classifier.h; cap 0 is the plain classifier of llmc/backend.h).
//
//   logits (N,Vp): only the V real columns take part; the Vp - V padded columns are ignored (and zeroed in dlogits).
//   losses[i] = -log p[target],  p = softmax(logits[i,:V]),  computed as logsumexp - logit[target] with the row
//   maximum subtracted (stable for any logit magnitude), the sum of exponentials in double.
//   With write_dlogits: logits[i,c] = dloss * (p[c] - [c == target]) for c < V, 0 for c >= V.
#include "cpu_classifier.h"

#include <cmath>

#include "../error.h"
#include "cpu_backend.h"

namespace llmc {

void softcap_classifier(float* logits, float* losses, const int* targets, float dloss, size_t N, size_t V, size_t Vp,
                        bool write_dlogits, float cap, int num_threads) {
    if (V == 0 || V > Vp) fail("fused_classifier: vocabulary V=%zu must be in [1, Vp=%zu]", V, Vp);
    if (!(cap >= 0.0f)) fail("fused_classifier: soft-cap %g must be >= 0 (0: no cap)", cap);
    for (size_t i = 0; i < N; i++)
        if (targets[i] < 0 || (size_t)targets[i] >= V)
            fail("fused_classifier: target %d at position %zu is outside the vocabulary [0, %zu)", targets[i], i, V);
    auto capped = [cap](float z) { return cap > 0.0f ? cap * std::tanh(z / cap) : z; };
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (size_t i = 0; i < N; i++) {
        float* row = logits + i * Vp;
        float maxv = -INFINITY;
        for (size_t c = 0; c < V; c++) maxv = capped(row[c]) > maxv ? capped(row[c]) : maxv;
        double sum = 0.0;
        for (size_t c = 0; c < V; c++) sum += std::exp((double)(capped(row[c]) - maxv));
        const size_t tgt = (size_t)targets[i];
        losses[i] = (float)(std::log(sum) - (double)(capped(row[tgt]) - maxv));
        if (!write_dlogits) continue;
        const float inv = (float)(1.0 / sum);
        for (size_t c = 0; c < V; c++) {
            const float v = capped(row[c]), p = std::exp(v - maxv) * inv;
            const float slope = cap > 0.0f ? 1.0f - (v / cap) * (v / cap) : 1.0f;
            row[c] = dloss * (p - (c == tgt ? 1.0f : 0.0f)) * slope;
        }
        for (size_t c = V; c < Vp; c++) row[c] = 0.0f;
    }
}

void CpuBackend::fused_classifier(act_t* logits, float* losses, const int* targets, float dloss,
                                  size_t N, size_t V, size_t Vp, bool write_dlogits) {
    ::llmc::softcap_classifier(logits, losses, targets, dloss, N, V, Vp, write_dlogits, 0.0f, num_threads_);
}

}  // namespace llmc
