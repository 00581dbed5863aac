// Emulator host version of api/compute/eltwise_binary_sfpu.h: the SFPU add, subtract and multiply of two DST tiles.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/eltwise_binary_sfpu.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"
#include "llk_sfpu_calls.h"  // real: the LLK SFPU macros and functors, for TRISC_MATH

namespace ckernel {

// DST[odst] = DST[idst0] + DST[idst1] (fp32 in DST with fp32_dest_acc_en).
ALWI void add_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst) { emu::compute::add_binary_tile(idst0, idst1, odst, emu::compute::VecMode::RC); }

ALWI void add_binary_tile_init() { emu::compute::add_binary_tile_init(); }

// DST[odst] = DST[idst0] - DST[idst1], one fp32 subtraction on the SFPU, rounded to nearest.
ALWI void sub_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst) { emu::compute::sub_binary_tile(idst0, idst1, odst, emu::compute::VecMode::RC); }

ALWI void sub_binary_tile_init() { emu::compute::sub_binary_tile_init(); }

// DST[odst] = DST[idst0] * DST[idst1], one fp32 multiply on the SFPU (no fidelity phases).
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void mul_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst) {
    emu::compute::mul_binary_tile(is_fp32_dest_acc_en, idst0, idst1, odst, emu::compute::VecMode::RC);
}

ALWI void mul_binary_tile_init() { emu::compute::mul_binary_tile_init(); }

}  // namespace ckernel
