// Test reader: DRAM-interleaved pages -> CB `cb`, `block` pages per reserve/push.
// Named CT args: cb, block. CTAs from 0: TensorAccessorArgs of the source.
// Runtime args: 0 src_addr, 1 num_pages (a multiple of block). Define SKIP_BARRIER drops the read barrier.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t src_addr = get_arg_val<uint32_t>(0);
    const uint32_t num_pages = get_arg_val<uint32_t>(1);
    constexpr uint32_t cb = get_named_compile_time_arg_val("cb");
    constexpr uint32_t block = get_named_compile_time_arg_val("block");
    constexpr auto src_args = TensorAccessorArgs<0>();
    const uint32_t page_bytes = get_tile_size(cb);
    const auto src = TensorAccessor(src_args, src_addr, page_bytes);

    for (uint32_t i = 0; i < num_pages; i += block) {
        DeviceZoneScopedN("reader-block");
        cb_reserve_back(cb, block);
        uint32_t l1 = get_write_ptr(cb);
        for (uint32_t j = 0; j < block; ++j) {
            noc_async_read_page(i + j, src, l1);
            l1 += page_bytes;
        }
#ifndef SKIP_BARRIER
        noc_async_read_barrier();
#endif
        cb_push_back(cb, block);
    }
}
