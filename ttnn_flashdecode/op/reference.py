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

from ttnn_flashdecode.op.modifiers import scalar_modifiers

__all__ = ["attention_reference", "pcc", "max_abs", "relative_l2"]


def _as_f64(name: str, x) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu" and arr.dtype.name != "bfloat16":
        raise ValueError(f"{name}: expected a float array (float32/float64/bfloat16), got dtype {arr.dtype}")
    return arr.astype(np.float64)


def _require_int(name: str, value) -> None:
    """Raises TypeError unless ``value`` is an int (a numpy integer too; bool and 5.0 are not), as
    :func:`~ttnn_flashdecode.attention` does."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")


def attention_reference(
    q,
    k,
    v,
    *,
    cur_pos: Sequence[int] | None = None,
    chunk_start: int | Sequence[int] | None = None,
    rows: int | None = None,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    attention_sink=None,
    is_causal: bool = True,
    attn_mask=None,
    logit_softcap: float | None = None,
    attention_chunk_size: int | None = None,
    return_lse: bool = False,
):
    """GQA attention against a KV cache in float64, for the op's three request kinds.

    Shapes (``H`` = n_q_heads, ``G`` = n_kv_heads, ``D`` = head_dim, ``B`` = batch, ``S`` = capacity,
    ``R`` = query rows per user):

    * ``q``: ``[1, 1, B*R, H*D]`` - rows ``b*R .. b*R + R - 1`` are user ``b``'s, in position
      order; head ``h`` occupies columns ``h*D .. (h+1)*D``.
    * ``k``, ``v``: ``[B, G, S, D]`` - the preallocated KV cache. Positions past a row's own are
      ignored (they must merely exist).
    * Exactly one of:

      - ``cur_pos`` (decode, ``R = 1``): ``B`` ints; user ``b``'s row attends to positions
        ``0 .. cur_pos[b]`` inclusive, ``0 <= cur_pos[b] < S``, or ``-1``: an idle slot, whose
        rows are zero (also with ``rows``);
      - ``cur_pos`` and ``rows`` (``R = rows``): user ``b``'s row ``j`` sits at position
        ``cur_pos[b] - R + 1 + j`` and attends to ``0`` .. that position; ``cur_pos[b] >= R - 1``;
      - ``chunk_start`` (a causal chunk, ``R = C = q rows / B``): an int for every user or ``B``
        ints; user ``b``'s row ``r`` sits at position ``chunk_start[b] + r`` and attends to ``0`` ..
        that position; ``chunk_start[b] + C <= S``.
    * ``scale``: multiplier applied to ``q.k`` before the softmax; defaults to ``1/sqrt(D)``.
    * ``sliding_window_size`` ``W`` (a positive int, or ``None``): the row at position ``p``
      attends only ``max(0, p + 1 - W) .. p``.
    * ``attention_sink`` (``H`` logits, or ``None``): Q head ``h``'s sink ``s_h`` joins each of its
      rows' softmax denominators with no value: ``w_j = e^(S_j) / (sum_i e^(S_i) + e^(s_h))``.
    * ``logit_softcap`` ``c`` (a finite float > 0, or ``None``): every scaled score ``s`` becomes
      ``c * tanh(s / c)`` before the window, chunk, mask and sink (FA3 / Gemma 2); sinks uncapped.
    * ``attention_chunk_size`` ``C`` (a positive int, or ``None``): the row at position ``p``
      attends only ``floor(p / C) * C .. p`` (with a window, the later of the two starts).
    * ``is_causal=False`` (decode, no positions): every row attends all ``S`` positions, plus
      ``attn_mask`` (``[B_m, 1, H, S]`` or ``[1, B_m, H, S]``, ``B_m`` 1 or ``B``) added to the
      scaled scores, each entry clamped into ``[-1e30, 1e30]`` and NaN taken as -1e30 (the op's
      rule: a fully masked row weighs every position alike).

    GQA mapping: query head ``h`` reads kv head ``h // (H // G)``; ``H`` must be a multiple of ``G``.
    ``D`` is taken from ``k``'s last axis and ``H = q.shape[-1] // D``. Each row is its own
    softmax over its live positions: no blocking, no tiles, no masks.

    Dtypes: float32, float64 or ``ml_dtypes.bfloat16`` inputs; all arithmetic is float64
    (bfloat16/float32 values are converted exactly). Values are unitless activations.

    * ``return_lse``: also return each row's log-sum-exp, ``log(sum_j e^(S_j) [+ e^(s_h)])`` over its
      final scores (the op's ``return_lse``): ``[1, 1, B*R, H]`` float64, ``-inf`` for idle rows.

    Returns:
        ``np.ndarray`` of dtype float64 in ``q``'s shape and layout:
        ``out[row of b at p, h] = softmax(scale * q[row, h] . k[b,g,:p+1]) @ v[b,g,:p+1]``; with
        ``return_lse`` the pair ``(out, lse)``.

    Raises:
        ValueError: on any rank/shape mismatch, a ``q`` width that is not a multiple of ``D``, a head
            count that is not a multiple of ``G``, ``q`` rows that are not ``B * R``, a position list
            of the wrong length or out of range, both or neither of ``cur_pos`` and
            ``chunk_start`` (or ``rows`` with ``chunk_start``), a non-positive/non-finite
            ``scale``, or a non-float dtype. Messages read ``"<what>: expected ..., got ..."``.
        TypeError: a position (``cur_pos`` or ``chunk_start`` entry) that is not an int (as
            :func:`~ttnn_flashdecode.attention`).
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
    if hd == 0 or n_kv == 0 or cap == 0:
        raise ValueError(f"k: expected non-zero n_kv_heads, capacity and head_dim, got {list(k64.shape)}")
    try:
        modifiers = scalar_modifiers(sliding_window_size=sliding_window_size, logit_softcap=logit_softcap,
                                     attention_chunk_size=attention_chunk_size)
    except TypeError as error:  # the reference refuses every bad value with a ValueError
        raise ValueError(str(error)) from error
    if not is_causal:
        if cur_pos is not None or chunk_start is not None or rows is not None or modifiers.window:
            raise ValueError("is_causal: expected no cur_pos, chunk_start, rows or window with non-causal attention")
        cur_pos = [k64.shape[2] - 1] * k64.shape[0]
    elif attn_mask is not None:
        raise ValueError("attn_mask: expected None with causal attention")
    per_user, last = _row_positions(cur_pos, chunk_start, rows, batch, cap, q64.shape[2])
    width = q64.shape[3]
    if width == 0 or width % hd != 0:
        raise ValueError(f"q: expected last dim a positive multiple of head_dim {hd}, got {width}")
    n_q = width // hd
    if n_q % n_kv != 0:
        raise ValueError(f"q: expected n_q_heads a multiple of n_kv_heads {n_kv}, got n_q_heads {n_q}")
    if scale is None:
        scale = 1.0 / math.sqrt(hd)
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0.0:
        raise ValueError(f"scale: expected a finite positive float, got {scale}")
    bias = None
    if attn_mask is not None:
        bias = np.asarray(attn_mask, dtype=np.float64)
        if bias.ndim != 4 or 1 not in bias.shape[:2] or bias.shape[0] * bias.shape[1] not in (1, batch) \
                or bias.shape[2:] != (n_q, cap):
            raise ValueError(f"attn_mask: expected [B, 1, {n_q}, {cap}] or [1, B, {n_q}, {cap}], got {list(bias.shape)}")
        bias = np.clip(np.nan_to_num(bias, nan=-1e30), -1e30, 1e30).reshape(-1, n_kv, n_q // n_kv, cap)
    sinks = None
    if attention_sink is not None:
        sinks = np.asarray(attention_sink, dtype=np.float64).ravel()
        if sinks.shape != (n_q,) or not np.isfinite(sinks).all():
            raise ValueError(f"attention_sink: expected {n_q} finite logits (one per Q head), got {sinks.shape}")
    group = n_q // n_kv
    qh = q64.reshape(batch, per_user, n_kv, group, hd)  # row j of user b, head h = g*group + r -> kv head g
    out = np.zeros((batch, per_user, n_kv, group, hd), dtype=np.float64)  # an idle user's rows stay 0
    lse = np.full((batch, per_user, n_kv, group), -np.inf)
    for b in range(batch):
        for j, p in enumerate(last[b]):
            live = p + 1
            first = modifiers.first_position(p)
            kb = k64[b, :, first:live, :]  # [G, L, D]
            vb = v64[b, :, first:live, :]
            scores = np.einsum("grd,gld->grl", qh[b, j], kb) * scale  # [G, group, L]
            scores = modifiers.reference_scores(scores)
            if bias is not None:
                scores = scores + bias[b % bias.shape[0]]
            top = scores.max(axis=-1, keepdims=True)
            if sinks is not None:
                top = np.maximum(top, sinks.reshape(n_kv, group, 1))
            w = np.exp(scores - top)
            total = w.sum(axis=-1, keepdims=True)
            if sinks is not None:
                total += np.exp(sinks.reshape(n_kv, group, 1) - top)
            w /= total
            out[b, j] = np.einsum("grl,gld->grd", w, vb)
            lse[b, j] = (top + np.log(total))[..., 0]
    out = out.reshape(1, 1, batch * per_user, n_q * hd)
    return (out, lse.reshape(1, 1, batch * per_user, n_q)) if return_lse else out


def _row_positions(cur_pos, chunk_start, rows, batch: int, cap: int, height: int) -> tuple[int, list[list[int]]]:
    """``(rows per user, each user's rows' positions)`` from ``cur_pos`` (and ``rows``) or
    ``chunk_start``, checked as :func:`attention_reference` states; an idle user has no rows."""
    if (cur_pos is None) == (chunk_start is None):
        raise ValueError("cur_pos, chunk_start: expected exactly one of them, got "
                         f"{'both' if cur_pos is not None else 'neither'}")
    if chunk_start is not None:
        if rows is not None:
            raise ValueError(f"rows: expected None with chunk_start, got {rows!r}")
        if batch == 0 or height % batch or height == 0:
            raise ValueError(f"q: expected a multiple of batch {batch} rows (C per sequence), got {height}")
        per_user = height // batch
        starts = [chunk_start] * batch if isinstance(chunk_start, (int, np.integer)) else list(chunk_start)
        if len(starts) != batch:
            raise ValueError(f"chunk_start: expected {batch} entries (one per user), got {len(starts)}")
        last = []
        for b, s in enumerate(starts):
            _require_int(f"chunk_start[{b}]", s)
            if not 0 <= int(s) <= cap - per_user:
                raise ValueError(f"chunk_start[{b}]: expected an int in [0, {cap - per_user}], got {s!r}")
            last.append([int(s) + r for r in range(per_user)])
    else:
        per_user = 1 if rows is None else rows
        if isinstance(per_user, bool) or int(per_user) != per_user or per_user < 1:
            raise ValueError(f"rows: expected a positive int, got {rows!r}")
        per_user = int(per_user)
        if height != batch * per_user:
            what = f"batch {batch} (k.shape[0])" if per_user == 1 else f"batch {batch} x rows {per_user} = {batch * per_user}"
            raise ValueError(f"q: expected {what} in q.shape[2], got {height}")
        pos = list(cur_pos)
        if len(pos) != batch:
            raise ValueError(f"cur_pos: expected {batch} entries (one per user), got {len(pos)}")
        last = []
        for b, p in enumerate(pos):
            _require_int(f"cur_pos[{b}]", p)
            if not (per_user - 1 <= int(p) < cap or int(p) == -1):
                raise ValueError(f"cur_pos[{b}]: expected an int in [{per_user - 1}, {cap - 1}] or -1 (idle), got {p!r}")
            last.append([] if int(p) == -1 else [int(p) - per_user + 1 + j for j in range(per_user)])
    return per_user, last


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
