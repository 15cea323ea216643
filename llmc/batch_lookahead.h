// The training batches, read one micro-batch ahead (llmc/trainer.h): the trainer takes micro-batch k, enqueues its
// forward and backward, then reads micro-batch k + 1 while the device computes k (read_ahead), so reading the shard
// is off the device's critical path instead of in the gap between two steps. The order is the loader's own: the same
// micro-batches in the same order as reading each just before its use, on every rank. position() is where the loader
// stands after the micro-batches taken so far, the one read ahead not counted: what a checkpoint stores, so a resumed
// run reads the same batches.
#pragma once

#include <utility>
#include <vector>

#include "dataloader.h"

namespace llmc {

class BatchLookahead {
public:
    struct Batch {
        std::vector<int> inputs, targets;
    };
    // n = B * T token ids per micro-batch.
    BatchLookahead(DataLoader& loader, size_t n) : loader_(loader) {
        for (Batch* b : {&current_, &ahead_}) b->inputs.resize(n), b->targets.resize(n);
    }

    // The next micro-batch (read now unless read_ahead() already did); valid until the next take().
    const Batch& take() {
        if (!has_ahead_) read_ahead();
        std::swap(current_, ahead_);
        has_ahead_ = false;
        return current_;
    }
    // Reads the micro-batch after the one last taken (no-op when it is read already).
    void read_ahead() {
        if (has_ahead_) return;
        before_ahead_ = loader_.position();
        loader_.next_batch(ahead_.inputs.data(), ahead_.targets.data());
        has_ahead_ = true;
    }
    LoaderPosition position() const { return has_ahead_ ? before_ahead_ : loader_.position(); }
    // Moving the loader drops the micro-batch read ahead.
    void set_position(const LoaderPosition& p) {
        loader_.set_position(p);
        has_ahead_ = false;
    }
    void reset() { set_position(LoaderPosition()); }

private:
    DataLoader& loader_;
    Batch current_, ahead_;
    bool has_ahead_ = false;
    LoaderPosition before_ahead_;  // the loader's position before it read `ahead_`
};

}  // namespace llmc
