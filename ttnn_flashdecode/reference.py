"""Float64 reference for flash-decode GQA attention, and the metrics used to compare against it.

This module is the ground truth that the device/emulator op (``ttnn_flashdecode.attention``) and the
demo are checked against. It does the plain textbook computation - one softmax over all live
positions, in float64 - and is deliberately independent of any blocking/chunking scheme.

Only numpy is required. ``bfloat16`` inputs (``ml_dtypes.bfloat16``) are accepted: they are upcast
exactly to float64 before any arithmetic.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["attention_reference", "pcc", "max_abs", "relative_l2"]


def _as_f64(name: str, x) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu" and arr.dtype.name != "bfloat16":
        raise ValueError(f"{name}: expected a float array (float32/float64/bfloat16), got dtype {arr.dtype}")
    return arr.astype(np.float64)


def attention_reference(q, k, v, *, cur_pos: Sequence[int], scale: float | None = None) -> np.ndarray:
    """Decode-step GQA attention in float64: one query token per user against its KV cache.

    Shapes (``H`` = n_q_heads, ``G`` = n_kv_heads, ``D`` = head_dim, ``B`` = batch, ``S`` = capacity):

    * ``q``: ``[1, 1, B, H*D]`` - row ``b`` is user ``b``; head ``h`` occupies columns
      ``h*D .. (h+1)*D``.
    * ``k``, ``v``: ``[B, G, S, D]`` - the preallocated KV cache. Positions past ``cur_pos[b]`` are
      ignored (they must merely exist).
    * ``cur_pos``: ``B`` ints; user ``b`` attends to positions ``0 .. cur_pos[b]`` inclusive, so
      ``0 <= cur_pos[b] < S``.
    * ``scale``: multiplier applied to ``q.k`` before the softmax; defaults to ``1/sqrt(D)``.

    GQA mapping: query head ``h`` reads kv head ``h // (H // G)``; ``H`` must be a multiple of ``G``.
    ``D`` is taken from ``k``'s last axis and ``H = q.shape[-1] // D``.

    Dtypes: float32, float64 or ``ml_dtypes.bfloat16`` inputs; all arithmetic is float64
    (bfloat16/float32 values are converted exactly). Values are unitless activations.

    Returns:
        ``np.ndarray`` of dtype float64, shape ``[1, 1, B, H*D]`` (same layout as ``q``):
        ``out[b, h] = softmax(scale * q[b,h] . k[b,g,:L]) @ v[b,g,:L]`` with ``L = cur_pos[b] + 1``.

    Raises:
        ValueError: on any rank/shape mismatch, a ``q`` width that is not a multiple of ``D``, a head
            count that is not a multiple of ``G``, a ``cur_pos`` of the wrong length or out of range,
            a non-positive/non-finite ``scale``, or a non-float dtype. Messages read
            ``"<what>: expected ..., got ..."``.
    """
    q64 = _as_f64("q", q)
    k64 = _as_f64("k", k)
    v64 = _as_f64("v", v)
    if q64.ndim != 4 or q64.shape[0] != 1 or q64.shape[1] != 1:
        raise ValueError(f"q: expected shape [1, 1, batch, n_q_heads*head_dim], got {list(q64.shape)}")
    if k64.ndim != 4:
        raise ValueError(f"k: expected shape [batch, n_kv_heads, capacity, head_dim], got {list(k64.shape)}")
    if v64.shape != k64.shape:
        raise ValueError(f"v: expected the same shape as k {list(k64.shape)}, got {list(v64.shape)}")
    batch, n_kv, cap, hd = k64.shape
    if q64.shape[2] != batch:
        raise ValueError(f"q: expected batch {batch} (k.shape[0]) in q.shape[2], got {q64.shape[2]}")
    if hd == 0 or n_kv == 0 or cap == 0:
        raise ValueError(f"k: expected non-zero n_kv_heads, capacity and head_dim, got {list(k64.shape)}")
    width = q64.shape[3]
    if width == 0 or width % hd != 0:
        raise ValueError(f"q: expected last dim a positive multiple of head_dim {hd}, got {width}")
    n_q = width // hd
    if n_q % n_kv != 0:
        raise ValueError(f"q: expected n_q_heads a multiple of n_kv_heads {n_kv}, got n_q_heads {n_q}")
    pos = list(cur_pos)
    if len(pos) != batch:
        raise ValueError(f"cur_pos: expected {batch} entries (one per user), got {len(pos)}")
    for b, p in enumerate(pos):
        if isinstance(p, bool) or int(p) != p or not 0 <= int(p) < cap:
            raise ValueError(f"cur_pos[{b}]: expected an int in [0, {cap - 1}], got {p!r}")
    if scale is None:
        scale = 1.0 / math.sqrt(hd)
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0.0:
        raise ValueError(f"scale: expected a finite positive float, got {scale}")

    group = n_q // n_kv
    qh = q64.reshape(batch, n_kv, group, hd)  # head h = g*group + r  ->  kv head g
    out = np.empty((batch, n_kv, group, hd), dtype=np.float64)
    for b, p in enumerate(pos):
        live = int(p) + 1
        kb = k64[b, :, :live, :]  # [G, L, D]
        vb = v64[b, :, :live, :]
        scores = np.einsum("grd,gld->grl", qh[b], kb) * scale  # [G, group, L]
        scores -= scores.max(axis=-1, keepdims=True)
        w = np.exp(scores)
        w /= w.sum(axis=-1, keepdims=True)
        out[b] = np.einsum("grl,gld->grd", w, vb)
    return out.reshape(1, 1, batch, n_q * hd)


# ----------------------------------------------------------------------------------------------
# Metrics (the one place they live; the demo and the tests import them from here).
# ----------------------------------------------------------------------------------------------


def _pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a64 = np.asarray(a).astype(np.float64).ravel()
    b64 = np.asarray(b).astype(np.float64).ravel()
    if a64.shape != b64.shape:
        raise ValueError(f"expected arrays with the same number of elements, got {a64.size} and {b64.size}")
    return a64, b64


def pcc(a, b) -> float:
    """Pearson correlation coefficient of the flattened arrays, in float64.

    Conventions for degenerate inputs: two identical arrays give 1.0 (including constant ones);
    a constant array against a non-identical one gives 0.0; any non-finite value gives nan.
    Raises ValueError when the element counts differ.
    """
    a64, b64 = _pair(a, b)
    if not (np.isfinite(a64).all() and np.isfinite(b64).all()):
        return float("nan")
    if np.array_equal(a64, b64):
        return 1.0
    da = a64 - a64.mean()
    db = b64 - b64.mean()
    den = math.sqrt(float(da @ da) * float(db @ db))
    if den == 0.0:
        return 0.0
    return float(np.clip((da @ db) / den, -1.0, 1.0))


def max_abs(a, b) -> float:
    """Largest absolute elementwise difference ``max |a - b|`` in float64 (0.0 for empty inputs)."""
    a64, b64 = _pair(a, b)
    return float(np.max(np.abs(a64 - b64))) if a64.size else 0.0


def relative_l2(a, b) -> float:
    """``||a - b||_2 / ||b||_2`` in float64, with ``b`` the reference (0.0 if both are all-zero, inf if only b is)."""
    a64, b64 = _pair(a, b)
    num = float(np.linalg.norm(a64 - b64))
    den = float(np.linalg.norm(b64))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den
