// Emulator host version of api/compute/eltwise_unary/exp.h (SFPU exp on a DST tile, in place).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/eltwise_unary/exp.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"

namespace ckernel {

enum class InputClamping : uint8_t {
    ClampToNegative = 1,
    None = 0,
};

template <
    bool approx = false,
    uint32_t scale = 0x3F800000,
    InputClamping input_clamping = InputClamping::ClampToNegative,
    bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void exp_tile_init() {
    emu::compute::exp_tile_init(
        approx, scale, input_clamping == InputClamping::ClampToNegative, is_fp32_dest_acc_en);
}

template <
    bool approx = false,
    bool scale_en = false,
    InputClamping input_clamping = InputClamping::ClampToNegative,
    int iterations = 8,
    bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void exp_tile(uint32_t idst, VectorMode vector_mode = VectorMode::RC, uint16_t scale = p_sfpu::kCONST_1_FP16B) {
    emu::compute::exp_tile(
        approx, scale_en, input_clamping == InputClamping::ClampToNegative, iterations, is_fp32_dest_acc_en, idst,
        static_cast<emu::compute::VecMode>(vector_mode), scale);
}

}  // namespace ckernel
