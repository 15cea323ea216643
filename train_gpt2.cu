// The GPT-2 trainer. One source, three programs (llmc/main_backend.h):
//   g++ -DLLMC_CUDA (or nvcc) -> ./train_gpt2      CUDA backend (bf16 kernels, cuBLASLt, NCCL)
//   g++                       -> ./train_gpt2_cpu  CPU backend (fp32, OpenMP, OpenBLAS)
//   g++ -DLLMC_CUDA -DLLMC_CUDASIM -> build/train_gpt2_sim: the CUDA backend on the CUDA simulator (tests only)
// Everything else (model, loop, optimizer, data, logging) is shared host code in llmc/.
//
//   ./train_gpt2_cpu -i "data/brown/brown_train_*.bin" -j "data/brown/brown_val_*.bin" -e d6 -b 4 -t 128 -x 100
//   mpirun -np 8 ./train_gpt2 -i ... -e d12 -b 64 -t 1024 -d 524288 -o runs/d12
#include <cstdio>

#include "llmc/cli.h"
#include "llmc/dist_info.h"
#include "llmc/launch_check.h"
#include "llmc/error.h"
#include "llmc/main_backend.h"
#include "llmc/mpi_env.h"
#include "llmc/test_hooks.h"
#include "llmc/trainer.h"

using Backend = llmc::MainBackend;

int main(int argc, char** argv) {
#if !LLMC_MAIN_CUDA
    llmc::use_passive_openmp_wait(argv);  // before OpenMP starts: idle threads sleep (llmc/cpu/thread_policy.h)
#endif
    try {
        llmc::TrainOptions opt = llmc::parse_train_options(argc, argv, Backend::name);
        if (opt.dry_run) {  // before any device memory exists; -pn plans for another world size
            llmc::BackendOptions bo;
            bo.num_threads = opt.threads;
            const llmc::DistInfo launched = llmc::compute_dist_info(llmc::current_environment());
            if (opt.num_processes == 0) llmc::fail("-pn 0: the number of processes must be at least 1");
            const int world = opt.num_processes > 0 ? opt.num_processes : launched.world_size;
            if (launched.rank == 0) llmc::print_memory_plan<Backend>(opt, world, launched, bo);
            return 0;
        }
        llmc::DistOverrides ov;
        ov.num_processes = opt.num_processes, ov.process_rank = opt.process_rank;
        ov.gpus_per_node = opt.gpus_per_node;
        llmc::DistInfo info = llmc::compute_dist_info(llmc::current_environment(), ov);
        llmc::BackendOptions bo;
        bo.device = info.device, bo.num_threads = opt.threads, bo.recompute_gelu = opt.recompute >= 1;
        bo.seed = opt.seed, bo.gemm_tuning = opt.gemm_tuning == 1, bo.bias_grad_epilogue = opt.bias_grad_epilogue == 1;
        Backend backend(bo);
        llmc::CommOptions co;
        co.init = llmc::parse_comm_init(opt.init_method), co.rendezvous_dir = opt.rendezvous_dir;
        co.watchdog_s = opt.comm_timeout;
        std::unique_ptr<llmc::Comm> comm = llmc::create_comm(backend, info, co);
        llmc::check_launch_layout(*comm);  // before the trainer touches -o
        int rc = llmc::Trainer<Backend>(opt, backend, *comm, llmc::hooks_from_environment()).run();
        comm.reset();
        llmc::mpi_finalize();
        return rc;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "error: %s\n", e.what());
        llmc::mpi_abort(1);
        return 1;
    }
}
