// The parameter block, kernel half. Host half: ttnn_flashdecode/protocol.py. The two agree word
// for word; tests/test_protocol_pair.py compiles this header with the host C++ compiler, feeds it
// words from protocol.encode() and checks every decoded field and derived count.
//
// Plain C++ with no kernel API: the reader, compute and writer kernels include it, and so does the
// host test.
//
// Word 0 (HEADS): byte 0 q_rows, byte 1 query_row, byte 2 flags, byte 3 positions (ROWS mode).
//
// Request kinds (flags). Every kind stages its query rows as the rows of one 32-row group tile
// (QSTAGE, and every tile compute derives from it): stage row s = head * rows_per_head() + row,
// s < stage_rows() = heads() * rows_per_head() <= 32, where
//   decode (no flag): heads = q_rows Q heads of one KV group,  rows_per_head = 1;
//   CHUNK (bit 0):    heads = 1, the request's one Q head,     rows_per_head = q_rows = C (1..32),
//                     C consecutive positions of one sequence, causal (prefill of a chunk);
//   ROWS (bit 1):     heads = q_rows Q heads of one KV group,  rows_per_head = positions (byte 3),
//                     q_rows * positions <= 32 (e.g. verifying draft tokens).
// Stage row s is Q row query_row + row of Q head (the first page's head) + head; rows past 31
// continue in the next row tiles of Q (q_width_tiles pages on), and the output takes the same rows.
// HEAD_ROWS (bit 2, decode only): Q and the output are [1, batch, n_heads, head_dim] (ttnn's decode
// layout, nlp_create_qkv_heads_decode's heads): a user's heads are the rows of its own row tiles,
// so stage row s (head s) is row query_row + s of the first page's row tile, continuing in the next
// row tile (dim_tiles pages on).
// Word 2 (USER): the request's user (decode, ROWS) or sequence (CHUNK): its index into the
// POSITIONS operand. Positions are not runtime args: the kernels read them on device from the
// POSITIONS operand (one int32 per user, ttnn's cur_pos_tensor), so a traced program replays with
// new positions. Each entry is the user's last row's position (decode, ROWS: cur_pos) or its
// chunk's first position (CHUNK: chunk start); kv_positions_at() turns it into kv_positions,
// clamped into the cache (see there).
// Positions: kv_positions is the LAST row's live count. Row `row` (of every head) attends to
// positions 0 .. kv_positions - rows_per_head() + row, so the first row attends at least position 0.
// Masks: in window tile T row `row` is live for columns c < row_width(T, row) =
// clamp(kv_positions - rows_per_head() + row + 1 - 32 T, 0, 32). Only the last live tile and the
// one before it can be partly live for some row (rows_per_head() <= 32); their masks go in CONST
// page kConstPageMask (last live tile) and kConstPageMaskBefore (the one before). mask_tile(T)
// says how a page is filled:
//   kNoMask      every row fully live: nothing fetched, nothing added;
//   a tile id    fetched whole, when every staged row can share one constants tile:
//                rows_per_head() == 1 -> tail mask row_width(T, 0) (decode, as before);
//                heads() == 1 and the first row starts tile T (kv_positions - rows_per_head() a
//                multiple of 32) -> the causal mask for length C = rows_per_head(), tile
//                kConstCausalMaskTile + C - 1 (a CHUNK at a tile-aligned start: "the last tile
//                takes causal mask C-1");
//   kGatherMask  anything else (a chunk starting mid-tile, ROWS with several heads): the reader
//                assembles the page row by row, stage row s taking constants row
//                mask_row_row(w) of tile mask_row_tile(w) for its width w = row_width(T,
//                stage_row(s)): row 0 of tail mask w when w < 32; row 31 of the causal mask for
//                length 32 (tile 65, all live) when w == 32.
// Stage rows past stage_rows() are padding: row-local, never written out, may hold anything.
// Word 5 (SPLIT): byte 0 slice index, byte 1 slice count (0/1: not split), bytes 2-3 core-table
// index of slice 0. Slice i owns live tiles F + [ceil(i*T/count), ceil((i+1)*T/count)), T = live
// tiles from F = first_tile() (0 without a sliding window): the slices cover them exactly once and slice 0 is never empty. Each slice pads its own
// tail to whole double blocks; the partials are combined up a binary tree (tree_levels) in two
// passes (maxima, then sums; see partial_pages) whose root, slice 0, normalises.
// Live tiles and tail width are derived from kv_positions here and in protocol.py, never sent.
// A COORD word with bit 31 set marks a DRAM-interleaved operand addressed through its
// TensorAccessor: low 31 bits = first page (tile) id; its BASE word is 0 in a work row, the buffer's
// address being a common runtime arg (kCommon*Base below). Otherwise COORD is a NoC coordinate
// (y << 16) | x and BASE an L1 byte address.
#pragma once

#include <cstdint>

namespace flashdecode {

enum Field : uint32_t {
    kWordHeads = 0,
    kWordDimTiles = 1,
    kWordUser = 2,
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

enum Flag : uint32_t { kFlagChunk = 1u, kFlagRows = 2u, kFlagHeadRows = 4u };

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
    kCbPartials = 17,   // split-K only: this core's inbox of its children's partials (O, L)
    kCbOutbox = 18,     // split-K only: this core's partial, on its way to its parent's inbox
    kCbMaxInbox = 19,   // split-K only: this core's inbox of its children's subtree maxima
    kCbMaxOut = 20,     // split-K only: this subtree's max, for the parent (slice 0: the request's)
    kCbMaxGlobal = 21,  // split-K only, slices 1..: the request's max, copied from the parent
    kCbPositions = 22,  // the POSITIONS operand's one page (int32 per user): reader -> compute
    kCbPageTable = 23,  // paged caches: one chunk of a user's page-table row, the reader's own
    kCbMask = 24,       // non-causal calls with attn_mask: the block's mask tiles (rows: stage rows), reader -> compute
    kCbWork = 25,        // this core's work row (WORK operand): reader -> compute
    kCbReaderWork = 26,  // the same row, the reader's own copy (reserved once, never pushed)
    kCbWriterWork = 27,  // the same row, reader -> writer
    kCbLse = 28,         // return_lse only: a request's LSE tile (float32; row s column 0: stage row s), compute -> writer
    kCbLseStage = 29,    // return_lse only: the writer's own staging page (reserved once, never pushed)
    kCbAppendStage = 30, // fused append only: the appended face rows, reader -> writer (attention_append.hpp)
    kCbSparse = 31,      // sparse calls only: a user's index list, the reader's own ("Sparse decode")
};

// Log-sum-exp output (named compile-time arg `lse` 1; ttnn_flashdecode's return_lse): the normalising
// core computes LSE = M + log(L) per stage row from the fp32 statistics (M the final running max,
// with sinks max(M, sink), L the softmax denominator relative to it; natural log, as exp_tile is e^x
// and the scores are scale * q . k in natural units), -inf for an idle slot, into CB LSE (column 0
// of row s). The writer copies each value into its staging page at the LSE tensor element's
// address modulo 64 (the NoC moves bytes at matching alignment) and writes it, 4 bytes, to the LSE
// operand: float32 ROW_MAJOR, DRAM interleaved, one page of n_q_heads values per output row (user
// * rows_per_head() + stage_row(s)), Q head first_q_head() + stage_head(s) at byte 4 * head. Its
// address is common runtime arg kCommonLseBase (0 without it) and its TensorAccessorArgs end the chain.

// Split-K semaphores (ids of the program's SemaphoreDescriptors, on every core).
enum Semaphore : uint32_t {
    kSemQueryReady = 0,  // on slices 1..: the parent has staged Q and CONST (counts split items)
    kSemFetched = 1,     // on a parent: children that have copied its Q and CONST pages
    kSemInboxReady = 2,  // on a child: its parent has reserved both its inboxes (counts combine rounds)
    kSemMaxReady = 3,    // on slices 1..: the parent holds the request's max (counts combine rounds)
    kSemMaxFetched = 4,  // on a parent: children that have copied the request's max
    kSemArrived = 5,     // on a parent, + inbox slot: 1 = that child's subtree max has landed,
                         // 2 = its partial has too
};
// One arrival semaphore per inbox slot (kSemArrived + slot), so a parent folds each child in as
// soon as it lands instead of waiting for all of them: ids 5 .. 5 + tree_levels(slices) - 1.

// The split-K combine makes two passes up the tree:
//   1. maxima: each slice sends max(its own M, its children's subtree maxima) to its parent
//      (MAX_OUT -> the parent's MAX_INBOX slot); slice 0 ends with the request's max M (in
//      MAX_OUT), which travels back down the tree: each slice copies it from its parent into its
//      MAX_GLOBAL and hands it on to its own children;
//   2. sums: each slice rescales its own (O, L) once, by exp(own M - M), adds its children's
//      (O, L) as they land -- plain additions, since every partial is now relative to the same
//      M -- and sends the sum to its parent; slice 0 normalises.
// A binary tree of full (M, L, O) merges would instead rescale both sides' O at every level.
// Max first: a slice whose live tiles fit one block runs pass 1 right after its scores and takes
// the request's M before exponentiating (P = exp(S - M)), so its (O, L) are relative to M from the
// start and pass 2 skips its rescale; longer slices keep the online softmax across their blocks.
// A partial result, as OUTBOX pages and as one inbox slot: O (dim_tiles pages, unnormalised,
// relative to the request's max), then L (row sums), rows in column 0.
constexpr uint32_t partial_pages(uint32_t dim_tiles) { return dim_tiles + 1; }

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

// The NoC coordinate table of a split program (common runtime args from kCommonCoreTable):
// word i = (noc_y << 16) | noc_x for core-table index i.
constexpr uint32_t core_noc_x(uint32_t word) { return word & 0xFFFFu; }
constexpr uint32_t core_noc_y(uint32_t word) { return word >> 16; }

// Constants operand tiles (DESIGN.md §2); protocol.ConstTile mirrors them.
constexpr uint32_t kConstScalerTile = 0;
constexpr uint32_t kConstScaleTile = 1;
constexpr uint32_t kConstTailMaskTile = 2;     // + t, t = 0..31; t = 0 kills a whole tile
// The kill mask (tail mask 0) is MASK_VALUE everywhere: two bfloat16 MASK_VALUE (-1e30,
// constants.MASK_VALUE) per word, so the reader fills a kill-mask page in L1 instead of reading it.
constexpr uint32_t kKillMaskWord = 0xF14AF14Au;
constexpr uint32_t kConstCausalMaskTile = 34;  // + C - 1
constexpr uint32_t kConstTiles = 66;
// With attention sinks (named compile-time arg sink != 0), the constants operand appends the sink
// tiles: tile kConstSinkTile + h / 32, row h % 32, column 0 holds Q head h's sink logit (ttnn's
// [nh, 32] layout, already in score units: see "Attention sink" below).
constexpr uint32_t kConstSinkTile = kConstTiles;

// Pages of the CONST circular buffer per request: scaler, scale, then the masks of the last live
// tile and of the one before it (see "Masks" above); an empty split slice's kConstPageMask holds
// the kill mask (tail mask 0). A windowed program (see "Sliding window" below) adds the masks of
// the window's first tile and of the one after it, which the reader fills in L1.
constexpr uint32_t kConstPageScaler = 0;
constexpr uint32_t kConstPageScale = 1;
constexpr uint32_t kConstPageMask = 2;
constexpr uint32_t kConstPageMaskBefore = 3;
constexpr uint32_t kConstPageWindow = 4;
constexpr uint32_t kConstPageWindowNext = 5;
constexpr uint32_t kConstPageSink = 6;
// CONST pages per request: 4; 6 in a windowed program (named compile-time arg window != 0); 6 +
// row_tiles with attention sinks (named compile-time arg sink != 0; pages 4-5 unused without a
// window): page kConstPageSink + r holds Q row tile r's sinks (see "Q row tiles" below); with
// row-tile users (named compile-time arg row_tile_users != 0, below) row_tiles more, each row
// tile's own tail mask (row_mask_page).
constexpr uint32_t const_pages(bool windowed, bool sink, uint32_t row_tiles, bool row_tile_users) {
    return row_tile_users ? kConstPageSink + (sink ? row_tiles : 0) + row_tiles
           : sink         ? kConstPageSink + row_tiles
           : windowed     ? kConstPageWindowNext + 1
                          : kConstPageMaskBefore + 1;
}


// Q row tiles (named compile-time arg row_tiles = R, 1 normally): a decode KV group of more than 32
// Q heads (64, or MLA's 128, per KV head) is one request of R = heads / 32 row tiles, so each K/V
// block that reaches L1 serves every row tile and the group's K/V is read once. The request's words
// describe row tile 0 (q_rows 32, its Q / output first page); row tile r is row_tile(r): the same
// request with Q and the output r * row_tile_pages() pages on (its 32 heads). Compute keeps one
// running state (M, L, O) per row tile; the reader stages R tiles of Q (QSTAGE r * dim_tiles..)
// and the writer writes R tiles of output. Decode only, of whole row tiles (valid_layout). Split,
// every slice keeps the R states of its share of the K/V, and the combine runs in R rounds, one
// per row tile in row-tile order (combine rounds: kSemInboxReady and kSemMaxReady count them):
// each round is the one-row-tile combine (the inboxes hold one row tile's partials), so a split
// group still reads each live K/V tile once.

// Values from keys (named compile-time arg values_from_keys 1; MLA's latent cache, V = K's
// columns): the call's V operand is its K operand, so the reader reads each K/V block once, into CB
// K only, and compute's P . V reads that block (same tile order) before freeing it. No CB V; the
// writer is unchanged (the output keeps K's head_dim; the host cuts it to head_dim_v).

// Attention sink (gpt-oss): per Q head h a logit s_h that joins every row's softmax denominator
// and has no value: out = sum_j exp(S_j - M) V_j / (sum_j exp(S_j - M) + exp(s_h - M)), with the
// request's running max M taken over the sink too (M = max(max_j S_j, s_h)), so a sink far above
// every score (or far below) stays finite. The reader gathers each stage row's sink (its Q head's:
// first_q_head() + stage_head(s)) into column 0 of CONST page kConstPageSink; the normalising
// core folds it in once, just before O / L (compute's fold_sink): M' = max(M, sink), c = exp(M -
// M'), L = c L + exp(sink - M'), O = c O.

constexpr uint32_t kTilePositions = 32;

// bfloat16 tile geometry (TT_FACTS §1): four 16x16 faces, row-major inside a face; faces 0/1 hold
// rows 0..15, faces 2/3 rows 16..31. One tile row is two 32-byte face rows (half 0 left, 1 right).
constexpr uint32_t kFaceBytes = 16 * 16 * 2;
constexpr uint32_t kFaceRowBytes = 16 * 2;
constexpr uint32_t face_row_offset(uint32_t row, uint32_t half) {
    return ((row / 16) * 2 + half) * kFaceBytes + (row % 16) * kFaceRowBytes;
}

// K/V tiles in the cache's format, told apart by their size: bfloat16 (2048 bytes, the layout
// above), block-float bfloat8_b (1088) and bfloat4_b (576): 64 shared exponents (one byte per
// face row, faces 0..3), then the 1024 data in face order, 8 or 4 bits each (TT_FACTS §1). A
// datum of magnitude 0 is +0 whatever its row's exponent, so zeroing a row's data zeroes it.
constexpr uint32_t kBlockFloatExponentBytes = 64;
constexpr uint32_t kv_datum_bits(uint32_t tile_bytes) { return tile_bytes == 2048 ? 16 : (tile_bytes - 64) / 128; }
// Bytes of one face row's 16 data.
constexpr uint32_t kv_face_row_bytes(uint32_t tile_bytes) { return 2 * kv_datum_bits(tile_bytes); }
// Byte offset of the data of tile row `row`, half `half` (its face row) in a K/V tile.
constexpr uint32_t kv_face_row_offset(uint32_t row, uint32_t half, uint32_t tile_bytes) {
    const uint32_t data = tile_bytes == 2048 ? 0 : kBlockFloatExponentBytes;
    return data + (((row / 16) * 2 + half) * 256 + (row % 16) * 16) * kv_datum_bits(tile_bytes) / 8;
}
constexpr uint32_t kInterleavedBit = 1u << 31;
constexpr uint32_t kNoMask = 0xFFFFFFFFu;

// Row-tile users (named compile-time arg row_tile_users 1; ttnn's spec_multi_pos_tiles candidates,
// the drop-in's users_per_table_row consecutive users of one KV head and 32 Q heads each): a request
// of R row tiles serves R consecutive users, row tile r being user `user + r` (row_tile_user), each
// with its own POSITIONS entry, all reading one page-table row (the group's), so the group's cache
// is read ONCE for every candidate. Decode without a window, attention chunk or mask. The request's
// kv_positions is the largest of its row tiles' (what the reader reads and the slices split); row
// tile r's scores take its own tail mask on its own last live tile (CONST page row_mask_page(r),
// a constants tail-mask tile) and the kill mask on every later tile (CONST page kConstPageKill:
// MASK_VALUE everywhere, so exp() zeroes them and the running max and correction are unchanged),
// own_mask_page. An idle row tile (its entry -1) has every tile killed, and compute writes it
// zeros (its L taken as 0).
constexpr uint32_t kConstPageKill = kConstPageMaskBefore;  // decode never masks the tile before the last
constexpr uint32_t row_tile_user(uint32_t user, uint32_t row, bool row_tile_users) {
    return row_tile_users ? user + row : user;
}
constexpr uint32_t row_mask_page(bool sink, uint32_t row_tiles, uint32_t row) {
    return kConstPageSink + (sink ? row_tiles : 0) + row;
}
// The CONST page row tile r adds to window tile `tile`'s scores, for its own kv positions `own`
// (kv_positions_at of its entry): none before its last live tile, `own_page` (row_mask_page) on it
// when it is partial, the kill mask past it.
constexpr uint32_t own_mask_page(uint32_t own, uint32_t tile, uint32_t own_page) {
    const uint32_t live = (own + 31u) / 32u;
    if (tile + 1 < live) {
        return kNoMask;
    }
    if (tile + 1 == live) {
        return own % 32u != 0 ? own_page : kNoMask;
    }
    return kConstPageKill;
}
constexpr uint32_t kGatherMask = 0xFFFFFFFEu;  // a mask page assembled row by row (see "Masks")

// The constants tile and row that hold a mask row live for columns c < width (width 0..32).
constexpr uint32_t mask_row_tile(uint32_t width) {
    return width < kTilePositions ? kConstTailMaskTile + width : kConstCausalMaskTile + kTilePositions - 1;
}
constexpr uint32_t mask_row_row(uint32_t width) { return width < kTilePositions ? 0 : kTilePositions - 1; }

// Sliding window (named compile-time arg `window` = W positions, 0 = none; Params::window): the row
// at position p attends max(0, p + 1 - W) .. p. The window's start is derived on device from the
// POSITIONS entry, like kv_positions, so a traced program stays valid; W itself is in the program.
// The slices (slice_begin) cover only the window's tiles, from first_tile(): the reader never
// reads a tile before it. In the window's first tile (and, with several rows per head whose starts
// straddle a tile edge, the one after it) a row's columns before its own start are dead: the
// reader builds that tile's window mask in L1 (CONST page kConstPageWindow / kConstPageWindowNext,
// window_mask_word per pair of columns) and compute adds it to the scores (a stage of its own,
// beside the tail masks, which it may meet on the same tile: MASK + MASK stays finite). Cache slots
// before the first row's start are dead for every row and may hold anything: the reader zeroes
// them in L1 (window_stale_rows), as it zeroes the slots past the position.
// Chunked-local attention (named compile-time arg `attention_chunk` = C positions, a multiple of 32,
// 0 = none; Params::attention_chunk; Llama 4): the row at position p attends floor(p / C) C .. p.
// It is one more start folded into window_start (with a window too: the later of the two starts),
// so everything above follows it: the slices cover only the chunk's tiles, the mask pages hold each
// row's dead columns. A chunk start is tile aligned, but with several rows per head the rows of one
// request may straddle a chunk edge B: the rows past it are dead on every tile of [B - C, B), each
// such tile after the first the same mask, so window_page gives every tile after the first that
// has a dead column page kConstPageWindowNext (a plain window has at most one such tile), and a
// slice's reader fills that page from the first of its tiles using it (window_page_tile). Starts
// that would need a third mask (several rows, a window and C > 32, W < C + 31) are refused on the
// host (op/shape.py).
// One word of a window-mask row whose first `dead` columns are dead: columns c = 16 half + 2 pair
// (low half) and c + 1 (high half) of a bfloat16 face row, each MASK_VALUE (0xF14A) when dead, else 0.
constexpr uint32_t window_mask_word(uint32_t dead, uint32_t half, uint32_t pair) {
    const uint32_t column = 16 * half + 2 * pair;
    return (column < dead ? 0xF14Au : 0u) | (column + 1 < dead ? 0xF14Au << 16 : 0u);
}

// Attention mask (non-causal decode, ttnn's attn_mask; named compile-time arg mask_users != 0):
// every position of the cache is attended (the host uploads every POSITIONS entry as the cache's
// last position) and an additive mask [mask_users, 1, n_q_heads, capacity] (bfloat16, TILE;
// mask_users 1 broadcasts over the batch) is added to the scores, in score units. Its buffer
// address is a common runtime arg, kCommonMaskBase, like every operand's. Per K
// block the reader gathers, once, each stage row's mask row (Q head first_q_head() +
// stage_head(s), user % mask_users) for the block's live tiles into CB MASK (attn_mask_page /
// attn_mask_row), clamps every value into [MASK_VALUE, -MASK_VALUE] (clamp_mask_word: -inf, NaN
// and anything below -1e30 count as -1e30, so a row never meets inf - inf), and compute adds the
// tile to the scores (its own stage, add_attn_mask). A fully masked row therefore weighs every
// position alike: the mean of V.
// One bfloat16 of a mask, clamped: NaN -> MASK_VALUE (0xF14A), beyond +-1e30 -> +-1e30.
constexpr uint32_t clamp_mask_half(uint32_t half) {
    const uint32_t magnitude = half & 0x7FFFu;
    if (magnitude > 0x7F80u) {
        return 0xF14Au;
    }
    return magnitude > 0x714Au ? ((half & 0x8000u) != 0 ? 0xF14Au : 0x714Au) : half;
}
// A word of two bfloat16 mask values, each clamped (clamp_mask_half).
constexpr uint32_t clamp_mask_word(uint32_t word) {
    return clamp_mask_half(word & 0xFFFFu) | clamp_mask_half(word >> 16) << 16;
}

// Paged KV cache (ttnn's paged layout): K and V are [cache blocks, n_kv_heads, block_size,
// head_dim] TILE tensors and an int32 page table [batch, entries] (ROW_MAJOR, one page per user)
// maps a user's position tile T to cache block table[user][T / cache_block_tiles]. Named
// compile-time args: cache_block_tiles (block_size / 32; 0 for a contiguous cache [batch,
// n_kv_heads, capacity, head_dim]), cache_block_pages (pages per cache block, all KV heads),
// cache_blocks, page_table_entries. A paged request's K/V first page is its KV head's offset
// inside a cache block (kv_head * cache_block_tiles * dim_tiles); common arg kCommonPageTableBase
// is the page table's address. The reader keeps one chunk of a user's row in L1 (CB PAGE_TABLE).
constexpr uint32_t kPageTableChunkEntries = 256;

// Sparse decode (DeepSeek-V3.2's top-k attention; named compile-time arg sparse_k = k, 0 for a
// dense call): the SPARSE operand, int32 ROW_MAJOR [batch, k] (one page per user) or [batch *
// n_kv_heads, k] (a page per (user, KV head): named args sparse_lists, sparse_gqa), takes the MASK
// operand's slot (TensorAccessorArgs and common arg kCommonMaskBase: a sparse call has no
// attention mask). Each user attends exactly the cache positions its list names, as a gather then
// softmax: a position listed twice counts twice; -1 is padding; an entry past the user's cur_pos
// is dropped (the host refuses one it can see). The reader reads the list into CB SPARSE,
// compacts the live entries (sparse_index_live) to its front and counts them, n <= k; the request
// is then a dense request over a VIRTUAL sequence of n positions: virtual position j is cache
// position list[j] (through the page table when paged), gathered as two face rows per dim tile
// (bfloat8_b: and their two exponent bytes) into row j % 32 of virtual tile j / 32 of CB K (and
// V). The reader writes n - 1 into word sparse_count_word(r) of the POSITIONS page before it hands
// the page to compute, so compute (live tiles, tail mask, split-K slices) sees a decode request at
// position n - 1; n = 0 is an idle request (output 0, LSE -inf). bfloat16 and bfloat8_b caches
// (bfloat4_b's 8-byte face row data is under the NoC's L1 alignment). The reader's half:
// attention_sparse.hpp.

// Sparse decode: the reader rewrites word r of the POSITIONS page (the CB's page holds at least
// kMaxRequestsPerCore words) to request r's virtual cur_pos, n - 1 (r: its index in its core's work
// row), once every request of the core has taken its own cur_pos from the page; compute reads it
// there (a user's KV heads may have lists, and counts, of their own).
constexpr uint32_t sparse_count_word(uint32_t r) { return r; }

// Circular cache (ttnn's cache_position_modulo, named compile-time arg cache_wrap_tiles = modulo /
// 32, 0 for none): position tile `tile` lives in the cache's slot tile tile % wrap_tiles, so a
// sliding-window layer keeps only its last modulo positions. Windows, masks and positions stay
// logical; only the page-table lookup wraps.
constexpr uint32_t cache_slot_tile(uint32_t tile, uint32_t wrap_tiles) { return wrap_tiles == 0 ? tile : tile % wrap_tiles; }

// Blocks of 16 positions (ttnn's paged block_size 16; named compile-time arg cache_half_blocks 1,
// cache_block_tiles 1: a block is one tile per dim tile whose rows 16..31 are padding): position
// tile `tile`'s rows 16 * half .. come from the block of entry 2 * tile + half.
constexpr uint32_t half_block_entry(uint32_t tile, uint32_t half) { return 2 * tile + half; }

// The page-table entry (index into the user's row) that maps position tile `tile`.
constexpr uint32_t page_table_entry(uint32_t tile, uint32_t cache_block_tiles) { return tile / cache_block_tiles; }

// Page of dim tile 0 of position tile `tile` of a request whose K (or V) region starts at page
// `first_page`: contiguous, tile `tile` of the region; paged, tile tile % cache_block_tiles of the
// request's KV head in cache block `cache_block` (its page-table entry).
constexpr uint32_t cache_tile_page(uint32_t first_page, uint32_t tile, uint32_t cache_block,
                                   uint32_t cache_block_tiles, uint32_t cache_block_pages, uint32_t dim_tiles) {
    return cache_block_tiles == 0 ? first_page + tile * dim_tiles
                                  : cache_block * cache_block_pages + first_page + (tile % cache_block_tiles) * dim_tiles;
}

// True when a page-table entry names a block of the cache: the reader never reads any other
// (a device-side table the host never saw).
constexpr bool cache_block_valid(int32_t entry, uint32_t cache_blocks) {
    return entry >= 0 && uint32_t(entry) < cache_blocks;
}

// The chunk of a user's page-table row the reader loads to look up `entry`: its first entry, and
// how many entries it holds (a row of `entries` entries ends the last chunk early).
constexpr uint32_t page_table_chunk_first(uint32_t entry) { return entry / kPageTableChunkEntries * kPageTableChunkEntries; }
constexpr uint32_t page_table_chunk_entries(uint32_t first, uint32_t entries) {
    return entries - first < kPageTableChunkEntries ? entries - first : kPageTableChunkEntries;
}

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
    uint32_t user;          // word 2: index into the POSITIONS operand
    uint32_t kv_positions;  // not on the wire: set from the POSITIONS operand (kv_positions_at)
    uint32_t window;        // not on the wire: the program's sliding window (positions; 0 = none)
    uint32_t attention_chunk;  // not on the wire: the program's attention chunk (positions; 0 = none)
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
    // Sliding window ("Sliding window" above): the first position row `row` attends (0 without a
    // window or for an idle slot), the window's first tile (the first row's start's), the window's
    // tiles, and the cache slots of the first tile before every row's start.
    // With an attention chunk the start is also at least the row's chunk's first position. Out of
    // line: every slice bound and mask derives from it, and one copy (with its division) instead of
    // one per call site keeps the reader inside Wormhole NCRISC's 16 KiB IRAM.
    __attribute__((noinline)) constexpr uint32_t window_start(uint32_t row) const {
        if (idle()) {
            return 0;
        }
        const uint32_t end = kv_positions - rows_per_head() + row + 1;  // this row's live positions
        uint32_t start = window != 0 && end > window ? end - window : 0;
        if (attention_chunk != 0) {
            const uint32_t chunk_first = (end - 1) / attention_chunk * attention_chunk;
            start = chunk_first > start ? chunk_first : start;
        }
        return start;
    }
    constexpr uint32_t first_tile() const { return window_start(0) / kTilePositions; }
    constexpr uint32_t window_tiles() const { return live_tiles() - first_tile(); }
    constexpr uint32_t window_stale_rows() const { return window_start(0) % kTilePositions; }
    // Columns of tile `tile` before row `row`'s window start, 0..32 (they grow with the row).
    constexpr uint32_t window_dead(uint32_t tile, uint32_t row) const {
        const uint32_t start = window_start(row), first = tile * kTilePositions;
        if (start <= first) {
            return 0;
        }
        return start - first < kTilePositions ? start - first : kTilePositions;
    }
    // The CONST page of tile `tile`'s window mask (kConstPageWindow for the window's first tile,
    // kConstPageWindowNext for any later one: the tile after it, or a chunk edge's dead tiles), or
    // kNoMask when no row has a dead column there (always without a window or chunk, or idle).
    constexpr uint32_t window_page(uint32_t tile) const {
        if (tile < first_tile() || window_dead(tile, rows_per_head() - 1) == 0) {
            return kNoMask;
        }
        return tile == first_tile() ? kConstPageWindow : kConstPageWindowNext;
    }
    // The tile whose window mask this slice's reader builds in CONST page `page` (the slice's first
    // tile that may use the page); whether it fills the page at all.
    constexpr uint32_t window_page_tile(uint32_t page) const {
        const uint32_t tile = first_tile() + (page - kConstPageWindow);
        return tile > slice_begin() ? tile : slice_begin();
    }
    constexpr bool slice_fills_window_page(uint32_t page) const {
        const uint32_t tile = window_page_tile(page);
        return tile < slice_end() && window_page(tile) == page;
    }
    // Split-K slice of the window's tiles (all live tiles without a window).
    constexpr uint32_t slice_begin() const { return first_tile() + (split_index * window_tiles() + slices() - 1) / slices(); }
    constexpr uint32_t slice_end() const {
        return first_tile() + ((split_index + 1) * window_tiles() + slices() - 1) / slices();
    }
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
    // Request kind (see "Request kinds" above).
    constexpr bool chunk() const { return (flags & kFlagChunk) != 0; }
    constexpr bool rows() const { return (flags & kFlagRows) != 0; }
    constexpr uint32_t heads() const { return chunk() ? 1 : q_rows; }
    constexpr uint32_t rows_per_head() const { return chunk() ? q_rows : rows() ? positions : 1; }
    constexpr uint32_t stage_rows() const { return heads() * rows_per_head(); }
    constexpr uint32_t stage_head(uint32_t s) const { return s / rows_per_head(); }
    constexpr uint32_t stage_row(uint32_t s) const { return s % rows_per_head(); }
    constexpr bool head_rows() const { return (flags & kFlagHeadRows) != 0; }
    // Q (and output) row of stage row s, counted from row 0 of the first page's row tile.
    constexpr uint32_t query_row_of(uint32_t s) const { return query_row + (head_rows() ? stage_head(s) : stage_row(s)); }
    // The request's first Q head (its stage head 0), from its Q page: Q is q_width_tiles tiles wide,
    // head h starting at tile column h * dim_tiles; HEAD_ROWS: the heads are rows, q_width_tiles /
    // dim_tiles heads in ceil(that / 32) row tiles per user.
    constexpr uint32_t first_q_head(uint32_t q_width_tiles) const {
        if (head_rows()) {
            const uint32_t row_tiles = (q_width_tiles / dim_tiles + kTilePositions - 1) / kTilePositions;
            return q.first_page() / dim_tiles % row_tiles * kTilePositions + query_row;
        }
        return q.first_page() % q_width_tiles / dim_tiles;
    }
    // The attention-mask page (tile) and row holding stage row s's mask in position tile `tile`:
    // the mask is [mask_users, 1, n_q_heads, capacity] in tiles (n_q_heads = q_width_tiles /
    // dim_tiles, padded to row tiles), user `user % mask_users`, Q head first_q_head() + stage_head(s).
    constexpr uint32_t attn_mask_page(uint32_t tile, uint32_t s, uint32_t mask_users, uint32_t q_width_tiles) const {
        const uint32_t head = first_q_head(q_width_tiles) + stage_head(s);
        const uint32_t head_tiles = (q_width_tiles / dim_tiles + kTilePositions - 1) / kTilePositions;
        return ((user % mask_users) * head_tiles + head / kTilePositions) * capacity_tiles + tile;
    }
    constexpr uint32_t attn_mask_row(uint32_t s, uint32_t q_width_tiles) const {
        return (first_q_head(q_width_tiles) + stage_head(s)) % kTilePositions;
    }
    // Q (and output) page of stage row s, dim tile d; Q is q_width_tiles tiles wide (HEAD_ROWS: dim_tiles).
    constexpr uint32_t query_page(uint32_t s, uint32_t d, uint32_t q_width_tiles) const {
        if (head_rows()) {
            return (query_row_of(s) / kTilePositions) * dim_tiles + d;
        }
        return (query_row_of(s) / kTilePositions) * q_width_tiles + stage_head(s) * dim_tiles + d;
    }
    // Live columns of row `row` (of every head) in window tile `tile`, 0..32.
    constexpr uint32_t row_width(uint32_t tile, uint32_t row) const {
        const uint32_t live = kv_positions - rows_per_head() + row + 1;  // this row's live positions
        const uint32_t first = tile * kTilePositions;
        if (live <= first) {
            return 0;
        }
        return live - first < kTilePositions ? live - first : kTilePositions;
    }
    // How window tile `tile` is masked: kNoMask (every row fully live), a constants tile the whole
    // group shares, or kGatherMask (assembled row by row); tiles past the live ones are dead and
    // take the kill mask (tail mask 0).
    constexpr uint32_t mask_tile(uint32_t tile) const {
        if (tile >= live_tiles()) {
            return kConstTailMaskTile;
        }
        const uint32_t first_row = row_width(tile, 0);  // rows' widths grow with the row
        if (first_row == kTilePositions) {
            return kNoMask;
        }
        if (rows_per_head() == 1) {
            return kConstTailMaskTile + first_row;
        }
        if (heads() == 1 && first_row == 1) {
            return kConstCausalMaskTile + rows_per_head() - 1;
        }
        return kGatherMask;
    }
    // The CONST page compute adds to live window tile `tile`'s scores, or kNoMask.
    constexpr uint32_t mask_page(uint32_t tile) const {
        if (mask_tile(tile) == kNoMask) {
            return kNoMask;
        }
        return tile + 1 == live_tiles() ? kConstPageMask : kConstPageMaskBefore;
    }
    // The window tile whose mask CONST page `page` (kConstPageMask or kConstPageMaskBefore) holds.
    constexpr uint32_t page_mask_tile(uint32_t page) const { return live_tiles() - 1 - (page - kConstPageMask); }
    // What this slice's reader puts in CONST page `page` (kConstPageMask or kConstPageMaskBefore):
    // the mask of the page's tile when the slice owns that tile and it is masked; the kill mask
    // (tail mask 0) in kConstPageMask when the slice is empty (its partial has M = MASK_VALUE, so
    // the combine weighs it by exp(-huge) = 0); else kNoMask (left unfilled).
    constexpr uint32_t slice_mask_tile(uint32_t page) const {
        if (slice_live_tiles() == 0) {
            return page == kConstPageMask ? kConstTailMaskTile : kNoMask;
        }
        if (page - kConstPageMask >= live_tiles()) {
            return kNoMask;
        }
        const uint32_t tile = page_mask_tile(page);
        return tile >= slice_begin() && tile < slice_end() ? mask_tile(tile) : kNoMask;
    }
    // Pages between Q's (and the output's) consecutive row tiles of this request's heads: 32 heads
    // on (their tile columns), or HEAD_ROWS the user's next row tile (see "Q row tiles" above).
    constexpr uint32_t row_tile_pages() const { return head_rows() ? dim_tiles : kTilePositions * dim_tiles; }
    // Row tile r of this request: Q and the output moved r * row_tile_pages() pages on.
    constexpr Params row_tile(uint32_t r) const {
        Params t = *this;
        t.q.coord += r * row_tile_pages();
        t.out.coord += r * row_tile_pages();
        return t;
    }
    // The checks every kernel repeats before touching a request; the host refuses the same cases.
    // valid_layout needs no position, so the writer (which never reads positions) and the two
    // kernels that do skip exactly the same requests; kv_positions_at() keeps every position valid.
    constexpr bool valid_kind() const {
        return flags <= (kFlagChunk | kFlagRows | kFlagHeadRows) && !(chunk() && rows()) &&
               !(head_rows() && (chunk() || rows())) && (rows() ? positions >= 1 : positions == 0) &&
               stage_rows() <= kTilePositions;
    }
    // capacity_tiles a whole number of double blocks: the longest padded read window (at the
    // cache's last position) stays inside the cache.
    // Several row tiles (residency_row_tiles > 1): decode of whole row tiles only.
    constexpr bool valid_layout(uint32_t residency_dim_tiles, uint32_t residency_block_tiles,
                                uint32_t residency_row_tiles = 1) const {
        return q_rows >= 1 && q_rows <= 32 && query_row <= 31 && dim_tiles == residency_dim_tiles &&
               block_tiles == residency_block_tiles && block_tiles != 0 && capacity_tiles != 0 &&
               capacity_tiles % (2 * block_tiles) == 0 && split_index < slices() && valid_kind() &&
               (residency_row_tiles == 1 || ((flags & ~kFlagHeadRows) == 0 && q_rows == kTilePositions));
    }
    // The position-dependent half, true for every kv_positions_at() result of a valid layout.
    constexpr bool valid_positions() const {
        return idle() || (kv_positions >= rows_per_head() && padded_tiles() <= capacity_tiles);
    }
    // An idle slot (POSITIONS entry negative): no live position, so every slice is empty, no K/V
    // tile is read, and the output rows are zero (compute skips the 1/L of an empty state).
    constexpr bool idle() const { return kv_positions == 0; }
    constexpr bool valid_for(uint32_t residency_dim_tiles, uint32_t residency_block_tiles) const {
        return valid_layout(residency_dim_tiles, residency_block_tiles) && valid_positions();
    }
    // kv_positions for this request's POSITIONS entry `position` (int32): decode / ROWS position +
    // 1 (the last row attends to 0..position), CHUNK position + C; 0 (idle) for a negative entry
    // (-1 marks an idle slot, as in ttnn's cur_pos_tensor). A device-side value the host could not
    // check is clamped so that no kernel reads outside the cache: to at least rows_per_head() (the
    // first row attends position 0) and at most the cache's last position (capacity_tiles * 32).
    constexpr uint32_t kv_positions_at(int32_t position) const {
        if (position < 0) {
            return 0;
        }
        const int64_t live = int64_t(position) + (chunk() ? q_rows : 1);
        const int64_t low = rows_per_head(), high = int64_t(capacity_tiles) * kTilePositions;
        return uint32_t(live < low ? low : live > high ? high : live);
    }
    // True when `position` is neither -1 (idle) nor a position kv_positions_at() takes as it is:
    // the kernels clamp (or, below -1, idle) it, and the reader reports it (DPRINT "ERROR ...").
    constexpr bool position_clamped(int32_t position) const {
        if (position < 0) {
            return position != -1;
        }
        return int64_t(kv_positions_at(position)) != int64_t(position) + (chunk() ? q_rows : 1);
    }
};

constexpr Params decode_words(const uint32_t* w) {
    Params p{};
    p.q_rows = w[kWordHeads] & 0xFFu;
    p.query_row = (w[kWordHeads] >> 8) & 0xFFu;
    p.flags = (w[kWordHeads] >> 16) & 0xFFu;
    p.positions = (w[kWordHeads] >> 24) & 0xFFu;
    p.dim_tiles = w[kWordDimTiles];
    p.user = w[kWordUser];
    p.kv_positions = 0;
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

// No kernel has per-core runtime args: tt-metal re-applies every per-core arg on each
// program-cache hit (its host cost grows with cores x args), so a core's work lives in the WORK
// operand, a DRAM-interleaved uint32 table written once per plan, and each core finds its row by
// its logical coordinates (work_slot). A row: word 0 the request count, then kWords words per
// request. The words hold no addresses (their BASE words are 0): every operand's buffer address is
// a common runtime arg, the same for all cores, so the table outlives the tensors it describes.
constexpr uint32_t kRowRequestCount = 0;
constexpr uint32_t kRowHeader = 1;
constexpr uint32_t request_row_offset(uint32_t request) { return kRowHeader + request * kWords; }
// Most requests one core's row holds: the reader keeps one position per request in a fixed array
// (program_factory.MAX_REQUESTS_PER_CORE).
constexpr uint32_t kMaxRequestsPerCore = 21;
// Words of a row holding `requests` requests, rounded up to 16 (64 bytes) so every row starts on
// the DRAM alignment of both architectures (TensorAccessor steps pages by this size).
constexpr uint32_t work_row_words(uint32_t requests) { return (request_row_offset(requests) + 15u) / 16u * 16u; }
// The row of the core at logical (x, y) of a grid `grid_x` cores wide.
constexpr uint32_t work_slot(uint32_t x, uint32_t y, uint32_t grid_x) { return y * grid_x + x; }
// Requests the kernels run for request-count word `count`: never more than a core can hold, so
// the reader's per-request array stays in bounds and all three kernels agree.
constexpr uint32_t served_requests(uint32_t count) { return count < kMaxRequestsPerCore ? count : kMaxRequestsPerCore; }

// Common runtime args of the reader and the writer: the operands' buffer addresses, in
// program_factory.OPERANDS order, then (split programs) the NoC coordinate table of the cores.
enum CommonArg : uint32_t {
    kCommonQBase = 0,
    kCommonKBase = 1,
    kCommonVBase = 2,
    kCommonConstBase = 3,
    kCommonOutBase = 4,
    kCommonPositionsBase = 5,
    kCommonPageTableBase = 6,  // 0 for a contiguous cache
    kCommonMaskBase = 7,       // 0 without an attention mask
    kCommonWorkBase = 8,
    kCommonLseBase = 9,  // 0 without return_lse
    kCommonAppendBase = 10,   // 0 without append_k / append_latent (attention_append.hpp)
    kCommonAppendVBase = 11,  // 0 without append_v
    kCommonCoreTable = 12,
};

// Reads request `request` of a work row through `arg` (a callable uint32_t(uint32_t index) over
// the row's words, e.g. a lambda over l1_word), so the header needs no kernel API.
template <typename ArgReader>
Params read_request(ArgReader arg, uint32_t request) {
    uint32_t words[kWords];
    const uint32_t offset = request_row_offset(request);
    for (uint32_t i = 0; i < kWords; ++i) {
        words[i] = arg(offset + i);
    }
    return decode_words(words);
}

}  // namespace flashdecode
