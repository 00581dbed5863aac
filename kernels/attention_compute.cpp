// Flash-decode attention, compute: one KV group's query rows against the KV cache with an online
// softmax (DESIGN.md §6). Never holds more than one K/V block; L1 use is flat in the context.
//
//   QS = QSTAGE * scale                                   once per request
//   per block j (only its live position tiles are touched):
//     S     = QS . K_j^T, then its score modifiers in order (apply_score_modifiers): softcap
//             S = c tanh(S / c); + the tail masks on the last one or two live tiles; + the window /
//             chunk masks; + the attention mask
//     M_NEW = max(M_OLD, rowmax(S))
//     P     = exp(S - M_NEW)
//     C     = exp(M_OLD - M_NEW)                          (not on the first block)
//     L     = C * L + rowsum(P)
//     O     = C * O + P . V_j
//   OUT = O * (1 / L)
//   LSE = M + log(L)                                      return_lse only (sinks: M = max(M, sink))
//
// Compile-time args: named only, those attention_compute_base.hpp reads (attention_args.hpp says what
// each means): dim_tiles, block_tiles, dst_tiles, exp_approx, row_scaling_on_sfpu, row_sum_groups,
// window, attention_chunk, sink, mask_users, softcap, softcap_recip, inbox_slots, lse, row_tiles,
// values_from_keys, row_tile_users, live_rows. No positional args. Runtime args: none.
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
// The stages live by job: attention_compute_base.hpp (constants, DST / CB helpers),
// attention_scores.hpp (S and its score modifiers), attention_softmax.hpp (the online softmax and a
// request's end), attention_combine.hpp (split-K); this file runs them per block and per request.
#include <cstdint>

#include "attention_combine.hpp"
#include "attention_compute_base.hpp"
#include "attention_scores.hpp"
#include "attention_softmax.hpp"

namespace {

// Frees a block that holds no live position tile (padding up to a whole double block).
void skip_block() {
    cb_wait_front(kCbK, kBlockPages);
    cb_pop_front(kCbK, kBlockPages);
    if constexpr (!kValuesFromKeys) {
        cb_wait_front(kCbV, kBlockPages);
        cb_pop_front(kCbV, kBlockPages);
    }
}

// Whether row tile `row` is a request's last: a block's K and V are freed after its use of them (one
// read of a block serves every row tile).
constexpr bool last_row(uint32_t row) { return row + 1 == kRowTiles; }

// A block step's scores, for row tile `row` (QS pages row * dim_tiles ..) against the block's `live`
// tiles in CB K: S = QS . K^T with the row tile's masks. K is freed after the last row tile's
// scores, unless V is K (P . V reads it as V).
void block_scores(const Params& p, uint32_t block, uint32_t live, uint32_t row) {
    scores(p, live, p.block_first_tile(block), row * kDimTiles, row_kv_positions(p, row));
    if (last_row(row) && !kValuesFromKeys) {
        cb_pop_front(kCbK, kBlockPages);
    }
}

// A block step's P . V (P in SCRATCH, kept), each DST chunk handed to `sink`; V is freed after the
// last row tile's use.
template <typename Sink>
void block_values(uint32_t live, uint32_t row, Sink sink) {
    cb_wait_front(kCbValues, kBlockPages);
    weighted_values(live, sink);
    if (last_row(row)) {
        cb_pop_front(kCbValues, kBlockPages);
    }
}

// One K/V block's live tiles against row tile `row`'s query and running state, at the front of the
// state CBs (attention_protocol.hpp "Q row tiles"): the online softmax step. M_NEW gains the row
// tile's new max at the back; M_OLD, L and O drop its old state from the front and L and O take the
// new one at the back, so after every row tile the state is in row-tile order again.
void attend_block(const Params& p, uint32_t block, uint32_t live, uint32_t row, uint32_t m_old, uint32_t m_new) {
    const bool first = block == 0;
    cb_wait_front(kCbK, kBlockPages);
    block_scores(p, block, live, row);
    DeviceZoneScopedN("fd-compute-softmax");
    // In the order that keeps each unit's data format longest (the statistics CBs may be float32,
    // S, P and K / V not): C from the maxima just packed, then P, P . V and L, which read P.
    running_max(live, first, m_old, m_new);
    if (!first) {
        correction(m_old, m_new, /*reconfigure=*/true, row);
    }
    probabilities(live, m_new, row);
    const uint32_t out = first ? kCbO : kCbPv;
    block_values(live, row, [out](uint32_t count) { pack_to(out, count); });
    running_sum(live, first);
    cb_pop_front(kCbScratch, kBlockTiles);
    if (!first) {
        rescale_output();
    }
}

// A max-first round's block step after the request's max is known: P = exp(S - M) with the
// request's M, then O = P . V and L = rowsum(P) go straight where the round's first pass-2 step
// leaves them (no rescale; OUTBOX on a slice without children).
void attend_block_after_max(uint32_t live, uint32_t row, const CombineRounds& rounds) {
    DeviceZoneScopedN("fd-compute-after-max");
    probabilities(live, rounds.m_request, rounds.request_max_page(row));
    const StateOut out = rounds.first_step();
    out.begin();
    block_values(live, row, [&](uint32_t count) { out.o(count); });
    block_row_sums(live, kCbL);
    out.l();
    out.end();
    cb_pop_front(kCbScratch, kBlockTiles);
}

// A split slice whose live tiles fit one block takes the request's max before exponentiating
// (attention_protocol.hpp, "max first"), so its (O, L) need no rescale. Several row tiles: a
// combine round per row tile, in row-tile order, against the one block in L1 (as combine()).
void attend_max_first(const Params& p) {
    const uint32_t live = p.slice_live_tiles();
    const CombineRounds rounds(p, kCbMB);  // slice 0 gathers the request's M in M_B
    cb_wait_front(kCbK, kBlockPages);
    for (uint32_t row = 0; row < kRowTiles; ++row) {
        block_scores(p, 0, live, row);
        running_max(live, /*first=*/true, kCbMB, kCbMA);  // this slice's M in M_A
        cb_wait_front(kCbMA, 1);
        share_max(rounds.children, kCbMA, rounds.root, kCbMB);
        attend_block_after_max(live, row, rounds);
        cb_pop_front(kCbMA, 1);
        formats(kCbO, kCbPartials, kCbO);  // add_children expects the statistics formats
        rounds.add_children_partials();
    }
    for (uint32_t block = 1; block < p.blocks(); ++block) {
        skip_block();  // padding up to a whole double block
    }
    if (rounds.root) {
        normalise(rounds.m_request, p);
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
    g_formats = {kCbQStage, kCbConst, kCbQs};  // SrcA, SrcB, packer
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
        p.kv_positions = request_kv_positions(p, r);
        attend(p);
    }
    cb_pop_front(kCbPositions, 1);
    cb_pop_front(kCbWork, 1);
}
