// Test reader (split-K hand-off pattern, receiving side of handoff_sender.cpp): per page, reserve
// CB `cb` (one page), raise the sender's semaphore 0, wait until semaphore 1 here counts the page
// as arrived, push it.
// Named CT args: cb. Runtime args: 0 sender NoC x, 1 sender NoC y, 2 num_pages.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t tx_x = get_arg_val<uint32_t>(0);
    const uint32_t tx_y = get_arg_val<uint32_t>(1);
    const uint32_t num_pages = get_arg_val<uint32_t>(2);
    constexpr uint32_t cb = get_named_compile_time_arg_val("cb");
    const uint64_t reserved = get_noc_addr(tx_x, tx_y, get_semaphore(0));
    auto* arrived = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(1));

    for (uint32_t i = 0; i < num_pages; ++i) {
        cb_reserve_back(cb, 1);
        noc_semaphore_inc(reserved, 1);
        noc_semaphore_wait_min(arrived, i + 1);
        cb_push_back(cb, 1);
    }
}
