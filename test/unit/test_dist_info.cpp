// compute_dist_info and its helpers over synthetic launcher environments: one process, 8 GPUs on one node,
// 2 nodes x 8, an uneven Slurm step, torchrun, MPICH/PMI, command-line overrides, and bad values.
#include <functional>
#include <string>

#include "llmc/dist_info.h"
#include "llmc/error.h"
#include "test/fixtures/testing.h"

using namespace llmc;
using testing::check;

namespace {

struct Want {
    int rank, world, local_rank, local_size, node, num_nodes, device;
    const char* launcher;
    bool node_assumed;
};

void expect_layout(const std::string& name, const EnvMap& env, const Want& w,
                   const DistOverrides& ov = DistOverrides()) {
    try {
        DistInfo d = compute_dist_info(env, ov);
        bool ok = d.rank == w.rank && d.world_size == w.world && d.local_rank == w.local_rank &&
                  d.local_size == w.local_size && d.node == w.node && d.num_nodes == w.num_nodes &&
                  d.device == w.device && d.launcher == w.launcher && d.node_assumed == w.node_assumed;
        check(name, ok, "got %s", d.describe().c_str());
    } catch (const Error& e) {
        testing::fail(name, "unexpected error: %s", e.what());
    }
}

// Passes when fn throws llmc::Error whose message contains `want`.
void expect_error(const std::string& name, const std::function<void()>& fn, const std::string& want) {
    try {
        fn();
        testing::fail(name, "no error (expected one mentioning '%s')", want.c_str());
    } catch (const Error& e) {
        check(name, std::string(e.what()).find(want) != std::string::npos, "message '%s' lacks '%s'", e.what(),
              want.c_str());
    }
}

EnvMap openmpi(int rank, int size, int local_rank, int local_size) {
    return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
            {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
            {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local_rank)},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)}};
}

// Task `rank` of an srun step over nodes laid out as `tasks_per_node` (Slurm's compressed list).
EnvMap slurm(int rank, int ntasks, int local_id, int node, int nnodes, const std::string& tasks_per_node) {
    return {{"SLURM_JOB_ID", "77"},
            {"SLURM_STEP_ID", "0"},
            {"SLURM_PROCID", std::to_string(rank)},
            {"SLURM_STEP_NUM_TASKS", std::to_string(ntasks)},
            {"SLURM_LOCALID", std::to_string(local_id)},
            {"SLURM_NODEID", std::to_string(node)},
            {"SLURM_STEP_NUM_NODES", std::to_string(nnodes)},
            {"SLURM_STEP_TASKS_PER_NODE", tasks_per_node}};
}

void test_layouts() {
    expect_layout("single process (no launcher)", {}, {0, 1, 0, 1, 0, 1, 0, "single", false});
    expect_layout("1 GPU under mpirun -np 1", openmpi(0, 1, 0, 1), {0, 1, 0, 1, 0, 1, 0, "openmpi", false});
    expect_layout("8 GPUs on one node, rank 5", openmpi(5, 8, 5, 8), {5, 8, 5, 8, 0, 1, 5, "openmpi", false});
    // OpenMPI does not export the node index: it is assumed from the block layout (MpiComm refines it).
    expect_layout("2 nodes x 8, rank 11", openmpi(11, 16, 3, 8), {11, 16, 3, 8, 1, 2, 3, "openmpi", true});
    expect_layout("2 nodes x 8, rank 0", openmpi(0, 16, 0, 8), {0, 16, 0, 8, 0, 2, 0, "openmpi", true});

    // Slurm, 11 tasks on 3 nodes laid out 4,4,3.
    expect_layout("slurm 4(x2),3: rank 9 on node 2", slurm(9, 11, 1, 2, 3, "4(x2),3"),
                  {9, 11, 1, 3, 2, 3, 1, "slurm", false});
    expect_layout("slurm 4(x2),3: rank 5 on node 1", slurm(5, 11, 1, 1, 3, "4(x2),3"),
                  {5, 11, 1, 4, 1, 3, 1, "slurm", false});
    expect_layout("slurm 2 nodes x 8: rank 15", slurm(15, 16, 7, 1, 2, "8(x2)"),
                  {15, 16, 7, 8, 1, 2, 7, "slurm", false});
    // --gpus-per-task=1: each task sees one GPU, so every task drives device 0.
    EnvMap one_gpu_each = slurm(6, 8, 2, 1, 2, "4(x2)");
    one_gpu_each["CUDA_VISIBLE_DEVICES"] = "2";
    expect_layout("slurm --gpus-per-task=1 drives device 0", one_gpu_each, {6, 8, 2, 4, 1, 2, 0, "slurm", false});
    // Two visible GPUs for four local tasks: local rank modulo 2.
    EnvMap two_visible = openmpi(3, 4, 3, 4);
    two_visible["CUDA_VISIBLE_DEVICES"] = "0,1";
    expect_layout("4 local ranks over 2 visible GPUs", two_visible, {3, 4, 3, 4, 0, 1, 1, "openmpi", false});
    // The batch script of an sbatch job is one process, not task 0 of N.
    EnvMap batch = slurm(0, 16, 0, 0, 2, "8(x2)");
    batch["SLURM_STEP_ID"] = "4294967294";
    expect_layout("slurm batch step is a single process", batch, {0, 1, 0, 1, 0, 1, 0, "single", false});
    batch["SLURM_STEP_ID"] = "batch";
    expect_layout("slurm batch step (named) is a single process", batch, {0, 1, 0, 1, 0, 1, 0, "single", false});
    // mpirun inside a Slurm allocation: the inner launcher (OpenMPI) wins.
    EnvMap nested = slurm(0, 1, 0, 0, 1, "1");
    for (auto& kv : openmpi(2, 4, 2, 4)) nested[kv.first] = kv.second;
    expect_layout("mpirun inside srun reports mpirun's layout", nested, {2, 4, 2, 4, 0, 1, 2, "openmpi", false});

    // torchrun: GROUP_RANK is the node.
    EnvMap tr = {{"RANK", "10"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "8"},
                 {"GROUP_RANK", "1"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}};
    expect_layout("torchrun 2 nodes x 8, rank 10", tr, {10, 16, 2, 8, 1, 2, 2, "torchrun", false});
    tr.erase("GROUP_RANK");
    expect_layout("torchrun without GROUP_RANK assumes the node", tr, {10, 16, 2, 8, 1, 2, 2, "torchrun", true});
    // torchrun started by srun: torchrun's variables win over Slurm's.
    EnvMap tr_in_slurm = slurm(1, 2, 0, 1, 2, "1(x2)");
    for (auto& kv : tr) tr_in_slurm[kv.first] = kv.second;
    expect_layout("torchrun under srun reports torchrun's layout", tr_in_slurm,
                  {10, 16, 2, 8, 1, 2, 2, "torchrun", true});

    // MPICH / Intel MPI (Hydra).
    expect_layout("pmi (hydra) rank 3 of 4, 2 per node",
                  {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}},
                  {3, 4, 1, 2, 1, 2, 1, "pmi", true});
    // An MPI launcher without local information: one node, ranks in order.
    expect_layout("openmpi without local variables: one node",
                  {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"}},
                  {2, 3, 2, 3, 0, 1, 2, "openmpi", false});
}

void test_overrides() {
    DistOverrides ov;
    ov.num_processes = 4, ov.process_rank = 2, ov.gpus_per_node = 2;
    expect_layout("-pn 4 -pr 2 -pg 2", {}, {2, 4, 0, 2, 1, 2, 0, "command line", false}, ov);
    // Overrides replace the environment's answer entirely.
    expect_layout("-pn/-pr/-pg override mpirun's variables", openmpi(5, 8, 5, 8),
                  {2, 4, 0, 2, 1, 2, 0, "command line", false}, ov);
    DistOverrides one;
    one.num_processes = 1;
    expect_layout("-pn 1 alone", {}, {0, 1, 0, 1, 0, 1, 0, "command line", false}, one);
    DistOverrides no_rank;
    no_rank.num_processes = 2;
    expect_error("-pn 2 without -pr", [&] { compute_dist_info({}, no_rank); }, "-pr");
    DistOverrides zero;
    zero.num_processes = 0, zero.process_rank = 0;
    expect_error("-pn 0", [&] { compute_dist_info({}, zero); }, "-pn");
    DistOverrides bad_rank;
    bad_rank.num_processes = 2, bad_rank.process_rank = 2;
    expect_error("-pr 2 of -pn 2", [&] { compute_dist_info({}, bad_rank); }, "rank 2");
}

void test_bad_values() {
    EnvMap e = openmpi(0, 2, 0, 2);
    e["OMPI_COMM_WORLD_RANK"] = "one";
    expect_error("non-integer rank names the variable", [&] { compute_dist_info(e); }, "OMPI_COMM_WORLD_RANK='one'");
    e["OMPI_COMM_WORLD_RANK"] = "-1";
    expect_error("negative rank", [&] { compute_dist_info(e); }, "OMPI_COMM_WORLD_RANK");
    e["OMPI_COMM_WORLD_RANK"] = "3 ";
    expect_error("trailing characters", [&] { compute_dist_info(e); }, "OMPI_COMM_WORLD_RANK");
    expect_error("rank >= world size", [&] { compute_dist_info(openmpi(4, 4, 0, 4)); }, "rank 4");
    expect_error("local rank >= local size", [&] { compute_dist_info(openmpi(1, 4, 2, 2)); }, "local rank 2");
    expect_error("world size 0", [&] { compute_dist_info(openmpi(0, 0, 0, 1)); }, "world size 0");
    expect_error("RANK without WORLD_SIZE", [&] { compute_dist_info({{"RANK", "0"}}); }, "WORLD_SIZE");
    expect_error("LOCAL_RANK without LOCAL_WORLD_SIZE",
                 [&] { compute_dist_info({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}); },
                 "LOCAL_WORLD_SIZE");
    expect_error("slurm malformed tasks-per-node",
                 [&] { compute_dist_info(slurm(0, 4, 0, 0, 2, "2(2)")); }, "SLURM_STEP_TASKS_PER_NODE");
    expect_error("slurm node past the tasks-per-node list",
                 [&] { compute_dist_info(slurm(5, 6, 0, 2, 3, "2(x2)")); }, "past its end");
}

void test_slurm_list() {
    check("slurm list 4(x2),3: node 0", slurm_tasks_on_node("4(x2),3", 0) == 4);
    check("slurm list 4(x2),3: node 1", slurm_tasks_on_node("4(x2),3", 1) == 4);
    check("slurm list 4(x2),3: node 2", slurm_tasks_on_node("4(x2),3", 2) == 3);
    check("slurm list 1,2,3: node 2", slurm_tasks_on_node("1,2,3", 2) == 3);
    check("slurm list 8: node 0", slurm_tasks_on_node("8", 0) == 8);
    expect_error("slurm list 4(x2),3: node 3 is past the end", [] { slurm_tasks_on_node("4(x2),3", 3); }, "past");
    expect_error("slurm list '' covers no node", [] { slurm_tasks_on_node("", 0); }, "covers 0 nodes");
    for (const char* bad : {"x", "4(x)", "4(x2", "4;3", "4(y2)", "4,,3"})
        expect_error(std::string("slurm list '") + bad + "' is malformed", [&] { slurm_tasks_on_node(bad, 0); },
                     "malformed");
}

void test_helpers() {
    check("launched_with_mpi: openmpi", launched_with_mpi(openmpi(0, 2, 0, 2)));
    check("launched_with_mpi: srun --mpi=pmix", launched_with_mpi({{"PMIX_RANK", "0"}}));
    check("launched_with_mpi: torchrun is not MPI", !launched_with_mpi({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
    check("launched_with_mpi: plain process", !launched_with_mpi({}));

    check("launch_tag: LLMC_RUN_ID wins", launch_tag({{"LLMC_RUN_ID", "exp1"}, {"SLURM_JOB_ID", "5"}}) == "exp1");
    std::string t = launch_tag({{"SLURM_JOB_ID", "5"}, {"SLURM_STEP_ID", "2"}, {"SLURM_RESTART_COUNT", "1"}});
    check("launch_tag: slurm job.step.restart", t == "slurm5.2.r1", "got %s", t.c_str());
    t = launch_tag({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
    check("launch_tag: master address", t == "10.0.0.1_29500", "got %s", t.c_str());
    check("launch_tag: default", launch_tag({}) == "default");
    t = launch_tag({{"LLMC_RUN_ID", "a/b c"}});
    check("launch_tag: unsafe characters replaced", t == "a_b_c", "got %s", t.c_str());

    DistInfo d = compute_dist_info(openmpi(3, 8, 3, 8));
    check("describe", d.describe() == "rank 3/8 (local 3/8, node 0/1, gpu 3, openmpi)", "got %s",
          d.describe().c_str());
    check("device_for_local_rank: all GPUs visible", device_for_local_rank({}, 5, 8) == 5);
    check("device_for_local_rank: empty CUDA_VISIBLE_DEVICES keeps the local rank",
          device_for_local_rank({{"CUDA_VISIBLE_DEVICES", ""}}, 1, 2) == 1);
    check("current_environment sees PATH", current_environment().count("PATH") == 1);
}

}  // namespace

// Which layouts the launcher stated itself (DistInfo::node_exact: MpiComm keeps them) and which it left to MPI.
void test_node_exact() {
    DistOverrides ov;
    ov.num_processes = 4, ov.process_rank = 2, ov.gpus_per_node = 2;
    EnvMap tr = {{"RANK", "10"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "8"}};
    const bool torchrun_assumed = compute_dist_info(tr).node_exact;
    tr["GROUP_RANK"] = "1";
    check("the launcher's own layout is exact for Slurm, torchrun with GROUP_RANK and -pn/-pr/-pg only",
          compute_dist_info(slurm(4, 6, 1, 1, 2, "3(x2)")).node_exact && compute_dist_info(tr).node_exact &&
              compute_dist_info({}, ov).node_exact && !torchrun_assumed &&
              !compute_dist_info(openmpi(4, 6, 1, 3)).node_exact && !compute_dist_info(openmpi(1, 2, 1, 2)).node_exact &&
              !compute_dist_info({}).node_exact);
}

int main() {
    test_layouts();
    test_node_exact();
    test_overrides();
    test_bad_values();
    test_slurm_list();
    test_helpers();
    return testing::finish();
}
