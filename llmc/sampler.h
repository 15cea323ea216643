// Host-side sampling of the next token from one row of logits: temperature, top-k, and our own seeded RNG.
//
//   SplitMix64 rng(seed);
//   int next = sample_token(logits, V, /*temperature=*/1.0f, /*top_k=*/40, rng);
//
// p_i = softmax(logits_i / temperature) over the top_k largest logits (all V when top_k <= 0 or >= V), computed in
// double with the maximum subtracted; the token is the first i whose cumulative probability exceeds u ~ U[0, 1).
// temperature <= 0 or top_k == 1 is greedy (argmax; the lowest id wins ties). Pass the real vocabulary size V (50257),
// not the padded one, so padding rows are never sampled. The same seed gives the same sequence on every machine.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "error.h"
#include "rng.h"

namespace llmc {

// A SplitMix64 stream (llmc/rng.h) seeded directly with its state: SplitMix64(state()) continues the stream, which is
// what a checkpoint needs.
class SplitMix64 {
public:
    explicit SplitMix64(uint64_t seed = 0) : state_(seed) {}
    uint64_t next_u64() { return splitmix64(state_); }
    // Uniform in [0, 1) with 53 random bits (every value a multiple of 2^-53).
    double uniform() { return (double)(next_u64() >> 11) * 0x1.0p-53; }
    uint64_t state() const { return state_; }

private:
    uint64_t state_;
};

inline int argmax_token(const float* logits, size_t V) {
    size_t best = 0;
    for (size_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return (int)best;
}

inline int sample_token(const float* logits, size_t V, float temperature, int top_k, SplitMix64& rng) {
    if (V == 0) fail("sample_token: empty vocabulary");
    for (size_t i = 0; i < V; i++)
        if (!std::isfinite(logits[i])) fail("sample_token: logit %zu is %f (expected a finite value)", i, logits[i]);
    if (temperature <= 0.0f || top_k == 1) return argmax_token(logits, V);
    size_t k = (top_k <= 0 || (size_t)top_k >= V) ? V : (size_t)top_k;
    // Candidate ids: the k largest logits, in decreasing order (ties: lower id first, so results are reproducible).
    std::vector<int> ids(V);
    std::iota(ids.begin(), ids.end(), 0);
    auto higher = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    if (k < V) std::partial_sort(ids.begin(), ids.begin() + (ptrdiff_t)k, ids.end(), higher);
    ids.resize(k);
    double maxv = logits[ids[0]];
    if (k == V) for (int id : ids) maxv = std::max(maxv, (double)logits[id]);
    std::vector<double> p(k);
    double sum = 0;
    for (size_t i = 0; i < k; i++) sum += p[i] = std::exp(((double)logits[ids[i]] - maxv) / temperature);
    double u = rng.uniform() * sum, acc = 0;
    for (size_t i = 0; i < k; i++) {
        acc += p[i];
        if (u < acc) return ids[i];
    }
    return ids[k - 1];  // u rounded up to the total
}

}  // namespace llmc
