// Internal interfaces shared by the simulator's translation units (not for kernels or tests).
#pragma once

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cudasim::detail {

// The simulated device's limits (device_profile.cpp): one profile per architecture, chosen with CUDASIM_DEVICE.
struct DeviceProfile {
    const char* arch;              // "sm_90"
    const char* product;           // the product whose figures it reports
    int major, minor;              // compute capability
    int sm_count;
    size_t shared_per_block;       // dynamic shared memory without cudaFuncAttributeMaxDynamicSharedMemorySize
    size_t shared_per_block_optin; // static + dynamic shared memory a block can opt in to
    size_t shared_per_sm;
    size_t reserved_shared_per_block;  // what the system keeps of an SM's shared memory for each resident block
    int regs_per_sm, regs_per_block, regs_per_thread;
    int max_threads_per_block, max_threads_per_sm, max_blocks_per_sm;
    size_t l2_bytes, global_memory;
    int clock_khz, memory_clock_khz, bus_width_bits;
};
const DeviceProfile& device();
const DeviceProfile* find_device_profile(const char* arch);  // null for an unknown name
// cudaFuncSetAttribute's settings are per device: a profile switch (tests) forgets them.
void forget_function_attributes();

// The largest opt-in shared memory of any profile: the size of the simulator's dynamic shared memory buffer.
constexpr size_t kLargestSharedPerBlock = 227 * 1024;
constexpr int kWarpSize = 32;
constexpr unsigned char kPoisonByte = 0xFF;               // fresh shared and pinned memory: NaN in fp32 and bf16
constexpr size_t kDeviceAlignment = 256;                  // what cudaMalloc guarantees

// ---- messages ------------------------------------------------------------------------------------------------
// Prints "<prefix><formatted message>" on stderr (after flushing stdout, so the message lands after the program's
// own lines): how every simulated library reports a misuse before returning its error code.
void report(const char* prefix, const char* fmt, va_list ap);
// Reports "cudasim: <message>" and aborts: a fault a GPU would turn into a sticky error (or a hang).
[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Records an error for cudaGetLastError / cudaPeekAtLastError.
cudaError_t set_last_error(cudaError_t e);

// ---- shared memory (shared_memory.cpp) -------------------------------------------------------------------------
unsigned char* dynamic_shared_buffer();
// Bounds the calling thread's dynamic shared memory to a launch's `bytes`: the pages past them become inaccessible.
void bound_dynamic_shared(size_t bytes);
size_t dynamic_shared_bound();
// Fills the first `bytes` and the slack up to the next page boundary with the poison byte (every block start).
void poison_dynamic_shared(size_t bytes);
// The offset of the first slack byte past `bytes` that is no longer the poison (a write past the launch's size),
// or -1.
long dynamic_shared_slack_write(size_t bytes);
// Offset of `addr` inside the calling thread's dynamic shared memory buffer, or -1.
long dynamic_shared_offset(const void* addr);
// Fills every static __shared__ object of the program with the poison byte (called at the start of every block).
void poison_static_shared();
// The limit set with cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n), or the default.
size_t max_dynamic_shared(const void* kernel);

// ---- cp.async (warp_mma.cpp) -----------------------------------------------------------------------------------
// How many threads of the block that just ran left cp.async copies they never waited for (empty committed groups
// do not count); forgets them. On a GPU such copies land in shared memory that may already be another block's.
int threads_with_unwaited_copies();

// ---- symbols of the running program (symbols.cpp) ------------------------------------------------------------
// The demangled name of the function at `addr` ("llmc::layernorm_forward_kernel(...)" shortened to its name), or a
// hex address when the executable has no symbol table.
std::string function_name(const void* addr);
// Thread-local objects of the executable: (offset in the TLS block, size) and their names, from the ELF symbol table.
struct TlsSymbol {
    size_t offset, size;
    std::string name;
};
const std::vector<TlsSymbol>& tls_symbols();
// The kernel's own static __shared__ objects (its function-local ones, from the symbol table; those of the device
// functions it calls are not attributed to it). ptxas's records of the nvcc build have the exact figure.
size_t static_shared_bytes(const void* func);

// ---- device and pinned memory (device_memory.cpp) ------------------------------------------------------------
void* device_alloc(size_t bytes);   // null when out of simulated memory
bool device_free(void* p);          // false when p is not an allocation's start
size_t device_bytes_in_use();
// Does [p, p + n) lie inside one device allocation?
bool is_device_range(const void* p, size_t n);
void* pinned_alloc(size_t bytes);
bool pinned_free(void* p);
bool is_pinned_range(const void* p, size_t n);
// Checks the rounding slack around the allocations that hold any of `ptrs` (a kernel's pointer arguments) and
// aborts naming `who` if a byte outside the allocation changed.
void check_guard_bytes(const std::vector<const void*>& ptrs, const char* who);
// Pending device operations that read (or write) pinned host memory: the pages are protected against the host
// (read-only, or no access) until the operation ran, so that a host access is reported instead of racing.
void protect_pinned(const void* p, size_t n, bool device_writes, uint64_t op_id, const std::string& what);
void unprotect_pinned(uint64_t op_id);
// Makes the pinned pages of an operation accessible while the simulator itself executes it.
void open_pinned_for(uint64_t op_id);
// Installs the SIGSEGV handler (guard pages, protected pinned pages, fiber stack overflows) with an alternate
// signal stack for the calling thread.
void install_fault_handler();

// ---- kernel execution (scheduler.cpp) -------------------------------------------------------------------------
// Where a fault happened: "kernel NAME, block (x,y,z), thread (x,y,z)" inside a kernel, or "host code".
std::string current_location();
bool in_kernel();

// ---- streams (streams.cpp) ------------------------------------------------------------------------------------
// A byte range an operation reads or writes, for the hazard detector.
struct Range {
    const char* begin;
    size_t bytes;
};
// One piece of deferred device work: it runs when a host synchronisation needs it (see docs/cudasim.md).
struct Work {
    std::string what;                 // "kernel NAME<<<...>>>", "cudaMemcpyAsync 4096 B HtoD", "ncclAllReduce ..."
    std::function<void()> run;
    std::vector<Range> reads, writes; // exact ranges where known (copies, memsets, collectives); kernels: none
    bool collective = false;          // NCCL: runs in this rank's issue order of collectives
    const void* comm = nullptr;       // the collective's communicator
    struct Pinned {                   // pinned host memory the operation touches (protected while it is pending)
        const void* p;
        size_t n;
        bool device_writes;
    };
    std::vector<Pinned> pinned;
};
// Enqueues on `stream` (0 = the legacy default stream); returns cudaErrorInvalidResourceHandle for an unknown one.
cudaError_t enqueue(cudaStream_t stream, Work work);
// Runs work until `stream`'s work enqueued so far has completed (the host observes it).
cudaError_t synchronize_stream(cudaStream_t stream);
void synchronize_device();
// Runs every pending collective of `comm` (ncclCommDestroy).
void drain_communicator(const void* comm);
// The stream scheduler's seed (CUDASIM_STREAM_SEED).
uint64_t stream_seed();

}  // namespace cudasim::detail
