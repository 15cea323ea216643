// Training metrics: one JSON object per line in <output dir>/metrics.jsonl (docs/architecture.md, "Outputs"), written
// by rank 0 only. Each line is written with one write() as it comes (no buffering), so a crash loses at most the line
// being written, and a failed write (a full disk) is cut back out of the file: it never holds half a line. A checkpoint
// records the file's length after its step's line (bytes()); a resumed run checks that the file still ends there
// (check_metrics_prefix), cuts the lines of the steps it redoes (truncate_metrics) and appends to the same file.
#pragma once

#include <cstdint>
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
    // The file's length in bytes after the lines logged so far (each is flushed); fails naming the path.
    int64_t bytes() const;

private:
    int fd_ = -1;
    std::string path_;
};

// <out_dir>/metrics.jsonl
inline std::string metrics_path(const std::string& out_dir) { return out_dir + "/metrics.jsonl"; }

// "" when the first `bytes` of metrics.jsonl at `path` end with the train line of step `step` (a checkpoint's
// metrics_bytes), else what is wrong, naming the file.
std::string check_metrics_prefix(const std::string& path, int64_t bytes, int step);
// Cuts metrics.jsonl back to `bytes` (the lines of the steps a resumed run redoes); no-op if it is shorter or
// bytes < 0 (no metrics file recorded).
void truncate_metrics(const std::string& path, int64_t bytes);

// "1h02m", "3m05s", "42s": a duration for the console's ETA column.
std::string format_duration(double seconds);

}  // namespace llmc
