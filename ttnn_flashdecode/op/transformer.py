"""Drop-ins for ttnn's decode attention calls: ``scaled_dot_product_attention_decode`` and
``paged_scaled_dot_product_attention_decode``.

Same signatures and semantics as ``ttnn.transformer``'s (ttnn 0.81) for what this op supports, so
a tt-transformers-style model swaps the call and nothing else: Q ``[1, b, nh, dh]`` (the heads
``nlp_create_qkv_heads_decode`` gives: DRAM interleaved or L1 height-sharded on a device, head
rows padded to the tile), K / V ``[b, nkv, s, dh]`` or paged ``[blocks, nkv, block_size, dh]``
with ``page_table_tensor``, in bfloat16, bfloat8_b or bfloat4_b; ``cur_pos`` or
``cur_pos_tensor`` (-1: idle slot), ``scale``, ``program_config`` (``k_chunk_size`` becomes the
K/V block), ``compute_kernel_config``, ``memory_config``; the output is ``[1, b, nh, dh]``. The
kernels read Q and write the output in that layout directly (the HEAD_ROWS request flag): no
reshape on the way. ``sliding_window_size``, ``attention_sink`` and ``is_causal=False`` with
``attn_mask`` are taken as ttnn takes them, ttnn's scaling of the sink and the mask included (both
multiplied by ``scale``: tt-metal #55337 / #40470; :func:`ttnn_flashdecode.attention` takes them
in score units). What is not supported is refused by name (``NotImplementedError``), never
ignored: ``share_cache=True``, program-config fields other than the grid and ``k_chunk_size``, and the
paged call's ``paged_cache_geometry``, ``cache_position_modulo``, ``spec_multi_pos_tiles``.
"""

from __future__ import annotations

import math

import numpy as np
import ttnn

from ttnn_flashdecode.op.operation import DEFAULT_ARCH, attention

__all__ = ["scaled_dot_product_attention_decode", "paged_scaled_dot_product_attention_decode"]

_PROGRAM_CONFIG_DEFAULTS = {"sub_core_grids": None, "exp_approx_mode": None, "max_cores_per_head_batch": 16,
                            "max_k_splits": 1, "matmul_math_fidelity": None, "segmented_accumulation": False}


def _refuse_unsupported(*, share_cache=None, paged_cache_geometry=None, cache_position_modulo=None,
                        spec_multi_pos_tiles=0) -> None:
    """Raises NotImplementedError naming the first keyword of ttnn's decode calls given a value the
    op does not support (their defaults are supported)."""
    if share_cache:
        raise NotImplementedError("share_cache: a KV cache shared across the batch is not supported")
    for name, value, default in (("paged_cache_geometry", paged_cache_geometry, None),
                                 ("cache_position_modulo", cache_position_modulo, None),
                                 ("spec_multi_pos_tiles", spec_multi_pos_tiles, 0)):
        if value != default:
            raise NotImplementedError(f"{name}: not supported (the page table maps every position), got {value!r}")


def _window(sliding_window_size) -> int | None:
    """ttnn's ``sliding_window_size`` as :func:`ttnn_flashdecode.attention` takes it: ttnn treats
    ``None`` and 0 alike (no window; its kernels test ``> 0``); a positive W is the window (the row
    at ``p`` attends ``max(0, p + 1 - W) .. p``, as ttnn's ``get_workload_for_core``)."""
    return None if sliding_window_size is None or sliding_window_size == 0 else sliding_window_size


def _ttnn_sink(attention_sink, q, scale):
    """ttnn's ``attention_sink`` (``[nh, 32]``, TILE, column 0 per Q head) as the logits
    :func:`ttnn_flashdecode.attention` takes: ttnn's kernels fold the sink in as ``exp(scale * (sink
    - m))`` with ``m`` the unscaled running max, i.e. the sink is multiplied by ``scale`` like the
    scores (tt-metal's own sink test divides gpt-oss's sinks by ``scale`` before the call to undo
    it: #55337). The drop-in matches ttnn: logit = ``scale * sink`` (rounded to bfloat16 once
    more; ttnn keeps the product in float32). ``attention()`` takes the logit itself."""
    if attention_sink is None:
        return None
    from ttnn_flashdecode.op.validate import sink_logits

    heads, head_dim = int(q.shape[2]), int(q.shape[3])
    factor = float(scale) if scale is not None else 1.0 / math.sqrt(head_dim)
    return [factor * logit for logit in sink_logits(attention_sink, heads)]


def _causal_keywords(is_causal, attn_mask, q, scale, sliding_window_size, **positions) -> dict:
    """The position keywords :func:`ttnn_flashdecode.attention` takes for ttnn's ``is_causal`` /
    ``attn_mask``: causal, the positions as given (and no mask: ttnn refuses one); non-causal, no
    positions (ttnn reads none: every position of the cache is attended, ``cur_pos`` ignored, -1
    included) and ``attn_mask`` multiplied by ``scale`` -- ttnn adds the mask to the unscaled
    scores and scales both (``exp(scale * (QK + mask - m))``; tt-metal #40470), so a finite mask
    acts ``scale`` times weaker than in torch's SDPA; ``-inf`` / ``finfo.min`` entries are unchanged
    in effect. A device mask is scaled on device (``ttnn.multiply``).

    Raises:
        ValueError: a mask with ``is_causal=True``, or a window with ``is_causal=False``.
    """
    if is_causal:
        if attn_mask is not None:
            raise ValueError("attn_mask: expected None with is_causal=True (ttnn: \"Must not have attn_mask tensor for "
                             "non-causal attention\" -- a mask is for is_causal=False)")
        return positions
    if _window(sliding_window_size) is not None:
        raise ValueError("sliding_window_size: expected None with is_causal=False (every position is attended)")
    keywords = {"is_causal": False}
    if attn_mask is not None:
        factor = float(scale) if scale is not None else 1.0 / math.sqrt(int(q.shape[-1]))
        if isinstance(attn_mask, ttnn.Tensor) and attn_mask.storage_type() == ttnn.StorageType.DEVICE:
            keywords["attn_mask"] = ttnn.multiply(attn_mask, factor)
        else:
            from ttnn_flashdecode.op.validate import _mask_values

            keywords["attn_mask"] = _mask_values(attn_mask) * np.float32(factor)
    return keywords


def _block_tiles(program_config, q) -> int | None:
    """``program_config.k_chunk_size`` as the op's K/V block (position tiles); None without a config.

    Raises:
        ValueError: ``k_chunk_size`` not a positive multiple of 32.
        NotImplementedError: a grid other than the whole grid the op runs on (``q``'s device's,
            else the emulated device's), or any other field set.
    """
    if program_config is None:
        return None
    if not isinstance(program_config, ttnn.SDPAProgramConfig):
        raise TypeError(f"program_config: expected a ttnn.SDPAProgramConfig or None, got {type(program_config).__name__}")
    grid = program_config.compute_with_storage_grid_size
    if isinstance(q, ttnn.Tensor) and q.storage_type() == ttnn.StorageType.DEVICE:
        full = q.device().compute_with_storage_grid_size()
        want = (full.x, full.y)
    else:
        from ttnn_flashdecode.emulator.arch import ArchSpec

        want = tuple(ArchSpec.for_name(DEFAULT_ARCH).default_grid)
    if (grid.x, grid.y) != tuple(want):
        raise NotImplementedError(f"program_config.compute_with_storage_grid_size: the op runs on the whole "
                                  f"{want[0]}x{want[1]} grid, got {grid.x}x{grid.y}")
    for name, default in _PROGRAM_CONFIG_DEFAULTS.items():
        if getattr(program_config, name) != default:
            raise NotImplementedError(f"program_config.{name}: not supported (only the grid and k_chunk_size are "
                                      f"used), got {getattr(program_config, name)!r}")
    chunk = program_config.k_chunk_size
    if chunk <= 0 or chunk % 32:
        raise ValueError(f"program_config.k_chunk_size: expected a positive multiple of 32 positions, got {chunk}")
    return chunk // 32


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
):
    """Flash-decode GQA attention with ``ttnn.transformer.scaled_dot_product_attention_decode``'s call.

    Args:
        input_tensor_q: ``[1, b, nh, dh]``: one decode row per user, its heads: a device
            ``ttnn.Tensor`` (bfloat16 TILE, DRAM interleaved or L1 height-sharded), a host
            ``ttnn.Tensor`` or a numpy float32 / ``ml_dtypes.bfloat16`` array (the emulator).
        input_tensor_k, input_tensor_v: KV cache ``[b, nkv, s, dh]``, same kind; ttnn tensors
            may be bfloat16, bfloat8_b or bfloat4_b.
        cur_pos: one int per user (its position; -1: idle slot, zero output), or None.
        cur_pos_tensor: the same as an int32 ``[b]`` tensor (device, or numpy / host on the
            emulator), or None.
        scale: query scale; default ``1/sqrt(dh)``.
        program_config: ``ttnn.SDPAProgramConfig``; its ``k_chunk_size`` (positions, a multiple
            of 32) is the K/V block; its grid must be the device's whole grid.
        compute_kernel_config: as :func:`ttnn_flashdecode.attention`.
        memory_config: the output's: DRAM interleaved (default) or, on a device, L1 height-sharded.
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
        share_cache: only the default is supported.

    Returns:
        ``[1, b, nh, dh]``, the kind of ``input_tensor_q`` (a device tensor; numpy of its dtype;
        or a host ``ttnn.Tensor`` bfloat16 ROW_MAJOR).

    Raises:
        NotImplementedError: an unsupported keyword or value (named).
        ValueError, TypeError: as :func:`ttnn_flashdecode.attention` (``q_layout="heads"``), and
            Q not 4-D ``[1, b, nh, dh]``.
    """
    _refuse_unsupported(share_cache=share_cache)
    positions = _causal_keywords(is_causal, attn_mask, input_tensor_q, scale, sliding_window_size,
                                 cur_pos=cur_pos, cur_pos_tensor=cur_pos_tensor)
    if is_causal and cur_pos is None and cur_pos_tensor is None:
        raise TypeError("cur_pos, cur_pos_tensor: the decode call needs the users' positions, as a list or an int32 [b] tensor")
    return _heads_attention(input_tensor_q, input_tensor_k, input_tensor_v, program_config=program_config,
                            **positions, scale=scale,
                            compute_kernel_config=compute_kernel_config, memory_config=memory_config,
                            sliding_window_size=_window(sliding_window_size),
                            attention_sink=_ttnn_sink(attention_sink, input_tensor_q, scale))


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
):
    """Flash-decode GQA attention on a paged KV cache, with
    ``ttnn.transformer.paged_scaled_dot_product_attention_decode``'s call.

    Args:
        input_tensor_q: ``[1, b, nh, dh]``, as :func:`scaled_dot_product_attention_decode`.
        input_tensor_k, input_tensor_v: paged KV cache ``[blocks, nkv, block_size, dh]``
            (``block_size`` a multiple of 32), bfloat16, bfloat8_b or bfloat4_b.
        page_table_tensor: int32 ``[b, blocks_per_user]``: user ``u``'s positions ``i * block_size
            ..`` live in block ``page_table_tensor[u][i]`` (ROW_MAJOR; a device tensor on a card).
        cur_pos_tensor: int32 ``[b]`` positions (-1: idle slot); required, as in ttnn.
        scale, program_config, compute_kernel_config, memory_config, sliding_window_size,
            attention_sink: as :func:`scaled_dot_product_attention_decode` (the sink multiplied by
            ``scale``, as ttnn).
        is_causal, attn_mask: as :func:`scaled_dot_product_attention_decode` (non-causal: no
            ``cur_pos_tensor`` needed).
        paged_cache_geometry, cache_position_modulo, spec_multi_pos_tiles: only the defaults are
            supported.

    Returns:
        ``[1, b, nh, dh]``, the kind of ``input_tensor_q``.

    Raises:
        NotImplementedError: an unsupported keyword or value (named).
        TypeError: no ``cur_pos_tensor``.
        ValueError: as :func:`ttnn_flashdecode.attention` with ``page_table_tensor``.
    """
    _refuse_unsupported(paged_cache_geometry=paged_cache_geometry, cache_position_modulo=cache_position_modulo,
                        spec_multi_pos_tiles=spec_multi_pos_tiles)
    if page_table_tensor is None:
        raise TypeError("page_table_tensor: the paged decode call needs the page table (int32 [b, blocks_per_user]), got None")
    positions = _causal_keywords(is_causal, attn_mask, input_tensor_q, scale, sliding_window_size,
                                 cur_pos_tensor=cur_pos_tensor)
    if is_causal and cur_pos_tensor is None:
        raise TypeError("cur_pos_tensor: the paged decode call takes its positions as a tensor (int32 [b]), got None")
    return _heads_attention(input_tensor_q, input_tensor_k, input_tensor_v, program_config=program_config,
                            **positions, page_table_tensor=page_table_tensor, scale=scale,
                            compute_kernel_config=compute_kernel_config, memory_config=memory_config,
                            sliding_window_size=_window(sliding_window_size),
                            attention_sink=_ttnn_sink(attention_sink, input_tensor_q, scale))


def _heads_attention(q, k, v, *, program_config, **keywords):
    """:func:`ttnn_flashdecode.attention` on Q ``[1, b, nh, dh]`` (``q_layout="heads"``)."""
    if not isinstance(q, (ttnn.Tensor, np.ndarray)):
        raise TypeError(f"input_tensor_q: expected a ttnn.Tensor or a numpy array, got {type(q).__name__}")
    block_tiles = _block_tiles(program_config, q)
    if len(q.shape) != 4 or q.shape[0] != 1 or (len(k.shape) == 4 and q.shape[3] != k.shape[3]):
        raise ValueError(f"input_tensor_q: expected shape [1, b, nh, dh] (dh = the cache's head_dim "
                         f"{k.shape[-1]}), got {list(q.shape)}")
    return attention(q, k, v, q_layout="heads", block_tiles=block_tiles, **keywords)
