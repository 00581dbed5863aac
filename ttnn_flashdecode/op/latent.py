"""Multi-head latent attention (MLA, DeepSeek-V2/V3, Kimi-K2): V as the latent's first columns,
for :func:`ttnn_flashdecode.attention`'s ``head_dim_v=`` form and the MLA drop-ins
(:mod:`ttnn_flashdecode.op.mla`).

MLA decodes every Q head against ONE latent cache per layer: K is the latent ``[b, 1, s, dh]``
(DeepSeek-V3: ``dh = 576``, the 512-wide compressed KV and the 64-wide RoPE key) and V is its
first ``head_dim_v`` columns (512). Each Q head's output is ``softmax(scale * q K^T) V``, so it is
the first ``head_dim_v`` columns of the same attention with V = K: ``(P K)[:, :dv] = P K[:, :dv]``.
That is how these calls run: the GQA op with the latent as K and as V (one tensor, no copy), the
output cut to ``head_dim_v`` columns per head. A separate ``V`` of ``head_dim_v`` columns is
zero-padded to ``dh`` columns first (its padding columns are cut again).

Cost (measured on the emulator, docs/options.md "head_dim_v", ``bench --mla``): one tensor as K and V is
read once (``attention_protocol.hpp`` "Values from keys": P.V reads the K block in L1), so an
unsplit request, which serves all of the group's Q row tiles, reads each latent block once: 1.012x
the minimum at 128 heads and 1024 positions. A group split over cores still reads it once per 32
Q heads (docs/design.md "MLA"). A separate ``V`` is read as well.
"""

from __future__ import annotations

import numpy as np
import ttnn

__all__ = ["values_for", "keep_value_columns"]


def _dims(tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in tensor.shape)


def values_for(k, v, head_dim_v, v_name: str = "input_tensor_v"):
    """The V operand of an MLA call: ``k`` itself when ``v`` is None (V = the latent's first
    ``head_dim_v`` columns, cut from the output afterwards), else ``v`` zero-padded from
    ``head_dim_v`` to ``k``'s head_dim columns.

    Args:
        k: the latent cache ``[b, nkv, s, dh]`` (paged: ``[blocks, nkv, block_size, dh]``).
        v: None, or ``[..., head_dim_v]`` like ``k`` but ``head_dim_v`` wide.
        head_dim_v: V's head_dim, ``1 <= head_dim_v <= dh``.
        v_name: ``v``'s name in messages (``attention()``'s ``v``, the drop-ins' ``input_tensor_v``).

    Raises:
        TypeError: ``head_dim_v`` is not an int.
        ValueError: ``head_dim_v`` outside ``1..dh``; ``v``'s shape is not ``k``'s with ``head_dim_v`` columns.
    """
    if not isinstance(head_dim_v, (int, np.integer)) or isinstance(head_dim_v, bool):
        raise TypeError(f"head_dim_v: expected an int (V's head_dim), got {type(head_dim_v).__name__}")
    k_dims = _dims(k)
    head_dim = k_dims[-1]
    if not 1 <= head_dim_v <= head_dim:
        raise ValueError(f"head_dim_v: expected 1 <= head_dim_v <= {head_dim} (the latent's head_dim), got {head_dim_v}")
    if v is None:
        return k
    v_dims = _dims(v)
    if v_dims != k_dims[:-1] + (head_dim_v,):
        raise ValueError(f"{v_name}: expected {list(k_dims[:-1] + (head_dim_v,))} (K's shape with head_dim_v "
                         f"columns), got {list(v_dims)}")
    if head_dim_v == head_dim:
        return v
    widths = [(0, 0)] * (len(v_dims) - 1) + [(0, head_dim - head_dim_v)]
    if isinstance(v, np.ndarray):
        return np.pad(v, widths)
    if v.storage_type() == ttnn.StorageType.DEVICE:
        return ttnn.pad(v, widths, 0.0)
    return ttnn.Tensor(np.pad(_host_values(v), widths), v.dtype, layout=v.layout)


def keep_value_columns(out, head_dim_v: int, *, heads: int | None = None):
    """The first ``head_dim_v`` columns of each head of an attention output (or of ``(out, lse)``'s
    output; the LSE is per row and stays).

    Args:
        out: ``[1, b, nh, dh]`` (the heads layout), or with ``heads`` the rows layout ``[1, 1, rows,
            heads * dh]``: numpy, a host or a device ``ttnn.Tensor``.
        head_dim_v: columns kept per head.
        heads: the head count of a rows-layout output; None for the heads layout.
    """
    if isinstance(out, tuple):
        return keep_value_columns(out[0], head_dim_v, heads=heads), out[1]
    dims = _dims(out)
    head_dim = dims[-1] if heads is None else dims[-1] // heads
    if head_dim_v == head_dim:
        return out
    split = dims if heads is None else dims[:-1] + (heads, head_dim)
    if isinstance(out, ttnn.Tensor) and out.storage_type() == ttnn.StorageType.DEVICE:
        if heads is None:
            return ttnn.slice(out, [0] * len(dims), list(dims[:-1]) + [head_dim_v])
        cut = ttnn.slice(ttnn.reshape(out, split), [0] * len(split), list(split[:-1]) + [head_dim_v])
        return ttnn.reshape(cut, dims[:-1] + (heads * head_dim_v,))
    values = out if isinstance(out, np.ndarray) else _host_values(out)
    kept = values.reshape(split)[..., :head_dim_v]
    kept = kept.reshape(dims[:-1] + ((heads or 1) * head_dim_v,)) if heads else kept
    if isinstance(out, np.ndarray):
        return np.ascontiguousarray(kept)
    return ttnn.Tensor(np.ascontiguousarray(kept, dtype=np.float32), out.dtype, layout=out.layout)


def _host_values(tensor) -> np.ndarray:
    """A host ttnn.Tensor's values as float32, at its logical shape (any layout or dtype)."""
    return np.asarray(tensor.to_list(), dtype=np.float32)
