// MpiComm under mpirun (test/tests.list runs it with -np 1, 2 and 3): every collective (reduce to a root included),
// fp32 and bf16, in place and not, chunked (a tiny max_chunk forces many MPI calls per collective), the counters, and
// the host channel (host_channel_checks.h).
//
// Inputs are small integers, so every fp32 sum is exact in any reduction order and the results are compared
// exactly; Avg is checked against sum / world computed in fp32, which is what MpiComm must produce (one division).
#include <cstdint>
#include <cstring>
#include <vector>

#include "test/fixtures/dist_testing.h"
#include "test/fixtures/host_channel_checks.h"
#include "test/fixtures/split_checks.h"
#include "llmc/bf16.h"
#include "llmc/comm_mpi.h"
#include "llmc/error.h"
#include "llmc/mpi_env.h"

using namespace llmc;
namespace dt = dist_testing;

namespace {

// Rank r's contribution at index i: a small integer in [-15, 15].
float value(int r, size_t i) { return (float)((i * 7 + (size_t)r * 13) % 31) - 15.0f; }

std::vector<float> contribution(int r, size_t n) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) x[i] = value(r, i);
    return x;
}

// Reduction over ranks of value(., i) computed here, in the order that makes it exact.
float expected(ReduceOp op, int W, size_t i) {
    float s = 0, m = value(0, i);
    for (int r = 0; r < W; r++) { s += value(r, i); m = std::max(m, value(r, i)); }
    if (op == ReduceOp::Max) return m;
    if (op == ReduceOp::Avg) return s / (float)W;
    return s;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

std::string first_diff(const std::vector<float>& got, const std::vector<float>& want) {
    for (size_t i = 0; i < got.size(); i++)
        if (std::memcmp(&got[i], &want[i], 4) != 0)
        {
            char buf[128];
            std::snprintf(buf, sizeof buf, "index %zu: got %.9g want %.9g", i, (double)got[i], (double)want[i]);
            return buf;
        }
    return got.size() == want.size() ? "" : "size differs";
}

// Every collective on `comm`; `tag` names the variant (plain or chunked).
void test_collectives(Comm& comm, const std::string& tag) {
    const int W = comm.world_size(), R = comm.rank();
    const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max};

    for (size_t n : {(size_t)1, (size_t)10, (size_t)1000}) {
        for (ReduceOp op : ops) {
            std::vector<float> buf = contribution(R, n), want(n);
            for (size_t i = 0; i < n; i++) want[i] = expected(op, W, i);
            comm.all_reduce(buf.data(), n, DType::F32, op, nullptr);
            std::string name = tag + " all_reduce " + reduce_op_name(op) + " n=" + std::to_string(n);
            dt::check(name, bitwise_equal(buf, want), "%s", first_diff(buf, want).c_str());
        }
    }

    // reduce to the first and the last rank, out of place and in place: the root gets the reduction, the other
    // ranks' receive buffers are not touched (and their send buffers are left as they were).
    for (size_t n : {(size_t)1, (size_t)10, (size_t)1000}) {
        for (int root : {0, W - 1}) {
            for (ReduceOp op : ops) {
                std::vector<float> send = contribution(R, n), recv(n, -999.0f), want(n, -999.0f);
                if (R == root)
                    for (size_t i = 0; i < n; i++) want[i] = expected(op, W, i);
                comm.reduce(send.data(), recv.data(), n, DType::F32, op, root, nullptr);
                std::string name = tag + " reduce " + reduce_op_name(op) + " n=" + std::to_string(n) +
                                   " root=" + std::to_string(root);
                dt::check(name, bitwise_equal(recv, want) && bitwise_equal(send, contribution(R, n)), "%s",
                          first_diff(recv, want).c_str());
            }
            std::vector<float> buf = contribution(R, n), want = contribution(R, n);
            if (R == root)
                for (size_t i = 0; i < n; i++) want[i] = expected(ReduceOp::Avg, W, i);
            comm.reduce(buf.data(), buf.data(), n, DType::F32, ReduceOp::Avg, root, nullptr);
            dt::check(tag + " reduce avg in place n=" + std::to_string(n) + " root=" + std::to_string(root),
                      bitwise_equal(buf, want), "%s", first_diff(buf, want).c_str());
        }
    }

    // reduce_scatter: the send buffer holds W blocks of `per` elements; rank R gets the reduction of block R.
    for (size_t per : {(size_t)1, (size_t)7, (size_t)300}) {
        for (ReduceOp op : ops) {
            std::vector<float> send = contribution(R, W * per), recv(per, -999.0f), want(per);
            for (size_t j = 0; j < per; j++) want[j] = expected(op, W, R * per + j);
            comm.reduce_scatter(send.data(), recv.data(), per, DType::F32, op, nullptr);
            std::string name = tag + " reduce_scatter " + reduce_op_name(op) + " per_rank=" + std::to_string(per);
            dt::check(name, bitwise_equal(recv, want), "%s", first_diff(recv, want).c_str());
        }
        // In place: the receive buffer is the rank's own block of the send buffer.
        std::vector<float> buf = contribution(R, W * per), want(per);
        for (size_t j = 0; j < per; j++) want[j] = expected(ReduceOp::Sum, W, R * per + j);
        comm.reduce_scatter(buf.data(), buf.data() + R * per, per, DType::F32, ReduceOp::Sum, nullptr);
        std::vector<float> got(buf.begin() + R * per, buf.begin() + (R + 1) * per);
        dt::check(tag + " reduce_scatter in place per_rank=" + std::to_string(per), bitwise_equal(got, want), "%s",
                  first_diff(got, want).c_str());
    }

    // all_gather, out of place and in place; each rank's block is value(R, .) shifted by 100 * R.
    for (size_t per : {(size_t)1, (size_t)5, (size_t)257}) {
        std::vector<float> mine(per), want(W * per);
        for (size_t j = 0; j < per; j++) mine[j] = value(R, j) + 100.0f * R;
        for (int r = 0; r < W; r++)
            for (size_t j = 0; j < per; j++) want[r * per + j] = value(r, j) + 100.0f * r;
        std::vector<float> out(W * per, -1.0f);
        comm.all_gather(mine.data(), out.data(), per, DType::F32, nullptr);
        dt::check(tag + " all_gather per_rank=" + std::to_string(per), bitwise_equal(out, want), "%s",
                  first_diff(out, want).c_str());
        std::vector<float> inplace(W * per, -1.0f);
        std::memcpy(inplace.data() + R * per, mine.data(), per * 4);
        comm.all_gather(inplace.data() + R * per, inplace.data(), per, DType::F32, nullptr);
        dt::check(tag + " all_gather in place per_rank=" + std::to_string(per), bitwise_equal(inplace, want), "%s",
                  first_diff(inplace, want).c_str());
    }

    // broadcast from the first and the last rank.
    for (int root : {0, W - 1}) {
        std::vector<float> buf = contribution(R, 33), want = contribution(root, 33);
        comm.broadcast(buf.data(), buf.size(), DType::F32, root, nullptr);
        dt::check(tag + " broadcast root=" + std::to_string(root), bitwise_equal(buf, want), "%s",
                  first_diff(buf, want).c_str());
    }

    // bf16: widened to fp32, reduced, rounded once. Rank 0 contributes 256, every other rank 1 (+ index-dependent
    // small integers elsewhere): with 3 ranks 256+1+1 = 258 is a bf16 value, but rounding after each addition
    // (256+1 -> 256, a tie to even) would give 256. The expected value is the bf16 rounding of the exact fp32 sum.
    {
        const size_t n = 20;
        std::vector<uint16_t> buf(n);
        std::vector<float> got(n), want(n);
        for (size_t i = 0; i < n; i++) buf[i] = float_to_bf16(i == 0 ? (R == 0 ? 256.0f : 1.0f) : value(R, i));
        for (size_t i = 0; i < n; i++) {
            float s = 0;
            for (int r = 0; r < W; r++) s += i == 0 ? (r == 0 ? 256.0f : 1.0f) : value(r, i);
            want[i] = bf16_to_float(float_to_bf16(s));
        }
        comm.all_reduce(buf.data(), n, DType::BF16, ReduceOp::Sum, nullptr);
        for (size_t i = 0; i < n; i++) got[i] = bf16_to_float(buf[i]);
        dt::check(tag + " all_reduce bf16 sum (one rounding)", bitwise_equal(got, want), "%s",
                  first_diff(got, want).c_str());

        // bf16 avg: sum / world in fp32, rounded once.
        for (size_t i = 0; i < n; i++) buf[i] = float_to_bf16(value(R, i));
        for (size_t i = 0; i < n; i++) want[i] = bf16_to_float(float_to_bf16(expected(ReduceOp::Avg, W, i)));
        comm.all_reduce(buf.data(), n, DType::BF16, ReduceOp::Avg, nullptr);
        for (size_t i = 0; i < n; i++) got[i] = bf16_to_float(buf[i]);
        dt::check(tag + " all_reduce bf16 avg", bitwise_equal(got, want), "%s", first_diff(got, want).c_str());

        // bf16 reduce (sum, one rounding) in place on the last rank; the others keep their values.
        for (size_t i = 0; i < n; i++) buf[i] = float_to_bf16(i == 0 ? (R == 0 ? 256.0f : 1.0f) : value(R, i));
        std::vector<uint16_t> before = buf;
        comm.reduce(buf.data(), buf.data(), n, DType::BF16, ReduceOp::Sum, W - 1, nullptr);
        for (size_t i = 0; i < n; i++) {
            float s = 0;
            for (int r = 0; r < W; r++) s += i == 0 ? (r == 0 ? 256.0f : 1.0f) : value(r, i);
            want[i] = R == W - 1 ? bf16_to_float(float_to_bf16(s)) : bf16_to_float(before[i]);
        }
        for (size_t i = 0; i < n; i++) got[i] = bf16_to_float(buf[i]);
        dt::check(tag + " reduce bf16 sum in place (one rounding)", bitwise_equal(got, want), "%s",
                  first_diff(got, want).c_str());

        const size_t per = 9;
        std::vector<uint16_t> send(W * per), recv(per);
        for (size_t i = 0; i < W * per; i++) send[i] = float_to_bf16(value(R, i));
        std::vector<float> rs_got(per), rs_want(per);
        for (size_t j = 0; j < per; j++) rs_want[j] = bf16_to_float(float_to_bf16(expected(ReduceOp::Max, W, R * per + j)));
        comm.reduce_scatter(send.data(), recv.data(), per, DType::BF16, ReduceOp::Max, nullptr);
        for (size_t j = 0; j < per; j++) rs_got[j] = bf16_to_float(recv[j]);
        dt::check(tag + " reduce_scatter bf16 max", bitwise_equal(rs_got, rs_want), "%s",
                  first_diff(rs_got, rs_want).c_str());

        std::vector<uint16_t> gathered(W * per, 0);
        for (size_t j = 0; j < per; j++) gathered[R * per + j] = float_to_bf16(value(R, j) * 0.5f);
        comm.all_gather(gathered.data() + R * per, gathered.data(), per, DType::BF16, nullptr);
        bool ok = true;
        for (int r = 0; r < W; r++)
            for (size_t j = 0; j < per; j++) ok &= gathered[r * per + j] == float_to_bf16(value(r, j) * 0.5f);
        dt::check(tag + " all_gather bf16 in place", ok, "a gathered element differs");

        std::vector<uint16_t> bc(n);
        for (size_t i = 0; i < n; i++) bc[i] = float_to_bf16(value(R, i));
        comm.broadcast(bc.data(), n, DType::BF16, W - 1, nullptr);
        ok = true;
        for (size_t i = 0; i < n; i++) ok &= bc[i] == float_to_bf16(value(W - 1, i));
        dt::check(tag + " broadcast bf16", ok, "a broadcast element differs");
    }
}

// A fixed sequence of collectives on a fresh communicator: the counters must match exactly.
void test_counters(const DistInfo& info) {
    MpiComm comm(info);
    const size_t W = (size_t)comm.world_size();
    std::vector<float> a(10, 1.0f), big(W * 6, 1.0f), small(6);
    std::vector<uint16_t> h(4, 0);
    comm.all_reduce(a.data(), 10, DType::F32, ReduceOp::Sum, nullptr);      // 40 bytes
    comm.all_reduce(h.data(), 4, DType::BF16, ReduceOp::Avg, nullptr);      // 8
    comm.reduce_scatter(big.data(), small.data(), 6, DType::F32, ReduceOp::Sum, nullptr);  // W * 24
    comm.all_gather(small.data(), big.data(), 6, DType::F32, nullptr);      // 24
    comm.all_gather(small.data(), big.data(), 6, DType::F32, nullptr);      // 24
    comm.broadcast(a.data(), 10, DType::F32, 0, nullptr);                   // 40
    comm.reduce(a.data(), a.data(), 10, DType::F32, ReduceOp::Avg, 0, nullptr);  // 40
    comm.reduce(h.data(), h.data(), 4, DType::BF16, ReduceOp::Sum, (int)W - 1, nullptr);  // 8
    comm.barrier();
    const CommCounters& c = comm.counters;
    dt::check("counters per collective", c.all_reduce == 2 && c.reduce == 2 && c.reduce_scatter == 1 &&
                  c.all_gather == 2 && c.broadcast == 1 && c.barrier == 1 && c.total() == 9,
              "all_reduce %llu reduce %llu reduce_scatter %llu all_gather %llu broadcast %llu barrier %llu",
              (unsigned long long)c.all_reduce, (unsigned long long)c.reduce, (unsigned long long)c.reduce_scatter,
              (unsigned long long)c.all_gather, (unsigned long long)c.broadcast, (unsigned long long)c.barrier);
    uint64_t want = 40 + 8 + W * 24 + 24 + 24 + 40 + 40 + 8;
    dt::check("counters bytes", c.bytes == want, "bytes %llu, expected %llu", (unsigned long long)c.bytes,
              (unsigned long long)want);

    // A chunked collective is still one collective.
    MpiComm chunked(info, 2);
    std::vector<float> x(11, 1.0f);
    chunked.all_reduce(x.data(), x.size(), DType::F32, ReduceOp::Sum, nullptr);
    dt::check("counters: a chunked all_reduce counts once", chunked.counters.all_reduce == 1,
              "counted %llu", (unsigned long long)chunked.counters.all_reduce);
}

void test_errors(const DistInfo& info) {
    MpiComm comm(info);
    float x = 0;
    bool threw = false;
    try { comm.broadcast(&x, 1, DType::F32, comm.world_size(), nullptr); } catch (const Error&) { threw = true; }
    dt::check("broadcast from a root past the world size fails", threw, "no error");
    threw = false;
    try { comm.reduce(&x, &x, 1, DType::F32, ReduceOp::Sum, -1, nullptr); } catch (const Error&) { threw = true; }
    dt::check("reduce to a negative root fails", threw, "no error");
    threw = false;
    try { MpiComm bad(info, 0); } catch (const Error&) { threw = true; }
    dt::check("max_chunk 0 is refused", threw, "no error");
    DistInfo wrong = info;
    wrong.world_size = info.world_size + 1;
    threw = false;
    try { MpiComm bad(wrong); } catch (const Error&) { threw = true; }
    dt::check("a layout that disagrees with MPI is refused", threw, "no error");
}

}  // namespace

int main() {
    return dt::run_main([](Comm& comm) {
        dt::check("make_mpi_comm matches MPI's rank and size",
                  comm.rank() == dt::rank() && comm.world_size() == dt::world() &&
                      std::string(comm.name()) == "mpi",
                  "comm says rank %d of %d", comm.rank(), comm.world_size());
        dt::check("make_mpi_comm refines the node layout (one node here)",
                  comm.info().num_nodes == 1 && comm.info().local_size == comm.world_size() &&
                      comm.info().local_rank == comm.rank() && !comm.info().node_assumed,
                  "%s", comm.info().describe().c_str());
        test_collectives(comm, "mpi");
        // max_chunk 3 splits every buffer above into many calls, and (W*per > 3) takes the packed paths of
        // reduce_scatter and all_gather.
        MpiComm chunked(comm.info(), 3);
        test_collectives(chunked, "mpi chunk=3");
        MpiComm chunk1(comm.info(), 1);
        test_collectives(chunk1, "mpi chunk=1");
        host_channel_checks::run(comm, "mpi");
        host_channel_checks::run(chunk1, "mpi chunk=1");
        test_counters(comm.info());
        split_checks::run(comm, "mpi");
        test_errors(comm.info());
    });
}
