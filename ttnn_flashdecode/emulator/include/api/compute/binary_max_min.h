// Emulator host version of api/compute/binary_max_min.h (SFPU max of two DST tiles; float only).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/binary_max_min.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"

namespace ckernel {

ALWI void binary_max_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, VectorMode vector_mode = VectorMode::RC) {
    emu::compute::binary_max_tile(idst0, idst1, odst, static_cast<emu::compute::VecMode>(vector_mode));
}

ALWI void binary_max_tile_init() { emu::compute::binary_max_tile_init(); }

}  // namespace ckernel
