// Training recipes: which optimizer steps each optimizer group of an architecture's parameter table (ParamSpec::group,
// llmc/layout.h), at what multiple of the schedule's learning rate, and how that group's state is sharded
// (llmc/state_ownership.h). Two recipes (docs/speedrun.md):
//   gpt2      llm.c's: one group, AdamW at the schedule's rate, weight decay on the 2-D matrices; state in flat ranges
//   speedrun  the NanoGPT speedrun's: Muon for the block matrices (the schedule's rate, -l), Adam for the embedding
//             (--embed-lr) and the head (--head-lr); each block matrix's Muon state on one owner rank
#pragma once

#include <string>
#include <vector>

#include "state_ownership.h"

namespace llmc {

enum class OptimizerKind { AdamW, Muon };

// One optimizer group: its optimizer and its learning rate as a multiple of the schedule's.
struct GroupRule {
    OptimizerKind kind = OptimizerKind::AdamW;
    float lr_scale = 1.0f;
};

// Muon's settings (llmc/speedrun_recipe.h has the constants): momentum kMuonMomentum, warmed up linearly from 0.85
// over the first `momentum_warmup` steps (0: none); Nesterov as the records.
struct MuonConfig {
    int momentum_warmup = 0;
    bool nesterov = true;
};

// The groups' optimizers (an empty list: one AdamW group at the schedule's rate) and how each group's state is
// sharded: whole matrices for Muon (its Newton-Schulz needs a whole matrix on one rank), flat ranges otherwise.
inline bool uses_muon(const std::vector<GroupRule>& groups) {
    for (const GroupRule& g : groups)
        if (g.kind == OptimizerKind::Muon) return true;
    return false;
}
inline std::vector<GroupSharding> group_sharding_of(const std::vector<GroupRule>& groups) {
    std::vector<GroupSharding> s;
    for (const GroupRule& g : groups)
        s.push_back(g.kind == OptimizerKind::Muon ? GroupSharding::WholeMatrices : GroupSharding::FlatRanges);
    return s;
}
inline const char* optimizer_name(OptimizerKind k) { return k == OptimizerKind::Muon ? "Muon" : "AdamW"; }

}  // namespace llmc
