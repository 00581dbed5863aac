"""Every refusal tested at its boundary (issue 25, items 1 and 2).

For each host-side refusal of :func:`ttnn_flashdecode.attention` and the drop-ins (``op/validate.py``, ``op/modifiers/``,
the plan-time refusals of ``op/plan.py``, ``op/transformer.py``) the table :data:`BOUNDARIES` holds
one row per bound: the LAST valid value, which must be accepted and give the float64 reference's
result (tests/bars.py's bar) with a quiet run, and the FIRST invalid value, which must be refused
by that check with its message. A check made one wider, or one narrower, fails one of the two.

Some bounds are the op's own arithmetic (the largest block that fits L1, the most split-K slices,
the most requests on the grid): their rows take the bound the op states in its refusal
(:class:`Stated`), so the pair checks that the stated bound is the real one -- accepted and
right at the bound, refused one past it -- without copying the arithmetic here.

:func:`test_every_refusal_has_a_boundary_pair_or_a_reason` parses the three modules for every
``raise ValueError`` / ``raise TypeError`` and requires each to be named by a row here
(``refusal``: a prefix of the message template that names exactly one raise site) or by
:data:`NO_NUMERIC_BOUNDARY`, the refusals with nothing to count (a type, a dtype, a layout, a
memory config, arguments that exclude each other), each naming the test that covers it; that
test's source must contain the row's ``evidence``.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import pathlib
import re
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import ttnn

from ttnn_flashdecode import attention, attention_reference
from ttnn_flashdecode.op import plan, residency, transformer
from ttnn_flashdecode.op.plan import DEFAULT_ARCH, Target, plan_program
from ttnn_flashdecode.op.program_factory import OPERANDS
from ttnn_flashdecode.op.residency import Residency, l1_bytes
from ttnn_flashdecode.op.compute_options import ComputeOptions
from ttnn_flashdecode.op.shape import DecodeShape
from ttnn_flashdecode.op.options import options_for

from bars import assert_close, assert_quiet

ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
BF16 = ml_dtypes.bfloat16
BF16_MAX = float(ml_dtypes.finfo(BF16).max)

# The base call: 2 users, 4 Q heads over 2 KV heads (GQA 2), head_dim 32, capacity 128 (4 tiles).
B, NQ, NKV, D, CAP = 2, 4, 2, 32, 128


# ------------------------------------------------------------------------------- calls

@dataclasses.dataclass(frozen=True)
class Call:
    """One call and what it must give: ``run()`` makes it; ``reference()`` is the float64 answer
    (emulated calls), or ``check(result)`` judges a call that plans without running (a grid
    larger than the emulator's)."""

    run: Callable[[], Any]
    reference: Callable[[], np.ndarray] | None = None
    check: Callable[[Any], None] | None = None


def _bf16(rng, shape, scale=1.0):
    return (scale * rng.standard_normal(shape, dtype=np.float32)).astype(BF16)


def _live_positions(kinds: dict, per_user: int) -> int:
    """Positions the call's longest user attends (0 when every user is idle)."""
    if "chunk_start" in kinds:
        starts = kinds["chunk_start"]
        return max(starts if isinstance(starts, list) else [starts]) + per_user
    return max(kinds["cur_pos"]) + 1


def _gathered(pages: np.ndarray, table: np.ndarray, live: int, modulo: int = 0) -> np.ndarray:
    """The contiguous cache ``[batch, n_kv, positions, head_dim]`` a page table maps, positions ``0
    .. live - 1`` (rounded up to whole blocks; an entry outside the cache reads as zeros: no user
    attends there); ``modulo``: a circular cache, position ``L`` in slot ``L % modulo``."""
    blocks, n_kv, block, head_dim = pages.shape
    length = max(1, -(-live // block)) * block
    out = np.zeros((table.shape[0], n_kv, length, head_dim), pages.dtype)
    slots = np.arange(length) % modulo if modulo else np.arange(length)
    for user in range(table.shape[0]):
        entries = table[user, slots // block]
        valid = (entries >= 0) & (entries < blocks)
        # An int and an index array apart: numpy puts the indexed axis first on both sides.
        out[user, :, valid] = pages[entries[valid], :, slots[valid] % block]
    return out


def _sink_column(sink) -> np.ndarray:
    """Sink logits as the reference takes them: one per Q head (column 0 of ttnn's ``[nh, 32]``)."""
    values = np.asarray(sink, dtype=np.float64)
    return values[:, 0] if values.ndim == 2 else values


def _reference_options(options: dict, factor: float = 1.0) -> dict:
    """The window, sink and mask keywords of a call as :func:`attention_reference` takes them; the
    sink and the mask multiplied by ``factor`` (a drop-in's ``scale``, as ttnn does)."""
    out = {}
    if options.get("sliding_window_size") or options.get("cache_position_modulo"):  # the drop-ins' 0 is no window
        out["sliding_window_size"] = options.get("sliding_window_size") or options["cache_position_modulo"]
    if options.get("is_causal", True) is False:
        out["is_causal"] = False
    if options.get("attn_mask") is not None:
        out["attn_mask"] = np.asarray(options["attn_mask"], dtype=np.float64) * factor
    if options.get("attention_sink") is not None:
        out["attention_sink"] = _sink_column(options["attention_sink"]) * factor
    for name in ("logit_softcap", "attention_chunk_size"):  # this op's own keywords, as the reference takes them
        if options.get(name) is not None:
            out[name] = options[name]
    return out


def attend(*, batch=B, n_q=NQ, n_kv=NKV, head_dim=D, capacity=CAP, cur_pos=(100, 5), rows=None, chunk_start=None,
           chunk=None, positions_as="list", block_size=None, shared_blocks=False, table=None, q_height=None,
           q_width=None, q_unit=None, k_scale=1.0, seed=0, **options) -> Call:
    """An :func:`attention` call on random bfloat16 inputs: decode (``cur_pos``), ROWS (with
    ``rows``) or CHUNK (``chunk_start`` and ``chunk`` = C); ``positions_as="tensor"`` passes the
    positions as ``cur_pos_tensor``. ``block_size``: a paged cache of ``capacity / block_size``
    entries per user through a random block permutation (one spare block), or every user's row
    ``0, 1, ..`` (``shared_blocks``); ``table(t)`` patches the table in place. ``q_height`` /
    ``q_width`` override Q's rows / columns; ``q_unit``: Q entries +-q_unit (a power of two,
    exact); ``k_scale`` scales K. ``options`` go to :func:`attention` as they are; with
    ``is_causal=False`` no positions are passed (every position is attended). The reference takes
    ``sliding_window_size``, ``is_causal``, ``attn_mask`` as given and ``attention_sink``'s column 0
    (:func:`_sink_column`): attention() takes both in score units, as the reference does."""
    rng = np.random.default_rng(seed)
    per_user = chunk if chunk_start is not None else (rows or 1)
    shape = (1, 1, batch * per_user if q_height is None else q_height, n_q * head_dim if q_width is None else q_width)
    q = _bf16(rng, shape) if q_unit is None else (np.sign(rng.standard_normal(shape)) * q_unit).astype(BF16)
    page_table = None
    if block_size is None:
        k, v = _bf16(rng, (batch, n_kv, capacity, head_dim), k_scale), _bf16(rng, (batch, n_kv, capacity, head_dim))
    else:
        entries = capacity // block_size
        blocks = entries if shared_blocks else batch * entries + 1
        k, v = (_bf16(rng, (max(blocks, 1), n_kv, block_size, head_dim)) for _ in range(2))
        order = np.tile(np.arange(entries), batch) if shared_blocks else rng.permutation(blocks)[:batch * entries]
        page_table = order.reshape(batch, entries).astype(np.int32)
        if table is not None:
            table(page_table)
    if chunk_start is not None:
        kinds = dict(chunk_start=chunk_start)
        reference_kinds = dict(kinds)
    elif options.get("is_causal", True) is False:
        kinds, reference_kinds = {}, {}
    else:
        positions = list(cur_pos)
        kinds = dict(rows=rows, **({"cur_pos_tensor": np.asarray(positions, np.int32)} if positions_as == "tensor"
                                   else {"cur_pos": positions}))
        reference_kinds = dict(cur_pos=positions, rows=rows)

    def run():
        return attention(q, k, v, page_table_tensor=page_table, **kinds, **options)

    def reference():
        cache = (k, v)
        if page_table is not None:
            live = _live_positions(reference_kinds, per_user)
            modulo = options.get("cache_position_modulo") or 0
            cache = tuple(_gathered(pages, page_table, live, modulo) for pages in cache)
        return attention_reference(q, *cache, scale=options.get("scale"), **reference_kinds, **_reference_options(options))

    return Call(run, reference)


def _emulated_grid() -> tuple[int, int]:
    from ttnn_flashdecode.emulator.arch import ArchSpec

    return tuple(ArchSpec.for_name(DEFAULT_ARCH).default_grid)


def dropin(*, batch=B, n_q=NQ, n_kv=NKV, head_dim=D, capacity=CAP, cur_pos=(100, 5), k_chunk_size=None, grid_size=None,
           sub_core_grids=None, share_cache=None, kv_batch=None, seed=0, **options) -> Call:
    """``transformer.scaled_dot_product_attention_decode`` (Q ``[1, b, nh, dh]``) with a
    ``program_config`` when ``k_chunk_size`` (0 without), ``grid_size`` (``(x, y)``; the emulated
    device's grid without) or ``sub_core_grids`` is given; ``share_cache`` as the call takes it, K
    and V of ``kv_batch`` (default: 1 with ``share_cache``, else ``batch``). ``options``
    (``sliding_window_size``, ``attention_sink``, ``is_causal``, ``attn_mask``) go to the call as
    ttnn takes them; the reference gets the sink and the mask multiplied by the default ``scale``
    ``1/sqrt(head_dim)``, as ttnn applies them (and no positions with ``is_causal=False``)."""
    rng = np.random.default_rng(seed)
    kv_batch = kv_batch if kv_batch is not None else (1 if share_cache else batch)
    q = _bf16(rng, (1, batch, n_q, head_dim))
    k, v = (_bf16(rng, (kv_batch, n_kv, capacity, head_dim)) for _ in range(2))
    config = None
    if k_chunk_size is not None or grid_size is not None or sub_core_grids is not None:
        x, y = grid_size or _emulated_grid()
        config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(x, y), sub_core_grids=sub_core_grids,
                                        q_chunk_size=32, k_chunk_size=k_chunk_size or 0)

    def run():
        return transformer.scaled_dot_product_attention_decode(q, k, v, cur_pos=list(cur_pos), program_config=config,
                                                               share_cache=share_cache, **options)

    def reference():
        rows = q.reshape(1, 1, batch, n_q * head_dim)
        cache = (k, v) if kv_batch == batch else tuple(np.repeat(c, batch, axis=0) for c in (k, v))  # one shared cache
        positions = {} if options.get("is_causal", True) is False else dict(cur_pos=list(cur_pos))
        extra = _reference_options(options, 1 / math.sqrt(head_dim))
        return attention_reference(rows, *cache, **positions, **extra).reshape(q.shape)

    return Call(run, reference)


def _cores_in_a_row(n: int) -> ttnn.CoreRangeSet:
    """``sub_core_grids`` of ``n`` cores: ``(1, 6) .. (n, 6)`` (not a rectangle from (0, 0))."""
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(1, 6), ttnn.CoreCoord(n, 6))])


def planned_split(split: int) -> Call:
    """``split`` through the option check and the planner on a 16x16 grid (256 cores: the
    emulator's grid holds 64, so this call is planned, not run): one request of 510 tiles must
    get ``split`` slices."""
    shape = DecodeShape(1, 1, 1, 32, 2 * 255 * 32)

    def run():
        options_for(backend="auto", split=split, scale=None)
        return plan_program(shape, Target(DEFAULT_ARCH, (16, 16), ((),) * len(OPERANDS), lambda x, y: (x, y)), split=split)

    def check(planned):
        assert planned.schedule.split_count(0) == split

    return Call(run, check=check)


def with_l1_budget(budget: int, call: Call) -> Call:
    """``call`` planned as if the arch's free L1 for CBs were ``budget`` bytes (what a device's
    allocator may leave); plans made under it are dropped afterwards."""

    def run():
        original = residency.available_l1_bytes
        residency.available_l1_bytes = lambda arch: budget
        plan.plan_program.cache_clear()
        try:
            return call.run()
        finally:
            residency.available_l1_bytes = original
            plan.plan_program.cache_clear()

    return Call(run, call.reference)


def _set(user: int, entry: int, value: int) -> Callable[[np.ndarray], None]:
    def patch(table):
        table[user, entry] = value

    return patch


# ---------------------------------------------------------------------------- boundaries

_STATED: dict = {}


@dataclasses.dataclass(frozen=True)
class Stated:
    """The bound the op states in the refusal of ``probe`` (the integer ``pattern``'s group 1
    matches), plus ``offset``: ``Stated(...) + 1`` is the first value past it."""

    probe: Callable[[], Call]
    pattern: str
    offset: int = 0

    def __add__(self, offset: int) -> Stated:
        return dataclasses.replace(self, offset=self.offset + offset)

    def value(self) -> int:
        key = (self.probe, self.pattern)
        if key not in _STATED:
            with pytest.raises(ValueError) as raised:
                self.probe().run()
            found = re.search(self.pattern, str(raised.value))
            assert found, f"the probe's refusal does not state the bound {self.pattern!r}: {raised.value}"
            _STATED[key] = int(found.group(1))
        return _STATED[key] + self.offset


def resolve(value):
    return value.value() if isinstance(value, Stated) else value


@dataclasses.dataclass(frozen=True)
class Boundary:
    """One bound of one refusal. ``refusal``: a prefix of the raise site's message template
    (``{expr}`` for its formatted values) naming exactly one site; ``make_call(value)``: the call
    with the bounded quantity set to ``value``; ``last_ok`` / ``first_bad``: values (or
    :class:`Stated`); ``message``: a regex the refusal of ``first_bad`` matches."""

    name: str
    refusal: str
    make_call: Callable[[Any], Call]
    last_ok: Any
    first_bad: Any
    message: str
    error: type = ValueError


POSITION = "{name}[{user}]: expected {rule}"
SPLITS = "{name}: expected None or an int in 1.."  # split and max_split, one check
GRID = "{name}: expected a grid within the device's"
CORE_OUTSIDE = "{name}: expected cores within the device's"
SUB_CORES = "program_config.sub_core_grids: expected {size.x * size.y} cores"
K_CHUNK = "program_config.k_chunk_size"
HUGE = 10_000

_block_fit_512 = Stated(lambda: attend(batch=1, n_q=1, n_kv=1, head_dim=512, cur_pos=[5], block_tiles=HUGE),
                        r"block_tiles: expected <= (\d+)")
_block_fit_425_users = Stated(lambda: attend(batch=425, n_q=1, n_kv=1, head_dim=64, capacity=64, block_size=32,
                                             shared_blocks=True, cur_pos=[5] * 425, block_tiles=HUGE),
                              r"block_tiles: expected <= (\d+)")
# A k_chunk_size the cache does not hold in whole double blocks is reduced to the largest block below
# it that it does (transformer._whole_double_blocks), so the probe's cache is whole double blocks of
# its 32-tile block: too large for L1 at head_dim 512, it is refused, stating the fit.
_dropin_fit_512 = Stated(lambda: dropin(batch=1, n_q=1, n_kv=1, head_dim=512, capacity=64 * 32, cur_pos=[5],
                                        k_chunk_size=32 * 32),
                         r"block_tiles: expected <= (\d+)")
_split_grid = Stated(lambda: attend(batch=1, n_q=1, n_kv=1, cur_pos=[5], split=255), r"split: expected <= (\d+)")
_split_l1 = Stated(lambda: attend(batch=1, n_q=1, n_kv=1, head_dim=512, capacity=448, cur_pos=[5], block_tiles=7,
                                  split=255), r"split: expected <= (\d+)")


def _many_users(n: int, split) -> Call:
    """``n`` users of one KV head each (``n`` requests) on a paged cache all of them share."""
    return attend(batch=n, n_q=1, n_kv=1, capacity=64, block_size=32, shared_blocks=True,
                  cur_pos=[user % 64 for user in range(n)], split=split)


_requests_unsplit = Stated(lambda: _many_users(20_000, 1), r"requests: expected at most (\d+)")
_requests_split = Stated(lambda: _many_users(20_000, None), r"requests: expected at most (\d+)")
_one_block_l1 = l1_bytes(Residency(1, 16, 1, fp32_stats=True))  # head_dim 512, block 1, unsplit, 1 user

WINDOW = "sliding_window_size: expected None or a positive int"
MODULO = "cache_position_modulo: expected a positive multiple"
SOFTCAP = "logit_softcap: expected a number c > 0"
CHUNK = "attention_chunk_size: expected a positive multiple of 32"
CHUNK_ROWS = "attention_chunk_size: expected 32, or a sliding_window_size"
SINK_SHAPE = "attention_sink: expected one logit per Q head"
MASK_SHAPE = "attn_mask: expected [B, 1,"
SINKS = (1.5, -2.0, 0.75, 3.0, -0.5)  # bfloat16-exact logits, one per Q head (NQ + 1 of them)


def _sinks(heads: int, columns: int | None = None):
    """``heads`` logits of :data:`SINKS` as a list, or in ttnn's ``[heads, columns]`` layout: column
    0 the logit, the other columns padding the op must not read (99)."""
    if columns is None:
        return list(SINKS[:heads])
    out = np.full((heads, columns), 99.0, np.float32)
    if columns:
        out[:, 0] = SINKS[:heads]
    return out


def _mask(*shape: int) -> np.ndarray:
    """An attention mask of ``shape``: bfloat16-exact biases in [-2, 2], about a third -inf."""
    rng = np.random.default_rng(1)
    mask = rng.uniform(-2, 2, shape).astype(BF16).astype(np.float32)
    mask[rng.random(shape) < 0.3] = -np.inf
    return mask


BOUNDARIES = [
    # positions
    Boundary("cur_pos at the last position", POSITION, lambda p: attend(cur_pos=[5, p]), CAP - 1, CAP,
             r"cur_pos\[1\]: expected 0 <= position < capacity 128, or -1 for an idle slot, got 128$"),
    Boundary("cur_pos -1 marks an idle slot", POSITION, lambda p: attend(cur_pos=[5, p]), -1, -2,
             r"cur_pos\[1\]: expected 0 <= position < capacity 128, or -1 for an idle slot, got -2$"),
    Boundary("cur_pos_tensor at the last position", POSITION, lambda p: attend(cur_pos=[5, p], positions_as="tensor"),
             CAP - 1, CAP, r"cur_pos_tensor\[1\]: expected 0 <= position < capacity 128, .* got 128$"),
    Boundary("cur_pos_tensor -1 marks an idle slot", POSITION,
             lambda p: attend(cur_pos=[p, 5], positions_as="tensor"), -1, -2, r"cur_pos_tensor\[0\]: .* got -2$"),
    Boundary("ROWS first row at position 0", "{name}[{user}]: expected >= rows - 1",
             lambda p: attend(cur_pos=[p, 100], rows=4), 3, 2,
             r"cur_pos\[0\]: expected >= rows - 1 = 3 \(the user's first row is position cur_pos - rows \+ 1\), got 2$"),
    Boundary("ROWS last row at the last position", POSITION, lambda p: attend(cur_pos=[40, p], rows=4), CAP - 1, CAP,
             r"cur_pos\[1\]: expected 0 <= position < capacity 128, .* got 128$"),
    Boundary("ROWS -1 marks an idle slot below rows - 1", POSITION, lambda p: attend(cur_pos=[p, 100], rows=4), -1, -2,
             r"cur_pos\[0\]: expected 0 <= position .* got -2$"),
    Boundary("ROWS positions as a tensor", "{name}[{user}]: expected >= rows - 1",
             lambda p: attend(cur_pos=[100, p], rows=4, positions_as="tensor"), 3, 2,
             r"cur_pos_tensor\[1\]: expected >= rows - 1 = 3 .* got 2$"),
    Boundary("chunk ending at the last position", POSITION, lambda s: attend(chunk_start=[0, s], chunk=8),
             CAP - 8, CAP - 7, r"chunk_start\[1\]: expected 0 <= start <= capacity - C = 120 \(C = 8 rows\), got 121$"),
    Boundary("chunk starting at position 0", POSITION, lambda s: attend(chunk_start=[s, 50], chunk=8), 0, -1,
             r"chunk_start\[0\]: expected 0 <= start <= capacity - C = 120 \(C = 8 rows\), got -1$"),
    Boundary("one chunk start for every sequence", POSITION, lambda s: attend(chunk_start=s, chunk=32), CAP - 32,
             CAP - 31, r"chunk_start\[0\]: expected 0 <= start <= capacity - C = 96 \(C = 32 rows\), got 97$"),
    # page tables
    Boundary("page-table entry: the cache's last block", "page_table_tensor[{table_row}][{entry}]",
             lambda e: attend(block_size=32, cur_pos=[40, 100], table=_set(0, 1, e)), 2 * 4, 2 * 4 + 1,
             r"page_table_tensor\[0\]\[1\]: expected a block of the cache \(0\.\.8; user 0 reads entries 0\.\.1\), got 9$"),
    Boundary("page-table entry: block 0", "page_table_tensor[{table_row}][{entry}]",
             lambda e: attend(block_size=32, cur_pos=[40, 100], table=_set(0, 1, e)), 0, -1,
             r"page_table_tensor\[0\]\[1\]: expected a block of the cache \(0\.\.8; .*\), got -1$"),
    Boundary("page-table entries read: up to the position's block", "page_table_tensor[{table_row}][{entry}]",
             lambda p: attend(block_size=32, cur_pos=[p, 100], table=_set(0, 1, -1)), 31, 32,
             r"page_table_tensor\[0\]\[1\]: expected .* \(0\.\.8; user 0 reads entries 0\.\.1\), got -1$"),
    Boundary("page-table entries read: up to a ROWS call's last row", "page_table_tensor[{table_row}][{entry}]",
             lambda p: attend(block_size=32, cur_pos=[p, 100], rows=4, table=_set(0, 1, -1)), 31, 32,
             r"page_table_tensor\[0\]\[1\]: .* got -1$"),
    Boundary("page-table entries read: up to a chunk's end", "page_table_tensor[{table_row}][{entry}]",
             lambda s: attend(block_size=32, chunk_start=[s, 0], chunk=8, table=_set(0, 1, -1)), 24, 25,
             r"page_table_tensor\[0\]\[1\]: .* \(0\.\.8; user 0 reads entries 0\.\.1\), got -1$"),
    Boundary("an idle slot reads no page-table entry", "page_table_tensor[{table_row}][{entry}]",
             lambda p: attend(block_size=32, cur_pos=[p, 100], table=_set(0, 0, -1)), -1, 0,
             r"page_table_tensor\[0\]\[0\]: .* user 0 reads entries 0\.\.0\), got -1$"),
    Boundary("paged block size: 16, not below", "k: expected a block size",
             lambda s: attend(block_size=s, cur_pos=[40, 100]), 16, 15,
             r"k: expected a block size \(dim 2 of a paged cache\) of 16 or a multiple of 32 \(whole position tiles\), "
             r"got 15$"),
    Boundary("paged block size: 16, not 17", "k: expected a block size",
             lambda s: attend(block_size=s, cur_pos=[40, 100]), 16, 17, r"of 16 or a multiple of 32 .*, got 17$"),
    Boundary("paged block size: 32, not 33", "k: expected a block size",
             lambda s: attend(block_size=s, cur_pos=[20, 30]), 32, 33, r"multiple of 32 \(whole position tiles\), got 33$"),
    Boundary("page table of one entry per user", "{name}: expected shape {shape_text}",
             lambda e: attend(block_size=64, capacity=64 * e, cur_pos=[40, 63]), 1, 0,
             r"page_table_tensor: expected shape \[batch, blocks_per_user\], got \[2, 0\]$"),
    # query rows, heads and head_dim
    Boundary("chunk length C <= 32", "q: expected batch x C rows for a chunk",
             lambda c: attend(chunk_start=[0, 50], chunk=c), 32, 33,
             r"q: expected batch x C rows for a chunk \(batch 2, k's batch; C = 1\.\.32 positions per sequence\), got 66$"),
    Boundary("chunk length C >= 1", "q: expected batch x C rows for a chunk",
             lambda c: attend(chunk_start=[0, 50], chunk=c), 1, 0, r"q: expected batch x C rows for a chunk .*got 0$"),
    Boundary("chunk rows: C per sequence", "q: expected batch x C rows for a chunk",
             lambda h: attend(chunk_start=[0, 50], chunk=8, q_height=h), 16, 17,
             r"q: expected batch x C rows for a chunk .*got 17$"),
    Boundary("rows x GQA ratio 1 <= 32", "rows: expected rows * GQA ratio <=",
             lambda r: attend(n_q=2, n_kv=2, cur_pos=[40, 100], rows=r), 32, 33,
             r"rows: expected rows \* GQA ratio <= 32 \(one tile's rows per KV group\), got 33 \* 1 = 33$"),
    Boundary("rows x GQA ratio 3 <= 32", "rows: expected rows * GQA ratio <=",
             lambda r: attend(n_q=6, n_kv=2, cur_pos=[40, 100], rows=r), 10, 11,
             r"rows: expected rows \* GQA ratio <= 32 .*got 11 \* 3 = 33$"),
    Boundary("rows >= 1", "rows: expected None or a positive int", lambda r: attend(cur_pos=[40, 100], rows=r), 1, 0,
             r"rows: expected None or a positive int \(query rows per user\), got 0$"),
    Boundary("q rows: one per user (decode)", "q: expected {batch} {what}", lambda h: attend(q_height=h), B, B + 1,
             r"q: expected 2 rows \(one per user, k's batch\), got 3$"),
    Boundary("q rows: rows per user (ROWS)", "q: expected {batch * per_user} rows",
             lambda h: attend(cur_pos=[40, 100], rows=4, q_height=h), 8, 9,
             r"q: expected 8 rows \(rows=4 per user x batch 2, k's batch\), got 9$"),
    Boundary("GQA ratio <= 32 Q heads per KV head", "GQA ratio: expected at most",
             lambda n: attend(n_q=n, n_kv=1), 32, 33,
             r"GQA ratio: expected at most 32 Q heads per KV head \(one tile's rows\), or in decode a multiple of 32 "
             r"\(one request per row tile of heads\), got 33 \(decode\)$"),
    Boundary("GQA ratio 64 in decode: two requests per KV head", "GQA ratio: expected at most",
             lambda n: attend(n_q=n, n_kv=1, head_dim=64), 64, 65, r"GQA ratio: expected at most .* got 65 \(decode\)$"),
    Boundary("GQA ratio past 32 only in decode", "GQA ratio: expected at most",
             lambda n: attend(n_q=n, n_kv=1, cur_pos=[40, 100], rows=1), 32, 64, r"GQA ratio: .* got 64 \(rows\)$"),
    Boundary("GQA ratio a whole number", "GQA ratio: expected n_q_heads (", lambda n: attend(n_q=n, n_kv=2), 4, 5,
             r"GQA ratio: expected n_q_heads \(5\) to be a multiple of n_kv_heads \(2\)$"),
    Boundary("head_dim <= 18 tiles (MLA's 576)", "head_dim: expected <=",
             lambda d: attend(batch=1, n_q=1, n_kv=1, head_dim=d, capacity=64, cur_pos=[40]), 576, 577,
             r"head_dim: expected <= 576, got 577$"),
    Boundary("head_dim >= 1 (every k dimension)", "k: expected every dimension >= 1",
             lambda d: attend(head_dim=d), 1, 0, r"k: expected every dimension >= 1, got \[2, 2, 128, 0\]$"),
    Boundary("q width: whole heads", "q: expected a width that is a multiple of",
             lambda w: attend(q_width=w), NQ * D, NQ * D + 1, r"q: expected a width that is a multiple of head_dim 32, got 129$"),
    Boundary("cur_pos: one per user", "{name}: expected {batch} {noun}",
             lambda n: attend(cur_pos=[40, 100, 7][:n]), B, B + 1, r"cur_pos: expected 2 positions \(one per user\), got 3$"),
    Boundary("cur_pos_tensor: one per user", "{name}: expected shape {shape_text}",
             lambda n: attend(cur_pos=[40, 100, 7][:n], positions_as="tensor"), B, B + 1,
             r"cur_pos_tensor: expected shape \[2\] or \[2, 1\] \(one position per user\), got \[3\]$"),
    Boundary("chunk_start: one per sequence", "{name}: expected {batch} {noun}",
             lambda n: attend(chunk_start=[3, 70, 9][:n], chunk=4), B, B + 1,
             r"chunk_start: expected 2 starts \(one per sequence\), got 3$"),
    # options
    Boundary("split <= MAX_SPLIT (planned on a 16x16 grid)", SPLITS, planned_split, 255, 256,
             r"split: expected None or an int in 1\.\.255, got 256$"),
    Boundary("split >= 1", SPLITS, lambda s: attend(split=s), 1, 0, r"split: expected None or an int in 1\.\.255, got 0$"),
    Boundary("max_split <= MAX_SPLIT", SPLITS, lambda m: attend(max_split=m), 255, 256,
             r"max_split: expected None or an int in 1\.\.255, got 256$"),
    Boundary("max_split >= 1", SPLITS, lambda m: attend(max_split=m), 1, 0,
             r"max_split: expected None or an int in 1\.\.255, got 0$"),
    # grids and core sets (the emulated device's compute grid is 8x8)
    Boundary("grid rectangle: x <= the device's 8", GRID, lambda x: attend(grid=(x, 1)), 8, 9,
             r"grid: expected a grid within the device's 8x8 compute grid \(1 <= x <= 8, 1 <= y <= 8\), got 9x1$"),
    Boundary("grid rectangle: y <= the device's 8", GRID, lambda y: attend(grid=(1, y)), 8, 9,
             r"grid: expected a grid within the device's 8x8 compute grid .*, got 1x9$"),
    Boundary("grid rectangle: x >= 1", GRID, lambda x: attend(grid=(x, 2)), 1, 0,
             r"grid: expected a grid within the device's 8x8 compute grid .*, got 0x2$"),
    Boundary("grid rectangle: y >= 1", GRID, lambda y: attend(grid=(2, y)), 1, 0,
             r"grid: expected a grid within the device's 8x8 compute grid .*, got 2x0$"),
    Boundary("drop-in compute_with_storage_grid_size: x <= 8", GRID, lambda x: dropin(grid_size=(x, 8), k_chunk_size=0),
             8, 9, r"program_config\.compute_with_storage_grid_size: expected a grid within the device's 8x8 compute "
             r"grid .*, got 9x8$"),
    Boundary("core set: a core at x = 7", CORE_OUTSIDE, lambda x: attend(grid=[(2, 3), (x, 5)]), 7, 8,
             r"grid: expected cores within the device's 8x8 compute grid \(0\.\.7, 0\.\.7\), got core \(8, 5\)$"),
    Boundary("core set: a core at y = 7", CORE_OUTSIDE, lambda y: attend(grid=[(2, 3), (5, y)]), 7, 8,
             r"grid: expected cores within .*, got core \(5, 8\)$"),
    Boundary("core set: a core at x = 0", CORE_OUTSIDE, lambda x: attend(grid=[(2, 3), (x, 5)]), 0, -1,
             r"grid: expected cores within .*, got core \(-1, 5\)$"),
    Boundary("core set of one core", "{name}: expected at least one core",
             lambda n: attend(grid=[(3 + i, 5) for i in range(n)]), 1, 0,
             r"grid: expected at least one core, got an empty set$"),
    Boundary("core set: each core once", "{name}: expected each core once",
             lambda core: attend(grid=[(1, 1), (2, 1), core]), (3, 1), (1, 1),
             r"grid: expected each core once, got core \(1, 1\) twice$"),
    Boundary("drop-in sub_core_grids: as many cores as the grid, not one more", SUB_CORES,
             lambda n: dropin(grid_size=(2, 2), sub_core_grids=_cores_in_a_row(n)), 4, 5,
             r"program_config\.sub_core_grids: expected 4 cores \(compute_with_storage_grid_size 2x2\), got 5$"),
    Boundary("drop-in sub_core_grids: as many cores as the grid, not one fewer", SUB_CORES,
             lambda n: dropin(grid_size=(2, 2), sub_core_grids=_cores_in_a_row(n)), 4, 3,
             r"program_config\.sub_core_grids: expected 4 cores .*, got 3$"),
    Boundary("drop-in sub_core_grids: cores within the device's grid", CORE_OUTSIDE,
             lambda n: dropin(grid_size=(n, 1), sub_core_grids=_cores_in_a_row(n)), 7, 8,
             r"program_config\.sub_core_grids: expected cores within the device's 8x8 compute grid .*, got core \(8, 6\)$"),
    # share_cache (the drop-in): one cache of batch 1, whole position tiles
    Boundary("share_cache: K of batch 1", "input_tensor_k: expected batch 1 with share_cache=True",
             lambda b: dropin(share_cache=True, kv_batch=b, capacity=64, cur_pos=(5, 63)), 1, 2,
             r"input_tensor_k: expected batch 1 with share_cache=True \(every user reads that one cache\), got \[2, 2, 64, 32\]$"),
    # (capacity 32 is whole tiles but one tile, less than a double block: refused by plan.check_windows, as any
    # cache of one tile; the smallest shared cache is 64)
    Boundary("share_cache: a capacity of whole position tiles", "input_tensor_k: expected a capacity (dim 2)",
             lambda c: dropin(share_cache=True, capacity=c, cur_pos=(5, 63)), 64, 65,
             r"input_tensor_k: expected a capacity \(dim 2\) that is a multiple of 32 positions with share_cache=True, "
             r"got 65$"),
    Boundary("share_cache: a capacity of whole position tiles, not half", "input_tensor_k: expected a capacity (dim 2)",
             lambda c: dropin(share_cache=True, capacity=c, cur_pos=(5, 40)), 64, 48,
             r"input_tensor_k: expected a capacity .*, got 48$"),
    Boundary("scale: bfloat16's largest (Q entries 2^-126)", "scale: expected a finite positive number",
             lambda s: attend(scale=s, q_unit=2.0 ** -126, k_scale=1 / 16), BF16_MAX, math.nextafter(BF16_MAX, math.inf),
             r"scale: expected a finite positive number, at most 3\.38953e\+38 \(the kernels hold it in bfloat16\), "
             r"got 3\.38953\d*e\+38$"),
    Boundary("scale: the smallest positive float", "scale: expected a finite positive number",
             lambda s: attend(scale=s), 5e-324, 0.0, r"scale: expected a finite positive number.*, got 0\.0$"),
    # plan time: L1, blocks, split, requests, capacity
    Boundary("head_dim 512 fits an L1 of one block", "head_dim: {shape.head_dim}",
             lambda budget: with_l1_budget(budget, attend(batch=1, n_q=1, n_kv=1, head_dim=512, capacity=64, cur_pos=[40])),
             _one_block_l1, _one_block_l1 - 1,
             r"head_dim: 512 \(16 tiles\) does not fit L1 on wormhole_b0 even with block_tiles 1$"),
    Boundary("block_tiles >= 1", "block_tiles: expected a positive int", lambda b: attend(block_tiles=b), 1, 0,
             r"block_tiles: expected a positive int, got 0$"),
    Boundary("block_tiles at L1's fit (head_dim 512)", "block_tiles: expected <=",
             lambda b: attend(batch=1, n_q=1, n_kv=1, head_dim=512, capacity=64 * b, cur_pos=[64 * b - 1], block_tiles=b),
             _block_fit_512, _block_fit_512 + 1,
             r"block_tiles: expected <= \d+ \(the largest that fits wormhole_b0 L1 for head_dim 512\), got \d+$"),
    Boundary("block_tiles at L1's fit with 425 users (their POSITIONS page)", "block_tiles: expected <=",
             lambda b: attend(batch=425, n_q=1, n_kv=1, head_dim=64, capacity=64 * b, block_size=32, shared_blocks=True,
                              cur_pos=[user % 97 for user in range(425)], block_tiles=b),
             _block_fit_425_users, _block_fit_425_users + 1,
             r"block_tiles: expected <= \d+ \(the largest that fits wormhole_b0 L1 for head_dim 64\), got \d+$"),
    Boundary("drop-in k_chunk_size at L1's fit (tiles; head_dim 512)", "block_tiles: expected <=",
             lambda b: dropin(batch=1, n_q=1, n_kv=1, head_dim=512, capacity=64 * b, cur_pos=[64 * b - 1],
                              k_chunk_size=32 * b),
             _dropin_fit_512, _dropin_fit_512 + 1, r"block_tiles: expected <= \d+ \(the largest that fits"),
    Boundary("drop-in k_chunk_size a multiple of 32", K_CHUNK, lambda c: dropin(k_chunk_size=c), 32, 33,
             r"program_config\.k_chunk_size: expected 0 \(the op chooses\) or a positive multiple of 32 positions, got 33$"),
    Boundary("drop-in k_chunk_size: 32, not below", K_CHUNK, lambda c: dropin(k_chunk_size=c), 32, 16,
             r"program_config\.k_chunk_size: expected 0 .* or a positive multiple of 32 positions, got 16$"),
    # (ttnn's SDPAProgramConfig takes no negative k_chunk_size: 0, "the op chooses", is the lowest)
    Boundary("drop-in k_chunk_size 0: the op chooses", K_CHUNK, lambda c: dropin(k_chunk_size=c), 0, 1,
             r"program_config\.k_chunk_size: expected 0 \(the op chooses\) or .*, got 1$"),
    Boundary("split <= the grid's cores", "split: expected <=",
             lambda s: attend(batch=1, n_q=1, n_kv=1, cur_pos=[CAP - 1], split=s), _split_grid, _split_grid + 1,
             r"split: expected <= \d+ \(grid cores, and L1 for the reducer's inbox on wormhole_b0\), got \d+$"),
    Boundary("split <= what L1 holds beside blocks of 7 (head_dim 512)", "split: expected <=",
             lambda s: attend(batch=1, n_q=1, n_kv=1, head_dim=512, capacity=448, cur_pos=[447], block_tiles=7, split=s),
             _split_l1, _split_l1 + 1, r"split: expected <= \d+ \(grid cores, and L1 for the reducer's inbox"),
    Boundary("requests on the grid, unsplit", "requests: expected at most", lambda n: _many_users(n, 1),
             _requests_unsplit, _requests_unsplit + 1,
             r"requests: expected at most \d+ \(batch x n_kv_heads\) on a 8x8 grid \(\d+ per core\), got \d+"),
    Boundary("requests on the grid, split allowed", "requests: expected at most", lambda n: _many_users(n, None),
             _requests_split, _requests_split + 1, r"requests: expected at most \d+ \(batch x n_kv_heads\) on a 8x8 grid"),
    Boundary("capacity: whole double blocks", "{where}: expected a KV cache of whole double blocks",
             lambda c: attend(capacity=c, cur_pos=[5, c - 1]), 64, 65,
             r"k: expected a KV cache of whole double blocks \(2 position tiles, block_tiles 1\), .* got capacity 65 "),
    Boundary("capacity: two position tiles at least", "{where}: expected a KV cache of whole double blocks",
             lambda c: attend(capacity=c, cur_pos=[5, c - 1]), 33, 32,
             r"k: expected a KV cache of whole double blocks .* got capacity 32 positions \(1 tiles; the last position's "
             r"padded read window is 2 tiles\); use a capacity that is a multiple of 64 positions$"),
    Boundary("capacity: whole double blocks of block_tiles 2", "{where}: expected a KV cache of whole double blocks",
             lambda c: attend(capacity=c, cur_pos=[5, c - 1], block_tiles=2), 128, 129,
             r"k: expected a KV cache of whole double blocks \(4 position tiles, block_tiles 2\), .* got capacity 129 .* or a "
             r"smaller block_tiles$"),
    Boundary("paged capacity: whole double blocks of entries", "{where}: expected a KV cache of whole double blocks",
             lambda e: attend(block_size=32, capacity=32 * e, cur_pos=[5, 32 * e - 1]), 2, 3,
             r"page_table_tensor \(3 entries x block size 32\): expected a KV cache of whole double blocks"),
    # sliding windows (attention(): None or W >= 1; the drop-ins: 0 is no window, as ttnn's)
    Boundary("sliding_window_size 1: the row's own position", WINDOW, lambda w: attend(sliding_window_size=w), 1, 0,
             r"sliding_window_size: expected None or a positive int \(positions each row attends, its own included\), "
             r"got 0$"),
    Boundary("sliding_window_size past the capacity, up to int32's", WINDOW, lambda w: attend(sliding_window_size=w),
             2**31 - 1, 2**31, r"sliding_window_size: expected None or a positive int .*, got 2147483648$"),
    Boundary("drop-in sliding_window_size 0: no window, as ttnn's", WINDOW, lambda w: dropin(sliding_window_size=w), 0, -1,
             r"sliding_window_size: expected None or a positive int .*, got -1$"),
    # circular caches (cache_position_modulo: paged, whole blocks within the table, the window inside it)
    Boundary("cache_position_modulo: the page table's capacity", MODULO,
             lambda m: attend(block_size=32, cache_position_modulo=m), CAP, CAP + 32,
             r"cache_position_modulo: expected a positive multiple of the block size 32, at most the page table's "
             r"capacity 128, got 160$"),
    Boundary("cache_position_modulo: whole blocks", MODULO,
             lambda m: attend(block_size=64, cache_position_modulo=m, cur_pos=[100, 200]), 64, 96,
             r"cache_position_modulo: expected a positive multiple of the block size 64, .* got 96$"),
    Boundary("cache_position_modulo: one block, wrapping many times", MODULO,
             lambda m: attend(block_size=32, cache_position_modulo=m, cur_pos=[1000, 5]), 32, 0,
             r"cache_position_modulo: expected a positive multiple .* got 0$"),
    Boundary("sliding_window_size at most cache_position_modulo", "sliding_window_size: expected at most",
             lambda w: attend(block_size=32, cache_position_modulo=64, sliding_window_size=w, cur_pos=[300, 70]), 64, 65,
             r"sliding_window_size: expected at most cache_position_modulo 64 .* got 65$"),
    # attention sinks: one logit per Q head (attention(): score units; the drop-ins: ttnn's [nh, 32] times scale)
    Boundary("attention_sink: one logit per Q head", SINK_SHAPE, lambda h: attend(attention_sink=_sinks(h)), NQ, NQ + 1,
             r"attention_sink: expected one logit per Q head, \[4\], \[4, 1\] or ttnn's \[4, 32\] \(column 0\), "
             r"got shape \[5\]$"),
    Boundary("drop-in attention_sink: ttnn's [nh, 32], a row per Q head", SINK_SHAPE,
             lambda h: dropin(attention_sink=_sinks(h, 32)), NQ, NQ + 1,
             r"attention_sink: expected one logit per Q head, .* got shape \[5, 32\]$"),
    Boundary("attention_sink [nh, columns]: column 0 there", SINK_SHAPE, lambda c: attend(attention_sink=_sinks(NQ, c)),
             1, 0, r"attention_sink: expected one logit per Q head, .* got shape \[4, 0\]$"),
    Boundary("attention_sink: bfloat16's largest logit", "attention_sink: expected finite logits",
             lambda s: attend(attention_sink=[s] + _sinks(NQ)[1:]), BF16_MAX, math.nextafter(BF16_MAX, math.inf),
             r"attention_sink: expected finite logits, at most 3.38953e\+38 in magnitude .* got \[3.389531389251536e\+38\]$"),
    Boundary("attention_sink: finite", "attention_sink: expected finite logits",
             lambda s: attend(attention_sink=[s] + _sinks(NQ)[1:]), -BF16_MAX, -math.inf,
             r"attention_sink: expected finite logits, .* got \[-inf\]$"),
    # non-causal attention and its mask: [B, 1, nh, S] or [1, B, nh, S], B 1 or the batch
    Boundary("attn_mask: B = the batch", MASK_SHAPE, lambda b: attend(is_causal=False, attn_mask=_mask(b, 1, NQ, CAP)),
             B, B + 1, r"attn_mask: expected \[B, 1, 4, 128\] or \[1, B, 4, 128\] \(B = 1 or the batch 2; n_q_heads, "
             r"the cache's capacity\), got \[3, 1, 4, 128\]$"),
    Boundary("attn_mask: B = 1, one mask for every user", MASK_SHAPE,
             lambda b: attend(is_causal=False, attn_mask=_mask(b, 1, NQ, CAP)), 1, 0,
             r"attn_mask: expected \[B, 1, 4, 128\] .* got \[0, 1, 4, 128\]$"),
    Boundary("attn_mask [1, B, nh, S] (ttnn's docstring): dim 0 of one", MASK_SHAPE,
             lambda d: attend(is_causal=False, attn_mask=_mask(d, B, NQ, CAP)), 1, 2,
             r"attn_mask: expected \[B, 1, 4, 128\] .* got \[2, 2, 4, 128\]$"),
    Boundary("attn_mask: a row per Q head", MASK_SHAPE, lambda h: attend(is_causal=False, attn_mask=_mask(B, 1, h, CAP)),
             NQ, NQ + 1, r"attn_mask: expected \[B, 1, 4, 128\] .* got \[2, 1, 5, 128\]$"),
    Boundary("attn_mask: a column per cache position", MASK_SHAPE,
             lambda s: attend(is_causal=False, attn_mask=_mask(B, 1, NQ, s)), CAP, CAP + 1,
             r"attn_mask: expected \[B, 1, 4, 128\] .* got \[2, 1, 4, 129\]$"),
    Boundary("attn_mask with is_causal=False, not True", "attn_mask: expected None with causal attention",
             lambda c: attend(is_causal=c, attn_mask=_mask(B, 1, NQ, CAP)), False, True,
             r"attn_mask: expected None with causal attention \(an attention mask is for is_causal=False, as ttnn's\)$"),
    Boundary("drop-in attn_mask with is_causal=False, not True", "attn_mask: expected None with is_causal=True",
             lambda c: dropin(is_causal=c, attn_mask=_mask(B, 1, NQ, CAP)), False, True,
             r"attn_mask: expected None with is_causal=True \(ttnn: \"Must not have attn_mask tensor for non-causal "
             r"attention\" -- a mask is for is_causal=False\), got a mask$"),
    Boundary("non-causal: no window", "is_causal: non-causal attention takes no window or chunk",
             lambda w: attend(is_causal=False, sliding_window_size=w), None, 1,
             r"is_causal: non-causal attention takes no window or chunk \(every position of the cache is attended\), "
             r"got sliding_window_size$"),
    # issue 21: the logit softcap and chunked-local attention
    Boundary("logit_softcap 2**-64: every score +-c", SOFTCAP, lambda c: attend(logit_softcap=c), 2.0**-64,
             math.nextafter(2.0**-64, 0), r"logit_softcap: expected a number c > 0 with 2\*\*-64 <= c <= 2\*\*64 .*, "
             r"got 5.42101086242752\d*e-20$"),
    Boundary("logit_softcap 2**64: every score as it is", SOFTCAP, lambda c: attend(logit_softcap=c), 2.0**64,
             math.nextafter(2.0**64, math.inf), r"logit_softcap: expected a number c > 0 .*, got 1.84467440737095\d*e\+19$"),
    Boundary("attention_chunk_size 32: one tile", CHUNK, lambda c: attend(attention_chunk_size=c), 32, 31,
             r"attention_chunk_size: expected a positive multiple of 32 positions \(whole tiles\), below 2\*\*31, got 31$"),
    Boundary("attention_chunk_size below 2**31", CHUNK, lambda c: attend(attention_chunk_size=c), 2**31 - 32, 2**31,
             r"attention_chunk_size: expected a positive multiple of 32 .*, got 2147483648$"),
    Boundary("attention_chunk_size 64 with ROWS and a window: W >= C + 31", CHUNK_ROWS,
             lambda w: attend(rows=4, attention_chunk_size=64, sliding_window_size=w), 95, 94,
             r"attention_chunk_size: expected 32, or a sliding_window_size of at least chunk \+ 31 = 95, .*got chunk 64 "
             r"with window 94$"),
    Boundary("drop-in non-causal: sliding_window_size 0, no window", "sliding_window_size: expected None with is_causal=False",
             lambda w: dropin(is_causal=False, sliding_window_size=w), 0, 1,
             r"sliding_window_size: expected None with is_causal=False \(every position is attended\), got 1$"),
]


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=[b.name for b in BOUNDARIES])
def test_last_valid_value_is_accepted_and_right(boundary):
    value = resolve(boundary.last_ok)
    call = boundary.make_call(value)
    out = call.run()
    label = f"{boundary.name} at {value!r}"
    if call.check is not None:
        call.check(out)
        return
    assert_quiet(label)
    assert_close(out, call.reference(), label)


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=[b.name for b in BOUNDARIES])
def test_first_invalid_value_is_refused_by_its_check(boundary):
    value = resolve(boundary.first_bad)
    with pytest.raises(boundary.error, match=boundary.message) as raised:
        boundary.make_call(value).run()
    site = _site(boundary.refusal)
    assert site.matches(str(raised.value)), f"refused by another check than {site}: {raised.value}"


# ------------------------------------------------------------ refusals with no numeric bound

@dataclasses.dataclass(frozen=True)
class NoBoundary:
    """A refusal with nothing to count, and the test that covers it (``file::function``, whose
    source must contain ``evidence``); ``test`` None only where no test can reach it here."""

    refusal: str
    test: str | None
    evidence: str
    why: str


_ERRORS = "test_attention_errors.py::"
_MASK = "test_attention_mask.py::"
_SINK = "test_attention_sink.py::"
_DROPIN = "test_transformer_dropin.py::"
_HERE = "test_boundaries.py::"

_CIRCULAR = "test_circular_cache.py::"

_SPEC = "test_spec_multi_pos.py::"

_TYPES = _ERRORS + "test_attention_wrong_types_are_type_errors"

_FIELDS = "test_options_registry.py::test_score_modifiers_refuse_bad_fields_and_combinations"

_APPEND_DROPIN = "test_fused_append_dropins.py::test_dropin_append_refusals_write_nothing"

NO_NUMERIC_BOUNDARY = [
    NoBoundary("append_k: not supported with share_cache=True", _APPEND_DROPIN,
               "append_k: not supported with share_cache=True", "a combination"),
    NoBoundary("append_k: not supported with a paged_cache_geometry view", _APPEND_DROPIN,
               "append_k: not supported with a paged_cache_geometry view", "a combination"),
    NoBoundary("softcap: expected a finite float", _FIELDS, "softcap: expected a finite float", "a field invariant"),
    NoBoundary("window: expected an int >= 0", _FIELDS, "window: expected an int >= 0", "a field invariant"),
    NoBoundary("attention_chunk: expected an int >= 0", _FIELDS, "attention_chunk: expected an int >= 0",
               "a field invariant"),
    NoBoundary("mask_users: an attention mask needs causal=False", _FIELDS, "mask_users: an attention mask needs",
               "a field invariant"),
    NoBoundary("is_causal: non-causal attention takes no positions", _MASK + "test_mask_refusals",
               "is_causal: non-causal attention takes no positions", "a combination"),
    NoBoundary("causal: non-causal attention is decode only", _FIELDS, "causal: non-causal attention is decode only",
               "a request kind"),
    NoBoundary("{name}: expected a bool", _TYPES, "is_causal: expected a bool", "a type"),
    NoBoundary("sliding_window_size: expected None or an int", _TYPES, "sliding_window_size: expected None or an int",
               "a type"),
    NoBoundary("memory_config: expected None or a ttnn.MemoryConfig", _TYPES, "memory_config: expected None or a",
               "a type"),
    NoBoundary("memory_config: expected DRAM interleaved", "emulator/test_emulator_sharded.py::"
               "test_an_l1_interleaved_output_is_refused_on_the_emulator", "memory_config: expected DRAM interleaved",
               "a memory kind"),
    NoBoundary("{name}: expected None or an int, got", _TYPES, "split: expected None or an int", "a type"),
    NoBoundary("backend: expected a str", _TYPES, "backend: expected a str", "a type"),
    NoBoundary("scale: expected None or a number", _TYPES, "scale: expected None or a number", "a type"),
    NoBoundary("rows: expected None or an int", _TYPES, "rows: expected None or an int", "a type"),
    NoBoundary("q_layout: expected a str", _TYPES, "q_layout: expected a str", "a type"),
    NoBoundary("share_cache: expected None or a bool", _DROPIN + "test_share_cache_must_be_a_bool",
               "share_cache: expected None or a bool", "a type"),
    NoBoundary("return_lse: expected a compute config with fp32_dest_acc_en=True",
               "test_lse.py::test_return_lse_needs_fp32_statistics",
               "return_lse: expected a compute config with fp32_dest_acc_en=True", "arguments that go together"),
    NoBoundary("paged_cache_geometry: expected None or a ttnn.PagedCacheGeometryOverride",
               "test_transformer_dropin.py::test_bad_paged_cache_geometry_is_refused_by_name",
               "paged_cache_geometry: expected None or a ttnn.PagedCacheGeometryOverride", "a type"),
    NoBoundary("paged_cache_geometry: expected a positive num_kv_heads",
               "test_transformer_dropin.py::test_bad_paged_cache_geometry_is_refused_by_name",
               "num_kv_heads x block_size", "a view that must keep another tensor's block (its product, not a bound)"),
    NoBoundary("users_per_table_row: expected an int >= 1", _SPEC + "test_bad_users_per_table_row_is_refused",
               "users_per_table_row: expected an int", "a keyword that needs another"),
    NoBoundary("users_per_table_row: expected an int, got", _SPEC + "test_bad_users_per_table_row_is_refused",
               "TypeError", "a type"),
    NoBoundary("attn_mask: expected an additive float mask", _MASK + "test_mask_refusals",
               "attn_mask: expected an additive float mask", "a dtype"),
    NoBoundary("attention_sink: expected numbers (logits)", _SINK + "test_sink_layouts_and_refusals",
               "[True, False, True, False]",
               "a dtype"),
    NoBoundary("spec_multi_pos_tiles: expected an int >= 0", _SPEC + "test_bad_spec_calls_are_refused_by_name",
               "spec_multi_pos_tiles: expected an int >= 0", "a type or a sign"),
    NoBoundary("input_tensor_q: expected [1, B, {32 * candidates}, dh]", _SPEC + "test_bad_spec_calls_are_refused_by_name",
               "input_tensor_q: expected", "a shape that must agree with another keyword"),
    NoBoundary("input_tensor_k: expected one KV head with spec_multi_pos_tiles", _SPEC + "test_spec_needs_one_kv_head",
               "expected one KV head with spec_multi_pos_tiles", "a head count (ttnn's rule)"),
    NoBoundary("input_tensor_k: expected head_dim {int(q.shape[3])}", _SPEC + "test_spec_calls_that_do_not_fit_are_refused_by_name",
               "input_tensor_k: expected head_dim 256", "a shape pairing"),
    NoBoundary("page_table_tensor: expected {int(q.shape[1])} rows with spec_multi_pos_tiles",
               _SPEC + "test_spec_calls_that_do_not_fit_are_refused_by_name", "page_table_tensor: expected 2 rows", "a shape pairing"),
    NoBoundary("spec_multi_pos_tiles: expected is_causal=True", _SPEC + "test_spec_calls_that_do_not_fit_are_refused_by_name",
               "spec_multi_pos_tiles: expected is_causal=True", "a keyword pairing"),
    NoBoundary("k: expected a bfloat16 cache with blocks of 16 positions",
               "test_small_blocks.py::test_block_float_blocks_of_16_are_refused_by_name",
               "k: expected a bfloat16 cache with blocks of 16 positions", "a dtype with a block size"),
    NoBoundary("cache_position_modulo: expected None or an int", _CIRCULAR + "test_bad_modulo_is_refused_by_name",
               "cache_position_modulo: expected None or an int", "a type"),
    NoBoundary("cache_position_modulo: expected None without page_table_tensor",
               _CIRCULAR + "test_modulo_needs_a_page_table", "expected None without page_table_tensor",
               "arguments that go together"),
    NoBoundary("cache_position_modulo: expected None with is_causal=False",
               _CIRCULAR + "test_modulo_is_causal_only", "expected None with is_causal=False",
               "arguments that exclude each other"),
    NoBoundary("{name}: expected a ttnn.Tensor or numpy.ndarray", _ERRORS + "test_attention_refuses_bad_tensors",
               '"list"', "a type"),
    NoBoundary("{name}: expected a float32 or bfloat16 array", _ERRORS + "test_attention_refuses_bad_tensors",
               '"float32 or bfloat16"', "a dtype"),
    NoBoundary("{name}: expected a {what} ttnn.Tensor", _ERRORS + "test_attention_refuses_integer_host_tensors",
               "expected a bfloat16 or float32 ttnn.Tensor", "a dtype"),
    NoBoundary("{name}: expected a {tensor.dtype} tensor in TILE layout", None, "",
               "a layout; ttnn cannot build a block-float tensor in ROW_MAJOR (TT_FATAL layout == TILE), so no call "
               "reaches it today"),
    NoBoundary("v: expected k's dtype", "test_block_float_kv.py::test_mixed_or_unsupported_dtypes_are_refused_by_name",
               "v: expected k's dtype", "a dtype"),
    NoBoundary("cur_pos, cur_pos_tensor: expected one of them", _ERRORS + "test_attention_refuses_bad_cur_pos_tensor",
               '"cur_pos, cur_pos_tensor", "got both"', "arguments that exclude each other"),
    NoBoundary("chunk_start: cur_pos_tensor is for decode", _ERRORS + "test_attention_refuses_bad_cur_pos_tensor",
               '"chunk_start", "cur_pos_tensor"', "arguments that exclude each other"),
    NoBoundary("cur_pos, chunk_start: expected one of them", _ERRORS + "test_attention_refuses_bad_chunk_and_rows_arguments",
               '"cur_pos, chunk_start", "got both"', "arguments that exclude each other"),
    NoBoundary("rows: expected None with chunk_start", _ERRORS + "test_attention_refuses_bad_chunk_and_rows_arguments",
               'chunk_start=0, rows=1', "arguments that exclude each other"),
    NoBoundary("attention() needs cur_pos=", _ERRORS + "test_attention_refuses_bad_chunk_and_rows_arguments",
               '"cur_pos=", "chunk_start="', "a missing argument"),
    NoBoundary("q, k, v: expected device tensors for all three",
               _ERRORS + "test_attention_refuses_device_tensors_mixed_with_host_ones",
               "expected device tensors for all three or none", "where tensors live"),
    NoBoundary("q, k, v: expected tensors on one device", None, "",
               "where tensors live; needs two devices (a mock cluster here has one)"),
    NoBoundary("q_layout: expected one of", _HERE + "test_refusals_with_no_numeric_bound_on_the_host",
               "q_layout: expected one of", "a name"),
    NoBoundary("q_layout: 'heads'", _HERE + "test_refusals_with_no_numeric_bound_on_the_host",
               "is for decode only, got a rows call", "a layout with a request kind"),
    NoBoundary("q: expected shape [1, batch, n_q_heads, head_dim]", _HERE + "test_refusals_with_no_numeric_bound_on_the_host",
               "q_layout 'heads'; head_dim = k's last dim", "a rank / layout"),
    NoBoundary("q: expected shape [1, 1, batch", _ERRORS + "test_attention_refuses_bad_tensors",
               '"expected shape [1, 1, batch"', "a rank"),
    NoBoundary("k: expected shape {layout}", _ERRORS + "test_attention_refuses_bad_tensors",
               '(q, k[0], v[0]), ValueError, ["k:", "expected shape"]', "a rank"),
    NoBoundary("v: expected the shape of k", _ERRORS + "test_attention_refuses_bad_tensors",
               '"expected the shape of k"', "two shapes that must agree"),
    NoBoundary("{name}: expected a device tensor with device q, k, v",
               _HERE + "test_refusals_with_no_numeric_bound_of_device_tensors",
               "expected a device tensor with device q, k, v, got a numpy array", "where a tensor lives"),
    NoBoundary("{name}: expected an int32 array", _ERRORS + "test_attention_refuses_bad_cur_pos_tensor",
               '"int32 array", "float32"', "a dtype"),
    NoBoundary("{name}: expected dtype int32", _ERRORS + "test_attention_refuses_a_host_cur_pos_tensor_of_the_wrong_dtype_or_layout",
               "cur_pos_tensor: expected dtype int32", "a dtype"),
    NoBoundary("{name}: expected a {'device'", _HERE + "test_refusals_with_no_numeric_bound_of_device_tensors",
               "expected a device tensor like q, got a host tensor", "where a tensor lives"),
    NoBoundary("{name}: expected ROW_MAJOR layout", _HERE + "test_refusals_with_no_numeric_bound_on_the_host",
               "cur_pos_tensor: expected ROW_MAJOR layout", "a layout"),
    NoBoundary("{name}: expected a DRAM-interleaved tensor, got {config}",
               _HERE + "test_refusals_with_no_numeric_bound_of_device_tensors",
               "cur_pos_tensor: expected a DRAM-interleaved tensor, got", "a memory config"),
    NoBoundary("{name}: expected a ttnn.Tensor or a numpy int32 array", _ERRORS + "test_attention_refuses_bad_cur_pos_tensor",
               '"ttnn.Tensor or a numpy int32 array", "list"', "a type"),
    NoBoundary("{name}: expected {what}, got a single int", _ERRORS + "test_attention_refuses_bad_positions",
               '(3, TypeError, ["cur_pos", "sequence"])', "a type"),
    NoBoundary("{name}: expected {what}, got {type(value).__name__}",
               _ERRORS + "test_attention_refuses_bad_chunk_and_rows_arguments", 'dict(chunk_start="0")', "a type"),
    NoBoundary("{name}[{user}]: expected an int", _ERRORS + "test_attention_refuses_bad_positions",
               '"expected an int"', "a type"),
    NoBoundary("{name}: expected dtype {what}", _HERE + "test_refusals_with_no_numeric_bound_of_device_tensors",
               "q: expected dtype bfloat16, got", "a dtype"),
    NoBoundary("{name}: expected TILE layout", _HERE + "test_refusals_with_no_numeric_bound_of_device_tensors",
               "k: expected TILE layout, got", "a layout"),
    NoBoundary("{name}: expected a DRAM-interleaved tensor{also}", _HERE + "test_refusals_with_no_numeric_bound_of_device_tensors",
               "v: expected a DRAM-interleaved tensor, got", "a memory config"),
    NoBoundary("backend: expected one of", _ERRORS + "test_attention_refuses_bad_options", '"backend", "gpu"', "a name"),
    NoBoundary("{name}: expected None, (x, y), a ttnn.CoreCoord", "test_program_config.py::test_attention_refuses_a_bad_grid_or_max_split",
               'dict(grid="8x8")', "a type"),
    NoBoundary("program_config: expected a ttnn.SDPAProgramConfig", _DROPIN + "test_drop_in_refusals_name_the_drop_in_arguments",
               "program_config: expected a ttnn.SDPAProgramConfig or None, got object", "a type"),
    NoBoundary("cur_pos, cur_pos_tensor: the decode call needs", _DROPIN + "test_drop_in_refusals_name_the_drop_in_arguments",
               "cur_pos, cur_pos_tensor: the decode call needs the users' positions", "a missing argument"),
    NoBoundary("page_table_tensor: the paged decode call needs", _DROPIN + "test_drop_in_refusals_name_the_drop_in_arguments",
               "page_table_tensor: the paged decode call needs the page table", "a missing argument"),
    NoBoundary("cur_pos_tensor: the paged decode call takes", _DROPIN + "test_bad_paged_cache_geometry_is_refused_by_name",
               'pytest.raises(TypeError, match="cur_pos_tensor")', "a missing argument"),
    NoBoundary("{name}: expected a ttnn.Tensor or a numpy array", _HERE + "test_refusals_with_no_numeric_bound_on_the_host",
               "input_tensor_q: expected a ttnn.Tensor or a numpy array, got list", "a type"),
    NoBoundary("input_tensor_q: expected shape [1, b, nh, dh]", _DROPIN + "test_drop_in_refusals_name_the_drop_in_arguments",
               r"input_tensor_q: expected shape \[1, b, nh, dh\]", "a rank"),
    NoBoundary("attn_mask: expected a ttnn.Tensor or a numpy array", _MASK + "test_mask_refusals",
               "attn_mask=[[0.0]]), TypeError", "a type"),
    NoBoundary("attn_mask: expected a {'device'", _HERE + "test_refusals_with_no_numeric_bound_of_device_tensors",
               "attn_mask: expected a device tensor like q, got a host tensor", "where a tensor lives"),
    NoBoundary("attn_mask: expected a device tensor with device q, k, v",
               _HERE + "test_refusals_with_no_numeric_bound_of_device_tensors",
               "attn_mask: expected a device tensor with device q, k, v, got a numpy array", "where a tensor lives"),
    NoBoundary("attn_mask: expected a bfloat16, bfloat8_b or bfloat4_b TILE device tensor",
               _HERE + "test_refusals_with_no_numeric_bound_of_device_tensors",
               "attn_mask: expected a bfloat16, bfloat8_b or bfloat4_b TILE device tensor", "a dtype / layout"),
    NoBoundary("{name}: expected a DRAM-interleaved host cache", "emulator/test_emulator_sharded.py::test_a_cache_outside_dram_is_refused",
               "k: expected a DRAM-interleaved host cache", "a memory config"),
    NoBoundary("attn_mask: expected a DRAM-interleaved tensor", _HERE + "test_refusals_with_no_numeric_bound_of_device_tensors",
               "attn_mask: expected a DRAM-interleaved tensor, got", "a memory config"),
    NoBoundary("logit_softcap: expected None or a number", "test_logit_softcap.py::test_bad_cap_is_refused",
               '("50", TypeError)', "a type"),
    NoBoundary("attention_chunk_size: expected None or an int", "test_chunked_local.py::test_bad_chunk_is_refused",
               '(64.0, TypeError)', "a type"),
    NoBoundary("attention_sink: expected numbers, got", _HERE + "test_refusals_with_no_numeric_bound_on_the_host",
               "attention_sink: expected numbers, got", "a type"),
    NoBoundary("attention_sink: expected a ttnn.Tensor, numpy array or sequence", _SINK + "test_sink_layouts_and_refusals",
               '("sinks", TypeError)', "a type"),
]


def test_refusals_with_no_numeric_bound_on_the_host(mock_cluster):
    """The host-side refusals no other test reaches: each refused by name."""
    rng = np.random.default_rng(0)
    q, k = _bf16(rng, (1, 1, B, NQ * D)), _bf16(rng, (B, NKV, CAP, D))
    tiled_positions = ttnn.Tensor(np.array([5, 100], np.int32), ttnn.int32, layout=ttnn.TILE_LAYOUT)
    q_heads, positions = q.reshape(1, B, NQ, D), np.array([5, 100], np.int32)
    cases = [
        (lambda: attention(q, k, k, cur_pos=[5, 100], q_layout="columns"), ValueError,
         r"q_layout: expected one of \('rows', 'heads'\), got 'columns'"),
        (lambda: attention(np.repeat(q, 2, axis=2), k, k, cur_pos=[5, 100], rows=2, q_layout="heads"), ValueError,
         r"q_layout: 'heads' \(\[1, batch, n_q_heads, head_dim\]\) is for decode only, got a rows call"),
        (lambda: attention(q, k, k, cur_pos=[5, 100], q_layout="heads"), ValueError,
         r"q: expected shape \[1, batch, n_q_heads, head_dim\] \(q_layout 'heads'; head_dim = k's last dim\), got "
         r"\[1, 1, 2, 128\]"),
        (lambda: attention(q, k, k, cur_pos_tensor=tiled_positions), ValueError,
         r"cur_pos_tensor: expected ROW_MAJOR layout, got Layout.TILE"),
        (lambda: transformer.scaled_dot_product_attention_decode(q.tolist(), k, k, cur_pos=[5, 100]), TypeError,
         r"input_tensor_q: expected a ttnn.Tensor or a numpy array, got list"),
        # K and V are read (their shapes) before attention() validates them: refused by name first,
        # with and without share_cache, and a paged call's page table too (a fresh user's report).
        (lambda: transformer.scaled_dot_product_attention_decode(q_heads, k.tolist(), k, cur_pos=[5, 100]), TypeError,
         r"input_tensor_k: expected a ttnn.Tensor or a numpy array, got list"),
        (lambda: transformer.scaled_dot_product_attention_decode(q_heads, k, k.tolist(), cur_pos=[5, 100], share_cache=True),
         TypeError, r"input_tensor_v: expected a ttnn.Tensor or a numpy array, got list"),
        (lambda: transformer.paged_scaled_dot_product_attention_decode(q_heads, k, k, [[0]], cur_pos_tensor=positions),
         TypeError, r"page_table_tensor: expected a ttnn.Tensor or a numpy array, got list"),
        (lambda: attention(q, k, k, cur_pos=[5, 100], attention_sink=["a", "b", "c", "d"]), TypeError,
         r"attention_sink: expected numbers, got \['a', 'b', 'c', 'd'\]"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()


def test_refusals_with_no_numeric_bound_of_device_tensors(mock_device):
    """Device tensors (a mock Wormhole: allocated, never executed) of the wrong dtype, layout or
    memory, and positions or masks that do not live where Q does: refused by name before any launch."""
    rng = np.random.default_rng(0)
    q, k = _bf16(rng, (1, 1, B, NQ * D)), _bf16(rng, (B, NKV, CAP, D))

    def on_device(array, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, memory=ttnn.DRAM_MEMORY_CONFIG):
        values = np.asarray(array, np.int32 if dtype == ttnn.int32 else np.float32)
        return ttnn.Tensor(values, dtype, layout=layout, device=mock_device, mem_config=memory)

    dq, dk = on_device(q), on_device(k)
    positions = np.array([5, 100], np.int32)
    mask = _mask(B, 1, NQ, CAP)
    cases = [
        (lambda: attention(on_device(q, ttnn.float32), dk, dk, cur_pos=[5, 100]), r"q: expected dtype bfloat16, got"),
        (lambda: attention(dq, on_device(k, layout=ttnn.ROW_MAJOR_LAYOUT), dk, cur_pos=[5, 100]),
         r"k: expected TILE layout, got"),
        (lambda: attention(dq, dk, on_device(k, memory=ttnn.L1_MEMORY_CONFIG), cur_pos=[5, 100]),
         r"v: expected a DRAM-interleaved tensor, got"),
        (lambda: attention(dq, dk, dk, cur_pos_tensor=positions),
         r"cur_pos_tensor: expected a device tensor with device q, k, v, got a numpy array"),
        (lambda: attention(dq, dk, dk, cur_pos_tensor=ttnn.Tensor(positions, ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT)),
         r"cur_pos_tensor: expected a device tensor like q, got a host tensor"),
        (lambda: attention(dq, dk, dk, cur_pos_tensor=on_device(positions, ttnn.int32, ttnn.ROW_MAJOR_LAYOUT,
                                                                 ttnn.L1_MEMORY_CONFIG)),
         r"cur_pos_tensor: expected a DRAM-interleaved tensor, got"),
        (lambda: attention(dq, dk, dk, is_causal=False, attn_mask=mask),
         r"attn_mask: expected a device tensor with device q, k, v, got a numpy array"),
        (lambda: attention(dq, dk, dk, is_causal=False, attn_mask=ttnn.Tensor(mask, ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)),
         r"attn_mask: expected a device tensor like q, got a host tensor"),
        (lambda: attention(q, k, k, is_causal=False, attn_mask=on_device(mask)),
         r"attn_mask: expected a host tensor like q, got a device tensor"),
        (lambda: attention(dq, dk, dk, is_causal=False, attn_mask=on_device(mask, ttnn.float32)),
         r"attn_mask: expected a bfloat16, bfloat8_b or bfloat4_b TILE device tensor, got DataType.FLOAT32"),
        (lambda: attention(dq, dk, dk, is_causal=False, attn_mask=on_device(mask, layout=ttnn.ROW_MAJOR_LAYOUT)),
         r"attn_mask: expected a bfloat16, bfloat8_b or bfloat4_b TILE device tensor, got DataType.BFLOAT16 "
         r"Layout.ROW_MAJOR"),
        (lambda: attention(dq, dk, dk, is_causal=False, attn_mask=on_device(mask, memory=ttnn.L1_MEMORY_CONFIG)),
         r"attn_mask: expected a DRAM-interleaved tensor, got"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


# ------------------------------------------------------------------- the completeness check

REFUSING_MODULES = ("ttnn_flashdecode/op/options.py", "ttnn_flashdecode/op/validate.py", "ttnn_flashdecode/op/positions.py", "ttnn_flashdecode/op/modifiers/base.py", "ttnn_flashdecode/op/modifiers/softcap.py", "ttnn_flashdecode/op/modifiers/window.py", "ttnn_flashdecode/op/modifiers/chunk.py", "ttnn_flashdecode/op/modifiers/mask.py", "ttnn_flashdecode/op/modifiers/sink.py", "ttnn_flashdecode/op/modifiers/causal.py", "ttnn_flashdecode/op/plan.py", "ttnn_flashdecode/op/transformer.py", "ttnn_flashdecode/op/program_config.py")


@dataclasses.dataclass(frozen=True)
class Site:
    """One ``raise ValueError(...)`` / ``raise TypeError(...)``: its message as a template, the
    formatted values written ``{expr}``; ``open_end`` when more text is added to it (``+``)."""

    path: str
    line: int
    error: str
    template: str
    open_end: bool = False

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.error}({self.template!r}{' + ...' if self.open_end else ''})"

    def matches(self, message: str) -> bool:
        """Whether ``message`` is one this site can raise (each ``{expr}`` any text)."""
        parts = re.split(r"(\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})", self.template)
        pattern = "".join("(?s:.*)" if i % 2 else re.escape(part) for i, part in enumerate(parts))
        return re.fullmatch(pattern + ("(?s:.*)" if self.open_end else ""), message) is not None


def _template(node: ast.expr) -> tuple[str, bool]:
    open_end = False
    while isinstance(node, ast.BinOp):  # "..." + more
        node, open_end = node.left, True
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, open_end
    if isinstance(node, ast.JoinedStr):  # adjacent literals are already joined into one node
        return "".join(part.value if isinstance(part, ast.Constant) else "{" + ast.unparse(part.value) + "}"
                       for part in node.values), open_end
    return "{" + ast.unparse(node) + "}", True


def refusal_sites(source: str, path: str) -> list[Site]:
    """Every ``raise ValueError(message)`` / ``raise TypeError(message)`` in ``source``, and every
    ``return ValueError(message)`` (a refusal the planner hands back to raise later)."""
    sites = []
    for node in ast.walk(ast.parse(source)):
        error = node.exc if isinstance(node, ast.Raise) else node.value if isinstance(node, ast.Return) else None
        if (isinstance(error, ast.Call) and isinstance(error.func, ast.Name)
                and error.func.id in ("ValueError", "TypeError")):
            template, open_end = _template(error.args[0]) if error.args else ("", False)
            sites.append(Site(path, node.lineno, error.func.id, template, open_end))
    return sorted(sites, key=lambda s: s.line)


def audit(sites: list[Site], refusals: list[str]) -> tuple[list[Site], dict[str, list[Site]]]:
    """``(sites no refusal prefix names, {prefix: the sites it names} for prefixes naming none or
    several)``: both empty when the table and the code agree one to one."""
    named = {prefix: [s for s in sites if s.template.startswith(prefix)] for prefix in set(refusals)}
    unnamed = [s for s in sites if not any(s in hits for hits in named.values())]
    return unnamed, {prefix: hits for prefix, hits in named.items() if len(hits) != 1}


def _all_sites() -> list[Site]:
    return [site for path in REFUSING_MODULES for site in refusal_sites((ROOT / path).read_text(), path)]


def _site(prefix: str) -> Site:
    (site,) = [s for s in _all_sites() if s.template.startswith(prefix)]
    return site


def test_every_refusal_has_a_boundary_pair_or_a_reason():
    sites = _all_sites()
    assert len(sites) > 50, "the collector found too few raise sites: did the modules move?"
    unnamed, ambiguous = audit(sites, [b.refusal for b in BOUNDARIES] + [n.refusal for n in NO_NUMERIC_BOUNDARY])
    assert not unnamed, "refusals with neither a boundary pair nor a listed reason:\n" + "\n".join(map(str, unnamed))
    assert not ambiguous, "refusal prefixes that name no site, or several: " + repr(
        {prefix: [str(s) for s in hits] for prefix, hits in ambiguous.items()})
    both = {b.refusal for b in BOUNDARIES} & {n.refusal for n in NO_NUMERIC_BOUNDARY}
    assert not both, f"refusals listed as having no numeric bound but given one: {both}"


def test_every_refusal_without_a_bound_names_a_test_that_covers_it():
    for entry in NO_NUMERIC_BOUNDARY:
        if entry.test is None:
            assert entry.why and not entry.evidence, entry
            continue
        file, function = entry.test.split("::")
        tree = ast.parse((TESTS / file).read_text())
        found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == function]
        assert found, f"{entry.refusal!r}: no test {entry.test}"
        node = found[0]
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        source = "\n".join((TESTS / file).read_text().splitlines()[first - 1:node.end_lineno])
        assert entry.evidence in source, f"{entry.test} does not show {entry.evidence!r} ({entry.refusal!r})"


SNIPPET = '''
def check(x, name, fix):
    if x > 3:
        raise ValueError(f"widget: expected <= 3, got {x}")
    if x < 0:
        raise TypeError(f"{name}[{x}]: expected "
                        f"an int, got {type(x).__name__}")
    if x == 2:
        raise ValueError(f"gadget: expected an even window, got {x}; " + fix)
    raise KeyError("not a refusal")
'''


def test_collector_reads_templates_and_the_audit_names_what_is_missing():
    """The completeness check can fail: a refusal no row names is reported, and so is a prefix
    that names two sites or none."""
    sites = refusal_sites(SNIPPET, "snippet.py")
    assert [(s.error, s.template, s.open_end) for s in sites] == [
        ("ValueError", "widget: expected <= 3, got {x}", False),
        ("TypeError", "{name}[{x}]: expected an int, got {type(x).__name__}", False),
        ("ValueError", "gadget: expected an even window, got {x}; ", True),
    ]
    assert sites[1].matches("cur_pos[3]: expected an int, got float")
    assert not sites[0].matches("widget: expected <= 4, got 5")
    assert sites[2].matches("gadget: expected an even window, got 2; use 4")
    unnamed, ambiguous = audit(sites, ["widget: expected <=", "{name}[{x}]"])
    assert [s.template for s in unnamed] == ["gadget: expected an even window, got {x}; "]
    assert ambiguous == {}
    unnamed, ambiguous = audit(sites, ["widget", "{name}", "g", "nothing"])
    assert unnamed == [] and set(ambiguous) == {"nothing"}
    unnamed, ambiguous = audit(sites, ["", "widget"])
    assert set(ambiguous) == {""}  # names all three


def test_quiet_run_check_fails_on_a_run_that_reported_an_error(monkeypatch):
    """The shared quiet-run check (tests/bars.py) fails when the run's report holds an error, and
    when no emulated run is there to check."""
    import bars

    class Report:
        errors = ["core (0, 0) reader: ERROR ttnn_flashdecode: POSITIONS[0] = 200 is outside the cache"]

    monkeypatch.setattr(bars, "last_report", lambda: Report())
    with pytest.raises(AssertionError, match="the run reported errors: .*POSITIONS"):
        bars.run_quiet(lambda: "out")
    monkeypatch.setattr(bars, "last_report", lambda: None)
    with pytest.raises(AssertionError, match="no emulated run to check"):
        bars.assert_quiet("device call")
