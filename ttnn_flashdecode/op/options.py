"""The keywords of a call, checked once before its tensors: :class:`AttentionOptions`, built by
:func:`options_for` from :func:`~ttnn_flashdecode.attention`'s keywords (cached per distinct set of
keywords, so a decode loop validates its options once), and :func:`resolve_grid`. Wrong types
raise TypeError, wrong values ValueError, both naming the keyword."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import ttnn

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op.constants import SCALE_MAX
from ttnn_flashdecode.op.modifiers import MODIFIER_KEYWORDS, ScoreModifiers, scalar_modifiers
from ttnn_flashdecode.op.modifiers.base import as_bool, is_int
from ttnn_flashdecode.op.compute_options import ComputeOptions
from ttnn_flashdecode.op.shape import Q_LAYOUTS

__all__ = ["AttentionOptions", "options_for", "resolve_grid", "BACKENDS", "is_int", "as_bool"]

BACKENDS = ("auto", "device", "emulator")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionOptions:
    """Every keyword of an :func:`~ttnn_flashdecode.attention` call that is not a tensor or a
    position, validated (:func:`options_for`). Frozen and hashable: it keys the device fast path.

    Attributes:
        rows: query rows per user for ROWS (None: decode, or a chunk's length from Q).
        scale: the query scale (None: ``1/sqrt(head_dim)``).
        block_tiles: the K/V block in position tiles (None: the planner's).
        q_layout: ``"rows"`` or ``"heads"``.
        compute: the compute-kernel options (:class:`~ttnn_flashdecode.op.compute_options.ComputeOptions`).
        memory_config: the output's ``ttnn.MemoryConfig`` (None: DRAM interleaved).
        split, max_split: split-K slices per request (None: the scheduler's), most slices per request.
        grid: ``None``, ``(x, y)`` or a tuple of ``(x, y)`` cores (a CoreRangeSet's cores in order).
        backend: one of :data:`BACKENDS`.
        scores: the scalar score modifiers (:class:`~ttnn_flashdecode.op.modifiers.ScoreModifiers`;
            the sink and the mask are set from their tensors at validation).
        cache_position_modulo: a circular cache's slots (None: none); checked with the cache.
        users_per_table_row: users sharing one page-table row; checked with the page table.
        batch_invariant, return_lse: as the keywords.
        head_dim_v: MLA's V width (None: V is ``v``).
    """

    rows: int | None = None
    scale: float | None = None
    block_tiles: int | None = None
    q_layout: str = "rows"
    compute: ComputeOptions = ComputeOptions()
    memory_config: object = None
    split: int | None = None
    max_split: int | None = None
    grid: object = None
    backend: str = "auto"
    scores: ScoreModifiers = ScoreModifiers()
    cache_position_modulo: int | None = None
    users_per_table_row: int = 1
    batch_invariant: bool = False
    return_lse: bool = False
    head_dim_v: int | None = None

    @functools.cached_property
    def single_call(self) -> AttentionOptions:
        """These options as the one GQA call an MLA call (``head_dim_v``) runs: without ``head_dim_v``."""
        return self if self.head_dim_v is None else dataclasses.replace(self, head_dim_v=None)


def options_for(**keywords) -> AttentionOptions:
    """:class:`AttentionOptions` from :func:`~ttnn_flashdecode.attention`'s keywords (every one but
    the tensors and positions, ``compute_kernel_config`` for ``compute``), validated; the same
    object again for the same hashable keywords (a decode loop builds its options once).

    Raises:
        TypeError: a backend or q_layout that is not a str; a split, max_split, block_tiles or sliding
            window that is not an int; a scale that is not a number (bools are neither); a
            memory_config that is not a ttnn.MemoryConfig; a bool keyword that is not a bool; as
            each score modifier (:mod:`~ttnn_flashdecode.op.modifiers`).
        ValueError: a backend or q_layout outside its choices, a split or max_split outside
            ``1..MAX_SPLIT``, a scale that is not a positive number of at most :data:`SCALE_MAX`;
            ``return_lse=True`` or ``accurate_scores=True`` with ``fp32_dest_acc_en=False``; as each
            score modifier. ``accurate_scores`` not None or a bool is a TypeError.
    """
    values = tuple(keywords.values())
    # Each value with its type, inside tuples too: True == 1, 64.0 == 64 and (1.0, 1.0) == (1, 1), but
    # they are refused where 1, 64 and (1, 1) are not.
    key = (tuple(keywords), values, tuple(map(_type_signature, values)))
    try:
        hash(key)
    except TypeError:  # an unhashable keyword (a list grid): validated every call
        return _validated(**keywords)
    return _cached_options(key)


def _type_signature(value):
    """``value``'s type, and its items' for a tuple (a grid of two ints or of cores)."""
    return (tuple, tuple(map(_type_signature, value))) if isinstance(value, tuple) else type(value)


@functools.lru_cache(maxsize=256)
def _cached_options(key: tuple) -> AttentionOptions:
    names, values, _ = key
    return _validated(**dict(zip(names, values)))


def _validated(*, compute_kernel_config=None, memory_config=None, backend="auto", split=None, max_split=None,
               block_tiles=None, scale=None, q_layout="rows", grid=None, batch_invariant=False, return_lse=False,
               accurate_scores=None, **rest) -> AttentionOptions:
    if memory_config is not None and not isinstance(memory_config, ttnn.MemoryConfig):
        raise TypeError(f"memory_config: expected None or a ttnn.MemoryConfig, got {type(memory_config).__name__} "
                        f"{memory_config!r}")
    # The score modifiers' keywords, whichever the registry holds (op/modifiers): each validates its own.
    scores = scalar_modifiers(**{name: rest.pop(name) for name in MODIFIER_KEYWORDS if name in rest})
    _check_ints(split=split, max_split=max_split, block_tiles=block_tiles)
    _check_backend_and_layout(backend, q_layout)
    for name, value in (("split", split), ("max_split", max_split)):
        if value is not None and not 1 <= value <= protocol.MAX_SPLIT:
            raise ValueError(f"{name}: expected None or an int in 1..{protocol.MAX_SPLIT}, got {value!r}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating))):
        raise TypeError(f"scale: expected None or a number, got {type(scale).__name__} {scale!r}")
    if scale is not None and not 0 < scale <= SCALE_MAX:
        raise ValueError(f"scale: expected a finite positive number, at most {SCALE_MAX:.6g} (the kernels hold it in "
                         f"bfloat16), got {scale!r}")
    compute = _with_accurate_scores(ComputeOptions.from_config(compute_kernel_config), accurate_scores)
    batch_invariant, return_lse = as_bool("batch_invariant", batch_invariant), as_bool("return_lse", return_lse)
    if return_lse and not compute.fp32_dest_acc_en:
        raise ValueError("return_lse: expected a compute config with fp32_dest_acc_en=True (the LSE is made of the "
                         "softmax statistics, which are float32 only then), got fp32_dest_acc_en=False")
    return AttentionOptions(compute=compute, memory_config=memory_config, backend=backend, split=split,
                            max_split=max_split, block_tiles=block_tiles, scale=scale, q_layout=q_layout,
                            grid=_hashable_grid(grid), scores=scores, batch_invariant=batch_invariant,
                            return_lse=return_lse, **rest)


def _with_accurate_scores(compute: ComputeOptions, accurate_scores) -> ComputeOptions:
    """``compute`` with the ``accurate_scores`` keyword's choice (None: the config's own, off unless a
    :class:`ComputeOptions` says otherwise), validated by :class:`ComputeOptions`."""
    if accurate_scores is None or (as_bool("accurate_scores", accurate_scores) == compute.accurate_scores):
        return compute
    return dataclasses.replace(compute, accurate_scores=bool(accurate_scores))


def _check_ints(**values) -> None:
    for name, value in values.items():
        if value is not None and not is_int(value):
            raise TypeError(f"{name}: expected None or an int, got {type(value).__name__} {value!r}")


def _check_backend_and_layout(backend, q_layout) -> None:
    if not isinstance(backend, str):
        raise TypeError(f"backend: expected a str, one of {BACKENDS}, got {type(backend).__name__} {backend!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    if not isinstance(q_layout, str):
        raise TypeError(f"q_layout: expected a str, one of {Q_LAYOUTS}, got {type(q_layout).__name__} {q_layout!r}")
    if q_layout not in Q_LAYOUTS:
        raise ValueError(f"q_layout: expected one of {Q_LAYOUTS}, got {q_layout!r}")


def _hashable_grid(grid):
    """``grid`` as :func:`resolve_grid` takes it, hashable: a list of cores as a tuple of tuples."""
    if isinstance(grid, list):
        return tuple(tuple(core) if isinstance(core, list) else core for core in grid)
    return grid


def resolve_grid(grid, full: tuple[int, int], name: str = "grid"):
    """The cores a call may use, as the planner takes them: a rectangle ``(x, y)`` (cores ``(0, 0)
    .. (x - 1, y - 1)``) or a core set (a tuple of logical ``(x, y)`` cores, in order).

    Args:
        grid: ``None`` (the device's whole grid, ``full``); ``(x, y)`` or a ``ttnn.CoreCoord``: that
            rectangle from core ``(0, 0)`` (ttnn's ``compute_with_storage_grid_size``); a
            ``ttnn.CoreRangeSet`` (ttnn's ``sub_core_grids``) or a sequence of ``(x, y)`` cores:
            exactly those cores (a range set's ranges in order, each row by row). A core set that
            is a rectangle from ``(0, 0)`` in that order plans as the rectangle.
        full: the device's compute grid ``(x, y)`` (on the emulator, the emulated device's).
        name: the argument's name in messages.

    Raises:
        TypeError: anything but the forms above (e.g. float sides).
        ValueError: a rectangle not within ``full`` or with a side below 1, an empty core set, a
            core outside ``full`` or given twice.
    """
    fx, fy = full
    if grid is None:
        return (int(fx), int(fy))
    if isinstance(grid, ttnn.CoreCoord):
        grid = (grid.x, grid.y)
    if isinstance(grid, ttnn.CoreRangeSet):
        cores = [(x, y) for r in grid.ranges()
                 for y in range(r.start.y, r.end.y + 1) for x in range(r.start.x, r.end.x + 1)]
    elif isinstance(grid, (tuple, list)) and len(grid) == 2 and all(is_int(n) for n in grid):
        x, y = (int(n) for n in grid)
        if not (1 <= x <= fx and 1 <= y <= fy):
            raise ValueError(f"{name}: expected a grid within the device's {fx}x{fy} compute grid (1 <= x <= {fx}, "
                             f"1 <= y <= {fy}), got {x}x{y}")
        return (x, y)
    elif isinstance(grid, (tuple, list)) and all(
            isinstance(c, (tuple, list)) and len(c) == 2 and all(is_int(n) for n in c) for c in grid):
        cores = [(int(x), int(y)) for x, y in grid]
    else:
        raise TypeError(f"{name}: expected None, (x, y), a ttnn.CoreCoord, a ttnn.CoreRangeSet or a sequence of "
                         f"(x, y) cores, got {grid!r}")
    if not cores:
        raise ValueError(f"{name}: expected at least one core, got an empty set")
    outside = [c for c in cores if not (0 <= c[0] < fx and 0 <= c[1] < fy)]
    if outside:
        raise ValueError(f"{name}: expected cores within the device's {fx}x{fy} compute grid (0..{fx - 1}, "
                         f"0..{fy - 1}), got core {outside[0]}")
    if len(set(cores)) != len(cores):
        twice = next(c for i, c in enumerate(cores) if c in cores[:i])
        raise ValueError(f"{name}: expected each core once, got core {twice} twice")
    width = max(x for x, _ in cores) + 1
    if len(cores) % width == 0 and cores == [(i % width, i // width) for i in range(len(cores))]:
        return (width, len(cores) // width)
    return tuple(cores)
