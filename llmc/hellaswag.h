// HellaSwag-style multiple-choice evaluation in llm.c's file format (dev/data/hellaswag.sh makes the file).
//
// File (little-endian): 256 x int32 header: [0] = 20240522, [1] = 1 (version), [2] = number of examples,
// [3] = the longest example in bytes; then the examples, each a stream of uint16:
//   65535 (start delimiter), the example's size in bytes (these fields included), its index, the label (the right
//   completion), the number of completions (4 for HellaSwag), the context length, the context tokens, then per
//   completion: its length and its tokens.
//
// Scoring (as llm.c and the HellaSwag "acc_norm"-style comparison): each completion is appended to the context and
// run through the model; its score is the mean cross-entropy of the completion's tokens (each predicted from
// everything before it); the prediction is the completion with the lowest mean loss. A row longer than T + 1
// tokens drops context tokens from the left (the completion is always whole).
// Examples are split over ranks (example i on rank i % world) and the count of right answers is all-reduced.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "comm.h"
#include "error.h"
#include "model.h"

namespace llmc {

constexpr int HELLASWAG_MAGIC = 20240522;
constexpr int HELLASWAG_VERSION = 1;

struct McExample {
    int index = 0;
    int label = 0;
    std::vector<int> context;
    std::vector<std::vector<int>> completions;
};

// Reads and validates a whole file; fails naming the file and the example on anything malformed.
std::vector<McExample> read_hellaswag(const std::string& path);
// Writes a file in the same format (tests; the real data comes from dev/data/hellaswag.sh).
void write_hellaswag(const std::string& path, const std::vector<McExample>& examples);

// One completion's row: inputs, targets (T_row each) and the positions scored; returns T_row (<= T).
size_t hellaswag_row(const McExample& ex, size_t completion, size_t T, std::vector<int>* inputs,
                     std::vector<int>* targets, size_t* first_scored);

// Accuracy in [0, 1] over all examples (collective: every rank calls it). Rows are batched up to the model's
// maximum batch; the model's activations are overwritten (call between training steps, not inside one).
template <class Backend>
double evaluate_hellaswag(Model<Backend>& model, Comm& comm, const std::vector<McExample>& examples) {
    Backend& be = model.backend();
    const size_t B = model.max_batch(), T = model.max_seq_len();
    const int rank = comm.rank(), world = comm.world_size();
    double correct = 0;
    std::vector<int> inputs(B * T), targets(B * T), row_in, row_tg;
    for (size_t e = (size_t)rank; e < examples.size(); e += (size_t)world) {
        const McExample& ex = examples[e];
        const size_t n = ex.completions.size();
        std::vector<double> score(n, 0.0);
        for (size_t c0 = 0; c0 < n; c0 += B) {
            const size_t rows = std::min(B, n - c0);
            std::vector<size_t> len(rows), first(rows);
            size_t Tb = 1;
            for (size_t r = 0; r < rows; r++) {
                len[r] = hellaswag_row(ex, c0 + r, T, &row_in, &row_tg, &first[r]);
                Tb = std::max(Tb, len[r]);
            }
            // Rows padded to the longest with token 0: causal attention keeps the padding out of earlier positions.
            for (size_t r = 0; r < rows; r++) {
                hellaswag_row(ex, c0 + r, T, &row_in, &row_tg, &first[r]);
                for (size_t t = 0; t < Tb; t++) {
                    inputs[r * Tb + t] = t < len[r] ? row_in[t] : 0;
                    targets[r * Tb + t] = t < len[r] ? row_tg[t] : 0;
                }
            }
            model.forward(inputs.data(), targets.data(), rows, Tb, 0.0f);
            std::vector<float> losses = model.get_losses();
            for (size_t r = 0; r < rows; r++) {
                double sum = 0;
                for (size_t t = first[r]; t < len[r]; t++) sum += losses[r * Tb + t];
                score[c0 + r] = sum / (double)(len[r] - first[r]);
            }
        }
        const size_t best = (size_t)(std::min_element(score.begin(), score.end()) - score.begin());
        if ((int)best == ex.label) correct += 1;
    }
    DeviceArray<Backend, float> acc(be, 1);
    float host = (float)correct;  // exact: counts below 2^24
    be.copy_to_device(acc.get(), &host, sizeof(float));
    comm.all_reduce(acc.get(), 1, DType::F32, ReduceOp::Sum, be.main_stream());
    be.copy_to_host(&host, acc.get(), sizeof(float));
    return examples.empty() ? 0.0 : (double)host / (double)examples.size();
}

}  // namespace llmc
