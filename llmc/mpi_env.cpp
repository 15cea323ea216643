// MPI initialisation, layout refinement and shutdown (see mpi_env.h for the contract).
#include "mpi_env.h"

#include <mpi.h>

#include <algorithm>
#include <climits>

#include "error.h"

namespace llmc {

void check_mpi(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fail("MPI error in %s: %s", what, msg);
}

bool mpi_is_initialized() {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

void mpi_init_once(const DistInfo& info) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) fail("MPI was already finalised: cannot create another MPI communicator in this process");
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
        int provided = 0;
        check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
        // Errors come back as return codes (turned into llmc::Error with a message) instead of aborting silently.
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != info.rank || size != info.world_size)
        fail("MPI sees rank %d of %d but the launcher's environment (%s) says rank %d of %d: was the job started "
             "with srun without an MPI plugin (use srun --mpi=pmix) or with a different mpirun than the MPI the "
             "program was built with?",
             rank, size, info.launcher.c_str(), info.rank, info.world_size);
}

bool mpi_thread_multiple() {
    if (!mpi_is_initialized()) return false;
    int level = 0;
    MPI_Query_thread(&level);
    return level == MPI_THREAD_MULTIPLE;
}

DistInfo mpi_refine_dist_info(const DistInfo& info, const EnvMap& env) {
    if (info.node_exact) return info;  // every rank decides alike: the same launcher started them all
    DistInfo d = info;
    // Ranks that share memory form a node; ranks keep their world order inside it.
    MPI_Comm node_comm;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info.rank, MPI_INFO_NULL, &node_comm),
              "MPI_Comm_split_type");
    MPI_Comm_rank(node_comm, &d.local_rank);
    MPI_Comm_size(node_comm, &d.local_size);
    // Node leaders (local rank 0) numbered by world rank give the node index; each leader tells its node.
    MPI_Comm leaders;
    check_mpi(MPI_Comm_split(MPI_COMM_WORLD, d.local_rank == 0 ? 0 : MPI_UNDEFINED, info.rank, &leaders),
              "MPI_Comm_split");
    int node = 0, is_leader = d.local_rank == 0 ? 1 : 0, num_nodes = 0;
    if (leaders != MPI_COMM_NULL) {
        MPI_Comm_rank(leaders, &node);
        MPI_Comm_free(&leaders);
    }
    check_mpi(MPI_Bcast(&node, 1, MPI_INT, 0, node_comm), "MPI_Bcast");
    check_mpi(MPI_Allreduce(&is_leader, &num_nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    MPI_Comm_free(&node_comm);
    d.node = node;
    d.num_nodes = num_nodes;
    d.node_assumed = false;
    d.device = device_for_local_rank(env, d.local_rank, d.local_size);
    validate_dist_info(d, "MPI node mapping");
    return d;
}

void mpi_broadcast_bytes(void* buf, size_t bytes, int root) {
    if (!mpi_is_initialized()) fail("mpi_broadcast_bytes: MPI is not initialised");
    char* p = static_cast<char*>(buf);
    for (size_t off = 0; off < bytes;) {
        int n = (int)std::min<size_t>(bytes - off, (size_t)1 << 30);
        check_mpi(MPI_Bcast(p + off, n, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
        off += (size_t)n;
    }
}

void mpi_finalize() {
    if (mpi_is_initialized()) MPI_Finalize();
}

void mpi_abort(int code) {
    if (!mpi_is_initialized()) return;
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
    MPI_Finalize();
}

}  // namespace llmc
