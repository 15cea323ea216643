// The device memory one rank of a training run allocates (host memory on the CPU backend), computed without
// allocating anything (--dry-run).
//
// Exact by construction: every line comes from what the allocating code itself uses, never from a second copy of a
// formula:
//   parameters, gradients, optimizer state   the run's ParallelPlan (llmc/parallel_plan.h): ParallelPlan::memory(),
//                                            the strategy's per-rank memory for the model padded as the plan pads it
//   optimizer and trainer scalars            the optimizer's gradient-norm float and the trainer's loss accumulator
//   activations                              activation_plan<Backend>() (llmc/models.h), the table the model
//                                            allocates from
//   backend buffers                          Backend::scratch_plan(): its op-private scratch at the sizes one training
//                                            step grows it to, and (CUDA) the cuBLASLt workspace
// Not included (not ours to count, or not held during training): the CUDA context and its kernel images, NCCL's own
// buffers, the allocator's rounding of each request, and the short-lived buffers of checkpointing and HellaSwag.
// Listed apart, not in the device total: --sync-every's outer state, which lives in host memory (llmc/outer_sync.h).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "backend.h"
#include "config.h"
#include "error.h"
#include "layout.h"
#include "model.h"
#include "models.h"
#include "parallel_plan.h"
#include "zero.h"

namespace llmc {

// What the backend's memory is: the CPU backend's "device" memory is the host's.
template <class Backend>
const char* memory_kind() {
    return std::string(Backend::name) == "cpu" ? "host" : "device";
}

struct MemoryPlan {
    struct Group {
        std::string title;
        std::vector<BufferSize> items;
    };
    std::vector<Group> groups;
    std::vector<BufferSize> host;  // held in host memory, not counted in total(): --sync-every's outer state
    std::string heading;
    std::string kind = "device";  // memory_kind()

    size_t total() const {
        size_t t = 0;
        for (const Group& g : groups)
            for (const BufferSize& b : g.items) t += b.bytes();
        return t;
    }
};

// One rank's plan for a run of the model `cfg` at micro-batch B x T with these options on the ranks of `plan` (every
// shard of a plan has the same size, so any rank's plan is every rank's). `recompute`: -r, for the heading.
template <class Backend>
MemoryPlan plan_training_memory(const ParallelPlan& plan, const ModelConfig& cfg, size_t B, size_t T,
                                const ModelOptions& mo, int recompute, const BackendOptions& bo) {
    const int world = plan.world(), stage = plan.zero_stage;
    const std::vector<BufferSize> acts = activation_plan<Backend>(cfg, B, T, mo);  // validates the shape
    const ParamLayout layout(cfg);
    const size_t A = sizeof(typename Backend::act_t), padded = Model<Backend>::padded_params(layout, mo);
    const ZeroMemory z = plan.memory(layout, A);
    const int state_ranks = plan.state_ranks();

    MemoryPlan p;
    char head[640];
    std::snprintf(head, sizeof head, "%s memory plan per rank: %s, B=%zu T=%zu, %s backend, %d rank%s, %s, -r %d",
                  memory_kind<Backend>(), cfg.describe().c_str(), B, T, Backend::name, world, world == 1 ? "" : "s",
                  plan.describe().c_str(), recompute);
    p.kind = memory_kind<Backend>();
    p.heading = head;
    const char* act_type = A == 2 ? "bf16" : "fp32";
    const std::string state = stage == 0         ? "fp32, full"
                              : state_ranks == 1 ? "fp32, whole (a shard of 1 rank)"
                              : plan.has_whole_matrices()
                                  ? "fp32, owned of " + std::to_string(state_ranks) + " ranks (matrices, shard)"
                                  : "fp32, shard of " + std::to_string(state_ranks) + " ranks";
    p.groups.push_back({"training state", {
        {"parameters", std::string(act_type) + ", padded to " + std::to_string(padded), padded, A},
        {"gradients", stage == 2 ? "none (ZeRO-2: bucket buffers)" : "fp32, full buffer", z.grads / 4, 4},
        {"gradient accumulator", stage == 2 ? state + " (ZeRO-2)" : "none below ZeRO-2", z.accumulator / 4, 4},
        {"gradient bucket buffers", stage == 2 ? "fp32, wte/wpe/lnf + layer pool" : "none below ZeRO-2",
         z.bucket_pool / 4, 4},
        {"master weights", state, z.master / 4, 4},
        {plan.has_whole_matrices() ? "m and v (Muon: momentum)" : "AdamW m and v", state, (z.adam_m + z.adam_v) / 4,
         4},
        {"grad norm, loss accumulator", "fp32 scalars", 2, 4},
    }});
    if (z.wire)
        p.groups.back().items.push_back({"gradient reduction staging", "bf16, the largest bucket", z.wire / 2, 2});
    p.groups.push_back({"activations (model)", acts});
    p.groups.push_back({"backend buffers", Backend::scratch_plan(B, T, cfg.channels, cfg.num_heads, bo)});
    if (const size_t outer = plan.outer_host_floats(layout))  // OuterSync: theta_last, momentum, a staging copy
        p.host.push_back({"outer state (--sync-every)", "fp32 theta_last, momentum, staging", outer, 4});
    return p;
}

// The plan as text, ending with the line "device memory per rank: X.XX GiB" ("host memory" on the CPU backend).
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
    if (!p.host.empty()) s += "  host memory, not in the device total:\n";
    for (const BufferSize& b : p.host) {
        std::snprintf(line, sizeof line, "    %-28s %-34s %s\n", b.name, b.shape.c_str(), mib(b.bytes()).c_str());
        s += line;
    }
    s += "  not included: the CUDA context, NCCL's buffers, allocator rounding, checkpoint/eval transients\n";
    std::snprintf(line, sizeof line, "%s memory per rank: %.2f GiB\n", p.kind.c_str(),
                  (double)p.total() / (1024.0 * 1024.0 * 1024.0));
    return s + line;
}

}  // namespace llmc
