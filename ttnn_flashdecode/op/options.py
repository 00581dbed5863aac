"""The keywords of a call checked before its tensors: backend, split-K, scale, sliding window, and
the cores (``grid``). Wrong types raise TypeError, wrong values ValueError, both naming the keyword."""

from __future__ import annotations

import numpy as np
import ttnn

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op.score_inputs import SCALE_MAX

__all__ = ["validate_options", "resolve_grid", "BACKENDS", "is_int", "as_bool"]

BACKENDS = ("auto", "device", "emulator")


def is_int(value) -> bool:
    """An int (Python or numpy), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def as_bool(name: str, value) -> bool:
    """``value`` as a bool: a Python or numpy bool.

    Raises:
        TypeError: anything else (0 and 1 included), naming ``name``.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def validate_options(*, backend: str, split, scale, max_split=None, sliding_window_size=None, block_tiles=None,
                     memory_config=None) -> int:
    """The keywords checked before the tensors: ``backend``, ``split``, ``scale``, ``max_split``,
    ``sliding_window_size``, and the types of ``block_tiles`` and ``memory_config`` (their values
    depend on the plan and the device); returns the window (0: none).

    Raises:
        TypeError: a backend that is not a str, a split, max_split, block_tiles or sliding window
            that is not an int, a scale that is not a number (bools are neither), a memory_config
            that is not a ttnn.MemoryConfig.
        ValueError: a backend outside :data:`BACKENDS`, a split or max_split outside
            ``1..MAX_SPLIT``, a scale that is not a positive number of at most :data:`SCALE_MAX`, a
            sliding window below 1.
    """
    if memory_config is not None and not isinstance(memory_config, ttnn.MemoryConfig):
        raise TypeError(f"memory_config: expected None or a ttnn.MemoryConfig, got {type(memory_config).__name__} "
                        f"{memory_config!r}")
    for name, value in (("sliding_window_size", sliding_window_size), ("split", split), ("max_split", max_split),
                        ("block_tiles", block_tiles)):
        if value is not None and not is_int(value):
            raise TypeError(f"{name}: expected None or an int, got {type(value).__name__} {value!r}")
    if sliding_window_size is not None and not 1 <= sliding_window_size < 2**31:
        raise ValueError(f"sliding_window_size: expected None or a positive int (positions each row attends, "
                         f"its own included), got {sliding_window_size!r}")
    if not isinstance(backend, str):
        raise TypeError(f"backend: expected a str, one of {BACKENDS}, got {type(backend).__name__} {backend!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    for name, value in (("split", split), ("max_split", max_split)):
        if value is not None and not 1 <= value <= protocol.MAX_SPLIT:
            raise ValueError(f"{name}: expected None or an int in 1..{protocol.MAX_SPLIT}, got {value!r}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating))):
        raise TypeError(f"scale: expected None or a number, got {type(scale).__name__} {scale!r}")
    if scale is not None and not 0 < scale <= SCALE_MAX:
        raise ValueError(f"scale: expected a finite positive number, at most {SCALE_MAX:.6g} (the kernels hold it in "
                         f"bfloat16), got {scale!r}")
    return int(sliding_window_size or 0)


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
