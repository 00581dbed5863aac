"""Drop-in for ttnn's decode attention call: ``ttnn_flashdecode.transformer.scaled_dot_product_attention_decode``.

Same signature and semantics as ``ttnn.transformer.scaled_dot_product_attention_decode`` (ttnn
0.81) for what this op supports, so a tt-transformers-style model swaps the call and nothing
else: Q ``[1, b, nh, dh]`` (the heads ``nlp_create_qkv_heads_decode`` gives), K / V ``[b, nkv, s,
dh]``, ``cur_pos`` or ``cur_pos_tensor`` (-1: idle slot), ``scale``, ``program_config``
(``k_chunk_size`` becomes the K/V block), ``compute_kernel_config``, ``memory_config``; the output
is ``[1, b, nh, dh]``. What it does not support is refused by name (``NotImplementedError``),
never ignored: ``attn_mask`` / ``is_causal=False``, ``sliding_window_size``, ``attention_sink``,
``share_cache=True``, program-config fields other than the grid and ``k_chunk_size``.

This first version takes host inputs (numpy arrays, host ``ttnn.Tensor``: the emulator); device
tensors are refused with the call to use instead (``ttnn_flashdecode.attention`` with Q as
``[1, 1, b, nh * dh]``) until the device path (height-sharded, head-padded Q) is built.
"""

from __future__ import annotations

import numpy as np
import ttnn

from ttnn_flashdecode.operation import DEFAULT_ARCH, attention, to_numpy

__all__ = ["scaled_dot_product_attention_decode"]

_PROGRAM_CONFIG_DEFAULTS = {"sub_core_grids": None, "exp_approx_mode": None, "max_cores_per_head_batch": 16,
                            "max_k_splits": 1, "matmul_math_fidelity": None, "segmented_accumulation": False}


def _refuse_unsupported(*, is_causal, attn_mask, sliding_window_size, share_cache, attention_sink) -> None:
    if attn_mask is not None:
        raise NotImplementedError("attn_mask: an explicit attention mask is not supported (causal decode only)")
    if is_causal is not True:
        raise NotImplementedError(f"is_causal: only causal decode (True) is supported, got {is_causal!r}")
    if sliding_window_size is not None:
        raise NotImplementedError(f"sliding_window_size: sliding-window attention is not supported, got {sliding_window_size!r}")
    if attention_sink is not None:
        raise NotImplementedError("attention_sink: attention sinks are not supported")
    if share_cache:
        raise NotImplementedError("share_cache: a KV cache shared across the batch is not supported")


def _block_tiles(program_config) -> int | None:
    """``program_config.k_chunk_size`` as the op's K/V block (position tiles); None without a config.

    Raises:
        ValueError: ``k_chunk_size`` not a positive multiple of 32.
        NotImplementedError: a grid other than the emulated device's, or any other field set.
    """
    if program_config is None:
        return None
    from ttnn_flashdecode.emulator.arch import ArchSpec

    grid = program_config.compute_with_storage_grid_size
    want = ArchSpec.for_name(DEFAULT_ARCH).default_grid
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
        input_tensor_q: ``[1, b, nh, dh]``: one decode row per user, its heads (numpy float32 /
            ``ml_dtypes.bfloat16`` or a host ``ttnn.Tensor``).
        input_tensor_k, input_tensor_v: KV cache ``[b, nkv, s, dh]``, same kind.
        cur_pos: one int per user (its position; -1: idle slot, zero output), or None.
        cur_pos_tensor: the same as an int32 ``[b]`` tensor (numpy or host ``ttnn.Tensor``), or None.
        scale: query scale; default ``1/sqrt(dh)``.
        program_config: ``ttnn.SDPAProgramConfig``; its ``k_chunk_size`` (positions, a multiple
            of 32) is the K/V block; its grid must be the device's whole grid.
        compute_kernel_config, memory_config: as :func:`ttnn_flashdecode.attention`.
        is_causal, attn_mask, sliding_window_size, share_cache, attention_sink: only the defaults
            (causal, none) are supported.

    Returns:
        ``[1, b, nh, dh]``, the kind of ``input_tensor_q`` (numpy of its dtype, or a host
        ``ttnn.Tensor`` bfloat16 ROW_MAJOR).

    Raises:
        NotImplementedError: an unsupported keyword or value (named), or device tensors.
        ValueError, TypeError: as :func:`ttnn_flashdecode.attention`, and Q not 4-D ``[1, b, nh, dh]``.
    """
    _refuse_unsupported(is_causal=is_causal, attn_mask=attn_mask, sliding_window_size=sliding_window_size,
                        share_cache=share_cache, attention_sink=attention_sink)
    block_tiles = _block_tiles(program_config)
    host_tensor = isinstance(input_tensor_q, ttnn.Tensor)
    for name, tensor in (("input_tensor_q", input_tensor_q), ("input_tensor_k", input_tensor_k),
                         ("input_tensor_v", input_tensor_v)):
        if isinstance(tensor, ttnn.Tensor) and tensor.storage_type() == ttnn.StorageType.DEVICE:
            raise NotImplementedError(f"{name}: device tensors are not supported by the drop-in yet; call "
                                      "ttnn_flashdecode.attention(q, k, v, cur_pos_tensor=...) with Q as [1, 1, b, nh * dh]")
    q = to_numpy(input_tensor_q) if host_tensor else input_tensor_q
    if not isinstance(q, np.ndarray):
        raise TypeError(f"input_tensor_q: expected a numpy array or a host ttnn.Tensor, got {type(q).__name__}")
    if q.ndim != 4 or q.shape[0] != 1:
        raise ValueError(f"input_tensor_q: expected shape [1, b, nh, dh], got {list(q.shape)}")
    _, batch, heads, head_dim = q.shape
    k, v = (to_numpy(t) if isinstance(t, ttnn.Tensor) else t for t in (input_tensor_k, input_tensor_v))
    out = attention(q.reshape(1, 1, batch, heads * head_dim), k, v, cur_pos=cur_pos, cur_pos_tensor=cur_pos_tensor,
                    scale=scale, block_tiles=block_tiles, compute_kernel_config=compute_kernel_config,
                    memory_config=memory_config, backend="emulator")
    out = np.asarray(out).reshape(1, batch, heads, head_dim)
    if host_tensor:
        return ttnn.Tensor(np.ascontiguousarray(out, dtype=np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT)
    return out
