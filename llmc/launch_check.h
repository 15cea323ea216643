// Launch checks that need every rank's view, run once the Comm exists and before anything is loaded or written:
// every rank's (node, local rank) must be unique and every rank must agree on the world (llmc/dist_info.h,
// check_gathered_layouts). The per-process checks (the environment's variables against each other, MPI's own rank
// and size against the environment's) run earlier, in compute_dist_info and when the Comm is created.
#pragma once

#include <vector>

#include "comm.h"
#include "dist_info.h"

namespace llmc {

// Collective (the Comm's host channel). Fails with the same message on every rank, so they all stop before step 1.
inline void check_launch_layout(Comm& comm) {
    if (comm.world_size() == 1) return;
    const std::vector<uint64_t> words = comm.all_gather_host(layout_words(comm.info()));
    std::vector<DistInfo> all;
    for (size_t r = 0; r < (size_t)comm.world_size(); r++)
        all.push_back(layout_from_words(words.data() + r * kLayoutWords, comm.info()));
    check_gathered_layouts(all);
}

}  // namespace llmc
