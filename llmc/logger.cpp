// metrics.jsonl: the writer, and the checks and cuts of a resumed run (see logger.h).
#include "logger.h"

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
    if (bytes < 0 || stat(path.c_str(), &st) != 0 || st.st_size <= bytes) return;
    if (truncate(path.c_str(), (off_t)bytes) != 0)
        fail("%s: cannot truncate to %lld bytes (%s)", path.c_str(), (long long)bytes, std::strerror(errno));
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
