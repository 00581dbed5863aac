"""The cores a program runs on: a grid (a rectangle from core (0, 0), or a set of logical cores) in
core-table order, its size and name for messages, and the same cores as a ``ttnn.CoreRangeSet`` of as
few rectangles as they make."""

from __future__ import annotations

from collections.abc import Sequence

import ttnn

__all__ = ["grid_cores", "grid_size", "grid_text", "is_rectangle", "core_rectangles", "core_range_set"]


def grid_cores(grid) -> tuple[tuple[int, int], ...]:
    """The logical cores of ``grid`` in core-table order.

    Args:
        grid: a rectangle ``(x, y)`` (cores ``(0, 0) .. (x - 1, y - 1)``; table index ``i`` is core
            ``(i % x, i // x)``, row by row), or a core set: a tuple of distinct logical ``(x, y)``
            pairs, used in the order given (``ttnn.CoreRangeSet``'s, from
            :func:`ttnn_flashdecode.op.options.resolve_grid`).
    """
    if is_rectangle(grid):
        return tuple((i % grid[0], i // grid[0]) for i in range(grid[0] * grid[1]))
    return tuple((int(x), int(y)) for x, y in grid)


def grid_size(grid) -> int:
    """Cores in ``grid`` (see :func:`grid_cores`)."""
    return grid[0] * grid[1] if is_rectangle(grid) else len(grid)


def grid_text(grid) -> str:
    """``grid`` for messages: ``"8x8 grid"`` or ``"set of 15 cores"``."""
    return f"{grid[0]}x{grid[1]} grid" if is_rectangle(grid) else f"set of {len(grid)} cores"


def is_rectangle(grid) -> bool:
    """``(x, y)`` rather than a tuple of cores (whose items are pairs)."""
    return not isinstance(grid[0], (tuple, list))


def core_rectangles(cores: Sequence[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """``cores`` (distinct logical ``(x, y)``) as few ``(x0, y0, x1, y1)`` rectangles, inclusive: each
    row's runs of consecutive x, then runs of the same x span on consecutive rows stacked. Why: every
    ``ttnn.generic_op`` call copies the descriptor, whose CBs, semaphores and kernels each hold the
    core set; 64 one-core ranges cost it several microseconds more than one 8x8 range (host-bench)."""
    rows: dict[int, list[int]] = {}
    for x, y in cores:
        rows.setdefault(y, []).append(x)
    runs = []
    for y in sorted(rows):
        xs = sorted(rows[y])
        start = xs[0]
        for previous, x in zip(xs, xs[1:] + [None]):
            if x != previous + 1:
                runs.append((start, previous, y))
                start = x
    rectangles: list[list[int]] = []
    for x0, x1, y in runs:
        open_rectangle = next((r for r in rectangles if r[0] == x0 and r[2] == x1 and r[3] == y - 1), None)
        if open_rectangle is None:
            rectangles.append([x0, y, x1, y])
        else:
            open_rectangle[3] = y
    return [tuple(r) for r in rectangles]


def core_range_set(cores: Sequence[tuple[int, int]]) -> ttnn.CoreRangeSet:
    """``cores`` as a ``ttnn.CoreRangeSet`` of :func:`core_rectangles`."""
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(x0, y0), ttnn.CoreCoord(x1, y1))
                              for x0, y0, x1, y1 in core_rectangles(cores)])
