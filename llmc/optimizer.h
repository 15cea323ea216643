// AdamW, the optimizer of a parameter group, over the range of the flat buffer whose state this rank holds (all of
// it when the state is replicated, the rank's shard when it is sharded: llmc/parallel_plan.h). The data-parallel
// step (llmc/zero_optimizer.h) hands it the reduced gradients of that range and the factor that turns their sums into
// the clipped mean; what a step does end to end is in docs/architecture.md, "One training step".
//
//   AdamW on the range, one backend call per tensor piece (weight decay on the tensors whose ParamSpec says so, the
//   2-D matrices of GPT-2), with gradient scale = the mean's factor x the clip scale
//
// State: m, v and the fp32 master weights cover [offset(), offset() + count()) of the flat buffer; the master is a
// separate fp32 copy on every backend (one code path). Every tensor of the layout must be in optimizer group 0 (a
// recipe with more groups gives each its optimizer and its sharding: docs/architecture.md, "Adding an optimizer").
//
// bf16 stochastic rounding (CUDA): the random bits of an element are a function of (seed, t, tensor, the element's
// index in its tensor) only: the same on every rank, world size and ZeRO stage, and in a rerun.
#pragma once

#include <cstdint>
#include <vector>

#include "backend.h"
#include "error.h"
#include "layout.h"
#include "rng.h"

namespace llmc {

struct AdamWConfig {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f;
};

template <class Backend>
class AdamW {
public:
    using act_t = typename Backend::act_t;

    // The state of flat elements [offset, offset + count) of a model with this layout; the master starts as the
    // parameters `params` (the model's flat buffer) hold them.
    AdamW(Backend& be, const ParamLayout& layout, const AdamWConfig& cfg, uint64_t seed, size_t offset, size_t count,
          const act_t* params)
        : be_(be), layout_(layout), cfg_(cfg), seed_(seed), offset_(offset), count_(count),
          segments_(range_segments(layout, offset, offset + count)) {
        for (int t = 0; t < layout.num_tensors(); t++)
            if (layout.spec(t).group != 0)
                fail("tensor %s is in optimizer group %d, but this recipe has one group (AdamW): a group needs its "
                     "optimizer (docs/architecture.md)", layout.name(t), layout.spec(t).group);
        m_ = alloc_floats(count);
        v_ = alloc_floats(count);
        master_ = alloc_floats(count);
        reset_master(params);
    }
    ~AdamW() {
        for (float* p : {m_, v_, master_}) be_.free(p);
    }
    AdamW(const AdamW&) = delete;
    AdamW& operator=(const AdamW&) = delete;

    // One AdamW step t (1-based) of the range: g = grad_scale x grads[i] (grads: the range's gradients, from its
    // first element), params = the model's flat buffer.
    void update(act_t* params, const float* grads, float grad_scale, float lr, int t) {
        if (t < 1) fail("Optimizer::step: step t=%d, expected >= 1 (AdamW's bias correction is 1-based)", t);
        for (const TensorSegment& s : segments_) {
            const float wd = layout_.is_decayed(s.tensor) ? cfg_.weight_decay : 0.0f;
            be_.adamw_update(params + s.flat_offset, master_ + s.offset_in_range, grads + s.offset_in_range,
                             m_ + s.offset_in_range, v_ + s.offset_in_range, s.length, lr, cfg_.beta1, cfg_.beta2,
                             cfg_.eps, wd, grad_scale, t, rounding_seed(seed_, t, s.tensor), s.offset_in_tensor);
        }
    }

    // master = the current parameters of the range (construction does this; again after loading parameters).
    void reset_master(const act_t* params) { be_.act_to_floats(master_, params + offset_, count_); }
    // The range's parameters = master, rounded to act_t.
    void master_to_params(act_t* params) { be_.floats_to_act(params + offset_, master_, count_); }

    const AdamWConfig& config() const { return cfg_; }
    size_t offset() const { return offset_; }
    size_t count() const { return count_; }
    float* m() { return m_; }
    float* v() { return v_; }
    float* master() { return master_; }

    // The stochastic-rounding seed of one (step, tensor): the adamw_update call of each piece passes it with the
    // piece's offset in the tensor, so element e of a tensor draws hash(seed, e) however the tensor is sharded.
    static uint32_t rounding_seed(uint64_t seed, int t, int tensor) {
        uint64_t s = seed ^ ((uint64_t)(uint32_t)t << 32) ^ ((uint64_t)tensor << 20);
        return (uint32_t)(splitmix64(s) >> 32);
    }

private:
    float* alloc_floats(size_t n) { return alloc_zeroed_floats(be_, n); }

    Backend& be_;
    const ParamLayout& layout_;
    AdamWConfig cfg_;
    uint64_t seed_;
    size_t offset_, count_;
    std::vector<TensorSegment> segments_;
    float *m_ = nullptr, *v_ = nullptr, *master_ = nullptr;
};

}  // namespace llmc
