// The simulator's tensor-core instructions (dev/cudasim/warp_mma.cpp through llmc/cuda/mma.cuh), lane by lane.
//
// 1. mma: each lane builds its A, B, C fragments from plain row-major matrices with the PTX ISA's formulas (section
//    9.7.14.5.8, written out again here from the table), the warp multiplies, and every lane's D values must be the
//    plain product at the places the C/D formula names. Values are small integers (exact in bf16 and fp32), so the
//    comparison is exact. A few lanes' fragments are also checked against literal entries of the table.
// 2. ldmatrix (.x4, with and without .trans) from a padded row-major tile in shared memory: every lane's registers
//    must equal the fragments the formulas give, in the three uses the attention kernels make of it (A operand,
//    B operand from a [n][k] tile, B operand from a [k][n] tile); then ldmatrix + mma must give the plain product.
// 3. cp.async: a copy lands when its thread waits for its group (wait_group N leaves the N newest groups pending),
//    zero-fill, and the data is visible to the other threads after wait + __syncthreads; with the landing at the
//    issue (CUDASIM_CP_ASYNC=at-issue) a copy issued into a buffer another warp may still be reading overwrites it;
//    a block that exits with copies it never waited for is reported (a grid's only block too).
// 4. The instruction text: the simulator executes the string mma.cuh gives nvcc (dev/cudasim/ptx.cpp), so other
//    forms of it (.x2, .x1, .trans, an 8-byte cp.async.ca) do what their text says.
// Every kernel runs under every thread order of the simulator (the text test under the default one).
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cudasim.h"
#include "llmc/bf16.h"
#include "llmc/cuda/common.cuh"
#include "llmc/cuda/mma.cuh"
#include "test/fixtures/death_test.h"
#include "test/fixtures/testing.h"

namespace {

using llmc::bf16;

// ---- the PTX ISA's fragment formulas (g = lane >> 2, t = lane % 4) ------------------------------------------------
__device__ __host__ int a_row(int lane, int i) { return (lane >> 2) + ((i % 4) >= 2 ? 8 : 0); }
__device__ __host__ int a_col(int lane, int i) { return (lane % 4) * 2 + (i & 1) + (i >= 4 ? 8 : 0); }
__device__ __host__ int b_row(int lane, int i) { return (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0); }
__device__ __host__ int b_col(int lane, int) { return lane >> 2; }
__device__ __host__ int c_row(int lane, int i) { return (lane >> 2) + (i >= 2 ? 8 : 0); }
__device__ __host__ int c_col(int lane, int i) { return (lane % 4) * 2 + (i & 1); }

__device__ uint32_t pack(bf16 lo, bf16 hi) {
    uint16_t l, h;
    memcpy(&l, &lo, 2);
    memcpy(&h, &hi, 2);
    return (uint32_t)l | (uint32_t)h << 16;
}

// A (16x16), B (16x8, row = k), C (16x8) row-major in global memory; D (16x8) written; the fragments each lane
// built are written to afrag (32x4) and bfrag (32x2).
__global__ void mma_formula_kernel(float* D, uint32_t* afrag, uint32_t* bfrag, const bf16* A, const bf16* B,
                                   const float* C) {
    const int lane = threadIdx.x;
    uint32_t a[4], b[2];
    float c[4], d[4];
    for (int r = 0; r < 4; r++)
        a[r] = pack(A[a_row(lane, 2 * r) * 16 + a_col(lane, 2 * r)], A[a_row(lane, 2 * r + 1) * 16 + a_col(lane, 2 * r + 1)]);
    for (int r = 0; r < 2; r++)
        b[r] = pack(B[b_row(lane, 2 * r) * 8 + b_col(lane, 2 * r)], B[b_row(lane, 2 * r + 1) * 8 + b_col(lane, 2 * r + 1)]);
    for (int i = 0; i < 4; i++) c[i] = C[c_row(lane, i) * 8 + c_col(lane, i)];
    llmc::mma_bf16_16816(d, a, b, c);
    for (int i = 0; i < 4; i++) D[c_row(lane, i) * 8 + c_col(lane, i)] = d[i];
    for (int r = 0; r < 4; r++) afrag[lane * 4 + r] = a[r];
    for (int r = 0; r < 2; r++) bfrag[lane * 2 + r] = b[r];
}

// ldmatrix from a 16x16 tile T (rows padded to 24 elements = 48 bytes, as the attention kernels pad theirs):
//   out[lane][0..3]  = A fragment of T            (lane address: row l % 16, column (l / 16) * 8)
//   out[lane][4..7]  = B fragments of two n8 tiles, B[k][n] = T[n][k]   (row (l / 16) * 8 + l % 8, col (l / 8 % 2) * 8)
//   out[lane][8..11] = B fragments of two n8 tiles, B[k][n] = T[k][n]   (.trans; row (l / 8 % 2) * 8 + l % 8, col (l / 16) * 8)
// and D = T(as A) * T(as [k][n] B, first n8 tile) via ldmatrix + mma.
constexpr int kPad = 24;
__global__ void ldmatrix_kernel(uint32_t* out, float* D, const bf16* T) {
    __shared__ __align__(16) bf16 tile[16 * kPad];
    const int l = threadIdx.x;
    for (int i = l; i < 16 * 16; i += 32) tile[(i / 16) * kPad + i % 16] = T[i];
    __syncthreads();
    uint32_t a[4], bn[4], bt[4];
    llmc::ldmatrix_x4(a, &tile[(l % 16) * kPad + (l / 16) * 8]);
    llmc::ldmatrix_x4(bn, &tile[((l / 16) * 8 + l % 8) * kPad + (l / 8 % 2) * 8]);
    llmc::ldmatrix_x4_trans(bt, &tile[((l / 8 % 2) * 8 + l % 8) * kPad + (l / 16) * 8]);
    for (int r = 0; r < 4; r++) {
        out[l * 12 + r] = a[r];
        out[l * 12 + 4 + r] = bn[r];
        out[l * 12 + 8 + r] = bt[r];
    }
    float d[4], c[4] = {0, 0, 0, 0};
    llmc::mma_bf16_16816(d, a, bt, c);
    for (int i = 0; i < 4; i++) D[c_row(l, i) * 8 + c_col(l, i)] = d[i];
}

// cp.async: 64 threads, each copies two 16-byte chunks of src (group 1: chunk tid, group 2: chunk 64 + tid) and one
// zero-filled chunk (group 2: chunk 128 + tid). After wait<1> the thread's group-1 chunk has landed and its group-2
// chunk has not (the simulator completes copies at the wait); after wait<0> + __syncthreads every thread reads every
// chunk. Results: seen[tid] = 1 if the own group-1 chunk matched after wait<1>, + 2 if the own group-2 chunk was
// still untouched then; dst = the whole shared buffer at the end.
__global__ void cp_async_kernel(int* seen, uint4* dst, const uint4* src) {
    __shared__ __align__(16) uint4 buf[3 * 64];
    const int t = threadIdx.x;
    const uint4 marker = make_uint4(0xdeadbeefu, 1u, 2u, 3u);
    buf[t] = buf[64 + t] = buf[128 + t] = marker;
    __syncthreads();
    llmc::cp_async_16(&buf[t], &src[t], true);
    llmc::cp_async_commit();
    llmc::cp_async_16(&buf[64 + t], &src[64 + t], true);
    llmc::cp_async_16(&buf[128 + t], &src[0], false);
    llmc::cp_async_commit();
    llmc::cp_async_wait<1>();
    int s = 0;
    if (memcmp(&buf[t], &src[t], 16) == 0) s |= 1;
    if (memcmp(&buf[64 + t], &marker, 16) == 0) s |= 2;
    seen[t] = s;
    llmc::cp_async_wait<0>();
    __syncthreads();
    for (int i = t; i < 3 * 64; i += 64) dst[i] = buf[i];
}

// A double-buffered loop of 64 threads over kRefillTiles tiles of 64 16-byte chunks: each thread copies chunk tid of
// tile k + 1 into the other buffer and reads chunk tid ^ 32 of tile k (written by a thread of the other warp), folding
// its first words into sums[tid]. Refilled after the loop's barrier, the other buffer was last read before that
// barrier: right. Refilled before it (refill_before_barrier), the copy may land while the other warp still reads the
// previous tile from that buffer: a write-after-read race on a GPU, which only a copy landing at its issue shows.
constexpr int kRefillTiles = 4;
__global__ void refill_kernel(uint32_t* sums, const uint4* src, bool refill_before_barrier) {
    __shared__ __align__(16) uint4 buf[2][64];
    const int t = threadIdx.x;
    llmc::cp_async_16(&buf[0][t], &src[t], true);
    llmc::cp_async_commit();
    uint32_t sum = 0;
    for (int k = 0; k < kRefillTiles; k++) {
        llmc::cp_async_wait<0>();
        const bool refill = k + 1 < kRefillTiles;
        if (refill && refill_before_barrier) llmc::cp_async_16(&buf[(k + 1) % 2][t], &src[(k + 1) * 64 + t], true);
        __syncthreads();
        if (refill && !refill_before_barrier) llmc::cp_async_16(&buf[(k + 1) % 2][t], &src[(k + 1) * 64 + t], true);
        llmc::cp_async_commit();
        sum = sum * 31u + buf[k % 2][t ^ 32].x;
    }
    sums[t] = sum;
}

// One copy per thread, committed; waited for unless `leave_pending`: a block that exits with it pending is reported
// (on a GPU the copy would land in shared memory that may already be another block's), the last one included.
__global__ void unwaited_copy_kernel(const uint4* src, bool leave_pending) {
    __shared__ __align__(16) uint4 buf[32];
    llmc::cp_async_16(&buf[threadIdx.x], &src[threadIdx.x], true);
    llmc::cp_async_commit();
    if (!leave_pending) llmc::cp_async_wait<0>();
}

// A device copy of a host array, freed with the object.
// The simulator executes the instruction text it is given (dev/cudasim/ptx.cpp): the .x2 / .x1 forms give the first
// two / one of the .x4 form's registers, .trans the transposed ones, and an 8-byte cp.async.ca copies 8 bytes.
__global__ void ptx_text_kernel(uint32_t* out, const bf16* T, const uint2* src) {
    __shared__ __align__(16) bf16 tile[16 * 16];
    __shared__ __align__(16) uint2 copied[32];
    const int lane = threadIdx.x;
    for (int j = 0; j < 8; j++) tile[lane * 8 + j] = T[lane * 8 + j];
    __syncthreads();
    const bf16* row = tile + (lane % 16) * 16 + (lane / 16) * 8;
    uint32_t r4[4], t4[4], r2[2], t1[1];
    cudasim::ptx("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];", {&r4[0], &r4[1], &r4[2], &r4[3], row});
    cudasim::ptx("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];",
                 {&t4[0], &t4[1], &t4[2], &t4[3], row});
    cudasim::ptx("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];", {&r2[0], &r2[1], row});
    cudasim::ptx("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];", {&t1[0], row});
    cudasim::ptx("cp.async.ca.shared.global [%0], [%1], 8;", {&copied[lane], &src[lane]});
    cudasim::ptx("cp.async.commit_group;", {});
    cudasim::ptx("cp.async.wait_all;", {});
    uint32_t* o = out + lane * 12;
    for (int i = 0; i < 4; i++) o[i] = r4[i], o[4 + i] = t4[i];
    o[8] = r2[0], o[9] = r2[1], o[10] = t1[0];
    o[11] = copied[lane].x == src[lane].x && copied[lane].y == src[lane].y;
}

template <class T>
struct DeviceArray {
    T* ptr = nullptr;
    size_t n;
    explicit DeviceArray(const std::vector<T>& h) : n(h.size()) {
        cudaMalloc(&ptr, n * sizeof(T));
        cudaMemcpy(ptr, h.data(), n * sizeof(T), cudaMemcpyHostToDevice);
    }
    ~DeviceArray() { cudaFree(ptr); }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    std::vector<T> fetch() const {
        std::vector<T> h(n);
        cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
        return h;
    }
};
std::vector<bf16> to_bf16(const std::vector<float>& v) {
    std::vector<bf16> out(v.size());
    for (size_t i = 0; i < v.size(); i++) out[i] = __float2bfloat16_rn(v[i]);
    return out;
}
uint32_t host_pack(float lo, float hi) {
    return (uint32_t)llmc::float_to_bf16(lo) | (uint32_t)llmc::float_to_bf16(hi) << 16;
}

void test_mma() {
    // Distinct, exactly representable values: A(r, k) = r * 16 + k, B(k, n) = k * 8 + n - 64, C(r, n) = r - n.
    std::vector<float> A(256), B(128), C(128);
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) A[r * 16 + k] = (float)(r * 16 + k);
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) B[k * 8 + n] = (float)(k * 8 + n - 64);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) C[r * 8 + n] = (float)(r - n);
    std::vector<double> want(128);  // every partial sum is an integer below 2^24: exact in fp32
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            double s = C[r * 8 + n];
            for (int k = 0; k < 16; k++) s += (double)A[r * 16 + k] * B[k * 8 + n];
            want[r * 8 + n] = s;
        }
    const DeviceArray<bf16> dA(to_bf16(A)), dB(to_bf16(B));
    const DeviceArray<float> dC(C), dD(std::vector<float>(128, 0.0f));
    const DeviceArray<uint32_t> dafrag(std::vector<uint32_t>(128, 0)), dbfrag(std::vector<uint32_t>(64, 0));
    cudasim::for_each_order([&](cudasim::Order o) {
        const std::string tag = std::string("mma m16n8k16 (") + cudasim::order_name(o) + ")";
        cudaMemset(dD.ptr, 0xff, 128 * sizeof(float));
        cudasim::launch(mma_formula_kernel, dim3(1), dim3(32), 0, nullptr, dD.ptr, dafrag.ptr, dbfrag.ptr,
                        (const bf16*)dA.ptr, (const bf16*)dB.ptr, (const float*)dC.ptr);
        std::vector<float> D = dD.fetch();
        size_t bad = 0;
        for (int i = 0; i < 128; i++) bad += (double)D[i] != want[i];
        testing::check(tag + ": every lane's D fragment is the plain product A B + C", bad == 0,
                       "%zu of 128 elements differ (e.g. D[0] = %g, want %g)", bad, D[0], want[0]);
    });
    // Literal entries of the PTX table: lane 5 is g = 1, t = 1.
    std::vector<uint32_t> af = dafrag.fetch(), bfr = dbfrag.fetch();
    const uint32_t lane5_a[4] = {host_pack(A[1 * 16 + 2], A[1 * 16 + 3]), host_pack(A[9 * 16 + 2], A[9 * 16 + 3]),
                                 host_pack(A[1 * 16 + 10], A[1 * 16 + 11]), host_pack(A[9 * 16 + 10], A[9 * 16 + 11])};
    const uint32_t lane5_b[2] = {host_pack(B[2 * 8 + 1], B[3 * 8 + 1]), host_pack(B[10 * 8 + 1], B[11 * 8 + 1])};
    const uint32_t lane30_a0 = host_pack(A[7 * 16 + 4], A[7 * 16 + 5]);  // lane 30: g = 7, t = 2
    const bool literal = std::memcmp(&af[5 * 4], lane5_a, sizeof lane5_a) == 0 &&
                         std::memcmp(&bfr[5 * 2], lane5_b, sizeof lane5_b) == 0 && af[30 * 4] == lane30_a0;
    testing::check("mma fragments: lane 5 holds A (1,2..3) (9,2..3) (1,10..11) (9,10..11), B (2..3,1) (10..11,1); "
                   "lane 30 a0 = A (7,4..5)", literal, "the formulas do not reproduce the PTX table's entries");
}

void test_ldmatrix() {
    std::vector<float> T(256);
    for (int i = 0; i < 256; i++) T[i] = (float)((i * 37) % 97 - 48) / 8.0f;  // multiples of 1/8: exact products
    const std::vector<bf16> Tb = to_bf16(T);
    // What the formulas say each lane must hold.
    std::vector<uint32_t> want(32 * 12);
    auto Tv = [&](int r, int c) { return T[r * 16 + c]; };
    for (int l = 0; l < 32; l++) {
        for (int r = 0; r < 4; r++)
            want[l * 12 + r] = host_pack(Tv(a_row(l, 2 * r), a_col(l, 2 * r)), Tv(a_row(l, 2 * r + 1), a_col(l, 2 * r + 1)));
        for (int nt = 0; nt < 2; nt++)
            for (int r = 0; r < 2; r++) {
                const int i0 = 2 * r, i1 = 2 * r + 1, n = nt * 8 + b_col(l, 0);
                want[l * 12 + 4 + nt * 2 + r] = host_pack(Tv(n, b_row(l, i0)), Tv(n, b_row(l, i1)));   // B = T^T
                want[l * 12 + 8 + nt * 2 + r] = host_pack(Tv(b_row(l, i0), n), Tv(b_row(l, i1), n));   // B = T
            }
    }
    std::vector<double> prod(128);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            double s = 0;
            for (int k = 0; k < 16; k++) s += (double)Tv(r, k) * Tv(k, n);
            prod[r * 8 + n] = s;
        }
    const DeviceArray<bf16> dT(Tb);
    const DeviceArray<uint32_t> dout(std::vector<uint32_t>(32 * 12, 0));
    const DeviceArray<float> dD(std::vector<float>(128, 0.0f));
    cudasim::for_each_order([&](cudasim::Order o) {
        const std::string tag = std::string("ldmatrix.x4 (") + cudasim::order_name(o) + ")";
        cudaMemset(dout.ptr, 0, 32 * 12 * sizeof(uint32_t));
        cudasim::launch(ldmatrix_kernel, dim3(1), dim3(32), 0, nullptr, dout.ptr, dD.ptr, (const bf16*)dT.ptr);
        std::vector<uint32_t> got = dout.fetch();
        const char* what[3] = {"A fragment of a row-major tile", "B fragments of a [n][k] tile",
                               "B fragments of a [k][n] tile (.trans)"};
        for (int u = 0; u < 3; u++) {
            int bad_lane = -1;
            for (int l = 0; l < 32 && bad_lane < 0; l++)
                if (std::memcmp(&got[l * 12 + 4 * u], &want[l * 12 + 4 * u], 16) != 0) bad_lane = l;
            testing::check(tag + ": every lane holds the " + what[u], bad_lane < 0, "lane %d differs", bad_lane);
        }
        std::vector<float> D = dD.fetch();
        size_t bad = 0;
        for (int i = 0; i < 128; i++) bad += (double)D[i] != prod[i];
        testing::check(tag + " + mma: the plain product of the tile with itself", bad == 0, "%zu elements differ", bad);
    });
}

void test_cp_async() {
    std::vector<uint4> src(128);
    for (uint32_t i = 0; i < 128; i++) src[i] = make_uint4(i, i * 3u + 1u, ~i, 0x5a5a0000u + i);
    const DeviceArray<uint4> dsrc(src), ddst(std::vector<uint4>(3 * 64));
    const DeviceArray<int> dseen(std::vector<int>(64, 0));
    const cudasim::CpAsyncLanding saved = cudasim::cp_async_landing();
    for (cudasim::CpAsyncLanding landing : {cudasim::CpAsyncLanding::AtWait, cudasim::CpAsyncLanding::AtIssue}) {
        cudasim::set_cp_async_landing(landing);
        const bool at_wait = landing == cudasim::CpAsyncLanding::AtWait;
        cudasim::for_each_order([&](cudasim::Order o) {
            const std::string tag = std::string("cp.async landing at the ") + (at_wait ? "wait" : "issue") + " (" +
                                    cudasim::order_name(o) + ")";
            cudasim::launch(cp_async_kernel, dim3(2), dim3(64), 0, nullptr, dseen.ptr, ddst.ptr,
                            (const uint4*)dsrc.ptr);
            std::vector<int> seen = dseen.fetch();
            std::vector<uint4> dst = ddst.fetch();
            bool groups = true;
            for (int s : seen) groups = groups && s == (at_wait ? 3 : 1);
            testing::check(tag + (at_wait ? ": wait_group 1 completes the older group and leaves the newest pending"
                                          : ": both groups have landed at wait_group 1"),
                           groups, "thread 0 saw %d (1: own group-1 chunk landed, 2: group-2 chunk still pending)",
                           seen[0]);
            bool all = std::memcmp(dst.data(), src.data(), 128 * sizeof(uint4)) == 0;
            for (int i = 128; i < 192; i++)
                all = all && dst[i].x == 0 && dst[i].y == 0 && dst[i].z == 0 && dst[i].w == 0;
            testing::check(tag + ": after wait_group 0 + __syncthreads every thread sees every copy (zero-fill "
                                 "included)", all, "the shared buffer differs from the source");
        });
    }
    cudasim::set_cp_async_landing(saved);
}

// A block that never waits for its copies is reported when it ends, even as a grid's only (last) block.
void test_cp_async_unwaited() {
    const DeviceArray<uint4> dsrc(std::vector<uint4>(32, make_uint4(1u, 2u, 3u, 4u)));
    const uint4* src = dsrc.ptr;
    for (unsigned blocks : {1u, 3u}) {
        auto run = [=](bool leave_pending) {
            return [=] {
                cudasim::launch(unwaited_copy_kernel, dim3(blocks), dim3(32), 0, nullptr, src, leave_pending);
                cudaDeviceSynchronize();
            };
        };
        const std::string grid = std::to_string(blocks) + (blocks == 1 ? " block" : " blocks");
        std::string err;
        const bool reported =
            testing::aborts_with(run(true), {"unwaited_copy_kernel, block (", "never waited for"}, err);
        testing::check("cp.async left pending at a block's exit (grid of " + grid + "): reported, naming the kernel "
                       "and the block", reported, "stderr: %s", err.c_str());
        testing::check("cp.async waited for before the exit (grid of " + grid + "): nothing reported",
                       testing::runs_clean(run(false), err), "stderr: %s", err.c_str());
    }
}

// The refill race of refill_kernel: invisible when copies land at the wait (the copy lands after the barrier that
// the late reader must reach first), shown under the warp-serial orders when they land at the issue; the loop with
// the refill after the barrier is right either way.
void test_cp_async_refill_race() {
    std::vector<uint4> src(kRefillTiles * 64);
    for (uint32_t i = 0; i < src.size(); i++) src[i] = make_uint4(i * 2654435761u + 7u, 0u, 0u, 0u);
    std::vector<uint32_t> want(64, 0);
    for (int t = 0; t < 64; t++)
        for (int k = 0; k < kRefillTiles; k++) want[t] = want[t] * 31u + src[k * 64 + (t ^ 32)].x;
    const DeviceArray<uint4> dsrc(src);
    const DeviceArray<uint32_t> dsums(std::vector<uint32_t>(64, 0));
    auto right_in = [&](bool refill_before_barrier, cudasim::Order o) {
        cudasim::set_thread_order(o, 0x5eed);
        cudasim::launch(refill_kernel, dim3(1), dim3(64), 0, nullptr, dsums.ptr, (const uint4*)dsrc.ptr,
                        refill_before_barrier);
        return dsums.fetch() == want;
    };
    const cudasim::CpAsyncLanding saved = cudasim::cp_async_landing();
    const cudasim::Order saved_order = cudasim::thread_order();
    const uint64_t saved_seed = cudasim::thread_order_seed();
    const cudasim::Order orders[] = {cudasim::Order::Forward, cudasim::Order::Reverse, cudasim::Order::Shuffled,
                                     cudasim::Order::WarpSerial, cudasim::Order::WarpSerialReverse};
    for (cudasim::CpAsyncLanding landing : {cudasim::CpAsyncLanding::AtWait, cudasim::CpAsyncLanding::AtIssue}) {
        cudasim::set_cp_async_landing(landing);
        const bool at_wait = landing == cudasim::CpAsyncLanding::AtWait;
        const std::string mode = at_wait ? "landing at the wait" : "landing at the issue";
        for (cudasim::Order o : orders)
            testing::check(std::string("cp.async refill after the barrier, ") + mode + " (" + cudasim::order_name(o) +
                           "): right", right_in(false, o), "the sums differ");
        std::string wrong_in;
        for (cudasim::Order o : orders)
            if (!right_in(true, o)) wrong_in += std::string(" ") + cudasim::order_name(o);
        if (at_wait)
            testing::check("cp.async refill before the barrier, landing at the wait: the race cannot show",
                           wrong_in.empty(), "wrong under%s", wrong_in.c_str());
        else
            testing::check("cp.async refill before the barrier, landing at the issue: wrong under both warp-serial "
                           "orders", (wrong_in + " ").find(" warp-serial ") != std::string::npos &&
                                         (wrong_in + " ").find(" warp-serial-reverse ") != std::string::npos,
                           "wrong only under:%s", wrong_in.c_str());
    }
    cudasim::set_cp_async_landing(saved);
    cudasim::set_thread_order(saved_order, saved_seed);
}

void test_ptx_text() {
    std::vector<float> T(256);
    for (int i = 0; i < 256; i++) T[i] = (float)((i * 37) % 97 - 48) / 8.0f;
    std::vector<uint2> src(32);
    for (uint32_t i = 0; i < 32; i++) src[i] = make_uint2(i * 7u + 1u, ~i);
    const DeviceArray<bf16> dT(to_bf16(T));
    const DeviceArray<uint2> dsrc(src);
    const DeviceArray<uint32_t> dout(std::vector<uint32_t>(32 * 12, 0));
    cudasim::launch(ptx_text_kernel, dim3(1), dim3(32), 0, nullptr, dout.ptr, (const bf16*)dT.ptr,
                    (const uint2*)dsrc.ptr);
    const std::vector<uint32_t> got = dout.fetch();
    bool x2 = true, x1 = true, trans_differs = false, copied = true;
    for (int l = 0; l < 32; l++) {
        const uint32_t* o = &got[l * 12];
        x2 = x2 && o[8] == o[0] && o[9] == o[1];
        x1 = x1 && o[10] == o[4];
        trans_differs = trans_differs || o[4] != o[0];
        copied = copied && o[11] == 1;
    }
    testing::check("PTX text: ldmatrix .x2 gives the first two registers of .x4", x2);
    testing::check("PTX text: ldmatrix .x1.trans gives the first register of .x4.trans", x1);
    testing::check("PTX text: .trans in the string transposes (the registers differ on a non-symmetric tile)",
                   trans_differs);
    testing::check("PTX text: cp.async.ca of 8 bytes, commit_group, wait_all: every lane's 8 bytes landed", copied);
}

}  // namespace

int main() {
    test_cp_async_unwaited();  // death tests fork: first
    test_mma();
    test_ldmatrix();
    test_cp_async();
    test_cp_async_refill_race();
    test_ptx_text();
    return testing::finish();
}
