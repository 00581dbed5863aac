// Sparse decode, the reader's half (attention_protocol.hpp "Sparse decode"): a request's index list
// (its user's, or its (user, KV head)'s; the SPARSE operand, in the MASK operand's slot: a sparse
// call has no attention mask) read into the reader's own SPARSE CB page, compacted, and the cache
// rows it names gathered, face row by face row (bfloat8_b: with their exponent bytes), into dense
// virtual position tiles of CB K (and V). Included by attention_reader.cpp only.
#pragma once

#include <cstdint>

#include "api/dataflow/dataflow_api.h"
#include "attention_args.hpp"
#include "attention_dataflow.hpp"
#include "attention_protocol.hpp"

namespace flashdecode {

// True when a list entry is live for a user at `last` (its cur_pos; -1 idle): 0 <= index <= last.
constexpr bool sparse_index_live(int32_t index, int32_t last) { return index >= 0 && index <= last; }
// Bytes the reader reads of a list of k int32 entries: rounded up to the 32-byte NoC word.
constexpr uint32_t sparse_list_read_bytes(uint32_t k) { return (4 * k + 31) / 32 * 32; }

// Entries per index list, 0 for a dense call (named compile-time arg sparse_k).
constexpr uint32_t kSparseK = args::sparse_k();
constexpr bool kSparse = kSparseK != 0;
// Bytes read per list: its int32 entries, rounded up to the 32-byte NoC word (the DRAM page is
// aligned to at least that, so the read stays inside it).
constexpr uint32_t kSparseReadBytes = sparse_list_read_bytes(kSparseK);

// Bytes of CB SPARSE's one page (residency.py sparse_page_bytes): the list, a scratch list of the
// same size (pair_by_phase), then SparseList's state words (three, and a cur_pos per request of a
// core), rounded up to 64.
constexpr uint32_t kSparsePageBytes = (2 * kSparseReadBytes + 4 * (3 + kMaxRequestsPerCore) + 63) / 64 * 64;

// Bytes of one K/V tile, the cache's format: bfloat16 (2048) or bfloat8_b (1088: 64 shared
// exponents, one per face row, then a byte per datum; attention_protocol.hpp kv_face_row_offset).
constexpr uint32_t kSparseTileBytes = args::kv_tile_bytes();
constexpr bool kSparseBlockFloat = kSparseTileBytes != 2048;
// Bytes of one face row's data: 32 (bfloat16) or 16 (bfloat8_b).
constexpr uint32_t kSparseRowBytes = kv_face_row_bytes(kSparseTileBytes);

// The index lists per user: 1 (every KV head attends its user's list) or n_kv_heads (a list per KV
// head: page user * n_kv_heads + kv_head of the SPARSE operand, [batch, n_kv_heads, k]).
constexpr uint32_t kSparseLists = args::sparse_lists();
constexpr uint32_t kSparseGqa = args::sparse_gqa();

// The SPARSE page holding request p's list: its user's, or with a list per KV head its (user, KV
// head)'s (its KV head: its first Q head / the GQA ratio, as the fused append finds it).
inline uint32_t sparse_list_page(const Params& p) {
    if constexpr (kSparseLists > 1) {
        return p.user * kSparseLists + p.first_q_head(kQWidthTiles) / kSparseGqa;
    }
    return p.user;
}

// The NoC's DRAM read alignment: a read's source and destination must agree modulo it
// (tt-metal's sanitize.h; a read that does not returns shifted data, silently). Wormhole 32 bytes,
// Blackhole 64. A face row whose cache row and virtual row lie at different offsets modulo it (a
// bfloat16 row on Blackhole of the other parity; a bfloat8_b row, 16 bytes, unless the rows agree
// modulo 2 on Wormhole, 4 on Blackhole) comes through a landing page (RowLanding). The emulator
// does not define the macro and does not model the rule: it runs Wormhole's path.
#ifdef NOC_DRAM_READ_ALIGNMENT_BYTES
constexpr uint32_t kSparseReadAlign = NOC_DRAM_READ_ALIGNMENT_BYTES;
#else
constexpr uint32_t kSparseReadAlign = kFaceRowBytes;
#endif
static_assert(kSparseReadAlign % kFaceRowBytes == 0, "a face row is a whole number of read alignments");
static_assert(!kSparse || kSparseTileBytes == 2048 || kSparseTileBytes == 1088, "sparse decode: a bfloat16 or bfloat8_b cache");

// A cache row and a virtual row need no landing when they agree modulo kSparsePhases (1: always).
constexpr uint32_t kSparsePhases = kSparseReadAlign / kSparseRowBytes;
// Order the live entries so most rows need no landing (SparseList::pair_by_phase).
constexpr bool kPairByPhase = kSparsePhases > 1;

// One list in L1, compacted: entries [0, count) are the valid ones of the list, in list
// order. Valid: 0 <= index <= last, `last` the user's cur_pos (its POSITIONS entry; an idle user,
// -1, keeps none). The host refuses an index past cur_pos when it sees the list; on a device list
// it never saw, such an entry (and anything negative, -1 the padding) is dropped here.
//
// All its state is in the reader's own SPARSE CB page (reserved once, never pushed: no other
// kernel reads it), so a SparseList is a view any function may make (kernel globals are shared by
// every core the emulator runs in one process): the list (kSparseReadBytes), a scratch list, then the words
// kStatePage, kStateLast, kStateCount (which list is loaded), then each of this core's requests'
// cur_pos (last_of / set_last_of: read_positions rewrites their POSITIONS words).
class SparseList {
public:
    static constexpr uint32_t kScratch = kSparseReadBytes / sizeof(uint32_t);
    static constexpr uint32_t kStatePage = 2 * kScratch, kStateLast = kStatePage + 1,
                              kStateCount = kStatePage + 2, kStateLasts = kStatePage + 3;

    SparseList() : l1_(get_write_ptr(kCbSparse)) {}

    // Reserves the page and marks it empty: once, before any view reads it.
    static void reserve() {
        cb_reserve_back(kCbSparse, 1);
        l1_set_word(get_write_ptr(kCbSparse), kStatePage, ~0u);
    }

    // Loads and compacts list `page` for a user at `last`; returns its valid count. A list already
    // in L1 for the same `last` is not read again (a core's GQA requests of one user, or the count
    // read_positions took of this core's only request).
    uint32_t load(uint32_t page, int32_t last) const {
        if (l1_word(l1_, kStatePage) == page && static_cast<int32_t>(l1_word(l1_, kStateLast)) == last) {
            return l1_word(l1_, kStateCount);
        }
        const auto reader = TensorAccessor(kMaskArgs, operand_base(kCommonMaskBase), kSparseK * sizeof(int32_t));
        read_bytes(reader.get_noc_addr(page, 0), l1_, kSparseReadBytes);
        wait_for_reads();
        uint32_t count = 0;
        for (uint32_t j = 0; j < kSparseK; ++j) {
            const int32_t index = static_cast<int32_t>(l1_word(l1_, j));
            if (sparse_index_live(index, last)) {
                l1_set_word(l1_, count++, static_cast<uint32_t>(index));
            }
        }
        if constexpr (kPairByPhase) {
            pair_by_phase(count);
        }
        l1_set_word(l1_, kStatePage, page);
        l1_set_word(l1_, kStateLast, static_cast<uint32_t>(last));
        l1_set_word(l1_, kStateCount, count);
        return count;
    }

    // kPairByPhase: the live entries reordered so that as many as can sit at a virtual row of
    // their cache row's phase (row modulo kSparsePhases; softmax does not care about order):
    // virtual row j takes the next entry of phase j % kSparsePhases, the rest fill the holes. A row
    // of matching phase is one read per face row; the others go through RowLanding. (A cache row's
    // phase is its position's: blocks are whole position tiles, virtual tiles 32 rows.)
    void pair_by_phase(uint32_t count) const {
        constexpr uint32_t kHole = ~0u;
        const uint32_t scratch = l1_ + kScratch * sizeof(uint32_t);
        uint32_t next[kSparsePhases] = {}, end[kSparsePhases] = {};
        for (uint32_t j = 0; j < count; ++j) {
            ++end[l1_word(l1_, j) % kSparsePhases];
        }
        for (uint32_t c = 0, first = 0; c < kSparsePhases; ++c) {
            next[c] = first;
            first += end[c];
            end[c] = next[c];  // the fill cursor for now; the class's end once filled
        }
        for (uint32_t j = 0; j < count; ++j) {  // stable counting sort by phase into the scratch list
            const uint32_t index = l1_word(l1_, j);
            l1_set_word(scratch, end[index % kSparsePhases]++, index);
        }
        for (uint32_t j = 0; j < count; ++j) {
            const uint32_t c = j % kSparsePhases;
            l1_set_word(l1_, j, next[c] < end[c] ? l1_word(scratch, next[c]++) : kHole);
        }
        for (uint32_t j = 0, c = 0; j < count; ++j) {
            if (l1_word(l1_, j) == kHole) {
                while (next[c] == end[c]) {
                    ++c;
                }
                l1_set_word(l1_, j, l1_word(scratch, next[c]++));
            }
        }
    }

    // The cache position of virtual position `j` (< the count load returned).
    uint32_t at(uint32_t j) const { return l1_word(l1_, j); }

    // Request r's cur_pos (this core's r-th request), kept for its load before its K/V stream.
    int32_t last_of(uint32_t r) const { return static_cast<int32_t>(l1_word(l1_, kStateLasts + r)); }
    void set_last_of(uint32_t r, int32_t last) const { l1_set_word(l1_, kStateLasts + r, static_cast<uint32_t>(last)); }

private:
    uint32_t l1_;
};

// Where one cache position lives: dim tile 0's page, and its row in that tile.
struct CacheRow {
    uint32_t page;
    uint32_t row;
    bool valid;  // false: a paged cache's entry is not a block of the cache (the row is zeroed)
};

// Face rows whose source and destination disagree modulo kSparseReadAlign: each comes in the
// aligned chunk around it into CB Q's page (the reader's scratch, as the Q gather's landing), then
// is copied into place over the core's own NoC (L1 to L1: 16-byte alignment, which both meet).
// bfloat8_b: a row's two exponent bytes (faces 2h and 2h + 1 of its half h of the tile, 16 bytes
// apart) come the same way, in the aligned chunk around them, and are copied by the core, a byte
// each (l1_set_byte: the destination's other exponents are other virtual rows').
class RowLanding {
public:
    static constexpr uint32_t kSlots = kTileBytes / kSparseReadAlign;
    static constexpr uint32_t kExponents = 1u << 31;  // a slot's offset word: the slot holds exponents

    void add(uint64_t source, uint32_t destination, uint32_t kind = 0) {
        if (base_ == 0) {  // the first row that needs it (bfloat16: never on Wormhole)
            cb_reserve_back(kCbQ, 1);
            base_ = get_write_ptr(kCbQ);
        }
        const uint32_t slot = base_ + count_ * kSparseReadAlign;
        read_bytes(source & ~uint64_t(kSparseReadAlign - 1), slot, kSparseReadAlign);
        offset_[count_] = static_cast<uint32_t>(source) % kSparseReadAlign | kind;
        destination_[count_] = destination;
        if (++count_ == kSlots) {
            flush();
        }
    }

    void flush() {
        if (count_ == 0) {
            return;
        }
        wait_for_reads();
        for (uint32_t i = 0; i < count_; ++i) {
            const uint32_t landed = base_ + i * kSparseReadAlign + (offset_[i] & ~kExponents);
            if (kSparseBlockFloat && (offset_[i] & kExponents) != 0) {
                for (uint32_t face = 0; face < 2; ++face) {
                    l1_set_byte(destination_[i] + 16 * face, l1_byte(landed + 16 * face));
                }
                continue;
            }
            read_bytes(get_noc_addr(landed), destination_[i], kSparseRowBytes);
        }
        wait_for_reads();
        count_ = 0;
    }

private:
    uint32_t base_ = 0, count_ = 0;
    uint32_t offset_[kSlots];
    uint32_t destination_[kSlots];
};

// Byte offset, in a bfloat8_b tile, of the exponent of row `row`'s face row in half 0 (half 1's is
// 16 bytes on: faces 2h and 2h + 1 of the tile's half h = row / 16).
constexpr uint32_t sparse_exponent_offset(uint32_t row) { return (row / 16) * 32 + row % 16; }

// Virtual position tile `tile` of the request: rows j = 0..31 of its live positions (virtual
// position 32 * tile + j < count) gathered from the cache rows the list names, each row as two
// face rows per dim tile (one NoC read each, or through RowLanding; bfloat8_b: and its two
// exponent bytes, through RowLanding) into row j of the tile at `dst`. `locate` maps a cache
// position to its CacheRow (contiguous or through the page table). Rows past the count are left
// for zero_stale_rows, as a dense tail is.
template <typename Accessor, typename Locate>
void gather_sparse_tile(const SparseList& list, uint32_t count, uint32_t tile, const Accessor& reader, uint32_t dst,
                        const Locate& locate) {
    const uint32_t first = tile * kTilePositions;
    const uint32_t rows = count - first < kTilePositions ? count - first : kTilePositions;
    RowLanding landing;
    for (uint32_t j = 0; j < rows; ++j) {
        const CacheRow at = locate(list.at(first + j));
        for (uint32_t d = 0; d < kDimTiles; ++d) {
            const uint32_t tile_dst = dst + d * kSparseTileBytes;
            if (!at.valid) {  // its data zeroed: +0 whatever the row's exponent
                for (uint32_t half = 0; half < 2; ++half) {
                    for (uint32_t word = 0; word < kSparseRowBytes / sizeof(uint32_t); ++word) {
                        l1_set_word(tile_dst + kv_face_row_offset(j, half, kSparseTileBytes), word, 0);
                    }
                }
                continue;
            }
            const uint64_t page = reader.get_noc_addr(at.page + d, 0);
            for (uint32_t half = 0; half < 2; ++half) {
                const uint64_t source = page + kv_face_row_offset(at.row, half, kSparseTileBytes);
                const uint32_t target = tile_dst + kv_face_row_offset(j, half, kSparseTileBytes);
                if ((static_cast<uint32_t>(source) - target) % kSparseReadAlign == 0) {
                    read_bytes(source, target, kSparseRowBytes);
                } else {
                    landing.add(source, target);
                }
            }
            if constexpr (kSparseBlockFloat) {
                landing.add(page + sparse_exponent_offset(at.row), tile_dst + sparse_exponent_offset(j),
                            RowLanding::kExponents);
            }
        }
    }
    landing.flush();
}

}  // namespace flashdecode
