// The device memory one rank of a training run allocates, computed without allocating anything (--dry-run).
//
// Exact by construction: every line comes from the function the allocating code itself uses, never from a second
// copy of a formula:
//   parameters, gradients, optimizer state   zero_memory() (llmc/zero.h), the ZeRO stage's per-rank memory
//   optimizer and trainer scalars            the optimizer's gradient-norm float and the trainer's loss accumulator
//   activations                              GPT2<Backend>::activation_plan() (llmc/model.h), the table the model
//                                            allocates from
//   backend buffers                          Backend::scratch_plan(): its op-private scratch at the sizes one training
//                                            step grows it to, and (CUDA) the cuBLASLt workspace
// Not included (not ours to count, or not held during training): the CUDA context and its kernel images, NCCL's own
// buffers, the allocator's rounding of each request, and the short-lived buffers of checkpointing and HellaSwag.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "backend.h"
#include "cli.h"
#include "config.h"
#include "error.h"
#include "layout.h"
#include "model.h"
#include "zero.h"

namespace llmc {

// ZeRO stage of a run: -z, or 1 with several ranks and 0 with one.
inline int zero_stage_for(const TrainOptions& o, int world) { return o.zero_stage >= 0 ? o.zero_stage : (world > 1 ? 1 : 0); }

// The model options the trainer creates its model with.
inline ModelOptions model_options_for(const TrainOptions& o, int world) {
    ModelOptions mo;
    mo.pad_to = zero_pad_multiple(world);
    mo.recompute_gelu = o.recompute >= 1;
    mo.recompute_layernorm = o.recompute >= 2;
    mo.classifier_chunk_rows = (size_t)o.classifier_chunk;
    mo.gradient_buffer = zero_stage_for(o, world) != 2;  // ZeRO 2: the optimizer's bucket buffers (llmc/optimizer.h)
    return mo;
}

struct MemoryPlan {
    struct Group {
        std::string title;
        std::vector<BufferSize> items;
    };
    std::vector<Group> groups;
    std::string heading;

    size_t total() const {
        size_t t = 0;
        for (const Group& g : groups)
            for (const BufferSize& b : g.items) t += b.bytes();
        return t;
    }
};

// One rank's plan for a run with these options on `world` ranks (the ZeRO shard is the same size on every rank).
template <class Backend>
MemoryPlan plan_training_memory(const TrainOptions& o, const GPT2Config& cfg, int world, const BackendOptions& bo) {
    const size_t B = (size_t)o.batch_size, T = (size_t)o.seq_len;
    const int stage = zero_stage_for(o, world);
    validate_zero_stage(stage);
    const ModelOptions mo = model_options_for(o, world);
    const std::vector<BufferSize> acts = GPT2<Backend>::activation_plan(cfg, B, T, mo);  // validates the shape
    const ParamLayout layout(cfg);
    const size_t A = sizeof(typename Backend::act_t), padded = GPT2<Backend>::padded_params(layout, mo);
    const ZeroMemory z = zero_memory(layout, world, stage, A, 128, o.reduce_dtype == "bf16" ? 2 : 4);
    if (z.params != padded * A)
        fail("memory plan: the ZeRO plan pads %zu parameters differently from the model (%zu)", layout.total, padded);

    MemoryPlan p;
    char head[512];
    std::snprintf(head, sizeof head, "device memory plan per rank: %s, B=%zu T=%zu, %s backend, %d rank%s, ZeRO-%d, -r %d",
                  cfg.describe().c_str(), B, T, Backend::name, world, world == 1 ? "" : "s", stage, o.recompute);
    p.heading = head;
    const char* act_type = A == 2 ? "bf16" : "fp32";
    p.groups.push_back({"training state", {
        {"parameters", std::string(act_type) + ", padded to " + std::to_string(padded), padded, A},
        {"gradients", stage == 2 ? "none (ZeRO-2: bucket buffers)" : "fp32, full buffer", z.grads / 4, 4},
        {"gradient accumulator", stage == 2 ? "fp32, shard (ZeRO-2)" : "none below ZeRO-2", z.accumulator / 4, 4},
        {"gradient bucket buffers", stage == 2 ? "fp32, wte/wpe/lnf + layer pool" : "none below ZeRO-2",
         z.bucket_pool / 4, 4},
        {"master weights", stage == 0 ? "fp32, full" : "fp32, shard", z.master / 4, 4},
        {"AdamW m and v", stage == 0 ? "fp32, full" : "fp32, shard", (z.adam_m + z.adam_v) / 4, 4},
        {"grad norm, loss accumulator", "fp32 scalars", 2, 4},
    }});
    if (z.wire)
        p.groups.back().items.push_back({"gradient reduction staging", "bf16, the largest bucket", z.wire / 2, 2});
    p.groups.push_back({"activations (model)", acts});
    p.groups.push_back({"backend buffers", Backend::scratch_plan(B, T, cfg.channels, cfg.num_heads, bo)});
    return p;
}

// The plan as text, ending with the line "device memory per rank: X.XX GiB".
inline std::string render_memory_plan(const MemoryPlan& p) {
    auto mib = [](size_t bytes) {
        char b[32];
        std::snprintf(b, sizeof b, "%10.1f MiB", (double)bytes / (1 << 20));
        return std::string(b);
    };
    std::string s = p.heading + "\n";
    char line[256];
    for (const MemoryPlan::Group& g : p.groups) {
        size_t sum = 0;
        for (const BufferSize& b : g.items) sum += b.bytes();
        std::snprintf(line, sizeof line, "  %-65s %s\n", g.title.c_str(), mib(sum).c_str());
        s += line;
        for (const BufferSize& b : g.items) {
            std::snprintf(line, sizeof line, "    %-28s %-34s %s\n", b.name, b.shape.c_str(), mib(b.bytes()).c_str());
            s += line;
        }
    }
    s += "  not included: the CUDA context, NCCL's buffers, allocator rounding, checkpoint/eval transients\n";
    std::snprintf(line, sizeof line, "device memory per rank: %.2f GiB\n", (double)p.total() / (1024.0 * 1024.0 * 1024.0));
    return s + line;
}

}  // namespace llmc
