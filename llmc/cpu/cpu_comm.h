// The CPU backend's Comm: host buffers, so one process needs none and several use MPI (llmc/comm.h).
#pragma once

#include <memory>

#include "../comm.h"
#include "cpu_backend.h"

namespace llmc {

inline std::unique_ptr<Comm> create_comm(CpuBackend&, const DistInfo& info, const CommOptions& opt) {
    return create_host_comm(info, opt);
}

// A one-rank Comm for a replica of its own (--sync-every, llmc/outer_sync.h): its collectives are identities.
inline std::unique_ptr<Comm> create_replica_comm(CpuBackend&) { return make_single_comm(); }

}  // namespace llmc
