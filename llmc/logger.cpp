// metrics.jsonl writer (see logger.h).
#include "logger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "error.h"

namespace llmc {

MetricsLogger::MetricsLogger(const std::string& path, bool append) : path_(path) {
    // A new file is created exclusively (O_EXCL): an existing one (an earlier run's) is never truncated.
    fd_ = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | (append ? O_CREAT : O_CREAT | O_EXCL), 0644);
    if (fd_ < 0 && errno == EEXIST) fail("%s: exists; an earlier run's metrics are never overwritten", path.c_str());
    if (fd_ < 0) fail("%s: cannot open for writing (%s)", path.c_str(), std::strerror(errno));
}

MetricsLogger::~MetricsLogger() {
    if (fd_ >= 0) close(fd_);
}

MetricsLogger& MetricsLogger::operator=(MetricsLogger&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) close(fd_);
        fd_ = o.fd_, path_ = std::move(o.path_);
        o.fd_ = -1;
    }
    return *this;
}

// The line goes out in one write(); a write that fails part-way (ENOSPC, EFBIG) leaves the bytes it managed at the
// end of the file, so the file is cut back to its length before the line: it never holds half a line.
void MetricsLogger::log(const nlohmann::json& record) {
    if (fd_ < 0) return;
    const std::string line = record.dump() + "\n";
    struct stat st;
    if (fstat(fd_, &st) != 0) fail("%s: cannot stat (%s)", path_.c_str(), std::strerror(errno));
    size_t done = 0;
    while (done < line.size()) {
        const ssize_t n = write(fd_, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = n < 0 ? errno : EIO;
            const bool restored = ftruncate(fd_, st.st_size) == 0;
            fail("%s: write failed (%s); %s", path_.c_str(), std::strerror(err),
                 restored ? "the file is as it was before this line" : "and it could not be cut back to its last line");
        }
        done += (size_t)n;
    }
}

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    long s = std::lround(seconds);
    char buf[64];
    if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
    else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
    else std::snprintf(buf, sizeof buf, "%lds", s);
    return buf;
}

}  // namespace llmc
