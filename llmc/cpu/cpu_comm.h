// The CPU backend's Comm: host buffers, so one process needs none and several use MPI (llmc/comm.h).
#pragma once

#include <memory>

#include "../comm.h"
#include "cpu_backend.h"

namespace llmc {

inline std::unique_ptr<Comm> create_comm(CpuBackend&, const DistInfo& info, const CommOptions& opt) {
    return create_host_comm(info, opt);
}

}  // namespace llmc
