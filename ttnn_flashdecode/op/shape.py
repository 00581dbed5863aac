"""What one :func:`~ttnn_flashdecode.attention` call is, once validated: its shapes and request
kind (:class:`DecodeShape`; its compute-kernel options are :mod:`.compute_options`'). Frozen and
hashable: it keys the plan cache (:func:`ttnn_flashdecode.op.plan.plan_program`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import ttnn

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op.modifiers import ScoreModifiers
from ttnn_flashdecode.op.residency import KV_FORMATS

__all__ = ["KINDS", "Q_LAYOUTS", "WRAPPED_POSITIONS", "RequestLayout", "DecodeShape"]


Q_LAYOUTS = ("rows", "heads")
"""Q (and output) layouts: ``[1, 1, batch * rows, n_q_heads * head_dim]`` or ttnn's decode
``[1, batch, n_q_heads, head_dim]`` (:class:`DecodeShape` ``q_layout``)."""

KINDS = ("decode", "chunk", "rows")
"""Request kinds: one query row per user; a causal chunk per sequence (CHUNK); several
consecutive query rows per user (ROWS)."""


WRAPPED_POSITIONS = 1 << 29
"""Positions of a circular cache (``cache_position_modulo``) run ``0 .. WRAPPED_POSITIONS - 1``:
logical, far past any context a model serves, and with room in the parameter block's 32-bit
position arithmetic."""


@dataclasses.dataclass(frozen=True)
class RequestLayout:
    """The planner's choice of how a call's Q rows become requests
    (:func:`~ttnn_flashdecode.op.plan.plan_program`), apart from the call's shape.

    Attributes:
        row_tiles: Q row tiles per decode request: 1, one request per 32 Q heads of a KV group; or
            ``gqa_ratio / 32`` (> 1, no attention mask), one request per KV group whose every K/V
            block serves all its row tiles (``attention_protocol.hpp`` "Q row tiles"); or, with
            ``row_tile_users``, the candidates of one group.
        row_tile_users: ``users_per_table_row`` candidates of one sequence (ttnn's
            ``spec_multi_pos_tiles``; :meth:`DecodeShape.candidate_row_tiles_fit`) are one request of
            ``row_tiles`` consecutive users, row tile ``r`` being user ``user + r`` with its own
            position, so the group's cache is read once (``attention_protocol.hpp`` "Row-tile users").
    """

    row_tiles: int = 1
    row_tile_users: bool = False


@dataclasses.dataclass(frozen=True)
class DecodeShape:
    """Shapes of one call.

    Attributes:
        batch: users (sequences); Q rows ``b * rows .. b * rows + rows - 1`` are user ``b``'s.
        n_q_heads, n_kv_heads: head counts; ``n_q_heads % n_kv_heads == 0`` (GQA ratio = q_rows).
        head_dim: elements per head (any >= 1; padded to ``dim_tiles * 32``).
        capacity: positions the KV cache holds per (user, KV head); paged: the page table's
            entries per user times ``cache_block_size``.
        kind: one of :data:`KINDS`.
        rows: query rows per user: 1 for decode; the chunk length C (1..32) for chunk; the
            positions P per user for rows (``q_rows * P <= 32``).
        cache_block_size: paged cache: positions per cache block (16, or a multiple of 32); 0 for a
            contiguous cache ``[batch, n_kv_heads, capacity, head_dim]``.
        cache_blocks: paged cache: blocks in K (and V) ``[cache_blocks, n_kv_heads,
            cache_block_size, head_dim]``; 0 for a contiguous cache.
        kv_dtype: the K/V cache's dtype, a key of :data:`~ttnn_flashdecode.op.residency.KV_FORMATS`
            (``"bfloat16"``, ``"bfloat8_b"``, ``"bfloat4_b"``); Q and the output are bfloat16.
        q_layout: ``"rows"``: Q and the output ``[1, 1, batch * rows, n_q_heads * head_dim]``
            (activation layout); ``"heads"`` (decode only): ``[1, batch, n_q_heads, head_dim]``,
            ttnn's decode layout, each user's heads on the rows of its own row tiles (HEAD_ROWS).
        scores: the call's score modifiers (:class:`~ttnn_flashdecode.op.modifiers.ScoreModifiers`:
            softcap, window, attention chunk, attention mask, sinks, causality), each owned by its
            module in :mod:`ttnn_flashdecode.op.modifiers`.
        cache_wrap: a circular paged cache (ttnn's ``cache_position_modulo``): positions are
            logical and unbounded (below :data:`WRAPPED_POSITIONS`), position ``L`` lives in cache
            slot ``L % cache_wrap``; a multiple of ``cache_block_size``, at most ``capacity``, at
            least ``window``. 0: none (positions index the cache directly).
        users_per_table_row: paged: consecutive users that share one page-table row (user ``b``
            reads row ``b // users_per_table_row``; ttnn's ``spec_multi_pos_tiles`` candidates of one
            group); 1 normally. Divides ``batch``.
        batch_invariant: plan every request from its own shape alone (split-K slices of a fixed
            size, the block a batch of one would get), so a request's output bits do not depend on
            the batch it shares (:func:`~ttnn_flashdecode.op.plan.plan_program`).
        lse: return the log-sum-exp of every row (``return_lse``): the named compile-time arg
            ``lse``, CBs LSE / LSE_STAGE, and the LSE operand the writer fills.
        values_from_keys: V is K (the call passed one tensor as both, as MLA's latent cache is):
            the reader reads each K/V block once, into CB K, and P . V reads it there; no CB V
            (``attention_protocol.hpp`` "Values from keys").
        append: rows of a fused cache append per user (``append_k``; ``op/append.py``), 0 for none.
        sparse_k: entries per sparse index list (``sparse_indices``; ``op/sparse.py``), 0 for a dense call.
        sparse_heads: sparse index lists per user: 1 (every KV head alike) or ``n_kv_heads``.
        layout: the planner's choice of requests (:class:`RequestLayout`; the default, one request
            per 32 Q heads of a KV group, until :func:`~ttnn_flashdecode.op.plan.plan_program`
            widens it). ``row_tiles`` and ``row_tile_users`` read it.

    Raises:
        ValueError: unknown ``kind`` or ``kv_dtype``, ``rows`` out of its kind's range, or a paged layout whose
            block size is not a positive multiple of 32 or does not divide ``capacity``.
    """

    batch: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int
    capacity: int
    kind: str = "decode"
    rows: int = 1
    cache_block_size: int = 0
    cache_blocks: int = 0
    kv_dtype: str = "bfloat16"
    q_layout: str = "rows"
    scores: ScoreModifiers = ScoreModifiers()
    cache_wrap: int = 0
    users_per_table_row: int = 1
    batch_invariant: bool = False
    lse: bool = False
    values_from_keys: bool = False
    layout: RequestLayout = RequestLayout()
    append: int = 0
    sparse_k: int = 0
    sparse_heads: int = 1

    @property
    def row_tiles(self) -> int:
        """Q row tiles per decode request (:attr:`RequestLayout.row_tiles`)."""
        return self.layout.row_tiles

    @property
    def row_tile_users(self) -> bool:
        """Row tile ``r`` of a request is user ``user + r`` (:attr:`RequestLayout.row_tile_users`)."""
        return self.layout.row_tile_users

    def __post_init__(self):
        self.scores.check(rows=self.rows, kind=self.kind, cache_wrap=self.cache_wrap)
        if self.row_tile_users and not self.candidate_row_tiles_fit(self.row_tiles):
            raise ValueError(f"row_tile_users: expected decode, the heads layout, 32 Q heads on one KV head, no window, "
                             f"chunk or mask, and row_tiles = users_per_table_row > 1, got {self}")
        if self.row_tiles != 1 and not self.row_tile_users and not (
                self.kind == "decode" and self.scores.mask_users == 0 and self.n_kv_heads > 0
                and self.n_q_heads == self.n_kv_heads * protocol.MAX_Q_ROWS * self.row_tiles):
            raise ValueError(f"row_tiles: expected 1, or GQA ratio / 32 for decode without an attention mask, got "
                             f"{self.row_tiles} ({self.n_q_heads} / {self.n_kv_heads} heads, {self.kind!r})")
        if not isinstance(self.batch_invariant, bool):
            raise ValueError(f"batch_invariant: expected a bool, got {self.batch_invariant!r}")
        if self.users_per_table_row != 1 and not (self.paged and self.users_per_table_row >= 1
                                                  and self.batch % self.users_per_table_row == 0):
            raise ValueError(f"users_per_table_row: expected 1, or with a page table a divisor of the batch {self.batch}, "
                             f"got {self.users_per_table_row}")
        window, causal = self.scores.window, self.scores.causal
        if self.cache_wrap and not (self.paged and self.cache_wrap % max(self.cache_block_size, 32) == 0
                                    and window <= self.cache_wrap <= self.capacity and causal):
            raise ValueError(f"cache_wrap: expected a multiple of the block size {self.cache_block_size} in "
                             f"window {window} .. capacity {self.capacity} of a causal paged cache, got {self.cache_wrap}")
        if self.q_layout not in Q_LAYOUTS:
            raise ValueError(f"q_layout: expected one of {Q_LAYOUTS}, got {self.q_layout!r}")
        if self.q_layout == "heads" and self.kind != "decode":
            raise ValueError(f"q_layout: 'heads' ([1, batch, n_heads, head_dim]) is for decode only, got kind {self.kind!r}")
        if self.kv_dtype not in KV_FORMATS:
            raise ValueError(f"kv_dtype: expected one of {sorted(KV_FORMATS)}, got {self.kv_dtype!r}")
        if self.cache_block_size or self.cache_blocks:
            if not (self.cache_block_size == 16 or self.cache_block_size > 0 and self.cache_block_size % 32 == 0) \
                    or self.cache_blocks < 1 or self.capacity % self.cache_block_size:
                raise ValueError(f"paged cache: expected a block size of 16 or a positive multiple of 32 dividing "
                                 f"capacity {self.capacity} and >= 1 block, got block size {self.cache_block_size}, "
                                 f"{self.cache_blocks} blocks")
            if self.cache_half_blocks and self.kv_dtype != "bfloat16":
                raise ValueError(f"paged cache: blocks of 16 positions take a bfloat16 cache, got {self.kv_dtype}")
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {KINDS}, got {self.kind!r}")
        if self.sparse_k and not (self.kind == "decode" and self.kv_dtype in ("bfloat16", "bfloat8_b")
                                  and self.sparse_heads in (1, self.n_kv_heads) and not self.cache_wrap
                                  and not self.scores.windowed and not self.scores.mask_users and self.scores.causal
                                  and not self.row_tile_users and 0 < self.sparse_k <= self.capacity):
            raise ValueError(f"sparse_k: expected a causal bfloat16 or bfloat8_b decode call without a window, chunk, "
                             f"mask, circular cache or row-tile users, 1 or n_kv_heads lists per user, and 1 <= k <= "
                             f"capacity {self.capacity}, got k {self.sparse_k} "
                             f"in {self}")
        ratio = self.n_q_heads // self.n_kv_heads if self.n_kv_heads > 0 else 1
        if ratio > protocol.MAX_Q_ROWS and (ratio % protocol.MAX_Q_ROWS or self.kind != "decode"):
            raise ValueError(f"GQA ratio: expected at most 32 Q heads per KV head, or a multiple of 32 in decode (one "
                             f"request per row tile of heads), got {ratio} in {self.kind!r}")
        most = {"decode": 1, "chunk": protocol.MAX_Q_ROWS, "rows": protocol.MAX_Q_ROWS // max(ratio, 1)}[self.kind]
        if not 1 <= self.rows <= most:
            raise ValueError(f"rows: expected 1 <= rows <= {most} for kind {self.kind!r} "
                             f"(GQA ratio {ratio}), got {self.rows}")

    @property
    def paged(self) -> bool:
        """True for a paged KV cache (a page table maps position tiles to cache blocks)."""
        return self.cache_block_size > 0

    @property
    def cache_fields(self) -> dict:
        """The :class:`~ttnn_flashdecode.op.residency.Residency` fields the cache, the score
        modifiers and the row tiles decide (``paged``, ``kv_format``, ``windowed``, ``sink``, ``mask``, ``lse``,
        ``row_tiles``, ``values_from_keys``), as keywords for it and for ``max_block_tiles``."""
        scores = self.scores
        return dict(paged=self.paged, kv_format=KV_FORMATS[self.kv_dtype], windowed=scores.windowed, sink=scores.sink,
                    mask=scores.mask_users > 0, lse=self.lse, row_tiles=self.row_tiles,
                    values_from_keys=self.values_from_keys, row_tile_users=self.row_tile_users,
                    append_rows=self.append, sparse_k=self.sparse_k)

    @property
    def window_tiles(self) -> int:
        """Most position tiles one request's sliding window can touch: its ``window + rows - 1``
        positions (the first row's window to the last row) starting anywhere in a tile; with an
        attention chunk at most ``chunk / 32`` tiles, plus one when the rows may straddle a chunk
        edge (a chunk starts on a tile); the cache's capacity tiles without either."""
        tiles, window, chunk = self.capacity_tiles, self.scores.window, self.scores.attention_chunk
        if window:
            tiles = min(tiles, -(-(window + self.rows - 1 + 31) // 32))
        if chunk:
            tiles = min(tiles, chunk // 32 + -(-(self.rows - 1) // 32))
        return tiles

    @property
    def cache_wrap_tiles(self) -> int:
        """Position tiles of a circular cache's slots (``cache_wrap / 32``, the named compile-time
        arg ``cache_wrap_tiles``); 0 without one."""
        return self.cache_wrap // 32

    @property
    def position_capacity(self) -> int:
        """One past the largest position a call may give: the cache's capacity, or for a circular
        cache :data:`WRAPPED_POSITIONS` (positions are logical)."""
        return WRAPPED_POSITIONS if self.cache_wrap else self.capacity

    def position_tiles(self, block_tiles: int) -> int:
        """The parameter block's ``capacity_tiles`` for K/V blocks of ``block_tiles``: the cache's
        position tiles, or for a circular cache the most logical tiles that are whole double
        blocks (>= WRAPPED_POSITIONS / 32: the clamp on device never bites a valid position)."""
        if not self.cache_wrap:
            return self.capacity_tiles
        double = 2 * block_tiles
        return (2 * WRAPPED_POSITIONS // 32) // double * double

    @property
    def cache_block_tiles(self) -> int:
        """Tiles per cache block and KV head (``cache_block_size / 32``; 1 for blocks of 16
        positions, a tile whose rows 16..31 are padding); 0 for a contiguous cache."""
        return 1 if self.cache_half_blocks else self.cache_block_size // 32

    @property
    def cache_half_blocks(self) -> bool:
        """Blocks of 16 positions (ttnn's paged ``block_size`` 16): two blocks per position tile
        (the named compile-time arg ``cache_half_blocks``)."""
        return self.cache_block_size == 16

    @property
    def page_table_entries(self) -> int:
        """Entries per user of a paged cache's page table (``capacity / cache_block_size``); 0 if contiguous."""
        return self.capacity // self.cache_block_size if self.paged else 0

    @property
    def gqa_ratio(self) -> int:
        """Q heads per KV head."""
        return self.n_q_heads // self.n_kv_heads

    @property
    def q_rows(self) -> int:
        """Q heads per decode / ROWS request's row tile (one staged tile's rows): the GQA ratio, or
        32 when a KV group's heads span several row tiles (64 Q heads per KV head: two row tiles,
        served by one request of :attr:`row_tiles` 2, or by two requests each reading the K/V)."""
        return min(self.gqa_ratio, protocol.MAX_Q_ROWS)

    @property
    def requests_per_group(self) -> int:
        """Decode / ROWS requests per (user, KV head): ``gqa_ratio / (q_rows * row_tiles)``; with
        row-tile users one per ``row_tiles`` users (:attr:`requests`)."""
        if self.row_tile_users:
            return 1
        return self.gqa_ratio // (self.q_rows * self.row_tiles)

    def candidate_row_tiles_fit(self, candidates: int) -> bool:
        """Whether ``candidates`` consecutive users (ttnn's ``spec_multi_pos_tiles`` candidates, one
        page-table row) can be one request of that many row tiles, row tile ``r`` user ``user +
        r`` (``attention_protocol.hpp`` "Row-tile users"): decode in the heads layout, 32 Q heads
        (one row tile) on one KV head, no window, chunk, mask or batch invariance,
        ``users_per_table_row`` = ``candidates`` > 1."""
        return (self.kind == "decode" and self.q_layout == "heads" and self.n_kv_heads == 1
                and self.n_q_heads == protocol.MAX_Q_ROWS and not self.scores.windowed
                and self.scores.mask_users == 0 and not self.batch_invariant and candidates > 1
                and self.users_per_table_row == candidates and self.batch % candidates == 0)

    @property
    def q_height(self) -> int:
        """Rows of Q and the output: ``batch * rows``."""
        return self.batch * self.rows

    @property
    def request_q_rows(self) -> int:
        """Word 0 byte 0 of every request: C for chunk, else the GQA ratio."""
        return self.rows if self.kind == "chunk" else self.q_rows

    @property
    def live_rows(self) -> int:
        """Rows of a Q row tile the SFPU computes (the compute kernel's named arg ``live_rows``):
        every request's stage rows (``attention_protocol.hpp`` "Request kinds": a decode group's
        ``q_rows`` heads, a chunk's C rows, ROWS' ``q_rows * rows``) rounded up to a multiple of 4,
        the rows one SFPU iteration covers (tt-isa-documentation, SFPLOAD: four consecutive rows);
        32 past row 15 (a wide group, row-tile users): the SFPU then runs on all four faces."""
        stage_rows = self.request_q_rows * (self.rows if self.kind == "rows" else 1)
        return -(-stage_rows // 4) * 4 if stage_rows <= 16 else 32

    @property
    def live_row_faces(self) -> int:
        """Faces of a Q row tile holding live stage rows: 2 (rows 0..15, ``VectorMode::R``) or 4."""
        return 2 if self.live_rows <= 16 else 4

    def kv_positions(self, positions: Sequence[int]) -> list[int]:
        """Per request (plan order), the live positions of its last query row.

        ``positions[b]``: for decode and rows, user ``b``'s ``cur_pos`` (its last row's position);
        for chunk, sequence ``b``'s chunk start (its first row's position).
        """
        if self.kind == "chunk":
            return [int(start) + self.rows for start in positions for _ in range(self.n_q_heads)]
        if self.row_tile_users:  # a request reads what its furthest candidate needs
            return [max(max(int(p) + 1, 0) for p in positions[first:first + self.row_tiles])
                    for first in range(0, self.batch, self.row_tiles)]
        return [int(position) + 1 for position in positions for _ in range(self.n_kv_heads * self.requests_per_group)]

    @property
    def planned_kv_positions(self) -> list[int]:
        """What the program is planned for, per request (plan order): the cache's whole capacity.

        Positions are not known when the program is built (the kernels read them from the
        POSITIONS operand; under trace capture they change on every replay), so the schedule,
        residency and runtime args assume every request at full capacity, and each slice works
        out its own share of the live tiles on device (``Params::slice_begin``). With a sliding
        window a request never holds more than :attr:`window_tiles` tiles, so it is planned as that
        many: the split follows the window, not the cache."""
        if self.sparse_k:  # a sparse request is a dense one over at most k virtual positions
            return [min(self.capacity, 32 * -(-self.sparse_k // 32))] * self.requests
        return [min(self.capacity, 32 * self.window_tiles)] * self.requests

    @property
    def dim_tiles(self) -> int:
        """``ceil(head_dim / 32)``."""
        return -(-self.head_dim // 32)

    @property
    def capacity_tiles(self) -> int:
        """``ceil(capacity / 32)`` position tiles per (user, KV head)."""
        return -(-self.capacity // 32)

    @property
    def head_row_tiles(self) -> int:
        """``"heads"`` layout: row tiles per user, ``ceil(n_q_heads / 32)`` (heads padded to 32 rows)."""
        return -(-self.n_q_heads // 32)

    @property
    def lse_shape(self) -> tuple[int, ...]:
        """The LSE's shape (``return_lse``): ``[1, 1, batch * rows, n_q_heads]`` (Q's rows), or
        ``[1, batch, n_q_heads]`` for the ``"heads"`` layout; on a device one ROW_MAJOR page a row."""
        if self.q_layout == "heads":
            return (1, self.batch, self.n_q_heads)
        return (1, 1, self.q_height, self.n_q_heads)

    @property
    def q_tiled_shape(self) -> tuple[int, int, int, int]:
        """Q's (and the output's) 4-D shape in whole tiles, heads padded to whole tiles."""
        if self.q_layout == "heads":
            return (1, self.batch, self.head_row_tiles * 32, self.dim_tiles * 32)
        return (1, 1, -(-self.q_height // 32) * 32, self.q_width_tiles * 32)

    @property
    def q_width_tiles(self) -> int:
        """Tile columns of Q and the output: every head padded to ``dim_tiles`` tiles."""
        return self.n_q_heads * self.dim_tiles

    @property
    def requests(self) -> int:
        """Requests per call: one per (user, KV group) (per 32 of its Q heads past 32), or per
        (sequence, Q head) for chunk."""
        if self.row_tile_users:
            return self.batch // self.row_tiles
        return self.batch * (self.n_q_heads if self.kind == "chunk" else self.n_kv_heads * self.requests_per_group)
