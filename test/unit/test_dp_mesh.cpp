// Hybrid sharding's mesh (llmc/dp_mesh.h): the dp rank of every rank for layouts by node and round-robin, with every
// group size that divides the world (test/fixtures/dp_mesh_checks.h), and --shard-group's values against layouts:
// what resolves to which group size, and the refusals with their messages.
#include <string>
#include <vector>

#include "llmc/dp_mesh.h"
#include "llmc/error.h"
#include "test/fixtures/dp_mesh_checks.h"
#include "test/fixtures/testing.h"

using namespace llmc;
using dp_mesh_checks::layout;

namespace {

void expect_group(const std::string& spec, const std::vector<DistInfo>& all, int zero, int want) {
    const std::string name = "--shard-group '" + spec + "' on " + std::to_string(all.size()) + " ranks, ZeRO " +
                             std::to_string(zero) + " -> " + std::to_string(want);
    try {
        const int n = resolve_shard_group(spec, all, zero);
        testing::check(name, n == want, "got %d", n);
    } catch (const Error& e) {
        testing::fail(name, "unexpected error: %s", e.what());
    }
}

void expect_refused(const std::string& spec, const std::vector<DistInfo>& all, int zero, const char* want) {
    testing::check("--shard-group '" + spec + "' on " + std::to_string(all.size()) + " ranks, ZeRO " +
                       std::to_string(zero) + " refused: " + want,
                   testing::throws_with([&] { resolve_shard_group(spec, all, zero); }, want));
}

// Two nodes of 4 and 2 ranks.
std::vector<DistInfo> uneven() {
    std::vector<DistInfo> all = layout(2, 4, false);
    all.resize(6);
    for (DistInfo& d : all) d.world_size = 6, d.local_size = d.node == 0 ? 4 : 2;
    return all;
}

void test_values() {
    expect_group("", layout(2, 3, false), 1, 6);
    expect_group("node", layout(2, 3, false), 1, 3);
    expect_group("node", layout(2, 3, true), 2, 3);
    expect_group("2", layout(2, 2, false), 1, 2);
    expect_group("6", layout(2, 3, false), 2, 6);
    expect_group("1", layout(1, 4, false), 1, 1);
    expect_group("node", layout(1, 4, false), 0, 4);  // one node: one group, ZeRO 0 is fine
    expect_group("4", layout(1, 4, false), 0, 4);
    expect_refused("4", layout(2, 3, false), 1, "--shard-group 4: the group size must divide the world size 6");
    expect_refused("12", layout(2, 3, false), 1, "must divide the world size 6");
    expect_refused("0", layout(1, 2, false), 1, "--shard-group '0': expected a number of ranks per sharding group >= 1");
    expect_refused("-2", layout(1, 2, false), 1, "expected a number of ranks per sharding group >= 1, or node");
    expect_refused("two", layout(1, 2, false), 1, "--shard-group 'two'");
    expect_refused("node", uneven(), 1, "node 0 has 4, node 1 has 2");
    expect_refused("2", layout(1, 4, false), 0, "groups of 2 ranks need ZeRO 1 or 2");
    expect_refused("node", layout(2, 2, false), 0, "need ZeRO 1 or 2");
}

}  // namespace

int main() {
    dp_mesh_checks::run_all([](const std::string& name, bool ok, const std::string& why) {
        testing::check(name, ok, "%s", why.c_str());
    });
    test_values();
    return testing::finish();
}
