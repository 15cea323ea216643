// metrics.jsonl writer (see logger.h).
#include "logger.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "error.h"

namespace llmc {

MetricsLogger::MetricsLogger(const std::string& path, bool append) : path_(path) {
    // A new file is created exclusively ("x"): an existing one (an earlier run's) is never truncated.
    f_ = std::fopen(path.c_str(), append ? "a" : "wx");
    if (!f_ && errno == EEXIST) fail("%s: exists; an earlier run's metrics are never overwritten", path.c_str());
    if (!f_) fail("%s: cannot open for writing (%s)", path.c_str(), std::strerror(errno));
}

MetricsLogger::~MetricsLogger() {
    if (f_) std::fclose(f_);
}

MetricsLogger& MetricsLogger::operator=(MetricsLogger&& o) noexcept {
    if (this != &o) {
        if (f_) std::fclose(f_);
        f_ = o.f_, path_ = std::move(o.path_);
        o.f_ = nullptr;
    }
    return *this;
}

void MetricsLogger::log(const nlohmann::json& record) {
    if (!f_) return;
    std::string line = record.dump() + "\n";
    if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
        fail("%s: write failed (%s)", path_.c_str(), std::strerror(errno));
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
