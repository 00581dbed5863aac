// Host program for tests/test_protocol_pair.py: reads parameter blocks (16 words per line) from
// stdin and prints what kernels/attention_protocol.hpp decodes and derives from each.
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
        const Params p = read_request([&](uint32_t index) { return words[index - request_arg_offset(0)]; }, 0);
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
        std::printf("\n");
    }
}
