"""Drop-ins for ttnn's decode attention calls: ``scaled_dot_product_attention_decode`` and
``paged_scaled_dot_product_attention_decode``.

Same signatures and semantics as ``ttnn.transformer``'s (ttnn 0.81) for what this op supports, so
a tt-transformers-style model swaps the call and nothing else: Q ``[1, b, nh, dh]`` (the heads
``nlp_create_qkv_heads_decode`` gives: DRAM interleaved or L1 height-sharded on a device, head
rows padded to the tile; bfloat16, or bfloat8_b / bfloat4_b as ttnn accepts them), K / V ``[b,
nkv, s, dh]`` (``[1, nkv, s, dh]`` with ``share_cache=True``) or paged ``[blocks, nkv,
block_size, dh]`` with ``page_table_tensor``, in bfloat16, bfloat8_b or bfloat4_b; ``cur_pos`` or
``cur_pos_tensor`` (-1: idle slot), ``scale``, ``program_config`` (every field with ttnn's
meaning: :func:`~ttnn_flashdecode.op.program_config.program_config_keywords`), ``compute_kernel_config``, ``memory_config``; the
output is ``[1, b, nh, dh]``. The kernels read Q and write the output in that layout directly
(the HEAD_ROWS request flag): no reshape on the way. ``sliding_window_size``, ``attention_sink``
and ``is_causal=False`` with ``attn_mask`` are taken as ttnn takes them, ttnn's scaling of the sink
and the mask included (both multiplied by ``scale``: tt-metal #55337 / #40470;
:func:`ttnn_flashdecode.attention` takes them in score units). What is not supported is refused
by name, never ignored.
"""

from __future__ import annotations

import math

import numpy as np
import ttnn

from ttnn_flashdecode.op.operation import attention
from ttnn_flashdecode.op.modifiers import causal, window
from ttnn_flashdecode.op.modifiers.base import is_int
from ttnn_flashdecode.op.program_config import program_config_keywords

__all__ = ["scaled_dot_product_attention_decode", "paged_scaled_dot_product_attention_decode"]

def _cache_view(cache, geometry, name: str):
    """ttnn's ``paged_cache_geometry`` (a ``ttnn.PagedCacheGeometryOverride``): the paged cache
    ``[blocks, nkv, block_size, dh]`` viewed as ``[blocks, geometry.num_kv_heads,
    geometry.block_size, dh]`` (one buffer shared by layers of different KV-head counts, as
    ttnn's HMA sharing). Both 0: no view. A view keeps each block's elements and, with block sizes
    that are whole tiles, its tiles: the same bytes, so it is a reshape.

    Raises:
        TypeError: not a PagedCacheGeometryOverride.
        ValueError: one of the two 0, a block size (either side) that is not a multiple of 32, or a
            view with another number of elements per block.
    """
    if geometry is None:
        return cache
    if not isinstance(geometry, ttnn.PagedCacheGeometryOverride):
        raise TypeError(f"paged_cache_geometry: expected None or a ttnn.PagedCacheGeometryOverride, got "
                        f"{type(geometry).__name__}")
    block_size, heads = int(geometry.block_size), int(geometry.num_kv_heads)
    if block_size == 0 and heads == 0:
        return cache
    shape = tuple(int(d) for d in cache.shape)
    if block_size <= 0 or heads <= 0 or block_size % 32 or len(shape) != 4 or shape[2] % 32 \
            or heads * block_size != shape[1] * shape[2]:
        raise ValueError(f"paged_cache_geometry: expected a positive num_kv_heads and a block_size that is a multiple "
                         f"of 32, with num_kv_heads x block_size = {name}'s {shape[1:3]} product (each block's tiles "
                         f"kept), got num_kv_heads {heads}, block_size {block_size} for {name} {list(shape)}")
    return _reshape(cache, (shape[0], heads, block_size, shape[3]))


def _spec_candidates(spec_multi_pos_tiles, q, k, page_table, is_causal) -> int:
    """ttnn's ``spec_multi_pos_tiles=Tg`` checked (0: off): ``Tg`` speculative candidates per group,
    Q ``[1, B, Tg * 32, dh]`` with candidate ``j``'s Q heads on the rows of row tile ``j`` (the
    rest padding), one KV head (as ttnn), ``cur_pos_tensor`` ``B * Tg`` bounds (group ``b``'s
    candidates ``b * Tg ..``), the page table ``B`` rows, causal (each candidate's bound is its
    entry: ttnn's spec mode always reads them).

    Raises:
        ValueError: a negative or non-int ``Tg``, Q rows other than ``Tg * 32``, more than one KV
            head, K's head_dim not Q's, page-table rows other than ``B``, or ``is_causal=False``.
    """
    if isinstance(spec_multi_pos_tiles, bool) or not isinstance(spec_multi_pos_tiles, (int, np.integer)) \
            or spec_multi_pos_tiles < 0:
        raise ValueError(f"spec_multi_pos_tiles: expected an int >= 0 (candidates per group; 0: off), got "
                         f"{spec_multi_pos_tiles!r}")
    candidates = int(spec_multi_pos_tiles)
    if candidates and (len(q.shape) != 4 or int(q.shape[2]) != 32 * candidates):
        raise ValueError(f"input_tensor_q: expected [1, B, {32 * candidates}, dh] with spec_multi_pos_tiles="
                         f"{candidates} (one row tile of heads per candidate), got {list(q.shape)}")
    if candidates and (len(k.shape) != 4 or int(k.shape[1]) != 1):
        raise ValueError(f"input_tensor_k: expected one KV head with spec_multi_pos_tiles (as ttnn's), got "
                         f"{list(k.shape)}")
    if candidates and int(k.shape[3]) != int(q.shape[3]):
        raise ValueError(f"input_tensor_k: expected head_dim {int(q.shape[3])} (input_tensor_q's), got {list(k.shape)}")
    if candidates and (len(page_table.shape) != 2 or int(page_table.shape[0]) != int(q.shape[1])):
        raise ValueError(f"page_table_tensor: expected {int(q.shape[1])} rows with spec_multi_pos_tiles={candidates} "
                         f"(one per group, input_tensor_q's dim 1), got {list(page_table.shape)}")
    if candidates and not is_causal:
        raise ValueError(f"spec_multi_pos_tiles: expected is_causal=True (each candidate's causal bound is its "
                         f"cur_pos_tensor entry), got spec_multi_pos_tiles={candidates} with is_causal=False")
    return candidates


def _reshape(tensor, shape):
    """``tensor`` (numpy, host or device ttnn.Tensor) viewed as ``shape`` (tile-aligned rows: the
    same bytes in TILE layout)."""
    if isinstance(tensor, np.ndarray):
        return tensor.reshape(shape)
    return ttnn.reshape(tensor, ttnn.Shape(shape))


def _window(sliding_window_size) -> int | None:
    """ttnn's ``sliding_window_size`` as :func:`ttnn_flashdecode.attention` takes it: ttnn treats
    ``None`` and 0 alike (no window; its kernels test ``> 0``); a positive W is the window (the row
    at ``p`` attends ``max(0, p + 1 - W) .. p``, as ttnn's ``get_workload_for_core``).

    Raises:
        TypeError: not None or an int (bools, floats and 0.0 neither; the window modifier's check).
    """
    if sliding_window_size is None or (is_int(sliding_window_size) and sliding_window_size == 0):
        return None
    return window.MODIFIER.validate(sliding_window_size)


def _ttnn_sink(attention_sink, q, scale):
    """ttnn's ``attention_sink`` (``[nh, 32]``, TILE, column 0 per Q head) as the logits
    :func:`ttnn_flashdecode.attention` takes: ttnn's kernels fold the sink in as ``exp(scale * (sink
    - m))`` with ``m`` the unscaled running max, i.e. the sink is multiplied by ``scale`` like the
    scores (tt-metal's own sink test divides gpt-oss's sinks by ``scale`` before the call to undo
    it: #55337). The drop-in matches ttnn: logit = ``scale * sink`` (rounded to bfloat16 once
    more; ttnn keeps the product in float32). ``attention()`` takes the logit itself."""
    if attention_sink is None:
        return None
    from ttnn_flashdecode.op.modifiers.sink import sink_logits

    from ttnn_flashdecode.op.mesh import PerDeviceSinks

    heads, head_dim = int(q.shape[2]), int(q.shape[3])
    factor = float(scale) if scale is not None else 1.0 / math.sqrt(head_dim)
    logits = sink_logits(attention_sink, heads)
    if isinstance(logits, PerDeviceSinks):  # a sink tensor sharded over a mesh: each device's heads
        return PerDeviceSinks(tuple(factor * logit for logit in device) for device in logits)
    return [factor * logit for logit in logits]


def _causal_keywords(is_causal, attn_mask, q, scale, sliding_window_size, **positions) -> dict:
    """The position keywords :func:`ttnn_flashdecode.attention` takes for ttnn's ``is_causal`` /
    ``attn_mask``: causal, the positions as given (and no mask: ttnn refuses one); non-causal, no
    positions (ttnn reads none: every position of the cache is attended, ``cur_pos`` ignored, -1
    included) and ``attn_mask`` multiplied by ``scale`` -- ttnn adds the mask to the unscaled
    scores and scales both (``exp(scale * (QK + mask - m))``; tt-metal #40470), so a finite mask
    acts ``scale`` times weaker than in torch's SDPA; ``-inf`` / ``finfo.min`` entries are unchanged
    in effect. A device mask is scaled on device (``ttnn.multiply``).

    Raises:
        TypeError: ``is_causal`` not a bool (the causal modifier's check).
        ValueError: a mask with ``is_causal=True``, or a window with ``is_causal=False``.
    """
    if causal.MODIFIER.validate(is_causal):
        if attn_mask is not None:
            raise ValueError("attn_mask: expected None with is_causal=True (ttnn: \"Must not have attn_mask tensor for "
                             "non-causal attention\" -- a mask is for is_causal=False), got a mask")
        return positions
    if _window(sliding_window_size) is not None:
        raise ValueError(f"sliding_window_size: expected None with is_causal=False (every position is attended), got "
                         f"{sliding_window_size!r}")
    keywords = {"is_causal": False}
    if attn_mask is not None:
        factor = float(scale) if scale is not None else 1.0 / math.sqrt(int(q.shape[-1]))
        if isinstance(attn_mask, ttnn.Tensor) and attn_mask.storage_type() == ttnn.StorageType.DEVICE:
            keywords["attn_mask"] = ttnn.multiply(attn_mask, factor)
        else:
            from ttnn_flashdecode.op.modifiers.mask import mask_values

            keywords["attn_mask"] = mask_values(attn_mask) * np.float32(factor)
    return keywords


def scaled_dot_product_attention_decode(
    input_tensor_q,
    input_tensor_k,
    input_tensor_v,
    *,
    is_causal: bool = True,
    attn_mask=None,
    cur_pos=None,
    memory_config=None,
    cur_pos_tensor=None,
    scale: float | None = None,
    program_config=None,
    compute_kernel_config=None,
    sliding_window_size=None,
    share_cache=None,
    attention_sink=None,
    logit_softcap=None,
    attention_chunk_size=None,
    batch_invariant: bool = False,
    return_lse: bool = False,
    sparse_indices=None,
    append_k=None,
    append_v=None,
):
    """Flash-decode GQA attention with ``ttnn.transformer.scaled_dot_product_attention_decode``'s call.

    Args:
        input_tensor_q: ``[1, b, nh, dh]``: one decode row per user, its heads: a device
            ``ttnn.Tensor`` (TILE, DRAM interleaved or L1 height-sharded), a host ``ttnn.Tensor``
            or a numpy float32 / ``ml_dtypes.bfloat16`` array (the emulator). ttnn tensors may be
            bfloat16, bfloat8_b or bfloat4_b (read as their bfloat16 values; the output then
            comes back in Q's dtype, as ttnn's op returns it).
        input_tensor_k, input_tensor_v: KV cache ``[b, nkv, s, dh]`` (``[1, nkv, s, dh]`` with
            ``share_cache=True``), same kind; ttnn tensors may be bfloat16, bfloat8_b or bfloat4_b.
        cur_pos: one int per user (its position; -1: idle slot, zero output), or None.
        cur_pos_tensor: the same as an int32 ``[b]`` tensor (device, or numpy / host on the
            emulator), or None.
        scale: query scale; default ``1/sqrt(dh)``.
        program_config: ``ttnn.SDPAProgramConfig`` or None: the grid or core set, the K/V block,
            the cores per request and the exp mode (:func:`~ttnn_flashdecode.op.program_config.program_config_keywords`).
        compute_kernel_config: as :func:`ttnn_flashdecode.attention`.
        memory_config: the output's: DRAM interleaved (default) or L1 height-sharded (on a device,
            and on the emulator, which places the shards in its cores' L1).
        share_cache: True: K and V hold one cache (batch 1) that every user attends to, up to its
            own position (ttnn's meaning); False / None: one cache per user.
        sliding_window_size: ``W`` (positions, the row's own included) or ``None`` / 0 (no
            window), as ttnn: the row at ``p`` attends ``max(0, p + 1 - W) .. p``.
        attention_sink: ttnn's ``[nh, 32]`` sink tensor (column 0 per Q head; device, host or
            numpy), or None. As ttnn, the sink is multiplied by ``scale`` (its kernels treat it
            like an unscaled score; tt-metal #55337): pass gpt-oss's sinks divided by ``scale``,
            as tt-metal's own test does. :func:`ttnn_flashdecode.attention` takes the logit itself.
        is_causal, attn_mask: ``is_causal=False``: every position of the cache is attended (no
            positions needed; ttnn ignores them), with ``attn_mask`` (``[b, 1, nh, s]`` or ``[1, b,
            nh, s]``, b may be 1; bfloat16 on a card) added to the scores -- multiplied by
            ``scale`` first, as ttnn does (tt-metal #40470). See :func:`ttnn_flashdecode.attention`
            for values (-inf, NaN, fully masked rows).
        logit_softcap, attention_chunk_size: this op's extra keywords (ttnn's call has neither), as
            :func:`ttnn_flashdecode.attention` takes them: scores ``c * tanh(s / c)`` before every
            mask (``c`` a finite number > 0; the sink is not capped, and not scaled by it); each
            row attends only its own ``C``-position chunk (``C`` a positive multiple of 32). None
            (default): neither.
        batch_invariant: this op's extra keyword: ``True``, a user's output bits do not depend on
            its batch (:func:`ttnn_flashdecode.attention`); default False.
        return_lse: this op's extra keyword: ``True`` returns ``(out, lse)``, ``lse`` float32
            ``[1, b, nh]``, each row's natural-log softmax denominator (the sink included), as
            :func:`ttnn_flashdecode.attention` defines it; idle users ``-inf``. Default False.
        sparse_indices: this op's extra keyword: sparse decode, as :func:`ttnn_flashdecode.attention`.
        append_k, append_v: this op's extra keywords: the KV-cache append fused in, ttnn's
            ``update_cache`` of each user's new K / V row (``[1, b, nkv, dh]``, the update's input)
            at its ``cur_pos`` followed by this call, bit for bit (:func:`ttnn_flashdecode.attention`;
            docs/options.md "append_k, append_v, append_latent"). The caches are updated in place.
            None (default): no append.

    Returns:
        ``[1, b, nh, dh]``, the kind of ``input_tensor_q`` (a device tensor; numpy of its dtype;
        or a host ``ttnn.Tensor`` bfloat16 ROW_MAJOR, or TILE in Q's block-float dtype); with
        ``return_lse=True`` the pair ``(out, lse)``.

    Raises:
        ValueError, TypeError: as :func:`ttnn_flashdecode.attention` (``q_layout="heads"``), and
            Q not 4-D ``[1, b, nh, dh]``, a program config the device cannot run
            (:func:`~ttnn_flashdecode.op.program_config.program_config_keywords`), ``share_cache=True`` with K of batch != 1.
    """
    _check_tensor_kinds(input_tensor_q=input_tensor_q, input_tensor_k=input_tensor_k, input_tensor_v=input_tensor_v)
    positions = _causal_keywords(is_causal, attn_mask, input_tensor_q, scale, sliding_window_size,
                                 cur_pos=cur_pos, cur_pos_tensor=cur_pos_tensor)
    if is_causal and cur_pos is None and cur_pos_tensor is None:
        raise TypeError("cur_pos, cur_pos_tensor: the decode call needs the users' positions, as a list or an int32 [b] tensor")
    if share_cache is not None and not isinstance(share_cache, (bool, np.bool_)):
        raise TypeError(f"share_cache: expected None or a bool, got {type(share_cache).__name__} {share_cache!r}")
    if share_cache and (append_k is not None or append_v is not None):
        raise ValueError("append_k: not supported with share_cache=True (one cache every user reads)")
    shared = _shared_cache_table(input_tensor_q, input_tensor_k) if share_cache else None
    return _heads_attention(input_tensor_q, input_tensor_k, input_tensor_v, program_config=program_config,
                            **positions, scale=scale, page_table_tensor=shared,
                            compute_kernel_config=compute_kernel_config, memory_config=memory_config,
                            sliding_window_size=_window(sliding_window_size),
                            attention_sink=_ttnn_sink(attention_sink, input_tensor_q, scale),
                            logit_softcap=logit_softcap, attention_chunk_size=attention_chunk_size,
                            batch_invariant=batch_invariant, sparse_indices=sparse_indices,
                            append_k=append_k, append_v=append_v,
                            return_lse=return_lse)


_shared_tables: dict = {}


def _shared_cache_table(q, k):
    """``share_cache=True``: every user attends to the one cache ``k`` / ``v`` ``[1, nkv, s, dh]``
    holds (ttnn: K and V of batch 1, read by all ``b`` users). That cache is, byte for byte, a paged
    cache of one block of ``s`` positions, so the call runs paged with the page table ``[[0]] * b``
    (int32 ``[b, 1]``; on a device uploaded once per (device, b) and kept, so a traced decode loop
    uploads nothing).

    Raises:
        ValueError: ``k``'s batch is not 1, or its capacity is not a multiple of 32 positions.
    """
    if len(q.shape) != 4 or len(k.shape) != 4:
        return None  # the shape checks that follow name the problem
    if int(k.shape[0]) != 1:
        raise ValueError(f"input_tensor_k: expected batch 1 with share_cache=True (every user reads that one cache), "
                         f"got {list(k.shape)}")
    if int(k.shape[2]) % 32:
        raise ValueError(f"input_tensor_k: expected a capacity (dim 2) that is a multiple of 32 positions with "
                         f"share_cache=True, got {int(k.shape[2])}")
    batch = int(q.shape[1])
    table = np.zeros((batch, 1), np.int32)
    if not (isinstance(q, ttnn.Tensor) and q.storage_type() == ttnn.StorageType.DEVICE):
        return table
    device = q.device()
    key = (device.id(), batch)
    if key not in _shared_tables:
        _shared_tables[key] = ttnn.Tensor(table, ttnn.int32, device=device, layout=ttnn.ROW_MAJOR_LAYOUT,
                                          mem_config=ttnn.DRAM_MEMORY_CONFIG)
    return _shared_tables[key]


def paged_scaled_dot_product_attention_decode(
    input_tensor_q,
    input_tensor_k,
    input_tensor_v,
    page_table_tensor,
    *,
    is_causal: bool = True,
    attn_mask=None,
    cur_pos_tensor=None,
    attention_sink=None,
    scale: float | None = None,
    sliding_window_size=None,
    memory_config=None,
    program_config=None,
    compute_kernel_config=None,
    paged_cache_geometry=None,
    cache_position_modulo=None,
    spec_multi_pos_tiles: int = 0,
    logit_softcap=None,
    attention_chunk_size=None,
    batch_invariant: bool = False,
    return_lse: bool = False,
    sparse_indices=None,
    append_k=None,
    append_v=None,
):
    """Flash-decode GQA attention on a paged KV cache, with
    ``ttnn.transformer.paged_scaled_dot_product_attention_decode``'s call.

    Args:
        input_tensor_q: ``[1, b, nh, dh]``, as :func:`scaled_dot_product_attention_decode`.
        input_tensor_k, input_tensor_v: paged KV cache ``[blocks, nkv, block_size, dh]``
            (``block_size`` 16 -- bfloat16 only -- or a multiple of 32), bfloat16, bfloat8_b or
            bfloat4_b.
        page_table_tensor: int32 ``[b, blocks_per_user]``: user ``u``'s positions ``i * block_size
            ..`` live in block ``page_table_tensor[u][i]`` (ROW_MAJOR; a device tensor on a card).
        cur_pos_tensor: int32 ``[b]`` positions (-1: idle slot); required, as in ttnn.
        scale, program_config, compute_kernel_config, memory_config: as
            :func:`scaled_dot_product_attention_decode`.
        is_causal, attn_mask, attention_sink, sliding_window_size: as
            :func:`scaled_dot_product_attention_decode`.
        cache_position_modulo: ``M``: a circular cache, as ttnn's: logical position ``L`` lives in
            slot ``L % M`` of the user's page-table row, the window defaults to ``M`` (see
            :func:`ttnn_flashdecode.attention`).
        spec_multi_pos_tiles: ``Tg`` > 0: ttnn's speculative verify, ``Tg`` candidates per group
            with independent causal bounds: Q ``[1, B, Tg * 32, dh]`` (candidate ``j``'s heads on
            the rows of row tile ``j``), ``cur_pos_tensor`` ``[B * Tg]``, the page table ``B`` rows,
            one KV head; the output has Q's shape. A group's candidates read its cache once, as
            ttnn's scan, each keeping its own bound (with a sliding window, which ttnn refuses,
            each candidate reads its own window).
        paged_cache_geometry: a ``ttnn.PagedCacheGeometryOverride(block_size=, num_kv_heads=)``:
            K and V viewed with that block size and KV-head count (same elements per block; both
            multiples of 32 positions), as ttnn's; both 0 or None: the tensors' own.
        logit_softcap, attention_chunk_size, batch_invariant: this op's extra keywords, as
            :func:`scaled_dot_product_attention_decode` (the page table's entries before a row's
            chunk are never read).

        return_lse: this op's extra keyword, as :func:`scaled_dot_product_attention_decode`'s:
            ``(out, lse)``, ``lse`` float32 ``[1, b, nh]`` (with ``spec_multi_pos_tiles``, Q's
            ``[1, b, Tg * 32]`` rows: one value per candidate row).
        sparse_indices: as :func:`scaled_dot_product_attention_decode` (each index through the page table).
        append_k, append_v: as :func:`scaled_dot_product_attention_decode`'s: ttnn's
            ``paged_update_cache`` then this call; refused with ``spec_multi_pos_tiles`` and a
            ``paged_cache_geometry`` view.

    Returns:
        ``[1, b, nh, dh]``, the kind of ``input_tensor_q``; with ``return_lse=True`` ``(out, lse)``.

    Raises:
        TypeError: no ``cur_pos_tensor``, a ``paged_cache_geometry`` of another type.
        ValueError: as :func:`ttnn_flashdecode.attention` with ``page_table_tensor``; a
            ``paged_cache_geometry`` or ``spec_multi_pos_tiles`` that does not fit the tensors.
    """
    if page_table_tensor is None:
        raise TypeError("page_table_tensor: the paged decode call needs the page table (int32 [b, blocks_per_user]), got None")
    _check_tensor_kinds(input_tensor_q=input_tensor_q, input_tensor_k=input_tensor_k, input_tensor_v=input_tensor_v,
                        page_table_tensor=page_table_tensor)
    viewed = _cache_view(input_tensor_k, paged_cache_geometry, "input_tensor_k")
    if viewed is not input_tensor_k and (append_k is not None or append_v is not None):
        raise ValueError("append_k: not supported with a paged_cache_geometry view (the update goes to the caller's "
                         "cache, not the view)")
    input_tensor_k = viewed
    input_tensor_v = _cache_view(input_tensor_v, paged_cache_geometry, "input_tensor_v")
    positions = _causal_keywords(is_causal, attn_mask, input_tensor_q, scale, sliding_window_size,
                                 cur_pos_tensor=cur_pos_tensor)
    if is_causal and cur_pos_tensor is None:
        raise TypeError("cur_pos_tensor: the paged decode call takes its positions as a tensor (int32 [b]), got None")
    candidates = _spec_candidates(spec_multi_pos_tiles, input_tensor_q, input_tensor_k, page_table_tensor, is_causal)
    q = input_tensor_q
    if candidates:  # one user per candidate, ttnn's [1, B * Tg, 32, dh]: the same tiles
        groups, head_dim = int(q.shape[1]), int(q.shape[3])
        q = _reshape(q, (1, groups * candidates, 32, head_dim))
    out = _heads_attention(q, input_tensor_k, input_tensor_v, program_config=program_config,
                           **positions, page_table_tensor=page_table_tensor, scale=scale,
                           compute_kernel_config=compute_kernel_config, memory_config=memory_config,
                           sliding_window_size=_window(sliding_window_size),
                           attention_sink=_ttnn_sink(attention_sink, q, scale),
                           cache_position_modulo=cache_position_modulo, users_per_table_row=max(candidates, 1),
                           logit_softcap=logit_softcap, attention_chunk_size=attention_chunk_size,
                           batch_invariant=batch_invariant, sparse_indices=sparse_indices,
                           append_k=append_k, append_v=append_v,
                           return_lse=return_lse)
    if not candidates:
        return out
    shape = tuple(int(d) for d in input_tensor_q.shape)
    if isinstance(out, tuple):  # (out, lse): the LSE's [1, B * Tg, 32] back to Q's [1, B, Tg * 32]
        return _reshape(out[0], shape), _reshape(out[1], shape[:3])
    return _reshape(out, shape)


def _check_tensor_kinds(**tensors) -> None:
    """Each named argument is a ttnn.Tensor or a numpy array (its shape is read next).

    Raises:
        TypeError: naming the first that is not.
    """
    for name, tensor in tensors.items():
        if not isinstance(tensor, (ttnn.Tensor, np.ndarray)):
            raise TypeError(f"{name}: expected a ttnn.Tensor or a numpy array, got {type(tensor).__name__}")


def _heads_attention(q, k, v, *, program_config, compute_kernel_config, **keywords):
    """:func:`ttnn_flashdecode.attention` on Q ``[1, b, nh, dh]`` (``q_layout="heads"``)."""
    _check_tensor_kinds(input_tensor_q=q, input_tensor_k=k, input_tensor_v=v)
    config = program_config_keywords(program_config, q, compute_kernel_config)
    if len(q.shape) != 4 or q.shape[0] != 1 or (len(k.shape) == 4 and q.shape[3] != k.shape[3]):
        raise ValueError(f"input_tensor_q: expected shape [1, b, nh, dh] (dh = the cache's head_dim "
                         f"{k.shape[-1]}), got {list(q.shape)}")
    if config.get("block_tiles"):
        config["block_tiles"] = _whole_double_blocks(config["block_tiles"], k, keywords.get("page_table_tensor"))
    return attention(q, k, v, q_layout="heads", **config, **keywords)


def _whole_double_blocks(block_tiles: int, k, page_table) -> int | None:
    """``k_chunk_size``'s block, or the largest below it whose double block tiles the cache.

    ttnn takes any chunk that divides the cache; this op's reader double-buffers K and V, so the
    cache must be whole double blocks (``plan.check_windows``): ttnn's own chunk for a 4224-position
    cache (128 = 4 tiles, 132 tiles) becomes 3 tiles here. None (the op's choice) when no block does.
    """
    if len(k.shape) != 4:
        return block_tiles
    capacity = int(k.shape[2]) * (int(page_table.shape[1]) if page_table is not None and len(page_table.shape) == 2 else 1)
    tiles = -(-capacity // 32)
    return next((b for b in range(block_tiles, 0, -1) if tiles % (2 * b) == 0), None)
