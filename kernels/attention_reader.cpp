// Flash-decode attention, reader (data movement): gathers the group's query rows into one staged
// tile, fetches the constants each request needs, and streams the live K/V position tiles into the
// double-buffered K and V circular buffers, one block at a time.
//
// Compile-time args: positional = TensorAccessorArgs of Q, K, V, CONST, OUT, POSITIONS, PAGE_TABLE, WORK
// (chained, in that order, same list for all three kernels); named = dim_tiles, block_tiles,
// tile_bytes, q_width_tiles (tiles per row tile of Q and the output), row_tiles, values_from_keys, inbox_slots,
// positions_bytes, work_row_bytes, grid_x, and the cache layout (cache_block_tiles, cache_block_pages, cache_blocks,
// cache_wrap_tiles,
// page_table_entries; attention_protocol.hpp "Paged KV cache").
// Runtime args: none per core. Common: the operands' buffer addresses (attention_protocol.hpp
// CommonArg), then, for a split program, the NoC coordinate table of its cores.
//
// First, once: this core's work row from the WORK operand (its request count and 16 parameter-block
// words per request), kept in READER_WORK and copied (L1 to L1) into WORK for compute and WRITER_WORK
// for the writer; the POSITIONS operand's one page (an int32 per user) into POSITIONS, pushed for
// compute; the reader keeps each of its requests' kv_positions. Then per request it pushes: QSTAGE row_tiles*dim_tiles pages (the request's stage rows, attention_protocol.hpp
// "Request kinds", per Q row tile: "Q row tiles"); CONST const_pages (scaler, scale and the masks it needs); then for each block of the
// slice's window (its live tiles rounded up to whole double blocks), K and V
// block_tiles*dim_tiles pages each (K only with values_from_keys: "Values from keys"); and for a split slice, its children's subtree maxima as they
// land (MAX_INBOX, inbox_slots pages), on slices 1.. the request's max (MAX_GLOBAL, 1 page), and
// its children's partials as they land (PARTIALS, inbox_slots * (dim_tiles + 1) pages). Only live
// position tiles are read from DRAM: the pages of padding tiles are pushed unread because compute
// never unpacks them.
//
// Split-K handshake (semaphores, attention_protocol.hpp): every slice reserves its inboxes and
// raises kSemInboxReady on its children in the combine tree. Slice 0 stages Q and CONST from
// DRAM; every other slice copies its parent's Q and CONST pages over the NoC once the parent has
// raised kSemQueryReady on it, and raises the parent's kSemFetched; a parent keeps the pages until
// kSemFetched counts all its children. The writers deliver subtree maxima and then partials into
// their parent's inboxes and raise its kSemArrived + slot each time; the reader hands compute each
// slot as it lands. Between the two passes, the request's max travels down the tree the way Q
// does (kSemMaxReady / kSemMaxFetched).
// Named compile-time arg inbox_slots: ceil(log2(largest split)), 0 when nothing is split.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"
#include "api/debug/dprint.h"
#include "api/debug/kernel_profiler.hpp"
#include "attention_append.hpp"
#include "attention_dataflow.hpp"
#include "attention_protocol.hpp"
#include "attention_sparse.hpp"

using namespace flashdecode;

namespace {

// Bytes of one K/V tile, the cache's format: bfloat16, bfloat8_b or bfloat4_b.
constexpr uint32_t kKvTileBytes = args::kv_tile_bytes();
static_assert(kKvTileBytes == 2048 || kKvTileBytes == 1088 || kKvTileBytes == 576, "K/V: bfloat16, bfloat8_b or bfloat4_b tiles");
// Bytes of the POSITIONS operand's one page: one int32 per user (batch * 4).
constexpr uint32_t kPositionsBytes = args::positions_bytes();
// The KV cache's layout (attention_protocol.hpp "Paged KV cache"): all 0 for a contiguous cache.
constexpr uint32_t kCacheBlockTiles = args::cache_block_tiles();
constexpr uint32_t kCacheBlockPages = args::cache_block_pages();
constexpr uint32_t kCacheBlocks = args::cache_blocks();
constexpr uint32_t kPageTableEntries = args::page_table_entries();
constexpr uint32_t kCacheWrapTiles = args::cache_wrap_tiles();
constexpr bool kHalfBlocks = args::cache_half_blocks() != 0;
// Consecutive users that share one page-table row (ttnn's spec_multi_pos_tiles candidates): user
// u reads row u / users_per_table_row. 1 normally.
constexpr uint32_t kUsersPerTableRow = args::users_per_table_row();
static_assert(!kHalfBlocks || kKvTileBytes == 2048, "blocks of 16 positions: bfloat16 caches only");
constexpr bool kPaged = kCacheBlockTiles != 0;
// The sliding window and the attention chunk in positions, 0 for none (attention_protocol.hpp
// "Sliding window", "Chunked-local attention"): a chunk's start is a window's, through the same
// CONST pages.
constexpr uint32_t kWindow = args::window();
constexpr uint32_t kChunk = args::attention_chunk();
constexpr bool kWindowed = kWindow != 0 || kChunk != 0;
// Attention sinks (attention_protocol.hpp "Attention sink"): 1 when the call has them.
constexpr bool kSink = args::sink() != 0;
constexpr uint32_t kConstPages = const_pages(kWindowed, kSink, kRowTiles, kRowTileUsers);
// Attention mask (attention_protocol.hpp "Attention mask"): users of the mask (1: broadcast over
// the batch), 0 without one; its TensorAccessorArgs follow PAGE_TABLE's.
constexpr uint32_t kMaskUsers = args::mask_users();
// Bytes of one work row (a WORK page), and the grid's width in cores (work_slot).
constexpr uint32_t kWorkRowBytes = args::work_row_bytes();
constexpr uint32_t kGridX = args::grid_x();
constexpr uint32_t kBlockPages = kBlockTiles * kDimTiles;
constexpr uint32_t kQueryChunkBytes = 64;
constexpr uint32_t kInboxSlots = args::inbox_slots();
constexpr uint32_t kInboxPages = kInboxSlots * partial_pages(kDimTiles);
// V is K (attention_protocol.hpp "Values from keys"): each block is read once, into CB K only.
constexpr bool kValuesFromKeys = args::values_from_keys() != 0;
static_assert(!kSparse || (kKvTileBytes != 576 && kCacheWrapTiles == 0 && !kWindowed && kMaskUsers == 0 && !kRowTileUsers),
              "sparse decode: a bfloat16 or bfloat8_b cache, no circular cache, window, chunk, attention mask or row-tile users");

// Reads this core's work row into a reserved page of `cb` (the caller pushes it or keeps it) and
// returns the page's L1 address.
inline uint32_t read_work_row(uint32_t cb) {
    cb_reserve_back(cb, 1);
    const uint32_t page = get_write_ptr(cb);
    const auto work = TensorAccessor(kWorkArgs, operand_base(kCommonWorkBase), kWorkRowBytes);
    noc_async_read_page(work_slot(get_absolute_logical_x(), get_absolute_logical_y(), kGridX), work, page);
    wait_for_reads();
    return page;
}

// A tile row is two 16-element face rows: faces 0/1 hold rows 0..15, faces 2/3 rows 16..31.

// One tile row to copy: row `row` of page `page` of an interleaved operand, into row `dst_row` of
// the L1 tile at `dst`.
struct RowCopy {
    uint32_t page;
    uint32_t row;
    uint32_t dst;
    uint32_t dst_row;
};

// Tile rows per landing round: each row comes as two 64-byte chunks into the one CB Q page.
constexpr uint32_t kLandingRows = kTileBytes / (2 * kQueryChunkBytes);

// Row j of a gather, resolved: the NoC address of its source page (offset 0), its row there, and
// where it goes (row `dst_row` of the L1 tile at `dst`).
struct RowChunk {
    uint64_t page;
    uint32_t row;
    uint32_t dst;
    uint32_t dst_row;
};
using RowAt = RowChunk (*)(const void* gather, uint32_t j);

// Copies `count` tile rows, row j described by `at(gather, j)`. Only the rows are fetched: each
// 32-byte face row comes in the 64-byte DRAM-aligned chunk around it (64 B is Blackhole's DRAM
// read alignment and a multiple of Wormhole's 32), lands in CB Q, and is copied into place over
// the core's own NoC, so source and destination alignment always match. One body for every gather
// (Q, masks, sinks, attention masks; out of line): Wormhole NCRISC's IRAM is 16 KiB.
__attribute__((noinline)) void gather_row_chunks(uint32_t count, RowAt at, const void* gather) {
    cb_reserve_back(kCbQ, 1);
    const uint32_t landing = get_write_ptr(kCbQ);
    for (uint32_t first = 0; first < count; first += kLandingRows) {
        const uint32_t n = count - first < kLandingRows ? count - first : kLandingRows;
        for (uint32_t j = 0; j < n; ++j) {
            const RowChunk c = at(gather, first + j);
            for (uint32_t half = 0; half < 2; ++half) {
                const uint32_t offset = face_row_offset(c.row, half);
                const uint32_t slot = landing + (j * 2 + half) * kQueryChunkBytes;
                read_bytes(c.page + (offset & ~(kQueryChunkBytes - 1)), slot, kQueryChunkBytes);
            }
        }
        wait_for_reads();
        for (uint32_t j = 0; j < n; ++j) {
            const RowChunk c = at(gather, first + j);
            for (uint32_t half = 0; half < 2; ++half) {
                const uint32_t offset = face_row_offset(c.row, half);
                const uint32_t src = landing + (j * 2 + half) * kQueryChunkBytes + offset % kQueryChunkBytes;
                read_bytes(get_noc_addr(src), c.dst + face_row_offset(c.dst_row, half), kFaceRowBytes);
            }
        }
        wait_for_reads();
    }
}

// Copies `count` tile rows, copy j described by `copy_at(j)` (a RowCopy), from `reader`'s operand
// (gather_row_chunks).
template <typename Accessor, typename CopyAt>
void gather_rows(const Accessor& reader, uint32_t count, const CopyAt& copy_at) {
    struct Gather {
        const Accessor& reader;
        const CopyAt& copy_at;
    };
    const Gather gather{reader, copy_at};
    gather_row_chunks(count, [](const void* context, uint32_t j) {
        const Gather& self = *static_cast<const Gather*>(context);
        const RowCopy c = self.copy_at(j);
        return RowChunk{self.reader.get_noc_addr(c.page, 0), c.row, c.dst, c.dst_row};
    }, &gather);
}

// QSTAGE stage row s, dim tile d = Q row query_row_of(s) of Q head (first head + stage_head(s)),
// dim tile d (attention_protocol.hpp "Request kinds"), into the reserved QSTAGE pages at `stage`;
// row tile r (attention_protocol.hpp "Q row tiles") into pages r * dim_tiles.., from row_tile(r).
// True when stage rows 0..31 of `tile` are rows 0..31 of the same Q tiles (32 heads of one user in
// the heads layout, ttnn's decode Q; a 32-row chunk from row 0): those are read as whole tiles, as a
// row gather reads each 32-byte face row in its 64-byte chunk (twice the bytes).
bool query_is_whole_tiles(const Params& tile) {
    if (tile.stage_rows() != kTilePositions) {
        return false;
    }
    for (uint32_t s = 0; s < kTilePositions; ++s) {
        if (tile.query_row_of(s) != s || tile.query_page(s, 0, kQWidthTiles) != tile.query_page(0, 0, kQWidthTiles)) {
            return false;
        }
    }
    return true;
}

template <typename Accessor>
void gather_query(const Params& p, const Accessor& q_reader, uint32_t stage) {
    DeviceZoneScopedN("fd-reader-query");
    for (uint32_t r = 0; r < kRowTiles; ++r) {
        const Params tile = p.row_tile(r);
        const uint32_t pages = stage + r * kDimTiles * kTileBytes;
        if (query_is_whole_tiles(tile)) {
            for (uint32_t d = 0; d < kDimTiles; ++d) {
                noc_async_read_page(tile.q.first_page() + tile.query_page(0, d, kQWidthTiles), q_reader, pages + d * kTileBytes);
            }
            continue;
        }
        gather_rows(q_reader, tile.stage_rows() * kDimTiles, [&](uint32_t j) {
            const uint32_t s = j / kDimTiles, d = j % kDimTiles;
            return RowCopy{tile.q.first_page() + tile.query_page(s, d, kQWidthTiles), tile.query_row_of(s) % kTilePositions,
                           pages + d * kTileBytes, s};
        });
    }
}

// CONST pages kConstPageWindow / kConstPageWindowNext of a windowed program: the window masks of
// the tiles this slice owns (attention_protocol.hpp "Sliding window"), built in L1 row by row --
// stage row s dead for its first window_dead(tile, stage_row(s)) columns, padding rows live.
void fill_window_masks(const Params& p, uint32_t pages) {
    if constexpr (kWindowed) {
        for (uint32_t page = kConstPageWindow; page <= kConstPageWindowNext; ++page) {
            if (!p.slice_fills_window_page(page)) {
                continue;
            }
            const uint32_t tile = p.window_page_tile(page);
            for (uint32_t s = 0; s < kTilePositions; ++s) {
                const uint32_t dead = s < p.stage_rows() ? p.window_dead(tile, p.stage_row(s)) : 0;
                for (uint32_t half = 0; half < 2; ++half) {
                    const uint32_t face_row = pages + page * kTileBytes + face_row_offset(s, half);
                    for (uint32_t pair = 0; pair < kFaceRowBytes / sizeof(uint32_t); ++pair) {
                        l1_set_word(face_row, pair, window_mask_word(dead, half, pair));
                    }
                }
            }
        }
    }
}

// CONST page kConstPageSink + r (attention sinks): stage row s of row tile r takes its Q head's
// row of the sink tiles (column 0 its logit), attention_protocol.hpp "Attention sink". Only the
// normalising slice (slice 0, or an unsplit request's core) folds the sink in, so only it fills it.
template <typename Accessor>
void gather_sinks(const Params& p, const Accessor& const_reader, uint32_t pages) {
    if (kSink && p.reducer()) {
        for (uint32_t r = 0; r < kRowTiles; ++r) {
            const Params tile = p.row_tile(r);
            const uint32_t first = tile.first_q_head(kQWidthTiles);
            gather_rows(const_reader, tile.stage_rows(), [&](uint32_t s) {
                const uint32_t head = first + tile.stage_head(s);
                return RowCopy{tile.constants.first_page() + kConstSinkTile + head / kTilePositions, head % kTilePositions,
                               pages + (kConstPageSink + r) * kTileBytes, s};
            });
        }
    }
}

// Row-tile users (attention_protocol.hpp "Row-tile users"): the kill page, filled in L1, and each
// row tile's own tail mask (CONST page row_mask_page(r)) when this slice owns that row tile's
// partial last live tile. Reads the row tiles' POSITIONS entries from the reader's own copy at
// `positions` (read_positions').
template <typename Accessor>
void fetch_row_tile_masks(const Params& p, const Accessor& const_reader, uint32_t pages, uint32_t positions) {
    if constexpr (kRowTileUsers) {
        const uint32_t kill = pages + kConstPageKill * kTileBytes;
        for (uint32_t word = 0; word < kTileBytes / sizeof(uint32_t); ++word) {
            l1_set_word(kill, word, kKillMaskWord);
        }
        for (uint32_t r = 0; r < kRowTiles; ++r) {
            const uint32_t own = p.kv_positions_at(static_cast<int32_t>(l1_word(positions, row_tile_user(p.user, r, true))));
            const uint32_t last = (own + kTilePositions - 1) / kTilePositions;
            if (own % kTilePositions != 0 && last - 1 >= p.slice_begin() && last - 1 < p.slice_end()) {
                noc_async_read_page(p.constants.first_page() + kConstTailMaskTile + own % kTilePositions, const_reader,
                                    pages + row_mask_page(kSink, kRowTiles, r) * kTileBytes);
            }
        }
    }
}

// CONST pages 2 and 3: the masks this slice needs (attention_protocol.hpp "Masks",
// slice_mask_tile): a constants tile read whole, or a per-row mask assembled from constants rows;
// the kill mask (an empty slice's) is filled in L1, not read: every empty slice of a short
// request would otherwise read the same tile from DRAM.
template <typename Accessor>
void fetch_masks(const Params& p, const Accessor& const_reader, uint32_t pages, uint32_t positions) {
    for (uint32_t page = kConstPageMask; page <= kConstPageMaskBefore; ++page) {
        const uint32_t mask = p.slice_mask_tile(page);
        const uint32_t dst = pages + page * kTileBytes;
        if (mask == kGatherMask) {
            const uint32_t tile = p.page_mask_tile(page);
            gather_rows(const_reader, p.stage_rows(), [&](uint32_t s) {
                const uint32_t width = p.row_width(tile, p.stage_row(s));
                return RowCopy{p.constants.first_page() + mask_row_tile(width), mask_row_row(width), dst, s};
            });
        } else if (mask == kConstTailMaskTile) {
            for (uint32_t word = 0; word < kTileBytes / sizeof(uint32_t); ++word) {
                l1_set_word(dst, word, kKillMaskWord);
            }
        } else if (mask != kNoMask) {
            noc_async_read_page(p.constants.first_page() + mask, const_reader, dst);
        }
    }
    fill_window_masks(p, pages);
    gather_sinks(p, const_reader, pages);
    fetch_row_tile_masks(p, const_reader, pages, positions);
}

// CONST pages 0 and 1 (scaler, scale) into the reserved pages at `pages`: only their distinct rows
// come from DRAM (constants.py: the scaler is 1.0 in rows 0 and 16 and 0 elsewhere; the scale tile
// holds one value), the rest is made in L1 -- 384 bytes a request, not two 2 KiB tiles, which a
// short sliding window or a chunk's first tiles would otherwise pay on every request.
template <typename Accessor>
void fetch_constants(const Params& p, const Accessor& const_reader, uint32_t pages) {
    const uint32_t scaler = pages + kConstPageScaler * kTileBytes, scale = pages + kConstPageScale * kTileBytes;
    for (uint32_t word = 0; word < kTileBytes / sizeof(uint32_t); ++word) {
        l1_set_word(scaler, word, 0);
    }
    const uint32_t first = p.constants.first_page();
    gather_rows(const_reader, 3, [&](uint32_t j) {  // returns with the rows in place
        return j < 2 ? RowCopy{first + kConstScalerTile, 16 * j, scaler, 16 * j} : RowCopy{first + kConstScaleTile, 0, scale, 0};
    });
    for (uint32_t row = 1; row < kTilePositions; ++row) {
        for (uint32_t half = 0; half < 2; ++half) {
            for (uint32_t word = 0; word < kFaceRowBytes / sizeof(uint32_t); ++word) {
                l1_set_word(scale + face_row_offset(row, half), word, l1_word(scale + face_row_offset(0, half), word));
            }
        }
    }
}

// A paged request's page-table row (its user's), one chunk at a time in the PAGE_TABLE CB page
// at `page` (reserved once by this kernel, never pushed: no other kernel reads it).
class PageTableRow {
public:
    PageTableRow(uint32_t user, uint32_t page) : user_(user), page_(page) {}

    // Page-table entry `entry` of the row, its chunk loaded first when it is not the one in L1
    // (a long row is never read whole; a slice reads only the chunks its tiles need).
    __attribute__((noinline)) int32_t entry_at(uint32_t entry) {
        if (entry - first_ >= count_) {
            first_ = page_table_chunk_first(entry);
            count_ = page_table_chunk_entries(first_, kPageTableEntries);
            const auto reader = TensorAccessor(kPageTableArgs, operand_base(kCommonPageTableBase),
                                               kPageTableEntries * sizeof(uint32_t));
            read_bytes(reader.get_noc_addr(user_, first_ * sizeof(uint32_t)), page_, count_ * sizeof(uint32_t));
            wait_for_reads();
        }
        return static_cast<int32_t>(l1_word(page_, entry - first_));
    }

    // Reports a bad entry once per row (a device-side table the host never saw).
    void report(uint32_t index, int32_t entry) {
        if (!reported_) {
            DPRINT("ERROR ttnn_flashdecode: page table [{}][{}] = {} is not a block of the cache ({} blocks); "
                   "its K/V tiles read as zeros\n", user_, index, entry, kCacheBlocks);
            reported_ = true;
        }
    }

private:
    uint32_t user_, page_;
    uint32_t first_ = 0, count_ = 0;  // the chunk in L1: entries [first_, first_ + count_)
    bool reported_ = false;
};

// Zeroes `pages` K/V pages at L1 address `addr` (a tile whose page-table entry is bad: never read).
void zero_pages(uint32_t addr, uint32_t pages) {
    for (uint32_t word = 0; word < pages * kKvTileBytes / sizeof(uint32_t); ++word) {
        l1_set_word(addr, word, 0);
    }
}

// Position tile `slot` of a cache whose blocks hold 16 positions (ttnn's paged block_size 16: a
// block is one tile per dim tile, rows 16..31 padding): rows 0-15 are the top half (faces 0 and 1,
// the tile's first half) of entry 2*slot's block, rows 16-31 of entry 2*slot+1's. bfloat16 only,
// so each half is one contiguous read (attention_protocol.hpp "Paged KV cache").
template <typename Accessor>
void read_half_blocks(const Operand& region, const Accessor& reader, uint32_t slot, uint32_t dst, PageTableRow& table) {
    for (uint32_t half = 0; half < 2; ++half) {
        const uint32_t index = half_block_entry(slot, half);
        const int32_t entry = table.entry_at(index);
        if (!cache_block_valid(entry, kCacheBlocks)) {  // its rows stay as they are: zero them below
            table.report(index, entry);
            kv_read_barrier();  // the other half's read must land before the tiles are zeroed
            zero_pages(dst, kDimTiles);
            return;
        }
        const uint32_t first = static_cast<uint32_t>(entry) * kCacheBlockPages + region.first_page();
        for (uint32_t d = 0; d < kDimTiles; ++d) {
            const uint8_t noc = kv_read_noc(first + d);
            noc_async_read(reader.get_noc_addr(first + d, 0, noc), dst + d * kKvTileBytes + half * kKvTileBytes / 2,
                           kKvTileBytes / 2, noc);
        }
    }
}

// One K or V block: the live tiles of block `block` of this slice, position-major then dim (cache
// tile order), each position tile from its cache block (attention_protocol.hpp cache_tile_page).
// Sparse decode: the cache row of `position` (dim tile 0's page, its row), contiguous or through
// the page table (a bad entry: not valid, its row zeroed).
CacheRow sparse_cache_row(const Operand& region, uint32_t position, PageTableRow& table) {
    if constexpr (!kPaged) {
        return CacheRow{cache_tile_page(region.first_page(), position / kTilePositions, 0, 0, 0, kDimTiles),
                        position % kTilePositions, true};
    }
    // (at least 1: this line compiles in a contiguous program too, never running there)
    constexpr uint32_t block_positions = kHalfBlocks ? kTilePositions / 2 : (kPaged ? kCacheBlockTiles : 1) * kTilePositions;
    const uint32_t index = position / block_positions, within = position % block_positions;
    const int32_t entry = table.entry_at(index);
    if (!cache_block_valid(entry, kCacheBlocks)) {
        table.report(index, entry);
        return CacheRow{0, 0, false};
    }
    return CacheRow{static_cast<uint32_t>(entry) * kCacheBlockPages + region.first_page() + within / kTilePositions * kDimTiles,
                    within % kTilePositions, true};
}

// Sparse decode: block `block`'s live virtual tiles, gathered row by row (attention_sparse.hpp).
template <typename Accessor>
void read_sparse_block(uint32_t pages, const Params& p, const Operand& region, const Accessor& reader, uint32_t block,
                       PageTableRow& table) {
    const uint32_t live = p.live_tiles_in_block(block);
    for (uint32_t t = 0; t < live; ++t) {
        gather_sparse_tile(SparseList(), p.kv_positions, p.block_first_tile(block) + t, reader,
                           pages + t * kDimTiles * kKvTileBytes,
                           [&](uint32_t position) { return sparse_cache_row(region, position, table); });
    }
}

template <typename Accessor>
void read_block(uint32_t cb, const Params& p, const Operand& region, const Accessor& reader, uint32_t block,
                PageTableRow& table) {
    const uint32_t pages = get_write_ptr(cb);
    if constexpr (kSparse) {
        return read_sparse_block(pages, p, region, reader, block, table);
    }
    for (uint32_t t = 0; t < p.live_tiles_in_block(block); ++t) {
        const uint32_t tile = p.block_first_tile(block) + t;
        const uint32_t dst = pages + t * kDimTiles * kKvTileBytes;
        const uint32_t slot = cache_slot_tile(tile, kCacheWrapTiles);
        if constexpr (kHalfBlocks) {
            read_half_blocks(region, reader, slot, dst, table);
            continue;
        }
        uint32_t cache_block = 0;
        if constexpr (kPaged) {
            const uint32_t index = page_table_entry(slot, kCacheBlockTiles);
            const int32_t entry = table.entry_at(index);
            if (!cache_block_valid(entry, kCacheBlocks)) {
                table.report(index, entry);
                zero_pages(dst, kDimTiles);
                continue;
            }
            cache_block = static_cast<uint32_t>(entry);
        }
        const uint32_t first = cache_tile_page(region.first_page(), slot, cache_block, kCacheBlockTiles,
                                               kCacheBlockPages, kDimTiles);
        for (uint32_t d = 0; d < kDimTiles; ++d) {
            noc_async_read_page(first + d, reader, dst + d * kKvTileBytes, 0, kv_read_noc(first + d));
        }
    }
}

// Zeroes rows [from, to) of window tile `window_tile` in every dim tile, when this block of the
// slice holds that tile.
void zero_rows(uint32_t cb, const Params& p, uint32_t block, uint32_t window_tile, uint32_t from, uint32_t to) {
    const uint32_t first = p.block_first_tile(block);
    if (window_tile < first || window_tile >= first + p.live_tiles_in_block(block)) {
        return;
    }
    const uint32_t tile = get_write_ptr(cb) + (window_tile - first) * kDimTiles * kKvTileBytes;
    for (uint32_t d = 0; d < kDimTiles; ++d) {
        for (uint32_t row = from; row < to; ++row) {
            for (uint32_t half = 0; half < 2; ++half) {
                const uint32_t face_row = tile + d * kKvTileBytes + kv_face_row_offset(row, half, kKvTileBytes);
                for (uint32_t word = 0; word < kv_face_row_bytes(kKvTileBytes) / sizeof(uint32_t); ++word) {
                    l1_set_word(face_row, word, 0);
                }
            }
        }
    }
}

// Cache slots past the request's last position in its last live tile hold whatever the cache
// holds (a recycled page: NaN, Inf). Masking does not cancel them (NaN + MASK is NaN, and P = 0
// times V = NaN is NaN), so their rows are zeroed in L1 (after the read barrier, before the push)
// in every dim tile of that position tile, K and V alike (a block-float row's data; its exponent
// then scales zeros).
void zero_stale_rows(uint32_t cb, const Params& p, uint32_t block) {
    const uint32_t tail = p.tail_width();
    if (tail != 0) {
        zero_rows(cb, p, block, p.live_tiles() - 1, tail, kTilePositions);
    }
}

// A sliding window's first tile: the slots before the first row's window start are dead for every
// row and may hold anything (a recycled page) -- zeroed like the slots past the position.
void zero_rows_before_window(uint32_t cb, const Params& p, uint32_t block) {
    const uint32_t stale = p.window_stale_rows();
    if (stale != 0) {
        zero_rows(cb, p, block, p.first_tile(), 0, stale);
    }
}


// Non-causal attention mask, once per K block (attention_protocol.hpp "Attention mask"): stage
// row s of the block's live tile t takes its Q head's mask row from the mask operand, clamped
// (clamp_mask_word), into MASK page t; a padding block gets none (compute skips it).
void read_mask_block(const Params& p, uint32_t block, uint32_t base) {
    if constexpr (kMaskUsers != 0) {
        const uint32_t live = p.live_tiles_in_block(block);
        if (live == 0) {
            return;
        }
        const auto mask_reader = TensorAccessor(kMaskArgs, base, kTileBytes);
        cb_reserve_back(kCbMask, kBlockTiles);
        const uint32_t pages = get_write_ptr(kCbMask);
        const uint32_t first = p.block_first_tile(block), rows = p.stage_rows();
        gather_rows(mask_reader, live * rows, [&](uint32_t j) {
            const uint32_t t = j / rows, s = j % rows;
            return RowCopy{p.attn_mask_page(first + t, s, kMaskUsers, kQWidthTiles), p.attn_mask_row(s, kQWidthTiles),
                           pages + t * kTileBytes, s};
        });
        for (uint32_t t = 0; t < live; ++t) {
            for (uint32_t s = 0; s < rows; ++s) {
                for (uint32_t half = 0; half < 2; ++half) {
                    const uint32_t face_row = pages + t * kTileBytes + face_row_offset(s, half);
                    for (uint32_t word = 0; word < kFaceRowBytes / sizeof(uint32_t); ++word) {
                        l1_set_word(face_row, word, clamp_mask_word(l1_word(face_row, word)));
                    }
                }
            }
        }
        cb_push_back(kCbMask, kBlockTiles);
    }
}

template <typename KAccessor, typename VAccessor>
void stream_kv(const Params& p, const KAccessor& k_reader, const VAccessor& v_reader, uint32_t table_page) {
    DeviceZoneScopedN("fd-reader-kv");
    PageTableRow table(p.user / kUsersPerTableRow, table_page);
    // K before V: compute starts on a block's scores and softmax while its V is still arriving.
    const uint32_t mask = operand_base(kCommonMaskBase);
    // The fused cache append (attention_append.hpp): the new rows into the block's pages, then to DRAM.
    const auto gather_append = [](const auto& rows_reader, uint32_t count, const auto& at) {
        gather_rows(rows_reader, count, [&](uint32_t j) {
            const AppendRow a = at(j);
            return RowCopy{a.page, a.row, a.dst, a.dst_row};
        });
    };
    AppendStage stage;
    for (uint32_t block = 0; block < p.blocks(); ++block) {
        read_mask_block(p, block, mask);
        cb_reserve_back(kCbK, kBlockPages);
        read_block(kCbK, p, p.k, k_reader, block, table);
        kv_read_barrier();
        if constexpr (kAppend) {
            patch_appended_rows(kCbK, p, block, table, 0, stage, gather_append);
        }
        zero_stale_rows(kCbK, p, block);
        zero_rows_before_window(kCbK, p, block);
        cb_push_back(kCbK, kBlockPages);
        if constexpr (kValuesFromKeys) {
            continue;  // V is this K block (compute reads it from CB K)
        }
        cb_reserve_back(kCbV, kBlockPages);
        read_block(kCbV, p, p.v, v_reader, block, table);
        kv_read_barrier();
        if constexpr (kAppend) {
            patch_appended_rows(kCbV, p, block, table, 1, stage, gather_append);
        }
        zero_stale_rows(kCbV, p, block);
        zero_rows_before_window(kCbV, p, block);
        cb_push_back(kCbV, kBlockPages);
    }
    stage.push();  // the request's write-backs, to the writer (attention_append.hpp)
}

// A combine round's inboxes, whole (every core pushes and pops them in full cycles, so their CB
// pointers sit at the CB's start whenever a child computes a slot address), then tells this slice's
// children in the combine tree they may send (kSemInboxReady counts the rounds).
void open_inboxes(const Params& p) {
    cb_reserve_back(kCbMaxInbox, kInboxSlots);
    cb_reserve_back(kCbPartials, kInboxPages);
    for (uint32_t level = 0; level < p.tree_children(); ++level) {
        signal_core(p.split_first_core + p.tree_child(level), kSemInboxReady);
    }
}

// Raises `ready` on this slice's children in the combine tree and waits until `fetched` counts
// them all: they have copied what this slice staged for them.
void share_with_children(const Params& p, Semaphore ready, Semaphore fetched) {
    for (uint32_t level = 0; level < p.tree_children(); ++level) {
        signal_core(p.split_first_core + p.tree_child(level), ready);
    }
    noc_semaphore_wait_min(semaphore(fetched), p.tree_children());
    noc_semaphore_set(semaphore(fetched), 0);
    noc_async_atomic_barrier();
}

// Hands compute each child's inbox slot (`slot_pages` pages of `cb`) as soon as it lands, in slot
// order, then the unused slots, so the inbox always completes a whole cycle. The child's writer
// raises kSemArrived + slot to `arrivals` (1: its max, 2: its partial; attention_protocol.hpp).
void hand_over_inbox(const Params& p, uint32_t cb, uint32_t slot_pages, uint32_t arrivals) {
    for (uint32_t slot = 0; slot < p.tree_children(); ++slot) {
        const auto arrived = semaphore(static_cast<Semaphore>(kSemArrived + slot));
        noc_semaphore_wait_min(arrived, arrivals);
        if (arrivals == 2) {
            noc_semaphore_set(arrived, 0);  // the child's last message for this item
        }
        cb_push_back(cb, slot_pages);
    }
    cb_push_back(cb, (kInboxSlots - p.tree_children()) * slot_pages);
}

// Slices 1..: copies the request's max from the parent in the combine tree (slice 0 keeps it in
// MAX_OUT, the others in MAX_GLOBAL) once the parent has raised kSemMaxReady, tells the parent
// (kSemMaxFetched), hands it on to this slice's own children the same way, and only then to
// compute: the copies spread down the tree instead of queueing at slice 0's port. Both CBs have
// one page, so on every core the page sits at the CB's start (where this core's reserved
// MAX_GLOBAL page is; this kernel never moves its MAX_OUT pointers).
void fetch_request_max(const Params& p, uint32_t combine_rounds) {
    DeviceZoneScopedN("fd-reader-max");
    const uint32_t parent = p.split_first_core + p.tree_parent();
    cb_reserve_back(kCbMaxGlobal, 1);
    const uint32_t page = get_write_ptr(kCbMaxGlobal);
    const uint32_t source = p.tree_parent() == 0 ? get_write_ptr(kCbMaxOut) : page;
    noc_semaphore_wait_min(semaphore(kSemMaxReady), combine_rounds);
    read_bytes(core_noc_addr(parent, source), page, get_tile_size(kCbMaxGlobal));
    wait_for_reads();
    signal_core(parent, kSemMaxFetched);
    share_with_children(p, kSemMaxReady, kSemMaxFetched);
    cb_push_back(kCbMaxGlobal, 1);
}

// Sparse decode: each request's live count n from its list (its user's, or its (user, KV head)'s:
// sparse_list_page; cur_pos from the POSITIONS page at `page`, every request's taken before any
// word is rewritten), into kv_positions[r], and n - 1 into POSITIONS word sparse_count_word(r) for
// compute (attention_protocol.hpp "Sparse decode"). Returns true, having read nothing, on slices
// 1.. of a split request (a core's only request): they copy the compacted list from their parent
// in the combine tree, as Q (sparse_list_from_parent), and hand the POSITIONS page on then.
bool sparse_virtual_positions(uint32_t row, uint32_t requests, uint32_t page, uint32_t* kv_positions) {
    const SparseList list;
    for (uint32_t r = 0; r < requests; ++r) {
        list.set_last_of(r, static_cast<int32_t>(kv_positions[r]) - 1);  // cur_pos as kv_positions_at clamped it
    }
    for (uint32_t r = 0; r < requests; ++r) {
        const Params p = read_request([row](uint32_t i) { return l1_word(row, i); }, r);
        if (p.split() && !p.reducer()) {
            return true;
        }
        kv_positions[r] = list.load(sparse_list_page(p), list.last_of(r));
        l1_set_word(page, sparse_count_word(r), kv_positions[r] - 1);
    }
    return false;
}

// Sparse decode, slices 1.. of a split request, once the parent has raised kSemQueryReady: its
// compacted list and state (CB SPARSE, at the same address on every core) copied from the parent's
// L1, so a request reads its list from DRAM once; then the POSITIONS page (held back by
// read_positions) rewritten (request r's word) and handed to compute. Returns the request's
// virtual kv_positions.
uint32_t sparse_list_from_parent(uint32_t r, uint32_t parent) {
    const uint32_t page = get_write_ptr(kCbSparse);
    read_bytes(core_noc_addr(parent, page), page, kSparsePageBytes);
    wait_for_reads();
    const uint32_t count = l1_word(page, SparseList::kStateCount);
    l1_set_word(get_write_ptr(kCbPositions), sparse_count_word(r), count - 1);
    cb_push_back(kCbPositions, 1);
    return count;
}

// Reads the POSITIONS page, derives kv_positions of each of this core's requests into
// `kv_positions` (attention_protocol.hpp kv_positions_at), then hands the page to compute. Returns
// the reader's own copy of it (row-tile users: after the work row in READER_WORK, whose page the
// host sizes for both; each row tile's own mask needs its entry later), else 0.
uint32_t read_positions(uint32_t row, uint32_t requests, uint32_t* kv_positions) {
    cb_reserve_back(kCbPositions, 1);
    const uint32_t page = get_write_ptr(kCbPositions);
    const auto positions_reader = TensorAccessor(kPositionsArgs, operand_base(kCommonPositionsBase), kPositionsBytes);
    noc_async_read_page(0, positions_reader, page);
    wait_for_reads();
    for (uint32_t r = 0; r < requests; ++r) {
        const Params p = read_request([row](uint32_t i) { return l1_word(row, i); }, r);
        kv_positions[r] = 0;  // row-tile users: the largest of the row tiles' (attention_protocol.hpp)
        for (uint32_t t = 0; t < (kRowTileUsers ? kRowTiles : 1); ++t) {
            const uint32_t user = row_tile_user(p.user, t, kRowTileUsers);
            const int32_t position = static_cast<int32_t>(l1_word(page, user));
            const uint32_t live = p.kv_positions_at(position);
            kv_positions[r] = live > kv_positions[r] ? live : kv_positions[r];
            if (p.position_clamped(position)) {
                // A device-side value the host never saw: clamped (or idled) above, so nothing is read
                // outside the cache; reported where DPRINT reaches (the emulator's RunReport.errors).
                DPRINT("ERROR ttnn_flashdecode: POSITIONS[{}] = {} is outside the cache of {} positions; clamped to {} live\n",
                       user, position, p.capacity_tiles * kTilePositions, live);
            }
        }
    }
    bool held = false;  // sparse slices 1..: the page goes to compute once the list has come
    if constexpr (kSparse) {
        held = sparse_virtual_positions(row, requests, page, kv_positions);
    }
    uint32_t copy = 0;
    if constexpr (kRowTileUsers) {
        copy = row + kWorkRowBytes;
        for (uint32_t word = 0; word < kPositionsBytes / sizeof(uint32_t); ++word) {
            l1_set_word(copy, word, l1_word(page, word));
        }
    }
    if (!held) {
        cb_push_back(kCbPositions, 1);
    }
    return copy;
}

// Copies of this core's work row (at `row`, the reader's own) into WORK for compute and WRITER_WORK
// for the writer, pushed: L1-to-L1 copies, not more DRAM reads.
void hand_over_work_row(uint32_t row) {
    cb_reserve_back(kCbWork, 1);
    cb_reserve_back(kCbWriterWork, 1);
    read_bytes(get_noc_addr(row), get_write_ptr(kCbWork), kWorkRowBytes);
    read_bytes(get_noc_addr(row), get_write_ptr(kCbWriterWork), kWorkRowBytes);
    wait_for_reads();
    cb_push_back(kCbWork, 1);
    cb_push_back(kCbWriterWork, 1);
}

}  // namespace

void kernel_main() {
    // Every core has the same CB layout, so slices 1.. read their parent's QSTAGE / CONST pages at
    // the addresses their own CBs start at (a core with a split slice serves only that slice: its
    // pointers are there).
    const uint32_t stage_base = get_write_ptr(kCbQStage);
    const uint32_t const_base = get_write_ptr(kCbConst);
    uint32_t split_items = 0;     // split slices served so far: kSemQueryReady counts them
    uint32_t combine_rounds = 0;  // combine rounds (a split slice's row tiles) so far: kSemMaxReady counts them

    // This core's work row: read from DRAM once, into the reader's own copy, then copied in L1 to
    // compute (WORK) and to the writer (WRITER_WORK).
    const uint32_t row = read_work_row(kCbReaderWork);
    hand_over_work_row(row);
    const uint32_t requests = served_requests(l1_word(row, kRowRequestCount));
    uint32_t kv_positions[kMaxRequestsPerCore];
    if constexpr (kSparse) {
        SparseList::reserve();
    }
    const uint32_t positions_page = read_positions(row, requests, kv_positions);
    const auto q_reader = TensorAccessor(kQArgs, operand_base(kCommonQBase), kTileBytes);
    const auto k_reader = TensorAccessor(kKArgs, operand_base(kCommonKBase), kKvTileBytes);
    const auto v_reader = TensorAccessor(kVArgs, operand_base(kCommonVBase), kKvTileBytes);
    const auto const_reader = TensorAccessor(kConstArgs, operand_base(kCommonConstBase), kTileBytes);
    uint32_t table_page = 0;
    if constexpr (kPaged) {
        cb_reserve_back(kCbPageTable, 1);
        table_page = get_write_ptr(kCbPageTable);
    }
    for (uint32_t r = 0; r < requests; ++r) {
        Params p = read_request([row](uint32_t i) { return l1_word(row, i); }, r);
        if (!p.valid_layout(kDimTiles, kBlockTiles, kRowTiles)) {
            continue;  // refused (the host refuses it first); all three kernels skip it alike
        }
        p.kv_positions = kv_positions[r];
        p.window = kWindow;
        p.attention_chunk = kChunk;
        split_items += p.split() ? 1 : 0;

        if (p.split()) {
            open_inboxes(p);  // combine round 0 (row tile 0), before the K/V: children may finish first
        }
        cb_reserve_back(kCbQStage, kRowTiles * kDimTiles);
        cb_reserve_back(kCbConst, kConstPages);
        const uint32_t stage = get_write_ptr(kCbQStage);
        const uint32_t pages = get_write_ptr(kCbConst);
        if (!p.split() || p.reducer()) {
            gather_query(p, q_reader, stage);
            fetch_constants(p, const_reader, pages);
            fetch_masks(p, const_reader, pages, positions_page);
            wait_for_reads();
        } else {
            // Q and CONST pages 0-1 from this slice's parent in the combine tree (slice 0 read them
            // from DRAM, the others from their own parent): a split request reads them from DRAM
            // once, and the copies spread down the tree instead of queueing at slice 0's port.
            const uint32_t parent = p.split_first_core + p.tree_parent();
            noc_semaphore_wait_min(semaphore(kSemQueryReady), split_items);
            if constexpr (kSparse) {
                p.kv_positions = sparse_list_from_parent(r, parent);
            }
            read_bytes(core_noc_addr(parent, stage_base), stage, kRowTiles * kDimTiles * kTileBytes);
            read_bytes(core_noc_addr(parent, const_base), pages, 2 * kTileBytes);
            fetch_masks(p, const_reader, pages, positions_page);
            wait_for_reads();
            signal_core(parent, kSemFetched);
        }
        if (p.split()) {
            share_with_children(p, kSemQueryReady, kSemFetched);  // the pages stay reserved until then
        }
        cb_push_back(kCbQStage, kRowTiles * kDimTiles);
        cb_push_back(kCbConst, kConstPages);

        if constexpr (kSparse) {
            SparseList().load(sparse_list_page(p), SparseList().last_of(r));  // this request's list in L1 (read again only if another replaced it)
        }
        stream_kv(p, k_reader, v_reader, table_page);

        if (p.split()) {
            // The combine, a round per Q row tile (compute's combine(); the writer keeps step).
            for (uint32_t round = 0; round < kRowTiles; ++round) {
                if (round > 0) {
                    open_inboxes(p);  // waits until compute has drained the last round's
                }
                ++combine_rounds;
                hand_over_inbox(p, kCbMaxInbox, 1, 1);  // combine pass 1: the children's subtree maxima
                if (!p.reducer()) {
                    fetch_request_max(p, combine_rounds);
                }
                hand_over_inbox(p, kCbPartials, partial_pages(kDimTiles), 2);  // pass 2: their partials
            }
        }
    }
}
