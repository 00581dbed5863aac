// Emulator host version of api/compute/cb_api.h (compute-side circular-buffer calls).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/cb_api.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"

namespace ckernel {

ALWI void cb_wait_front(uint32_t cbid, uint32_t ntiles) { emu::compute::cb_wait_front(cbid, ntiles); }

ALWI void cb_pop_front(uint32_t cbid, uint32_t ntiles) { emu::compute::cb_pop_front(cbid, ntiles); }

ALWI void cb_reserve_back(uint32_t cbid, uint32_t ntiles) { emu::compute::cb_reserve_back(cbid, ntiles); }

ALWI void cb_push_back(uint32_t cbid, uint32_t ntiles) { emu::compute::cb_push_back(cbid, ntiles); }

// The uint32 at `element_offset` of page `tile_index` of `cb_id` from the read pointer (tt-metal:
// UNPACK loads it and hands it to MATH and PACK by mailbox, so all threads see one value). The
// emulator fails unless the page is waited for and the offset lies inside it.
ALWI uint32_t read_tile_value(uint32_t cb_id, uint32_t tile_index, uint32_t element_offset) {
    return emu::compute::read_tile_value(cb_id, tile_index, element_offset);
}

}  // namespace ckernel
