// Flash-decode attention, writer (data movement): scatters the group's normalised output rows from
// the OUT circular buffer back into the output tensor, which has Q's activation layout.
//
// Compile-time args: as the reader (TensorAccessorArgs of Q, K, V, CONST, OUT; named dim_tiles,
// block_tiles, tile_bytes, q_width_tiles). Runtime args: request count, then 16 words per request.
//
// Other rows of the same output tile belong to other users or heads (other requests), so only the
// request's stage rows are written: two 32-byte face-row writes per (stage row, dim tile), never a
// whole tile.
// A split request's slice >= 1 instead delivers its partial (O, L, M, combined with its subtree)
// from its OUTBOX to its parent's inbox and raises the parent's kSemArrived + its slot.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"
#include "api/debug/kernel_profiler.hpp"
#include "attention_dataflow.hpp"
#include "attention_protocol.hpp"

using namespace flashdecode;

namespace {

// This slice's partial (its OUTBOX pages: O, L, M) into its slot of its parent's inbox. Every
// core has the same CB layout and pushes / pops its inbox only in whole cycles, so the parent's
// inbox starts where this core's PARTIALS CB's write pointer sits.
void send_partial(const Params& p, uint32_t split_items) {
    DeviceZoneScopedN("fd-writer-partial");
    const uint32_t page_bytes = get_tile_size(kCbOutbox);
    const uint32_t partial_bytes = partial_pages(kDimTiles) * page_bytes;
    cb_wait_front(kCbOutbox, partial_pages(kDimTiles));
    noc_semaphore_wait_min(semaphore(kSemInboxReady), split_items);
    const uint32_t slot = get_write_ptr(kCbPartials) + p.tree_slot() * partial_bytes;
    const uint32_t parent = p.split_first_core + p.tree_parent();
    noc_async_write(get_read_ptr(kCbOutbox), core_noc_addr(parent, slot), partial_bytes);
    noc_async_write_barrier();
    noc_semaphore_inc(core_noc_addr(parent, get_semaphore(kSemArrived + p.tree_slot())), 1);
    noc_async_atomic_barrier();  // the increment has landed before the kernel can exit
    cb_pop_front(kCbOutbox, partial_pages(kDimTiles));
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

}  // namespace

void kernel_main() {
    uint32_t split_items = 0;  // split slices served so far: kSemInboxReady counts them

    const uint32_t requests = get_arg_val<uint32_t>(kArgRequestCount);
    for (uint32_t r = 0; r < requests; ++r) {
        const Params p = read_request([](uint32_t i) { return get_arg_val<uint32_t>(i); }, r);
        if (!p.valid_for(kDimTiles, kBlockTiles)) {
            continue;  // refused (the host refuses it first); all three kernels skip it alike
        }
        split_items += p.split() ? 1 : 0;
        if (p.split() && !p.reducer()) {
            send_partial(p, split_items);
            continue;
        }
        cb_wait_front(kCbOut, kDimTiles);
        scatter_rows(p, TensorAccessor(kOutArgs, p.out.base, kTileBytes));
        cb_pop_front(kCbOut, kDimTiles);
    }
}
