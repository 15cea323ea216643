// The output directory's lock (see run_lock.h).
#include "run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "error.h"

namespace llmc {

std::string lock_holder_text() {
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    return "PID " + std::to_string((long)getpid()) + " on host " + host;
}

namespace {

// What the holder wrote into the lock file (it may be empty for the instant between its lock and its write).
std::string read_holder(int fd) {
    char buf[512] = {};
    const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    std::string s = n > 0 ? std::string(buf, (size_t)n) : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
    return s.empty() ? "a process that has not written its PID yet" : s;
}

}  // namespace

RunLock::RunLock(const std::string& dir) {
    const std::string path = dir + "/.lock";
    // The holder's PID is written into the file (after truncating it): never through a symbolic link, nor into a
    // file with another name too (a hard link), a FIFO or a device, which could be another run's model.bin.
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0 && errno == ELOOP)
        fail("%s is a symbolic link: the lock file is never written through one (remove it; a trainer makes its own)",
             path.c_str());
    if (fd < 0) fail("%s: cannot open the output directory's lock file (%s)", path.c_str(), std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        close(fd);
        fail("%s is not a plain file of its own (%s): the lock file is never written into another file (remove it; "
             "a trainer makes its own)", path.c_str(), !S_ISREG(st.st_mode) ? "not a regular file" : "a hard link");
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        if (err == EWOULDBLOCK) {
            const std::string holder = read_holder(fd);
            close(fd);
            fail("-o %s is in use by another trainer (%s; lock file %s): one run writes into an output directory at a "
                 "time; wait for it to end, or choose another -o",
                 dir.c_str(), holder.c_str(), path.c_str());
        }
        close(fd);
        if (err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP) {
            std::fprintf(stderr, "warning: %s: this filesystem does not support flock (%s): a second trainer on -o %s "
                         "would not be stopped (docs/checkpoints.md)\n", path.c_str(), std::strerror(err), dir.c_str());
            return;
        }
        fail("%s: cannot lock (%s)", path.c_str(), std::strerror(err));
    }
    const std::string me = lock_holder_text() + "\n";
    if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) != (ssize_t)me.size()) {
        const int err = errno;
        close(fd);
        fail("%s: cannot write the holder's PID (%s)", path.c_str(), std::strerror(err));
    }
    fd_ = fd;
}

RunLock::~RunLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock; the file stays (see run_lock.h)
}

RunLock& RunLock::operator=(RunLock&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) close(fd_);
        fd_ = o.fd_, o.fd_ = -1;
    }
    return *this;
}

}  // namespace llmc
