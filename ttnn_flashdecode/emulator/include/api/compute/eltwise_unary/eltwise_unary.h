// Emulator host version of api/compute/eltwise_unary/eltwise_unary.h (deprecated unary setup).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/eltwise_unary/eltwise_unary.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tile_move_copy.h"

namespace ckernel {

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated(
    "Use compute_kernel_hw_startup(icb, ocb) once at kernel start, then copy_init(icb). This will be removed after "
    "20-09-2026.")]] ALWI void
unary_op_init_common(uint32_t icb, uint32_t ocb, uint32_t call_line = __builtin_LINE()) {
    compute_kernel_hw_startup(icb, ocb);
    copy_init<is_fp32_dest_acc_en>(icb, 0 /*transpose*/, 0 /*transpose_within_16x16_face*/, call_line);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated(
    "Use compute_kernel_hw_startup(icb, ocb) once at kernel start, then copy_init(icb). This will be removed after "
    "20-09-2026.")]] ALWI void
init_sfpu(uint32_t icb, uint32_t ocb, uint32_t call_line = __builtin_LINE()) {
    compute_kernel_hw_startup(icb, ocb);
    copy_init<is_fp32_dest_acc_en>(icb, 0 /*transpose*/, 0 /*transpose_within_16x16_face*/, call_line);
}

}  // namespace ckernel
