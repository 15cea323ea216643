// The run's evaluations at each -v: the validation loss, and with --hellaswag the multiple-choice accuracy
// (llmc/hellaswag.h). Collective: every rank evaluates together.
#pragma once

#include <cstddef>
#include <vector>

#include "backend.h"
#include "comm.h"
#include "dataloader.h"
#include "hellaswag.h"
#include "model.h"

namespace llmc {

struct Evaluation {
    float val_loss = 0;
    bool has_hellaswag = false;
    double hellaswag_acc = 0;
};

template <class Backend>
class Validator {
public:
    // `windows` windows of -d tokens of `val` (DataLoader's evaluation pass), each `grad_accum` batches of B x T.
    // `loss_acc`: one device float, the trainer's loss accumulator (free between steps; the memory plan,
    // llmc/memory_plan.h, counts one).
    Validator(Backend& be, Comm& comm, DataLoader& val, size_t windows, size_t grad_accum, size_t B, size_t T,
              float* loss_acc, std::vector<McExample> hellaswag)
        : be_(be), comm_(comm), val_(val), windows_(windows), grad_accum_(grad_accum), T_(T), acc_(loss_acc),
          inputs_(B * T), targets_(B * T), hellaswag_(std::move(hellaswag)) {}

    Evaluation evaluate(Model<Backend>& model) {
        Evaluation e;
        e.val_loss = loss(model);
        e.has_hellaswag = !hellaswag_.empty();
        if (e.has_hellaswag) e.hellaswag_acc = evaluate_hellaswag(model, comm_, hellaswag_);
        return e;
    }

private:
    // Mean loss per token over the windows (the same sequences for any world size). A shard's last window may be
    // partial, so ranks may score fewer than B sequences, or none: each adds its losses scaled by 1 / (tokens scored
    // by all ranks), and the sum over ranks is the mean over every scored token.
    float loss(Model<Backend>& model) {
        float* acc = acc_;
        be_.memset_zero(acc, sizeof(float));
        const float scale = 1.0f / (float)(val_.eval_sequences(windows_) * T_);
        for (size_t w = 0; w < windows_; w++)
            for (size_t micro = 0; micro < grad_accum_; micro++) {
                const size_t rows = val_.read_eval_batch(w, micro, inputs_.data(), targets_.data());
                if (rows == 0) continue;
                model.forward(inputs_.data(), targets_.data(), rows, T_, 0.0f);
                model.accumulate_loss(acc, scale);
            }
        comm_.all_reduce(acc, 1, DType::F32, ReduceOp::Sum, be_.main_stream());
        float result = 0;
        be_.copy_to_host(&result, acc, sizeof(float));
        return result;
    }

    Backend& be_;
    Comm& comm_;
    DataLoader& val_;
    const size_t windows_, grad_accum_, T_;
    float* const acc_;
    std::vector<int> inputs_, targets_;
    const std::vector<McExample> hellaswag_;
};

}  // namespace llmc
