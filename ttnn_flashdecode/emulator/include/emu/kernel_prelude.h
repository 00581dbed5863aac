// Force-included (g++ -include) ahead of every kernel the emulator compiles, like the JIT's
// generated prologue. Declares the runtime with default visibility (kernels are built with
// -fvisibility=hidden so that the inline API of two kernel .so's never interposes) and the
// attribute macros the TT-Metalium headers use.
#pragma once

#include <cstddef>
#include <cstdint>

#pragma GCC visibility push(default)
#include "emu/runtime.hpp"
void kernel_main();
#pragma GCC visibility pop

#ifndef FORCE_INLINE
#define FORCE_INLINE inline __attribute__((always_inline))
#endif
#ifndef tt_l1_ptr
#define tt_l1_ptr
#endif
#ifndef tt_reg_ptr
#define tt_reg_ptr
#endif
