// Shared memory: the object behind `extern __shared__ T smem[];`, and the poisoning of static __shared__ objects.
//
// Under the simulator __shared__ is thread_local (cudasim_device.h), so `extern __shared__ float smem[];` inside a
// kernel declares an external thread-local symbol named after the kernel's namespace and the array's name
// (`smem` in the global namespace, `_ZN4llmc4smemE` in namespace llmc, ...). This file defines one thread-local
// buffer and binds every such symbol we know of to it, as weak aliases. A kernel using another name or namespace gets
// a link error "undefined reference to `ns::name'": add the mangled name to CUDASIM_DYNAMIC_SHARED_NAMES below.
//
// A static `__shared__ float buf[32];` is a function-local thread_local object. Shared memory starts with garbage
// on a GPU, so every block must see these objects poisoned, not what the previous block or launch left. The
// compiler gives no hook on such a declaration, so the objects are found in the executable's symbol table: every
// thread-local object of the executable except the dynamic buffer is static shared memory (the simulated programs
// define no thread_local of their own; one with a dynamic initializer, which __shared__ cannot have, is left alone).
// Their addresses in this thread are the TLS block's base (the dynamic buffer's address minus its offset) plus
// their offsets.
#include "dev/cudasim/state.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>

extern "C" {
alignas(128) thread_local unsigned char cudasim_dynamic_shared[cudasim::detail::kLargestSharedPerBlock];

// An `extern thread_local` declared in an anonymous namespace makes g++ call the translation unit's TLS init function,
// which it does not emit when the TU defines no thread_local of its own; this empty weak one stands in for it.
__attribute__((weak)) void __tls_init() {}
}

// Mangled names: global namespace (plain), llmc, llmc::cuda, anonymous namespace, llmc::(anonymous).
#define CUDASIM_ALIAS(sym) \
    ".weak " sym "\n.type " sym ", @tls_object\n.set " sym ", cudasim_dynamic_shared\n"
#define CUDASIM_DYNAMIC_SHARED_NAMES(n, len)                                                              \
    CUDASIM_ALIAS(n) CUDASIM_ALIAS("_ZN4llmc" len n "E") CUDASIM_ALIAS("_ZN4llmc4cuda" len n "E")          \
    CUDASIM_ALIAS("_ZN12_GLOBAL__N_1" len n "E") CUDASIM_ALIAS("_ZN4llmc12_GLOBAL__N_1" len n "E")          \
    CUDASIM_ALIAS("_ZN4llmc4cuda12_GLOBAL__N_1" len n "E")

__asm__(CUDASIM_DYNAMIC_SHARED_NAMES("smem", "4") CUDASIM_DYNAMIC_SHARED_NAMES("shared", "6")
        CUDASIM_DYNAMIC_SHARED_NAMES("shmem", "5") CUDASIM_DYNAMIC_SHARED_NAMES("sdata", "5")
        CUDASIM_DYNAMIC_SHARED_NAMES("dyn_smem", "8") CUDASIM_DYNAMIC_SHARED_NAMES("shared_mem", "10"));

namespace cudasim::detail {
namespace {

struct StaticShared {
    std::vector<std::pair<ptrdiff_t, size_t>> ranges;  // (offset from the dynamic buffer, bytes), merged
};

StaticShared find_static_shared() {
    StaticShared r;
    const std::vector<TlsSymbol>& syms = tls_symbols();
    size_t dynamic_offset = (size_t)-1;
    std::set<std::string> guarded;  // objects with a dynamic-initialization guard (_ZGV + their mangled name)
    for (const TlsSymbol& s : syms) {
        if (s.name == "cudasim_dynamic_shared") dynamic_offset = s.offset;
        if (s.name.rfind("_ZGV", 0) == 0) guarded.insert("_Z" + s.name.substr(4));
    }
    if (dynamic_offset == (size_t)-1) return r;  // no symbol table: nothing is poisoned (documented)
    std::vector<std::pair<size_t, size_t>> found;
    for (const TlsSymbol& s : syms) {
        if (s.offset == dynamic_offset || s.name.rfind("_ZGV", 0) == 0 || guarded.count(s.name)) continue;
        found.push_back({s.offset, s.size});
    }
    std::sort(found.begin(), found.end());
    std::vector<std::pair<ptrdiff_t, size_t>> merged;
    for (auto [off, n] : found) {
        // Symbol offsets are relative to the TLS block: make them relative to the dynamic buffer.
        const ptrdiff_t rel = (ptrdiff_t)off - (ptrdiff_t)dynamic_offset;
        if (!merged.empty() && rel <= merged.back().first + (ptrdiff_t)merged.back().second)
            merged.back().second = std::max(merged.back().second, (size_t)(rel + (ptrdiff_t)n - merged.back().first));
        else merged.push_back({rel, n});
    }
    r.ranges = merged;
    return r;
}

}  // namespace

unsigned char* dynamic_shared_buffer() { return cudasim_dynamic_shared; }

void poison_static_shared() {
    static const StaticShared objects = find_static_shared();
    unsigned char* anchor = cudasim_dynamic_shared;  // this thread's instance
    for (const auto& [off, n] : objects.ranges) std::memset(anchor + off, kPoisonByte, n);
}

}  // namespace cudasim::detail
