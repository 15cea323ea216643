// The GEMM algorithm choices of a run (the CUDA backend's tuning, docs/cuda.md "Tuned GEMMs"): printed in the log after
// the first step and kept in -o, one file per rank, so that a resumed run reuses them instead of timing again.
#pragma once

#include <cstdio>
#include <string>

#include "file_util.h"

namespace llmc {

inline std::string gemm_choices_path(const std::string& output_dir, int rank) {
    return output_dir + "/gemm_choices_rank" + std::to_string(rank) + ".txt";
}

// The recorded text, or "" when there is none (a run that never finished a step, or a backend without GEMMs).
inline std::string read_gemm_choices(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return "";
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
    return text;
}

inline void write_gemm_choices(const std::string& path, const std::string& text) {
    write_atomically(path, [&](FILE* f) { std::fwrite(text.data(), 1, text.size(), f); });
}

// One log line per choice: "gemm-choice <the recorded line>" (its fields: matmul.cuh, GemmRunner::choice_line).
inline void print_gemm_choices(const std::string& text, bool tuning) {
    size_t lines = 0;
    for (char c : text) lines += c == '\n';
    std::printf("gemm       %zu algorithm choice(s), %s\n", lines,
                tuning ? "the fastest of the heuristic's candidates (timed on first use, or reused from -o)"
                       : "the heuristic's first (--gemm-tuning 0)");
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t eol = text.find('\n', pos);
        std::printf("gemm-choice %s\n", text.substr(pos, eol - pos).c_str());
        pos = eol == std::string::npos ? text.size() : eol + 1;
    }
    std::fflush(stdout);
}

}  // namespace llmc
