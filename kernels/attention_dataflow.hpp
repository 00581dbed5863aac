// Data-movement helpers shared by the reader and the writer (split-K addressing and semaphores).
#pragma once

#include <cstdint>

#include "api/dataflow/dataflow_api.h"
#include "attention_args.hpp"
#include "attention_protocol.hpp"

namespace flashdecode {

// The named compile-time args both data-movement kernels read (attention_args.hpp); each kernel
// reads the rest itself, so it is given (and rebuilt for) only its own.
constexpr uint32_t kDimTiles = args::dim_tiles();
constexpr uint32_t kBlockTiles = args::block_tiles();
constexpr uint32_t kTileBytes = args::tile_bytes();
constexpr uint32_t kQWidthTiles = args::q_width_tiles();
static_assert(kTileBytes == 2048, "the data-movement kernels move bfloat16 tile rows");
// Q row tiles per request (attention_protocol.hpp "Q row tiles"): 1 normally.
constexpr uint32_t kRowTiles = args::row_tiles();
// Row-tile users (attention_protocol.hpp "Row-tile users"): row tile r is user `user + r`.
constexpr bool kRowTileUsers = args::row_tile_users() != 0;

// The operands' TensorAccessorArgs, chained in the positional compile-time args in the order the
// program factory writes them (program_factory.OPERANDS): Q, K, V, CONST, OUT, POSITIONS,
// PAGE_TABLE (a contiguous cache has none: POSITIONS' args stand in, never used), MASK (likewise
// without a mask), WORK, LSE (a DRAM-interleaved ROW_MAJOR buffer like WORK: POSITIONS' args; only
// the writer of a return_lse program declares and uses them).
constexpr auto kQArgs = TensorAccessorArgs<0>();
constexpr auto kKArgs = TensorAccessorArgs<kQArgs.next_compile_time_args_offset()>();
constexpr auto kVArgs = TensorAccessorArgs<kKArgs.next_compile_time_args_offset()>();
constexpr auto kConstArgs = TensorAccessorArgs<kVArgs.next_compile_time_args_offset()>();
constexpr auto kOutArgs = TensorAccessorArgs<kConstArgs.next_compile_time_args_offset()>();
constexpr auto kPositionsArgs = TensorAccessorArgs<kOutArgs.next_compile_time_args_offset()>();
constexpr auto kPageTableArgs = TensorAccessorArgs<kPositionsArgs.next_compile_time_args_offset()>();
constexpr auto kMaskArgs = TensorAccessorArgs<kPageTableArgs.next_compile_time_args_offset()>();
constexpr auto kWorkArgs = TensorAccessorArgs<kMaskArgs.next_compile_time_args_offset()>();

// The buffer address of an operand (common runtime arg `arg`, attention_protocol.hpp CommonArg).
// Out of line, as core_noc_addr: a watcher build checks every common-arg index, and one copy of
// that check instead of one per call site keeps the reader inside Wormhole NCRISC's 16 KiB IRAM.
__attribute__((noinline)) inline uint32_t operand_base(CommonArg arg) { return get_common_arg_val<uint32_t>(arg); }

// Word `index` of the uint32 array at L1 address `addr` on this core. On a device a plain load
// (the kernel idiom); the emulator never dereferences L1 addresses, so its build (TT_EMULATOR)
// asks the runtime, which also checks the word lies in CB pages this kernel holds.
inline uint32_t l1_word(uint32_t addr, uint32_t index) {
#ifdef TT_EMULATOR
    return emu::l1_read_word(addr + index * sizeof(uint32_t));
#else
    return reinterpret_cast<volatile tt_l1_ptr uint32_t*>(addr)[index];
#endif
}

// Stores `value` into word `index` of the uint32 array at L1 address `addr` (l1_word's twin; the
// emulator checks the word lies in CB pages this kernel has reserved).
inline void l1_set_word(uint32_t addr, uint32_t index, uint32_t value) {
#ifdef TT_EMULATOR
    emu::l1_write_word(addr + index * sizeof(uint32_t), value);
#else
    reinterpret_cast<volatile tt_l1_ptr uint32_t*>(addr)[index] = value;
#endif
}

// Byte `addr` of L1 (any alignment), read and written through its word (a read-modify-write:
// block-float exponents are one byte each).
inline uint32_t l1_byte(uint32_t addr) { return (l1_word(addr & ~3u, 0) >> (8 * (addr % 4))) & 0xFFu; }
inline void l1_set_byte(uint32_t addr, uint32_t value) {
    const uint32_t word = l1_word(addr & ~3u, 0), shift = 8 * (addr % 4);
    l1_set_word(addr & ~3u, 0, (word & ~(0xFFu << shift)) | ((value & 0xFFu) << shift));
}

// One NoC read of `bytes` from `src` into this core's L1 at `dst`, on the kernel's NoC, and the wait
// for the kernel's reads on it. Out of line, as operand_base: a watcher build expands every
// noc_async_read and read-barrier call site with its NoC sanitizer and waypoints, and one copy keeps
// the reader inside Wormhole NCRISC's 16 KiB IRAM. (The K/V page reads, which pick their NoC, and
// TensorAccessor page reads keep their own calls.)
__attribute__((noinline)) inline void read_bytes(uint64_t src, uint32_t dst, uint32_t bytes) {
    noc_async_read(src, dst, bytes);
}
__attribute__((noinline)) inline void wait_for_reads() { noc_async_read_barrier(); }

// NoC address of `l1_addr` on the core at core-table index `core` (the common runtime args of a
// split program hold the table).
__attribute__((noinline)) inline uint64_t core_noc_addr(uint32_t core, uint32_t l1_addr) {
    const uint32_t word = get_common_arg_val<uint32_t>(kCommonCoreTable + core);
    return get_noc_addr(core_noc_x(word), core_noc_y(word), l1_addr);
}

// Raises semaphore `semaphore_id` by one on the core at core-table index `core` (a split-K tree
// handshake). Out of line, as read_bytes: one copy of the watcher's checks for every call site.
__attribute__((noinline)) inline void signal_core(uint32_t core, uint32_t semaphore_id) {
    noc_semaphore_inc(core_noc_addr(core, get_semaphore(semaphore_id)), 1);
}

// K/V reads on both NoCs. tt-metal #55898 measured that a DRAM endpoint accepts about one read
// request per 16.4 cycles per NoC on Blackhole (6.8 on Wormhole), so K/V pages of 1088 or 576 bytes
// on one NoC reach only part of a channel; both NoCs reach ~95%. The program builds both
// data-movement kernels in DM_DYNAMIC_NOC (tt-metal wants one mode for both, and only that mode lets a
// kernel issue on either NoC); built in DM_DEDICATED_NOC, every read stays on the kernel's own NoC.
//
// The NoC of K/V page `page`: successive pages alternate NoCs, and so do the successive pages of one
// DRAM bank (page i lives in bank i % NUM_DRAM_BANKS), so each endpoint hears from both NoCs; with an
// even bank count, page parity alone would tie every bank to one NoC.
inline uint8_t kv_read_noc(uint32_t page) {
    if constexpr (noc_mode != DM_DYNAMIC_NOC) {
        return noc_index;
    } else {
        const uint32_t turn = NUM_DRAM_BANKS % 2 == 0 ? page + page / NUM_DRAM_BANKS : page;
        return (turn & 1) != 0 ? 1 - noc_index : noc_index;
    }
}

// Waits for this kernel's reads on every NoC kv_read_noc uses: a barrier covers one NoC's reads.
inline void kv_read_barrier() {
    noc_async_read_barrier(noc_index);
    if constexpr (noc_mode == DM_DYNAMIC_NOC) {
        noc_async_read_barrier(1 - noc_index);
    }
}

// This core's semaphore `id`, as the noc_semaphore_* calls take it.
inline volatile tt_l1_ptr uint32_t* semaphore(Semaphore id) {
    return reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(id));
}

}  // namespace flashdecode
