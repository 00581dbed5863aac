// Emulator host version of api/compute/eltwise_unary/bitwise.h (SFPU DST tile op 32-bit scalar, in
// place). The emulator implements the Int32 AND (the TF32 rounding's second pass).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/eltwise_unary/bitwise.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"
#include "llk_sfpu_calls.h"  // real: the LLK SFPU macros and functors, for TRISC_MATH

namespace ckernel {

ALWI void bitwise_and_tile_init() { emu::compute::bitwise_and_tile_init(); }

// DST tile idst &= param0, on each datum's bits (Int32 layout).
template <DataFormat data_format>
ALWI void bitwise_and_tile(uint32_t idst, uint32_t param0) {
    static_assert(data_format == DataFormat::Int32, "the emulator models the Int32 bitwise AND only");
    emu::compute::bitwise_and_scalar_tile(idst, param0, emu::compute::VecMode::RC);
}

}  // namespace ckernel
