// Runtime-arg accessors shared by every kernel role: get_arg_val, get_common_arg_val,
// get_arg_addr, get_common_arg_addr (real: api/dataflow/dataflow_api.h for BRISC/NCRISC and
// api/compute/common.h for TRISC). Reading past the provided count fails the run with the index
// and the count. get_arg_addr returns a host pointer to the word (never an L1 address).
#pragma once

#include <cstdint>

#include "emu/kernel_prelude.h"

static FORCE_INLINE uintptr_t get_arg_addr(int arg_idx) { return emu::arg_addr(static_cast<uint32_t>(arg_idx)); }
static FORCE_INLINE uintptr_t get_common_arg_addr(int arg_idx) {
    return emu::common_arg_addr(static_cast<uint32_t>(arg_idx));
}

template <typename T>
FORCE_INLINE T get_arg_val(int arg_idx) {
    static_assert("Error: only 4B args are supported" && sizeof(T) == 4);
    uint32_t v = emu::arg(static_cast<uint32_t>(arg_idx));
    T out;
    __builtin_memcpy(&out, &v, 4);
    return out;
}

template <typename T>
FORCE_INLINE T get_common_arg_val(int arg_idx) {
    static_assert("Error: only 4B args are supported" && sizeof(T) == 4);
    uint32_t v = emu::common_arg(static_cast<uint32_t>(arg_idx));
    T out;
    __builtin_memcpy(&out, &v, 4);
    return out;
}
