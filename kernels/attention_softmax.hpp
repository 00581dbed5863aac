// The compute kernel's online-softmax stages (DESIGN.md §6) and the end of a request: the running
// max, P, the correction C, the running sum L and output O, the sinks folded in, the LSE and OUT.
// Part of the compute kernel (attention_compute.cpp).
#pragma once

#include "attention_compute_base.hpp"

namespace {

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
        srca_format(m_old);
        copy_init(m_old);
        copy_tile(m_old, 0, 1);
        binary_max_tile_init();
        live_max_tile(0, 1, 0);
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
        live_exp_tile(0);
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
        srcb_format(kCbC);
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
    cb_wait_front(m_new, row + 1);
    if (reconfigure) {
        formats(m_old, m_new, kCbC);
    }
    sub_init(m_old, m_new);
    exp_tile_init<kExpApprox>();
    tile_regs_acquire();
    sub_tiles(m_old, m_new, 0, row, 0);
    live_exp_tile(0);
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

// Rounds DST tiles [0, count) to TF32, to nearest (kRoundState; else nothing): live_round_to_tf32.
void round_state_to_tf32(uint32_t count) {
    if constexpr (kRoundState) {
        live_round_to_tf32(0, count);
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
    srcb_format(kCbLsum);
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
        srcb_format(kCbPv);
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
    srca_format(kCbConst);
    copy_init(kCbConst);
    copy_tile(kCbConst, sink, 1);
    binary_max_tile_init();
    live_max_tile(0, 1, 0);
    pack_to(m_sink, 1);
    cb_wait_front(m_sink, row + 1);
    correction(m_final, m_sink, /*reconfigure=*/true, row);  // C = exp(M - M'); frees M
    formats(kCbConst, m_sink, kCbLsum);  // LSUM = exp(sink - M')
    sub_init(kCbConst, m_sink);
    exp_tile_init<kExpApprox>();
    tile_regs_acquire();
    sub_tiles(kCbConst, m_sink, sink, row, 0);
    live_exp_tile(0);
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
        live_log_tile(0);
        add_binary_tile_init();
        live_add_tiles(0, 1, 0);
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
        live_recip_tile(0);
    }
    pack_to(kCbLsum, 1);
    cb_pop_front(kCbL, 1);

    cb_wait_front(kCbLsum, 1);
    cb_wait_front(kCbO, kDimTiles);
    cb_reserve_back(kCbOut, kDimTiles);
    if constexpr (kRowScalingOnSfpu) {
        pack_format(kCbOut);
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

}  // namespace
