// Flash-decode attention, writer (data movement): scatters the group's normalised output rows from
// the OUT circular buffer back into the output tensor, which has Q's activation layout.
//
// Compile-time args: as the reader. Runtime args: none per core; common ones as the reader's (the
// operands' addresses, the NoC table). The reader hands it its own copy of the core's work row
// (WRITER_WORK). It never reads positions: what it writes does not depend on them (the
// stage rows, the split tree), so it checks only the request's layout.
//
// Other rows of the same output tile belong to other users or heads (other requests), so only the
// request's stage rows are written: two 32-byte face-row writes per (stage row, dim tile), never a
// whole tile. A request of several Q row tiles (named compile-time arg row_tiles,
// attention_protocol.hpp "Q row tiles") takes OUT (and its LSE) a row tile at a time, each written
// through row_tile(r).
// With the named compile-time arg lse (return_lse), the normalising core's writer also writes each
// stage row's LSE (CB LSE) into the LSE operand (attention_protocol.hpp "Log-sum-exp output").
// A split request's slice >= 1 instead delivers, to its parent's inboxes, first its subtree's max
// (MAX_OUT) and then its partial (OUTBOX: O, L, summed over its subtree), raising the parent's
// kSemArrived + its slot after each; slice 0 first shares the request's max with its children.
// With several row tiles, once per row tile (a combine round each, in row-tile order).
#include <cstdint>

#include "api/dataflow/dataflow_api.h"
#include "api/debug/kernel_profiler.hpp"
#include "attention_append_stage.hpp"
#include "attention_dataflow.hpp"
#include "attention_protocol.hpp"

using namespace flashdecode;

namespace {

constexpr bool kLse = args::lse() != 0;
// The LSE operand's TensorAccessorArgs end the chain (after WORK's); a page per output row of
// n_q_heads float32 values.
constexpr auto kLseArgs = TensorAccessorArgs<kWorkArgs.next_compile_time_args_offset()>();
constexpr uint32_t kLseRowBytes = kQWidthTiles / kDimTiles * sizeof(float);
// Bytes of a staging slot: each stage row's value lands at its destination's address modulo this.
constexpr uint32_t kLseSlotBytes = 64;
// Word of a float32 tile holding row `row`, column 0 (faces of 16x16, rows 0..15 in faces 0 and 1).
constexpr uint32_t fp32_column0_word(uint32_t row) { return (row / 16u) * 512u + (row % 16u) * 16u; }

// Bytes of a `pages`-page send that go on this kernel's NoC; the rest go on the other one. A
// partial of several pages (pass 2) is its combine level's NoC transfer, which one NoC's link
// bounds, so with both data-movement kernels in DM_DYNAMIC_NOC (attention_dataflow.hpp) its first
// half of pages goes on each NoC; one page (pass 1's max) stays on one.
constexpr uint32_t own_noc_bytes(uint32_t pages, uint32_t page_bytes) {
    return noc_mode == DM_DYNAMIC_NOC && pages > 1 ? (pages + 1) / 2 * page_bytes : pages * page_bytes;
}

// `pages` pages of `from` (this slice's subtree max or its partial) into this slice's slot of its
// parent's inbox `inbox`, then raises the parent's kSemArrived + slot. Every core has the same CB
// layout and pushes / pops its inboxes only in whole cycles, so the parent's inbox starts where
// this core's `inbox` write pointer sits (this kernel never moves it). The bytes own_noc_bytes leaves
// go on the other NoC, to the same address (Wormhole and Blackhole translate coordinates: NOC_0_X is
// the identity, noc_nonblocking_api.h); the semaphore rises after both NoCs' write barriers.
void send_to_parent(const Params& p, uint32_t combine_rounds, uint32_t from, uint32_t inbox, uint32_t pages) {
    const uint32_t bytes = pages * get_tile_size(from), own = own_noc_bytes(pages, get_tile_size(from));
    cb_wait_front(from, pages);
    noc_semaphore_wait_min(semaphore(kSemInboxReady), combine_rounds);
    const uint32_t slot = get_write_ptr(inbox) + p.tree_slot() * bytes;
    const uint32_t parent = p.split_first_core + p.tree_parent();
    const uint64_t destination = core_noc_addr(parent, slot);
    noc_async_write(get_read_ptr(from), destination, own);
    if (own < bytes) {
        noc_async_write(get_read_ptr(from) + own, destination + own, bytes - own, 1 - noc_index);
        noc_async_write_barrier(1 - noc_index);
    }
    noc_async_write_barrier();
    signal_core(parent, kSemArrived + p.tree_slot());
    noc_async_atomic_barrier();  // the increment has landed before the next one (or kernel exit)
    cb_pop_front(from, pages);
}

// Slice 0: the request's max sits in MAX_OUT; tell its children in the combine tree
// (kSemMaxReady; they hand it on down) and keep it there until they have copied it (kSemMaxFetched).
void share_request_max(const Params& p) {
    DeviceZoneScopedN("fd-writer-max");
    cb_wait_front(kCbMaxOut, 1);
    for (uint32_t level = 0; level < p.tree_children(); ++level) {
        signal_core(p.split_first_core + p.tree_child(level), kSemMaxReady);
    }
    noc_semaphore_wait_min(semaphore(kSemMaxFetched), p.tree_children());
    noc_semaphore_set(semaphore(kSemMaxFetched), 0);
    noc_async_atomic_barrier();
    cb_pop_front(kCbMaxOut, 1);
}

// Row s of OUT tile d is stage row s: output row query_row_of(s) of Q head (first head +
// stage_head(s)), dim tile d (attention_protocol.hpp "Request kinds").
template <typename Accessor>
void scatter_rows(const Params& p, const Accessor& out_writer) {
    DeviceZoneScopedN("fd-writer-out");
    const uint32_t result = get_read_ptr(kCbOut);
    for (uint32_t s = 0; s < p.stage_rows(); ++s) {
        const uint32_t row = p.query_row_of(s) % kTilePositions;
        for (uint32_t d = 0; d < kDimTiles; ++d) {
            const uint32_t page = p.out.first_page() + p.query_page(s, d, kQWidthTiles);
            for (uint32_t half = 0; half < 2; ++half) {
                const uint32_t src = result + d * kTileBytes + face_row_offset(s, half);
                noc_async_write(src, out_writer.get_noc_addr(page, face_row_offset(row, half)), kFaceRowBytes);
            }
        }
    }
    noc_async_write_barrier();
}

// Stage row s's LSE (row s, column 0 of CB LSE's float32 tile) to element (lse_row, Q head) of the
// LSE operand, 4 bytes each, from staging slot s at the destination's alignment (`stage`: the
// writer's LSE_STAGE page, 64-byte aligned here).
template <typename Accessor>
void write_lse(const Params& p, const Accessor& lse_writer, uint32_t stage) {
    DeviceZoneScopedN("fd-writer-lse");
    cb_wait_front(kCbLse, 1);
    const uint32_t tile = get_read_ptr(kCbLse);
    const uint32_t first_head = p.first_q_head(kQWidthTiles);
    for (uint32_t s = 0; s < p.stage_rows(); ++s) {
        const uint32_t value = l1_word(tile, fp32_column0_word(s));
        const uint64_t dst = lse_writer.get_noc_addr(p.user * p.rows_per_head() + p.stage_row(s),
                                                     (first_head + p.stage_head(s)) * sizeof(float));
        const uint32_t src = stage + s * kLseSlotBytes + (static_cast<uint32_t>(dst) & (kLseSlotBytes - 1));
        l1_set_word(src, 0, value);
        noc_async_write(src, dst, sizeof(float));
    }
    noc_async_write_barrier();
    cb_pop_front(kCbLse, 1);
}

}  // namespace

void kernel_main() {
    uint32_t combine_rounds = 0;  // combine rounds (a split slice's row tiles) so far: kSemInboxReady counts them

    cb_wait_front(kCbWriterWork, 1);  // this core's work row, copied for the writer by the reader
    const uint32_t row = get_read_ptr(kCbWriterWork);
    const uint32_t requests = served_requests(l1_word(row, kRowRequestCount));
    const auto out_writer = TensorAccessor(kOutArgs, operand_base(kCommonOutBase), kTileBytes);
    uint32_t lse_stage = 0;
    if constexpr (kLse) {
        cb_reserve_back(kCbLseStage, 1);  // the writer's own, never pushed
        lse_stage = (get_write_ptr(kCbLseStage) + kLseSlotBytes - 1) & ~(kLseSlotBytes - 1);
    }
    const auto lse_writer = TensorAccessor(kLseArgs, kLse ? operand_base(kCommonLseBase) : 0, kLseRowBytes);
    for (uint32_t r = 0; r < requests; ++r) {
        const Params p = read_request([row](uint32_t i) { return l1_word(row, i); }, r);
        if (!p.valid_layout(kDimTiles, kBlockTiles, kRowTiles)) {
            continue;  // refused (the host refuses it first); all three kernels skip it alike
        }
        drain_appended_rows();  // the fused cache append's write-backs (attention_append_stage.hpp)
        if (p.split() && !p.reducer()) {
            DeviceZoneScopedN("fd-writer-partial");
            for (uint32_t round = 0; round < kRowTiles; ++round) {  // the combine, a round per Q row tile
                ++combine_rounds;
                {
                    DeviceZoneScopedN("fd-writer-max-up");
                    send_to_parent(p, combine_rounds, kCbMaxOut, kCbMaxInbox, 1);  // pass 1
                }
                send_to_parent(p, combine_rounds, kCbOutbox, kCbPartials, partial_pages(kDimTiles));  // pass 2
            }
            continue;
        }
        if (p.split()) {
            for (uint32_t round = 0; round < kRowTiles; ++round) {
                share_request_max(p);
            }
        }
        for (uint32_t r = 0; r < kRowTiles; ++r) {  // Q row tiles (attention_protocol.hpp "Q row tiles")
            cb_wait_front(kCbOut, kDimTiles);
            scatter_rows(p.row_tile(r), out_writer);
            cb_pop_front(kCbOut, kDimTiles);
            if constexpr (kLse) {
                Params tile = p.row_tile(r);
                tile.user = row_tile_user(p.user, r, kRowTileUsers);  // its LSE row: row-tile users' own
                write_lse(tile, lse_writer, lse_stage);
            }
        }
    }
    cb_pop_front(kCbWriterWork, 1);
}
