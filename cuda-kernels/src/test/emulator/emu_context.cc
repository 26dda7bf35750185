// emu_context.h's two implementations: a stack-pointer swap on x86-64 (System V ABI: rbx, rbp,
// r12-r15, MXCSR and the x87 control word are the callee-saved state), ucontext elsewhere.
#include "emu_context.h"

#include <stdint.h>

namespace emu {

#if defined(__x86_64__)

extern "C" void emu_switch_stack(void** save_sp, void* load_sp);

// Pushes the callee-saved state, stores rsp in *save_sp, loads load_sp, pops the state saved
// there and returns into that fiber.
asm(R"(
    .text
    .globl emu_switch_stack
    .type emu_switch_stack, @function
emu_switch_stack:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch_stack, .-emu_switch_stack
)");

void make_context(Context& ctx, char* stack, size_t bytes, void (*entry)()) {
    // From the 16-byte aligned top down: a null return address for entry (which never returns),
    // entry itself for emu_switch_stack's ret, six zeroed registers, then the control words.
    // entry starts with rsp ≡ 8 (mod 16), as after a call.
    uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15);
    uint64_t* sp = reinterpret_cast<uint64_t*>(top) - 9;
    uint32_t mxcsr;
    uint16_t fpucw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    sp[0] = mxcsr | static_cast<uint64_t>(fpucw) << 32;
    for (int i = 1; i <= 6; i++) sp[i] = 0;
    sp[7] = reinterpret_cast<uint64_t>(entry);
    sp[8] = 0;
    ctx.sp = sp;
}

void swap_context(Context& from, Context& to) {
    emu_switch_stack(&from.sp, to.sp);
}

#else

void make_context(Context& ctx, char* stack, size_t bytes, void (*entry)()) {
    getcontext(&ctx.uc);
    ctx.uc.uc_stack.ss_sp = stack;
    ctx.uc.uc_stack.ss_size = bytes;
    ctx.uc.uc_link = nullptr;
    makecontext(&ctx.uc, entry, 0);
}

void swap_context(Context& from, Context& to) {
    swapcontext(&from.uc, &to.uc);
}

#endif

}  // namespace emu
