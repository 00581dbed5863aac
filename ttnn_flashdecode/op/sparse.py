"""Sparse decode (DeepSeek-V3.2's top-k attention, issue 37): the ``sparse_indices=`` operand.

Each user attends exactly the cache positions its index list names, in any order, as a gather
then a softmax: a position listed twice counts twice (the list is a multiset), ``-1`` is
padding, and a list with no live entry gives output 0 and LSE ``-inf`` (an idle slot). A position
past the user's ``cur_pos`` is refused here when the host can see both the list and the
positions; a device list (or device positions) the host never sees is masked on device instead:
the reader drops every entry outside ``0 .. cur_pos`` (``kernels/attention_sparse.hpp``).

The kernels treat the call as dense decode over a VIRTUAL sequence of the ``n <= k`` live entries
(``attention_protocol.hpp`` "Sparse decode"); the program depends on ``k``, never on the values,
so a traced program replays for any lists written to the same tensor. The layout, the bytes and
what is refused: ``docs/options.md#sparse_indices``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ttnn_flashdecode.op.positions import _int32_operand
from ttnn_flashdecode.op.reference import attention_reference

__all__ = ["SparseLists", "sparse_lists", "sparse_reference", "PADDING", "SPARSE_KV_DTYPES"]

PADDING = -1
"""An index-list entry that names no position (DSA pads short contexts with it)."""
SPARSE_KV_DTYPES = ("bfloat16", "bfloat8_b")
"""The caches a sparse call gathers rows of (``kernels/attention_sparse.hpp``)."""


@dataclasses.dataclass(frozen=True, eq=False)
class SparseLists:
    """A validated ``sparse_indices``: ``k`` entries per list, ``heads`` lists per user (1: one
    for every KV head; else ``n_kv_heads``, a list per KV head), the values as int32 ``[batch,
    heads, k]`` when the host holds them (else None), or the device tensor the kernels read as it
    is (a page per list: ``[batch * heads, k]``)."""

    k: int
    values: np.ndarray | None
    tensor: object = None
    heads: int = 1


def sparse_lists(indices, *, batch: int, n_kv_heads: int, capacity: int, positions: Sequence[int] | None,
                 kind: str, cache_block_size: int = 0) -> SparseLists:
    """``sparse_indices`` checked against the call: int32 ``[batch, k]`` or ``[batch, 1, k]`` (one list
    per user, every KV head alike) or ``[batch, n_kv_heads, k]`` (KV head ``h`` of user ``b`` attends
    list ``[b, h]``), ``1 <= k <= capacity``; on the host every entry ``-1`` or in ``0 .. cur_pos``
    of its user.

    Raises:
        TypeError: not a numpy int32 array or an int32 ttnn.Tensor.
        ValueError: a shape, an entry or a cache the sparse path does not take, each by name.
    """
    name = "sparse_indices"

    def shape_ok(shape):
        return (len(shape) in (2, 3) and shape[0] == batch and (len(shape) == 2 or shape[1] in (1, n_kv_heads))
                and shape[-1] >= 1)

    if cache_block_size == 16:
        raise ValueError(f"{name}: expected a contiguous cache or a paged one with blocks of a multiple of 32 "
                         f"positions, got blocks of 16")
    values = _int32_operand(name, indices, kind, shape_ok,
                            f"[{batch}, k], [{batch}, 1, k] (one list per user) or [{batch}, {n_kv_heads}, k] "
                            f"(one per KV head)")
    k = int(indices.shape[-1])
    heads = int(indices.shape[1]) if len(indices.shape) == 3 else 1
    if k > capacity:
        raise ValueError(f"{name}: expected k <= the cache's capacity {capacity} (entries per list), got {k}")
    if values is None:
        return SparseLists(k, None, indices, heads)
    values = values.reshape(batch, heads, k).astype(np.int32)
    bad = np.argwhere((values < PADDING) | (values >= capacity))
    if bad.size:
        b, h, j = (int(x) for x in bad[0])
        raise ValueError(f"{name}{_at(heads, b, h, j)}: expected -1 (padding) or a position in 0..{capacity - 1}, "
                         f"got {values[b, h, j]}")
    for b, position in enumerate(positions or ()):
        if position < 0:  # an idle slot attends nothing, whatever its (stale) list holds: the device drops it all
            continue
        past = np.argwhere(values[b] > position)
        if past.size:
            h, j = (int(x) for x in past[0])
            raise ValueError(f"{name}{_at(heads, b, h, j)}: expected -1 or a position <= cur_pos[{b}] = {position} "
                             f"(a device list is masked there instead), got {values[b, h, j]}")
    return SparseLists(k, np.ascontiguousarray(values, dtype="<i4"), heads=heads)


def _at(heads: int, b: int, h: int, j: int) -> str:
    """An entry's index as the caller wrote it: ``[b][j]``, or ``[b][h][j]`` with a list per KV head."""
    return f"[{b}][{j}]" if heads == 1 else f"[{b}][{h}][{j}]"


def sparse_named_args(shape) -> list[tuple[str, int]]:
    """Named compile-time args of sparse decode (``attention_sparse.hpp``): entries per list (0: a
    dense call), lists per user (0: dense; 1: one for every KV head; n_kv_heads: one per KV head) and
    the GQA ratio that finds a request's KV head (1 unless the lists are per KV head)."""
    lists = shape.sparse_heads if shape.sparse_k else 0
    return [("sparse_k", shape.sparse_k), ("sparse_lists", lists), ("sparse_gqa", shape.gqa_ratio if lists > 1 else 1)]


def live_entries(values: np.ndarray, cur_pos: Sequence[int]) -> list[np.ndarray]:
    """Per user, its list's live entries in list order (``0 <= index <= cur_pos``): what the reader
    keeps, the virtual sequence the kernels attend. ``values``: ``[batch, k]`` (or ``[batch, 1,
    k]``), one list per user."""
    return [row[(row >= 0) & (row <= int(p))] for row, p in zip(np.asarray(values).reshape(len(cur_pos), -1), cur_pos)]


def sparse_reference(q, k, v, sparse_indices, *, cur_pos: Sequence[int], scale: float | None = None,
                     return_lse: bool = False, **keywords):
    """Sparse decode in float64: each list's positions gathered (duplicates twice, ``-1`` and
    positions past ``cur_pos`` dropped) into a dense cache, then :func:`attention_reference` at
    position ``n - 1`` (``n`` live entries; none: an idle slot, output 0 and LSE ``-inf``).
    ``k``, ``v``: the logical caches ``[batch, n_kv_heads, capacity, head_dim]``;
    ``sparse_indices``: int32 ``[batch, k]``, ``[batch, 1, k]`` (every KV head alike) or ``[batch,
    n_kv_heads, k]`` (a list per KV head: each KV head and its Q heads attend their own, run
    head by head); ``scale`` defaults to ``1 / sqrt(head_dim)`` of K."""
    k, v = np.asarray(k, dtype=np.float64), np.asarray(v, dtype=np.float64)
    indices = np.asarray(sparse_indices)
    batch, n_kv = k.shape[:2]
    if indices.ndim == 3 and indices.shape[1] > 1:
        return _per_head_reference(q, k, v, indices, cur_pos=cur_pos, scale=scale, return_lse=return_lse, **keywords)
    lists = live_entries(indices.reshape(batch, -1), cur_pos)
    width = max(1, max(len(entries) for entries in lists))
    dense_k = np.zeros(k.shape[:2] + (width, k.shape[3]))
    dense_v = np.zeros(v.shape[:2] + (width, v.shape[3]))
    for b, entries in enumerate(lists):
        dense_k[b, :, :len(entries)] = k[b][:, entries]
        dense_v[b, :, :len(entries)] = v[b][:, entries]
    scale = 1.0 / np.sqrt(k.shape[3]) if scale is None else scale
    return attention_reference(q, dense_k, dense_v, cur_pos=[len(e) - 1 for e in lists], scale=scale,
                               return_lse=return_lse, **keywords)


def _per_head_reference(q, k, v, indices, *, cur_pos, scale, return_lse, **keywords):
    """:func:`sparse_reference` with a list per KV head: KV head ``h`` with its own Q heads (the
    ``h``-th group of ``n_q_heads / n_kv_heads`` columns of Q's ``[1, 1, batch, n_q_heads * head_dim]``
    rows) against list ``[b, h]``; the outputs (and LSEs) put back side by side."""
    q = np.asarray(q)
    n_kv, head_dim = k.shape[1], k.shape[3]
    if q.ndim != 4 or q.shape[:2] != (1, 1):
        raise ValueError(f"q: expected [1, 1, batch, n_q_heads * head_dim] with a list per KV head, got {list(q.shape)}")
    group = q.shape[3] // n_kv
    sink = keywords.pop("attention_sink", None)
    outs, lses = [], []
    for h in range(n_kv):
        heads = slice(h * group // head_dim, (h + 1) * group // head_dim)  # this KV head's Q heads
        got = sparse_reference(q[..., h * group:(h + 1) * group], k[:, h:h + 1], v[:, h:h + 1], indices[:, h],
                               cur_pos=cur_pos, scale=1.0 / np.sqrt(head_dim) if scale is None else scale,
                               return_lse=return_lse, attention_sink=None if sink is None else np.asarray(sink)[heads],
                               **keywords)
        out, lse = got if return_lse else (got, None)
        outs.append(out)
        lses.append(lse)
    out = np.concatenate(outs, axis=-1)
    return (out, np.concatenate(lses, axis=-1)) if return_lse else out


def check_sparse_call(*, request_kind: str, kv_dtype: str, scores, cache_wrap: int, users_per_table_row: int) -> None:
    """What a sparse call cannot be combined with, refused by name: ROWS and CHUNK calls, a
    bfloat4_b cache (a face row's data is 8 bytes, under the NoC's L1 alignment), a sliding
    window, attention chunk or attention mask, a circular cache, shared page-table rows.

    Raises:
        ValueError: naming the keyword.
    """
    refusals = [("rows / chunk_start", request_kind != "decode", f"a decode call (cur_pos=), got {request_kind}"),
                ("k", kv_dtype not in SPARSE_KV_DTYPES, f"a bfloat16 or bfloat8_b cache (rows are gathered face "
                                                        f"row by face row; a bfloat4_b face row is 8 bytes, under "
                                                        f"the NoC's 16-byte L1 alignment), got {kv_dtype}"),
                ("is_causal", not scores.causal, "causal decode (the lists are the mask), got is_causal=False"),
                # a circular cache brings its window with it: named first, as the keyword the caller gave
                ("cache_position_modulo", bool(cache_wrap), f"None, got {cache_wrap}"),
                ("sliding_window_size", bool(scores.window), f"None, got {scores.window}"),
                ("attention_chunk_size", bool(scores.attention_chunk), f"None, got {scores.attention_chunk}"),
                ("users_per_table_row", users_per_table_row != 1, f"1, got {users_per_table_row}")]
    for name, refused, what in refusals:
        if refused:
            raise ValueError(f"{name}: with sparse_indices, expected {what}")
