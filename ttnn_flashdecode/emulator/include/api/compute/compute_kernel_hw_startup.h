// Emulator host version of api/compute/compute_kernel_hw_startup.h.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/compute_kernel_hw_startup.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"
#include "api/compute/src_order.h"

namespace ckernel {

// Configures unpacker (SrcA/SrcB formats), math and packer (output format) once, before any
// other compute call. SrcOrder::Reverse maps icb0 -> SrcB and icb1 -> SrcA (matmul's order).
template <SrcOrder src_order = SrcOrder::Regular>
ALWI void compute_kernel_hw_startup(uint32_t icb0, uint32_t icb1, uint32_t ocb) {
    constexpr bool reverse = (src_order == SrcOrder::Reverse);
    emu::compute::hw_startup(reverse ? icb1 : icb0, reverse ? icb0 : icb1, ocb, DST_ACCUM_MODE,
                             DST_SYNC_MODE == DstSync::SyncFull, EMU_MATH_FIDELITY, EMU_APPROX);
}

ALWI void compute_kernel_hw_startup(uint32_t icb0, uint32_t ocb) { compute_kernel_hw_startup(icb0, icb0, ocb); }

}  // namespace ckernel
