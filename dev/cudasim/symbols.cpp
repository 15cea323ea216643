// The running program's own ELF symbol table (/proc/self/exe): kernel names for messages, and the thread-local
// objects that static __shared__ declarations become under the simulator (see shared_memory.cpp).
#include "dev/cudasim/state.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace cudasim::detail {
namespace {

struct FunctionSymbol {
    uintptr_t addr;
    size_t size;
    std::string mangled;
};

struct SymbolTable {
    std::vector<FunctionSymbol> functions;  // sorted by address (link-time addresses)
    std::vector<TlsSymbol> tls;
    uintptr_t load_base = 0;                // run-time address minus link-time address (PIE)
};

uintptr_t executable_load_base() {
    uintptr_t base = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) -> int {
            *static_cast<uintptr_t*>(out) = info->dlpi_addr;  // the first entry is the executable
            return 1;
        },
        &base);
    return base;
}

SymbolTable read_symbols() {
    SymbolTable t;
    t.load_base = executable_load_base();
    const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return t;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
        close(fd);
        return t;
    }
    const size_t size = (size_t)st.st_size;
    void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return t;
    const char* base = static_cast<const char*>(map);
    const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
        eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) <= size) {
        const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
        for (int i = 0; i < eh->e_shnum; i++) {
            if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
            const Elf64_Shdr& strs = sh[sh[i].sh_link];
            if (sh[i].sh_offset + sh[i].sh_size > size || strs.sh_offset + strs.sh_size > size) continue;
            const auto* syms = reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
            const size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
            for (size_t k = 0; k < n; k++) {
                const Elf64_Sym& s = syms[k];
                if (s.st_shndx == SHN_UNDEF || s.st_name >= strs.sh_size) continue;
                const char* name = base + strs.sh_offset + s.st_name;
                const int type = ELF64_ST_TYPE(s.st_info);
                if (type == STT_FUNC && s.st_value) t.functions.push_back({s.st_value, s.st_size, name});
                if (type == STT_TLS && s.st_size) t.tls.push_back({s.st_value, s.st_size, name});
            }
        }
    }
    munmap(map, size);
    std::sort(t.functions.begin(), t.functions.end(),
              [](const FunctionSymbol& a, const FunctionSymbol& b) { return a.addr < b.addr; });
    return t;
}

const SymbolTable& symbols() {
    static std::once_flag once;
    static SymbolTable* table = nullptr;
    std::call_once(once, [] { table = new SymbolTable(read_symbols()); });
    return *table;
}

// "llmc::layernorm_forward_kernel(__nv_bfloat16*, ...)" -> "llmc::layernorm_forward_kernel": the parameter list is
// the parenthesis group that ends the name ("(anonymous namespace)::" and template arguments stay).
std::string strip_parameters(const std::string& s) {
    size_t end = s.size();
    while (end > 0 && s[end - 1] != ')') end--;  // skip a trailing " const"
    if (end == 0) return s;
    int depth = 0;
    for (size_t i = end; i-- > 0;) {
        if (s[i] == ')') depth++;
        else if (s[i] == '(' && --depth == 0) return i ? s.substr(0, i) : s;
    }
    return s;
}

}  // namespace

std::string function_name(const void* addr) {
    const SymbolTable& t = symbols();
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr) - t.load_base;
    auto it = std::upper_bound(t.functions.begin(), t.functions.end(), a,
                               [](uintptr_t v, const FunctionSymbol& f) { return v < f.addr; });
    if (it != t.functions.begin()) {
        --it;
        if (a == it->addr || a < it->addr + it->size) {
            int status = 0;
            char* d = abi::__cxa_demangle(it->mangled.c_str(), nullptr, nullptr, &status);
            std::string name = status == 0 && d ? strip_parameters(d) : it->mangled;
            std::free(d);
            return name;
        }
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", addr);
    return buf;
}

const std::vector<TlsSymbol>& tls_symbols() { return symbols().tls; }

// A function-local static `__shared__ T x[...]` of function _ZN4llmc6kernelEPf is the thread-local object
// _ZZN4llmc6kernelEPfE1x (its guard variable, _ZGVZ..., exists only for dynamic initialisation, which __shared__
// cannot have).
size_t static_shared_bytes(const void* func) {
    static std::mutex mu;
    static std::map<const void*, size_t> cache;
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(func); it != cache.end()) return it->second;
    const SymbolTable& t = symbols();
    const uintptr_t a = reinterpret_cast<uintptr_t>(func) - t.load_base;
    size_t bytes = 0;
    auto it = std::lower_bound(t.functions.begin(), t.functions.end(), a,
                               [](const FunctionSymbol& f, uintptr_t v) { return f.addr < v; });
    if (it != t.functions.end() && it->addr == a && it->mangled.rfind("_Z", 0) == 0) {
        const std::string prefix = "_ZZ" + it->mangled.substr(2) + "E";
        for (const TlsSymbol& s : t.tls)
            if (s.name.rfind(prefix, 0) == 0) bytes += s.size;
    }
    return cache[func] = bytes;
}

}  // namespace cudasim::detail
