// The simulator's NCCL (dev/cudasim/nccl.cpp) over MPI: run with mpirun -np N (N >= 1).
// Values are small integers, exact in fp32 and bf16, so every expected result is exact, whatever the order of the
// sums. At 3 or more ranks, the reduction orders themselves (test_orders): values chosen so that the order shows.
#include <cuda_runtime.h>
#include <nccl.h>

#include <mpi.h>

#include "test/fixtures/testing.h"

#include <algorithm>
#include <string>
#include <vector>

using testing::check;

template <class T>
T* dev(const std::vector<T>& h) {
    T* d = nullptr;
    cudaMalloc(&d, h.size() * sizeof(T));
    cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return d;
}
template <class T>
std::vector<T> host(const T* d, size_t n) {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
}

// Reduction orders at N >= 3 ranks (docs/cudasim.md, "NCCL reduction orders"). Rank 0 contributes 1, ranks 1 and
// 2 contribute h (the others 0), h half an ulp of 1: a chain that starts at rank 1 forms h + h = 2h first and then
// 1 + 2h exactly, every other chain adds h to 1 first, which rounds (to even) back to 1. So each element shows
// whether its chain started at rank 1. fp32: h = 2^-24; bf16 (rounded at every hop as NCCL's kernels do): h = 2^-8.
void test_orders(ncclComm_t comm, cudaStream_t s, int rank, int size, const std::string& np) {
    const size_t n = 3000;  // 12 KB: one ring channel, chunks of 1000 elements at 3 ranks
    const float h = 0x1p-24f, from_rank1 = 1.0f + 2 * h;
    std::vector<float> x(n, rank == 0 ? 1.0f : rank <= 2 ? h : 0.0f);
    float* dx = dev(x);
    float *dall, *dall2, *dred;
    cudaMalloc(&dall, n * sizeof(float));
    cudaMalloc(&dall2, n * sizeof(float));
    cudaMalloc(&dred, n * sizeof(float));
    ncclAllReduce(dx, dall, n, ncclFloat32, ncclSum, comm, s);
    ncclAllReduce(dx, dall2, n, ncclFloat32, ncclSum, comm, s);
    ncclReduce(dx, dred, n, ncclFloat32, ncclSum, 0, comm, s);
    const auto all = host(dall, n), all2 = host(dall2, n), red = host(dred, n);
    size_t started_at_1 = 0;
    bool only_two_values = true;
    for (float v : all) {
        started_at_1 += v == from_rank1;
        only_two_values = only_two_values && (v == from_rank1 || v == 1.0f);
    }
    check("ncclAllReduce fp32: the chain's first rank rotates between chunks (" + std::to_string(started_at_1) + " of " +
              std::to_string(n) + " elements summed from rank 1)" + np,
          only_two_values && started_at_1 > 0 && started_at_1 < n);
    check("ncclAllReduce fp32: the same call gives the same bits (deterministic order)" + np, all == all2);
    std::vector<float> everyone(n * size);
    MPI_Allgather(all.data(), (int)n, MPI_FLOAT, everyone.data(), (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    bool same = true;
    for (int r = 0; r < size; r++) same = same && std::equal(all.begin(), all.end(), everyone.begin() + r * n);
    check("ncclAllReduce fp32: every rank receives the same bits" + np, same);
    if (rank == 0) {
        bool all_from_1 = true, differs = false;
        for (size_t i = 0; i < n; i++) {
            all_from_1 = all_from_1 && red[i] == from_rank1;
            differs = differs || red[i] != all[i];
        }
        check("ncclReduce fp32 to rank 0: every element summed from rank 1 (the root's successor)" + np, all_from_1);
        check("ncclReduce and ncclAllReduce of the same data differ in the last bit at " + std::to_string(size) +
                  " ranks" + np, differs);
    }
    // bf16, rounded at every hop: to root 0 the chain starts at rank 1 (1 + 2^-7); to root 1 at rank 2: (h + 1) + h
    // rounds twice, to 1. A sum formed in fp32 and rounded once would give 1 + 2^-7 for both.
    const float hb = 0x1p-8f;
    std::vector<__nv_bfloat16> b(n, __float2bfloat16_rn(rank == 0 ? 1.0f : rank <= 2 ? hb : 0.0f));
    __nv_bfloat16* db = dev(b);
    __nv_bfloat16 *dr0, *dr1;
    cudaMalloc(&dr0, n * sizeof(__nv_bfloat16));
    cudaMalloc(&dr1, n * sizeof(__nv_bfloat16));
    ncclReduce(db, dr0, n, ncclBfloat16, ncclSum, 0, comm, s);
    ncclReduce(db, dr1, n, ncclBfloat16, ncclSum, 1, comm, s);
    if (rank <= 1) {
        const auto got = host(rank == 0 ? dr0 : dr1, n);
        const float want = rank == 0 ? 1.0f + 2 * hb : 1.0f;
        bool ok = true;
        for (const auto& v : got) ok = ok && __bfloat162float(v) == want;
        check(std::string("ncclReduce bf16 to rank ") + (rank == 0 ? "0: from rank 1, 1 + 2^-7" : "1: from rank 2, "
              "rounded at every hop to 1") + np, ok);
    }
    cudaDeviceSynchronize();
    for (void* p : {(void*)dx, (void*)dall, (void*)dall2, (void*)dred, (void*)db, (void*)dr0, (void*)dr1}) cudaFree(p);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string np = " (np=" + std::to_string(size) + ", rank " + std::to_string(rank) + ")";

    ncclUniqueId id;
    if (rank == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    check("ncclCommInitRank" + np, ncclCommInitRank(&comm, size, id, rank) == ncclSuccess);
    cudaStream_t s;
    cudaStreamCreate(&s);

    const size_t n = 6;
    int sum_ranks = 0;
    for (int r = 0; r < size; r++) sum_ranks += r;

    // all-reduce fp32: element i of rank r is r + i.
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) x[i] = (float)(rank + i);
    float* dx = dev(x);
    float* dy;
    cudaMalloc(&dy, n * sizeof(float));
    ncclGroupStart();
    ncclAllReduce(dx, dy, n, ncclFloat32, ncclSum, comm, s);
    ncclGroupEnd();
    auto y = host(dy, n);
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok = ok && y[i] == (float)(sum_ranks + size * i);
    check("ncclAllReduce fp32 sum" + np, ok);
    ncclAllReduce(dx, dx, n, ncclFloat32, ncclMax, comm, s);  // in place
    y = host(dx, n);
    ok = true;
    for (size_t i = 0; i < n; i++) ok = ok && y[i] == (float)(size - 1 + i);
    check("ncclAllReduce fp32 max in place" + np, ok);

    // all-reduce bf16 average: element i of rank r is 2 * size * (r + i); the average is 2 * (sum_ranks + size * i).
    std::vector<__nv_bfloat16> b(n);
    for (size_t i = 0; i < n; i++) b[i] = __float2bfloat16_rn((float)(2 * size * (rank + i)));
    __nv_bfloat16* db = dev(b);
    ncclAllReduce(db, db, n, ncclBfloat16, ncclAvg, comm, s);
    auto bh = host(db, n);
    ok = true;
    for (size_t i = 0; i < n; i++) ok = ok && __bfloat162float(bh[i]) == (float)(2 * (sum_ranks + size * i));
    check("ncclAllReduce bf16 avg in place" + np, ok);

    // reduce fp32 sum to the last rank, out of place: the other ranks' receive buffers stay untouched.
    std::vector<float> minus(n, -1.0f);
    float* drecv = dev(minus);
    ncclReduce(dx, drecv, n, ncclFloat32, ncclSum, size - 1, comm, s);
    auto red = host(drecv, n);
    auto xs = host(dx, n);  // dx holds the max from above: size - 1 + i on every rank
    ok = true;
    for (size_t i = 0; i < n; i++)
        ok = ok && red[i] == (rank == size - 1 ? (float)(size * (size - 1 + i)) : -1.0f) && xs[i] == (float)(size - 1 + i);
    check("ncclReduce fp32 sum to the last rank" + np, ok);

    // reduce bf16 avg in place on rank 0: element i of rank r is 2 * size * (r + i); the others keep theirs.
    std::vector<__nv_bfloat16> rb(n);
    for (size_t i = 0; i < n; i++) rb[i] = __float2bfloat16_rn((float)(2 * size * (rank + i)));
    __nv_bfloat16* drb = dev(rb);
    ncclReduce(drb, drb, n, ncclBfloat16, ncclAvg, 0, comm, s);
    auto rbh = host(drb, n);
    ok = true;
    for (size_t i = 0; i < n; i++)
        ok = ok && __bfloat162float(rbh[i]) ==
                       (rank == 0 ? (float)(2 * (sum_ranks + size * i)) : (float)(2 * size * (rank + i)));
    check("ncclReduce bf16 avg in place on rank 0" + np, ok);

    // reduce-scatter fp32, in place: rank r keeps the sum of chunk r.
    std::vector<float> full(n * size);
    for (size_t i = 0; i < full.size(); i++) full[i] = (float)(rank * 100 + i);
    float* dfull = dev(full);
    ncclReduceScatter(dfull, dfull + rank * n, n, ncclFloat32, ncclSum, comm, s);
    auto rs = host(dfull + rank * n, n);
    ok = true;
    for (size_t i = 0; i < n; i++) ok = ok && rs[i] == (float)(100 * sum_ranks + size * (rank * n + i));
    check("ncclReduceScatter fp32 sum in place" + np, ok);

    // all-gather bf16, in place: chunk r holds rank r's values.
    std::vector<__nv_bfloat16> g(n * size, __float2bfloat16_rn(-1.0f));
    for (size_t i = 0; i < n; i++) g[rank * n + i] = __float2bfloat16_rn((float)(rank * 10 + i));
    __nv_bfloat16* dg = dev(g);
    ncclAllGather(dg + rank * n, dg, n, ncclBfloat16, comm, s);
    auto gh = host(dg, n * size);
    ok = true;
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < n; i++) ok = ok && __bfloat162float(gh[r * n + i]) == (float)(r * 10 + i);
    check("ncclAllGather bf16 in place" + np, ok);

    // broadcast from the last rank.
    std::vector<float> mine(n, (float)rank);
    float* dm = dev(mine);
    ncclBroadcast(dm, dm, n, ncclFloat32, size - 1, comm, s);
    auto bc = host(dm, n);
    ok = true;
    for (float v : bc) ok = ok && v == (float)(size - 1);
    check("ncclBroadcast from the last rank" + np, ok);

    if (size >= 3) test_orders(comm, s, rank, size, np);

    int count = 0, urank = -1;
    check("ncclCommCount / ncclCommUserRank" + np,
          ncclCommCount(comm, &count) == ncclSuccess && count == size && ncclCommUserRank(comm, &urank) == ncclSuccess &&
              urank == rank);
    check("ncclCommDestroy" + np, ncclCommDestroy(comm) == ncclSuccess);
    for (void* p : {(void*)dx, (void*)dy, (void*)db, (void*)drecv, (void*)drb, (void*)dfull, (void*)dg, (void*)dm})
        cudaFree(p);
    cudaStreamDestroy(s);
    const int rc = testing::finish();
    MPI_Finalize();
    return rc;
}
