// Inline PTX under the simulator: llmc/cuda/mma.cuh hands the same instruction text to nvcc (`asm`) and, compiled by
// g++, to cudasim::ptx, which parses that text and executes what it says. The instruction string is thus the one
// source of truth: a dropped `.trans`, another `.x2`, a cp.async size or wait count changed, two operands swapped in
// the text, all change what the simulated kernel computes, as they would on a GPU. An instruction the emulation
// does not implement (another mma shape or type, another state space) stops the program with its text.
//
// Supported (PTX ISA 9.0): mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32; ldmatrix.sync.aligned.m8n8
// .x1/.x2/.x4 {.trans} .shared{::cta}.b16; cp.async.ca/.cg.shared{::cta}.global{.L2::128B} with cp-size 4, 8, 16
// (.cg: 16) and an optional src-size; cp.async.commit_group, cp.async.wait_group N, cp.async.wait_all;
// ex2.approx{.ftz}.f32. Operands: %k names the k-th entry of the operand list (the asm statement's outputs then
// inputs, in order); an address operand [%k] is the pointer itself (the simulator has one address space, where the
// GPU takes a shared-window address); immediates are decimal.
#include <cuda_runtime.h>

#include "dev/cudasim/include/cudasim.h"
#include "dev/cudasim/include/cudasim_mma.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cudasim {
namespace {

struct Parsed {
    std::vector<std::string> op;                 // the opcode's parts: "ldmatrix", "sync", "aligned", ...
    std::vector<std::vector<std::string>> args;  // each operand's tokens: "{%0,%1}" -> {"%0","%1"}, "[%4]" -> {"[%4]"}
};

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\n"), e = s.find_last_not_of(" \t\n;");
    return b == std::string::npos || e < b ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    int depth = 0;
    for (char c : s) {
        if (c == '{' || c == '[') depth++;
        if (c == '}' || c == ']') depth--;
        if (c == sep && depth == 0) {
            out.push_back(trim(cur));
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!trim(cur).empty()) out.push_back(trim(cur));
    return out;
}

Parsed parse(const char* text) {
    const std::string t = trim(text);
    const size_t space = t.find_first_of(" \t");
    Parsed p;
    p.op = split(t.substr(0, space), '.');
    if (space == std::string::npos) return p;
    for (const std::string& a : split(t.substr(space + 1), ',')) {
        if (!a.empty() && a.front() == '{') p.args.push_back(split(a.substr(1, a.size() - 2), ','));
        else p.args.push_back({a});
    }
    return p;
}

const Parsed& parsed(const char* text) {
    static std::mutex m;
    static std::map<const char*, Parsed> cache;  // the texts are string literals: one entry per call site
    std::lock_guard<std::mutex> lock(m);
    auto it = cache.find(text);
    if (it == cache.end()) it = cache.emplace(text, parse(text)).first;
    return it->second;
}

[[noreturn]] void unsupported(const char* text, const char* why) {
    const std::string msg = std::string("inline PTX not emulated (") + why + "): " + trim(text);
    detail::device_fail(msg.c_str());
    std::abort();
}

// The operand a token names: "%k" (or "[%k]") -> operands[k].
const void* operand(const char* text, const std::vector<const void*>& ops, const std::string& token) {
    std::string t = token;
    if (!t.empty() && t.front() == '[') t = trim(t.substr(1, t.size() - 2));
    if (t.size() < 2 || t[0] != '%') unsupported(text, "an operand is not %k");
    const long k = std::strtol(t.c_str() + 1, nullptr, 10);
    if (k < 0 || (size_t)k >= ops.size()) unsupported(text, "an operand number past the operand list");
    return ops[(size_t)k];
}
// An integer operand: an immediate, or %k naming an int.
int integer(const char* text, const std::vector<const void*>& ops, const std::string& token) {
    if (!token.empty() && token[0] == '%') return *static_cast<const int*>(operand(text, ops, token));
    char* end = nullptr;
    const long v = std::strtol(token.c_str(), &end, 10);
    if (token.empty() || *end) unsupported(text, "an immediate is not a decimal integer");
    return (int)v;
}
template <class T>
T value(const char* text, const std::vector<const void*>& ops, const std::string& token) {
    T v;
    std::memcpy(&v, operand(text, ops, token), sizeof v);
    return v;
}
template <class T>
void store(const char* text, const std::vector<const void*>& ops, const std::string& token, T v) {
    std::memcpy(const_cast<void*>(operand(text, ops, token)), &v, sizeof v);
}

bool is(const Parsed& p, std::initializer_list<const char*> parts) {
    if (p.op.size() != parts.size()) return false;
    size_t i = 0;
    for (const char* s : parts)
        if (p.op[i++] != s) return false;
    return true;
}
bool shared_space(const std::string& s) { return s == "shared" || s == "shared::cta"; }

void run_mma(const char* text, const Parsed& p, const std::vector<const void*>& ops) {
    if (!is(p, {"mma", "sync", "aligned", "m16n8k16", "row", "col", "f32", "bf16", "bf16", "f32"}))
        unsupported(text, "mma shape or types");
    if (p.args.size() != 4 || p.args[0].size() != 4 || p.args[1].size() != 4 || p.args[2].size() != 2 ||
        p.args[3].size() != 4)
        unsupported(text, "mma m16n8k16 takes {4 d}, {4 a}, {2 b}, {4 c}");
    uint32_t a[4], b[2];
    float c[4], d[4];
    for (int i = 0; i < 4; i++) a[i] = value<uint32_t>(text, ops, p.args[1][i]);
    for (int i = 0; i < 2; i++) b[i] = value<uint32_t>(text, ops, p.args[2][i]);
    for (int i = 0; i < 4; i++) c[i] = value<float>(text, ops, p.args[3][i]);
    mma_m16n8k16_bf16(d, a, b, c);
    for (int i = 0; i < 4; i++) store(text, ops, p.args[0][i], d[i]);
}

void run_ldmatrix(const char* text, const Parsed& p, const std::vector<const void*>& ops) {
    // ldmatrix.sync.aligned.m8n8.xN{.trans}.shared{::cta}.b16
    const size_t n = p.op.size();
    const bool trans = n == 8 && p.op[5] == "trans";
    if ((n != 7 && !trans) || p.op[1] != "sync" || p.op[2] != "aligned" || p.op[3] != "m8n8" || !shared_space(p.op[n - 2]) ||
        p.op[n - 1] != "b16")
        unsupported(text, "ldmatrix qualifiers");
    const int count = p.op[4] == "x1" ? 1 : p.op[4] == "x2" ? 2 : p.op[4] == "x4" ? 4 : 0;
    if (!count) unsupported(text, "ldmatrix .num must be .x1, .x2 or .x4");
    if (p.args.size() != 2 || (int)p.args[0].size() != count || p.args[1].size() != 1 || p.args[1][0].front() != '[')
        unsupported(text, "ldmatrix takes {count registers}, [address]");
    uint32_t r[4];
    ldmatrix(r, count, operand(text, ops, p.args[1][0]), trans);
    for (int i = 0; i < count; i++) store(text, ops, p.args[0][i], r[i]);
}

void run_cp_async(const char* text, const Parsed& p, const std::vector<const void*>& ops) {
    if (is(p, {"cp", "async", "commit_group"})) return cp_async_commit();
    if (is(p, {"cp", "async", "wait_all"})) return cp_async_wait(0);
    if (is(p, {"cp", "async", "wait_group"})) {
        if (p.args.size() != 1) unsupported(text, "cp.async.wait_group takes one count");
        return cp_async_wait(integer(text, ops, p.args[0][0]));
    }
    // cp.async.(ca|cg).shared{::cta}.global{.L2::128B} [dst], [src], cp-size{, src-size}
    const size_t n = p.op.size();
    if (n < 5 || n > 6 || (p.op[2] != "ca" && p.op[2] != "cg") || !shared_space(p.op[3]) || p.op[4] != "global" ||
        (n == 6 && p.op[5] != "L2::128B"))
        unsupported(text, "cp.async qualifiers");
    if (p.args.size() < 3 || p.args.size() > 4) unsupported(text, "cp.async takes [dst], [src], cp-size{, src-size}");
    const int size = integer(text, ops, p.args[2][0]);
    if (size != 4 && size != 8 && size != 16) unsupported(text, "cp.async cp-size must be 4, 8 or 16");
    if (p.op[2] == "cg" && size != 16) unsupported(text, "cp.async.cg copies 16 bytes only");
    const int src_bytes = p.args.size() == 4 ? integer(text, ops, p.args[3][0]) : size;
    if (src_bytes < 0 || src_bytes > size) unsupported(text, "cp.async src-size must be within 0..cp-size");
    cp_async(const_cast<void*>(operand(text, ops, p.args[0][0])), operand(text, ops, p.args[1][0]), size, src_bytes);
}

// 2^x by the special-function unit; with .ftz, denormal inputs and results are flushed to zero. The hardware's
// approximation error (< 2^-22 relative) is not reproduced (the C library's exp2f is used): tests bound it.
void run_ex2(const char* text, const Parsed& p, const std::vector<const void*>& ops) {
    const bool ftz = is(p, {"ex2", "approx", "ftz", "f32"});
    if (!ftz && !is(p, {"ex2", "approx", "f32"})) unsupported(text, "ex2 qualifiers");
    if (p.args.size() != 2) unsupported(text, "ex2 takes d, a");
    float x = value<float>(text, ops, p.args[1][0]);
    if (ftz && std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
    float r = exp2f(x);
    if (ftz && std::fpclassify(r) == FP_SUBNORMAL) r = 0.0f;
    store(text, ops, p.args[0][0], r);
}

}  // namespace

void ptx(const char* text, std::initializer_list<const void*> operands) {
    const Parsed& p = parsed(text);
    const std::vector<const void*> ops(operands);
    if (p.op.empty()) unsupported(text, "no opcode");
    if (p.op[0] == "mma") run_mma(text, p, ops);
    else if (p.op[0] == "ldmatrix") run_ldmatrix(text, p, ops);
    else if (p.op[0] == "cp" && p.op.size() > 1 && p.op[1] == "async") run_cp_async(text, p, ops);
    else if (p.op[0] == "ex2") run_ex2(text, p, ops);
    else unsupported(text, "unknown instruction");
}

}  // namespace cudasim
