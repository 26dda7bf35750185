// Switching between the emulator's fibers and its scheduler. On x86-64 a dozen instructions save
// the callee-saved registers and the floating-point control words on the fiber's own stack and
// swap stack pointers (swapcontext would also save the signal mask, a system call per switch,
// which cost 80% of a barrier-heavy kernel's run); elsewhere ucontext does the same job.
#pragma once

#include <stddef.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace emu {

// The saved state of a fiber (or of the scheduler) while another runs.
struct Context {
#if defined(__x86_64__)
    void* sp = nullptr;
#else
    ucontext_t uc;
#endif
};

// Prepares ctx so that the first switch to it runs entry() on [stack, stack + bytes); entry must
// never return.
void make_context(Context& ctx, char* stack, size_t bytes, void (*entry)());

// Saves the running state in from and resumes to.
void swap_context(Context& from, Context& to);

}  // namespace emu
