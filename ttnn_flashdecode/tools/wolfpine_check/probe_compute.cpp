// wolfpine check: the probe compute kernel, in the attention compute kernel's place (FPU only:
// unpack, FPU element-wise add and copy, pack; no SFPU, which cannot be built without SFPI).
//
// It consumes exactly the CB traffic attention_compute.cpp consumes -- WORK and POSITIONS once, then
// per request QSTAGE, CONST, every K and V block, and for a split slice MAX_INBOX, MAX_GLOBAL
// (slices 1..) and PARTIALS -- and produces exactly what the writer and the split-K combine expect
// (OUT; MAX_OUT; OUTBOX), in the same order. Its output is a fingerprint (additions of small
// integers: exact in bfloat16, float32 and DST):
//   slice state   O[d] = Q[d] + sum K[t, d] + 2 sum V[t, d]   over the slice's live tiles t, as the
//                 reader left them (stale rows zeroed), d every dim tile;
//   not split     OUT[d] = O[d];
//   split         pass 1: MAX_OUT = O[0] + the children's MAX_OUT (slice 0: M = sum over slices of O[0]);
//                 pass 2: L = M (slice 0: its own copy; others: MAX_GLOBAL, from the parent), then
//                 (O, L) += each child's partial; slices 1.. send (O, L) in OUTBOX; slice 0 writes
//                 OUT[d] = O[d] + (d == 0 ? L : 0).
// So slice 0 of a request split n ways writes OUT[d] = n Q[d] + Ksum[d] + 2 Vsum[d], plus n M on
// d = 0: every byte the reader delivers, every partial and max that crosses cores, and every row
// the writer places reach the output.
//
// The check writes this file into its scratch folder with PROTOCOL_HEADER defined first: the
// absolute path of the op's attention_protocol.hpp.
#include <cstdint>

#include "api/compute/compute_kernel_api.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/eltwise_binary.h"
#include "api/compute/reconfig_data_format.h"
#include "api/compute/tile_move_copy.h"
#include PROTOCOL_HEADER

using namespace flashdecode;

namespace {

constexpr uint32_t kDimTiles = get_named_compile_time_arg_val("dim_tiles");
constexpr uint32_t kBlockTiles = get_named_compile_time_arg_val("block_tiles");
constexpr uint32_t kDstTiles = get_named_compile_time_arg_val("dst_tiles");
constexpr uint32_t kBlockPages = kBlockTiles * kDimTiles;
constexpr uint32_t kWindow = get_named_compile_time_arg_val("window");
constexpr bool kSink = get_named_compile_time_arg_val("sink") != 0;
constexpr uint32_t kChunk = get_named_compile_time_arg_val("attention_chunk");
constexpr uint32_t kRowTiles = get_named_compile_time_arg_val("row_tiles");
static_assert(kRowTiles == 1, "the probe serves one Q row tile per request");
constexpr uint32_t kConstPages = const_pages(kWindow != 0 || kChunk != 0, kSink, kRowTiles, false);  // one row tile: no row-tile users
constexpr uint32_t kMaskUsers = get_named_compile_time_arg_val("mask_users");
constexpr uint32_t kInboxSlots = get_named_compile_time_arg_val("inbox_slots");
constexpr uint32_t kPartial = partial_pages(kDimTiles);
constexpr uint32_t kInboxPages = kInboxSlots * kPartial;
static_assert(kDimTiles + 1 <= kDstTiles, "the probe holds a request's dim tiles and L in DST");
static_assert(kMaskUsers == 0, "the probe does not consume an attention mask's CB");

// DST[d] = copy of `cb` page first + d, d < count.
void copy_into_dst(uint32_t cb, uint32_t first, uint32_t count, uint32_t dst) {
    reconfig_data_format_srca(cb);
    copy_init(cb);
    for (uint32_t i = 0; i < count; ++i) {
        copy_tile(cb, first + i, dst + i);
    }
}

// DST[dst + i] += `cb` page first + i, i < count (FPU add, DST moved to SrcA).
void add_into_dst(uint32_t cb, uint32_t first, uint32_t count, uint32_t dst) {
    reconfig_data_format_srcb(cb);
    add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(cb);
    for (uint32_t i = 0; i < count; ++i) {
        add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(cb, first + i, dst + i);
    }
}

// Packs DST[first, first + count) into `cb`'s reserved pages (the caller holds DST, acquired).
void pack_dst(uint32_t cb, uint32_t first, uint32_t count) {
    pack_reconfig_data_format(cb);
    for (uint32_t i = 0; i < count; ++i) {
        pack_tile(first + i, cb);
    }
}

// O = Q + sum K + 2 sum V over the slice's blocks (live tiles only), left in DST[0, kDimTiles)
// (acquired here, not committed).
void slice_state(const Params& p) {
    cb_wait_front(kCbQStage, kDimTiles);
    tile_regs_acquire();
    copy_into_dst(kCbQStage, 0, kDimTiles, 0);
    cb_pop_front(kCbQStage, kDimTiles);
    for (uint32_t block = 0; block < p.blocks(); ++block) {
        const uint32_t live = p.live_tiles_in_block(block);
        cb_wait_front(kCbK, kBlockPages);
        for (uint32_t t = 0; t < live; ++t) {
            add_into_dst(kCbK, t * kDimTiles, kDimTiles, 0);
        }
        cb_pop_front(kCbK, kBlockPages);
        cb_wait_front(kCbV, kBlockPages);
        for (uint32_t t = 0; t < live; ++t) {
            add_into_dst(kCbV, t * kDimTiles, kDimTiles, 0);
            add_into_dst(kCbV, t * kDimTiles, kDimTiles, 0);
        }
        cb_pop_front(kCbV, kBlockPages);
    }
}

// Commits DST and packs [0, count) into `cb` as `count` new pages.
void commit_to(uint32_t cb, uint32_t count) {
    tile_regs_commit();
    cb_reserve_back(cb, count);
    tile_regs_wait();
    pack_dst(cb, 0, count);
    tile_regs_release();
    cb_push_back(cb, count);
}

void combine(const Params& p) {
    const bool root = p.reducer();
    const uint32_t children = p.tree_children();
    commit_to(kCbO, kDimTiles);  // the slice's own O
    cb_wait_front(kCbO, kDimTiles);
    // Pass 1: MAX_OUT = O[0] + the children's subtree "maxima", each as it lands.
    tile_regs_acquire();
    copy_into_dst(kCbO, 0, 1, 0);
    for (uint32_t j = 0; j < children; ++j) {
        cb_wait_front(kCbMaxInbox, j + 1);
        add_into_dst(kCbMaxInbox, j, 1, 0);
    }
    tile_regs_commit();
    cb_reserve_back(kCbMaxOut, 1);
    if (root) {
        cb_reserve_back(kCbMB, 1);
    }
    tile_regs_wait();
    pack_dst(kCbMaxOut, 0, 1);
    if (root) {
        pack_dst(kCbMB, 0, 1);
    }
    tile_regs_release();
    cb_push_back(kCbMaxOut, 1);
    if (root) {
        cb_push_back(kCbMB, 1);
    }
    cb_wait_front(kCbMaxInbox, kInboxSlots);
    cb_pop_front(kCbMaxInbox, kInboxSlots);  // the whole inbox, as the reader pushed it
    // Pass 2: (O, L = the request's M) + each child's partial.
    const uint32_t m_request = root ? kCbMB : kCbMaxGlobal;
    cb_wait_front(m_request, 1);
    tile_regs_acquire();
    copy_into_dst(kCbO, 0, kDimTiles, 0);
    copy_into_dst(m_request, 0, 1, kDimTiles);
    for (uint32_t j = 0; j < children; ++j) {
        cb_wait_front(kCbPartials, (j + 1) * kPartial);
        add_into_dst(kCbPartials, j * kPartial, kPartial, 0);
    }
    cb_wait_front(kCbPartials, kInboxPages);
    cb_pop_front(kCbPartials, kInboxPages);
    cb_pop_front(kCbO, kDimTiles);
    cb_pop_front(m_request, 1);
    if (!root) {
        commit_to(kCbOutbox, kPartial);  // O pages, then L
        return;
    }
    tile_regs_commit();  // O into O, L into L, then OUT = O + (L on dim tile 0)
    cb_reserve_back(kCbO, kDimTiles);
    cb_reserve_back(kCbL, 1);
    tile_regs_wait();
    pack_dst(kCbO, 0, kDimTiles);
    pack_dst(kCbL, kDimTiles, 1);
    tile_regs_release();
    cb_push_back(kCbO, kDimTiles);
    cb_push_back(kCbL, 1);
    cb_wait_front(kCbO, kDimTiles);
    cb_wait_front(kCbL, 1);
    tile_regs_acquire();
    copy_into_dst(kCbO, 0, kDimTiles, 0);
    add_into_dst(kCbL, 0, 1, 0);
    cb_pop_front(kCbO, kDimTiles);
    cb_pop_front(kCbL, 1);
    commit_to(kCbOut, kDimTiles);
}

}  // namespace

void kernel_main() {
    compute_kernel_hw_startup(kCbQStage, kCbConst, kCbOut);
    cb_wait_front(kCbWork, 1);
    const uint32_t requests = served_requests(read_tile_value(kCbWork, 0, kRowRequestCount));
    cb_wait_front(kCbPositions, 1);
    for (uint32_t r = 0; r < requests; ++r) {
        Params p = read_request([](uint32_t i) { return read_tile_value(kCbWork, 0, i); }, r);
        if (!p.valid_layout(kDimTiles, kBlockTiles)) {
            continue;
        }
        p.kv_positions = p.kv_positions_at(static_cast<int32_t>(read_tile_value(kCbPositions, 0, p.user)));
        p.window = kWindow;
        p.attention_chunk = kChunk;
        cb_wait_front(kCbConst, kConstPages);
        slice_state(p);
        if (p.split()) {
            combine(p);
        } else {
            commit_to(kCbOut, kDimTiles);
        }
        cb_pop_front(kCbConst, kConstPages);
    }
    cb_pop_front(kCbPositions, 1);
    cb_pop_front(kCbWork, 1);
}
