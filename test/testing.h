// A minimal test harness shared by every test program.
//
// Each check prints one line the runner (test/run_tests.sh) counts:
//   PASS <name>            FAIL <name>: <why>            SKIP <name>: <why>
// A program exits non-zero if any check failed. Skips are reported as skips, never as passes.
#pragma once

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>

namespace testing {

struct Counts { int passed = 0, failed = 0, skipped = 0; };
inline Counts& counts() { static Counts c; return c; }

inline void pass(const std::string& name) { counts().passed++; std::printf("PASS %s\n", name.c_str()); std::fflush(stdout); }
inline void skip(const std::string& name, const std::string& why) {
    counts().skipped++; std::printf("SKIP %s: %s\n", name.c_str(), why.c_str()); std::fflush(stdout);
}
inline void fail(const std::string& name, const char* fmt, ...) {
    counts().failed++;
    char buf[1024];
    va_list ap; va_start(ap, fmt); std::vsnprintf(buf, sizeof buf, fmt, ap); va_end(ap);
    std::printf("FAIL %s: %s\n", name.c_str(), buf); std::fflush(stdout);
}
// check(name, cond, "why %d", ...) -> PASS or FAIL line.
inline bool check(const std::string& name, bool ok, const char* fmt = "", ...) {
    if (ok) { pass(name); return true; }
    char buf[1024];
    va_list ap; va_start(ap, fmt); std::vsnprintf(buf, sizeof buf, fmt, ap); va_end(ap);
    fail(name, "%s", buf);
    return false;
}

// Largest |a-b| / (|b| + abs_floor) over n elements, with the index where it occurs.
struct ErrorStats { double max_rel = 0, max_abs = 0; size_t worst = 0; };
template <class A, class B>
ErrorStats compare(const A* got, const B* want, size_t n, double abs_floor) {
    ErrorStats e;
    for (size_t i = 0; i < n; i++) {
        double g = (double)got[i], w = (double)want[i];
        double d = std::fabs(g - w), r = d / (std::fabs(w) + abs_floor);
        if (!(r <= e.max_rel)) { e.max_rel = std::isnan(r) ? INFINITY : r; e.worst = i; }
        if (d > e.max_abs) e.max_abs = d;
    }
    return e;
}
// PASS if every element satisfies |got-want| <= rtol*|want| + atol (NaN fails).
template <class A, class B>
bool check_close(const std::string& name, const A* got, const B* want, size_t n, double rtol, double atol) {
    size_t bad = 0, first = 0; double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double g = (double)got[i], w = (double)want[i];
        double d = std::fabs(g - w);
        if (!(d <= rtol * std::fabs(w) + atol)) { if (!bad) first = i; bad++; }
        if (d > worst || std::isnan(d)) worst = std::isnan(d) ? INFINITY : d;
    }
    if (!bad) { std::printf("PASS %s (max abs err %.3g)\n", name.c_str(), worst); counts().passed++; std::fflush(stdout); return true; }
    fail(name, "%zu of %zu elements outside rtol=%g atol=%g; first at %zu: got %.9g want %.9g; max abs err %.3g",
         bad, n, rtol, atol, first, (double)got[first], (double)want[first], worst);
    return false;
}

// True when f throws an exception whose message contains `substring` (the "one clear line" of a bad input).
inline bool throws_with(const std::function<void()>& f, const char* substring) {
    try {
        f();
    } catch (const std::exception& e) {
        if (std::strstr(e.what(), substring)) return true;
        std::printf("  (threw, but the message lacks '%s': %s)\n", substring, e.what());
        return false;
    }
    return false;
}

inline int finish() {
    std::printf("# %d passed, %d failed, %d skipped\n", counts().passed, counts().failed, counts().skipped);
    return counts().failed ? 1 : 0;
}

}  // namespace testing
