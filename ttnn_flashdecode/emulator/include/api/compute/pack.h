// Emulator host version of api/compute/pack.h.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/pack.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"

namespace ckernel {

// out_of_order_output=false: writes the next page after the ones packed since the last
// cb_push_back (output_tile_index ignored); true: writes page output_tile_index of the reservation.
template <bool out_of_order_output = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void pack_tile(std::uint32_t ifrom_dst, std::uint32_t icb, std::uint32_t output_tile_index = 0) {
    emu::compute::pack_tile(out_of_order_output, is_fp32_dest_acc_en, ifrom_dst, icb, output_tile_index);
}

}  // namespace ckernel
