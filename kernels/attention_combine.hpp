// The compute kernel's split-K combine (attention_protocol.hpp, above partial_pages): pass 1 shares
// the request's max up and down the slices' tree, pass 2 rescales each slice's (O, L) to it and sums
// the children's partials. Part of the compute kernel (attention_compute.cpp).
#pragma once

#include "attention_compute_base.hpp"
#include "attention_softmax.hpp"

namespace {

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
        live_max_tile(0, 1, 0);
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

// A split slice's place in its request's combine tree, for its combine rounds (a round per row tile,
// the reader and writer keeping step: attention_protocol.hpp "Q row tiles"): combine() and
// attend_max_first. With several row tiles the state CBs hold the other row tiles' state too, so a
// round's first pass-2 step leaves its state in PV / LSUM (kTemp) to wait for its children's
// partials, and its result goes to the back of the state CBs (or OUTBOX): after R rounds they are in
// row-tile order again.
struct CombineRounds {
    bool root;            // slice 0: it normalises; the others send their partial to their parent
    uint32_t children;    // children in the combine tree
    StateTo last;         // where a round's last step leaves (O, L): the state CBs on slice 0, else OUTBOX
    StateTo between;      // where its other steps leave them
    uint32_t m_request;   // the request's max: slice 0 gathers it in `root_m_request` (a page per round),
                          // the others copy it from their parent into MAX_GLOBAL (a page at a time)

    CombineRounds(const Params& p, uint32_t root_m_request)
        : root(p.reducer()),
          children(p.tree_children()),
          last(root ? StateTo::kState : StateTo::kOutbox),
          between(kRowTiles > 1 ? StateTo::kTemp : StateTo::kState),
          m_request(root ? root_m_request : kCbMaxGlobal) {}

    // The page of m_request holding round `row`'s max.
    uint32_t request_max_page(uint32_t row) const { return root ? row : 0; }
    // Where a round's first pass-2 step leaves (O, L): straight to `last` when no child's partial follows.
    StateOut first_step() const { return StateOut{children == 0 ? last : between}; }
    // The rest of a round's pass 2: its children's partials added as they land; MAX_GLOBAL's page freed.
    void add_children_partials() const {
        add_children(children, between, last);
        if (!root) {
            cb_pop_front(kCbMaxGlobal, 1);
        }
    }
};

// A split slice's end: both combine passes, a round per row tile (CombineRounds); slice 0 then
// normalises, the others' last pass-2 step of each round has left their partial (O unnormalised, L;
// relative to the request's max) in OUTBOX for the writer. `m_own` holds this slice's M (a page per
// row tile); `m_spare` is free (slice 0 gathers the request's maxima there, a page per round).
void combine(const Params& p, uint32_t m_own, uint32_t m_spare) {
    const CombineRounds rounds(p, m_spare);
    for (uint32_t row = 0; row < kRowTiles; ++row) {
        share_max(rounds.children, m_own, rounds.root, m_spare);
        rescale_state(m_own, rounds.m_request, rounds.first_step(), rounds.request_max_page(row));
        rounds.add_children_partials();
    }
    if (rounds.root) {
        normalise(rounds.m_request, p);
    }
}

}  // namespace
