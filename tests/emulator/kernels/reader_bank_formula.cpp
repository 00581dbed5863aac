// Test reader: fetches page i from bank i % NUM_DRAM_BANKS at (i / NUM_DRAM_BANKS) * aligned + base
// (TT_FACTS §4) with get_noc_addr_from_bank_id, not through a TensorAccessor.
// CT args: 0 cb, 1 aligned page bytes. Runtime args: 0 src_addr, 1 num_pages.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t src_addr = get_arg_val<uint32_t>(0);
    const uint32_t num_pages = get_arg_val<uint32_t>(1);
    constexpr uint32_t cb = get_compile_time_arg_val(0);
    constexpr uint32_t aligned = get_compile_time_arg_val(1);
    const uint32_t page_bytes = get_tile_size(cb);
    for (uint32_t i = 0; i < num_pages; ++i) {
        cb_reserve_back(cb, 1);
        const uint32_t bank = i % NUM_DRAM_BANKS;
        const uint32_t offset = (i / NUM_DRAM_BANKS) * aligned + src_addr;
        noc_async_read(get_noc_addr_from_bank_id<true>(bank, offset), get_write_ptr(cb), page_bytes);
        noc_async_read_barrier();
        cb_push_back(cb, 1);
    }
}
