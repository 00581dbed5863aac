// Host program for tests/test_protocol_pair.py: evaluates single functions of
// kernels/attention_protocol.hpp, one query per line, so the test can compare each with its
// Python twin over whole domains. A query is the function's name, then (for a method of Params
// or Operand) the 16 words of a parameter block, then the function's arguments; Operand methods
// take one more number first, the operand's index (0 Q, 1 K, 2 V, 3 CONST, 4 OUT). Prints one
// number per query (bools as 0/1); an unknown name prints "unknown NAME" and exits 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "attention_protocol.hpp"

using namespace flashdecode;

namespace {

uint32_t next() {
    uint32_t value = 0;
    if (std::scanf("%u", &value) != 1) {
        std::printf("missing argument\n");
        std::exit(1);
    }
    return value;
}

// A block's 16 words, then the kv_positions the kernels derive from the POSITIONS operand and the
// program's sliding window (neither on the wire; decode_words leaves them 0).
Params next_params() {
    uint32_t words[kWords];
    for (uint32_t i = 0; i < kWords; ++i) {
        words[i] = next();
    }
    Params p = decode_words(words);
    p.kv_positions = next();
    p.window = next();
    return p;
}

Operand next_operand() {
    const Params p = next_params();
    const Operand operands[] = {p.q, p.k, p.v, p.constants, p.out};
    const uint32_t index = next();
    return operands[index < 5 ? index : 0];
}

}  // namespace

#define FREE1(fn) if (std::strcmp(name, #fn) == 0) { const uint32_t a = next(); std::printf("%u\n", static_cast<uint32_t>(fn(a))); continue; }
#define FREE2(fn) if (std::strcmp(name, #fn) == 0) { const uint32_t a = next(); const uint32_t b = next(); std::printf("%u\n", static_cast<uint32_t>(fn(a, b))); continue; }
#define FREE2_INT32(fn) if (std::strcmp(name, #fn) == 0) { const int32_t a = static_cast<int32_t>(next()); const uint32_t b = next(); std::printf("%u\n", static_cast<uint32_t>(fn(a, b))); continue; }
#define FREE3(fn) if (std::strcmp(name, #fn) == 0) { const uint32_t a = next(); const uint32_t b = next(); const uint32_t c = next(); std::printf("%u\n", static_cast<uint32_t>(fn(a, b, c))); continue; }
#define FREE4(fn) if (std::strcmp(name, #fn) == 0) { uint32_t a[4]; for (uint32_t& x : a) x = next(); std::printf("%u\n", static_cast<uint32_t>(fn(a[0], a[1], a[2], a[3]))); continue; }
#define FREE6(fn) if (std::strcmp(name, #fn) == 0) { uint32_t a[6]; for (uint32_t& x : a) x = next(); std::printf("%u\n", static_cast<uint32_t>(fn(a[0], a[1], a[2], a[3], a[4], a[5]))); continue; }
#define METHOD0(fn) if (std::strcmp(name, #fn) == 0) { const Params p = next_params(); std::printf("%u\n", static_cast<uint32_t>(p.fn())); continue; }
#define METHOD1(fn) if (std::strcmp(name, #fn) == 0) { const Params p = next_params(); const uint32_t a = next(); std::printf("%u\n", static_cast<uint32_t>(p.fn(a))); continue; }
#define METHOD2(fn) if (std::strcmp(name, #fn) == 0) { const Params p = next_params(); const uint32_t a = next(); const uint32_t b = next(); std::printf("%u\n", static_cast<uint32_t>(p.fn(a, b))); continue; }
#define METHOD3(fn) if (std::strcmp(name, #fn) == 0) { const Params p = next_params(); const uint32_t a = next(); const uint32_t b = next(); const uint32_t c = next(); std::printf("%u\n", static_cast<uint32_t>(p.fn(a, b, c))); continue; }
#define METHOD4(fn) if (std::strcmp(name, #fn) == 0) { const Params p = next_params(); uint32_t a[4]; for (uint32_t& x : a) x = next(); std::printf("%u\n", static_cast<uint32_t>(p.fn(a[0], a[1], a[2], a[3]))); continue; }
#define METHOD1_INT32(fn) if (std::strcmp(name, #fn) == 0) { const Params p = next_params(); const int32_t a = static_cast<int32_t>(next()); std::printf("%u\n", static_cast<uint32_t>(p.fn(a))); continue; }
#define OPERAND0(fn) if (std::strcmp(name, #fn) == 0) { const Operand o = next_operand(); std::printf("%u\n", static_cast<uint32_t>(o.fn())); continue; }

int main() {
    char name[64];
    while (std::scanf("%63s", name) == 1) {
        FREE1(partial_pages)
        FREE1(tree_levels)
        FREE1(lowbit_level)
        FREE1(core_noc_x)
        FREE1(core_noc_y)
        FREE2(face_row_offset)
        FREE1(mask_row_tile)
        FREE1(mask_row_row)
        FREE1(request_row_offset)
        FREE1(work_row_words)
        FREE1(sparse_count_word)
        FREE3(work_slot)
        FREE1(served_requests)
        FREE2(page_table_entry)
        FREE2(cache_slot_tile)
        FREE2(half_block_entry)
        FREE1(kv_datum_bits)
        FREE1(kv_face_row_bytes)
        FREE3(kv_face_row_offset)
        FREE6(cache_tile_page)
        FREE2_INT32(cache_block_valid)
        FREE1(page_table_chunk_first)
        FREE2(page_table_chunk_entries)
        FREE4(const_pages)
        FREE3(row_tile_user)
        FREE3(row_mask_page)
        FREE3(own_mask_page)
        FREE1(clamp_mask_half)
        FREE1(clamp_mask_word)
        FREE3(window_mask_word)
        OPERAND0(interleaved)
        OPERAND0(first_page)
        METHOD0(live_tiles)
        METHOD0(tail_width)
        METHOD0(slices)
        METHOD0(split)
        METHOD0(reducer)
        METHOD0(slice_begin)
        METHOD0(slice_end)
        METHOD0(slice_live_tiles)
        METHOD0(tree_children)
        METHOD1(tree_child)
        METHOD0(tree_slot)
        METHOD0(tree_parent)
        METHOD1(round_to_double_blocks)
        METHOD0(padded_tiles)
        METHOD0(slice_padded_tiles)
        METHOD0(blocks)
        METHOD1(block_first_tile)
        METHOD1(live_tiles_in_block)
        METHOD0(chunk)
        METHOD0(rows)
        METHOD0(heads)
        METHOD0(rows_per_head)
        METHOD0(stage_rows)
        METHOD1(stage_head)
        METHOD1(stage_row)
        METHOD1(query_row_of)
        METHOD0(head_rows)
        METHOD3(query_page)
        METHOD2(row_width)
        METHOD1(mask_tile)
        METHOD1(mask_page)
        METHOD1(page_mask_tile)
        METHOD1(slice_mask_tile)
        METHOD1(window_start)
        METHOD1(first_q_head)
        METHOD4(attn_mask_page)
        METHOD2(attn_mask_row)
        METHOD0(first_tile)
        METHOD0(window_tiles)
        METHOD0(window_stale_rows)
        METHOD2(window_dead)
        METHOD1(window_page)
        METHOD1(window_page_tile)
        METHOD1(slice_fills_window_page)
        METHOD0(valid_kind)
        METHOD0(valid_positions)
        METHOD0(idle)
        METHOD3(valid_layout)
        METHOD0(row_tile_pages)
        METHOD2(valid_for)
        METHOD1_INT32(kv_positions_at)
        METHOD1_INT32(position_clamped)
        // decode_words: one field of the decoded block (the field's index in Params order:
        // q_rows, query_row, flags, positions, dim_tiles, user, block_tiles,
        // capacity_tiles, split_index, split_count, split_first_core).
        if (std::strcmp(name, "decode_words") == 0) {
            const Params p = next_params();
            const uint32_t fields[] = {p.q_rows, p.query_row, p.flags, p.positions, p.dim_tiles, p.user,
                                       p.block_tiles, p.capacity_tiles, p.split_index, p.split_count,
                                       p.split_first_core};
            const uint32_t field = next();
            std::printf("%u\n", fields[field < 11 ? field : 0]);
            continue;
        }
        // row_tile: one operand's first page (the operand index as next_operand's) of row tile `r`.
        if (std::strcmp(name, "row_tile") == 0) {
            const Params p = next_params();
            const uint32_t r = next();
            const Params t = p.row_tile(r);
            const Operand operands[] = {t.q, t.k, t.v, t.constants, t.out};
            const uint32_t index = next();
            std::printf("%u\n", operands[index < 5 ? index : 0].first_page());
            continue;
        }
        // read_request: request `r` of a work row of r + 1 requests (word 0 the count,
        // every block but the last zero), read through an arg callable; prints its user (word 2).
        if (std::strcmp(name, "read_request") == 0) {
            const Params p = next_params();
            const uint32_t r = next();
            const uint32_t words[kWords] = {p.q_rows | p.query_row << 8 | p.flags << 16 | p.positions << 24,
                                            p.dim_tiles, p.user};
            auto arg = [&](uint32_t index) -> uint32_t {
                if (index == kRowRequestCount) {
                    return r + 1;
                }
                const uint32_t block = (index - kRowHeader) / kWords;
                return block == r ? words[(index - kRowHeader) % kWords] : 0u;
            };
            std::printf("%u\n", read_request(arg, r).user);
            continue;
        }
        std::printf("unknown %s\n", name);
        return 1;
    }
    return 0;
}
