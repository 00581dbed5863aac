// The parameter block, kernel half. Host half: ttnn_flashdecode/protocol.py. The two agree word
// for word; tests/test_protocol_pair.py compiles this header with the host C++ compiler, feeds it
// words from protocol.encode() and checks every decoded field and derived count.
//
// Plain C++ with no kernel API: the reader, compute and writer kernels include it, and so does the
// host test.
//
// Word 0 (HEADS): byte 0 q_rows, byte 1 query_row, byte 2 flags, byte 3 positions (ROWS mode).
// Word 5 (SPLIT): byte 0 slice index, byte 1 slice count (0/1: not split), bytes 2-3 core-table
// index of slice 0. Slice i owns live tiles [ceil(i*T/count), ceil((i+1)*T/count)), T = live
// tiles: the slices cover them exactly once and slice 0 is never empty. Each slice pads its own
// tail to whole double blocks; the partials (O, l, m) are combined up a binary tree (tree_levels)
// whose root, slice 0, normalises.
// Live tiles and tail width are derived from KV_POSITIONS here and in protocol.py, never sent.
// A COORD word with bit 31 set marks a DRAM-interleaved operand addressed through its
// TensorAccessor: low 31 bits = first page (tile) id, BASE = buffer address. Otherwise COORD is a
// NoC coordinate (y << 16) | x and BASE an L1 byte address.
#pragma once

#include <cstdint>

namespace flashdecode {

enum Field : uint32_t {
    kWordHeads = 0,
    kWordDimTiles = 1,
    kWordKvPositions = 2,
    kWordBlockTiles = 3,
    kWordCapacityTiles = 4,
    kWordSplit = 5,
    kWordQCoord = 6,
    kWordQBase = 7,
    kWordKCoord = 8,
    kWordKBase = 9,
    kWordVCoord = 10,
    kWordVBase = 11,
    kWordConstCoord = 12,
    kWordConstBase = 13,
    kWordOutCoord = 14,
    kWordOutBase = 15,
    kWords = 16,
};

enum Flag : uint32_t { kFlagChunk = 1u, kFlagRows = 2u };

// Circular-buffer indices (DESIGN.md §4); protocol.CB mirrors them.
enum Cb : uint32_t {
    kCbQ = 0,
    kCbK = 1,
    kCbV = 2,
    kCbConst = 3,
    kCbS = 4,
    kCbScratch = 5,
    kCbMA = 6,
    kCbMB = 7,
    kCbL = 8,
    kCbLsum = 9,
    kCbC = 10,
    kCbO = 11,
    kCbPv = 12,
    kCbQStage = 13,
    kCbQs = 14,
    kCbOut = 16,
    kCbPartials = 17,  // split-K only: this core's inbox of its children's partials
    kCbOutbox = 18,    // split-K only: this core's partial, on its way to its parent's inbox
};

// Split-K semaphores (ids of the program's SemaphoreDescriptors, on every core).
enum Semaphore : uint32_t {
    kSemQueryReady = 0,  // on slices 1..: slice 0 has staged Q and CONST (counts split items)
    kSemFetched = 1,     // on slice 0: slices that have copied its Q and CONST pages
    kSemInboxReady = 2,  // on a child: its parent has reserved its inbox (counts split items)
    kSemArrived = 3,     // on a parent: children whose partial has landed in its inbox
};

// A partial result, as OUTBOX pages and as one inbox slot: O (dim_tiles pages, unnormalised),
// then L (row sums), then M (row maxima), rows in column 0.
constexpr uint32_t partial_pages(uint32_t dim_tiles) { return dim_tiles + 2; }

// The split-K combine is a binary tree over the slices. Slice i > 0 sends its partial (its own
// slice combined with its subtree) to parent i - lowbit(i), into inbox slot log2(lowbit(i));
// slice i receives from children i + 2^k for every level k below log2(lowbit(i)) (every level
// for slice 0) with i + 2^k < slices. Depth and inbox slots are ceil(log2(slices)).
constexpr uint32_t tree_levels(uint32_t slices) {
    uint32_t levels = 0;
    while ((1u << levels) < slices) {
        ++levels;
    }
    return levels;
}
constexpr uint32_t lowbit_level(uint32_t index) {
    uint32_t level = 0;
    while (((index >> level) & 1u) == 0) {
        ++level;
    }
    return level;
}

// Common runtime args of split programs: the NoC coordinate of every core of the program,
// word i = (noc_y << 16) | noc_x for core-table index i.
constexpr uint32_t core_noc_x(uint32_t word) { return word & 0xFFFFu; }
constexpr uint32_t core_noc_y(uint32_t word) { return word >> 16; }

// Constants operand tiles (DESIGN.md §2); protocol.ConstTile mirrors them.
constexpr uint32_t kConstScalerTile = 0;
constexpr uint32_t kConstScaleTile = 1;
constexpr uint32_t kConstTailMaskTile = 2;     // + t, t = 0..31; t = 0 kills a whole tile
constexpr uint32_t kConstCausalMaskTile = 34;  // + C - 1
constexpr uint32_t kConstTiles = 66;

// Pages of the CONST circular buffer per request: scaler, scale, tail mask, causal mask.
constexpr uint32_t kConstPages = 4;
constexpr uint32_t kConstPageScaler = 0;
constexpr uint32_t kConstPageScale = 1;
constexpr uint32_t kConstPageTailMask = 2;
constexpr uint32_t kConstPageCausalMask = 3;

constexpr uint32_t kTilePositions = 32;

// bfloat16 tile geometry (TT_FACTS §1): four 16x16 faces, row-major inside a face; faces 0/1 hold
// rows 0..15, faces 2/3 rows 16..31. One tile row is two 32-byte face rows (half 0 left, 1 right).
constexpr uint32_t kFaceBytes = 16 * 16 * 2;
constexpr uint32_t kFaceRowBytes = 16 * 2;
constexpr uint32_t face_row_offset(uint32_t row, uint32_t half) {
    return ((row / 16) * 2 + half) * kFaceBytes + (row % 16) * kFaceRowBytes;
}
constexpr uint32_t kInterleavedBit = 1u << 31;
constexpr uint32_t kNoMask = 0xFFFFFFFFu;

struct Operand {
    uint32_t coord;
    uint32_t base;
    constexpr bool interleaved() const { return (coord & kInterleavedBit) != 0; }
    constexpr uint32_t first_page() const { return coord & ~kInterleavedBit; }
};

// One decoded parameter block plus the counts both sides derive from it.
struct Params {
    uint32_t q_rows;
    uint32_t query_row;
    uint32_t flags;
    uint32_t positions;
    uint32_t dim_tiles;
    uint32_t kv_positions;
    uint32_t block_tiles;
    uint32_t capacity_tiles;
    uint32_t split_index;       // word 5 byte 0: this core's split-K slice
    uint32_t split_count;       // word 5 byte 1: slices (0 or 1: not split)
    uint32_t split_first_core;  // word 5 bytes 2-3: core-table index of slice 0, the reducer
    Operand q, k, v, constants, out;

    // ceil(kv_positions / 32): position tiles holding at least one live position.
    constexpr uint32_t live_tiles() const { return (kv_positions + kTilePositions - 1) / kTilePositions; }
    // Live positions in the last live tile when it is partial, else 0.
    constexpr uint32_t tail_width() const { return kv_positions % kTilePositions; }
    // Split-K slice of the live tiles: [slice_begin(), slice_end()).
    constexpr uint32_t slices() const { return split_count > 1 ? split_count : 1; }
    constexpr bool split() const { return slices() > 1; }
    constexpr bool reducer() const { return split_index == 0; }
    constexpr uint32_t slice_begin() const { return (split_index * live_tiles() + slices() - 1) / slices(); }
    constexpr uint32_t slice_end() const { return ((split_index + 1) * live_tiles() + slices() - 1) / slices(); }
    constexpr uint32_t slice_live_tiles() const { return slice_end() - slice_begin(); }
    // Combine tree (see tree_levels): this slice's children, its parent and its slot there.
    constexpr uint32_t tree_children() const {
        const uint32_t limit = split_index == 0 ? tree_levels(slices()) : lowbit_level(split_index);
        uint32_t children = 0;
        while (children < limit && split_index + (1u << children) < slices()) {
            ++children;
        }
        return children;
    }
    constexpr uint32_t tree_child(uint32_t level) const { return split_index + (1u << level); }
    constexpr uint32_t tree_slot() const { return lowbit_level(split_index); }
    constexpr uint32_t tree_parent() const { return split_index - (1u << tree_slot()); }
    // Tiles rounded up to whole double blocks: the request's read window (padded_tiles) and this
    // slice's CB push/pop count (slice_padded_tiles).
    constexpr uint32_t round_to_double_blocks(uint32_t tiles) const {
        const uint32_t double_block = 2 * block_tiles;
        return (tiles + double_block - 1) / double_block * double_block;
    }
    constexpr uint32_t padded_tiles() const { return round_to_double_blocks(live_tiles()); }
    constexpr uint32_t slice_padded_tiles() const { return round_to_double_blocks(slice_live_tiles()); }
    constexpr uint32_t blocks() const { return slice_padded_tiles() / block_tiles; }
    // First window tile of block `block` of this slice.
    constexpr uint32_t block_first_tile(uint32_t block) const { return slice_begin() + block * block_tiles; }
    // Live tiles inside block `block` of this slice (0 for a padding block).
    constexpr uint32_t live_tiles_in_block(uint32_t block) const {
        const uint32_t first = block * block_tiles;
        const uint32_t live = slice_live_tiles();
        if (first >= live) {
            return 0;
        }
        return live - first < block_tiles ? live - first : block_tiles;
    }
    // The constants tile CONST page 2 must hold for this slice: the tail mask when the slice owns a
    // partial last tile, the kill mask (tail mask 0) when the slice is empty (its partial has
    // M = MASK_VALUE, so the combine weighs it by exp(-huge) = 0), else kNoMask (not fetched).
    constexpr uint32_t slice_mask_tile() const {
        if (slice_live_tiles() == 0) {
            return kConstTailMaskTile;
        }
        return slice_end() == live_tiles() ? mask_tile(live_tiles() - 1) : kNoMask;
    }
    // Constants tile masking window tile `tile`, or kNoMask for a fully live tile.
    constexpr uint32_t mask_tile(uint32_t tile) const {
        const uint32_t live = live_tiles();
        if (tile + 1 < live) {
            return kNoMask;
        }
        if (tile + 1 == live) {
            return tail_width() == 0 ? kNoMask : kConstTailMaskTile + tail_width();
        }
        return kConstTailMaskTile;
    }
    // The checks every kernel repeats before touching a request; the host refuses the same cases.
    constexpr bool valid_for(uint32_t residency_dim_tiles, uint32_t residency_block_tiles) const {
        return q_rows >= 1 && q_rows <= 32 && query_row <= 31 && dim_tiles == residency_dim_tiles &&
               block_tiles == residency_block_tiles && block_tiles != 0 && kv_positions != 0 &&
               padded_tiles() <= capacity_tiles && split_index < slices();
    }
};

constexpr Params decode_words(const uint32_t* w) {
    Params p{};
    p.q_rows = w[kWordHeads] & 0xFFu;
    p.query_row = (w[kWordHeads] >> 8) & 0xFFu;
    p.flags = (w[kWordHeads] >> 16) & 0xFFu;
    p.positions = (w[kWordHeads] >> 24) & 0xFFu;
    p.dim_tiles = w[kWordDimTiles];
    p.kv_positions = w[kWordKvPositions];
    p.block_tiles = w[kWordBlockTiles];
    p.capacity_tiles = w[kWordCapacityTiles];
    p.split_index = w[kWordSplit] & 0xFFu;
    p.split_count = (w[kWordSplit] >> 8) & 0xFFu;
    p.split_first_core = w[kWordSplit] >> 16;
    p.q = Operand{w[kWordQCoord], w[kWordQBase]};
    p.k = Operand{w[kWordKCoord], w[kWordKBase]};
    p.v = Operand{w[kWordVCoord], w[kWordVBase]};
    p.constants = Operand{w[kWordConstCoord], w[kWordConstBase]};
    p.out = Operand{w[kWordOutCoord], w[kWordOutBase]};
    return p;
}

// Runtime-arg layout of every kernel: word 0 is the request count, then kWords words per request.
constexpr uint32_t kArgRequestCount = 0;
constexpr uint32_t request_arg_offset(uint32_t request) { return 1 + request * kWords; }

// Reads request `request` through `arg` (a callable uint32_t(uint32_t index), e.g. a lambda over
// get_arg_val<uint32_t>), so the header needs no kernel API.
template <typename ArgReader>
Params read_request(ArgReader arg, uint32_t request) {
    uint32_t words[kWords];
    const uint32_t offset = request_arg_offset(request);
    for (uint32_t i = 0; i < kWords; ++i) {
        words[i] = arg(offset + i);
    }
    return decode_words(words);
}

}  // namespace flashdecode
