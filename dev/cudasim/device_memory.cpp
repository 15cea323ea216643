// Device and pinned host memory of the simulator, and the fault handler that turns a bad access into a report.
//
// Device allocations (cudaMalloc): each has its own mapping
//
//     [guard page][front slack | data (size bytes) | tail slack][guard page]
//                  <------------- whole pages ---------------->
//
// The data starts 256-byte aligned (cudaMalloc's guarantee) and its size rounded up to 256 bytes ends exactly at the
// second guard page, so a load or store just past the rounded end, or anywhere in a guard page, faults at once and
// the SIGSEGV handler reports the kernel, block, thread and address. The tail slack (size rounded up to 256 bytes)
// and the front slack (the rest of the first page) hold the poison (a signalling NaN pattern, below): reads there
// give NaN, and writes, even x += 0, are found by checking those bytes after each kernel (the allocations its
// pointer arguments point into) and at cudaFree. A GPU would not fault in the slack either (allocations are rounded up); compute-sanitizer would.
//
// Pinned host memory (cudaMallocHost / cudaHostAlloc): page-aligned mappings of whole pages. While a device
// operation that reads such memory is pending (deferred by the stream scheduler), its pages are read-only; while one
// writes it, they are inaccessible: a host write to a buffer whose copy has not run yet (or a host read of a
// download that has not landed) faults and is reported with the pending operation's name.
#include "dev/cudasim/state.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace cudasim::detail {

bool is_fiber_stack_guard(const void* addr);  // scheduler.cpp

namespace {

const size_t kPage = (size_t)sysconf(_SC_PAGESIZE);

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

struct Allocation {
    char* map = nullptr;  // guard + data pages + guard
    size_t map_bytes = 0;
    char* user = nullptr; // what cudaMalloc returned
    size_t size = 0;      // bytes asked for
    uint64_t serial = 0;  // n-th cudaMalloc of the program
    char* data() const { return map + kPage; }
    char* data_end() const { return map + map_bytes - kPage; }
};

struct PinnedAllocation {
    char* p = nullptr;
    size_t size = 0, bytes = 0;  // asked for, mapped (whole pages)
};

// A pending device operation's use of pinned memory.
struct PinnedUse {
    uint64_t op;
    const char* p;
    size_t n;
    bool device_writes;
    std::string what;
};

struct Memory {
    std::mutex mu;
    std::map<const char*, Allocation> device;      // by mapping start
    std::map<const char*, PinnedAllocation> pinned; // by start
    std::vector<PinnedUse> uses;
    size_t device_bytes = 0;
    uint64_t serial = 0;
};
Memory& mem() {
    static Memory* m = new Memory;  // never destroyed: the fault handler may read it during exit
    return *m;
}

// The entry of `m` (keyed by start address) whose [start, start + extent(entry)) holds addr, or null. The fault
// handler calls these without the lock: it runs on the thread that faulted, which is not inside an allocation call.
template <class Map, class Extent>
const typename Map::mapped_type* containing(const Map& m, const void* addr, Extent extent) {
    const char* a = static_cast<const char*>(addr);
    auto it = m.upper_bound(a);
    if (it == m.begin()) return nullptr;
    --it;
    return a < it->first + extent(it->second) ? &it->second : nullptr;
}
// The device allocation whose mapping (guard pages included) holds addr.
const Allocation* mapping_of(const void* addr) {
    return containing(mem().device, addr, [](const Allocation& a) { return a.map_bytes; });
}
const PinnedAllocation* pinned_of(const void* addr) {
    return containing(mem().pinned, addr, [](const PinnedAllocation& a) { return a.bytes; });
}

// Fresh device memory, slack included, holds the bytes BF FF repeated (by address parity): a signalling NaN both as
// bf16 (0xFFBF) and as fp32 (0xFFBFFFBF), so reads before writes give NaN, and any arithmetic on it (even x + 0,
// which leaves an ordinary NaN's bits alone) turns it into a quiet NaN: a read-modify-write of slack bytes changes
// them and is found.
unsigned char poison_at(const char* p) { return ((uintptr_t)p & 1) ? 0xFF : 0xBF; }
void fill_poison(char* p, size_t n) {
    size_t i = 0;
    for (; i < n && ((uintptr_t)(p + i) & 7); i++) p[i] = (char)poison_at(p + i);
    const uint64_t word = 0xFFBFFFBFFFBFFFBFull;  // little-endian: BF at even addresses (8-byte aligned here)
    for (; i + 8 <= n; i += 8) std::memcpy(p + i, &word, 8);
    for (; i < n; i++) p[i] = (char)poison_at(p + i);
}
// First byte in [p, p + n) that is not the poison, or null.
const char* first_changed(const char* p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] != poison_at(p + i)) return p + i;
    return nullptr;
}

void check_slack(const Allocation& a, const char* who) {
    const char* bad = first_changed(a.user + a.size, (size_t)(a.data_end() - (a.user + a.size)));
    const char* front = first_changed(a.data(), (size_t)(a.user - a.data()));
    if (!bad && !front) return;
    if (bad)
        fatal("out-of-bounds write by %s: byte %zu past the end of the %zu-byte device allocation at %p (cudaMalloc "
              "#%" PRIu64 ") changed (found in the allocation's rounding slack after it ran; the thread is not "
              "known, an access beyond the slack would have faulted with the thread's index)",
              who, (size_t)(bad - (a.user + a.size)), a.size, (void*)a.user, a.serial);
    fatal("out-of-bounds write by %s: byte %zu before the start of the %zu-byte device allocation at %p (cudaMalloc "
          "#%" PRIu64 ") changed (found in the slack before it after it ran; the thread is not known)",
          who, (size_t)(a.user - front), a.size, (void*)a.user, a.serial);
}

// Page protection of pinned memory from the pending uses: none if a pending operation writes the page, read-only
// if one reads it, read-write otherwise.
void apply_pinned_protection(const char* p, size_t n) {
    if (n == 0) return;
    const uintptr_t first = (uintptr_t)p / kPage * kPage, last = ((uintptr_t)p + n - 1) / kPage * kPage;
    for (uintptr_t page = first; page <= last; page += kPage) {
        int prot = PROT_READ | PROT_WRITE;
        for (const PinnedUse& u : mem().uses) {
            const uintptr_t ub = (uintptr_t)u.p, ue = ub + u.n;
            if (ue <= page || ub >= page + kPage) continue;
            if (u.device_writes) prot = PROT_NONE;
            else if (prot != PROT_NONE) prot = PROT_READ;
        }
        mprotect((void*)page, kPage, prot);
    }
}

struct sigaction g_previous_segv;

// Formats into a static buffer and reports; the fault handler does not return from here.
[[noreturn]] void fault_report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void fault_report(const char* fmt, ...) {
    static char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fatal("%s", buf);
}

void on_segv(int sig, siginfo_t* si, void* uctx) {
    const char* addr = static_cast<const char*>(si->si_addr);
    const bool write = (static_cast<ucontext_t*>(uctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
    const char* access = write ? "write" : "read";
    const std::string where = current_location();
    if (const Allocation* a = mapping_of(addr)) {
        if (addr >= a->data_end())
            fault_report("out-of-bounds %s by %s: address %p is %zu bytes past the end of the %zu-byte device "
                         "allocation at %p (cudaMalloc #%" PRIu64 ")", access, where.c_str(), (const void*)addr,
                         (size_t)(addr - (a->user + a->size)), a->size, (void*)a->user, a->serial);
        if (addr < a->data())
            fault_report("out-of-bounds %s by %s: address %p is %zu bytes before the start of the %zu-byte device "
                         "allocation at %p (cudaMalloc #%" PRIu64 ")", access, where.c_str(), (const void*)addr,
                         (size_t)(a->user - addr), a->size, (void*)a->user, a->serial);
    }
    if (const PinnedAllocation* pa = pinned_of(addr)) {
        for (const PinnedUse& u : mem().uses) {
            if (addr < u.p || addr >= u.p + u.n) continue;
            if (!write && !u.device_writes) continue;
            fault_report("%s %s pinned host memory at %p (byte %zu of the %zu-byte cudaMallocHost buffer at %p) "
                         "while `%s` (operation #%" PRIu64 ", enqueued and not yet run) %s it: an asynchronous copy "
                         "accesses the host buffer when it runs, not when it is enqueued; synchronise with the copy "
                         "(cudaEventSynchronize / cudaStreamSynchronize) before touching the buffer",
                         where.c_str(), write ? "wrote" : "read", (const void*)addr, (size_t)(addr - pa->p),
                         pa->size, (void*)pa->p, u.what.c_str(), u.op, u.device_writes ? "writes" : "reads");
        }
        // Another part of a page that a pending operation uses: allowed; this page is no longer watched.
        mprotect((void*)((uintptr_t)addr / kPage * kPage), kPage, PROT_READ | PROT_WRITE);
        return;
    }
    if (const long off = dynamic_shared_offset(addr); off >= 0 && in_kernel())
        fault_report("out-of-bounds %s of dynamic shared memory by %s: byte %ld, but the launch requested %zu bytes "
                     "(the kernel's shared-memory layout and the launch's byte count disagree)", access,
                     where.c_str(), off, dynamic_shared_bound());
    if (is_fiber_stack_guard(addr))
        fault_report("stack overflow in %s: a simulated CUDA thread used more than its fiber stack (raise "
                     "CUDASIM_STACK_KB; large local arrays need it)", where.c_str());
    if (in_kernel())
        fault_report("invalid %s by %s at address %p, which is in no device allocation (a wild or host pointer)",
                     access, where.c_str(), (const void*)addr);
    // Not ours: let the previous handler (or the default action) deal with it when the access is retried.
    sigaction(sig, &g_previous_segv, nullptr);
}

}  // namespace

void install_fault_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &g_previous_segv);
    });
    // Kernels run on 64 KiB fiber stacks, and a stack overflow leaves no stack at all: the handler runs on its own.
    thread_local bool has_altstack = false;
    if (!has_altstack) {
        const size_t bytes = 256 * 1024;
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            stack_t ss;
            ss.ss_sp = p;
            ss.ss_size = bytes;
            ss.ss_flags = 0;
            sigaltstack(&ss, nullptr);
            has_altstack = true;
        }
    }
}

void* device_alloc(size_t bytes) {
    install_fault_handler();
    const size_t rounded = round_up(std::max<size_t>(bytes, 1), kDeviceAlignment);
    const size_t data_bytes = round_up(rounded, kPage), map_bytes = data_bytes + 2 * kPage;
    std::lock_guard<std::mutex> lock(mem().mu);
    if (mem().device_bytes + bytes > device().global_memory) return nullptr;
    void* m = mmap(nullptr, map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    Allocation a;
    a.map = static_cast<char*>(m);
    a.map_bytes = map_bytes;
    if (mprotect(a.data(), data_bytes, PROT_READ | PROT_WRITE) != 0) {
        munmap(m, map_bytes);
        return nullptr;
    }
    a.user = a.data_end() - rounded;
    a.size = bytes;
    a.serial = ++mem().serial;
    fill_poison(a.data(), data_bytes);  // fresh device memory is garbage: reads before writes give NaN
    mem().device[a.map] = a;
    mem().device_bytes += bytes;
    return a.user;
}

bool device_free(void* p) {
    std::lock_guard<std::mutex> lock(mem().mu);
    const Allocation* a = mapping_of(p);
    if (!a || a->user != p) return false;
    check_slack(*a, "a kernel or copy before cudaFree");
    mem().device_bytes -= a->size;
    char* map = a->map;
    const size_t map_bytes = a->map_bytes;
    mem().device.erase(map);
    munmap(map, map_bytes);
    return true;
}

size_t device_bytes_in_use() {
    std::lock_guard<std::mutex> lock(mem().mu);
    return mem().device_bytes;
}

bool is_device_range(const void* p, size_t n) {
    std::lock_guard<std::mutex> lock(mem().mu);
    const Allocation* a = mapping_of(p);
    const char* c = static_cast<const char*>(p);
    return a && c >= a->user && c + n <= a->user + a->size;
}

void check_guard_bytes(const std::vector<const void*>& ptrs, const char* who) {
    std::lock_guard<std::mutex> lock(mem().mu);
    const Allocation* last = nullptr;
    for (const void* p : ptrs) {
        const Allocation* a = mapping_of(p);
        if (!a || a == last) continue;
        check_slack(*a, who);
        last = a;
    }
}

void* pinned_alloc(size_t bytes) {
    install_fault_handler();
    const size_t mapped = round_up(std::max<size_t>(bytes, 1), kPage);
    void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    std::memset(m, kPoisonByte, mapped);  // like device memory: never read what was not written
    std::lock_guard<std::mutex> lock(mem().mu);
    mem().pinned[static_cast<char*>(m)] = PinnedAllocation{static_cast<char*>(m), bytes, mapped};
    return m;
}

bool pinned_free(void* p) {
    std::lock_guard<std::mutex> lock(mem().mu);
    auto it = mem().pinned.find(static_cast<const char*>(p));
    if (it == mem().pinned.end()) return false;
    munmap(it->second.p, it->second.bytes);
    mem().pinned.erase(it);
    return true;
}

bool is_pinned_range(const void* p, size_t n) {
    std::lock_guard<std::mutex> lock(mem().mu);
    const PinnedAllocation* a = pinned_of(p);
    return a && static_cast<const char*>(p) + n <= a->p + a->size;
}

void protect_pinned(const void* p, size_t n, bool device_writes, uint64_t op_id, const std::string& what) {
    std::lock_guard<std::mutex> lock(mem().mu);
    mem().uses.push_back({op_id, static_cast<const char*>(p), n, device_writes, what});
    apply_pinned_protection(static_cast<const char*>(p), n);
}

void unprotect_pinned(uint64_t op_id) {
    std::lock_guard<std::mutex> lock(mem().mu);
    std::vector<PinnedUse> mine;
    auto& uses = mem().uses;
    for (auto it = uses.begin(); it != uses.end();) {
        if (it->op == op_id) {
            mine.push_back(*it);
            it = uses.erase(it);
        } else {
            ++it;
        }
    }
    for (const PinnedUse& u : mine) apply_pinned_protection(u.p, u.n);
}

void open_pinned_for(uint64_t op_id) {
    std::lock_guard<std::mutex> lock(mem().mu);
    for (const PinnedUse& u : mem().uses) {
        if (u.op != op_id || u.n == 0) continue;
        const uintptr_t first = (uintptr_t)u.p / kPage * kPage;
        const uintptr_t last = ((uintptr_t)u.p + u.n - 1) / kPage * kPage;
        mprotect((void*)first, last - first + kPage, PROT_READ | PROT_WRITE);
    }
}

}  // namespace cudasim::detail
