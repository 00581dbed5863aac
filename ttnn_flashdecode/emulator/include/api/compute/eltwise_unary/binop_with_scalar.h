// Emulator host version of api/compute/eltwise_unary/binop_with_scalar.h (SFPU DST tile op fp32
// scalar, in place). The emulator implements mul_unary_tile (the logit softcap's 1 / c and c) and
// add_unary_tile_int32 (the TF32 rounding's first pass).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/eltwise_unary/binop_with_scalar.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"
#include "llk_sfpu_calls.h"  // real: the LLK SFPU macros and functors, for TRISC_MATH

namespace ckernel {

ALWI void binop_with_scalar_tile_init() { emu::compute::binop_with_scalar_tile_init(); }

// DST tile idst *= the fp32 scalar whose bits are param1.
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void mul_unary_tile(uint32_t idst, uint32_t param1) {
    emu::compute::mul_unary_tile(is_fp32_dest_acc_en, idst, param1, emu::compute::VecMode::RC);
}

// DST tile idst += the int32 scalar param1, on each datum's bits (calculate_add_int32).
ALWI void add_unary_tile_int32(uint32_t idst, uint32_t param1) {
    emu::compute::add_int32_scalar_tile(idst, param1, emu::compute::VecMode::RC);
}

}  // namespace ckernel
