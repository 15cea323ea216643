// The mesh checks can fail: llmc/dp_mesh.h compiled with the transposed formula (dp_rank = shard_rank x groups +
// replica_rank, a permutation of the ranks, so nothing crashes) must be caught by test/fixtures/dp_mesh_checks.h.
// Passes when at least the invariant and the hand-worked tables report the planted bug.
#define LLMC_PLANTED_TRANSPOSED_DP_RANK
#include <string>

#include "test/fixtures/dp_mesh_checks.h"
#include "test/fixtures/testing.h"

int main() {
    int failed = 0, total = 0;
    std::string first;
    dp_mesh_checks::run_all([&](const std::string& name, bool ok, const std::string& why) {
        total++;
        if (!ok && failed++ == 0) first = name + ": " + why;
    });
    testing::check("the transposed dp rank formula is caught by the mesh checks (" + std::to_string(failed) + " of " +
                       std::to_string(total) + " checks fail; first: " + first + ")",
                   failed > 0, "every check passed with the planted bug");
    return testing::finish();
}
