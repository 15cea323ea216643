// SingleComm: the Comm of a one-process run. With one rank every reduction is the identity (Sum, Avg and Max of a
// single contribution are the contribution), so collectives only copy when the receive buffer is not the send
// buffer. They are still counted, so a one-rank run reports the same collective counts as a multi-rank run.
#include <cstring>

#include "comm.h"
#include "error.h"

namespace llmc {

namespace {

void host_copy(void* dst, const void* src, size_t bytes, Stream) { std::memmove(dst, src, bytes); }

class SingleComm final : public Comm {
public:
    explicit SingleComm(CommCopyFn copy) : copy_(copy ? copy : host_copy) {}
    const char* name() const override { return "single"; }

    void all_reduce(void* buf, size_t count, DType t, ReduceOp, Stream) override {
        counters.all_reduce++;
        counters.bytes += count * dtype_size(t);
    }
    void reduce(const void* send, void* recv, size_t count, DType t, ReduceOp, int root, Stream stream) override {
        if (root != 0) fail("reduce: root %d, expected 0 (the only rank of a single-process run)", root);
        counters.reduce++;
        counters.bytes += count * dtype_size(t);
        if (send != recv && count) copy_(recv, send, count * dtype_size(t), stream);
    }
    void reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp, Stream stream) override {
        counters.reduce_scatter++;
        counters.bytes += recv_count * dtype_size(t);
        if (send != recv && recv_count) copy_(recv, send, recv_count * dtype_size(t), stream);
    }
    void all_gather(const void* send, void* recv, size_t send_count, DType t, Stream stream) override {
        counters.all_gather++;
        counters.bytes += send_count * dtype_size(t);
        if (send != recv && send_count) copy_(recv, send, send_count * dtype_size(t), stream);
    }
    void broadcast(void*, size_t count, DType t, int root, Stream) override {
        if (root != 0) fail("broadcast: root %d, expected 0 (the only rank of a single-process run)", root);
        counters.broadcast++;
        counters.bytes += count * dtype_size(t);
    }
    void barrier() override { counters.barrier++; }
    std::unique_ptr<Comm> split(int, int) override { return std::make_unique<SingleComm>(copy_); }

protected:
    void host_all_reduce(void*, size_t, DType, ReduceOp) override {}
    void host_all_gather(const void* send, void* recv, size_t count, DType t) override {
        if (send != recv) std::memmove(recv, send, count * dtype_size(t));
    }

private:
    CommCopyFn copy_;
};

}  // namespace

std::unique_ptr<Comm> make_single_comm(CommCopyFn copy) { return std::make_unique<SingleComm>(copy); }

}  // namespace llmc
