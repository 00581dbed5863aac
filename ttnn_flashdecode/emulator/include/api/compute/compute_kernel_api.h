// Emulator host version of api/compute/compute_kernel_api.h. The real header holds the SFPU
// activations (sigmoid, silu, tanh, ...); the emulator implements tanh_tile (the logit softcap's),
// log_tile (the LSE's) and the common globals only. Unsupported calls fail to compile rather than run wrong.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/compute_kernel_api.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"
#include "llk_sfpu_calls.h"  // real: the LLK SFPU macros and functors, for TRISC_MATH

namespace ckernel {

// tanh on a DST tile, in place (the LLK's calculate_tanh; see emu::compute::tanh_tile for the
// numerics modelled). fast_and_approx (the LUT path) is refused by the emulator.
template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tanh_tile_init() {
    emu::compute::tanh_tile_init(fast_and_approx, is_fp32_dest_acc_en);
}

template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tanh_tile(uint32_t idst) {
    emu::compute::tanh_tile(fast_and_approx, is_fp32_dest_acc_en, idst, emu::compute::VecMode::RC);
}

// Natural log on a DST tile, in place (the LLK's accurate calculate_log; log(0) = -inf).
// fast_and_approx is refused by the emulator.
template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void log_tile_init() {
    emu::compute::log_tile_init(fast_and_approx, is_fp32_dest_acc_en);
}

template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void log_tile(uint32_t idst) {
    emu::compute::log_tile(fast_and_approx, is_fp32_dest_acc_en, idst, emu::compute::VecMode::RC);
}

}  // namespace ckernel
