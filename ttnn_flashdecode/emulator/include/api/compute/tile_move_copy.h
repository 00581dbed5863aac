// Emulator host version of api/compute/tile_move_copy.h.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/tile_move_copy.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"
#include "api/compute/reconfig_data_format.h"

namespace ckernel {

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void copy_init(
    std::uint32_t cbid,
    std::uint32_t transpose = 0,
    std::uint32_t transpose_within_16x16_face = false,
    std::uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::copy_init("copy_init", cbid, transpose, transpose_within_16x16_face, is_fp32_dest_acc_en);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void copy_tile(std::uint32_t in_cb_id, std::uint32_t in_tile_index, std::uint32_t dst_tile_index) {
    emu::compute::copy_tile(in_cb_id, in_tile_index, dst_tile_index, is_fp32_dest_acc_en);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated("Renamed to copy_init(). This will be removed after 20-09-2026.")]] ALWI void copy_tile_init(
    std::uint32_t cbid, std::uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::copy_init("copy_tile_init", cbid, 0, 0, is_fp32_dest_acc_en);
}

}  // namespace ckernel
