// Emulator host version of api/compute/common_globals.h: ALWI, the ckernel enums, and the
// compile-time compute configuration (DST_ACCUM_MODE, DST_SYNC_MODE, MATH_FIDELITY, APPROX).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/common_globals.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include <cstdint>

#include "llk_defs.h"
#include "hostdevcommon/kernel_structs.h"  // tt::CBIndex (real: via common_globals.h)
#include "api/compile_time_args.h"        // real: included by the TRISC firmware wrapper (trisck.cc)
#include "emu/compute_engine.hpp"
#include "emu/runtime.hpp"

#define ALWI inline __attribute__((always_inline))

// The real llk headers put `using namespace ckernel;` at global scope; kernels rely on it.
using namespace ckernel;

// DST_ACCUM_MODE, DST_SYNC_MODE, MATH_FIDELITY and APPROX come from the build's generated prologue
// (the JIT's chlkc_descriptors.h; the emulator driver force-includes its emu_jit.h), which is
// seen before this header. They are not defined here; MATH_FIDELITY and APPROX exist for the
// MATH and PACK threads only, as on tt-metal.

// Per-thread code, as the real header: MATH(...) is compiled for TRISC_MATH only, and so on. The
// emulator's runnable object (EMU_ALL_TRISC_THREADS) runs all three threads' code in one.
#if defined(TRISC_MATH) || defined(EMU_ALL_TRISC_THREADS)
#define MATH(...) __VA_ARGS__
#else
#define MATH(...)
#endif
#if defined(TRISC_PACK) || defined(EMU_ALL_TRISC_THREADS)
#define PACK(...) __VA_ARGS__
#else
#define PACK(...)
#endif
#if defined(TRISC_UNPACK) || defined(EMU_ALL_TRISC_THREADS)
#define UNPACK(...) __VA_ARGS__
#else
#define UNPACK(...)
#endif
