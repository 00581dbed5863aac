// Emulator host version of api/compute/reconfig_data_format.h (format switches of the unpackers
// and the packer; the engine checks every op's CB formats against them).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/reconfig_data_format.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"
#include "api/compute/src_order.h"

namespace ckernel {

template <SrcOrder src_order = SrcOrder::Regular>
ALWI void reconfig_data_format(const uint32_t icb0_new_operand, const uint32_t icb1_new_operand) {
    constexpr bool reverse = (src_order == SrcOrder::Reverse);
    emu::compute::reconfig_both("reconfig_data_format", emu::compute::kNoCb,
                                reverse ? icb1_new_operand : icb0_new_operand, emu::compute::kNoCb,
                                reverse ? icb0_new_operand : icb1_new_operand);
}

template <SrcOrder src_order = SrcOrder::Regular>
ALWI void reconfig_data_format(
    const uint32_t icb0_old_operand,
    const uint32_t icb0_new_operand,
    const uint32_t icb1_old_operand,
    const uint32_t icb1_new_operand) {
    constexpr bool reverse = (src_order == SrcOrder::Reverse);
    emu::compute::reconfig_both(
        "reconfig_data_format",
        reverse ? icb1_old_operand : icb0_old_operand,
        reverse ? icb1_new_operand : icb0_new_operand,
        reverse ? icb0_old_operand : icb1_old_operand,
        reverse ? icb0_new_operand : icb1_new_operand);
}

ALWI void reconfig_data_format_srca(const uint32_t srca_new_operand) {
    emu::compute::reconfig_srca("reconfig_data_format_srca", emu::compute::kNoCb, srca_new_operand);
}

ALWI void reconfig_data_format_srca(const uint32_t srca_old_operand, const uint32_t srca_new_operand) {
    emu::compute::reconfig_srca("reconfig_data_format_srca", srca_old_operand, srca_new_operand);
}

ALWI void reconfig_data_format_srcb(const uint32_t srcb_new_operand) {
    emu::compute::reconfig_srcb("reconfig_data_format_srcb", emu::compute::kNoCb, srcb_new_operand);
}

ALWI void reconfig_data_format_srcb(const uint32_t srcb_old_operand, const uint32_t srcb_new_operand) {
    emu::compute::reconfig_srcb("reconfig_data_format_srcb", srcb_old_operand, srcb_new_operand);
}

template <bool is_tile_dim_reconfig_en = false>
ALWI void pack_reconfig_data_format(const uint32_t new_cb_id) {
    static_assert(!is_tile_dim_reconfig_en, "emulator: tile-dimension reconfiguration is not supported");
    emu::compute::pack_reconfig("pack_reconfig_data_format", emu::compute::kNoCb, new_cb_id);
}

template <bool is_tile_dim_reconfig_en = false>
ALWI void pack_reconfig_data_format(const uint32_t old_cb_id, const uint32_t new_cb_id) {
    static_assert(!is_tile_dim_reconfig_en, "emulator: tile-dimension reconfiguration is not supported");
    emu::compute::pack_reconfig("pack_reconfig_data_format", old_cb_id, new_cb_id);
}

}  // namespace ckernel
