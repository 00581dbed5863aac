// Test compute kernel: copies `n` tiles c_0 -> c_16 through DST, one at a time (c_0 in any format
// the engine unpacks, c_16 Float32 so DST is seen exactly). Named CT args: n, and startup_cb, the
// input CB compute_kernel_hw_startup configures (c_0, or another CB to provoke a format mismatch).
#include <cstdint>

#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/common.h"
#include "api/compute/tile_move_copy.h"

constexpr uint32_t IN = tt::CBIndex::c_0, OUT = tt::CBIndex::c_16;

void kernel_main() {
    constexpr uint32_t n = get_named_compile_time_arg_val("n");
    constexpr uint32_t startup_cb = get_named_compile_time_arg_val("startup_cb");
    compute_kernel_hw_startup(startup_cb, OUT);
    copy_init(IN);
    for (uint32_t i = 0; i < n; ++i) {
        cb_wait_front(IN, 1);
        tile_regs_acquire();
        copy_tile(IN, 0, 0);
        tile_regs_commit();
        tile_regs_wait();
        cb_reserve_back(OUT, 1);
        pack_tile(0, OUT);
        cb_push_back(OUT, 1);
        tile_regs_release();
        cb_pop_front(IN, 1);
    }
}
