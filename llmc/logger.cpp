// metrics.jsonl: the writer, and the checks and cuts of a resumed run (see logger.h).
#include "logger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "error.h"
#include "file_util.h"

namespace llmc {

MetricsLogger::MetricsLogger(const std::string& path, bool append) : path_(path) {
    // A new file is created exclusively (O_EXCL): an existing one (an earlier run's) is never truncated.
    // Never through a symbolic link: the lines would go into whatever file it names.
    fd_ = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (append ? O_CREAT : O_CREAT | O_EXCL), 0644);
    if (fd_ < 0 && errno == EEXIST) fail("%s: exists; an earlier run's metrics are never overwritten", path.c_str());
    if (fd_ < 0 && errno == ELOOP) fail("%s is a symbolic link: metrics are never written through one", path.c_str());
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

int64_t MetricsLogger::bytes() const { return (int64_t)file_size_or_fail(path_); }

std::string check_metrics_prefix(const std::string& path, int64_t bytes, int step) {
    char buf[512];
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        std::snprintf(buf, sizeof buf, "%s: missing, but the checkpoint of step %d recorded %lld bytes of it "
                      "(metrics_bytes)", path.c_str(), step, (long long)bytes);
        return buf;
    }
    if (bytes < 1 || bytes > (int64_t)st.st_size) {
        std::snprintf(buf, sizeof buf, "%s: %lld bytes, but the checkpoint of step %d recorded metrics_bytes = %lld "
                      "(lines were removed, or the field was edited)", path.c_str(), (long long)st.st_size, step,
                      (long long)bytes);
        return buf;
    }
    // The line that ends at `bytes` must be step `step`'s train line.
    const int64_t from = std::max<int64_t>(0, bytes - 65536);
    std::string tail((size_t)(bytes - from), '\0');
    FILE* f = std::fopen(path.c_str(), "rb");
    const bool ok = f && fseeko(f, (off_t)from, SEEK_SET) == 0 && std::fread(&tail[0], 1, tail.size(), f) == tail.size();
    if (f) std::fclose(f);
    if (!ok) return path + ": read error";
    nlohmann::json line;
    if (tail.back() == '\n') {
        const size_t start = tail.find_last_of('\n', tail.size() - 2);
        line = nlohmann::json::parse(tail.substr(start == std::string::npos ? 0 : start + 1), nullptr, false);
    }
    const bool is_step = line.is_object() && line.contains("train_loss") && line.contains("step") &&
                         line["step"].is_number_integer() && line["step"].get<long long>() == step;
    if (!is_step) {
        std::snprintf(buf, sizeof buf, "%s: the checkpoint of step %d recorded metrics_bytes = %lld, which is not "
                      "the end of step %d's line", path.c_str(), step, (long long)bytes, step);
        return buf;
    }
    return "";
}

void truncate_metrics(const std::string& path, int64_t bytes) {
    struct stat st;
    if (bytes < 0 || lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= bytes) return;
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);  // not a link's target
    const bool cut = fd >= 0 && ftruncate(fd, (off_t)bytes) == 0;
    const int err = errno;
    if (fd >= 0) close(fd);
    if (!cut) fail("%s: cannot truncate to %lld bytes (%s)", path.c_str(), (long long)bytes, std::strerror(err));
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
