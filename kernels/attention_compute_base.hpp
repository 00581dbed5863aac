// The compute kernel's compile-time constants (from its named args, attention_args.hpp) and the
// DST / CB helpers every stage uses. Part of the compute kernel (attention_compute.cpp), its only
// includer: the anonymous namespace is that one translation unit's.
#pragma once

#include <cstdint>

#include "api/compute/bcast.h"
#include "api/compute/binary_max_min.h"
#include "api/compute/compute_kernel_api.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/eltwise_binary.h"
#include "api/compute/eltwise_binary_sfpu.h"
#include "api/compute/eltwise_unary/binop_with_scalar.h"
#include "api/compute/eltwise_unary/exp.h"
#include "api/compute/eltwise_unary/recip.h"
#include "api/compute/matmul.h"
#include "api/compute/reconfig_data_format.h"
#include "api/compute/reduce.h"
#include "api/compute/tile_move_copy.h"
#include "api/debug/kernel_profiler.hpp"
#include "attention_args.hpp"
#include "attention_compute_sfpu.hpp"
#include "attention_protocol.hpp"

using namespace flashdecode;

namespace {

constexpr uint32_t kDimTiles = args::dim_tiles();
constexpr uint32_t kBlockTiles = args::block_tiles();
constexpr uint32_t kDstTiles = args::dst_tiles();
constexpr uint32_t kBlockPages = kBlockTiles * kDimTiles;
// The sliding window in positions, 0 for none (attention_protocol.hpp "Sliding window"), and the
// CONST pages per request it implies.
constexpr uint32_t kWindow = args::window();
// Attention sinks (attention_protocol.hpp "Attention sink"): 1 when the call has them.
constexpr bool kSink = args::sink() != 0;
// The attention chunk in positions, 0 for none (attention_protocol.hpp "Chunked-local attention"):
// a start like the window's, through the same CONST pages and window_page.
constexpr uint32_t kChunk = args::attention_chunk();
constexpr bool kWindowed = kWindow != 0 || kChunk != 0;
// Q row tiles per request (attention_protocol.hpp "Q row tiles"): one running state (M, L, O) per
// row tile, every K/V block serving them all; 1 normally.
constexpr uint32_t kRowTiles = args::row_tiles();
// Row-tile users (attention_protocol.hpp "Row-tile users"): row tile r is user `user + r`, its own
// position and masks (ttnn's spec_multi_pos_tiles candidates against one scan of the cache).
constexpr bool kRowTileUsers = args::row_tile_users() != 0;
constexpr uint32_t kConstPages = const_pages(kWindowed, kSink, kRowTiles, kRowTileUsers);
// QSTAGE / QS pages per request: row tile r's query at pages r * dim_tiles ...
constexpr uint32_t kQsPages = kRowTiles * kDimTiles;
// 1 at LoFi / HiFi2: the FPU multiplies by SrcB's top 7 significant bits only, truncated, so the
// query scale and 1 / L (both in SrcB, constant along a row) would bias every output row alike;
// those two multiplies then run on the SFPU in fp32 (scale_query, normalise_row).
constexpr bool kRowScalingOnSfpu = args::row_scaling_on_sfpu() != 0;
// Block row sums in this many DST tiles, then added (block_row_sums): 1 with fp32 DST; with a bf16
// DST, whose every accumulation step rounds to bfloat16, a few shorter sums (shape.py
// ComputeOptions.row_sum_groups).
constexpr uint32_t kRowSumGroups = args::row_sum_groups();
// Attention mask (attention_protocol.hpp "Attention mask"): nonzero when the call has one.
constexpr uint32_t kMaskUsers = args::mask_users();
constexpr uint32_t kInboxSlots = args::inbox_slots();
// return_lse (attention_protocol.hpp "Log-sum-exp output"): 1 when the program writes the LSE.
constexpr bool kLse = args::lse() != 0;
// Values from keys (attention_protocol.hpp "Values from keys", MLA's latent): V is the K block
// already in L1, so P . V reads CB K and K stays until the last row tile's P . V; CB V is unused.
constexpr bool kValuesFromKeys = args::values_from_keys() != 0;
// Sparse decode (attention_protocol.hpp "Sparse decode"): a request's count is the reader's.
constexpr bool kSparse = args::sparse_lists() != 0;
constexpr uint32_t kCbValues = kValuesFromKeys ? kCbK : kCbV;
constexpr uint32_t kInboxPages = kInboxSlots * partial_pages(kDimTiles);
// Dim tiles per DST acquire when a step produces one tile per dim tile (PV, O updates, OUT).
constexpr uint32_t kDimChunk = kDimTiles < kDstTiles ? kDimTiles : kDstTiles;
// fp32 DST: the running O and L are float32 CBs, and each block's rescale reads them through a
// source register, which holds TF32 and truncates. Truncated once a block, O's elements and L each
// lose their own share (by their mantissas), so the old blocks' weights drift apart block by block
// (measured: rel-L2 1.28e-2 after 117 two-tile blocks). Rounded to TF32 (nearest) before they are
// packed (round_state_to_tf32, in place), the next read is exact and what is left is unbiased.
constexpr bool kRoundState = DST_ACCUM_MODE;
// Dim tiles per DST acquire when O is rescaled by C: one fewer than kDimChunk when the SFPU rescale
// (times_correction, C in DST tile `count`) would otherwise have no DST tile left for C.
constexpr uint32_t kRescaleChunk = kRowScalingOnSfpu && kDimChunk == kDstTiles ? kDimChunk - 1 : kDimChunk;
static_assert(kDstTiles >= 2, "the running-max step holds two tiles in DST");
static_assert(kRowSumGroups >= 1 && kRowSumGroups <= kDstTiles, "row sums: one DST tile per group");
static_assert(kRowTiles == 1 || kMaskUsers == 0, "an attention mask's rows are one row tile's: one row tile per request");

// The CB each unit's data format was last set for (compute_kernel_hw_startup's first: kernel_main
// sets it). Every TRISC runs the same control flow, so each thread's copy names the same CBs. One
// copy per core: the emulator runs every core's kernel in one process, a thread per core.
struct ConfiguredFormats {
    uint32_t srca, srcb, pack;
};
#ifdef EMU_ALL_TRISC_THREADS
thread_local ConfiguredFormats g_formats;
#else
ConfiguredFormats g_formats;
#endif

// Points the SrcA / SrcB unpackers at the formats of `srca` / `srcb`. A unit already set for that CB
// takes no call; the others take the LLK's conditional reconfig (old CB, new CB), which reprograms
// a unit only when the two CBs' formats differ -- a statistics CB after another, or a data CB after
// another, costs a compare, not a reprogramming (issue 35: ~12 reconfig sites a step in ttnn's op).
void unpack_formats(uint32_t srca, uint32_t srcb) {
    const bool new_a = srca != g_formats.srca, new_b = srcb != g_formats.srcb;
    if (new_a && new_b) {
        reconfig_data_format(g_formats.srca, srca, g_formats.srcb, srcb);
    } else if (new_a) {
        reconfig_data_format_srca(g_formats.srca, srca);
    } else if (new_b) {
        reconfig_data_format_srcb(g_formats.srcb, srcb);
    }
    g_formats.srca = srca;
    g_formats.srcb = srcb;
}
void srca_format(uint32_t cb) { unpack_formats(cb, g_formats.srcb); }
void srcb_format(uint32_t cb) { unpack_formats(g_formats.srca, cb); }

// Points the packer at `out`'s format, as unpack_formats.
void pack_format(uint32_t out) {
    if (out != g_formats.pack) {
        pack_reconfig_data_format(g_formats.pack, out);
        g_formats.pack = out;
    }
}

// Points the SrcA / SrcB unpackers at the formats of `srca` / `srcb` and the packer at `out`'s,
// before a step whose CBs may differ in format (statistics CBs may be float32, data CBs bfloat16).
// Which operand feeds which source register: binary and broadcast ops icb0 -> SrcA; matmul
// in0 -> SrcB, in1 -> SrcA; REDUCE_ROW MAX data -> SrcA, SUM data -> SrcB; copy -> SrcA.
void formats(uint32_t srca, uint32_t srcb, uint32_t out) {
    unpack_formats(srca, srcb);
    pack_format(out);
}

// Hands DST tiles [0, count) to the packer and packs them in order into `cb`'s reserved pages.
void pack_reserved(uint32_t cb, uint32_t count) {
    tile_regs_commit();
    tile_regs_wait();
    for (uint32_t i = 0; i < count; ++i) {
        pack_tile(i, cb);
    }
    tile_regs_release();
}

// Hands DST tiles [0, count) to the packer and appends them to `cb` as `count` new pages.
void pack_to(uint32_t cb, uint32_t count) {
    cb_reserve_back(cb, count);
    pack_reserved(cb, count);
    cb_push_back(cb, count);
}

template <uint32_t kChunk = kDimChunk>
constexpr uint32_t chunk_size(uint32_t d0) { return kDimTiles - d0 < kChunk ? kDimTiles - d0 : kChunk; }

// Runs `tile_op(d, i)` for every dim tile d, into DST tile i, one DST chunk (kDimChunk tiles) per
// acquire, and hands each chunk's tile count to `finish`, which packs them.
template <typename TileOp, typename Finish>
void per_dim_chunk(TileOp tile_op, Finish finish) {
    for (uint32_t d0 = 0; d0 < kDimTiles; d0 += kDimChunk) {
        const uint32_t count = chunk_size(d0);
        tile_regs_acquire();
        for (uint32_t i = 0; i < count; ++i) {
            tile_op(d0 + i, i);
        }
        finish(count);
    }
}

// DST tile `dst` = 0 (a finite tile times 0, on the SFPU).
void zero_dst(uint32_t dst) {
    binop_with_scalar_tile_init();
    live_mul_scalar_tile(dst, 0u);
}

// DST tile `dst` = tile `a` of `cb_a` times tile `b` of `cb_b` (`b_is_column`: its column 0, across
// every column), elementwise on the SFPU in fp32 (no fidelity phases), with DST tile `scratch` for
// the second factor. Both are copies into DST, no FPU multiply. DST is acquired by the caller.
void sfpu_product(uint32_t cb_a, uint32_t a, uint32_t cb_b, uint32_t b, bool b_is_column, uint32_t dst = 0,
                  uint32_t scratch = 1) {
    srca_format(cb_a);
    copy_init(cb_a);
    copy_tile(cb_a, a, dst);
    if (b_is_column) {
        srcb_format(cb_b);
        unary_bcast_init<BroadcastType::COL>(cb_b);
        unary_bcast<BroadcastType::COL>(cb_b, b, scratch);
    } else {
        srca_format(cb_b);
        copy_init(cb_b);
        copy_tile(cb_b, b, scratch);
    }
    mul_binary_tile_init();
    live_mul_tiles(dst, scratch, dst);
}

// Copies `count` pages of `cb` from page `first` into `out`'s reserved pages, chunked by DST size.
void copy_pages(uint32_t cb, uint32_t first, uint32_t count, uint32_t out) {
    formats(cb, cb, out);
    copy_init(cb);
    for (uint32_t done = 0; done < count; done += kDimChunk) {
        const uint32_t n = count - done < kDimChunk ? count - done : kDimChunk;
        tile_regs_acquire();
        for (uint32_t i = 0; i < n; ++i) {
            copy_tile(cb, first + done + i, i);
        }
        pack_reserved(out, n);
    }
}

// Row tile `row`'s kv_positions: its own POSITIONS entry's with row-tile users (UNPACK reads it and
// shares it with MATH and PACK), else the request's.
uint32_t row_kv_positions(const Params& p, uint32_t row) {
    if constexpr (kRowTileUsers) {
        return p.kv_positions_at(static_cast<int32_t>(read_tile_value(kCbPositions, 0, row_tile_user(p.user, row, true))));
    }
    return p.kv_positions;
}

// The request's kv_positions: with row-tile users the largest of its row tiles' (what the reader
// reads and the slices split); sparse decode, the virtual count the reader left in word
// sparse_count_word(r) (r: the request's index in the work row); else its own entry's.
uint32_t request_kv_positions(const Params& p, uint32_t r) {
    if constexpr (kSparse) {
        return p.kv_positions_at(static_cast<int32_t>(read_tile_value(kCbPositions, 0, sparse_count_word(r))));
    }
    uint32_t most = 0;
    for (uint32_t row = 0; row < (kRowTileUsers ? kRowTiles : 1); ++row) {
        const uint32_t own = p.kv_positions_at(static_cast<int32_t>(read_tile_value(kCbPositions, 0, row_tile_user(p.user, row, kRowTileUsers))));
        most = own > most ? own : most;
    }
    return most;
}

}  // namespace
