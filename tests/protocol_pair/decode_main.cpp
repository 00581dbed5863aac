// Host program for tests/test_protocol_pair.py: reads parameter blocks (16 words, then the
// request's POSITIONS entry as an int32 and the program's sliding window, per line) from stdin and prints what
// kernels/attention_protocol.hpp decodes and derives from each.
#include <cstdio>

#include "attention_protocol.hpp"

int main() {
    using namespace flashdecode;
    uint32_t words[kWords];
    for (;;) {
        for (uint32_t i = 0; i < kWords; ++i) {
            if (std::scanf("%u", &words[i]) != 1) {
                return 0;
            }
        }
        int32_t position = 0;
        uint32_t window = 0;
        if (std::scanf("%d %u", &position, &window) != 2) {
            return 1;
        }
        Params p = read_request([&](uint32_t index) { return words[index - request_row_offset(0)]; }, 0);
        const bool layout = p.valid_layout(p.dim_tiles, p.block_tiles);
        p.kv_positions = p.kv_positions_at(position);
        p.window = window;
        std::printf("u%u l%u c%u ", p.user, layout ? 1u : 0u, p.position_clamped(position) ? 1u : 0u);
        std::printf(
            "%u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u",
            p.q_rows, p.query_row, p.flags, p.positions, p.dim_tiles, p.kv_positions, p.block_tiles,
            p.capacity_tiles, p.split_index, p.split_count, p.split_first_core, p.slice_begin(), p.slice_end(),
            p.slice_padded_tiles(), p.q.coord, p.q.base, p.k.coord, p.k.base, p.v.coord, p.v.base,
            p.constants.coord, p.constants.base, p.out.coord, p.out.base, p.live_tiles(), p.tail_width(),
            p.padded_tiles(), p.blocks(), p.valid_for(p.dim_tiles, p.block_tiles) ? 1u : 0u);
        // Combine tree: children, parent and slot (0 0 for the root).
        std::printf(" t%u %u %u", p.tree_children(), p.split_index ? p.tree_parent() : 0u,
                    p.split_index ? p.tree_slot() : 0u);
        // Mask of every window tile, then the live tiles of every block of this slice.
        for (uint32_t t = 0; t < p.padded_tiles(); ++t) {
            std::printf(" m%u", p.mask_tile(t));
        }
        for (uint32_t b = 0; b < p.blocks(); ++b) {
            std::printf(" b%u", p.live_tiles_in_block(b));
        }
        if (!p.valid_for(p.dim_tiles, p.block_tiles)) {
            std::printf("\n");
            continue;  // a refused request: only its raw fields and validity are compared
        }
        // Request kind: heads, rows per head, stage rows; each stage row's Q page (dim tile 0, a
        // 1000-tile-wide Q) and row.
        std::printf(" k%u %u %u", p.heads(), p.rows_per_head(), p.stage_rows());
        for (uint32_t s = 0; s < p.stage_rows(); ++s) {
            std::printf(" q%u:%u", p.query_page(s, 0, 1000), p.query_row_of(s) % kTilePositions);
        }
        // CONST mask pages of the last three live tiles, what this slice fetches into pages 2 and
        // 3, and the row widths of the last two live tiles.
        const uint32_t live = p.live_tiles();
        for (uint32_t t = live > 3 ? live - 3 : 0; t < live; ++t) {
            std::printf(" p%u", p.mask_page(t));
        }
        std::printf(" s%u %u", p.slice_mask_tile(kConstPageMask), p.slice_mask_tile(kConstPageMaskBefore));
        for (uint32_t t = live > 2 ? live - 2 : 0; t < live; ++t) {
            for (uint32_t row = 0; row < p.rows_per_head(); ++row) {
                std::printf(" w%u", p.row_width(t, row));
            }
        }
        // Sliding window: first tile, window tiles, stale rows, each row's start, the window pages
        // of the first two window tiles, whether this slice fills them, each row's dead columns there.
        std::printf(" f%u %u %u", p.first_tile(), p.window_tiles(), p.window_stale_rows());
        for (uint32_t row = 0; row < p.rows_per_head(); ++row) {
            std::printf(" a%u", p.window_start(row));
        }
        for (uint32_t t = p.first_tile(); t < p.first_tile() + 2; ++t) {
            std::printf(" g%u", p.window_page(t));
            for (uint32_t row = 0; row < p.rows_per_head(); ++row) {
                std::printf(" d%u", p.window_dead(t, row));
            }
        }
        std::printf(" h%u %u", p.slice_fills_window_page(kConstPageWindow) ? 1u : 0u,
                    p.slice_fills_window_page(kConstPageWindowNext) ? 1u : 0u);
        for (uint32_t width = 0; width <= kTilePositions; ++width) {
            std::printf(" r%u:%u", mask_row_tile(width), mask_row_row(width));
        }
        std::printf("\n");
    }
}
