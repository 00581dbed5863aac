// Test reader for compute tests: up to three DRAM-interleaved inputs -> c_0, c_1, c_2, one page at
// a time. CTAs: three chained TensorAccessorArgs. Runtime args: addr0, n0, addr1, n1, addr2, n2
// (n = 0 skips that input).
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

template <typename Accessor>
void read_all(uint32_t cb, const Accessor& src, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
        cb_reserve_back(cb, 1);
        noc_async_read_page(i, src, get_write_ptr(cb));
        noc_async_read_barrier();
        cb_push_back(cb, 1);
    }
}

void kernel_main() {
    constexpr auto a0 = TensorAccessorArgs<0>();
    constexpr auto a1 = TensorAccessorArgs<a0.next_compile_time_args_offset()>();
    constexpr auto a2 = TensorAccessorArgs<a1.next_compile_time_args_offset()>();
    const uint32_t n0 = get_arg_val<uint32_t>(1), n1 = get_arg_val<uint32_t>(3), n2 = get_arg_val<uint32_t>(5);
    if (n0) read_all(0, TensorAccessor(a0, get_arg_val<uint32_t>(0), get_tile_size(0)), n0);
    if (n1) read_all(1, TensorAccessor(a1, get_arg_val<uint32_t>(2), get_tile_size(1)), n1);
    if (n2) read_all(2, TensorAccessor(a2, get_arg_val<uint32_t>(4), get_tile_size(2)), n2);
}
