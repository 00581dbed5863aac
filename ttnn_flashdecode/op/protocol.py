"""The parameter block: the 16 uint32 words that describe one attention request (a core's run of
them, after a request count, is its row of the WORK table).

Host half of the contract; the kernel half is ``kernels/attention_protocol.hpp``. The two must
agree word for word, and ``tests/test_protocol_pair.py`` pins them off-hardware by compiling the
header with the host C++ compiler and feeding it words produced by :func:`encode`.

Layout (DESIGN.md §3)::

    word 0  HEADS           byte 0 q_rows (1..32), byte 1 query_row (0..31),
                            byte 2 flags (bit0 CHUNK, bit1 ROWS), byte 3 positions (ROWS mode, else 0)
    word 1  DIM_TILES       head_dim tiles, ceil(head_dim / 32)
    word 2  USER            the request's user (sequence for CHUNK): its entry in the POSITIONS
                            operand, from which the kernels derive kv_positions (:func:`kv_positions_at`)
    word 3  BLOCK_TILES     position tiles per K/V block; equals the residency's
    word 4  CAPACITY_TILES  position tiles the K (and V) region holds
    word 5  SPLIT           split-K slice: byte 0 slice index, byte 1 slice count (0 or 1: the
                            request is not split), bytes 2-3 the core index (in the program's
                            NoC-coordinate table) of slice 0, the request's reducer
    words 6..15             (COORD, BASE) for Q, K, V, CONST, OUT

Request kinds (word 0 byte 2). Every kind stages its query rows as the rows of one 32-row group
tile: stage row ``s = head * rows_per_head + row`` (``s < stage_rows = heads * rows_per_head <=
32``), where

- decode (no flag): ``heads = q_rows`` Q heads of one KV group, ``rows_per_head = 1``;
- CHUNK: ``heads = 1`` (the request's Q head), ``rows_per_head = q_rows = C`` consecutive positions
  of one sequence, causal (prefill of a chunk of 1..32 positions);
- ROWS: ``heads = q_rows`` Q heads of one KV group, ``rows_per_head = positions`` (byte 3),
  ``q_rows * positions <= 32`` (several consecutive positions of one user, e.g. draft tokens).

Stage row ``s`` is Q row ``query_row + row`` of Q head (the first page's head) ``+ head``; rows past
31 continue in Q's next row tiles (:func:`query_page`), and the output takes the same rows.
Positions are not runtime args. The POSITIONS operand (one int32 per user, ttnn's
``cur_pos_tensor``; a DRAM-interleaved ROW_MAJOR buffer whose one page is the whole vector) holds
each user's last row's position (decode, ROWS: ``cur_pos``) or its chunk's first position
(CHUNK); the kernels read it on device, so one program (and a captured trace) serves every
position vector. Its address is a common runtime arg (:attr:`CommonArg.POSITIONS_BASE`).
``kv_positions`` (:func:`kv_positions_at`) is the LAST row's live count: row ``row`` (of every head) attends to positions
``0 .. kv_positions - rows_per_head + row``.

Masks (CONST pages 2 and 3, :func:`mask_tile`), operand words (a NoC coordinate, or
:data:`INTERLEAVED_BIT` and a first page id) and split-K slices (:func:`slice_tiles`): the kernel
half states them, ``kernels/attention_protocol.hpp`` "Masks", "Operand words" and "Split-K";
docs/design.md "Split-K" says why.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

# The split-K combine's ids and tree are part of the contract too; they live in combine_tree.py.
from ttnn_flashdecode.op.combine_tree import (SEMAPHORES_PER_CORE, Semaphore, partial_pages, semaphore_ids,
                                              tree_children, tree_levels, tree_parent)

__all__ = ["WORDS", "ROW_REQUEST_COUNT", "ROW_HEADER", "MAX_REQUESTS_PER_CORE", "request_row_offset",
           "work_row_words", "work_slot", "CommonArg", "WINDOW_PAGE", "WINDOW_NEXT_PAGE", "SINK_PAGE", "KILL_PAGE",
           "const_pages", "TILE_POSITIONS", "INTERLEAVED_BIT", "NO_MASK", "GATHER_MASK", "MASK_PAGE",
           "MASK_BEFORE_PAGE", "Field", "Flag", "CB", "Semaphore", "semaphore_ids", "SEMAPHORES_PER_CORE",
           "partial_pages", "tree_levels", "tree_children", "tree_parent", "ConstTile", "Operand", "Request",
           "encode", "decode"]

WORDS = 16
"""Words in one parameter block."""

ROW_REQUEST_COUNT = 0
"""Word 0 of a core's work row (a page of the WORK operand): the core's request count."""

ROW_HEADER = 1
"""Words of a work row before the first parameter block; request ``r``'s block starts at
``ROW_HEADER + r * WORDS`` (``request_row_offset``).

No kernel has per-core runtime args: tt-metal re-applies every per-core arg on each program-cache
hit, a host cost that grows with cores x args (measured by ``host-bench``). A core's work is a row of
the WORK operand, a DRAM-interleaved uint32 table written once per plan, found by the core's
logical coordinates (:func:`work_slot`). Its words hold no addresses (BASE words 0): every
operand's address is a common runtime arg (:class:`CommonArg`), so the table outlives the tensors."""

MAX_REQUESTS_PER_CORE = 21
"""Most requests one core's work row holds: the reader keeps one position per request in a fixed
array (``kMaxRequestsPerCore``)."""


def request_row_offset(request: int) -> int:
    """Word of a work row where request ``request``'s parameter block starts."""
    return ROW_HEADER + request * WORDS


def work_row_words(requests: int) -> int:
    """Words of a work row holding ``requests`` requests, rounded up to 16 (64 bytes: every row
    starts on the DRAM alignment of both architectures; ``work_row_words``)."""
    return -(-request_row_offset(requests) // 16) * 16


def sparse_count_word(r: int) -> int:
    """Word of the POSITIONS page where a sparse call's reader leaves request ``r``'s virtual cur_pos
    (``r``: its index in its core's work row; ``sparse_count_word``)."""
    return r


def work_slot(x: int, y: int, grid_x: int) -> int:
    """The work row of the core at logical ``(x, y)`` of a grid ``grid_x`` cores wide."""
    return y * grid_x + x


class CommonArg(enum.IntEnum):
    """Common runtime args of the reader and the writer (``attention_protocol.hpp`` ``CommonArg``):
    the operands' buffer addresses in ``program_factory.OPERANDS`` order, then (split programs)
    the NoC coordinate table of the program's cores from :attr:`CORE_TABLE` on."""

    Q_BASE = 0
    K_BASE = 1
    V_BASE = 2
    CONST_BASE = 3
    OUT_BASE = 4
    POSITIONS_BASE = 5
    PAGE_TABLE_BASE = 6  # 0 for a contiguous cache
    MASK_BASE = 7  # 0 without an attention mask
    WORK_BASE = 8
    LSE_BASE = 9  # 0 without return_lse
    APPEND_BASE = 10  # 0 without append_k / append_latent (op/append.py)
    APPEND_V_BASE = 11  # 0 without append_v
    CORE_TABLE = 12


TILE_POSITIONS = 32
"""Positions (rows) per tile on the position axis (a 32x32 tile)."""

INTERLEAVED_BIT = 1 << 31
"""Bit 31 of a COORD word: the operand is DRAM-interleaved; the low 31 bits are its first page."""

NO_MASK = 0xFFFFFFFF
"""What :func:`mask_tile` returns for a fully live position tile (the kernel's ``kNoMask``)."""

GATHER_MASK = 0xFFFFFFFE
"""What :func:`mask_tile` returns for a tile whose mask the reader assembles row by row (``kGatherMask``)."""

MASK_PAGE = 2
"""CONST page holding the last live tile's mask (an empty split slice: the kill mask)."""

MASK_BEFORE_PAGE = 3
"""CONST page holding the mask of the tile before the last live one (several rows per head only)."""

WINDOW_PAGE = 4
"""CONST page holding the window mask of a sliding window's first tile (windowed programs only)."""

WINDOW_NEXT_PAGE = 5
"""CONST page holding the window mask of the tile after a sliding window's first one."""

SINK_PAGE = 6
"""CONST page holding each stage row's attention-sink logit in column 0 (calls with sinks only)."""


KILL_PAGE = MASK_BEFORE_PAGE
"""Row-tile users: the CONST page holding the kill mask (MASK_VALUE everywhere; ``kConstPageKill``)."""


def const_pages(windowed: bool, sink: bool = False, row_tiles: int = 1, row_tile_users: bool = False) -> int:
    """CONST pages per request: scaler, scale, two tail-mask pages; a windowed program adds the two
    window-mask pages, a call with attention sinks a sink page per Q row tile (pages 6.., after the
    window's even without one), row-tile users one tail-mask page per row tile after those
    (``const_pages``)."""
    if row_tile_users:
        return SINK_PAGE + (row_tiles if sink else 0) + row_tiles
    return SINK_PAGE + row_tiles if sink else WINDOW_NEXT_PAGE + 1 if windowed else MASK_BEFORE_PAGE + 1


MAX_Q_ROWS = 32
MAX_SPLIT = 255
MAX_QUERY_ROW = 31
_U32 = 0xFFFFFFFF


class Field(enum.IntEnum):
    """Word index of each field (``attention_protocol.hpp``: ``enum Field``)."""

    HEADS = 0
    DIM_TILES = 1
    USER = 2
    BLOCK_TILES = 3
    CAPACITY_TILES = 4
    SPLIT = 5
    Q_COORD = 6
    Q_BASE = 7
    K_COORD = 8
    K_BASE = 9
    V_COORD = 10
    V_BASE = 11
    CONST_COORD = 12
    CONST_BASE = 13
    OUT_COORD = 14
    OUT_BASE = 15


class Flag(enum.IntFlag):
    """Byte 2 of word 0. No flag set: an ordinary decode request (one KV group, one query row)."""

    CHUNK = 1
    ROWS = 2
    HEAD_ROWS = 4  # decode only: Q and output [1, batch, n_heads, head_dim], a user's heads on rows


class CB(enum.IntEnum):
    """Circular-buffer indices; part of the contract (DESIGN.md §4, ``attention_protocol.hpp``)."""

    Q = 0
    K = 1
    V = 2
    CONST = 3
    S = 4
    SCRATCH = 5
    M_A = 6
    M_B = 7
    L = 8
    LSUM = 9
    C = 10
    O = 11
    PV = 12
    QSTAGE = 13
    QS = 14
    OUT = 16
    PARTIALS = 17  # split-K only: a core's inbox of its children's partials (not one of the seed's 16)
    OUTBOX = 18  # split-K only: a core's partial on its way to its parent
    MAX_INBOX = 19  # split-K only: a core's inbox of its children's subtree maxima
    MAX_OUT = 20  # split-K only: a subtree's max for the parent (slice 0: the request's, for its children)
    MAX_GLOBAL = 21  # split-K only, slices 1..: the request's max, copied from the parent
    POSITIONS = 22  # the POSITIONS operand's one page (an int32 per user), reader -> compute
    PAGE_TABLE = 23  # paged caches: one chunk of a user's page-table row (the reader's own)
    MASK = 24  # non-causal calls with attn_mask: a block's mask tiles, reader -> compute
    WORK = 25  # this core's work row (WORK operand): reader -> compute
    READER_WORK = 26  # the same row, the reader's own copy
    WRITER_WORK = 27  # the same row, reader -> writer
    LSE = 28  # return_lse only: a request's LSE tile (float32, column 0), compute -> writer
    LSE_STAGE = 29  # return_lse only: the writer's staging page for the 4-byte LSE writes
    APPEND_STAGE = 30  # fused append only: the appended face rows and their DRAM addresses, reader -> writer
    SPARSE = 31  # sparse calls only: a user's index list (the reader's own; attention_protocol.hpp "Sparse decode")


class ConstTile(enum.IntEnum):
    """Tile index of each entry of the constants operand (DESIGN.md §2, ``constants.py``)."""

    SCALER = 0
    SCALE = 1
    TAIL_MASK = 2  # tail mask t is tile TAIL_MASK + t, t = 0..31 (t = 0 kills the whole tile)
    CAUSAL_MASK = 34  # causal mask for chunk length C is tile CAUSAL_MASK + C - 1
    COUNT = 66
    SINK = 66  # with attention sinks: tile SINK + h // 32, row h % 32, column 0 = Q head h's sink logit


@dataclasses.dataclass(frozen=True)
class Operand:
    """Where one operand lives: the (COORD, BASE) word pair of the parameter block.

    Attributes:
        coord: the COORD word, a uint32 (see the module docstring).
        base: the BASE word, a uint32 byte address.
    """

    coord: int = 0
    base: int = 0

    @classmethod
    def interleaved(cls, address: int, first_page: int = 0) -> Operand:
        """A DRAM-interleaved operand: buffer ``address`` (bytes), region starting at page ``first_page``.

        Raises:
            ValueError: ``first_page`` does not fit 31 bits or ``address`` does not fit 32 bits.
        """
        if not 0 <= first_page < INTERLEAVED_BIT:
            raise ValueError(f"first_page: expected 0 <= first_page < 2**31, got {first_page}")
        return cls(coord=INTERLEAVED_BIT | first_page, base=address)

    @property
    def is_interleaved(self) -> bool:
        """True when the COORD word marks a DRAM-interleaved tensor."""
        return bool(self.coord & INTERLEAVED_BIT)

    @property
    def first_page(self) -> int:
        """First page id of an interleaved operand's region (tiles)."""
        return self.coord & ~INTERLEAVED_BIT


@dataclasses.dataclass(frozen=True)
class Request:
    """One attention request: the host's view of one parameter block.

    Attributes:
        q_rows: Q heads in the KV group (decode, ROWS), or chunk length C (CHUNK); 1..32.
        dim_tiles: head_dim in tiles, ``ceil(head_dim / 32)``; >= 1.
        kv_positions: live positions the LAST query row attends to (``0..kv_positions-1``); row
            ``row`` of every head attends to ``0..kv_positions - rows_per_head + row``. Not on the
            wire: the kernels derive it from the POSITIONS operand (:func:`kv_positions_at`); the
            host keeps it for its own accounting (schedule, masks); 0 after :func:`decode`.
        block_tiles: position tiles per K/V block; must equal the residency's.
        capacity_tiles: position tiles the K (and V) region of this KV head holds.
        query_row: row of Q (and the output) holding this request's first query row, 0..31 within
            its row tile (the row tile itself is folded into the Q/OUT first page); further rows
            follow it, into the next row tiles if need be.
        flags: :class:`Flag` bits.
        positions: ROWS mode: consecutive query rows per Q head, 1..32 // q_rows; 0 otherwise.
        split_index: split-K slice this request covers, 0..split_count-1 (0 when not split).
        split_count: slices the request is cut into; 0 or 1 means not split; <= 255.
        split_first_core: core-table index of slice 0 (the reducer); < 65536; 0 when not split.
        user: word 2, the request's user (CHUNK: sequence), its index into the POSITIONS operand;
            0..2**32-1.
        q, k, v, constants, out: operand locations (:class:`Operand`).
        tile_bytes: bytes per tile of the operands (2048 for bfloat16); not on the wire.
        window: the program's sliding window in positions (0: none); not on the wire (a named
            compile-time arg): row ``p`` attends ``max(0, p + 1 - window) .. p``.
        attention_chunk: the program's attention chunk C in positions (0: none; not on the wire):
            row ``p`` attends from ``floor(p / C) * C`` on (with a window, the later start).
    """

    q_rows: int
    dim_tiles: int
    kv_positions: int
    block_tiles: int
    capacity_tiles: int
    query_row: int = 0
    flags: int = 0
    positions: int = 0
    split_index: int = 0
    split_count: int = 0
    split_first_core: int = 0
    user: int = 0
    q: Operand = Operand()
    k: Operand = Operand()
    v: Operand = Operand()
    constants: Operand = Operand()
    out: Operand = Operand()
    tile_bytes: int = 2048
    window: int = 0
    attention_chunk: int = 0

    @property
    def heads(self) -> int:
        """Q heads staged: 1 for CHUNK, else ``q_rows``."""
        return 1 if self.flags & Flag.CHUNK else self.q_rows

    @property
    def rows_per_head(self) -> int:
        """Consecutive query rows (positions) per Q head: C for CHUNK, ``positions`` for ROWS, else 1."""
        if self.flags & Flag.CHUNK:
            return self.q_rows
        return self.positions if self.flags & Flag.ROWS else 1

    @property
    def stage_rows(self) -> int:
        """Rows of the group tile in use: ``heads * rows_per_head`` (<= 32)."""
        return self.heads * self.rows_per_head


def _require(field: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{field}: expected {low} <= {field} <= {high}, got {value}")


def encode(request: Request, residency) -> list[int]:
    """Encode ``request`` into the 16 uint32 words of the parameter block.

    Pure: no device, no allocation beyond the returned list.

    Args:
        request: the request.
        residency: the program's :class:`ttnn_flashdecode.op.residency.Residency` (anything with
            ``block_tiles``, ``dim_tiles`` and ``tile_bytes``); the request must agree with it.

    Returns:
        16 ints, each in ``0..2**32-1`` (little-endian uint32 words of a work row).

    Raises:
        ValueError: naming the field, the value and the bound, when ``q_rows`` is not in 1..32,
            ``query_row`` is past 31, ``dim_tiles`` or ``kv_positions`` is 0, ``positions`` is set
            without the ROWS flag, or with it is 0 or makes ``q_rows * positions`` exceed 32,
            ``flags`` has unknown bits or both CHUNK and ROWS, the residency has several Q row tiles
            and the request is split, not decode or not 32 rows, ``tile_bytes`` differs from the residency's (the cache's), ``block_tiles`` or
            ``dim_tiles`` differs from the residency's, the split fields are out of range
            (``split_count`` > 255, ``split_index`` >= ``split_count``, ``split_first_core`` >
            65535), ``capacity_tiles`` is 0 or not a multiple of ``2 * block_tiles`` (the padded
            read window of the cache's last position, :func:`padded_tiles`, would leave the cache),
            or any word does not fit 32 bits. ``kv_positions`` is not checked: it is not on the
            wire, and the kernels clamp what they read (:func:`kv_positions_at`).
    """
    _require("q_rows", request.q_rows, 1, MAX_Q_ROWS)
    _require("query_row", request.query_row, 0, MAX_QUERY_ROW)
    _require("flags", request.flags, 0, int(Flag.CHUNK | Flag.ROWS | Flag.HEAD_ROWS))
    if request.flags & Flag.HEAD_ROWS and request.flags & (Flag.CHUNK | Flag.ROWS):
        raise ValueError(f"flags: expected HEAD_ROWS on a decode request only (no CHUNK or ROWS), got {request.flags}")
    _require("positions", request.positions, 0, 0xFF)
    if request.flags & Flag.CHUNK and request.flags & Flag.ROWS:
        raise ValueError(f"flags: expected CHUNK or ROWS, not both, got {request.flags}")
    if request.positions and not request.flags & Flag.ROWS:
        raise ValueError(f"positions: expected 0 without the ROWS flag, got {request.positions}")
    if request.flags & Flag.ROWS:
        most = MAX_Q_ROWS // request.q_rows
        if not 1 <= request.positions <= most:
            raise ValueError(
                f"positions: expected 1 <= positions <= {most} (q_rows * positions <= 32 rows of one tile, "
                f"q_rows {request.q_rows}), got {request.positions}"
            )
    _require("dim_tiles", request.dim_tiles, 1, _U32)
    _require("user", request.user, 0, _U32)
    _require("split_count", request.split_count, 0, MAX_SPLIT)
    _require("split_index", request.split_index, 0, max(request.split_count, 1) - 1)
    _require("split_first_core", request.split_first_core, 0, 0xFFFF)
    if request.tile_bytes != residency.tile_bytes:
        raise ValueError(
            f"tile_bytes: expected the cache's tile size {residency.tile_bytes}, got {request.tile_bytes}"
        )
    if request.block_tiles != residency.block_tiles:
        raise ValueError(
            f"block_tiles: expected the residency's {residency.block_tiles}, got {request.block_tiles}"
        )
    if request.dim_tiles != residency.dim_tiles:
        raise ValueError(f"dim_tiles: expected the residency's {residency.dim_tiles}, got {request.dim_tiles}")
    if getattr(residency, "row_tiles", 1) > 1 and (request.flags & ~Flag.HEAD_ROWS
                                                   or request.q_rows != MAX_Q_ROWS):  # Params::valid_layout
        raise ValueError(f"row tiles: expected a decode request of {MAX_Q_ROWS} rows per row tile, got {request}")
    _require("capacity_tiles", request.capacity_tiles, 1, _U32)
    double_block = 2 * request.block_tiles
    if request.capacity_tiles % double_block:
        raise ValueError(
            f"capacity_tiles: expected a multiple of 2 * block_tiles = {double_block} (the padded read window at the "
            f"cache's last position stays inside it), got {request.capacity_tiles}"
        )
    heads = request.q_rows | request.query_row << 8 | request.flags << 16 | request.positions << 24
    words = [0] * WORDS
    words[Field.HEADS] = heads
    words[Field.DIM_TILES] = request.dim_tiles
    words[Field.USER] = request.user
    words[Field.BLOCK_TILES] = request.block_tiles
    words[Field.CAPACITY_TILES] = request.capacity_tiles
    words[Field.SPLIT] = request.split_index | request.split_count << 8 | request.split_first_core << 16
    for name, index in _OPERAND_FIELDS:
        operand: Operand = getattr(request, name)
        _require(f"{name}.coord", operand.coord, 0, _U32)
        _require(f"{name}.base", operand.base, 0, _U32)
        words[index] = operand.coord
        words[index + 1] = operand.base
    return words


_OPERAND_FIELDS = (
    ("q", Field.Q_COORD),
    ("k", Field.K_COORD),
    ("v", Field.V_COORD),
    ("constants", Field.CONST_COORD),
    ("out", Field.OUT_COORD),
)


def decode(words: Sequence[int], tile_bytes: int = 2048) -> Request:
    """Decode 16 parameter-block words back into a :class:`Request` (inverse of :func:`encode`).

    Args:
        words: 16 uint32 values.
        tile_bytes: the tile size to record (not carried on the wire).

    Raises:
        ValueError: ``words`` is not 16 values in ``0..2**32-1``.
    """
    if len(words) != WORDS:
        raise ValueError(f"words: expected {WORDS} words, got {len(words)}")
    for index, word in enumerate(words):
        _require(f"words[{index}]", int(word), 0, _U32)
    heads = int(words[Field.HEADS])
    operands = {
        name: Operand(coord=int(words[index]), base=int(words[index + 1])) for name, index in _OPERAND_FIELDS
    }
    return Request(
        q_rows=heads & 0xFF,
        query_row=heads >> 8 & 0xFF,
        flags=heads >> 16 & 0xFF,
        positions=heads >> 24 & 0xFF,
        dim_tiles=int(words[Field.DIM_TILES]),
        kv_positions=0,  # not on the wire: the kernels read it from the POSITIONS operand
        user=int(words[Field.USER]),
        block_tiles=int(words[Field.BLOCK_TILES]),
        capacity_tiles=int(words[Field.CAPACITY_TILES]),
        split_index=int(words[Field.SPLIT]) & 0xFF,
        split_count=int(words[Field.SPLIT]) >> 8 & 0xFF,
        split_first_core=int(words[Field.SPLIT]) >> 16,
        tile_bytes=tile_bytes,
        **operands,
    )
