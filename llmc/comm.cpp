// Comm helpers shared by every implementation, and the host-buffer factory.
#include "comm.h"

#include "error.h"
#include "mpi_env.h"

namespace llmc {

const char* reduce_op_name(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum: return "sum";
        case ReduceOp::Avg: return "avg";
        case ReduceOp::Max: return "max";
    }
    return "?";
}

CommInit parse_comm_init(const std::string& s) {
    if (s == "auto") return CommInit::Auto;
    if (s == "mpi") return CommInit::Mpi;
    if (s == "fs" || s == "file") return CommInit::File;
    fail("-pi '%s': expected auto, mpi or fs (shared-file rendezvous)", s.c_str());
}

std::unique_ptr<Comm> create_host_comm(const DistInfo& info, const CommOptions& opt) {
    mpi_check_launch(info);
    if (info.world_size == 1) return make_single_comm();
    if (opt.init == CommInit::File)
        fail("-pi fs: the shared-file rendezvous exchanges NCCL's id; the CPU backend's collectives need MPI "
             "(launch with mpirun or srun --mpi=pmix)");
    if (!launched_with_mpi(current_environment()))
        fail("%d processes (from the %s environment) but no MPI launcher: the CPU backend's collectives need MPI, "
             "launch with mpirun -np %d or srun --mpi=pmix",
             info.world_size, info.launcher.c_str(), info.world_size);
    return make_mpi_comm(info, opt);
}

}  // namespace llmc
