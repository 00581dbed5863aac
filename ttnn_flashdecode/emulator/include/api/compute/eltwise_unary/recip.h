// Emulator host version of api/compute/eltwise_unary/recip.h (SFPU 1/x on a DST tile, in place).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/eltwise_unary/recip.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"

namespace ckernel {

enum class ReciprocalDestAcc { BF16, FP32 };
enum class ReciprocalApproxMode { Default, Precise, Approximate };

template <
    ReciprocalDestAcc dest_acc = DST_ACCUM_MODE ? ReciprocalDestAcc::FP32 : ReciprocalDestAcc::BF16,
    ReciprocalApproxMode approximation = ReciprocalApproxMode::Default>
ALWI void recip_tile_init() {
    emu::compute::recip_tile_init(dest_acc == ReciprocalDestAcc::FP32, static_cast<int>(approximation));
}

template <
    ReciprocalDestAcc dest_acc = DST_ACCUM_MODE ? ReciprocalDestAcc::FP32 : ReciprocalDestAcc::BF16,
    ReciprocalApproxMode approximation = ReciprocalApproxMode::Default>
ALWI void recip_tile(uint32_t idst, VectorMode vector_mode = VectorMode::RC) {
    emu::compute::recip_tile(
        dest_acc == ReciprocalDestAcc::FP32, static_cast<int>(approximation), idst,
        static_cast<emu::compute::VecMode>(vector_mode));
}

}  // namespace ckernel
