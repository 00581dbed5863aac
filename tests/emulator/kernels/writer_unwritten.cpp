// Test writer: sends L1 that no kernel of the run wrote to DRAM (issue 25: L1 is poisoned at every
// launch). Output page 0: page 0 of CB `cb`, reserved but never filled; page 1: the CB's page size
// of L1 at `l1_addr`, outside every CB. Nothing here writes L1, so both pages carry whatever the
// launch left there.
// Named CT args: cb. CTAs from 0: TensorAccessorArgs of the destination.
// Runtime args: 0 dst_addr, 1 l1_addr.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t dst_addr = get_arg_val<uint32_t>(0);
    const uint32_t l1_addr = get_arg_val<uint32_t>(1);
    constexpr uint32_t cb = get_named_compile_time_arg_val("cb");
    constexpr auto dst_args = TensorAccessorArgs<0>();
    const uint32_t page_bytes = get_tile_size(cb);
    const auto dst = TensorAccessor(dst_args, dst_addr, page_bytes);

    cb_reserve_back(cb, 1);  // a reserved page may be read by its producer: it is never written here
    noc_async_write_page(0, dst, get_write_ptr(cb));
    noc_async_write_page(1, dst, l1_addr);
    noc_async_write_barrier();
}
