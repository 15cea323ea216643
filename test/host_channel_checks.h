// Checks of a Comm's host channel (llmc/comm.h: all_reduce_host, all_gather_host, any), shared by the MpiComm test
// (test_comm.cpp) and the simulated NcclComm test (sim/test_comm_nccl.cpp). Run under mpirun with any number of
// ranks; every value is an integer or a small float, so every result is exact and compared exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist_testing.h"
#include "llmc/comm.h"
#include "llmc/error.h"

namespace host_channel_checks {

inline void run(llmc::Comm& comm, const std::string& tag) {
    namespace dt = dist_testing;
    using llmc::DType;
    using llmc::ReduceOp;
    const int W = comm.world_size(), R = comm.rank();
    const llmc::CommCounters before = comm.counters;

    // u64 values above 2^53 (not representable in a double) survive a gather bit for bit.
    const std::vector<uint64_t> mine = {0xFFFFFFFFFFFFFFFFull - (uint64_t)R, (1ull << 63) | (uint64_t)R, 0,
                                        0x0123456789ABCDEFull * (uint64_t)(R + 1)};
    const std::vector<uint64_t> all = comm.all_gather_host(mine);
    bool ok = all.size() == mine.size() * (size_t)W;
    for (int r = 0; ok && r < W; r++)
        ok = all[4 * r] == 0xFFFFFFFFFFFFFFFFull - (uint64_t)r && all[4 * r + 1] == ((1ull << 63) | (uint64_t)r) &&
             all[4 * r + 2] == 0 && all[4 * r + 3] == 0x0123456789ABCDEFull * (uint64_t)(r + 1);
    dt::check(tag + " all_gather_host u64: every rank's values in rank order, all 64 bits", ok);

    // i32 sum and max, u64 sum (wrapping past 2^63 exactly) and max, f32 avg.
    int32_t i32[2] = {R - 5, -R};
    comm.all_reduce_host(&i32[0], 1, DType::I32, ReduceOp::Sum);
    comm.all_reduce_host(&i32[1], 1, DType::I32, ReduceOp::Max);
    dt::check(tag + " all_reduce_host i32 sum and max", i32[0] == W * (W - 1) / 2 - 5 * W && i32[1] == 0,
              "sum %d max %d", i32[0], i32[1]);
    uint64_t u64[2] = {(1ull << 62) + (uint64_t)R, (uint64_t)R << 40};
    comm.all_reduce_host(u64, 1, DType::U64, ReduceOp::Sum);
    comm.all_reduce_host(u64 + 1, 1, DType::U64, ReduceOp::Max);
    dt::check(tag + " all_reduce_host u64 sum and max",
              u64[0] == (uint64_t)W * (1ull << 62) + (uint64_t)(W * (W - 1) / 2) && u64[1] == (uint64_t)(W - 1) << 40);
    float f = (float)(2 * R);
    comm.all_reduce_host(&f, 1, DType::F32, ReduceOp::Avg);
    dt::check(tag + " all_reduce_host f32 avg", f == (float)(W - 1), "got %g", (double)f);

    // any: false everywhere is false; true on the last rank only is true on every rank.
    const bool none = comm.any(false), last = comm.any(R == W - 1);
    dt::check(tag + " any(false) is false on every rank", !none);
    dt::check(tag + " any(true on the last rank only) is true on every rank", last);

    const llmc::CommCounters& c = comm.counters;
    dt::check(tag + " the host channel counts its own calls and no device collective",
              c.host == before.host + 8 && c.all_reduce == before.all_reduce && c.all_gather == before.all_gather &&
                  c.bytes == before.bytes,
              "host %llu (before %llu)", (unsigned long long)c.host, (unsigned long long)before.host);

    bool threw = false;
    try { comm.all_reduce_host(&i32[0], 1, DType::I32, ReduceOp::Avg); } catch (const llmc::Error&) { threw = true; }
    dt::check(tag + " all_reduce_host refuses an integer average", threw);
    threw = false;
    uint16_t h = 0;
    try { comm.all_gather_host(&h, &h, 1, DType::BF16); } catch (const llmc::Error&) { threw = true; }
    dt::check(tag + " all_gather_host refuses bf16", threw);
}

}  // namespace host_channel_checks
