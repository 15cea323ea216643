// The CUDA backend's NcclComm (llmc/cuda/comm_nccl.cu) under the simulator, with mpirun -np N: every collective on
// the backend's comm stream, ordered with the main stream by the backend's events as the optimizer does it, and the
// barrier after collectives still queued on the non-blocking streams (the simulator reports two collectives of one
// communicator that nothing orders, so a barrier that does not wait for them fails here). Then the optimizer's
// stream contract (llmc/optimizer.h): after step() the main stream may read the parameters without a device
// synchronisation (the next forward does), for ZeRO 0 and 1, which must agree bitwise: they reduce by different
// collectives, which the simulated NCCL sums in different orders at 3 ranks, but the fixture's gradients are small
// multiples of 2^-6 whose sums are exact in fp32 in any order, so bit-identity holds by the math. And the host channel
// (test/fixtures/host_channel_checks.h), staged through NcclComm's own device buffer. With -np 1 the backend's Comm is
// the single-process one (no collective at world size 1): the same checks, through its device copies.
#include <cuda_bf16.h>

#include "llmc/bf16.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/cuda_comm.h"
#include "llmc/gpt2.h"
#include "llmc/zero_optimizer.h"
#include "test/fixtures/dist_testing.h"
#include "test/fixtures/host_channel_checks.h"
#include "test/fixtures/split_checks.h"
#include "test/fixtures/optimizer_fixture.h"

#include <cstring>
#include <string>
#include <vector>

namespace dt = dist_testing;
using llmc::DType;
using llmc::ReduceOp;

namespace {

// Runs f(comm stream) ordered after the main stream's work and before its later work (the optimizer's pattern).
template <class F>
void on_comm_stream(llmc::CudaBackend& be, F&& f) {
    be.comm_waits_main();
    f(be.comm_stream());
    be.main_waits_comm();
}

void test_nccl_comm(llmc::CudaBackend& be, llmc::Comm& comm) {
    const int W = comm.world_size(), r = comm.rank();
    const size_t n = 37;  // odd, so no collective size is a nice multiple
    // all_reduce (avg, fp32) of x_i = r + i: (W - 1) / 2 + i.
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = (float)(r + i);
    auto* d = (float*)be.alloc(W * n * sizeof(float));
    be.copy_to_device(d, h.data(), n * sizeof(float));
    on_comm_stream(be, [&](llmc::Stream s) { comm.all_reduce(d, n, DType::F32, ReduceOp::Avg, s); });
    std::vector<float> got(W * n), want(n);
    be.copy_to_host(got.data(), d, n * sizeof(float));
    for (size_t i = 0; i < n; i++) want[i] = (float)(W - 1) / 2.0f + (float)i;
    dt::check_close("NcclComm all_reduce avg fp32 on the comm stream", got.data(), want.data(), n, 1e-6, 1e-6);

    // reduce (sum) to the last rank, in place: x_i = 1 + i on every rank.
    for (size_t i = 0; i < n; i++) h[i] = (float)(1 + i);
    be.copy_to_device(d, h.data(), n * sizeof(float));
    on_comm_stream(be, [&](llmc::Stream s) { comm.reduce(d, d, n, DType::F32, ReduceOp::Sum, W - 1, s); });
    be.copy_to_host(got.data(), d, n * sizeof(float));
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok = ok && got[i] == (r == W - 1 ? (float)(W * (1 + i)) : (float)(1 + i));
    dt::check("NcclComm reduce sum to the last rank, in place", ok);

    // all_gather in place, bf16: rank r's block is r + i / 8 (exact in bf16).
    std::vector<float> mine(n);
    for (size_t i = 0; i < n; i++) mine[i] = (float)r + (float)i / 8.0f;
    auto* g = (__nv_bfloat16*)be.alloc(W * n * sizeof(__nv_bfloat16));
    be.upload_floats(g + r * n, mine.data(), n);
    on_comm_stream(be, [&](llmc::Stream s) { comm.all_gather(g + r * n, g, n, DType::BF16, s); });
    std::vector<float> all(W * n), all_want(W * n);
    be.download_floats(all.data(), g, W * n);
    for (int q = 0; q < W; q++)
        for (size_t i = 0; i < n; i++) all_want[q * n + i] = (float)q + (float)i / 8.0f;
    dt::check_close("NcclComm all_gather bf16 in place", all.data(), all_want.data(), W * n, 0, 0);

    // reduce_scatter (sum): block q of rank r's input is q * 100 + r; rank r receives sum_p (r * 100 + p).
    std::vector<float> blocks(W * n);
    for (int q = 0; q < W; q++)
        for (size_t i = 0; i < n; i++) blocks[q * n + i] = (float)(q * 100 + r);
    be.copy_to_device(d, blocks.data(), W * n * sizeof(float));
    on_comm_stream(be, [&](llmc::Stream s) { comm.reduce_scatter(d, d, n, DType::F32, ReduceOp::Sum, s); });
    be.copy_to_host(got.data(), d, n * sizeof(float));
    ok = true;
    for (size_t i = 0; i < n; i++) ok = ok && got[i] == (float)(W * r * 100 + W * (W - 1) / 2);
    dt::check("NcclComm reduce_scatter sum", ok);

    // broadcast from rank 0 on the main stream (as the checkpoint code does), after the comm stream's work.
    for (size_t i = 0; i < n; i++) h[i] = r == 0 ? (float)(7 * i) : -1.0f;
    be.copy_to_device(d, h.data(), n * sizeof(float));
    be.main_waits_comm();
    comm.broadcast(d, n, DType::F32, 0, be.main_stream());
    be.copy_to_host(got.data(), d, n * sizeof(float));
    ok = true;
    for (size_t i = 0; i < n; i++) ok = ok && got[i] == (float)(7 * i);
    dt::check("NcclComm broadcast from rank 0 on the main stream", ok);

    // A barrier while a collective is still queued on the (non-blocking) comm stream: its own collective on the
    // legacy default stream must be ordered after that one.
    be.comm_waits_main();
    comm.all_reduce(d, n, DType::F32, ReduceOp::Sum, be.comm_stream());
    comm.barrier();
    be.synchronize();
    be.copy_to_host(got.data(), d, n * sizeof(float));
    ok = true;
    for (size_t i = 0; i < n; i++) ok = ok && got[i] == (float)(W * 7 * i);
    dt::check("NcclComm barrier after a collective queued on the comm stream: ordered, and the collective ran", ok);
    be.free(d);
    be.free(g);
}

// Two AdamW steps on the tiny model with rank-dependent gradients; the parameters are read right after step() on
// the main stream only (Model::get_params synchronises the main stream, not the device). A step that leaves the main
// stream unordered with the comm stream's parameter gather is reported (both write or read the parameters) or reads
// stale values.
std::vector<float> optimizer_run(llmc::CudaBackend& be, llmc::Comm& comm, int stage) {
    using namespace optimizer_fixture;
    llmc::ModelConfig c = tiny_config();
    c.channels = 32;  // head size 16: the CUDA attention kernels refuse the fixture's head size 3 at construction
    llmc::Gpt2<llmc::CudaBackend> model(be, c, 1, 1, padded_for(comm.world_size()));
    const size_t n = model.num_params();
    model.set_params(initial_params(n));
    llmc::OptimConfig cfg;
    cfg.weight_decay = 0.1f;
    llmc::ZeroOptimizer<llmc::CudaBackend> opt(be, model, comm, cfg, stage, 42);
    std::vector<float> params;
    for (int step = 1; step <= 2; step++) {
        std::vector<float> g(n);
        for (size_t i = 0; i < n; i++) g[i] = (float)((int)((i * 7 + comm.rank() * 3 + step) % 17) - 8) * 0x1p-6f;
        be.copy_to_device(opt.reducer().grads(), g.data(), n * sizeof(float));
        opt.end_micro_step(true);
        opt.step(1e-2f, step);
        params = model.get_params();
    }
    be.synchronize();
    return params;
}

void test_optimizer_streams(llmc::CudaBackend& be, llmc::Comm& comm) {
    const std::vector<float> z0 = optimizer_run(be, comm, 0), z1 = optimizer_run(be, comm, 1);
    dt::check("Optimizer on the CUDA backend: parameters read on the main stream right after step() are the same "
              "for ZeRO 0 and ZeRO 1 (gathered, ordered)",
              z0.size() == z1.size() && std::memcmp(z0.data(), z1.data(), z0.size() * sizeof(float)) == 0);
}

}  // namespace

int main() {
    return dt::run_main([](llmc::Comm& mpi) {
        llmc::CudaBackend be;
        std::unique_ptr<llmc::Comm> nccl = llmc::create_comm(be, mpi.info(), llmc::CommOptions());
        // One rank: the single-process Comm (no NCCL communicator, no collective kernel); the same checks hold.
        dt::check("create_comm: " + std::to_string(mpi.world_size()) + " rank(s) get the " +
                      (mpi.world_size() == 1 ? "single-process" : "NCCL") + " Comm",
                  std::string(nccl->name()) == (mpi.world_size() == 1 ? "single" : "nccl"));
        test_nccl_comm(be, *nccl);
        // The host channel right after a collective still queued on the comm stream: staged and ordered after it.
        std::vector<float> x(5, 1.0f);
        auto* d = (float*)be.alloc(x.size() * sizeof(float));
        be.copy_to_device(d, x.data(), x.size() * sizeof(float));
        be.comm_waits_main();
        nccl->all_reduce(d, x.size(), DType::F32, ReduceOp::Sum, be.comm_stream());
        host_channel_checks::run(*nccl, "nccl");
        be.copy_to_host(x.data(), d, x.size() * sizeof(float));
        dt::check("NcclComm: the queued all_reduce ran before the host channel's", x[4] == (float)nccl->world_size());
        be.free(d);
        test_optimizer_streams(be, *nccl);
        split_checks::run(*nccl, "nccl");
    });
}
