// Errors: every bad input stops with one clear line naming the file, the value and what was expected.
//
// Library code throws llmc::Error (via fail()); each program's main() catches it, prints "error: <message>" on
// stderr and exits with status 1. Nothing is written after the error, so no earlier checkpoint or data is touched.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace llmc {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// printf-style: fail("%s: bad magic %d (expected %d)", path, magic, 20240326)
[[noreturn]] inline void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] inline void fail(const char* fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    throw Error(buf);
}

}  // namespace llmc
