// The compute kernel's score stages: the query scaled once per request, then per K/V block S = QS .
// K^T through the ordered score modifiers. Part of the compute kernel (attention_compute.cpp).
#pragma once

#include "attention_compute_base.hpp"

namespace {

// QS = QSTAGE * scale (scale = CONST page 1: every element; the FPU broadcasts its [0][0]), every row tile.
void scale_query() {
    cb_wait_front(kCbQStage, kQsPages);
    if constexpr (kRowScalingOnSfpu) {
        pack_format(kCbQs);
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

// Score modifiers, on the scaled scores S of one live tile (DST tile 0, between its matmul and its
// pack), in the order apply_score_modifiers runs them. Each is one named stage: it returns whether it
// ran, since its init leaves the unpackers and the math engine set for its own op and matmul's must
// then be restored before the next tile's matmul (apply_score_modifiers does that once).

// Logit softcap c (FA3's softcap, Gemma 2's attn_logit_softcapping) as fp32 bits, 0 for none, and
// 1 / c (fp32 bits, computed on the host: the kernel divides nothing). Only cap_scores reads them.
constexpr uint32_t kSoftcap = args::softcap();
constexpr uint32_t kSoftcapRecip = args::softcap_recip();

// "logit softcap": S = c tanh(S / c), before every mask, window and chunk (FA3's and Gemma 2's
// order; a sink logit is not capped). Three SFPU passes in DST (fp32 with fp32_dest_acc_en): times
// 1 / c, the LLK's accurate tanh (tanh_tile<false>; its fp32-DST path is expm1 based, its bfloat16-DST
// path a degree-6 polynomial clamped at 1), times c. A score far past the cap saturates at +-c, never NaN.
bool cap_scores() {
    if constexpr (kSoftcap != 0) {
        binop_with_scalar_tile_init();
        live_mul_scalar_tile(0, kSoftcapRecip);
        tanh_tile_init<false>();
        live_tanh_tile(0);
        binop_with_scalar_tile_init();
        live_mul_scalar_tile(0, kSoftcap);
        return true;
    }
    return false;
}

// "tail mask": S += the CONST mask page of window tile `tile` (0 on each row's live columns,
// MASK_VALUE on its dead ones, so exp() zeroes them) when it has one: the last live tile and, with
// several rows per head, the one before. Row-tile users: row tile qs / dim_tiles's own masks, from
// its own kv positions `own` (own_mask_page).
bool add_tail_mask(const Params& p, uint32_t tile, uint32_t qs, uint32_t own) {
    const uint32_t mask_page = kRowTileUsers ? own_mask_page(own, tile, row_mask_page(kSink, kRowTiles, qs / kDimTiles))
                                             : p.mask_page(tile);
    if (mask_page == kNoMask) {
        return false;
    }
    add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbConst);
    add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbConst, mask_page, 0);
    return true;
}

// "sliding window" / "attention chunk": S += the window mask (CONST page kConstPageWindow or
// kConstPageWindowNext) on the window's first tile and the one after it, when some row starts
// inside them (attention_protocol.hpp "Sliding window").
bool add_window_mask(const Params& p, uint32_t tile) {
    if constexpr (kWindowed) {
        const uint32_t page = p.window_page(tile);
        if (page != kNoMask) {
            add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbConst);
            add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbConst, page, 0);
            return true;
        }
    }
    return false;
}

// "attention mask": S += MASK page t, the block's t-th live tile's mask rows (attention_protocol.hpp
// "Attention mask"), already clamped by the reader.
bool add_attn_mask(uint32_t t) {
    if constexpr (kMaskUsers != 0) {
        add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbMask);
        add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(kCbMask, t, 0);
        return true;
    }
    return false;
}

// accurate_scores: CB S is float32, so the packer keeps fp32 DST's scores whole, but every reader of
// S (the row max, S - M, a mask add) takes it through SrcA, which holds TF32 and truncates: each
// weight exp(S - M) would lose up to an ulp of |S| (1.6% at |S| ~ 20), all in one direction, which a
// dominant sink does not normalise away. Rounded to TF32 to nearest here, the read is exact and
// what is left is unbiased: live_round_to_tf32 on DST tile 0.
constexpr bool kAccurateScores = args::accurate_scores() != 0;
static_assert(!kAccurateScores || DST_ACCUM_MODE, "accurate_scores needs fp32 DST: a bf16 DST has rounded S already");

bool round_scores_to_tf32() {
    if constexpr (kAccurateScores) {
        live_round_to_tf32(0, 1);
        return true;
    }
    return false;
}

// The score modifiers of the block's t-th live tile, window tile `tile`, in order: cap, tail mask,
// window / chunk, attention mask (the cap first, so no mask value is capped; the masks add, in any
// order), accurate_scores' rounding before the masks (and after an attention mask). Matmul's state
// is restored once, after them, when any ran.
void apply_score_modifiers(const Params& p, uint32_t t, uint32_t tile, uint32_t qs, uint32_t own) {
    bool reconfigured = cap_scores();
    // Before the masks: each mask add moves S from DST through SrcA, which truncates it to TF32.
    reconfigured |= round_scores_to_tf32();
    reconfigured |= add_tail_mask(p, tile, qs, own);
    reconfigured |= add_window_mask(p, tile);
    reconfigured |= add_attn_mask(t);
    // A tail or window mask adds 0 or MASK_VALUE, which leaves a TF32 score TF32 (or dead); an
    // attention mask's bias does not, so its sum is rounded again.
    if constexpr (kMaskUsers != 0) {
        round_scores_to_tf32();
    }
    if (reconfigured) {
        matmul_init(kCbQs, kCbK, /*transpose=*/1);
    }
}

// S = QS . K^T for the block's `live` tiles, the first of them window tile `first_tile`, QS from page
// `qs` (row tile qs / dim_tiles), each tile through apply_score_modifiers (`own`: row-tile users'
// own kv positions, as add_tail_mask).
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
        apply_score_modifiers(p, t, first_tile + t, qs, own);
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

}  // namespace
