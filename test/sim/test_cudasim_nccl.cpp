// The simulator's NCCL (dev/cudasim/nccl.cpp) over MPI: run with mpirun -np N (N >= 1).
// Values are small integers, exact in fp32 and bf16, so every expected result is exact.
#include <cuda_runtime.h>
#include <nccl.h>

#include <mpi.h>

#include "test/fixtures/testing.h"

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
