"""The constants operand: 66 bfloat16 tiles built once per model (DESIGN.md §2).

Tile layout (:class:`ttnn_flashdecode.op.protocol.ConstTile`)::

    0        reduce scaler 1.0, in tt-metal's reduce-scaler layout (serves row max and row sum)
    1        query scale, every element = scale (1/sqrt(head_dim) by default, the REAL head_dim)
    2..33    tail masks t = 0..31: 0 in columns < t, MASK_VALUE at and above t (t = 0 kills a tile)
    34..65   causal masks for chunk length C = 1..32 (tile 34 + C - 1): element (r, c) is 0 (live)
             iff c <= r and c < C, else MASK_VALUE

Tiles 0..33 are what decode reads; the causal block is appended after them and does not depend on
anything chunk mode adds, so adding CHUNK mode moves no constant decode uses.

Reduce-scaler layout: ``prepare_reduce_scaler`` in ttnn's
``ttnn/cpp/ttnn/kernel_lib/reduce_helpers_dataflow.inl`` (installed wheel) zero-fills the tile and
writes the scaler into row 0 of each of the four 16x16 faces (``fill_each_face_row0``); with
REDUCE_ROW the scaler is applied once, so a plain sum or max wants 1.0. In matrix coordinates
that is rows 0 and 16, all 32 columns.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ttnn_flashdecode.op import tiles
from ttnn_flashdecode.op.protocol import ConstTile

__all__ = ["MASK_VALUE", "SCALE_MAX", "constant_tiles", "build_constants", "constants_bytes", "default_scale"]

MASK_VALUE = -1.0e30
"""Added to a dead score. Large enough that exp(dead - live_max) is 0 in bfloat16 at any
plausible score, small enough that the subtraction cannot overflow (the seed's figure)."""

SCALE_MAX = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
"""The largest finite bfloat16: the constants tile holds scale and sink logits in bfloat16."""

_TILE = tiles.TILE_ROWS  # 32


def default_scale(head_dim: int) -> float:
    """``1/sqrt(head_dim)`` for the real head dimension in elements.

    Raises:
        ValueError: ``head_dim`` is not positive.
    """
    if head_dim < 1:
        raise ValueError(f"head_dim: expected >= 1, got {head_dim}")
    return 1.0 / math.sqrt(head_dim)


def constant_tiles(head_dim: int, scale: float | None = None, sink=None) -> np.ndarray:
    """The 66 constant tiles as a float32 array ``[66, 32, 32]`` (row-major, before tilizing),
    then, with ``sink``, ``ceil(n_q_heads / 32)`` sink tiles: tile ``66 + h // 32``, row ``h %
    32``, column 0 = Q head ``h``'s sink logit, every other element 0 (ttnn's ``[nh, 32]`` layout).

    Args:
        head_dim: real head dimension in elements (not ``dim_tiles * 32``).
        scale: query scale; defaults to ``1/sqrt(head_dim)``.
        sink: ``None``, or one attention-sink logit per Q head (score units, already scaled).

    Raises:
        ValueError: ``head_dim`` < 1, or ``scale`` is not finite.
    """
    scale = default_scale(head_dim) if scale is None else float(scale)
    if not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite number, got {scale}")
    out = np.zeros((ConstTile.COUNT, _TILE, _TILE), dtype=np.float32)
    out[ConstTile.SCALER, [0, 16], :] = 1.0
    out[ConstTile.SCALE] = scale
    columns = np.arange(_TILE)
    rows = columns[:, None]
    for t in range(_TILE):
        out[ConstTile.TAIL_MASK + t, :, columns >= t] = MASK_VALUE
    for length in range(1, _TILE + 1):
        live = (columns[None, :] <= rows) & (columns[None, :] < length)
        out[ConstTile.CAUSAL_MASK + length - 1] = np.where(live, 0.0, MASK_VALUE)
    if sink is not None:
        logits = np.asarray(sink, dtype=np.float64).ravel()
        sinks = np.zeros((-(-logits.size // _TILE) * _TILE, _TILE), dtype=np.float32)
        sinks[: logits.size, 0] = logits
        out = np.concatenate([out, sinks.reshape(-1, _TILE, _TILE)])
    return out


def build_constants(head_dim: int, scale: float | None = None, tile_bytes: int = 2048, sink=None) -> np.ndarray:
    """The constants operand's buffer: 66 bfloat16 tiles in TILE layout.

    Args:
        head_dim: real head dimension in elements.
        scale: query scale; defaults to ``1/sqrt(head_dim)``.
        tile_bytes: 2048 (bfloat16; the only format the op uses).
        sink: as :func:`constant_tiles` (appends the sink tiles).

    Returns:
        ``uint8`` array ``[66, tile_bytes]``: page ``i`` is constants tile ``i``.

    Raises:
        ValueError: as :func:`constant_tiles`, or ``tile_bytes`` is not 2048.
    """
    if tile_bytes != tiles.tile_bytes(ml_dtypes.bfloat16):
        raise ValueError(f"tile_bytes: expected 2048 (bfloat16), got {tile_bytes}")
    return tiles.to_tile_bytes(constant_tiles(head_dim, scale, sink), ml_dtypes.bfloat16)


def constants_bytes(tile_bytes: int) -> int:
    """Bytes of the constants operand: ``66 * tile_bytes``."""
    return ConstTile.COUNT * tile_bytes
