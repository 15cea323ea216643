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
//
// The dynamic buffer is bounded by each launch's size, as a GPU bounds a block's shared memory window: the whole pages
// past the requested bytes are inaccessible (an access faults and is reported with the kernel, block and thread),
// and the rest of the last page (the slack) holds the poison at every block start and is checked after every block
// (a write there is reported; a read there gives NaN).
#include "dev/cudasim/state.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace {
constexpr size_t kBufferBytes = cudasim::detail::kLargestSharedPerBlock + 8192;  // room for a page past the largest
}

extern "C" {
alignas(128) thread_local unsigned char cudasim_dynamic_shared[kBufferBytes];

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

namespace {
const size_t kPage = (size_t)sysconf(_SC_PAGESIZE);
// The launch size each thread's buffer is bounded at. Not thread_local: every thread-local object but the buffer is
// taken for static shared memory and poisoned at each block start.
std::mutex g_bounds_mu;
std::map<const unsigned char*, size_t> g_bounds;
size_t& bound_of_this_thread() {
    std::lock_guard<std::mutex> lock(g_bounds_mu);
    return g_bounds.try_emplace(cudasim_dynamic_shared, (size_t)-1).first->second;  // map nodes never move
}

uintptr_t page_up(uintptr_t a) { return (a + kPage - 1) / kPage * kPage; }
// The end of the accessible part for a launch of `bytes`: the page boundary at or after the last requested byte.
size_t accessible_bytes(size_t bytes) {
    return (size_t)(page_up((uintptr_t)cudasim_dynamic_shared + bytes) - (uintptr_t)cudasim_dynamic_shared);
}
}  // namespace

void bound_dynamic_shared(size_t bytes) {
    size_t& t_bound = bound_of_this_thread();
    if (t_bound == bytes) return;
    unsigned char* const buf = cudasim_dynamic_shared;
    const uintptr_t end = (uintptr_t)(buf + kBufferBytes) / kPage * kPage;  // whole pages inside the buffer
    const uintptr_t open_end = page_up((uintptr_t)buf + bytes);
    if (t_bound != (size_t)-1) {
        const uintptr_t old_end = page_up((uintptr_t)buf + t_bound);
        if (old_end < end) mprotect((void*)old_end, end - old_end, PROT_READ | PROT_WRITE);
    }
    if (open_end < end) mprotect((void*)open_end, end - open_end, PROT_NONE);
    t_bound = bytes;
}

void poison_dynamic_shared(size_t bytes) {
    std::memset(cudasim_dynamic_shared, kPoisonByte, std::min(accessible_bytes(bytes), kBufferBytes));
}

long dynamic_shared_slack_write(size_t bytes) {
    const size_t end = std::min(accessible_bytes(bytes), kBufferBytes);
    for (size_t i = bytes; i < end; i++)
        if (cudasim_dynamic_shared[i] != kPoisonByte) return (long)i;
    return -1;
}

long dynamic_shared_offset(const void* addr) {
    const unsigned char* a = static_cast<const unsigned char*>(addr);
    if (a < cudasim_dynamic_shared || a >= cudasim_dynamic_shared + kBufferBytes) return -1;
    return (long)(a - cudasim_dynamic_shared);
}

size_t dynamic_shared_bound() { return bound_of_this_thread(); }

void poison_static_shared() {
    static const StaticShared objects = find_static_shared();
    unsigned char* anchor = cudasim_dynamic_shared;  // this thread's instance
    for (const auto& [off, n] : objects.ranges) std::memset(anchor + off, kPoisonByte, n);
}

}  // namespace cudasim::detail
