"""Planning an :func:`~ttnn_flashdecode.attention` call (FlashInfer's *plan*): shapes, block size,
split-K and grid -> a cached :class:`~ttnn_flashdecode.op.program_factory.Plan`, and a plan plus
operand addresses -> a cached ``ttnn.ProgramDescriptor``. Positions play no part (trace-safe)."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op import kv_walk
from ttnn_flashdecode.op.grid import grid_size, grid_text
from ttnn_flashdecode.op.program_factory import MAX_REQUESTS_PER_CORE, Plan, build_program, plan_decode
from ttnn_flashdecode.op.compute_options import ComputeOptions
from ttnn_flashdecode.op.shape import DecodeShape, RequestLayout
from ttnn_flashdecode.op.residency import MAX_ROW_TILES, Residency, cb_budget_bytes, l1_bytes, max_block_tiles
from ttnn_flashdecode.op.schedule import DEFAULT_MIN_SLICE_TILES, schedule

__all__ = ["DEFAULT_BLOCK_TILES", "DEFAULT_ARCH", "Target", "plan_call", "plan_program", "program_for", "check_windows"]

DEFAULT_BLOCK_TILES = 16
"""The seed's block size (DESIGN.md §8): 16 position tiles = 512 positions per K/V block."""

min_slice_tiles_per_row_tile = DEFAULT_MIN_SLICE_TILES
"""The smallest split-K slice (live position tiles) the planner cuts from a request of one Q row
tile (``split=None``); an R-row request's slices may be R times shorter. ``bench
--min-slice-tiles`` swaps it for a what-if."""

DEFAULT_ARCH = "wormhole_b0"
"""Architecture the emulator models when no device says otherwise (n150 / n300)."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a call runs, as the planner needs it: ``arch`` (``"wormhole_b0"`` or ``"blackhole"``),
    ``grid`` (resolved: ``(x, y)`` or a tuple of cores), the operands' TensorAccessorArgs
    (``accessor_args``, :func:`~ttnn_flashdecode.op.program_factory.operand_accessor_args`),
    ``noc_xy`` (logical core -> NoC coordinate) and ``l1_budget`` (L1 bytes for CBs; None: the arch's)."""

    arch: str
    grid: object
    accessor_args: tuple
    noc_xy: object
    l1_budget: int | None = None


def plan_call(shape: DecodeShape, options, target: Target) -> Plan:
    """The plan of a validated call on ``target`` (pure: allocates nothing): :func:`plan_program`
    with the call's block, split and compute options, and :func:`check_windows`, so every backend
    runs only plans whose cache can be attended to its last position.

    Args:
        shape: the validated call (:func:`~ttnn_flashdecode.op.validate.validate_inputs`).
        options: its :class:`~ttnn_flashdecode.op.options.AttentionOptions`.
        target: where it runs.

    Raises:
        ValueError: as :func:`plan_program` and :func:`check_windows`.
    """
    plan = plan_program(shape, target, block_tiles=options.block_tiles, split=options.split, compute=options.compute,
                        max_split=options.max_split)
    check_windows(plan)
    return plan


def _blocks_budget(shape: DecodeShape, arch: str, l1_budget: int | None) -> int:
    """L1 bytes :func:`max_block_tiles` may size blocks in for this call: the CBs' budget less what
    the call's POSITIONS page takes beyond the one-user page ``max_block_tiles`` counts."""
    users = Residency(1, 1, 1, batch=shape.batch).positions_page_bytes - Residency(1, 1, 1).positions_page_bytes
    return cb_budget_bytes(arch, l1_budget) - users


@dataclasses.dataclass(frozen=True)
class _Sizing:
    """What sizes a call's blocks: the arch (its L1), the L1 bytes its device leaves for CBs (None:
    the arch's whole free L1), whether the statistics are float32 and whether the scores are
    (``accurate_scores``: CB S's pages double)."""

    arch: str
    fp32_stats: bool
    l1_budget: int | None = None
    fp32_scores: bool = False


def _block_fit(shape: DecodeShape, requested: int | None, sizing: _Sizing) -> int | ValueError:
    """The largest block that fits L1 unsplit, or the refusal (not raised: the planner may try
    another request layout) when none does or ``requested`` is not a block that fits."""
    arch, l1_budget = sizing.arch, sizing.l1_budget
    fit = max_block_tiles(shape.q_rows, shape.dim_tiles, 2048, arch, fp32_stats=sizing.fp32_stats,
                          fp32_scores=sizing.fp32_scores,
                          budget_bytes=_blocks_budget(shape, arch, l1_budget), **shape.cache_fields)
    if fit == 0:
        where = f"L1 on {arch}" if l1_budget is None else f"the {l1_budget} bytes of L1 the device's allocator leaves for CBs"
        return ValueError(f"head_dim: {shape.head_dim} ({shape.dim_tiles} tiles) does not fit {where} even with block_tiles 1"
                          + _scores_note(shape, sizing, fit))
    if requested is None:
        return fit
    if isinstance(requested, bool) or not isinstance(requested, (int, np.integer)) or requested < 1:
        return ValueError(f"block_tiles: expected a positive int, got {requested!r}")
    if requested > fit:
        return ValueError(f"block_tiles: expected <= {fit} (the largest that fits {arch} L1 for head_dim {shape.head_dim}), "
                          f"got {requested}" + _scores_note(shape, sizing, fit))
    return fit


def _scores_note(shape: DecodeShape, sizing: _Sizing, fit: int) -> str:
    """What ``accurate_scores`` takes of L1, for a refusal by size: its float32 CB S (a block's tiles
    at 4096 bytes, not 2048) and the largest block without it; "" without the mode, or when the
    largest block without it is no larger than ``fit`` (the mode is not what limits the block)."""
    if not sizing.fp32_scores:
        return ""
    plain = max_block_tiles(shape.q_rows, shape.dim_tiles, 2048, sizing.arch, fp32_stats=sizing.fp32_stats,
                            budget_bytes=_blocks_budget(shape, sizing.arch, sizing.l1_budget), **shape.cache_fields)
    if plain <= fit:
        return ""
    return (f" (accurate_scores=True keeps CB S in float32, 4096 bytes a block tile instead of 2048; without it the "
            f"largest block is {plain})")


def _check_block_tiles(shape: DecodeShape, requested: int | None, sizing: _Sizing) -> int:
    """The largest block that fits L1 unsplit. Raises the refusal of :func:`_block_fit`."""
    fit = _block_fit(shape, requested, sizing)
    if isinstance(fit, ValueError):
        raise fit
    return fit


def _default_block_tiles(shape: DecodeShape, upto: int, max_split: int, sizing: _Sizing, *,
                         at_least: int | None = None) -> int:
    """A block b <= ``upto`` that fits L1 beside the split-K inbox and whose double block tiles the
    cache (2*b divides capacity_tiles, so every position up to capacity-1 has a padded window inside
    the cache; any b for a circular cache): the smallest such b >= ``at_least`` (default ``upto``), else the largest below it;
    1 when none does."""
    at_least = upto if at_least is None else at_least
    fit = max_block_tiles(shape.q_rows, shape.dim_tiles, 2048, sizing.arch, max_split=max_split,
                          fp32_stats=sizing.fp32_stats, fp32_scores=sizing.fp32_scores, **shape.cache_fields,
                          budget_bytes=_blocks_budget(shape, sizing.arch, sizing.l1_budget))
    valid = [b for b in range(1, min(upto, fit) + 1) if shape.cache_wrap or shape.capacity_tiles % (2 * b) == 0]
    covering = [b for b in valid if b >= at_least]
    return min(covering) if covering else max(valid, default=1)


def check_windows(plan: Plan) -> None:
    """Refuse a cache in which some position could not be attended: every request's padded read
    window (its live tiles rounded up to whole double blocks, the parameter block's contract) must
    lie inside the cache, and the longest window is the one at the cache's last position. Checked
    on every call, whatever the positions, so a cache that would fail once it fills up fails on
    the first call instead. A circular cache's positions are logical: its capacity in tiles is
    whole double blocks by construction (DecodeShape.position_tiles)."""
    shape = plan.shape
    if shape.cache_wrap:
        return
    block, capacity_tiles = plan.residency.block_tiles, shape.capacity_tiles
    window = kv_walk.padded_tiles(shape.capacity, block)
    if window > capacity_tiles:
        multiple = 64 * block
        if shape.paged:  # the capacity is the table's: entries x block_size
            entries = multiple // math.gcd(multiple, shape.cache_block_size)
            fix = (f"give the page table a multiple of {entries} entries per user (pad rows with -1: entries past a "
                   f"user's position are never read)")
            where = f"page_table_tensor ({shape.page_table_entries} entries x block size {shape.cache_block_size})"
        else:
            fix = f"use a capacity that is a multiple of {multiple} positions"
            where = "k"
        raise ValueError(
            f"{where}: expected a KV cache of whole double blocks ({2 * block} position tiles, block_tiles {block}), so "
            f"that its last positions can be attended, got capacity {shape.capacity} positions "
            f"({capacity_tiles} tiles; the last position's padded read window is {window} tiles); "
            + fix + (" or a smaller block_tiles" if block > 1 else ""))


def _max_split(shape: DecodeShape, block_tiles: int, grid_cores: int, sizing: _Sizing, cap: int | None = None) -> int:
    """Most split-K slices per request: bounded by the grid, word 5's byte, the caller's ``cap``
    (``max_split``) and the L1 left beside blocks of ``block_tiles`` for the inbox (one partial per
    level of the combine tree)."""
    for split in range(min(protocol.MAX_SPLIT, grid_cores, cap or protocol.MAX_SPLIT), 1, -1):
        residency = Residency(shape.q_rows, shape.dim_tiles, block_tiles, max_split=split,
                              fp32_stats=sizing.fp32_stats, fp32_scores=sizing.fp32_scores, batch=shape.batch,
                              **shape.cache_fields)
        if l1_bytes(residency) <= cb_budget_bytes(sizing.arch, sizing.l1_budget):
            return split
    return 1


def _planned_block(shape: DecodeShape, fit: int, largest: int, longest: int, sizing: _Sizing) -> int:
    """The default block for requests split at most ``largest`` ways, the longest slice
    ``longest`` tiles. A split request's slices are short: one block holds the longest when L1
    allows, so every slice goes max first (no rescale) and no block after a slice's first pays a
    rescale of the running state (~85 compute calls, the cost model's later_blocks)."""
    if largest == 1:
        return _default_block_tiles(shape, min(DEFAULT_BLOCK_TILES, fit), largest, sizing)
    return _default_block_tiles(shape, fit, largest, sizing, at_least=longest)


def _batch_invariant_split_and_block(shape: DecodeShape, split, block_tiles, sizing: _Sizing) -> tuple[int, int]:
    """``shape.batch_invariant``: the split and block every request gets whatever its batch: the
    caller's split, else none (a split slice needs a core of its own, so any fixed split > 1 stops
    fitting the grid at some batch, and a split that shrinks with the batch changes the bits);
    the caller's block, else the one a lone request of this shape would take unsplit. A request
    then runs on one core, its blocks in position order, whoever shares the core."""
    alone = dataclasses.replace(shape, batch=1, users_per_table_row=1,
                                scores=dataclasses.replace(shape.scores, mask_users=min(shape.scores.mask_users, 1)))
    split = 1 if split is None else split
    if block_tiles is None:
        fit = _check_block_tiles(alone, None, sizing)
        block_tiles = _planned_block(alone, fit, split, -(-shape.window_tiles // split), sizing)
    return split, block_tiles


def _row_tiles(shape: DecodeShape) -> int:
    """Q row tiles one request of ``shape`` could serve (``attention_protocol.hpp`` "Q row tiles"):
    ``gqa_ratio / 32`` for a decode KV group wider than one row tile, without an attention mask
    (whose rows are one row tile's) and at most :data:`~ttnn_flashdecode.op.residency.MAX_ROW_TILES`;
    else 1."""
    rows = shape.gqa_ratio // protocol.MAX_Q_ROWS
    if shape.kind != "decode" or shape.scores.mask_users or shape.row_tiles != 1 or not 1 < rows <= MAX_ROW_TILES:
        return 1
    return rows


def _candidate_row_tiles(shape: DecodeShape) -> int:
    """Row tiles one request of ``shape`` could serve as row-tile users (``attention_protocol.hpp``
    "Row-tile users"): ``users_per_table_row`` candidates that fit
    (:meth:`~ttnn_flashdecode.op.shape.DecodeShape.candidate_row_tiles_fit`), at most
    :data:`~ttnn_flashdecode.op.residency.MAX_ROW_TILES`, of a shape not planned wider yet; else 1."""
    candidates = shape.users_per_table_row
    if shape.row_tiles != 1 or candidates > MAX_ROW_TILES or not shape.candidate_row_tiles_fit(candidates):
        return 1
    return candidates


@functools.lru_cache(maxsize=64)
def plan_program(shape: DecodeShape, target: Target, *, block_tiles: int | None = None, split: int | None = None,
                 compute: ComputeOptions = ComputeOptions(), max_split: int | None = None) -> Plan:
    """The plan :func:`attention` runs for these shapes, without running it (no device needed).

    A decode KV group of more than 32 Q heads (64, 128 per KV head) is one request of several Q row
    tiles (``plan.shape.row_tiles``), reading its K/V once, split or not (a split request's combine
    runs a round per row tile): the scheduler splits it over the cores as any request, so each
    core does R times a 32-head slice's compute on 1/R of the positions a request per row tile
    would give it, and the K/V is read once instead of R times. Likewise ``users_per_table_row``
    candidates of one sequence (ttnn's ``spec_multi_pos_tiles``; 32 heads on one KV head each) are
    one request of a row tile per candidate, each with its own position
    (``plan.shape.row_tile_users``), split as one candidate would be. When the wider request's
    CBs do not fit L1 (or the caller's block does not), one request per row tile (or candidate)
    instead.

    Positions play no part (trace-safe: one program for every position vector): the requests are
    scheduled as if every one were at the cache's full capacity
    (:attr:`~ttnn_flashdecode.op.shape.DecodeShape.planned_kv_positions`), so a long cache
    splits every request into the same number of slices, and on device each slice takes its
    ``ceil``-balanced share of its request's live tiles. Then sizes the residency (block size,
    inbox, statistics format) and plans the program; plans are cached.

    Args:
        shape: validated shapes (:class:`~ttnn_flashdecode.op.shape.DecodeShape`).
        target: where it runs (:class:`Target`: arch, grid ``(x, y)`` or a core set, the operands'
            TensorAccessorArgs in ``program_factory.OPERANDS`` order, logical core -> NoC
            coordinate, the L1 bytes for CBs: on a device what its allocator leaves,
            :func:`ttnn_flashdecode.op.residency.device_cb_budget_bytes`).
        block_tiles: ``None`` for the op's default, else the caller's block (position tiles).
        split: ``None`` (by work), 1 (never) or a forced slice count.
        compute: compute-kernel options.
        max_split: most split-K slices (cores) per request, ttnn's ``max_cores_per_head_batch``;
            ``None``: as many as the grid and L1 allow.

    Raises:
        ValueError: as :func:`attention` for block size, split and request-count limits.
    """
    rows, candidates = _row_tiles(shape), _candidate_row_tiles(shape)
    wider = dataclasses.replace(shape, layout=RequestLayout(row_tiles=rows)) if rows > 1 else \
        dataclasses.replace(shape, layout=RequestLayout(candidates, row_tile_users=True)) if candidates > 1 else None
    choices = _Choices(block_tiles, split, compute, max_split)
    limits = None if wider is None else _limits(wider, choices, target)
    if limits is not None and not isinstance(limits, ValueError):
        return _plan_with(wider, limits, choices, target)
    narrow = _limits(shape, choices, target)
    if isinstance(narrow, ValueError):  # neither plan: the refusal of the plan the call would have had
        raise narrow if limits is None else limits
    return _plan_with(shape, narrow, choices, target)


@dataclasses.dataclass(frozen=True)
class _Choices:
    """The caller's planning keywords: block, split, compute config, most slices per request."""

    block_tiles: int | None
    split: int | None
    compute: ComputeOptions
    max_split: int | None

    def sizing(self, target: Target) -> _Sizing:
        return _Sizing(target.arch, self.compute.fp32_dest_acc_en, target.l1_budget, self.compute.accurate_scores)


@dataclasses.dataclass(frozen=True)
class _Limits:
    """What L1 and the grid allow a request layout: the largest unsplit block and split."""

    fit: int
    max_split: int


def _limits(shape: DecodeShape, choices: _Choices, target: Target) -> _Limits | ValueError:
    """The limits of planning ``shape``, or the refusal (a ValueError, not raised) when its block,
    split or request count cannot fit."""
    block_tiles, split, max_split, grid, arch = choices.block_tiles, choices.split, choices.max_split, target.grid, target.arch
    fit = _block_fit(shape, block_tiles, choices.sizing(target))
    if isinstance(fit, ValueError):
        return fit
    grid_cores = grid_size(grid)
    # Room for the inbox is counted with the smallest block the planner may pick (1), or the
    # caller's block when given.
    most = 1 if split == 1 else _max_split(shape, block_tiles or 1, grid_cores, choices.sizing(target), max_split)
    if split is not None and split > most:
        bound = f", max_split {max_split}" if max_split is not None and max_split < split else ""
        return ValueError(f"split: expected <= {most} (grid cores{bound}, and L1 for the reducer's inbox on "
                          f"{arch}), got {split}")
    requests, per_core = len(shape.planned_kv_positions), MAX_REQUESTS_PER_CORE
    if requests > grid_cores * per_core:
        heads = "n_q_heads" if shape.kind == "chunk" else "n_kv_heads"
        return ValueError(f"requests: expected at most {grid_cores * per_core} (batch x {heads}) on a "
                          f"{grid_text(grid)} ({per_core} per core), got {requests} ({shape.batch} x "
                          f"{shape.requests // shape.batch})")
    return _Limits(fit, most)


def _plan_with(shape: DecodeShape, limits: _Limits, choices: _Choices, target: Target) -> Plan:
    """:func:`plan_program` for ``shape``'s own request layout, within ``limits``."""
    sizing, grid, block_tiles, split = choices.sizing(target), target.grid, choices.block_tiles, choices.split
    if shape.batch_invariant:
        split, block_tiles = _batch_invariant_split_and_block(shape, split, block_tiles, sizing)
    kv_positions = shape.planned_kv_positions
    # A tile of an R-row request is R row tiles' work: its slices may be R times shorter, so a split
    # group spreads over as many cores as R requests of one row tile each would. Not candidates:
    # their group splits as one candidate would (ttnn's spec mode), so each candidate's reduction
    # tree is the one it has alone and its bits match the per-candidate call's.
    min_slice_tiles = min_slice_tiles_per_row_tile if shape.row_tile_users else \
        max(1, min_slice_tiles_per_row_tile // shape.row_tiles)
    plan_schedule = schedule(kv_positions, grid_size(grid), max_split=limits.max_split,
                             max_slices_per_core=MAX_REQUESTS_PER_CORE, split=split, min_slice_tiles=min_slice_tiles)
    largest = max(plan_schedule.split_count(r) for r in range(len(kv_positions)))
    if block_tiles is not None:
        blocks = block_tiles
    else:
        longest = max(s.live_tiles(kv_positions[s.request]) for slices in plan_schedule.cores for s in slices)
        blocks = _planned_block(shape, limits.fit, largest, longest, sizing)
    residency = Residency(shape.q_rows, shape.dim_tiles, blocks, max_split=largest, fp32_stats=sizing.fp32_stats,
                          fp32_scores=sizing.fp32_scores,
                          batch=shape.batch, work_requests=max(len(slices) for slices in plan_schedule.cores),
                          **shape.cache_fields)
    return plan_decode(shape, residency, grid=grid, arch=target.arch, compute=choices.compute,
                       accessor_args=target.accessor_args, schedule=plan_schedule, noc_xy=target.noc_xy,
                       l1_budget_bytes=target.l1_budget)


@functools.lru_cache(maxsize=64)
def program_for(plan: Plan):
    """The ``ttnn.ProgramDescriptor`` of ``plan``, built once and reused for every call of the plan
    (its per-call half, the operands' addresses, is written by
    :func:`~ttnn_flashdecode.op.program_factory.set_addresses`; positions live in the POSITIONS
    operand, the work in the WORK table). Not thread-safe across calls that share a plan: the
    launch holds :data:`ttnn_flashdecode.op.launch` 's lock from addresses to ``generic_op``.
    """
    return build_program(plan)
