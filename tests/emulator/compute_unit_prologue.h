// Stand-in for the driver's generated prologue (build.py emu_jit.h) and flags for compute_unit.cpp:
// the JIT constants, from -DUNIT_* flags (HiFi4, exact exp), as the runnable object sees them.
#pragma once
#include "llk_defs.h"
constexpr bool DST_ACCUM_MODE = UNIT_DST_ACCUM_MODE != 0;
#define DST_SYNC_MODE DstSync::SyncHalf
constexpr ckernel::MathFidelity MATH_FIDELITY = static_cast<ckernel::MathFidelity>(4);
constexpr bool APPROX = false;
#define EMU_MATH_FIDELITY 4
#define EMU_APPROX 0
#define EMU_ALL_TRISC_THREADS 1
