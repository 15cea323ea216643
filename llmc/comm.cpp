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

const char* dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "f32";
        case DType::BF16: return "bf16";
        case DType::I32: return "i32";
        case DType::U64: return "u64";
    }
    return "?";
}

void Comm::all_reduce_host(void* buf, size_t count, DType t, ReduceOp op) {
    if (t == DType::BF16) fail("all_reduce_host: dtype bf16, expected i32, u64 or f32 (control data)");
    if (op == ReduceOp::Avg && t != DType::F32)
        fail("all_reduce_host: avg of %s values, expected f32 (an integer average would round)", dtype_name(t));
    counters.host++;
    if (count) host_all_reduce(buf, count, t, op);
}

void Comm::all_gather_host(const void* send, void* recv, size_t count, DType t) {
    if (t == DType::BF16) fail("all_gather_host: dtype bf16, expected i32, u64 or f32 (control data)");
    counters.host++;
    if (count) host_all_gather(send, recv, count, t);
}

std::vector<uint64_t> Comm::all_gather_host(const std::vector<uint64_t>& mine) {
    std::vector<uint64_t> all(mine.size() * (size_t)world_size());
    all_gather_host(mine.data(), all.data(), mine.size(), DType::U64);
    return all;
}

bool Comm::any(bool mine) {
    int32_t flag = mine ? 1 : 0;
    all_reduce_host(&flag, 1, DType::I32, ReduceOp::Max);
    return flag != 0;
}

std::unique_ptr<Comm> Comm::split(int color, int key) {
    fail("%s comm: split(color %d, key %d) is not supported", name(), color, key);
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
