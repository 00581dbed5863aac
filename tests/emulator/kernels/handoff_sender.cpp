// Test writer (split-K hand-off pattern): sends each page of CB `cb` into the receiver core's CB
// `cb` page and tells it with a semaphore. Per page: wait until the receiver has reserved its page
// (semaphore 0 here counts them), write, flush, raise the receiver's semaphore 1. Every core has
// the same CB layout and the receiver's CB has one page, so the page sits at the CB's start: this
// kernel's get_write_ptr (it never pushes `cb`).
// Named CT args: cb. Runtime args: 0 receiver NoC x, 1 receiver NoC y, 2 num_pages.
// Define SIGNAL_BEFORE_FLUSH raises the semaphore before the write barrier; FLUSH_ONLY uses
// noc_async_writes_flushed before the signal (the tt-metal idiom) and the barrier after it.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t rx_x = get_arg_val<uint32_t>(0);
    const uint32_t rx_y = get_arg_val<uint32_t>(1);
    const uint32_t num_pages = get_arg_val<uint32_t>(2);
    constexpr uint32_t cb = get_named_compile_time_arg_val("cb");
    const uint32_t page_bytes = get_tile_size(cb);
    auto* reserved = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(0));
    const uint64_t arrived = get_noc_addr(rx_x, rx_y, get_semaphore(1));
    const uint64_t slot = get_noc_addr(rx_x, rx_y, get_write_ptr(cb));

    for (uint32_t i = 0; i < num_pages; ++i) {
        cb_wait_front(cb, 1);
        noc_semaphore_wait_min(reserved, i + 1);
        noc_async_write(get_read_ptr(cb), slot, page_bytes);
#if defined(SIGNAL_BEFORE_FLUSH)
        noc_semaphore_inc(arrived, 1);
        noc_async_write_barrier();
#elif defined(FLUSH_ONLY)
        noc_async_writes_flushed();
        noc_semaphore_inc(arrived, 1);
        noc_async_write_barrier();
#else
        noc_async_write_barrier();
        noc_semaphore_inc(arrived, 1);
#endif
        cb_pop_front(cb, 1);
    }
}
