// Emulator host version of api/compute/reg_api.h (the DST handshake).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/reg_api.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"

namespace ckernel {

[[deprecated("Use tile_regs_acquire() instead")]]
ALWI void acquire_dst() { emu::compute::acquire_dst(); }

ALWI void tile_regs_acquire() { emu::compute::tile_regs_acquire(); }

ALWI void tile_regs_wait() { emu::compute::tile_regs_wait(); }

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated("Use tile_regs_release() instead")]]
ALWI void release_dst() {
    emu::compute::release_dst(is_fp32_dest_acc_en);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tile_regs_commit() {
    emu::compute::tile_regs_commit(is_fp32_dest_acc_en);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tile_regs_release() {
    emu::compute::tile_regs_release(is_fp32_dest_acc_en);
}

}  // namespace ckernel
