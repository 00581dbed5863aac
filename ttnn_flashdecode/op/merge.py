"""``merge_attention_states``: attention over a union of disjoint key sets from the attention over
each (FlashInfer's ``merge_state`` / ``merge_states``), for the ``(out, lse)`` pairs of
:func:`~ttnn_flashdecode.attention` with ``return_lse=True``: context-parallel decode across chips,
cascade (shared-prefix) attention, any caller that splits a long cache itself.

For partial states ``(o_i, s_i)`` (``s_i`` the natural-log LSE of each row over shard ``i``'s
positions)::

    lse = log(sum_i e^(s_i))          out = sum_i e^(s_i - lse) o_i

computed as ``m = max_i s_i`` (floored at -1e30), ``w_i = e^(s_i - m)``, ``W = sum_i w_i``, ``lse = m
+ log W``, ``out = sum_i w_i o_i / max(W, 1)``: the largest finite partial gives ``w = 1``, so ``W >=
1`` whenever some row has one; a ``-inf`` partial (an empty shard, an idle slot) has ``w = 0`` and
contributes nothing; a row whose every partial is ``-inf`` gets ``out = 0`` and ``lse = -inf``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import ttnn

__all__ = ["merge_attention_states", "LSE_FLOOR"]

LSE_FLOOR = -1.0e30
"""The running max is floored here, so ``e^(s_i - m)`` is never ``e^(-inf + inf)``."""


def merge_attention_states(outputs: Sequence, lses: Sequence):
    """Merge ``n >= 1`` partial attention states of the same rows into one.

    Args:
        outputs: the partial outputs, all of one shape: ``[1, 1, rows, n_q_heads * head_dim]``
            (the ``"rows"`` layout) or ``[1, batch, n_q_heads, head_dim]`` (``"heads"``), or any
            ``[..., n_q_heads * head_dim]`` / ``[..., n_q_heads, head_dim]``; unitless activations.
        lses: the matching natural-log LSEs, float32, one per (row, Q head): ``outputs``' shape with
            the last axis ``n_q_heads`` (``[1, 1, rows, n_q_heads]``) or without the head_dim axis
            (``[1, batch, n_q_heads]``), as ``attention(..., return_lse=True)`` returns them.
            ``-inf`` marks an empty partial.

    All of one kind: numpy arrays (float64 math; ``out`` in ``outputs[0]``'s dtype, ``lse``
    float32), host ``ttnn.Tensor`` s (numpy math; ``out`` bfloat16 ROW_MAJOR, ``lse`` float32
    ROW_MAJOR), or device tensors (ttnn ops on the device in float32, no host round trip; ``out``
    bfloat16 TILE, ``lse`` float32 ROW_MAJOR, both DRAM).

    Returns:
        ``(out, lse)``: ``out`` in ``outputs``' shape, ``lse`` in ``lses``' shape.

    Raises:
        TypeError: ``outputs`` or ``lses`` is not a non-string sequence, or mixes kinds; numpy
            LSEs that are not float arrays.
        ValueError: no partial, different counts, different shapes, or an ``lse`` shape that is
            not the output's per head; a host LSE holding NaN or +inf (device LSEs are not read).
    """
    if isinstance(outputs, (str, bytes, np.ndarray, ttnn.Tensor)) or not isinstance(outputs, Sequence) or \
            isinstance(lses, (str, bytes, np.ndarray, ttnn.Tensor)) or not isinstance(lses, Sequence):
        raise TypeError(f"outputs, lses: expected sequences of partial states, got {type(outputs).__name__} and "
                        f"{type(lses).__name__}")
    if not outputs or len(outputs) != len(lses):
        raise ValueError(f"outputs, lses: expected the same number (>= 1) of outputs and LSEs, got {len(outputs)} and "
                         f"{len(lses)}")
    kinds = {_kind(t) for t in (*outputs, *lses)}
    if len(kinds) != 1 or None in kinds:
        got = sorted({_kind(t) or type(t).__name__ for t in (*outputs, *lses)})
        raise TypeError(f"outputs, lses: expected all numpy arrays, all host ttnn.Tensors or all device ttnn.Tensors, "
                        f"got {got}")
    out_shape, lse_shape = tuple(outputs[0].shape), tuple(lses[0].shape)
    for name, items, shape in (("outputs", outputs, out_shape), ("lses", lses, lse_shape)):
        if any(tuple(t.shape) != shape for t in items):
            raise ValueError(f"{name}: expected one shape, got {[list(t.shape) for t in items]}")
    heads_view = _heads_view(out_shape, lse_shape)
    kind = kinds.pop()
    if kind == "device":
        return _merge_on_device(outputs, lses, heads_view, out_shape, lse_shape)
    o = np.stack([_host_values(t) for t in outputs]).reshape(len(outputs), *heads_view)
    if kind == "numpy" and any(not np.issubdtype(t.dtype, np.floating) for t in lses):
        raise TypeError(f"lses: expected float arrays, got dtypes {sorted({str(t.dtype) for t in lses})}")
    s = np.stack([_host_values(t) for t in lses]).astype(np.float64)
    if np.isnan(s).any() or np.isposinf(s).any():
        raise ValueError("lses: expected finite values or -inf (an empty partial), got NaN or +inf")
    out, lse = _merge(o, s)
    out = out.reshape(out_shape)
    if kind == "host":
        return (ttnn.Tensor(np.ascontiguousarray(out, dtype=np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT),
                ttnn.Tensor(np.ascontiguousarray(lse, dtype=np.float32), ttnn.float32, layout=ttnn.ROW_MAJOR_LAYOUT))
    return out.astype(outputs[0].dtype), lse.astype(np.float32)


def _kind(tensor) -> str | None:
    if isinstance(tensor, np.ndarray):
        return "numpy"
    if isinstance(tensor, ttnn.Tensor):
        return "device" if tensor.storage_type() == ttnn.StorageType.DEVICE else "host"
    return None


def _heads_view(out_shape: tuple, lse_shape: tuple) -> tuple:
    """``out_shape`` as ``lse_shape + (head_dim,)``.

    Raises:
        ValueError: no such view.
    """
    if len(out_shape) == len(lse_shape) + 1 and out_shape[:-1] == lse_shape:
        return out_shape
    heads = lse_shape[-1] if lse_shape else 0
    if len(out_shape) == len(lse_shape) and out_shape[:-1] == lse_shape[:-1] and heads and out_shape[-1] % heads == 0:
        return (*lse_shape, out_shape[-1] // heads)
    raise ValueError(f"lses: expected the outputs' shape {list(out_shape)} per Q head ([..., n_q_heads] for "
                     f"[..., n_q_heads * head_dim], or [..., n_q_heads] for [..., n_q_heads, head_dim]), got "
                     f"{list(lse_shape)}")


def _host_values(tensor) -> np.ndarray:
    if isinstance(tensor, np.ndarray):
        return tensor.astype(np.float64)
    if tensor.dtype == ttnn.float32:
        return np.asarray(tensor.to_numpy(), dtype=np.float64)
    return np.asarray(tensor.to_list(), dtype=np.float64)


def _merge(o: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``o`` ``[n, ..., head_dim]``, ``s`` ``[n, ...]`` (float64) -> merged ``(out, lse)``."""
    m = np.maximum(s.max(axis=0), LSE_FLOOR)
    with np.errstate(divide="ignore"):
        w = np.exp(s - m)
        total = w.sum(axis=0)
        lse = m + np.log(total)
    out = np.einsum("n...,n...d->...d", w, o) / np.maximum(total, 1.0)[..., None]
    return out, lse


def _merge_on_device(outputs, lses, heads_view, out_shape, lse_shape):
    """The merge in ttnn ops on the outputs' device, float32 throughout: each LSE viewed as ``[1, P,
    n_q_heads, 1]`` (TILE), each output as ``[1, P, n_q_heads, head_dim]``, the weights broadcast
    along head_dim."""
    rows = int(np.prod(heads_view[:-2], dtype=np.int64))
    heads, dim = heads_view[-2], heads_view[-1]
    stat_shape, view = ttnn.Shape([1, rows, heads, 1]), ttnn.Shape([1, rows, heads, dim])

    def stat(t):
        t = t if t.layout == ttnn.ROW_MAJOR_LAYOUT else ttnn.to_layout(t, ttnn.ROW_MAJOR_LAYOUT)
        t = t if t.dtype == ttnn.float32 else ttnn.typecast(t, ttnn.float32)
        return ttnn.to_layout(ttnn.reshape(t, stat_shape), ttnn.TILE_LAYOUT)

    s = [stat(t) for t in lses]
    m = s[0]
    for t in s[1:]:
        m = ttnn.maximum(m, t)
    m = ttnn.clamp(m, min=LSE_FLOOR)
    w = [ttnn.exp(ttnn.subtract(t, m)) for t in s]
    total = w[0]
    for t in w[1:]:
        total = ttnn.add(total, t)
    lse = ttnn.add(m, ttnn.log(total))
    out = None
    for w_i, o_i in zip(w, outputs):
        o32 = ttnn.reshape(o_i if o_i.dtype == ttnn.float32 else ttnn.typecast(o_i, ttnn.float32), view)
        term = ttnn.multiply(o32, w_i)
        out = term if out is None else ttnn.add(out, term)
    out = ttnn.multiply(out, ttnn.reciprocal(ttnn.clamp(total, min=1.0)))
    out = ttnn.typecast(ttnn.reshape(out, ttnn.Shape(out_shape)), ttnn.bfloat16)
    return out, ttnn.reshape(ttnn.to_layout(lse, ttnn.ROW_MAJOR_LAYOUT), ttnn.Shape(lse_shape))
