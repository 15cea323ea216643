// Dynamic shared memory: the object behind `extern __shared__ T name[];` in kernels.
//
// Under the simulator __shared__ is thread_local (cudasim_device.h), so `extern __shared__ float smem[];` inside a
// kernel declares an external thread-local symbol named after the kernel's namespace and the array's name
// (`smem` in the global namespace, `_ZN4llmc4smemE` in namespace llmc, ...). This file defines one thread-local
// buffer and binds every such symbol we know of to it, as weak aliases. A kernel using another name or namespace gets
// a link error "undefined reference to `ns::name'": add the mangled name to CUDASIM_DYNAMIC_SHARED_NAMES below.
#include "dev/cudasim/state.h"

extern "C" {
alignas(128) thread_local unsigned char cudasim_dynamic_shared[cudasim::detail::kMaxDynamicShared];

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
unsigned char* dynamic_shared_buffer() { return cudasim_dynamic_shared; }
}  // namespace cudasim::detail
