// Test writer: CB `cb` -> DRAM-interleaved pages, `block` pages per wait/pop.
// Named CT args: cb, block. CTAs from 0: TensorAccessorArgs of the destination.
// Runtime args: 0 dst_addr, 1 num_pages.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t dst_addr = get_arg_val<uint32_t>(0);
    const uint32_t num_pages = get_arg_val<uint32_t>(1);
    constexpr uint32_t cb = get_named_compile_time_arg_val("cb");
    constexpr uint32_t block = get_named_compile_time_arg_val("block");
    constexpr auto dst_args = TensorAccessorArgs<0>();
    const uint32_t page_bytes = get_tile_size(cb);
    const auto dst = TensorAccessor(dst_args, dst_addr, page_bytes);

    for (uint32_t i = 0; i < num_pages; i += block) {
        DeviceZoneScopedN("writer-block");
        cb_wait_front(cb, block);
        uint32_t l1 = get_read_ptr(cb);
        for (uint32_t j = 0; j < block; ++j) {
            noc_async_write_page(i + j, dst, l1);
            l1 += page_bytes;
        }
        noc_async_write_barrier();
        cb_pop_front(cb, block);
    }
}
