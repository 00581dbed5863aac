// Emulator host version of api/compute/reduce.h (PoolType::MAX / SUM with ReduceDim::REDUCE_ROW).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/reduce.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common.h"

namespace ckernel {

template <PoolType reduce_type, ReduceDim reduce_dim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void reduce_init(
    std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t ocb, std::uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::reduce_init(
        static_cast<emu::compute::Pool>(reduce_type), static_cast<emu::compute::RDim>(reduce_dim),
        is_fp32_dest_acc_en, icb, icb_scaler, ocb);
}

ALWI void reduce_uninit(std::uint32_t icb = 0) { emu::compute::reduce_uninit(icb); }

template <PoolType reduce_type, ReduceDim reduce_dim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void reduce_tile(
    std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t itile, std::uint32_t itile_scaler, std::uint32_t idst) {
    emu::compute::reduce_tile(
        static_cast<emu::compute::Pool>(reduce_type), static_cast<emu::compute::RDim>(reduce_dim),
        is_fp32_dest_acc_en, icb, icb_scaler, itile, itile_scaler, idst);
}

}  // namespace ckernel
