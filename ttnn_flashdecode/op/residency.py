"""Residency: the 16 circular buffers one program places, and whether they fit L1.

The residency ``(q_rows, dim_tiles, block_tiles, tile_bytes)`` fixes every CB once per program
(DESIGN.md §2, §4). L1 use depends only on it, never on the context length: that is what the
online softmax buys.

CB plan (indices are part of the contract, :class:`ttnn_flashdecode.op.protocol.CB`)::

    Q        1                     landing page for the 64-byte chunks around one head's query row
    K, V     2*block_tiles*dim_tiles  double-buffered K / V blocks (no V when V is K: values_from_keys)
    CONST    4 (6)                 scaler, scale, the masks of the last two live tiles (a windowed
                                   program: and the window masks of its first two tiles)
    S        block_tiles           scores of one block, QS . K^T (+ mask); float32 with accurate_scores
    SCRATCH  block_tiles           probabilities P = exp(S - m) of one block
    M_A, M_B row_tiles each        running max, ping-pong (old / new), one page per Q row tile
    L        row_tiles             running sum
    LSUM     1                     block row sum (split-K combine: the partial's factor and its
                                   weighted sum), then 1/l at the end
    C        1                     correction factor exp(m_old - m_new)
    O        row_tiles*dim_tiles   running output
    PV       dim_tiles             block output P . V
    QSTAGE   row_tiles*dim_tiles   the group's gathered query rows
    QS       row_tiles*dim_tiles   QSTAGE * scale
    OUT      dim_tiles             normalised output, O / l (a row tile at a time)
    PARTIALS levels*(dim_tiles+1)  split programs only (index 17): the inbox, one slot per level of
                                   the combine tree (levels = ceil(log2(max_split))), each a
                                   child's partial (O, L)
    OUTBOX   dim_tiles+1           split programs only (index 18): this core's partial for its parent
    MAX_INBOX  levels              split only (19): the children's subtree maxima, a slot per level
    MAX_OUT    1                   split only (20): this subtree's max (slice 0: the request's)
    MAX_GLOBAL 1                   split only (21): slices 1..'s copy of the request's max
    LSE        1                   return_lse only (28): a request's LSE tile, float32
    LSE_STAGE  1                   return_lse only (29): the writer's staging page (LSE_STAGE_BYTES)
    APPEND_STAGE 1                 fused append only (30): the appended face rows, reader -> writer
    SPARSE     1                   sparse calls only (31): a user's index list, the reader's own
"""

from __future__ import annotations

import dataclasses

from ttnn_flashdecode.emulator.arch import ArchSpec
from ttnn_flashdecode.op.tiles import BLOCK_FLOAT_TILE_BYTES
from ttnn_flashdecode.op.protocol import (CB, MAX_REQUESTS_PER_CORE, MAX_SPLIT, const_pages, partial_pages, sparse_count_word,
                                          tree_levels, work_row_words)
from ttnn_flashdecode.op.kv_walk import PAGE_TABLE_CHUNK_ENTRIES

__all__ = [
    "Residency", "CbSpec", "cb_plan", "l1_bytes", "max_block_tiles", "check_fits", "available_l1_bytes",
    "BFLOAT16_TILE_BYTES", "KV_FORMATS", "KV_TILE_BYTES", "STATS_CBS", "stats_page_bytes",
]

BFLOAT16_TILE_BYTES = 2048
"""Bytes of one 32x32 bfloat16 tile (TT_FACTS §1; ``MUL_WITH_TILE_SIZE`` in dataflow_api_addrgen.h)."""

FLOAT16_B = 5
"""tt::DataFormat code of bfloat16 (``tensix_types.h``): data CBs, and statistics CBs by default."""

FLOAT32 = 0
"""tt::DataFormat code of float32 (``tensix_types.h``): the statistics CBs with ``fp32_stats``."""

BFP8_B = 6
"""tt::DataFormat code of bfloat8_b (``tensix_types.h``): a block-float K/V cache, 1088-byte tiles."""

BFP4_B = 7
"""tt::DataFormat code of bfloat4_b (``tensix_types.h``): a block-float K/V cache, 576-byte tiles."""

KV_FORMATS = {"bfloat16": FLOAT16_B, "bfloat8_b": BFP8_B, "bfloat4_b": BFP4_B}
"""K/V cache dtypes (ttnn's names) -> tt::DataFormat code of the K and V CBs."""

KV_TILE_BYTES = {FLOAT16_B: BFLOAT16_TILE_BYTES, BFP8_B: BLOCK_FLOAT_TILE_BYTES["bfloat8_b"],
                 BFP4_B: BLOCK_FLOAT_TILE_BYTES["bfloat4_b"]}
"""Bytes of one K/V tile per format (TT_FACTS §1; the block-float layout is :mod:`ttnn_flashdecode.op.tiles`')."""

INT32 = 8
"""tt::DataFormat code of int32 (``tensix_types.h``): the POSITIONS CB (one int32 per user)."""

POSITIONS_PAGE_ALIGNMENT = 32
"""The POSITIONS CB's page is the POSITIONS operand's page (``4 * batch`` bytes) rounded up to this."""

STATS_CBS = (CB.M_A, CB.M_B, CB.L, CB.LSUM, CB.C, CB.O, CB.PV, CB.PARTIALS, CB.OUTBOX, CB.MAX_INBOX, CB.MAX_OUT,
             CB.MAX_GLOBAL)
"""CBs holding the online softmax's running state (m, l, O) and its per-block updates. In float32
(with fp32 DST accumulation) they are not re-rounded to bfloat16 on every block, which is what
keeps long contexts and many split-K partials accurate."""

def append_stage_bytes(rows: int, dim_tiles: int, block_float: bool = False) -> int:
    """The APPEND_STAGE CB's page (``attention_append_stage.hpp`` "AppendStage"): a 64-byte header,
    the 8-byte DRAM addresses of ``2 * rows * dim_tiles`` face rows (64-aligned; ``rows``: K's and
    V's; ``block_float``, a bfloat8_b cache: twice as many pieces, each face row's data and its
    face's exponents, and a 128-byte scratch), a 64-byte slot each."""
    entries = (4 if block_float else 2) * rows * dim_tiles
    scratch = 128 if block_float else 0
    return 64 + 64 + -(-8 * entries // 64) * 64 + 64 * entries + scratch  # the first 64: slack to a 64-byte boundary


LSE_STAGE_BYTES = 32 * 64 + 64
"""The LSE_STAGE CB's page: a 64-byte slot per stage row, plus the slack to align them to 64."""

CONST_PAGES = 4
"""CONST pages of a program without a sliding window (``protocol.const_pages``)."""

MAX_ROW_TILES = 16
"""Most Q row tiles per request: 512 Q heads per KV head, or 16 speculative candidates (ttnn's
``spec_multi_pos_tiles``) of one sequence. L1 decides below it: the planner gives a KV group (or a
candidate group) whose row tiles do not fit one request's L1 one request per row tile
(:func:`ttnn_flashdecode.op.plan.plan_program`)."""

MAX_DIM_TILES = 18
"""Largest head_dim in tiles (576 elements: MLA's latent, DeepSeek-V3): the range the op is built and tested for. The reader's
row gather lands 16 tile rows per round in CB Q's one page (``attention_reader.cpp``), so it does
not depend on it."""


@dataclasses.dataclass(frozen=True)
class Residency:
    """What one staged program can serve.

    Attributes:
        q_rows: rows of the group tile: Q heads per KV group (decode), 1..32.
        dim_tiles: head_dim in tiles, ``ceil(head_dim / 32)``.
        block_tiles: position tiles per K/V block (the prefetch depth).
        tile_bytes: bytes per tile of every CB but K and V; 2048 (bfloat16).
        max_split: most split-K slices of any request in the program (1: no split; no PARTIALS CB).
        fp32_stats: keep :data:`STATS_CBS` in float32 (4096-byte pages) instead of bfloat16.
        batch: users (sequences) of the call: the POSITIONS operand holds one int32 per user, and
            the POSITIONS CB one page of them (:attr:`positions_page_bytes`).
        paged: the KV cache is paged: the reader holds one chunk of a user's page-table row in
            the PAGE_TABLE CB (``PAGE_TABLE_CHUNK_ENTRIES`` int32, 1 KiB).
        kv_format: tt::DataFormat code of the K and V CBs, the cache's (:data:`KV_FORMATS`):
            bfloat16, or block-float bfloat8_b / bfloat4_b, which compute unpacks as it reads.
        work_requests: most requests on one core: sizes the WORK CBs' page, one work row
            (:attr:`work_row_bytes`).
        windowed: the program has a sliding window: CONST holds two more pages, the window masks
            (:func:`~ttnn_flashdecode.op.protocol.const_pages`).
        sink: the call has attention sinks: CONST holds the sink page (page 6).
        mask: the call has an attention mask: CB MASK holds a block's mask tiles.
        lse: the call returns the LSE (``return_lse``): CBs LSE and LSE_STAGE.
        row_tiles: Q row tiles per request (``attention_protocol.hpp`` "Q row tiles"; 1 normally):
            QSTAGE, QS and the running state (M_A, M_B, L, O) hold one per row tile, and so does
            CONST's sink page; the K/V blocks, scores and per-block CBs do not grow.
        values_from_keys: V is K (``attention_protocol.hpp`` "Values from keys"): no CB V.
        row_tile_users: row tile r of a request is user ``user + r`` with its own position
            (``attention_protocol.hpp`` "Row-tile users"): CONST holds a tail-mask page per row tile.
        fp32_scores: CB S in float32 (``accurate_scores``; 4096-byte pages): the packer writes fp32
            DST's scores whole, and the unpackers read them as TF32 instead of bfloat16.
        sparse_k: entries per sparse index list, 0 for a dense call (``attention_protocol.hpp``
            "Sparse decode"): CB SPARSE holds one list (:attr:`sparse_page_bytes`).
    """

    q_rows: int
    dim_tiles: int
    block_tiles: int
    tile_bytes: int = BFLOAT16_TILE_BYTES
    max_split: int = 1
    fp32_stats: bool = False
    batch: int = 1
    paged: bool = False
    kv_format: int = FLOAT16_B
    windowed: bool = False
    sink: bool = False
    mask: bool = False
    work_requests: int = 1
    lse: bool = False
    row_tiles: int = 1
    values_from_keys: bool = False
    row_tile_users: bool = False
    fp32_scores: bool = False
    append_rows: int = 0
    sparse_k: int = 0

    @property
    def sparse_page_bytes(self) -> int:
        """Bytes of CB SPARSE's one page (``attention_sparse.hpp`` SparseList): the list's ``4 * sparse_k``
        bytes rounded up to 32, a scratch list as large, three state words and a cur_pos per request of
        a core, rounded up to 64."""
        return -(-(2 * -(-4 * self.sparse_k // 32) * 32 + 4 * (3 + MAX_REQUESTS_PER_CORE)) // 64) * 64

    @property
    def work_row_bytes(self) -> int:
        """Bytes of one work row (a page of the WORK operand and of the WORK CBs)."""
        return 4 * work_row_words(self.work_requests)

    @property
    def kv_tile_bytes(self) -> int:
        """Bytes of one K (or V) tile: 2048 (bfloat16), 1088 (bfloat8_b) or 576 (bfloat4_b)."""
        return KV_TILE_BYTES[self.kv_format]

    @property
    def positions_bytes(self) -> int:
        """Bytes of the POSITIONS operand's one page: an int32 per user (``4 * batch``)."""
        return 4 * self.batch

    @property
    def positions_page_bytes(self) -> int:
        """Bytes of the POSITIONS CB's one page: :attr:`positions_bytes` (a sparse call: at least a
        word per request of a core, where the reader leaves each request's count for compute,
        ``attention_protocol.hpp`` sparse_count_word) rounded up to :data:`POSITIONS_PAGE_ALIGNMENT`."""
        counts = 4 * (sparse_count_word(MAX_REQUESTS_PER_CORE - 1) + 1)
        words = max(self.positions_bytes, counts) if self.sparse_k else self.positions_bytes
        return -(-words // POSITIONS_PAGE_ALIGNMENT) * POSITIONS_PAGE_ALIGNMENT


@dataclasses.dataclass(frozen=True)
class CbSpec:
    """One circular buffer: index, name, tt::DataFormat code, page size (bytes), page count."""

    index: int
    name: str
    data_format: int
    page_bytes: int
    pages: int

    @property
    def total_bytes(self) -> int:
        """``page_bytes * pages``."""
        return self.page_bytes * self.pages


def _pages(residency: Residency) -> dict[CB, int]:
    dim, block, rows = residency.dim_tiles, residency.block_tiles, residency.row_tiles
    kv_pages = 2 * block * dim  # two blocks: the reader fills one while compute drains the other
    return {
        CB.Q: 1, CB.K: kv_pages, CB.CONST: const_pages(residency.windowed, residency.sink, rows, residency.row_tile_users),
        CB.S: block, CB.SCRATCH: block,
        CB.M_A: rows, CB.M_B: rows, CB.L: rows, CB.LSUM: 1, CB.C: 1,
        CB.O: rows * dim, CB.PV: dim, CB.QSTAGE: rows * dim, CB.QS: rows * dim, CB.OUT: dim, CB.POSITIONS: 1,
        CB.WORK: 1, CB.READER_WORK: 1, CB.WRITER_WORK: 1,
    } | ({} if residency.values_from_keys else {CB.V: kv_pages}) | ({CB.PAGE_TABLE: 1} if residency.paged else {}) | ({CB.MASK: block} if residency.mask else {}) | (
        {CB.SPARSE: 1} if residency.sparse_k else {}) | (
        {CB.LSE: 1, CB.LSE_STAGE: 1} if residency.lse else {}) | ({CB.APPEND_STAGE: 1} if residency.append_rows else {}) | ({
        CB.PARTIALS: tree_levels(residency.max_split) * partial_pages(dim),
        CB.OUTBOX: partial_pages(dim),
        CB.MAX_INBOX: tree_levels(residency.max_split), CB.MAX_OUT: 1, CB.MAX_GLOBAL: 1,
    } if residency.max_split > 1 else {})


def stats_page_bytes(tile_bytes: int, fp32_stats: bool) -> int:
    """Bytes of one page of a statistics CB (:data:`STATS_CBS`): a float32 tile with ``fp32_stats``
    (twice a bfloat16 tile), else a bfloat16 tile of ``tile_bytes``."""
    return 2 * tile_bytes if fp32_stats else tile_bytes


def cb_plan(residency: Residency) -> tuple[CbSpec, ...]:
    """The CBs of ``residency``, in index order: the 16 of the contract, plus the five split-K CBs
    (PARTIALS, OUTBOX, MAX_INBOX, MAX_OUT, MAX_GLOBAL) when split.

    Raises:
        ValueError: a residency field is out of range (q_rows not 1..32, dim_tiles or block_tiles < 1,
            tile_bytes not 2048).
    """
    _validate(residency)
    def spec(cb: CB, pages: int) -> CbSpec:
        if cb == CB.POSITIONS:
            return CbSpec(int(cb), cb.name, INT32, residency.positions_page_bytes, pages)
        if cb == CB.PAGE_TABLE:
            return CbSpec(int(cb), cb.name, INT32, 4 * PAGE_TABLE_CHUNK_ENTRIES, pages)
        if cb == CB.SPARSE:
            return CbSpec(int(cb), cb.name, INT32, residency.sparse_page_bytes, pages)
        if cb == CB.READER_WORK:  # row-tile users: the reader's own copy of POSITIONS follows the work row
            copy = residency.positions_page_bytes if residency.row_tile_users else 0
            return CbSpec(int(cb), cb.name, INT32, residency.work_row_bytes + copy, pages)
        if cb in (CB.WORK, CB.WRITER_WORK):
            return CbSpec(int(cb), cb.name, INT32, residency.work_row_bytes, pages)
        if cb == CB.LSE:  # float32 whatever fp32_stats says (return_lse needs fp32 DST accumulation)
            return CbSpec(int(cb), cb.name, FLOAT32, stats_page_bytes(residency.tile_bytes, True), pages)
        if cb == CB.LSE_STAGE:
            return CbSpec(int(cb), cb.name, INT32, LSE_STAGE_BYTES, pages)
        if cb == CB.APPEND_STAGE:
            kinds = 1 if residency.values_from_keys else 2  # K's face rows, and V's
            return CbSpec(int(cb), cb.name, INT32, append_stage_bytes(kinds * residency.append_rows, residency.dim_tiles,
                                                                          residency.kv_tile_bytes != 2048), pages)
        if cb in (CB.K, CB.V):
            return CbSpec(int(cb), cb.name, residency.kv_format, residency.kv_tile_bytes, pages)
        if residency.fp32_scores and cb == CB.S:
            return CbSpec(int(cb), cb.name, FLOAT32, stats_page_bytes(residency.tile_bytes, True), pages)
        if residency.fp32_stats and cb in STATS_CBS:
            return CbSpec(int(cb), cb.name, FLOAT32, stats_page_bytes(residency.tile_bytes, True), pages)
        return CbSpec(int(cb), cb.name, FLOAT16_B, residency.tile_bytes, pages)

    return tuple(spec(cb, pages) for cb, pages in sorted(_pages(residency).items()))


def _validate(residency: Residency) -> None:
    if not 1 <= residency.q_rows <= 32:
        raise ValueError(f"q_rows: expected 1 <= q_rows <= 32, got {residency.q_rows}")
    if not 1 <= residency.dim_tiles <= MAX_DIM_TILES:
        raise ValueError(f"dim_tiles: expected 1 <= dim_tiles <= {MAX_DIM_TILES} (head_dim <= 512), got {residency.dim_tiles}")
    if not 1 <= residency.row_tiles <= MAX_ROW_TILES or residency.row_tiles > 1 and residency.mask:
        raise ValueError(f"row_tiles: expected 1 <= row_tiles <= {MAX_ROW_TILES}, and 1 with an attention mask, got "
                         f"{residency.row_tiles} (mask {residency.mask})")
    if residency.row_tile_users and (residency.row_tiles < 2 or residency.windowed or residency.mask):
        raise ValueError(f"row_tile_users: expected several row tiles, no window, chunk or attention mask, got row_tiles "
                         f"{residency.row_tiles} (windowed {residency.windowed}, mask {residency.mask})")
    if residency.block_tiles < 1:
        raise ValueError(f"block_tiles: expected >= 1, got {residency.block_tiles}")
    if not 1 <= residency.max_split <= MAX_SPLIT:
        raise ValueError(f"max_split: expected 1 <= max_split <= {MAX_SPLIT}, got {residency.max_split}")
    if residency.kv_format not in KV_TILE_BYTES:
        raise ValueError(f"kv_format: expected one of {sorted(KV_TILE_BYTES)} (bfloat16, bfloat8_b, bfloat4_b), got {residency.kv_format}")
    if residency.tile_bytes != BFLOAT16_TILE_BYTES:
        raise ValueError(f"tile_bytes: expected {BFLOAT16_TILE_BYTES} (bfloat16 KV cache), got {residency.tile_bytes}")
    if not 1 <= residency.work_requests <= MAX_REQUESTS_PER_CORE:
        raise ValueError(f"work_requests: expected 1 <= work_requests <= {MAX_REQUESTS_PER_CORE}, got {residency.work_requests}")


def l1_bytes(residency: Residency) -> int:
    """L1 bytes the residency's 16 CBs occupy. Flat in the context length."""
    return sum(cb.total_bytes for cb in cb_plan(residency))


def available_l1_bytes(arch: str) -> int:
    """L1 bytes free for CBs on one worker core of ``arch``: L1 size minus the unreserved base.

    Both figures are read from the installed ttnn (see :class:`ttnn_flashdecode.emulator.arch.ArchSpec`).
    """
    spec = ArchSpec.for_name(arch)
    return spec.l1_bytes - spec.unreserved_base


def cb_budget_bytes(arch: str, budget_bytes: int | None = None) -> int:
    """L1 bytes the CBs may take: ``budget_bytes`` when given (an open device's allocator,
    :func:`device_cb_budget_bytes`), else ``arch``'s whole free L1 (:func:`available_l1_bytes`)."""
    return available_l1_bytes(arch) if budget_bytes is None else budget_bytes


#: L1 bytes the device planner leaves free above the CBs, for the small L1 buffers ttnn ops allocate
#: between calls (a sharded Q, a few-tile L1 output, ...), so a plan cached on one call still fits
#: on the next. 16 KiB: 8 bfloat16 tiles a core.
DEVICE_L1_MARGIN_BYTES = 16 * 1024


def device_cb_budget_bytes(device) -> int:
    """L1 bytes an open ttnn ``device`` leaves for this op's CBs, minus :data:`DEVICE_L1_MARGIN_BYTES`.

    tt-metal places a program's CBs from the L1 allocator's base upward and allocates L1 buffers
    from the top down; a launch whose CBs reach the lowest allocated L1 buffer is refused. So the
    budget is the distance from the base to the lowest allocated block of the L1 allocator (its
    ``ttnn.get_memory_view`` block table, addresses relative to the base), or the whole bank
    when nothing is allocated; ``l1_small_size`` is already outside the bank (tt-metal carves it
    off the top). Read on every call: L1 tensors come and go.

    Returns:
        Bytes (may be <= 0 when L1 is nearly full; :func:`check_fits` then refuses the plan).
    """
    import ttnn

    view = ttnn.get_memory_view(device, ttnn.BufferType.L1)
    allocated = [int(block["address"]) for block in view.block_table if block["allocated"] == "yes"]
    return min(allocated, default=int(view.total_bytes_per_bank)) - DEVICE_L1_MARGIN_BYTES


def check_fits(residency: Residency, arch: str, budget_bytes: int | None = None) -> None:
    """Raise if the residency's CBs do not fit ``arch``'s free L1 (or ``budget_bytes``, when given:
    what an open device's allocator leaves, :func:`device_cb_budget_bytes`).

    Raises:
        ValueError: with the needed and available byte counts.
    """
    need = l1_bytes(residency)
    have = cb_budget_bytes(arch, budget_bytes)
    if need > have:
        largest = max_block_tiles(residency.q_rows, residency.dim_tiles, residency.tile_bytes, arch,
                                  max_split=residency.max_split, fp32_stats=residency.fp32_stats, budget_bytes=budget_bytes, paged=residency.paged,
                                  kv_format=residency.kv_format, windowed=residency.windowed, sink=residency.sink,
                                  mask=residency.mask, lse=residency.lse, row_tiles=residency.row_tiles,
                                  values_from_keys=residency.values_from_keys, row_tile_users=residency.row_tile_users,
                                  fp32_scores=residency.fp32_scores, append_rows=residency.append_rows,
                                  sparse_k=residency.sparse_k)
        where = f"{arch} has {have} bytes free" if budget_bytes is None else \
            f"the device's L1 allocator leaves {have} bytes for CBs (L1 buffers and l1_small_size take the rest)"
        raise ValueError(
            f"residency {residency} needs {need} bytes of L1 for its circular buffers; {where} "
            f"(try a smaller block_tiles; the largest that fits is {largest})"
        )


def max_block_tiles(
    q_rows: int, dim_tiles: int, tile_bytes: int, arch: str, *, max_split: int = 1, fp32_stats: bool = False,
    budget_bytes: int | None = None, paged: bool = False, kv_format: int = FLOAT16_B, windowed: bool = False,
    sink: bool = False, mask: bool = False, lse: bool = False, row_tiles: int = 1, values_from_keys: bool = False,
    row_tile_users: bool = False, fp32_scores: bool = False,
    append_rows: int = 0, sparse_k: int = 0,
) -> int:
    """The largest ``block_tiles`` whose residency fits ``arch``'s free L1; 0 if even 1 does not.

    Args:
        q_rows: Q heads per KV group, 1..32 (the group tile has 32 rows whatever q_rows is).
        dim_tiles: head_dim in tiles.
        tile_bytes: 2048 (bfloat16).
        arch: ``"wormhole_b0"`` or ``"blackhole"``.
        max_split: most split-K slices per request (sizes the PARTIALS inbox).
        fp32_stats: statistics CBs in float32.
        budget_bytes: L1 bytes for CBs; default ``available_l1_bytes(arch)`` (an empty L1).
        paged: a paged KV cache (adds the PAGE_TABLE CB).
        kv_format: the K/V CBs' format (:data:`KV_FORMATS`; block-float blocks take less L1).
        windowed: a sliding-window program (two more CONST pages).
        sink: a call with attention sinks (CONST's sink page).
        mask: a call with an attention mask (CB MASK, a block's tiles).
        lse: a call with ``return_lse`` (CBs LSE and LSE_STAGE).
        row_tiles: Q row tiles per request (:class:`Residency`).
        values_from_keys: V is K (no CB V: a block's L1 is half).
        row_tile_users: row tiles of their own users (:class:`Residency`).
        fp32_scores: CB S in float32 (:class:`Residency`).
        append_rows: a fused append's rows per user (:class:`Residency`).
        sparse_k: entries per sparse index list (CB SPARSE), 0 for a dense call.

    Raises:
        ValueError: bad residency fields or an unknown arch.
    """
    have = cb_budget_bytes(arch, budget_bytes)
    fields = dict(paged=paged, kv_format=kv_format, windowed=windowed, sink=sink, mask=mask, lse=lse, row_tiles=row_tiles,
                  values_from_keys=values_from_keys, row_tile_users=row_tile_users, fp32_scores=fp32_scores,
                  append_rows=append_rows, sparse_k=sparse_k)
    base = l1_bytes(Residency(q_rows, dim_tiles, 1, tile_bytes, max_split, fp32_stats, **fields))
    per_block_tile = l1_bytes(Residency(q_rows, dim_tiles, 2, tile_bytes, max_split, fp32_stats, **fields)) - base
    if base > have:
        return 0
    return 1 + (have - base) // per_block_tile
