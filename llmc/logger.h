// Training metrics: one JSON object per line in <output dir>/metrics.jsonl (docs/formats.md), written by
// rank 0 only. Each line is flushed as it is written, so a crash loses at most the line being written and a
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
    MetricsLogger(MetricsLogger&& o) noexcept : f_(o.f_), path_(std::move(o.path_)) { o.f_ = nullptr; }
    MetricsLogger& operator=(MetricsLogger&& o) noexcept;

    void log(const nlohmann::json& record);
    bool enabled() const { return f_ != nullptr; }

private:
    FILE* f_ = nullptr;
    std::string path_;
};

// "1h02m", "3m05s", "42s": a duration for the console's ETA column.
std::string format_duration(double seconds);

}  // namespace llmc
