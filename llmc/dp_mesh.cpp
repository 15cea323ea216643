// --shard-group's values against the layout (see dp_mesh.h).
#include "dp_mesh.h"

#include <cstdlib>

#include "error.h"

namespace llmc {

namespace {
// The number in spec, or -1 when it is not a plain decimal integer.
long long shard_group_number(const std::string& spec) {
    if (spec.empty() || spec.size() > 9 || spec.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::atoll(spec.c_str());
}
}  // namespace

void check_shard_group_syntax(const std::string& spec) {
    if (spec.empty() || spec == "node") return;
    const long long n = shard_group_number(spec);
    if (n < 1)
        fail("--shard-group '%s': expected a number of ranks per sharding group >= 1, or node (the ranks of one "
             "node)",
             spec.c_str());
}

int resolve_shard_group(const std::string& spec, const std::vector<DistInfo>& all, int zero_stage) {
    check_shard_group_syntax(spec);
    const int world = (int)all.size();
    int n = world;
    if (spec == "node") {
        std::vector<int> per_node(all.empty() ? 0 : all[0].num_nodes, 0);
        for (const DistInfo& d : all) per_node[d.node]++;
        for (size_t k = 1; k < per_node.size(); k++)
            if (per_node[k] != per_node[0])
                fail("--shard-group node: the nodes have unequal numbers of ranks (node 0 has %d, node %zu has %d); "
                     "give the group size as a number that divides the world size %d",
                     per_node[0], k, per_node[k], world);
        n = per_node.empty() ? 1 : per_node[0];
    } else if (!spec.empty()) {
        const long long v = shard_group_number(spec);
        if (v > world || world % v != 0)
            fail("--shard-group %s: the group size must divide the world size %d (groups of equal size)", spec.c_str(),
                 world);
        n = (int)v;
    }
    if (n < world && zero_stage == 0)
        fail("--shard-group %s: groups of %d ranks need ZeRO 1 or 2 (-z 1 or -z 2); ZeRO 0 shards no optimizer "
             "state, so there is nothing to split within a group",
             spec.c_str(), n);
    return n;
}

}  // namespace llmc
