// HellaSwag evaluation over several ranks (test/tests.list: mpirun -np 1, 2, 3, 4): the examples are split over the
// ranks (example i on rank i mod world) and the right answers summed, so the accuracy must be the one-process value
// on every rank, exactly (a count of whole examples): for 22 examples (ranks holding 6, 6, 5, 5 at np 4) and for 3
// (fewer examples than ranks: a rank with none still takes part in the sum). The examples' labels make the
// accuracy known in advance (test/fixtures/hellaswag_fixture.h): 11/22 and 2/3.
#include <memory>
#include <string>
#include <vector>

#include "test/fixtures/dist_testing.h"
#include "llmc/comm.h"
#include "llmc/cpu/cpu_backend.h"
#include "llmc/hellaswag.h"
#include "test/fixtures/hellaswag_fixture.h"

using namespace llmc;
namespace dt = dist_testing;

int main() {
    return dt::run_main([](Comm& comm) {
        BackendOptions bo;
        bo.num_threads = 1;  // several ranks share the machine's cores
        CpuBackend be(bo);
        std::unique_ptr<Model<CpuBackend>> model = hellaswag_fixture::make_model(be);
        for (size_t count : {(size_t)22, (size_t)3}) {
            const std::vector<McExample> ex = hellaswag_fixture::make_examples(*model, count);
            std::unique_ptr<Comm> single = make_single_comm();
            const double one = evaluate_hellaswag(*model, *single, ex);
            const double all = evaluate_hellaswag(*model, comm, ex);
            const double want = (double)((count + 1) / 2) / (double)count;
            dt::check(std::to_string(count) + " examples over " + std::to_string(comm.world_size()) +
                          " rank(s): accuracy equals one process's, exactly",
                      all == one && one == want, "%.9g over the ranks, %.9g alone, want %.9g", all, one, want);
        }
    });
}
