// Flash-decode attention, compute: one KV group's query rows against the KV cache with an online
// softmax (DESIGN.md §6). Never holds more than one K/V block; L1 use is flat in the context.
//
//   QS = QSTAGE * scale                                   once per request
//   per block j (only its live position tiles are touched):
//     S     = QS . K_j^T  (softcap: S = c tanh(S / c); then + the row masks on the last one or two
//                          live tiles, the window / chunk masks, the attention mask)
//     M_NEW = max(M_OLD, rowmax(S))
//     P     = exp(S - M_NEW)
//     C     = exp(M_OLD - M_NEW)                          (not on the first block)
//     L     = C * L + rowsum(P)
//     O     = C * O + P . V_j
//   OUT = O * (1 / L)
//   LSE = M + log(L)                                      return_lse only (sinks: M = max(M, sink))
//
// Compile-time args: named dim_tiles, block_tiles, dst_tiles (DST tiles per acquire for this
// compute config), exp_approx (approximate exp), window, attention_chunk, sink, mask_users,
// softcap and softcap_recip (fp32 bits; 0: no cap), inbox_slots, lse (1: return_lse), row_tiles (R,
// Q row tiles per request: attention_protocol.hpp "Q row tiles"), values_from_keys (1: V is K's
// block in CB K, no CB V). Runtime args: none.
// CBs in (from the reader): WORK 1 page once (this core's work row: the request count, then 16
// parameter-block words per request), POSITIONS 1 page once (an int32 per user: each request's kv_positions,
// attention_protocol.hpp kv_positions_at), then per request QSTAGE R*dim_tiles, CONST 4 (const_pages), K and V
// block_tiles*dim_tiles per block; every block serves the R row tiles in turn, each with its own
// running state (M, L: R pages; O: R*dim_tiles), kept in row-tile order.
// CB out (to the writer): OUT dim_tiles per row tile (and, with lse, LSE 1 before it). The rest are internal (residency.py lists them).
// Row statistics (M, L, LSUM, C) live in column 0 of their tile, where REDUCE_ROW leaves them; the
// other columns hold whatever the packer leaves there, and every step either broadcasts column 0
// or works element by element, so they never reach column 0.
// Rows are the request's stage rows (attention_protocol.hpp "Request kinds": Q heads of a group,
// a chunk's positions, or both); every step is row-local, so padding rows never reach real ones.
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
#include "attention_protocol.hpp"

using namespace flashdecode;

namespace {

constexpr uint32_t kDimTiles = get_named_compile_time_arg_val("dim_tiles");
constexpr uint32_t kBlockTiles = get_named_compile_time_arg_val("block_tiles");
constexpr uint32_t kDstTiles = get_named_compile_time_arg_val("dst_tiles");
// The compute config's math_approx_mode, as a named arg: tt-metal declares APPROX for the MATH and
// PACK threads only, so a kernel that names it outside MATH(...) does not build for UNPACK.
constexpr bool kExpApprox = get_named_compile_time_arg_val("exp_approx") != 0;
constexpr uint32_t kBlockPages = kBlockTiles * kDimTiles;
// The sliding window in positions, 0 for none (attention_protocol.hpp "Sliding window"), and the
// CONST pages per request it implies.
constexpr uint32_t kWindow = get_named_compile_time_arg_val("window");
// Attention sinks (attention_protocol.hpp "Attention sink"): 1 when the call has them.
constexpr bool kSink = get_named_compile_time_arg_val("sink") != 0;
// The attention chunk in positions, 0 for none (attention_protocol.hpp "Chunked-local attention"):
// a start like the window's, through the same CONST pages and window_page.
constexpr uint32_t kChunk = get_named_compile_time_arg_val("attention_chunk");
constexpr bool kWindowed = kWindow != 0 || kChunk != 0;
// Q row tiles per request (attention_protocol.hpp "Q row tiles"): one running state (M, L, O) per
// row tile, every K/V block serving them all; 1 normally.
constexpr uint32_t kRowTiles = get_named_compile_time_arg_val("row_tiles");
// Row-tile users (attention_protocol.hpp "Row-tile users"): row tile r is user `user + r`, its own
// position and masks (ttnn's spec_multi_pos_tiles candidates against one scan of the cache).
constexpr bool kRowTileUsers = get_named_compile_time_arg_val("row_tile_users") != 0;
constexpr uint32_t kConstPages = const_pages(kWindowed, kSink, kRowTiles, kRowTileUsers);
// QSTAGE / QS pages per request: row tile r's query at pages r * dim_tiles ...
constexpr uint32_t kQsPages = kRowTiles * kDimTiles;
// 1 at LoFi / HiFi2: the FPU multiplies by SrcB's top 7 significant bits only, truncated, so the
// query scale and 1 / L (both in SrcB, constant along a row) would bias every output row alike;
// those two multiplies then run on the SFPU in fp32 (scale_query, normalise_row).
constexpr bool kRowScalingOnSfpu = get_named_compile_time_arg_val("row_scaling_on_sfpu") != 0;
// Block row sums in this many DST tiles, then added (block_row_sums): 1 with fp32 DST; with a bf16
// DST, whose every accumulation step rounds to bfloat16, a few shorter sums (shape.py
// ComputeOptions.row_sum_groups).
constexpr uint32_t kRowSumGroups = get_named_compile_time_arg_val("row_sum_groups");
// Logit softcap c (FA3's softcap, Gemma 2's attn_logit_softcapping) as fp32 bits, 0 for none, and
// 1 / c (fp32 bits, computed on the host: the kernel divides nothing): S = c tanh(S / c).
constexpr uint32_t kSoftcap = get_named_compile_time_arg_val("softcap");
constexpr uint32_t kSoftcapRecip = get_named_compile_time_arg_val("softcap_recip");
// Attention mask (attention_protocol.hpp "Attention mask"): nonzero when the call has one.
constexpr uint32_t kMaskUsers = get_named_compile_time_arg_val("mask_users");
constexpr uint32_t kInboxSlots = get_named_compile_time_arg_val("inbox_slots");
// return_lse (attention_protocol.hpp "Log-sum-exp output"): 1 when the program writes the LSE.
constexpr bool kLse = get_named_compile_time_arg_val("lse") != 0;
// Values from keys (attention_protocol.hpp "Values from keys", MLA's latent): V is the K block
// already in L1, so P . V reads CB K and K stays until the last row tile's P . V; CB V is unused.
constexpr bool kValuesFromKeys = get_named_compile_time_arg_val("values_from_keys") != 0;
constexpr uint32_t kCbValues = kValuesFromKeys ? kCbK : kCbV;
constexpr uint32_t kInboxPages = kInboxSlots * partial_pages(kDimTiles);
// Dim tiles per DST acquire when a step produces one tile per dim tile (PV, O updates, OUT).
constexpr uint32_t kDimChunk = kDimTiles < kDstTiles ? kDimTiles : kDstTiles;
// fp32 DST: the running O and L are float32 CBs, and each block's rescale reads them through a
// source register, which holds TF32 and truncates. Truncated once a block, O's elements and L each
// lose their own share (by their mantissas), so the old blocks' weights drift apart block by block
// (measured: rel-L2 1.28e-2 after 117 two-tile blocks). Rounded to TF32 (nearest) before they are
// packed (round_state_to_tf32), the next read is exact and what is left is unbiased.
constexpr bool kRoundState = DST_ACCUM_MODE;
// Dim tiles per DST acquire when O is rescaled by C: one fewer than kDimChunk when the SFPU rescale
// (times_correction) or the TF32 rounding would otherwise have no DST tile left for scratch.
constexpr uint32_t kRescaleChunk =
    (kRowScalingOnSfpu || kRoundState) && kDimChunk == kDstTiles ? kDimChunk - 1 : kDimChunk;
static_assert(kDstTiles >= 2, "the running-max step holds two tiles in DST");
static_assert(kRowSumGroups >= 1 && kRowSumGroups <= kDstTiles, "row sums: one DST tile per group");
static_assert(kRowTiles == 1 || kMaskUsers == 0, "an attention mask's rows are one row tile's: one row tile per request");

// Points the SrcA / SrcB unpackers at the formats of `srca` / `srcb` and the packer at `out`'s,
// before a step whose CBs differ in format (statistics CBs may be float32, data CBs bfloat16).
// Which operand feeds which source register: binary and broadcast ops icb0 -> SrcA; matmul
// in0 -> SrcB, in1 -> SrcA; REDUCE_ROW MAX data -> SrcA, SUM data -> SrcB; copy -> SrcA.
void formats(uint32_t srca, uint32_t srcb, uint32_t out) {
    reconfig_data_format(srca, srcb);
    pack_reconfig_data_format(out);
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
    mul_unary_tile(dst, 0u);
}

// DST tile `dst` = tile `a` of `cb_a` times tile `b` of `cb_b` (`b_is_column`: its column 0, across
// every column), elementwise on the SFPU in fp32 (no fidelity phases), with DST tile `scratch` for
// the second factor. Both are copies into DST, no FPU multiply. DST is acquired by the caller.
void sfpu_product(uint32_t cb_a, uint32_t a, uint32_t cb_b, uint32_t b, bool b_is_column, uint32_t dst = 0,
                  uint32_t scratch = 1) {
    reconfig_data_format_srca(cb_a);
    copy_init(cb_a);
    copy_tile(cb_a, a, dst);
    if (b_is_column) {
        reconfig_data_format_srcb(cb_b);
        unary_bcast_init<BroadcastType::COL>(cb_b);
        unary_bcast<BroadcastType::COL>(cb_b, b, scratch);
    } else {
        reconfig_data_format_srca(cb_b);
        copy_init(cb_b);
        copy_tile(cb_b, b, scratch);
    }
    mul_binary_tile_init();
    mul_binary_tile(dst, scratch, dst);
}

// QS = QSTAGE * scale (scale = CONST page 1: every element; the FPU broadcasts its [0][0]), every row tile.
void scale_query() {
    cb_wait_front(kCbQStage, kQsPages);
    if constexpr (kRowScalingOnSfpu) {
        pack_reconfig_data_format(kCbQs);
        for (uint32_t t = 0; t < kQsPages; ++t) {
            tile_regs_acquire();
            sfpu_product(kCbQStage, t, kCbConst, kConstPageScale, /*b_is_column=*/false);
            pack_to(kCbQs, 1);
        }
    } else {
        formats(kCbQStage, kCbConst, kCbQs);
        mul_bcast_scalar_init(kCbQStage, kCbConst);
        for (uint32_t q = 0; q < kQsPages; q += kDimTiles) {
            per_dim_chunk([q](uint32_t d, uint32_t i) { mul_tiles_bcast_scalar(kCbQStage, kCbConst, q + d, kConstPageScale, i); },
                          [](uint32_t count) { pack_to(kCbQs, count); });
        }
    }
    cb_pop_front(kCbQStage, kQsPages);
    cb_wait_front(kCbQs, kQsPages);
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
// reads and the slices split), else its own entry's.
uint32_t request_kv_positions(const Params& p) {
    uint32_t most = 0;
    for (uint32_t row = 0; row < (kRowTileUsers ? kRowTiles : 1); ++row) {
        const uint32_t own = p.kv_positions_at(static_cast<int32_t>(read_tile_value(kCbPositions, 0, row_tile_user(p.user, row, kRowTileUsers))));
        most = own > most ? own : most;
    }
    return most;
}

// Score modifier "logit softcap": S = c tanh(S / c) on the scaled scores (DST tile 0), before every
// mask, window and chunk (FA3's and Gemma 2's order; a sink logit is not capped). Three SFPU passes in
// DST (fp32 with fp32_dest_acc_en): times 1 / c, the LLK's accurate tanh (tanh_tile<false>; its
// fp32-DST path is expm1 based, its bfloat16-DST path a degree-6 polynomial clamped at 1), times c.
// A score far past the cap saturates at +-c, never NaN. Matmul's state restored after.
void cap_scores() {
    if constexpr (kSoftcap != 0) {
        binop_with_scalar_tile_init();
        mul_unary_tile(0, kSoftcapRecip);
        tanh_tile_init<false>();
        tanh_tile<false>(0);
        binop_with_scalar_tile_init();
        mul_unary_tile(0, kSoftcap);
        matmul_init(kCbQs, kCbK, /*transpose=*/1);
    }
}

// Score modifier "sliding window": S += the window mask (CONST page kConstPageWindow or
// kConstPageWindowNext) on the window's first tile and the one after it, when some row starts
// inside them (attention_protocol.hpp "Sliding window"); S is DST tile 0, matmul's state restored.
void add_window_mask(const Params& p, uint32_t tile) {
    if constexpr (kWindowed) {
        const uint32_t page = p.window_page(tile);
        if (page != kNoMask) {
            add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbConst);
            add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbConst, page, 0);
            matmul_init(kCbQs, kCbK, /*transpose=*/1);
        }
    }
}

// Score modifier "attention mask": S += MASK page t, the block's t-th live tile's mask rows
// (attention_protocol.hpp "Attention mask"), already clamped by the reader; S is DST tile 0.
void add_attn_mask(uint32_t t) {
    if constexpr (kMaskUsers != 0) {
        add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbMask);
        add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbMask, t, 0);
        matmul_init(kCbQs, kCbK, /*transpose=*/1);
    }
}

// S = QS . K^T for the block's `live` tiles, the first of them window tile `first_tile`, QS from page
// `qs` (row tile qs / dim_tiles); a masked tile (the last live one and, with several rows per head,
// the one before) gets its CONST mask page. Row-tile users: row tile qs / dim_tiles's own masks,
// from its own kv positions `own` (own_mask_page).
void scores(const Params& p, uint32_t live, uint32_t first_tile, uint32_t qs, uint32_t own = 0) {
    DeviceZoneScopedN("fd-compute-scores");
    cb_reserve_back(kCbS, kBlockTiles);
    if constexpr (kMaskUsers != 0) {
        cb_wait_front(kCbMask, kBlockTiles);
    }
    formats(kCbK, kCbQs, kCbS);
    matmul_init(kCbQs, kCbK, /*transpose=*/1);
    for (uint32_t t = 0; t < live; ++t) {
        tile_regs_acquire();
        for (uint32_t d = 0; d < kDimTiles; ++d) {
            matmul_tiles(kCbQs, kCbK, qs + d, t * kDimTiles + d, 0);
        }
        cap_scores();
        const uint32_t mask_page = kRowTileUsers
                                       ? own_mask_page(own, first_tile + t, row_mask_page(kSink, kRowTiles, qs / kDimTiles))
                                       : p.mask_page(first_tile + t);
        if (mask_page != kNoMask) {
            // S += MASK: 0 on each row's live columns, MASK_VALUE on its dead ones, so exp() zeroes them.
            add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbConst);
            add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbConst, mask_page, 0);
            matmul_init(kCbQs, kCbK, /*transpose=*/1);
        }
        add_window_mask(p, first_tile + t);
        add_attn_mask(t);
        tile_regs_commit();
        tile_regs_wait();
        pack_tile(0, kCbS);
        tile_regs_release();
    }
    cb_push_back(kCbS, kBlockTiles);
    if constexpr (kMaskUsers != 0) {
        cb_pop_front(kCbMask, kBlockTiles);
    }
}

// The row max (MAX) or row sum (SUM) over the block's `live` tiles of `cb` into DST tile 0 (tile t
// into DST tile t % `groups`: block_row_sums) (acquired here), for packing into a CB like `out`;
// `cb` keeps its pages. REDUCE_ROW
// routes MAX data to SrcA and SUM data to SrcB (the scaler takes the other source).
template <PoolType kPool>
void reduce_rows(uint32_t cb, uint32_t live, uint32_t out, uint32_t groups = 1) {
    cb_wait_front(cb, kBlockTiles);
    if constexpr (kPool == PoolType::MAX) {
        formats(cb, kCbConst, out);
    } else {
        formats(kCbConst, cb, out);
    }
    reduce_init<kPool, ReduceDim::REDUCE_ROW>(cb, kCbConst, out);
    tile_regs_acquire();
    for (uint32_t t = 0; t < live; ++t) {
        reduce_tile<kPool, ReduceDim::REDUCE_ROW>(cb, kCbConst, t, kConstPageScaler, t % groups);
    }
    reduce_uninit();
}

// M_NEW = max(M_OLD, rowmax(S)); on the first block M_NEW = rowmax(S).
void running_max(uint32_t live, bool first, uint32_t m_old, uint32_t m_new) {
    reduce_rows<PoolType::MAX>(kCbS, live, m_new);
    if (!first) {
        reconfig_data_format_srca(m_old);
        copy_init(m_old);
        copy_tile(m_old, 0, 1);
        binary_max_tile_init();
        binary_max_tile(0, 1, 0);
    }
    pack_to(m_new, 1);
}

// P = exp(S - M_NEW) into SCRATCH, M_NEW page `row` (row tile `row`'s: M_NEW holds one page per row
// tile done so far this block); frees S.
void probabilities(uint32_t live, uint32_t m_new, uint32_t row = 0) {
    cb_wait_front(m_new, row + 1);
    cb_reserve_back(kCbScratch, kBlockTiles);
    formats(kCbS, m_new, kCbScratch);
    sub_bcast_cols_init(kCbS, m_new);
    exp_tile_init<kExpApprox>();
    for (uint32_t t = 0; t < live; ++t) {
        tile_regs_acquire();
        sub_tiles_bcast_cols(kCbS, m_new, t, row, 0);
        exp_tile<kExpApprox>(0);
        tile_regs_commit();
        tile_regs_wait();
        pack_tile(0, kCbScratch);
        tile_regs_release();
    }
    cb_push_back(kCbScratch, kBlockTiles);
    cb_pop_front(kCbS, kBlockTiles);
}

// Packs C from DST tile 0 (each row's factor in column 0, as the max tiles hold it) into CB C. On the
// FPU path as a full tile, C[r][c] = C[r][0]: times_correction then takes C from SrcA and O and L
// both from SrcB, whose every TF32 bit HiFi3 / HiFi4 multiply by. With O in SrcA (a column
// broadcast puts C in SrcB) O lost SrcA's lowest bit at every block and L did not: the output came
// out ~0.02% low per block (measured: 2.2% after 128 blocks).
void pack_correction() {
    pack_to(kCbC, 1);
    if constexpr (!kRowScalingOnSfpu) {
        cb_wait_front(kCbC, 1);
        reconfig_data_format_srcb(kCbC);
        unary_bcast_init<BroadcastType::COL>(kCbC);
        tile_regs_acquire();
        unary_bcast<BroadcastType::COL>(kCbC, 0, 0);
        cb_pop_front(kCbC, 1);
        pack_to(kCbC, 1);
    }
}

// C = exp(M_OLD - M_NEW), M_NEW page `row` (as probabilities); frees M_OLD's front page. `reconfigure`:
// false when the unpackers and packer are already set for statistics CBs (the combine passes).
void correction(uint32_t m_old, uint32_t m_new, bool reconfigure = true, uint32_t row = 0) {
    if (reconfigure) {
        formats(m_old, m_new, kCbC);
    }
    sub_init(m_old, m_new);
    exp_tile_init<kExpApprox>();
    tile_regs_acquire();
    sub_tiles(m_old, m_new, 0, row, 0);
    exp_tile<kExpApprox>(0);
    pack_correction();
    cb_pop_front(m_old, 1);
}

// DST tiles [0, count) = the front `count` pages of `cb` (O or L) times C (pack_correction), CB
// formats already set (SrcA C's, SrcB `cb`'s). On the FPU C is in SrcA for O and L alike. At LoFi /
// HiFi2 on the SFPU (DST tile `count` holds C): the FPU would take `cb` from SrcB truncated to 7
// significant bits (and with C in SrcB, C so truncated re-weights every earlier block against the
// new one, an error that grows with each block whose max rises).
void times_correction(uint32_t cb, uint32_t count) {
    if constexpr (kRowScalingOnSfpu) {
        for (uint32_t i = 0; i < count; ++i) {
            sfpu_product(cb, i, kCbC, 0, /*b_is_column=*/true, i, count);
        }
    } else {
        mul_init(kCbC, cb);
        for (uint32_t i = 0; i < count; ++i) {
            mul_tiles(kCbC, cb, 0, i, i);
        }
    }
}

// Rounds DST tiles [0, count) to TF32, to nearest (kRoundState; else nothing), DST tile `count` the
// scratch: Veltkamp's split c = 8193 x, x' = c - (c - x) keeps 24 - 13 = 11 significant bits, each
// step one fp32 SFPU operation rounded to nearest (SFPMAD). 8193 x is made as 2x * 4096.5, one rounding.
void round_state_to_tf32(uint32_t count) {
    if constexpr (kRoundState) {
        constexpr uint32_t kHalfSplitter = 0x45800400;  // 4096.5f
        const uint32_t scratch = count;
        for (uint32_t i = 0; i < count; ++i) {
            add_binary_tile_init();
            add_binary_tile(i, i, scratch);
            binop_with_scalar_tile_init();
            mul_unary_tile(scratch, kHalfSplitter);
            sub_binary_tile_init();
            sub_binary_tile(scratch, i, i);
            sub_binary_tile(scratch, i, i);
        }
    }
}

// L = C * L + LSUM; frees LSUM (C stays for the output update).
void update_sum() {
    cb_wait_front(kCbC, 1);
    cb_wait_front(kCbL, 1);
    cb_wait_front(kCbLsum, 1);
    formats(kCbC, kCbL, kCbL);
    tile_regs_acquire();
    times_correction(kCbL, 1);
    reconfig_data_format_srcb(kCbLsum);
    add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbLsum);
    add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbLsum, 0, 0);
    round_state_to_tf32(1);
    cb_pop_front(kCbL, 1);
    cb_pop_front(kCbLsum, 1);
    pack_to(kCbL, 1);
}

// The row sums of the block's `live` P tiles (SCRATCH, kept) into DST tile 0 (acquired here), for
// packing into `out`. Tile t sums into DST tile t % groups; the groups' sums pass through S (free
// from probabilities() to the next scores(); a whole block reserved and pushed, so its pages stay
// aligned) and are added in order. A bf16 DST rounds every step of an accumulation to bfloat16, so
// one sum over a long block errs in proportion to its length; kRowSumGroups shorter sums and a few
// adds err about half as much (measured: README "Accuracy by compute config").
void block_row_sums(uint32_t live, uint32_t out) {
    const uint32_t groups = live < kRowSumGroups ? (live == 0 ? 1 : live) : kRowSumGroups;
    if (groups == 1) {
        reduce_rows<PoolType::SUM>(kCbScratch, live, out);
        return;
    }
    reduce_rows<PoolType::SUM>(kCbScratch, live, kCbS, groups);
    cb_reserve_back(kCbS, kBlockTiles);
    pack_reserved(kCbS, groups);
    cb_push_back(kCbS, kBlockTiles);
    cb_wait_front(kCbS, kBlockTiles);
    formats(kCbS, kCbS, out);
    copy_init(kCbS);
    tile_regs_acquire();
    copy_tile(kCbS, 0, 0);
    add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbS);
    for (uint32_t g = 1; g < groups; ++g) {
        add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbS, g, 0);
    }
    cb_pop_front(kCbS, kBlockTiles);
}

// L = rowsum(P) on the first block, else L = C * L + rowsum(P).
void running_sum(uint32_t live, bool first) {
    block_row_sums(live, first ? kCbL : kCbLsum);
    if (first) {
        pack_to(kCbL, 1);
        return;
    }
    pack_to(kCbLsum, 1);
    update_sum();
}

// P . V_j for the block's live tiles, a DST chunk of dim tiles at a time handed to `sink(count)`
// to pack (into O on the first block, else PV; statistics CBs); P stays in SCRATCH.
template <typename Sink>
void weighted_values(uint32_t live, Sink sink) {
    DeviceZoneScopedN("fd-compute-pv");
    cb_wait_front(kCbScratch, kBlockTiles);
    formats(kCbValues, kCbScratch, kCbO);
    matmul_init(kCbScratch, kCbValues, /*transpose=*/0);
    for (uint32_t d0 = 0; d0 < kDimTiles; d0 += kDimChunk) {
        const uint32_t count = chunk_size(d0);
        tile_regs_acquire();
        for (uint32_t t = 0; t < live; ++t) {
            for (uint32_t i = 0; i < count; ++i) {
                matmul_tiles(kCbScratch, kCbValues, t, t * kDimTiles + d0 + i, i);
            }
        }
        sink(count);
    }
}

// O = C * O + PV, chunk by chunk: each chunk's old O pages are popped before its new ones are
// pushed, so O needs only dim_tiles pages.
void rescale_output() {
    cb_wait_front(kCbC, 1);
    cb_wait_front(kCbPv, kDimTiles);
    cb_wait_front(kCbO, kDimTiles);
    for (uint32_t d0 = 0; d0 < kDimTiles; d0 += kRescaleChunk) {
        const uint32_t count = chunk_size<kRescaleChunk>(d0);
        formats(kCbC, kCbO, kCbO);
        tile_regs_acquire();
        times_correction(kCbO, count);  // old O pages of this chunk are at the front
        reconfig_data_format_srcb(kCbPv);
        add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbPv);
        for (uint32_t i = 0; i < count; ++i) {
            add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbPv, d0 + i, i);
        }
        round_state_to_tf32(count);
        cb_pop_front(kCbO, count);
        pack_to(kCbO, count);
    }
    cb_pop_front(kCbPv, kDimTiles);
    cb_pop_front(kCbC, 1);
}

// Score modifier "attention sink" (attention_protocol.hpp "Attention sink"), on the normalising
// core just before O / L, for the row tile at the front of the state CBs (row tile `row`): M' =
// max(M, sink) (sink: CONST page kConstPageSink + row) appended to `m_sink` (the free one of M_A /
// M_B, holding `row` pages before), C = exp(M - M'), L = C * L + exp(sink - M'), O = C * O. Frees
// M; L and O move to the back (after all row tiles they are in order again), M' stays for the LSE
// and normalise.
void fold_sink(uint32_t m_final, uint32_t m_sink, uint32_t row) {
    DeviceZoneScopedN("fd-compute-sink");
    const uint32_t sink = kConstPageSink + row;
    cb_wait_front(m_final, 1);
    formats(m_final, kCbConst, m_sink);
    copy_init(m_final);
    tile_regs_acquire();
    copy_tile(m_final, 0, 0);
    reconfig_data_format_srca(kCbConst);
    copy_init(kCbConst);
    copy_tile(kCbConst, sink, 1);
    binary_max_tile_init();
    binary_max_tile(0, 1, 0);
    pack_to(m_sink, 1);
    cb_wait_front(m_sink, row + 1);
    formats(m_final, m_sink, kCbC);  // C = exp(M - M')
    sub_init(m_final, m_sink);
    exp_tile_init<kExpApprox>();
    tile_regs_acquire();
    sub_tiles(m_final, m_sink, 0, row, 0);
    exp_tile<kExpApprox>(0);
    pack_correction();
    cb_pop_front(m_final, 1);
    formats(kCbConst, m_sink, kCbLsum);  // LSUM = exp(sink - M')
    sub_init(kCbConst, m_sink);
    exp_tile_init<kExpApprox>();
    tile_regs_acquire();
    sub_tiles(kCbConst, m_sink, sink, row, 0);
    exp_tile<kExpApprox>(0);
    pack_to(kCbLsum, 1);
    update_sum();  // L = C * L + LSUM
    cb_wait_front(kCbO, kDimTiles);
    for (uint32_t d0 = 0; d0 < kDimTiles; d0 += kRescaleChunk) {  // O = C * O, a chunk at a time
        const uint32_t count = chunk_size<kRescaleChunk>(d0);
        formats(kCbC, kCbO, kCbO);
        tile_regs_acquire();
        times_correction(kCbO, count);
        cb_pop_front(kCbO, count);
        pack_to(kCbO, count);
    }
    cb_pop_front(kCbC, 1);
}

// Output stage "log-sum-exp" (attention_protocol.hpp "Log-sum-exp output"): LSE = M + log(L) per
// row into CB LSE (float32), both read from the fp32 statistics CBs into DST (fp32 with
// fp32_dest_acc_en; the host requires it), the LLK's accurate log and an SFPU add, so no step
// rounds to bfloat16. An idle slot's L is 0 (normalise folds no sink into it): log(0) = -inf (the
// LLK's special case) and -inf + M (MASK_VALUE) = -inf. Leaves L and M for normalise.
void log_sum_exp(uint32_t m, bool idle) {
    if constexpr (kLse) {
        DeviceZoneScopedN("fd-compute-lse");
        cb_wait_front(kCbL, 1);
        cb_wait_front(m, 1);
        formats(kCbL, kCbL, kCbLse);
        tile_regs_acquire();
        copy_init(kCbL);
        copy_tile(kCbL, 0, 0);
        if (idle) {
            zero_dst(0);  // an idle row: L = 0, so LSE = -inf
        }
        copy_init(m);  // a statistics CB like L: same format
        copy_tile(m, 0, 1);
        log_tile_init();
        log_tile(0);
        add_binary_tile_init();
        add_binary_tile(0, 1, 0);
        pack_to(kCbLse, 1);
    }
}

// OUT = O * (1 / L) (and, with return_lse, the LSE first) for the row tile at the front of the
// state CBs; frees its O, L and running max (`m`'s front page). An idle row's OUT = O * 0 = 0,
// never 0 / 0: an idle slot's O and L are 0; an idle row tile of row-tile users has attended
// only killed columns (O and L finite, from every one weighed alike).
void normalise_row(uint32_t m, bool idle) {
    log_sum_exp(m, idle);
    cb_wait_front(kCbL, 1);
    formats(kCbL, kCbL, kCbLsum);
    copy_init(kCbL);
    recip_tile_init();
    tile_regs_acquire();
    copy_tile(kCbL, 0, 0);
    if (idle) {
        zero_dst(0);
    } else {
        recip_tile(0);
    }
    pack_to(kCbLsum, 1);
    cb_pop_front(kCbL, 1);

    cb_wait_front(kCbLsum, 1);
    cb_wait_front(kCbO, kDimTiles);
    cb_reserve_back(kCbOut, kDimTiles);
    if constexpr (kRowScalingOnSfpu) {
        pack_reconfig_data_format(kCbOut);
        for (uint32_t d = 0; d < kDimTiles; ++d) {
            tile_regs_acquire();
            sfpu_product(kCbO, d, kCbLsum, 0, /*b_is_column=*/true);
            pack_reserved(kCbOut, 1);
        }
    } else {
        formats(kCbO, kCbLsum, kCbOut);
        mul_bcast_cols_init(kCbO, kCbLsum);
        per_dim_chunk([](uint32_t d, uint32_t i) { mul_tiles_bcast_cols(kCbO, kCbLsum, d, 0, i); },
                      [](uint32_t count) { pack_reserved(kCbOut, count); });
    }
    cb_push_back(kCbOut, kDimTiles);
    cb_pop_front(kCbO, kDimTiles);
    cb_pop_front(kCbLsum, 1);
    cb_wait_front(m, 1);
    cb_pop_front(m, 1);
}

// The end of a request on its normalising core, every row tile in order (the writer takes OUT a row
// tile at a time): the sinks folded into each row tile's state first (a whole cycle of the state
// CBs, so they are back in order), then OUT per row tile. `m_final` holds the final running maxima.
void normalise(uint32_t m_final, const Params& p) {
    DeviceZoneScopedN("fd-compute-normalise");
    const bool idle = p.idle();
    uint32_t m = m_final;
    if constexpr (kSink) {
        if (!(kLse && idle)) {  // with return_lse an idle slot keeps L = 0: its LSE is -inf, its output 0 either way
            m = m_final == kCbMA ? kCbMB : kCbMA;
            for (uint32_t row = 0; row < kRowTiles; ++row) {
                fold_sink(m_final, m, row);
            }
        }
    }
    for (uint32_t row = 0; row < kRowTiles; ++row) {
        normalise_row(m, idle || row_kv_positions(p, row) == 0);
    }
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

// The running state of a slice that holds no live position, every row tile: O = 0, L = 0, M =
// MASK_VALUE (CONST page 2 holds the kill mask), so the combine weighs it by exp(MASK_VALUE - M) = 0.
void empty_state(uint32_t m_state) {
    for (uint32_t row = 0; row < kRowTiles; ++row) {
        formats(kCbConst, kCbConst, kCbO);
        sub_init(kCbConst, kCbConst);
        per_dim_chunk([](uint32_t, uint32_t i) { sub_tiles(kCbConst, kCbConst, kConstPageScale, kConstPageScale, i); },
                      [](uint32_t count) { pack_to(kCbO, count); });  // scale - scale = 0
        tile_regs_acquire();  // (L has O's statistics format: no packer reconfig)
        sub_tiles(kCbConst, kCbConst, kConstPageScale, kConstPageScale, 0);
        pack_to(kCbL, 1);
        cb_reserve_back(m_state, 1);
        copy_pages(kCbConst, kConstPageMask, 1, m_state);
        cb_push_back(m_state, 1);
    }
    cb_wait_front(m_state, kRowTiles);  // as a block leaves its running maxima: waited, ready to read
}

// Combine pass 1 (attention_protocol.hpp, above partial_pages): this subtree's max = max(own M,
// the children's subtree maxima, each folded in as it lands) into MAX_OUT for the writer (to the
// parent; on slice 0, the request's max, to its children); slice 0 also keeps it in `m_request`.
// Leaves `m_own`.
void share_max(uint32_t children, uint32_t m_own, bool root, uint32_t m_request) {
    DeviceZoneScopedN("fd-compute-max");
    formats(m_own, kCbMaxInbox, kCbMaxOut);
    copy_init(m_own);
    tile_regs_acquire();
    copy_tile(m_own, 0, 0);
    copy_init(kCbMaxInbox);  // inits outside the loop, even with no child: calls per child stay fixed
    binary_max_tile_init();
    for (uint32_t j = 0; j < children; ++j) {
        cb_wait_front(kCbMaxInbox, j + 1);
        copy_tile(kCbMaxInbox, j, 1);
        binary_max_tile(0, 1, 0);
    }
    tile_regs_commit();
    tile_regs_wait();
    cb_reserve_back(kCbMaxOut, 1);
    pack_tile(0, kCbMaxOut);
    if (root) {
        cb_reserve_back(m_request, 1);
        pack_tile(0, m_request);
    }
    tile_regs_release();
    cb_push_back(kCbMaxOut, 1);
    if (root) {
        cb_push_back(m_request, 1);
    }
    cb_wait_front(kCbMaxInbox, kInboxSlots);
    cb_pop_front(kCbMaxInbox, kInboxSlots);  // the whole inbox, as the reader pushed it
}

// Where a combine pass-2 step leaves the new (O, L): back in the state CBs O and L; in PV and LSUM
// (kTemp: between the steps of one row tile's combine when the state CBs hold other row tiles' state
// too, whose front is then not this row tile's); or -- the last step of a slice that sends its
// partial -- straight into OUTBOX (O pages, then L), so no step copies the state.
enum class StateTo : uint32_t { kState, kTemp, kOutbox };
struct StateOut {
    StateTo to;
    void begin() const {
        if (to == StateTo::kOutbox) {
            cb_reserve_back(kCbOutbox, partial_pages(kDimTiles));
        }
    }
    void o(uint32_t count) const {
        to == StateTo::kOutbox ? pack_reserved(kCbOutbox, count) : pack_to(to == StateTo::kTemp ? kCbPv : kCbO, count);
    }
    void l() const { to == StateTo::kOutbox ? pack_reserved(kCbOutbox, 1) : pack_to(to == StateTo::kTemp ? kCbLsum : kCbL, 1); }
    void end() const {
        if (to == StateTo::kOutbox) {
            cb_push_back(kCbOutbox, partial_pages(kDimTiles));
        }
    }
};
// The (O, L) CBs a pass-2 step reads what the step before it left through `to`.
constexpr uint32_t state_o(StateTo to) { return to == StateTo::kTemp ? kCbPv : kCbO; }
constexpr uint32_t state_l(StateTo to) { return to == StateTo::kTemp ? kCbLsum : kCbL; }

// Combine pass 2, first step, for the row tile at the front of the state CBs: C = exp(own M - M)
// (M: `m_request` page `row`), then O = C * O and L = C * L; frees own M's front page and C.
// Every CB of the combine passes (and OUTBOX) is a statistics CB, in the format share_max set up:
// no step after it reconfigures the unpackers or the packer.
void rescale_state(uint32_t m_own, uint32_t m_request, StateOut out, uint32_t row) {
    DeviceZoneScopedN("fd-compute-rescale");
    cb_wait_front(m_request, row + 1);
    correction(m_own, m_request, /*reconfigure=*/false, row);
    cb_wait_front(kCbC, 1);
    cb_wait_front(kCbO, kDimTiles);
    out.begin();
    // Old O pages of the chunk being rescaled are at the front: each chunk is popped before its new
    // pages are pushed.
    for (uint32_t d0 = 0; d0 < kDimTiles; d0 += kRescaleChunk) {
        const uint32_t count = chunk_size<kRescaleChunk>(d0);
        tile_regs_acquire();
        times_correction(kCbO, count);
        cb_pop_front(kCbO, count);
        out.o(count);
    }
    cb_wait_front(kCbL, 1);
    tile_regs_acquire();
    times_correction(kCbL, 1);
    cb_pop_front(kCbL, 1);
    out.l();
    out.end();
    cb_pop_front(kCbC, 1);
}

// Combine pass 2: O += O_j and L += L_j for each child j's partial (inbox slot j), as it lands,
// starting from the (O, L) the step before left through `between`; each step leaves its sums
// through `between` again, the last child's through `last`.
void add_children(uint32_t children, StateTo between, StateTo last) {
    DeviceZoneScopedN("fd-compute-sum");
    constexpr uint32_t kPartial = partial_pages(kDimTiles);
    const uint32_t o = state_o(between), l = state_l(between);
    for (uint32_t j = 0; j < children; ++j) {
        const StateOut out{j + 1 == children ? last : between};
        cb_wait_front(kCbPartials, (j + 1) * kPartial);
        const uint32_t o_j = j * kPartial, l_j = o_j + kDimTiles;
        cb_wait_front(o, kDimTiles);
        out.begin();
        add_init(o, kCbPartials);
        per_dim_chunk([&](uint32_t d, uint32_t i) { add_tiles(o, kCbPartials, i, o_j + d, i); },
                      [&](uint32_t count) {
                          cb_pop_front(o, count);
                          out.o(count);
                      });
        cb_wait_front(l, 1);
        add_init(l, kCbPartials);
        tile_regs_acquire();
        add_tiles(l, kCbPartials, 0, l_j, 0);
        cb_pop_front(l, 1);
        out.l();
        out.end();
    }
    cb_wait_front(kCbPartials, kInboxPages);
    cb_pop_front(kCbPartials, kInboxPages);  // the whole inbox, as the reader pushed it
}

// A split slice's end: both combine passes, one row tile at a time (a round per row tile, the
// reader and writer keeping step: attention_protocol.hpp "Q row tiles"); slice 0 then normalises,
// the others' last pass-2 step of each round has left their partial (O unnormalised, L; relative
// to the request's max) in OUTBOX for the writer. `m_own` holds this slice's M (a page per row
// tile); `m_spare` is free (slice 0 gathers the request's maxima there, a page per round).
// With several row tiles the state CBs hold the other row tiles' state too: a round's rescaled
// state waits in PV / LSUM for its children's partials, and its result goes to the back of the
// state CBs (or OUTBOX), so after R rounds they are in row-tile order again.
void combine(const Params& p, uint32_t m_own, uint32_t m_spare) {
    const bool root = p.reducer();
    const uint32_t children = p.tree_children();
    const StateTo last = root ? StateTo::kState : StateTo::kOutbox;
    const StateTo between = kRowTiles > 1 ? StateTo::kTemp : StateTo::kState;
    const uint32_t m_request = root ? m_spare : kCbMaxGlobal;
    for (uint32_t row = 0; row < kRowTiles; ++row) {
        share_max(children, m_own, root, m_spare);
        rescale_state(m_own, m_request, StateOut{children == 0 ? last : between}, root ? row : 0);
        add_children(children, between, last);
        if (!root) {
            cb_pop_front(kCbMaxGlobal, 1);
        }
    }
    if (root) {
        normalise(m_request, p);
    }
}

// Frees a block that holds no live position tile (padding up to a whole double block).
void skip_block() {
    cb_wait_front(kCbK, kBlockPages);
    cb_pop_front(kCbK, kBlockPages);
    if constexpr (!kValuesFromKeys) {
        cb_wait_front(kCbV, kBlockPages);
        cb_pop_front(kCbV, kBlockPages);
    }
}

// A split slice whose live tiles fit one block takes the request's max before exponentiating
// (attention_protocol.hpp, "max first"): P = exp(S - M) with the request's M, so its (O, L) need
// no rescale, and a slice without children packs them straight into OUTBOX. Several row tiles: a
// combine round per row tile, in row-tile order, against the one block in L1 (as combine()).
void attend_max_first(const Params& p) {
    const uint32_t live = p.slice_live_tiles();
    const bool root = p.reducer();
    const uint32_t children = p.tree_children();
    const StateTo last = root ? StateTo::kState : StateTo::kOutbox;
    const StateTo between = kRowTiles > 1 ? StateTo::kTemp : StateTo::kState;
    const uint32_t m_request = root ? kCbMB : kCbMaxGlobal;  // slice 0 gathers the request's M in M_B
    cb_wait_front(kCbK, kBlockPages);
    for (uint32_t row = 0; row < kRowTiles; ++row) {
        const bool last_row = row + 1 == kRowTiles;
        scores(p, live, p.block_first_tile(0), row * kDimTiles, row_kv_positions(p, row));
        if (last_row && !kValuesFromKeys) {
            cb_pop_front(kCbK, kBlockPages);
        }
        running_max(live, /*first=*/true, kCbMB, kCbMA);  // this slice's M in M_A
        cb_wait_front(kCbMA, 1);
        share_max(children, kCbMA, root, kCbMB);
        {
            DeviceZoneScopedN("fd-compute-after-max");
            probabilities(live, m_request, root ? row : 0);
            const StateOut out{children == 0 ? last : between};
            out.begin();
            cb_wait_front(kCbValues, kBlockPages);
            weighted_values(live, [&](uint32_t count) { out.o(count); });
            if (last_row) {
                cb_pop_front(kCbValues, kBlockPages);
            }
            block_row_sums(live, kCbL);
            out.l();
            out.end();
            cb_pop_front(kCbScratch, kBlockTiles);
        }
        cb_pop_front(kCbMA, 1);
        formats(kCbO, kCbPartials, kCbO);  // add_children expects the statistics formats
        add_children(children, between, last);
        if (!root) {
            cb_pop_front(kCbMaxGlobal, 1);
        }
    }
    for (uint32_t block = 1; block < p.blocks(); ++block) {
        skip_block();  // padding up to a whole double block
    }
    if (root) {
        normalise(m_request, p);
    }
}

// One K/V block's live tiles against row tile `row`'s query (QS pages row * dim_tiles ..) and
// running state, at the front of the state CBs (attention_protocol.hpp "Q row tiles"): the online
// softmax step. M_NEW gains the row tile's new max at the back; M_OLD, L and O drop its old state
// from the front and L and O take the new one at the back, so after every row tile the state is in
// row-tile order again. K and V are freed after the last row tile's use of them (one read serves all).
void attend_block(const Params& p, uint32_t block, uint32_t live, uint32_t row, uint32_t m_old, uint32_t m_new) {
    const bool first = block == 0;
    const bool last_row = row + 1 == kRowTiles;
    cb_wait_front(kCbK, kBlockPages);
    scores(p, live, p.block_first_tile(block), row * kDimTiles, row_kv_positions(p, row));
    if (last_row && !kValuesFromKeys) {
        cb_pop_front(kCbK, kBlockPages);
    }
    DeviceZoneScopedN("fd-compute-softmax");
    running_max(live, first, m_old, m_new);
    probabilities(live, m_new, row);
    if (!first) {
        correction(m_old, m_new, /*reconfigure=*/true, row);
    }
    running_sum(live, first);
    cb_wait_front(kCbValues, kBlockPages);
    const uint32_t out = first ? kCbO : kCbPv;
    weighted_values(live, [out](uint32_t count) { pack_to(out, count); });
    if (last_row) {
        cb_pop_front(kCbValues, kBlockPages);
    }
    cb_pop_front(kCbScratch, kBlockTiles);
    if (!first) {
        rescale_output();
    }
}

void attend(Params p) {
    p.window = kWindow;  // the program's, not on the wire
    p.attention_chunk = kChunk;
    cb_wait_front(kCbConst, kConstPages);
    scale_query();
    if (p.split() && p.slice_live_tiles() > 0 && p.slice_live_tiles() <= kBlockTiles) {
        attend_max_first(p);
        cb_pop_front(kCbQs, kQsPages);
        cb_pop_front(kCbConst, kConstPages);
        return;
    }
    uint32_t m_old = kCbMA;
    uint32_t m_new = kCbMB;
    for (uint32_t block = 0; block < p.blocks(); ++block) {
        const uint32_t live = p.live_tiles_in_block(block);
        if (live == 0) {
            skip_block();
            continue;
        }
        for (uint32_t row = 0; row < kRowTiles; ++row) {
            attend_block(p, block, live, row, m_old, m_new);
        }
        const uint32_t swap = m_old;  // M_NEW becomes next block's M_OLD
        m_old = m_new;
        m_new = swap;
    }
    if (p.slice_live_tiles() == 0) {
        empty_state(m_old);  // an empty slice, or an idle slot's: O = 0, L = 0, M = the kill value
    }
    if (p.split()) {
        combine(p, m_old, m_new);
    } else {
        normalise(m_old, p);
    }
    cb_pop_front(kCbQs, kQsPages);
    cb_pop_front(kCbConst, kConstPages);
}

}  // namespace

void kernel_main() {
    compute_kernel_hw_startup(kCbQStage, kCbConst, kCbQs);
    // This core's work row, from the reader (UNPACK reads each word and shares it with MATH and PACK).
    cb_wait_front(kCbWork, 1);
    const uint32_t requests = served_requests(read_tile_value(kCbWork, 0, kRowRequestCount));
    cb_wait_front(kCbPositions, 1);
    for (uint32_t r = 0; r < requests; ++r) {
        Params p = read_request([](uint32_t i) { return read_tile_value(kCbWork, 0, i); }, r);
        if (!p.valid_layout(kDimTiles, kBlockTiles, kRowTiles)) {
            continue;  // refused (the host refuses it first); all three kernels skip it alike
        }
        // The same value the reader read (UNPACK reads it and shares it with MATH and PACK).
        p.kv_positions = request_kv_positions(p);
        attend(p);
    }
    cb_pop_front(kCbPositions, 1);
    cb_pop_front(kCbWork, 1);
}
