// The KV-cache append fused into the op (ttnn_flashdecode's append_k= / append_v= / append_latent=),
// reader half. Host half: ttnn_flashdecode/op/append.py (validation, the APPEND operand's pages,
// the host reference of ttnn's update op). docs/options.md "append_k, append_v".
//
// Semantics: ttnn's paged_update_cache (update_cache for a contiguous cache) followed by the
// decode call. Each user's P new rows (P = append_rows(): 1 for decode, `rows` for ROWS) go to
// the P positions ending at its POSITIONS entry (cur_pos - P + 1 .. cur_pos), in every KV head,
// through the page table; an idle user (-1) appends nothing. The rows are not read back from DRAM:
//
//   1. The reader reads a K (V) block from the cache as always, into CB K (V).
//   2. For each position tile of the block that holds appended positions, it copies the new rows
//      from the APPEND operand into those rows of the CB page in L1 (the row's two 32-byte face
//      rows per dim tile), overwriting what the cache held there: attention sees the new rows.
//   3. It copies those face rows, from the patched page, with their DRAM addresses in the cache,
//      into its APPEND_STAGE page (AppendStage), which it pushes to the writer after the request's
//      last block; the writer kernel on the same core writes them to the cache tile (32 bytes each)
//      and waits for the writes before it takes the request's output (drain_appended_rows). The
//      writes run on BRISC, beside the reader's NCRISC code: a noc_async_write costs ~2 KB of
//      watcher sanitizing, which Wormhole's 16 KiB NCRISC IRAM has no room for.
//
// Who writes: the core whose split-K slice owns the position tile (slices partition a request's
// live tiles, and the tile holding cur_pos is always live), so each row is written once. A KV group
// of more than 32 Q heads planned as several requests (one per 32 heads) patches the page in every
// request but writes only from the group's first one (first_q_head % append_gqa() == 0).
// Ordering: no other core reads these tiles in the same call (a cache tile of one (user, KV head)
// is read by the one slice owning it); a later call reads them after this program has finished.
//
// The APPEND_K and APPEND_V operands: ttnn's update input, [P, batch, n_kv_heads, head_dim] bfloat16
// TILE, DRAM interleaved, each (decode: P = 1, the [1, b, nkv, dh] paged_update_cache takes; no
// APPEND_V with values_from_keys: MLA's latent is one cache). Row j (position cur_pos - P + 1 + j)
// of (user, kv_head) is row kv_head % 32 of page ((j * batch + user) * head_tiles + kv_head / 32) *
// dim_tiles + d, head_tiles = ceil(n_kv_heads / 32). Their addresses are common runtime args
// kCommonAppendBase and kCommonAppendVBase; the reader addresses them with CONST's TensorAccessorArgs
// (see patch_appended_rows), their own (after LSE's in the chain) only keep the chain's order.
//
// bfloat8_b caches (1088-byte tiles: 64 shared exponents, one per face row, then a byte per datum):
// a row is only its own face rows, so the reader packs it itself instead of step 2's copy: it reads
// the row's two bfloat16 face rows (their 64-byte chunks) into the stage's scratch and packs each
// as ttnn's host packer does (pack_block_float_face_row) into the CB page's data and exponent byte. Step 3
// then stages each face row's 16 data bytes and its face's 16 exponent bytes (a 16-byte piece the
// core owns whole: every row of that tile this call appends is patched before it is staged; the
// other exponents are the ones just read).
//
// bfloat4_b caches (576-byte tiles: the same 64 exponents, then a nibble per datum, datum 0 of a
// byte in its low nibble): the same packing with 3 magnitude bits (block_float_datum<3>), a face
// row 8 bytes. 8 bytes are under the NoC's 16-byte L1 / DRAM write alignment, so step 3 stages the
// 16-byte piece holding the face row (append_piece): a read-modify-write of that piece, whose other
// 8 bytes are the neighbouring face row (row ^ 1) of the same face, as read from the cache in this
// call (or, when appended too, already patched: a tile's rows are all patched before any is staged).
// The piece is one user's one KV head's tile, which no other core writes in this call (the tile's
// slice owns it, and shared appended-into blocks are refused on the host), so writing the
// neighbour's bytes back unchanged is safe; the staging copies it before zero_stale_rows runs.
#pragma once

#include <cstdint>

#include "attention_append_stage.hpp"
#include "attention_dataflow.hpp"
#include "attention_protocol.hpp"

namespace flashdecode {

// The GQA ratio, the KV heads and the batch (where a request's rows are in the APPEND operands).
constexpr uint32_t kAppendGqa = args::append_gqa();
constexpr uint32_t kAppendKvHeads = args::append_kv_heads();
constexpr uint32_t kAppendBatch = args::append_batch();

// The first appended position of a request whose last live count is `kv_positions` (cur_pos + 1).
constexpr uint32_t append_first_position(uint32_t kv_positions, uint32_t rows) { return kv_positions - rows; }

// Appended positions [lo, hi] that fall in position tile `tile` (lo > hi: none).
struct AppendSpan {
    uint32_t lo, hi;
    constexpr bool empty() const { return lo > hi; }
};
constexpr AppendSpan append_span(uint32_t kv_positions, uint32_t rows, uint32_t tile) {
    const uint32_t first = append_first_position(kv_positions, rows), last = kv_positions - 1;
    const uint32_t tile_lo = tile * kTilePositions, tile_hi = tile_lo + kTilePositions - 1;
    return AppendSpan{first > tile_lo ? first : tile_lo, last < tile_hi ? last : tile_hi};
}

// The APPEND_K (APPEND_V) page holding row j of (user, kv_head)'s new rows, dim tile `d` (its row
// there: kv_head % 32).
constexpr uint32_t append_page(uint32_t j, uint32_t user, uint32_t kv_head, uint32_t batch, uint32_t kv_heads,
                               uint32_t dim_tiles, uint32_t d) {
    const uint32_t head_tiles = (kv_heads + kTilePositions - 1) / kTilePositions;
    return ((j * batch + user) * head_tiles + kv_head / kTilePositions) * dim_tiles + d;
}

// The offset in its tile of the piece the writer writes for the face row at `offset`: the face row
// itself (bfloat16: 32 bytes; bfloat8_b: 16), or for bfloat4_b (8 bytes) the 16-byte piece holding it.
constexpr uint32_t append_piece(uint32_t offset) {
    if constexpr (kAppendWriteBytes > kv_face_row_bytes(args::kv_tile_bytes())) {
        return offset & ~(kAppendWriteBytes - 1);
    }
    return offset;
}

// Every piece the writer writes starts at a multiple of its size in its tile (a face row's data, or
// for bfloat4_b the 16 bytes holding it; block float: its face's exponents, at face * 16) and holds
// the whole face row, so with the tile itself 16-byte aligned (a page of 2048, 1088 = 68 x 16 or
// 576 = 36 x 16 bytes) each write meets the NoC's 16-byte L1 and DRAM write alignment
// (noc_parameters.h, Wormhole and Blackhole). The emulator does not check NoC alignment: this does.
constexpr bool append_pieces_aligned(uint32_t tile_bytes) {
    for (uint32_t row = 0; row < kTilePositions; ++row) {
        for (uint32_t half = 0; half < 2; ++half) {
            const uint32_t offset = kv_face_row_offset(row, half, tile_bytes), piece = append_piece(offset);
            if (piece % kAppendWriteBytes != 0 || offset + kv_face_row_bytes(tile_bytes) > piece + kAppendWriteBytes) {
                return false;
            }
        }
    }
    return tile_bytes % 16 == 0 && kAppendWriteBytes % 16 == 0;
}
static_assert(!kAppend || append_pieces_aligned(args::kv_tile_bytes()), "fused append: a write-back piece off 16 bytes");
#ifdef NOC_DRAM_WRITE_ALIGNMENT_BYTES  // a device build: the arch's own alignments (the staging slot keeps 64)
static_assert(!kAppend || (kAppendWriteBytes % NOC_DRAM_WRITE_ALIGNMENT_BYTES == 0 &&
                           kAppendWriteBytes % NOC_L1_WRITE_ALIGNMENT_BYTES == 0 && 64 % NOC_DRAM_WRITE_ALIGNMENT_BYTES == 0),
              "fused append: a write-back piece under the NoC's write alignment");
#endif

// One datum of ttnn's block-float host packing (blockfloat_common convert_u32_to_bfp, Bfp8_b /
// Bfp4_b, rounding), `kBits` magnitude bits (7: bfloat8_b, 3: bfloat4_b): float32 bits `bits` under
// shared exponent `shared` (>= its own): the hidden bit added, shifted right by the exponent
// difference, rounded to kBits bits half to even and clamped, sign << kBits | magnitude; +-0, a
// denormal (flushed: ttnn's packer as installed does, checked by tests/test_fused_append_bfp8.py
// and test_fused_append_bfp4.py) and a magnitude rounded to 0 give 0.
template <uint32_t kBits>
inline uint32_t block_float_datum(uint32_t bits, uint32_t shared) {
    constexpr uint32_t kDrop = 24 - kBits, kHalf = 1u << (kDrop - 1), kTop = (1u << kBits) - 1;
    if ((bits & 0x7F800000u) == 0) {
        return 0;
    }
    const uint32_t diff = shared - ((bits >> 23) & 0xFFu);
    uint32_t mantissa = diff > 31 ? 0 : ((1u << 23) | (bits & 0x7FFFFFu)) >> diff;
    const uint32_t rest = mantissa & ((1u << kDrop) - 1);
    mantissa >>= kDrop;
    if (rest > kHalf || (rest == kHalf && (mantissa & 1u) != 0)) {
        mantissa += 1;
    }
    mantissa = mantissa > kTop ? kTop : mantissa;
    return mantissa == 0 ? 0 : ((bits >> 31) << kBits) | mantissa;
}

// Packs the 16 bfloat16 values at L1 `src` (8 words) as one block-float face row of kBits magnitude
// bits: its data (bfloat8_b 16 bytes, bfloat4_b 8) at L1 `data` (datum 0 in the low byte / nibble of
// word 0) and its shared exponent (the largest exponent field of the 16) into byte `exponent` of
// the L1 tile at `tile` (l1_set_byte).
template <uint32_t kBits>
__attribute__((noinline)) void pack_block_float_face_row(uint32_t src, uint32_t data, uint32_t tile, uint32_t exponent) {
    constexpr uint32_t kDatum = kBits + 1, kPerWord = 32 / kDatum;
    uint32_t shared = 0;
    for (uint32_t i = 0; i < 16; ++i) {
        const uint32_t e = (l1_word(src, i / 2) >> (16 * (i % 2) + 7)) & 0xFFu;
        shared = e > shared ? e : shared;
    }
    for (uint32_t w = 0; w < 16 / kPerWord; ++w) {
        uint32_t packed = 0;
        for (uint32_t b = 0; b < kPerWord; ++b) {
            const uint32_t i = kPerWord * w + b;
            const uint32_t bits = ((l1_word(src, i / 2) >> (16 * (i % 2))) & 0xFFFFu) << 16;
            packed |= block_float_datum<kBits>(bits, shared) << (kDatum * b);
        }
        l1_set_word(data, w, packed);
    }
    l1_set_byte(tile + exponent, shared);
}

// Step 2 for a block-float cache: row `row` of APPEND page `page` (through `rows_reader`) packed into
// row `dst_row` of the cache-format tile at L1 `dst`, through the 128-byte L1 `scratch`.
template <typename Accessor>
__attribute__((noinline)) void pack_appended_row(const Accessor& rows_reader, uint32_t page, uint32_t row, uint32_t dst,
                                                 uint32_t dst_row, uint32_t scratch) {
    const uint64_t source = rows_reader.get_noc_addr(page, 0);
    for (uint32_t half = 0; half < 2; ++half) {
        read_bytes(source + (face_row_offset(row, half) & ~63u), scratch + 64 * half, 64);
    }
    wait_for_reads();
    for (uint32_t half = 0; half < 2; ++half) {
        pack_block_float_face_row<kv_datum_bits(args::kv_tile_bytes()) - 1>(scratch + 64 * half + face_row_offset(row, half) % 64,
                           dst + kv_face_row_offset(dst_row, half, args::kv_tile_bytes()), dst,
                           ((dst_row / 16) * 2 + half) * 16 + dst_row % 16);
    }
}

// One row of an append gather: tile row `row` of APPEND page `page` into row `dst_row` of the L1
// tile at `dst`.
struct AppendRow {
    uint32_t page, row, dst, dst_row;
};

// Steps 2 and 3 above for block `block` of request `p`, CB `cb` (its pages reserved, the block's
// reads landed), of K (which 0) or V (which 1), its write-backs into `stage`. `gather(reader, count, at)` copies `count` rows,
// row j described by at(j) (an AppendRow), from `reader`'s operand into L1 and returns with them in
// place; `table` is the request's page-table row (entry_at; unused for a contiguous cache).
// One out-of-line body for K and V, whose accessors are one type: K's args address V too (both
// caches DRAM interleaved in one dtype; the host checks their args match), and the APPEND operands
// are read through CONST's args (DRAM-interleaved bfloat16 tiles, like the constants; the host
// checks that too), so the gather is the constants' instantiation: Wormhole NCRISC's IRAM is 16 KiB.
template <typename Table, typename Gather>
__attribute__((noinline)) void patch_appended_rows(uint32_t cb, const Params& p, uint32_t block, Table& table, uint32_t which,
                                                   AppendStage& stage, const Gather& gather) {
    if constexpr (kAppend) {
        if (p.idle() || p.kv_positions < kAppendRows) {
            return;
        }
        const auto rows_reader = TensorAccessor(kConstArgs, operand_base(which == 0 ? kCommonAppendBase : kCommonAppendVBase),
                                                args::tile_bytes());
        const auto cache = TensorAccessor(kKArgs, operand_base(which == 0 ? kCommonKBase : kCommonVBase), args::kv_tile_bytes());
        const uint32_t region = which == 0 ? p.k.first_page() : p.v.first_page();
        const uint32_t head = p.first_q_head(kQWidthTiles);
        const uint32_t kv_head = head / kAppendGqa;
        const bool writer = head % kAppendGqa == 0;
        const uint32_t first_tile = p.block_first_tile(block), first = append_first_position(p.kv_positions, kAppendRows);
        constexpr uint32_t kv_tile_bytes = args::kv_tile_bytes();
        for (uint32_t t = 0; t < p.live_tiles_in_block(block); ++t) {
            const uint32_t tile = first_tile + t;
            const AppendSpan span = append_span(p.kv_positions, kAppendRows, tile);
            if (span.empty()) {
                continue;
            }
            const uint32_t dst = get_write_ptr(cb) + t * kDimTiles * kv_tile_bytes;
            if constexpr (kAppendBlockFloat) {
                for (uint32_t j = 0; j < (span.hi - span.lo + 1) * kDimTiles; ++j) {
                    const uint32_t position = span.lo + j / kDimTiles, d = j % kDimTiles;
                    pack_appended_row(rows_reader, append_page(position - first, p.user, kv_head, kAppendBatch,
                                                               kAppendKvHeads, kDimTiles, d),
                                      kv_head % kTilePositions, dst + d * kv_tile_bytes, position % kTilePositions,
                                      stage.scratch());
                }
            } else {
            gather(rows_reader, (span.hi - span.lo + 1) * kDimTiles, [&](uint32_t j) {
                const uint32_t position = span.lo + j / kDimTiles, d = j % kDimTiles;
                const uint32_t page = append_page(position - first, p.user, kv_head, kAppendBatch, kAppendKvHeads, kDimTiles, d);
                return AppendRow{page, kv_head % kTilePositions, dst + d * kv_tile_bytes, position % kTilePositions};
            });
            }
            if (!writer) {
                continue;
            }
            uint32_t cache_block = 0;
            const uint32_t slot = cache_slot_tile(tile, args::cache_wrap_tiles());
            if constexpr (args::cache_block_tiles() != 0) {
                const int32_t entry = table.entry_at(page_table_entry(slot, args::cache_block_tiles()));
                if (!cache_block_valid(entry, args::cache_blocks())) {
                    continue;  // read as zeros, reported by read_block; nothing to write to
                }
                cache_block = static_cast<uint32_t>(entry);
            }
            const uint32_t page = cache_tile_page(region, slot, cache_block, args::cache_block_tiles(),
                                                  args::cache_block_pages(), kDimTiles);
            for (uint32_t k = 0; k < (span.hi - span.lo + 1) * kDimTiles * 2; ++k) {  // (position, dim tile, half)
                const uint32_t d = k / 2 % kDimTiles;
                const uint32_t row = (span.lo + k / (2 * kDimTiles)) % kTilePositions;
                const uint32_t offset = append_piece(kv_face_row_offset(row, k % 2, kv_tile_bytes));
                stage.add(dst + d * kv_tile_bytes + offset, cache.get_noc_addr(page + d, offset));
                if constexpr (kAppendBlockFloat) {  // the face's 16 exponents
                    const uint32_t exponents = ((row / 16) * 2 + k % 2) * 16;
                    stage.add(dst + d * kv_tile_bytes + exponents, cache.get_noc_addr(page + d, exponents));
                }
            }
        }
    }
}

}  // namespace flashdecode
