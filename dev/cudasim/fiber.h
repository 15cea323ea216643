// Fibers for the CUDA simulator: one cooperative user-space context per simulated CUDA thread.
//
// A fiber runs on its own stack until it calls switch_to() back to the scheduler; nothing is preemptive, so code
// between two switches is atomic with respect to the other fibers. On x86-64 the switch is a few instructions of
// hand-written assembly (callee-saved registers, stack pointer, MXCSR and x87 control word); elsewhere it falls back to
// ucontext (slower: swapcontext makes a signal-mask system call).
#pragma once

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace cudasim::detail {

struct Context {
#if defined(__x86_64__)
    void* sp = nullptr;
#else
    ucontext_t uc;
#endif
};

// A stack allocated with mmap, with a PROT_NONE guard page below it so an overflow faults instead of corrupting memory.
class Stack {
public:
    explicit Stack(size_t bytes);
    ~Stack();
    Stack(const Stack&) = delete;
    Stack& operator=(const Stack&) = delete;
    char* top() const { return base_ + bytes_; }
    // The guard page below the stack: a fault there is a stack overflow.
    bool in_guard(const void* addr) const { return addr >= (const void*)map_ && addr < (const void*)base_; }
    char* bottom() const { return base_; }
    size_t size() const { return bytes_; }
private:
    char* map_ = nullptr;   // guard page + stack
    char* base_ = nullptr;  // lowest usable byte
    size_t bytes_ = 0;
};

// Prepare `ctx` so that the first switch into it calls entry() on `stack`. entry must never return.
void make_context(Context& ctx, Stack& stack, void (*entry)());
// Save the current context into `from` and resume `to`.
void switch_context(Context& from, Context& to);

}  // namespace cudasim::detail
