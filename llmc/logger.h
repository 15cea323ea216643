// Training metrics: one JSON object per line in <output dir>/metrics.jsonl (DESIGN.md, "Contracts"), written by
// rank 0 only. Each line is written with one write() as it comes (no buffering), so a crash loses at most the
// line being written, a failed write (a full disk) is cut back out of the file (it never holds half a line), and a
// resumed run appends to the same file.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace llmc {

class MetricsLogger {
public:
    MetricsLogger() = default;  // disabled: log() does nothing
    // Opens `path` for appending (append = true, resume) or creates it (it must not exist). Fails naming the path.
    MetricsLogger(const std::string& path, bool append);
    ~MetricsLogger();
    MetricsLogger(const MetricsLogger&) = delete;
    MetricsLogger& operator=(const MetricsLogger&) = delete;
    MetricsLogger(MetricsLogger&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
    MetricsLogger& operator=(MetricsLogger&& o) noexcept;

    void log(const nlohmann::json& record);
    bool enabled() const { return fd_ >= 0; }

private:
    int fd_ = -1;
    std::string path_;
};

// "1h02m", "3m05s", "42s": a duration for the console's ETA column.
std::string format_duration(double seconds);

}  // namespace llmc
