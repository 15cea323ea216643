// The one place that turns a ParallelPlan (llmc/parallel_plan.h) into its data-parallel strategy
// (llmc/data_parallel.h): everything else holds a DataParallel<Backend> and asks it.
#pragma once

#include <memory>

#include "data_parallel.h"
#include "data_parallel_owned.h"
#include "data_parallel_zero.h"
#include "model.h"
#include "periodic_sync.h"
#include "zero_optimizer.h"

namespace llmc {

// `groups`: the comms of the plan's mesh (make_dp_groups, llmc/dp_groups.h), which the strategy keeps; `world`: every
// rank of the run. `cfg`'s reduce dtype is the plan's.
template <class Backend>
std::unique_ptr<DataParallel<Backend>> make_data_parallel(const ParallelPlan& plan, DpGroups groups, Backend& be,
                                                          Model<Backend>& model, Comm& world, OptimConfig cfg,
                                                          uint64_t seed) {
    cfg.reduce_dtype = plan.wire;
    if (uses_muon(cfg.groups)) {
        if (plan.periodic())
            fail("--sync-every with Muon (--recipe speedrun): each replica would keep its own Muon momentum, and the "
                 "outer step of llmc/outer_sync.h is written for AdamW replicas; use --recipe gpt2 with --sync-every, "
                 "or the speedrun with gradients reduced every step");
        return std::make_unique<DataParallelOwned<Backend>>(plan, std::move(groups), be, model, cfg, seed);
    }
    if (plan.periodic())
        return std::make_unique<PeriodicSync<Backend>>(plan, std::move(groups), be, model, world, cfg, seed);
    return std::make_unique<DataParallelZero<Backend>>(plan, std::move(groups), be, model, cfg, seed);
}

}  // namespace llmc
