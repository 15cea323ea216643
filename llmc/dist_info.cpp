// Distributed layout from the launcher's environment (see dist_info.h for the variables and their precedence).
#include "dist_info.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <utility>

#include "error.h"

extern char** environ;

namespace llmc {

std::string DistInfo::describe() const {
    char buf[256];
    std::snprintf(buf, sizeof buf, "rank %d/%d (local %d/%d, node %d/%d%s, gpu %d, %s)", rank, world_size,
                  local_rank, local_size, node, num_nodes, node_assumed ? " assumed" : "", device,
                  launcher.c_str());
    return buf;
}

EnvMap current_environment() {
    EnvMap env;
    for (char** e = environ; e && *e; e++) {
        const char* eq = std::strchr(*e, '=');
        if (!eq) continue;
        env.emplace(std::string(*e, (size_t)(eq - *e)), std::string(eq + 1));
    }
    return env;
}

namespace {

bool has(const EnvMap& env, const char* name) { return env.count(name) != 0; }

// Strict non-negative decimal integer, fitting in an int.
int parse_int(const std::string& name, const std::string& value) {
    const char* s = value.c_str();
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || v < 0 || v > INT_MAX || !(s[0] >= '0' && s[0] <= '9'))
        fail("environment variable %s='%s': expected a non-negative integer", name.c_str(), value.c_str());
    return (int)v;
}

int get_int(const EnvMap& env, const char* name) { return parse_int(name, env.at(name)); }

// First of several names that is set, or -1.
int get_first(const EnvMap& env, std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (has(env, n)) return get_int(env, n);
    return -1;
}

// Node index and count when the launcher gives only rank, world and local size: assume ranks are placed node by
// node (the default block mapping of every launcher here). Exact when every node runs local_size ranks in order.
void assume_block_nodes(DistInfo& d) {
    d.node = d.rank / d.local_size;
    d.num_nodes = (d.world_size + d.local_size - 1) / d.local_size;
    d.node_assumed = d.num_nodes > 1;
}

// Fills rank/world/local from four variables of an MPI-style launcher.
DistInfo from_mpi_vars(const EnvMap& env, const char* launcher, const char* rank, const char* size,
                       const char* local_rank, const char* local_size) {
    DistInfo d;
    d.launcher = launcher;
    d.rank_var = rank, d.world_var = size, d.local_var = local_rank;
    d.rank = get_int(env, rank);
    d.world_size = get_int(env, size);
    d.local_rank = has(env, local_rank) ? get_int(env, local_rank) : -1;
    d.local_size = has(env, local_size) ? get_int(env, local_size) : -1;
    if (d.local_rank < 0 || d.local_size < 0) {
        // Without node-local information all ranks are treated as one node (one GPU each, in order).
        d.local_rank = d.rank;
        d.local_size = d.world_size;
    }
    if (d.local_size < 1)
        fail("environment variable %s='%d': expected at least 1 process per node", local_size, d.local_size);
    assume_block_nodes(d);
    return d;
}

bool in_slurm_step(const EnvMap& env) {
    if (!has(env, "SLURM_PROCID")) return false;
    const char* step_var = has(env, "SLURM_STEP_ID") ? "SLURM_STEP_ID" : has(env, "SLURM_STEPID") ? "SLURM_STEPID"
                                                                                                      : nullptr;
    if (!step_var) return false;
    // Slurm's special steps: the batch script (0xfffffffe = 4294967294), the extern step (4294967295) and the
    // interactive step (4294967291..3) are single processes, not tasks of a parallel step.
    const std::string& step = env.at(step_var);
    if (step == "batch" || step == "extern" || step == "interactive") return false;
    if (step.size() >= 10 && step.compare(0, 6, "429496") == 0) return false;
    return true;
}

DistInfo from_slurm(const EnvMap& env) {
    DistInfo d;
    d.launcher = "slurm";
    d.node_exact = true;
    d.rank_var = "SLURM_PROCID", d.local_var = "SLURM_NODEID/SLURM_LOCALID";
    d.rank = get_int(env, "SLURM_PROCID");
    for (const char* v : {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"})
        if (d.world_var.empty() && has(env, v)) d.world_var = v;
    d.world_size = get_first(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
    if (d.world_size < 0) fail("Slurm step without SLURM_STEP_NUM_TASKS or SLURM_NTASKS: cannot tell the world size");
    d.local_rank = get_first(env, {"SLURM_LOCALID"});
    d.node = get_first(env, {"SLURM_NODEID"});
    d.num_nodes = get_first(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
    if (d.local_rank < 0) d.local_rank = 0;
    if (d.node < 0) d.node = 0;
    if (d.num_nodes < 0) d.num_nodes = 1;
    // Tasks on this node: the step's tasks-per-node list is exact even for uneven layouts.
    d.local_size = -1;
    for (const char* var : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
        if (has(env, var)) {
            try {
                d.local_size = slurm_tasks_on_node(env.at(var), d.node);
            } catch (const Error& e) {
                fail("environment variable %s: %s", var, e.what());
            }
            break;
        }
    }
    if (d.local_size < 0 && has(env, "SLURM_NTASKS_PER_NODE")) d.local_size = get_int(env, "SLURM_NTASKS_PER_NODE");
    if (d.local_size < 0) {
        if (d.world_size % d.num_nodes != 0)
            fail("Slurm: %d tasks on %d nodes and no SLURM_STEP_TASKS_PER_NODE: cannot tell the tasks per node",
                 d.world_size, d.num_nodes);
        d.local_size = d.world_size / d.num_nodes;
    }
    return d;
}

DistInfo from_torchrun(const EnvMap& env) {
    DistInfo d;
    d.launcher = "torchrun";
    d.rank_var = "RANK", d.world_var = "WORLD_SIZE", d.local_var = "LOCAL_RANK";
    if (has(env, "GROUP_RANK")) d.local_var = "GROUP_RANK/LOCAL_RANK";
    d.rank = get_int(env, "RANK");
    d.world_size = get_int(env, "WORLD_SIZE");
    if (has(env, "LOCAL_RANK") && has(env, "LOCAL_WORLD_SIZE")) {
        d.local_rank = get_int(env, "LOCAL_RANK");
        d.local_size = get_int(env, "LOCAL_WORLD_SIZE");
        if (d.local_size < 1) fail("environment variable LOCAL_WORLD_SIZE='0': expected at least 1");
        // torchrun runs the same number of workers on every node, so the node count is exact; GROUP_RANK is the
        // node's index when one worker group runs per node.
        d.num_nodes = (d.world_size + d.local_size - 1) / d.local_size;
        if (has(env, "GROUP_RANK")) {
            d.node = get_int(env, "GROUP_RANK");
            d.node_exact = true;
        } else {
            d.node = d.rank / d.local_size;
            d.node_assumed = d.num_nodes > 1;
        }
    } else {
        if (has(env, "LOCAL_RANK") != has(env, "LOCAL_WORLD_SIZE"))
            fail("torchrun-style launch: LOCAL_RANK and LOCAL_WORLD_SIZE must be set together (only %s is)",
                 has(env, "LOCAL_RANK") ? "LOCAL_RANK" : "LOCAL_WORLD_SIZE");
        d.local_rank = d.rank;
        d.local_size = d.world_size;
    }
    return d;
}

// An MPI launcher's own variables that the chosen launcher did not use (PMI_* under a Slurm step: Hydra inside
// srun, or srun --mpi=pmi2) must tell the same rank and world size.
void check_mpi_variables_agree(const EnvMap& env, const DistInfo& d) {
    struct Var {
        const char* name;
        int want;
        const std::string& used;
    };
    for (const Var& v : {Var{"PMI_RANK", d.rank, d.rank_var}, Var{"PMI_SIZE", d.world_size, d.world_var},
                         Var{"PMIX_RANK", d.rank, d.rank_var}}) {
        if (!has(env, v.name) || v.used == v.name || d.launcher == "command line") continue;
        const int got = get_int(env, v.name);
        if (got == v.want) continue;
        const bool size = v.name == std::string("PMI_SIZE");
        const std::string used = v.used.empty() ? "no launcher variable: " + std::to_string(v.want)
                                                : v.used + "=" + std::to_string(v.want);
        fail("the MPI launcher's %s=%d disagrees with the %s environment's %s (%s): an mpiexec (MPICH/Intel MPI's "
             "Hydra) inside an srun step, or a mix of launchers? Start the ranks with one launcher: srun --mpi=pmix "
             "(or pmi2) alone, or mpiexec outside srun",
             v.name, got, d.launcher.c_str(), size ? "world size" : "rank", used.c_str());
    }
}

}  // namespace

std::string mpi_layout_mismatch(const DistInfo& d, int mpi_rank, int mpi_size) {
    if (mpi_rank == d.rank && mpi_size == d.world_size) return "";
    const std::string rv = d.rank_var.empty() ? "no launcher variable" : d.rank_var + "=" + std::to_string(d.rank);
    const std::string wv =
        d.world_var.empty() ? "one process" : d.world_var + "=" + std::to_string(d.world_size);
    char buf[768];
    std::snprintf(buf, sizeof buf,
                  "MPI sees rank %d of %d but the launcher's environment (%s) says rank %d of %d (%s, %s): the "
                  "processes would not train as one run. Was the job started with srun without an MPI plugin (use "
                  "srun --mpi=pmix or --mpi=pmi2), with mpiexec inside an srun step (MPICH/Intel MPI's Hydra under "
                  "Slurm), or with a different mpirun than the MPI the program was built with?",
                  mpi_rank, mpi_size, d.launcher.c_str(), d.rank, d.world_size, rv.c_str(), wv.c_str());
    return buf;
}

std::vector<uint64_t> layout_words(const DistInfo& d) {
    return {(uint64_t)d.rank, (uint64_t)d.world_size, (uint64_t)d.node, (uint64_t)d.num_nodes,
            (uint64_t)d.local_rank, (uint64_t)d.local_size};
}

DistInfo layout_from_words(const uint64_t* w, const DistInfo& variables_from) {
    DistInfo d = variables_from;
    d.rank = (int)w[0], d.world_size = (int)w[1], d.node = (int)w[2], d.num_nodes = (int)w[3];
    d.local_rank = (int)w[4], d.local_size = (int)w[5];
    return d;
}

void check_gathered_layouts(const std::vector<DistInfo>& all) {
    if (all.empty()) return;
    const DistInfo& first = all[0];
    const std::string from = first.local_var.empty() ? first.launcher : first.local_var;
    std::map<std::pair<int, int>, int> seen;  // (node, local rank) -> rank
    for (size_t r = 0; r < all.size(); r++) {
        const DistInfo& d = all[r];
        if (d.rank != (int)r)
            fail("launch layout: process %zu of the communicator says it is rank %d (%s): ranks must be numbered "
                 "0 .. %zu in the launcher's order", r, d.rank, d.rank_var.c_str(), all.size() - 1);
        if (d.world_size != (int)all.size() || d.num_nodes != first.num_nodes)
            fail("launch layout: rank %zu says %d ranks on %d nodes, rank 0 says %d ranks on %d nodes (%s, %s): the "
                 "ranks were not started by one launch", r, d.world_size, d.num_nodes, first.world_size,
                 first.num_nodes, d.world_var.c_str(), from.c_str());
        auto ins = seen.emplace(std::make_pair(d.node, d.local_rank), (int)r);
        if (!ins.second)
            fail("launch layout: ranks %d and %zu both say they are local rank %d on node %d (%s from the %s "
                 "environment): they would drive the same GPU; every (node, local rank) pair must be unique",
                 ins.first->second, r, d.local_rank, d.node, from.c_str(), d.launcher.c_str());
    }
}

int device_for_local_rank(const EnvMap& env, int local_rank, int local_size) {
    // Entries in CUDA_VISIBLE_DEVICES (unset: every GPU is visible).
    auto it = env.find("CUDA_VISIBLE_DEVICES");
    int visible = -1;
    if (it != env.end()) {
        visible = it->second.empty() ? 0 : 1;
        for (char c : it->second) visible += c == ',';
    }
    if (visible > 0 && visible < local_size) return local_rank % visible;
    return local_rank;
}

int slurm_tasks_on_node(const std::string& list, int node) {
    // Entries separated by commas, each "N" or "N(xR)" meaning R consecutive nodes with N tasks.
    int first = 0;  // index of the first node the current entry covers
    int found = -1;  // the whole list is parsed (and validated) even when `node` is in an early entry
    size_t i = 0;
    while (i < list.size()) {
        size_t j = i;
        while (j < list.size() && list[j] >= '0' && list[j] <= '9') j++;
        if (j == i) fail("malformed tasks-per-node list '%s' at position %zu", list.c_str(), i);
        long tasks = std::strtol(list.substr(i, j - i).c_str(), nullptr, 10);
        long repeat = 1;
        if (j < list.size() && list[j] == '(') {
            if (j + 1 >= list.size() || list[j + 1] != 'x')
                fail("malformed tasks-per-node list '%s': expected '(x' at position %zu", list.c_str(), j);
            size_t k = j + 2, start = k;
            while (k < list.size() && list[k] >= '0' && list[k] <= '9') k++;
            if (k == start || k >= list.size() || list[k] != ')')
                fail("malformed tasks-per-node list '%s': expected '(xN)' at position %zu", list.c_str(), j);
            repeat = std::strtol(list.substr(start, k - start).c_str(), nullptr, 10);
            j = k + 1;
        }
        if (tasks > INT_MAX || repeat > INT_MAX || repeat < 1)
            fail("malformed tasks-per-node list '%s': count out of range", list.c_str());
        if (found < 0 && node < first + repeat) found = (int)tasks;
        first += (int)repeat;
        if (j < list.size()) {
            if (list[j] != ',') fail("malformed tasks-per-node list '%s' at position %zu", list.c_str(), j);
            j++;
        }
        i = j;
    }
    if (found >= 0) return found;
    fail("tasks-per-node list '%s' covers %d nodes, node %d is past its end", list.c_str(), first, node);
}

void validate_dist_info(const DistInfo& d, const std::string& source) {
    const char* s = source.c_str();
    if (d.world_size < 1) fail("%s: world size %d, expected at least 1", s, d.world_size);
    if (d.rank < 0 || d.rank >= d.world_size)
        fail("%s: rank %d, expected 0 <= rank < world size %d", s, d.rank, d.world_size);
    if (d.local_size < 1 || d.local_size > d.world_size)
        fail("%s: %d processes per node, expected between 1 and the world size %d", s, d.local_size, d.world_size);
    if (d.local_rank < 0 || d.local_rank >= d.local_size)
        fail("%s: local rank %d, expected 0 <= local rank < local size %d", s, d.local_rank, d.local_size);
    if (d.num_nodes < 1 || d.num_nodes > d.world_size)
        fail("%s: %d nodes, expected between 1 and the world size %d", s, d.num_nodes, d.world_size);
    if (d.node < 0 || d.node >= d.num_nodes)
        fail("%s: node %d, expected 0 <= node < number of nodes %d", s, d.node, d.num_nodes);
    if (d.device < 0) fail("%s: GPU index %d, expected >= 0", s, d.device);
}

DistInfo compute_dist_info(const EnvMap& env, const DistOverrides& ov) {
    DistInfo d;
    std::string source;
    if (ov.num_processes >= 0 || ov.process_rank >= 0 || ov.gpus_per_node >= 0) {
        // llm.c's -pn/-pr/-pg: everything from the command line (each process is started by hand or by a script).
        if (ov.num_processes < 1) fail("-pn (number of processes) is %d, expected at least 1", ov.num_processes);
        int rank = ov.process_rank < 0 ? 0 : ov.process_rank;
        if (ov.process_rank < 0 && ov.num_processes > 1)
            fail("-pn %d given without -pr (this process's rank)", ov.num_processes);
        int per_node = ov.gpus_per_node < 0 ? ov.num_processes : ov.gpus_per_node;
        if (per_node < 1) fail("-pg (GPUs per node) is %d, expected at least 1", per_node);
        d.launcher = "command line";
        d.world_size = ov.num_processes;
        d.rank = rank;
        d.local_size = per_node < d.world_size ? per_node : d.world_size;
        d.local_rank = rank % d.local_size;
        d.node = rank / d.local_size;
        d.num_nodes = (d.world_size + d.local_size - 1) / d.local_size;
        d.node_exact = true;
        d.rank_var = "-pr", d.world_var = "-pn", d.local_var = "-pr/-pg";
        source = "command line (-pn/-pr/-pg)";
    } else if (has(env, "OMPI_COMM_WORLD_RANK") || has(env, "OMPI_COMM_WORLD_SIZE")) {
        d = from_mpi_vars(env, "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
        source = "OpenMPI environment (OMPI_COMM_WORLD_*)";
    } else if (has(env, "MV2_COMM_WORLD_RANK") || has(env, "MV2_COMM_WORLD_SIZE")) {
        d = from_mpi_vars(env, "mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
                          "MV2_COMM_WORLD_LOCAL_SIZE");
        source = "MVAPICH2 environment (MV2_COMM_WORLD_*)";
    } else if (has(env, "PMI_RANK") && has(env, "PMI_SIZE") && !in_slurm_step(env)) {
        // Hydra (MPICH, Intel MPI). Under srun --mpi=pmi2 the Slurm variables are richer, so Slurm wins there.
        d = from_mpi_vars(env, "pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
        source = "PMI environment (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS)";
    } else if (has(env, "RANK") || has(env, "WORLD_SIZE")) {
        if (!has(env, "RANK") || !has(env, "WORLD_SIZE"))
            fail("torchrun-style launch: RANK and WORLD_SIZE must be set together (only %s is)",
                 has(env, "RANK") ? "RANK" : "WORLD_SIZE");
        d = from_torchrun(env);
        source = "torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE)";
    } else if (in_slurm_step(env)) {
        d = from_slurm(env);
        source = "Slurm environment (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, ...)";
    } else {
        source = "single process";
    }
    check_mpi_variables_agree(env, d);
    // The GPU: the local rank, folded onto the visible devices when the launcher shows each rank fewer GPUs.
    d.device = device_for_local_rank(env, d.local_rank, d.local_size);
    validate_dist_info(d, source);
    return d;
}

bool launched_with_mpi(const EnvMap& env) {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"})
        if (has(env, v)) return true;
    return false;
}

std::string launch_tag(const EnvMap& env) {
    auto get = [&](const char* n) { auto it = env.find(n); return it == env.end() ? std::string() : it->second; };
    std::string tag;
    if (!get("LLMC_RUN_ID").empty()) {
        tag = get("LLMC_RUN_ID");
    } else if (!get("SLURM_JOB_ID").empty()) {
        tag = "slurm" + get("SLURM_JOB_ID");
        std::string step = get("SLURM_STEP_ID").empty() ? get("SLURM_STEPID") : get("SLURM_STEP_ID");
        if (!step.empty()) tag += "." + step;
        if (!get("SLURM_RESTART_COUNT").empty()) tag += ".r" + get("SLURM_RESTART_COUNT");
    } else if (!get("TORCHELASTIC_RUN_ID").empty()) {
        tag = "torch" + get("TORCHELASTIC_RUN_ID");
        if (!get("TORCHELASTIC_RESTART_COUNT").empty()) tag += ".r" + get("TORCHELASTIC_RESTART_COUNT");
    } else if (!get("MASTER_ADDR").empty()) {
        tag = get("MASTER_ADDR") + "_" + get("MASTER_PORT");
    } else {
        tag = "default";
    }
    // Keep it a safe file-name component.
    for (char& c : tag)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
              c == '_'))
            c = '_';
    return tag;
}

}  // namespace llmc
