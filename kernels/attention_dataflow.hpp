// Data-movement helpers shared by the reader and the writer (split-K addressing and semaphores).
#pragma once

#include <cstdint>

#include "api/dataflow/dataflow_api.h"
#include "attention_protocol.hpp"

namespace flashdecode {

// The residency, as the program factory passes it to both data-movement kernels (named
// compile-time args).
constexpr uint32_t kDimTiles = get_named_compile_time_arg_val("dim_tiles");
constexpr uint32_t kBlockTiles = get_named_compile_time_arg_val("block_tiles");
constexpr uint32_t kTileBytes = get_named_compile_time_arg_val("tile_bytes");
constexpr uint32_t kQWidthTiles = get_named_compile_time_arg_val("q_width_tiles");
static_assert(kTileBytes == 2048, "the data-movement kernels move bfloat16 tile rows");
// Bytes of one K/V tile, the cache's format: bfloat16, bfloat8_b or bfloat4_b.
constexpr uint32_t kKvTileBytes = get_named_compile_time_arg_val("kv_tile_bytes");
static_assert(kKvTileBytes == 2048 || kKvTileBytes == 1088 || kKvTileBytes == 576, "K/V: bfloat16, bfloat8_b or bfloat4_b tiles");
// Bytes of the POSITIONS operand's one page: one int32 per user (batch * 4).
constexpr uint32_t kPositionsBytes = get_named_compile_time_arg_val("positions_bytes");
// The KV cache's layout (attention_protocol.hpp "Paged KV cache"): all 0 for a contiguous cache.
constexpr uint32_t kCacheBlockTiles = get_named_compile_time_arg_val("cache_block_tiles");
constexpr uint32_t kCacheBlockPages = get_named_compile_time_arg_val("cache_block_pages");
constexpr uint32_t kCacheBlocks = get_named_compile_time_arg_val("cache_blocks");
constexpr uint32_t kPageTableEntries = get_named_compile_time_arg_val("page_table_entries");
constexpr uint32_t kCacheWrapTiles = get_named_compile_time_arg_val("cache_wrap_tiles");
constexpr bool kHalfBlocks = get_named_compile_time_arg_val("cache_half_blocks") != 0;
// Consecutive users that share one page-table row (ttnn's spec_multi_pos_tiles candidates): user
// u reads row u / users_per_table_row. 1 normally.
constexpr uint32_t kUsersPerTableRow = get_named_compile_time_arg_val("users_per_table_row");
static_assert(!kHalfBlocks || kKvTileBytes == 2048, "blocks of 16 positions: bfloat16 caches only");
constexpr bool kPaged = kCacheBlockTiles != 0;
// The sliding window in positions, 0 for none (attention_protocol.hpp "Sliding window"), and the
// CONST pages per request it implies.
constexpr uint32_t kWindow = get_named_compile_time_arg_val("window");
// Attention sinks (attention_protocol.hpp "Attention sink"): 1 when the call has them.
constexpr bool kSink = get_named_compile_time_arg_val("sink") != 0;
// The attention chunk in positions, 0 for none (attention_protocol.hpp "Chunked-local attention"):
// it is a start like the window's, so it takes the window's CONST pages.
constexpr uint32_t kChunk = get_named_compile_time_arg_val("attention_chunk");
constexpr bool kWindowed = kWindow != 0 || kChunk != 0;
// Q row tiles per request (attention_protocol.hpp "Q row tiles"): 1 normally.
constexpr uint32_t kRowTiles = get_named_compile_time_arg_val("row_tiles");
// Row-tile users (attention_protocol.hpp "Row-tile users"): row tile r is user `user + r`.
constexpr bool kRowTileUsers = get_named_compile_time_arg_val("row_tile_users") != 0;
constexpr uint32_t kConstPages = const_pages(kWindowed, kSink, kRowTiles, kRowTileUsers);
// Attention mask (attention_protocol.hpp "Attention mask"): users of the mask (1: broadcast over
// the batch), 0 without one; its TensorAccessorArgs follow PAGE_TABLE's.
constexpr uint32_t kMaskUsers = get_named_compile_time_arg_val("mask_users");

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
// Bytes of one work row (a WORK page), and the grid's width in cores (work_slot).
constexpr uint32_t kWorkRowBytes = get_named_compile_time_arg_val("work_row_bytes");
constexpr uint32_t kGridX = get_named_compile_time_arg_val("grid_x");

// The buffer address of an operand (common runtime arg `arg`, attention_protocol.hpp CommonArg).
// Out of line, as core_noc_addr: a watcher build checks every common-arg index, and one copy of
// that check instead of one per call site keeps the reader inside Wormhole NCRISC's 16 KiB IRAM.
__attribute__((noinline)) inline uint32_t operand_base(CommonArg arg) { return get_common_arg_val<uint32_t>(arg); }

// Reads this core's work row into a reserved page of `cb` (the caller pushes it or keeps it) and
// returns the page's L1 address.
inline uint32_t read_work_row(uint32_t cb) {
    cb_reserve_back(cb, 1);
    const uint32_t page = get_write_ptr(cb);
    const auto work = TensorAccessor(kWorkArgs, operand_base(kCommonWorkBase), kWorkRowBytes);
    noc_async_read_page(work_slot(get_absolute_logical_x(), get_absolute_logical_y(), kGridX), work, page);
    noc_async_read_barrier();
    return page;
}

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

// NoC address of `l1_addr` on the core at core-table index `core` (the common runtime args of a
// split program hold the table).
__attribute__((noinline)) inline uint64_t core_noc_addr(uint32_t core, uint32_t l1_addr) {
    const uint32_t word = get_common_arg_val<uint32_t>(kCommonCoreTable + core);
    return get_noc_addr(core_noc_x(word), core_noc_y(word), l1_addr);
}

// This core's semaphore `id`, as the noc_semaphore_* calls take it.
inline volatile tt_l1_ptr uint32_t* semaphore(Semaphore id) {
    return reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(id));
}

}  // namespace flashdecode
