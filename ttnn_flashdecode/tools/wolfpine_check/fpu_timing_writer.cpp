// wolfpine FPU timing probe, writer: CB 16's one page to page 0 of the output tensor. Runtime arg
// [0]: the output's DRAM address; compile-time args: its TensorAccessorArgs.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    constexpr uint32_t kCbOut = 16;
    constexpr auto kArgs = TensorAccessorArgs<0>();
    const uint32_t address = get_arg_val<uint32_t>(0);
    const auto writer = TensorAccessor(kArgs, address, get_tile_size(kCbOut));
    cb_wait_front(kCbOut, 1);
    noc_async_write_page(0, writer, get_read_ptr(kCbOut));
    noc_async_write_barrier();
    cb_pop_front(kCbOut, 1);
}
