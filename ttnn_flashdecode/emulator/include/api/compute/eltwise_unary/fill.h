// Emulator host version of api/compute/eltwise_unary/fill.h: fill_tile (a float) only.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/eltwise_unary/fill.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"

namespace ckernel {

// Every datum of DST[idst] = param0.
ALWI void fill_tile(uint32_t idst, float param0) { emu::compute::fill_tile(idst, param0); }

ALWI void fill_tile_init() { emu::compute::fill_tile_init(); }

}  // namespace ckernel
