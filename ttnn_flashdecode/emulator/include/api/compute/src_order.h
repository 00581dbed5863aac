// Emulator host version of api/compute/src_order.h.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/src_order.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include <cstdint>

namespace ckernel {

enum class SrcOrder : uint8_t {
    Regular = 0,  // icb0 -> SrcA, icb1 -> SrcB
    Reverse = 1,  // icb0 -> SrcB, icb1 -> SrcA
};

}  // namespace ckernel
