// Stand-in for the driver's generated prologue (build.py emu_jit.h) for compute_unit.cpp:
// the JIT constants, from -DUNIT_* flags.
#pragma once
constexpr bool DST_ACCUM_MODE = UNIT_DST_ACCUM_MODE != 0;
#define DST_SYNC_MODE DstSync::SyncHalf
#define MATH_FIDELITY (static_cast<ckernel::MathFidelity>(4))
constexpr bool APPROX = false;
