// Test kernel: semaphore ping-pong between two cores for `rounds` rounds.
// Runtime args: 0 is_initiator, 1 peer NoC x, 2 peer NoC y, 3 rounds, 4 out_addr, 5 out page (this core's).
// Semaphore 0 on each core counts the peer's increments. At the end each core writes its semaphore
// word (4 bytes) into its page of the output (page size 32, DRAM-interleaved).
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const bool initiator = get_arg_val<uint32_t>(0) != 0;
    const uint32_t peer_x = get_arg_val<uint32_t>(1);
    const uint32_t peer_y = get_arg_val<uint32_t>(2);
    const uint32_t rounds = get_arg_val<uint32_t>(3);
    const uint32_t out_addr = get_arg_val<uint32_t>(4);
    const uint32_t out_page = get_arg_val<uint32_t>(5);
    const uint32_t sem_addr = get_semaphore(0);
    auto* sem = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(sem_addr);
    const uint64_t peer_sem = get_noc_addr(peer_x, peer_y, sem_addr);
    for (uint32_t i = 0; i < rounds; ++i) {
        DeviceZoneScopedN("round");
        if (initiator) {
            noc_semaphore_inc(peer_sem, 1);
            noc_semaphore_wait(sem, i + 1);
        } else {
            noc_semaphore_wait_min(sem, i + 1);
            noc_semaphore_inc(peer_sem, 1);
        }
    }
    const InterleavedAddrGen<true> out{.bank_base_address = out_addr, .page_size = 32};
    noc_async_write(sem_addr, out.get_noc_addr(out_page), 4);
    noc_async_write_barrier();
}
