"""The K/V walk's host twins: which position tiles, rows, masks, cache pages and page-table
entries a request's kernels touch. Each function mirrors an inline function of the kernels'
``attention_protocol.hpp`` (named in its docstring) and is pinned to it by
``tests/test_protocol_pair.py``; the parameter block itself is :mod:`.protocol`'s."""

from __future__ import annotations

import dataclasses

from ttnn_flashdecode.op.protocol import (ConstTile, Flag, GATHER_MASK, KILL_PAGE, MASK_BEFORE_PAGE, MASK_PAGE, NO_MASK, Request, SINK_PAGE,
                                          TILE_POSITIONS, WINDOW_PAGE)

__all__ = ["PAGE_TABLE_CHUNK_ENTRIES", "attn_mask_page", "attn_mask_row", "cache_block_valid", "cache_slot_tile", "half_block_entry", "cache_tile_page", "clamp_mask_half", "clamp_mask_word", "first_q_head", "kv_positions_at", "live_tiles", "mask_page", "mask_row_source", "mask_tile", "padded_tiles", "page_table_chunk", "page_table_entry", "position_clamped", "query_page", "query_row_of", "request_slice", "row_tile", "row_tile_pages", "row_tile_user", "row_mask_page", "own_mask_page", "row_width", "slice_fills_window_page", "slice_mask_tile", "slice_tiles", "tail_width", "window_dead", "window_first_tile", "window_mask_word", "window_page", "window_page_tile", "window_stale_rows", "window_start"]


PAGE_TABLE_CHUNK_ENTRIES = 256
"""Page-table entries the reader holds in L1 at a time (CB PAGE_TABLE, 1 KiB; ``kPageTableChunkEntries``)."""


def cache_slot_tile(tile, wrap_tiles: int):
    """The cache slot tile that holds position tile ``tile`` (an int or an integer array): ``tile %
    wrap_tiles`` in a circular cache (``cache_position_modulo / 32``), ``tile`` without one
    (``wrap_tiles`` 0)."""
    return tile % wrap_tiles if wrap_tiles else tile


def half_block_entry(tile: int, half: int) -> int:
    """Blocks of 16 positions (paged ``block_size`` 16): the entry whose block holds rows ``16 *
    half ..`` of position tile ``tile``."""
    return 2 * tile + half


def page_table_entry(tile: int, cache_block_tiles: int) -> int:
    """Index into a user's page-table row of the entry that maps position tile ``tile`` (paged
    cache of ``cache_block_tiles`` position tiles per block)."""
    return tile // cache_block_tiles


def cache_tile_page(first_page: int, tile: int, cache_block: int, cache_block_tiles: int, cache_block_pages: int,
                    dim_tiles: int) -> int:
    """Page (tile id) of dim tile 0 of position tile ``tile`` in a K or V cache.

    Contiguous (``cache_block_tiles == 0``, ``[batch, n_kv_heads, capacity, head_dim]``): tile
    ``tile`` of the region starting at ``first_page``. Paged (``[cache blocks, n_kv_heads,
    block_size, head_dim]``, ``cache_block_tiles = block_size / 32``, ``cache_block_pages`` pages
    per block): tile ``tile % cache_block_tiles`` of the KV head whose offset inside a block is
    ``first_page``, in block ``cache_block`` (the page-table entry).
    """
    if cache_block_tiles == 0:
        return first_page + tile * dim_tiles
    return cache_block * cache_block_pages + first_page + (tile % cache_block_tiles) * dim_tiles


def cache_block_valid(entry: int, cache_blocks: int) -> bool:
    """True when page-table ``entry`` names one of the cache's ``cache_blocks`` blocks."""
    return 0 <= entry < cache_blocks


def page_table_chunk(entry: int, entries: int) -> tuple[int, int]:
    """``(first, count)``: the chunk of a row of ``entries`` entries the reader loads to look up ``entry``."""
    first = entry // PAGE_TABLE_CHUNK_ENTRIES * PAGE_TABLE_CHUNK_ENTRIES
    return first, min(PAGE_TABLE_CHUNK_ENTRIES, entries - first)


def live_tiles(kv_positions: int) -> int:
    """Position tiles holding at least one live position: ``ceil(kv_positions / 32)`` (tiles)."""
    return -(-kv_positions // TILE_POSITIONS)


def tail_width(kv_positions: int) -> int:
    """Live positions in the last live tile when it is partial, else 0 (positions)."""
    return kv_positions % TILE_POSITIONS


def padded_tiles(kv_positions: int, block_tiles: int) -> int:
    """Position tiles in the request's read window: live tiles rounded up to whole double blocks.

    The rounding keeps every request's K/V circular-buffer push and pop counts a whole number of
    double blocks (DESIGN.md §2, "Block prefetch, double-buffered").

    Raises:
        ValueError: ``block_tiles`` is not positive.
    """
    if block_tiles <= 0:
        raise ValueError(f"block_tiles: expected >= 1, got {block_tiles}")
    double_block = 2 * block_tiles
    return -(-live_tiles(kv_positions) // double_block) * double_block


def slice_tiles(kv_positions: int, index: int, count: int, *, first_tile: int = 0) -> tuple[int, int]:
    """Live position tiles ``[begin, end)`` owned by split-K slice ``index`` of ``count``.

    ``count`` 0 or 1 means not split: the whole live range from ``first_tile`` (a sliding window's
    first tile, :func:`window_first_tile`; 0 without one). Slice 0 is never empty; later slices
    are empty when there are fewer live tiles than slices (``Params::slice_begin`` / ``slice_end``).

    Raises:
        ValueError: ``index`` is not in ``0..max(count, 1) - 1``.
    """
    count = max(count, 1)
    if not 0 <= index < count:
        raise ValueError(f"index: expected 0 <= index < {count}, got {index}")
    live = live_tiles(kv_positions) - first_tile
    return first_tile + -(-index * live // count), first_tile + -(-(index + 1) * live // count)


def request_slice(request: Request) -> tuple[int, int]:
    """:func:`slice_tiles` of ``request``'s split-K slice, from its window's (or chunk's) first tile."""
    first = window_first_tile(request.kv_positions, request.window, rows_per_head=request.rows_per_head,
                              chunk=request.attention_chunk)
    return slice_tiles(request.kv_positions, request.split_index, request.split_count, first_tile=first)


# ---------------------------------------------------------------- sliding window (the header's
# "Sliding window" and "Chunked-local attention"): row p attends max(0, p + 1 - window,
# floor(p / chunk) * chunk) .. p.

def window_start(kv_positions: int, window: int, row: int, *, rows_per_head: int = 1, chunk: int = 0) -> int:
    """First position query row ``row`` attends: ``max(0, p + 1 - window)`` for its position ``p =
    kv_positions - rows_per_head + row`` (0 without a window, ``window`` 0), and with an attention
    chunk (``chunk`` C > 0) at least ``floor(p / C) * C``; 0 for an idle slot (``kv_positions`` 0)
    (``Params::window_start``)."""
    if kv_positions == 0:
        return 0
    end = kv_positions - rows_per_head + row + 1
    start = end - window if window and end > window else 0
    if chunk:
        start = max(start, (end - 1) // chunk * chunk)
    return start


def window_first_tile(kv_positions: int, window: int, *, rows_per_head: int = 1, chunk: int = 0) -> int:
    """The window's first position tile: the first row's start's (``Params::first_tile``)."""
    return window_start(kv_positions, window, 0, rows_per_head=rows_per_head, chunk=chunk) // TILE_POSITIONS


def window_stale_rows(kv_positions: int, window: int, *, rows_per_head: int = 1, chunk: int = 0) -> int:
    """Cache slots of the window's first tile before every row's start, which the reader zeroes
    (``Params::window_stale_rows``)."""
    return window_start(kv_positions, window, 0, rows_per_head=rows_per_head, chunk=chunk) % TILE_POSITIONS


def window_dead(kv_positions: int, window: int, tile: int, row: int, *, rows_per_head: int = 1, chunk: int = 0) -> int:
    """Columns of position tile ``tile`` before row ``row``'s window start, 0..32 (``Params::window_dead``)."""
    start = window_start(kv_positions, window, row, rows_per_head=rows_per_head, chunk=chunk)
    return min(max(start - tile * TILE_POSITIONS, 0), TILE_POSITIONS)


def window_page(kv_positions: int, window: int, tile: int, *, rows_per_head: int = 1, chunk: int = 0) -> int:
    """The CONST page compute adds to tile ``tile``'s scores for the window (or chunk):
    :data:`WINDOW_PAGE` on the first tile, ``WINDOW_PAGE + 1`` on any later one, when some row has
    a dead column there, else :data:`NO_MASK` (``Params::window_page``). A plain window has at most
    one later such tile; a chunk edge inside a request's rows makes every tile of the previous chunk
    dead for the rows past it, all with the same mask."""
    first = window_first_tile(kv_positions, window, rows_per_head=rows_per_head, chunk=chunk)
    if tile < first or window_dead(kv_positions, window, tile, rows_per_head - 1, rows_per_head=rows_per_head,
                                   chunk=chunk) == 0:
        return NO_MASK
    return WINDOW_PAGE if tile == first else WINDOW_PAGE + 1


def window_page_tile(request: Request, page: int) -> int:
    """The tile whose mask the reader of ``request``'s slice builds in CONST ``page`` (4 or 5): the
    slice's first tile that may use it (``Params::window_page_tile``)."""
    first = window_first_tile(request.kv_positions, request.window, rows_per_head=request.rows_per_head,
                              chunk=request.attention_chunk)
    return max(first + page - WINDOW_PAGE, request_slice(request)[0])


def slice_fills_window_page(request: Request, page: int) -> bool:
    """True when the reader of ``request``'s slice builds window-mask CONST ``page`` (4 or 5): the
    slice owns a tile that needs it (``Params::slice_fills_window_page``)."""
    tile = window_page_tile(request, page)
    return tile < request_slice(request)[1] and window_page(
        request.kv_positions, request.window, tile, rows_per_head=request.rows_per_head,
        chunk=request.attention_chunk) == page


def window_mask_word(dead: int, half: int, pair: int) -> int:
    """Word ``pair`` of face row half ``half`` of a window-mask row whose first ``dead`` columns
    are dead: bfloat16 MASK_VALUE (0xF14A) in each dead column's half-word, else 0
    (``window_mask_word``)."""
    column = 16 * half + 2 * pair
    return (0xF14A if column < dead else 0) | (0xF14A << 16 if column + 1 < dead else 0)


def kv_positions_at(request: Request, position: int) -> int:
    """``kv_positions`` the kernels derive for ``request`` from its POSITIONS entry ``position``
    (int32): decode / ROWS ``position + 1`` (the last row attends to ``0..position``), CHUNK
    ``position + C``; 0 (an idle slot: no K/V read, zero output rows) for a negative entry (-1 is
    ttnn's idle marker); else clamped to ``rows_per_head .. capacity_tiles * 32`` so that a
    device-side value the host could not check never makes a kernel read outside the cache
    (``Params::kv_positions_at``)."""
    if position < 0:
        return 0
    live = int(position) + (request.q_rows if request.flags & Flag.CHUNK else 1)
    return min(max(live, request.rows_per_head), request.capacity_tiles * TILE_POSITIONS)


def position_clamped(request: Request, position: int) -> bool:
    """True when ``position`` is neither -1 (idle) nor taken as it is by :func:`kv_positions_at`:
    the kernels clamp it (below -1: treat the slot as idle) and the reader reports it in a DPRINT
    line starting ``ERROR`` (the emulator's :attr:`RunReport.errors`; ``Params::position_clamped``)."""
    if position < 0:
        return position != -1
    return kv_positions_at(request, position) != position + (request.q_rows if request.flags & Flag.CHUNK else 1)


def row_width(kv_positions: int, tile: int, row: int, *, rows_per_head: int = 1) -> int:
    """Live columns (positions) of query row ``row`` (of every head) in window tile ``tile``, 0..32.

    Row ``row`` attends to positions ``0 .. kv_positions - rows_per_head + row``.
    """
    live = kv_positions - rows_per_head + row + 1
    return min(max(live - tile * TILE_POSITIONS, 0), TILE_POSITIONS)


def mask_tile(kv_positions: int, tile: int, *, rows_per_head: int = 1, heads: int = 1) -> int:
    """How window tile ``tile`` is masked: :data:`NO_MASK`, a constants tile, or :data:`GATHER_MASK`.

    Fully live tiles (every row) need no mask. Otherwise, with one row per head every staged row
    shares tail mask ``row_width(tile, 0)`` (decode; tail mask 0 kills a tile past the live ones);
    one head whose first row starts a tile takes causal mask ``rows_per_head`` (tile ``34 +
    rows_per_head - 1``); anything else is assembled row by row from :func:`mask_row_source`.
    """
    first_row = kv_positions - rows_per_head + 1 - tile * TILE_POSITIONS  # row 0's width, unclamped
    if first_row >= TILE_POSITIONS:
        return NO_MASK  # widths grow with the row: every row fully live
    if tile >= live_tiles(kv_positions):
        return int(ConstTile.TAIL_MASK)
    first_row = max(first_row, 0)
    if rows_per_head == 1:
        return ConstTile.TAIL_MASK + first_row
    if heads == 1 and first_row == 1:
        return ConstTile.CAUSAL_MASK + rows_per_head - 1
    return GATHER_MASK


def mask_page(kv_positions: int, tile: int, *, rows_per_head: int = 1, heads: int = 1) -> int:
    """The CONST page compute adds to live window tile ``tile``'s scores, or :data:`NO_MASK`."""
    if mask_tile(kv_positions, tile, rows_per_head=rows_per_head, heads=heads) == NO_MASK:
        return NO_MASK
    return MASK_PAGE if tile + 1 == live_tiles(kv_positions) else MASK_BEFORE_PAGE


def mask_row_source(width: int) -> tuple[int, int]:
    """``(constants tile, row)`` of a mask row live for columns ``c < width`` (``width`` 0..32):
    row 0 of tail mask ``width`` below 32, row 31 of causal mask 32 (all live) at 32."""
    if width < TILE_POSITIONS:
        return ConstTile.TAIL_MASK + width, 0
    return ConstTile.CAUSAL_MASK + TILE_POSITIONS - 1, TILE_POSITIONS - 1


def slice_mask_tile(request: Request, page: int) -> int:
    """What the reader of ``request``'s split slice puts in CONST ``page`` (2 or 3).

    The mask of the page's tile (page 2: the last live tile, page 3: the one before) when the
    slice owns that tile and it is masked; the kill mask (tail mask 0) in page 2 of an empty slice;
    else :data:`NO_MASK` (the page is left unfilled).
    """
    begin, end = request_slice(request)
    if begin == end:
        return int(ConstTile.TAIL_MASK) if page == MASK_PAGE else NO_MASK
    tile = live_tiles(request.kv_positions) - 1 - (page - MASK_PAGE)
    if tile < 0 or not begin <= tile < end:
        return NO_MASK
    return mask_tile(request.kv_positions, tile, rows_per_head=request.rows_per_head, heads=request.heads)


def query_page(request: Request, stage_row: int, dim_tile: int, q_width_tiles: int) -> int:
    """Page of Q (and the output), relative to the request's first page, holding ``stage_row``'s
    dim tile ``dim_tile``; Q is ``q_width_tiles`` tiles wide. Its row in that page is
    :func:`query_row_of` ``% 32``. HEAD_ROWS (Q ``[1, batch, n_heads, head_dim]``): a user's heads
    are rows, so row tiles follow each other ``dim_tiles`` pages apart."""
    head, _ = divmod(stage_row, request.rows_per_head)
    row_tile = query_row_of(request, stage_row) // TILE_POSITIONS
    if request.flags & Flag.HEAD_ROWS:
        return row_tile * request.dim_tiles + dim_tile
    return row_tile * q_width_tiles + head * request.dim_tiles + dim_tile


def first_q_head(request: Request, q_width_tiles: int) -> int:
    """The request's first Q head, from its Q first page (``Params::first_q_head``): head ``h``
    starts at tile column ``h * dim_tiles`` of a ``q_width_tiles``-wide Q; HEAD_ROWS: heads are
    rows, ``ceil(q_width_tiles / dim_tiles / 32)`` row tiles per user."""
    if request.flags & Flag.HEAD_ROWS:
        row_tiles = -(-(q_width_tiles // request.dim_tiles) // TILE_POSITIONS)
        return request.q.first_page // request.dim_tiles % row_tiles * TILE_POSITIONS + request.query_row
    return request.q.first_page % q_width_tiles // request.dim_tiles


def row_tile_pages(request: Request) -> int:
    """Pages between Q's (and the output's) consecutive row tiles of the request's heads
    (``Params::row_tile_pages``): 32 heads of ``dim_tiles`` tile columns on, or HEAD_ROWS the user's
    next row tile, ``dim_tiles`` pages on."""
    return request.dim_tiles if request.flags & Flag.HEAD_ROWS else TILE_POSITIONS * request.dim_tiles


def row_tile(request: Request, r: int) -> Request:
    """Row tile ``r`` of a request of several Q row tiles (``Params::row_tile``): the same request,
    Q and the output :func:`row_tile_pages` ``* r`` pages on."""
    def moved(operand):  # the COORD word moves on, a uint32 as in the kernels
        return dataclasses.replace(operand, coord=(operand.coord + r * row_tile_pages(request)) & 0xFFFFFFFF)

    return dataclasses.replace(request, q=moved(request.q), out=moved(request.out))


def attn_mask_page(request: Request, tile: int, stage_row: int, mask_users: int, q_width_tiles: int) -> int:
    """Page (tile) of an attention mask ``[mask_users, 1, n_q_heads, capacity]`` holding stage row
    ``stage_row``'s mask in position tile ``tile``: user ``user % mask_users``, Q head
    :func:`first_q_head` + the stage row's head (``Params::attn_mask_page``)."""
    head = first_q_head(request, q_width_tiles) + stage_row // request.rows_per_head
    head_tiles = -(-(q_width_tiles // request.dim_tiles) // TILE_POSITIONS)
    return ((request.user % mask_users) * head_tiles + head // TILE_POSITIONS) * request.capacity_tiles + tile


def attn_mask_row(request: Request, stage_row: int, q_width_tiles: int) -> int:
    """Row of that page holding the stage row's Q head (``Params::attn_mask_row``)."""
    return (first_q_head(request, q_width_tiles) + stage_row // request.rows_per_head) % TILE_POSITIONS


def clamp_mask_half(bits: int) -> int:
    """One bfloat16 mask value (its bits), clamped as the reader does (``clamp_mask_half``): NaN and
    anything below -1e30 (-inf included) -> MASK_VALUE (0xF14A), above +1e30 -> +1e30 (0x714A)."""
    magnitude = bits & 0x7FFF
    if magnitude > 0x7F80:
        return 0xF14A
    if magnitude > 0x714A:
        return 0xF14A if bits & 0x8000 else 0x714A
    return bits


def clamp_mask_word(word: int) -> int:
    """Two bfloat16 mask values in one word, each :func:`clamp_mask_half` (``clamp_mask_word``)."""
    return clamp_mask_half(word & 0xFFFF) | clamp_mask_half(word >> 16) << 16


def query_row_of(request: Request, stage_row: int) -> int:
    """Q (and output) row of ``stage_row``, counted from row 0 of the first page's row tile:
    ``query_row`` plus the stage row's row (HEAD_ROWS: its head)."""
    head, row = divmod(stage_row, request.rows_per_head)
    return request.query_row + (head if request.flags & Flag.HEAD_ROWS else row)


# Row-tile users (ttnn's spec_multi_pos_tiles candidates; attention_protocol.hpp "Row-tile users").


def row_tile_user(user: int, row: int, row_tile_users: bool) -> int:
    """Row tile ``row``'s user: ``user + row`` with row-tile users (its own POSITIONS entry and LSE
    row), else the request's (``row_tile_user``; ``attention_protocol.hpp`` "Row-tile users")."""
    return user + row if row_tile_users else user


def row_mask_page(sink: bool, row_tiles: int, row: int) -> int:
    """Row-tile users: the CONST page of row tile ``row``'s own tail mask (``row_mask_page``)."""
    return SINK_PAGE + (row_tiles if sink else 0) + row


def own_mask_page(own: int, tile: int, own_page: int) -> int:
    """Row-tile users: the CONST page a row tile of ``own`` kv positions adds to window tile
    ``tile``'s scores: none before its last live tile, ``own_page`` on it when partial, the kill
    mask past it (``own_mask_page``)."""
    live = -(-own // TILE_POSITIONS)
    if tile + 1 < live:
        return NO_MASK
    if tile + 1 == live:
        return own_page if own % TILE_POSITIONS else NO_MASK
    return KILL_PAGE
