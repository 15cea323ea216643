// One writer per output directory (docs/checkpoints.md, "One writer per output directory").
//
// Rank 0 takes an exclusive advisory lock (flock) on <-o>/.lock before anything in -o is read or moved, and holds it
// until the process ends; the kernel releases it when the process exits or dies, however it dies. A second trainer
// on the same -o finds the lock held and stops at once, naming the holder's PID and host (written into the lock file
// by the holder). The lock file itself stays in -o: deleting it would let a third trainer lock a new file while the
// second still holds the old one.
#pragma once

#include <string>

namespace llmc {

class RunLock {
public:
    RunLock() = default;
    // Locks `dir`/.lock (creating it; `dir` must exist). Fails naming the holder when another process holds it. A
    // filesystem without flock (ENOLCK, ENOSYS, EOPNOTSUPP: NFS mounted with nolock, Lustre without -o flock) gets a
    // warning on stderr and no lock.
    explicit RunLock(const std::string& dir);
    ~RunLock();
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;
    RunLock(RunLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    RunLock& operator=(RunLock&& o) noexcept;
    bool held() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

// "PID 1234 on host node07": this process, as the lock file records it.
std::string lock_holder_text();

}  // namespace llmc
