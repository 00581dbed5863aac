// Test reader: the gather pattern of the attention reader, one page at a time. Each DRAM page lands
// in CB page 0 (the landing page) and is then copied over the core's own NoC into CB page 1, which
// is pushed with page 0. CB `cb` has 2 pages; named CT args: cb; CTAs from 0: TensorAccessorArgs
// of the source. Runtime args: 0 src_addr, 1 num_pages.
// Define SKIP_LANDING_BARRIER drops the barrier between the DRAM read and the local copy (the copy
// reads the landing page while the DRAM read is still filling it).
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t src_addr = get_arg_val<uint32_t>(0);
    const uint32_t num_pages = get_arg_val<uint32_t>(1);
    constexpr uint32_t cb = get_named_compile_time_arg_val("cb");
    constexpr auto src_args = TensorAccessorArgs<0>();
    const uint32_t page_bytes = get_tile_size(cb);
    const auto src = TensorAccessor(src_args, src_addr, page_bytes);

    for (uint32_t i = 0; i < num_pages; ++i) {
        cb_reserve_back(cb, 2);
        const uint32_t landing = get_write_ptr(cb);
        noc_async_read_page(i, src, landing);
#ifndef SKIP_LANDING_BARRIER
        noc_async_read_barrier();
#endif
        noc_async_read(get_noc_addr(landing), landing + page_bytes, page_bytes);
        noc_async_read_barrier();
        cb_push_back(cb, 2);
    }
}
