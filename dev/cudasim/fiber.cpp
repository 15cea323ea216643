#include "dev/cudasim/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace cudasim::detail {

Stack::Stack(size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    bytes_ = (bytes + page - 1) / page * page;
    void* p = mmap(nullptr, bytes_ + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        std::fprintf(stderr, "cudasim: cannot map a %zu-byte fiber stack\n", bytes_);
        std::abort();
    }
    map_ = static_cast<char*>(p);
    mprotect(map_, page, PROT_NONE);  // guard page: a stack overflow faults
    base_ = map_ + page;
}

Stack::~Stack() {
    if (map_) munmap(map_, bytes_ + (size_t)sysconf(_SC_PAGESIZE));
}

#if defined(__x86_64__)

// void cudasim_switch(void** save_sp, void* new_sp)  (System V: rdi, rsi)
// Pushes the callee-saved registers and the FP control state on the current stack, stores the stack pointer in
// *save_sp, loads new_sp and pops the same frame from there.
extern "C" void cudasim_switch(void** save_sp, void* new_sp);
__asm__(
    ".text\n"
    ".globl cudasim_switch\n"
    ".type cudasim_switch, @function\n"
    "cudasim_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size cudasim_switch, .-cudasim_switch\n");

void make_context(Context& ctx, Stack& stack, void (*entry)()) {
    // Frame popped by cudasim_switch, from low to high addresses: [mxcsr, fpu cw] r15 r14 r13 r12 rbx rbp, then the
    // return address (entry), then a zero fake return address for entry so that at entry rsp+8 is 16-byte aligned.
    uintptr_t top = reinterpret_cast<uintptr_t>(stack.top()) & ~uintptr_t(15);
    uint64_t* sp = reinterpret_cast<uint64_t*>(top);
    *--sp = 0;                                    // entry's return address: entry never returns
    *--sp = reinterpret_cast<uint64_t>(entry);   // cudasim_switch's `ret` goes here
    for (int i = 0; i < 6; i++) *--sp = 0;       // rbp rbx r12 r13 r14 r15
    *--sp = 0x1F80ull | (0x037Full << 32);        // default MXCSR (low 4 bytes), x87 control word (next 2)
    ctx.sp = sp;
}

void switch_context(Context& from, Context& to) { cudasim_switch(&from.sp, to.sp); }

#else

void make_context(Context& ctx, Stack& stack, void (*entry)()) {
    getcontext(&ctx.uc);
    ctx.uc.uc_stack.ss_sp = stack.bottom();
    ctx.uc.uc_stack.ss_size = stack.size();
    ctx.uc.uc_link = nullptr;
    makecontext(&ctx.uc, entry, 0);
}

void switch_context(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }

#endif

}  // namespace cudasim::detail
