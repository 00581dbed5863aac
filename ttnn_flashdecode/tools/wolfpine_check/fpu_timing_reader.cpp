// wolfpine FPU timing probe, reader: pages 0 and 1 of the input tensor (tiles A and B) into CBs 0
// and 1, once. Runtime arg [0]: the input's DRAM address; compile-time args: its TensorAccessorArgs.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    constexpr auto kArgs = TensorAccessorArgs<0>();
    const uint32_t address = get_arg_val<uint32_t>(0);
    const uint32_t page_bytes = get_tile_size(0);
    const auto reader = TensorAccessor(kArgs, address, page_bytes);
    for (uint32_t cb = 0; cb < 2; ++cb) {
        cb_reserve_back(cb, 1);
        noc_async_read_page(cb, reader, get_write_ptr(cb));
        noc_async_read_barrier();
        cb_push_back(cb, 1);
    }
}
