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

}  // namespace ckernel
