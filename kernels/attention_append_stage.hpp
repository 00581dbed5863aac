// The fused cache append's staging page, shared by the reader (AppendStage: fills it) and the
// writer (drain_appended_rows: writes it to the cache); attention_append.hpp says what goes in it.
// Apart from attention_append.hpp so the writer reads only the named args this needs.
#pragma once

#include <cstdint>

#include "attention_dataflow.hpp"
#include "attention_protocol.hpp"

namespace flashdecode {

// Rows appended per user (0: no append).
constexpr uint32_t kAppendRows = args::append_rows();
constexpr bool kAppend = kAppendRows != 0;
// A block-float cache (bfloat8_b 1088-byte tiles, bfloat4_b 576; bfloat16 otherwise): each appended
// row is packed on the reader (pack_block_float_face_row) and writes 16-byte pieces, its face rows'
// data (bfloat4_b: the 16 bytes holding each 8-byte face row, attention_append.hpp append_piece)
// and the 16 shared exponents of each face it touches; a bfloat16 row writes its 32-byte face rows.
constexpr bool kAppendBlockFloat = args::kv_tile_bytes() != 2048;
constexpr uint32_t kAppendWriteBytes = kAppendBlockFloat ? 16 : kFaceRowBytes;

// The APPEND_STAGE page (CB kCbAppendStage, reader -> writer, one page per request; op/residency.py
// append_stage_bytes): from its first 64-byte boundary, a 64-byte header (word 0: the face rows n),
// the n DRAM NoC addresses (two words each) padded to 64 bytes, then a 64-byte slot per face row,
// its kAppendWriteBytes at the address's offset modulo 64 in the slot (a NoC write keeps source and
// destination alignment alike). At most 2 * rows * dim_tiles face rows a request for K (block float:
// 4, each face row's data and its face's exponents), as many for V (none with values_from_keys);
// then (block float) a 128-byte scratch: a bfloat16 row's two 64-byte chunks, to be packed.
constexpr uint32_t kAppendStageEntries =
    (args::values_from_keys() != 0 ? 1 : 2) * (kAppendBlockFloat ? 4 : 2) * kAppendRows * kDimTiles;
constexpr uint32_t kAppendStageData = 64 + (8 * kAppendStageEntries + 63) / 64 * 64;
inline uint32_t append_stage_base(uint32_t page) { return (page + 63) & ~63u; }

class AppendStage {
public:
    AppendStage() {
        if constexpr (kAppend) {
            cb_reserve_back(kCbAppendStage, 1);
            page_ = append_stage_base(get_write_ptr(kCbAppendStage));
        }
    }
    // Copies the kAppendWriteBytes at L1 `src` into the next slot, to be written to `dst`.
    void add(uint32_t src, uint64_t dst) {
        const uint32_t slot = page_ + kAppendStageData + 64 * count_ + (static_cast<uint32_t>(dst) & (64u - kAppendWriteBytes));
        for (uint32_t word = 0; word < kAppendWriteBytes / sizeof(uint32_t); ++word) {
            l1_set_word(slot, word, l1_word(src, word));
        }
        l1_set_word(page_ + 64, 2 * count_, static_cast<uint32_t>(dst));
        l1_set_word(page_ + 64, 2 * count_ + 1, static_cast<uint32_t>(dst >> 32));
        ++count_;
    }
    // The block-float scratch (128 bytes, 64-aligned) after the slots.
    uint32_t scratch() const { return page_ + kAppendStageData + 64 * kAppendStageEntries; }
    // Hands the page to the writer (every valid request pushes one, maybe empty).
    void push() {
        if constexpr (kAppend) {
            l1_set_word(page_, 0, count_);
            cb_push_back(kCbAppendStage, 1);
        }
    }

private:
    uint32_t page_ = 0, count_ = 0;
};

// The writer's half: takes the request's APPEND_STAGE page, writes its face rows to the cache and
// waits for them (before the request's output), then frees the page.
inline void drain_appended_rows() {
    if constexpr (kAppend) {
        cb_wait_front(kCbAppendStage, 1);
        const uint32_t page = append_stage_base(get_read_ptr(kCbAppendStage));
        const uint32_t count = l1_word(page, 0);
        for (uint32_t i = 0; i < count; ++i) {
            const uint32_t lo = l1_word(page + 64, 2 * i), hi = l1_word(page + 64, 2 * i + 1);
            noc_async_write(page + kAppendStageData + 64 * i + (lo & (64u - kAppendWriteBytes)),
                            (static_cast<uint64_t>(hi) << 32) | lo, kAppendWriteBytes);
        }
        noc_async_write_barrier();
        cb_pop_front(kCbAppendStage, 1);
    }
}

}  // namespace flashdecode
