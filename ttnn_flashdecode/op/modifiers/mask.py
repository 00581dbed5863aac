"""``attn_mask`` (with ``is_causal=False``): an additive mask ``[B_m, 1, n_q_heads, capacity]`` (or
``[1, B_m, ...]``, ``B_m`` 1 or the batch) added to the scaled scores, each entry clamped into
``[-1e30, 1e30]`` and NaN taken as -1e30. Kernel stage: the attention mask of
``apply_score_modifiers``, read once per K block, only the rows of the request's heads."""

from __future__ import annotations

import numpy as np
import ttnn

from ttnn_flashdecode.op.modifiers.base import ScoreModifier

__all__ = ["DEVICE_MASK_DTYPES", "device_mask", "mask_values", "mask_users", "MODIFIER"]

DEVICE_MASK_DTYPES = (ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b)
"""A device ``attn_mask``'s dtypes (ttnn's tests pass bfloat4_b masks); the kernels read bfloat16."""


def device_mask(attn_mask):
    """A device ``attn_mask`` as the kernels read it: bfloat16 TILE DRAM, a block-float one typecast
    on device (exact: every block-float value is a bfloat16 value)."""
    return attn_mask if attn_mask.dtype == ttnn.bfloat16 else ttnn.typecast(attn_mask, ttnn.bfloat16)


def mask_values(attn_mask) -> np.ndarray:
    """A host mask's values as float32 (NaN and inf kept: the kernels clamp them)."""
    if isinstance(attn_mask, ttnn.Tensor):
        if attn_mask.dtype == ttnn.float32:
            return np.asarray(attn_mask.to_numpy(), dtype=np.float32)
        return np.asarray(attn_mask.to_list(), dtype=np.float32)  # any layout and dtype, at its logical shape
    return np.asarray(attn_mask, dtype=np.float32)


def mask_users(attn_mask, batch: int, n_q_heads: int, capacity: int, kind: str) -> int:
    """Users of ``attn_mask`` (1: one mask for every user, else ``batch``), checking ttnn's
    shapes: ``[B_m, 1, n_q_heads, capacity]`` (what tt-metal's tests build) or ``[1, B_m,
    n_q_heads, capacity]`` (ttnn's docstring), ``B_m`` 1 or ``batch``; a device tensor bfloat16,
    TILE, DRAM interleaved, like Q's kind.

    Raises:
        TypeError: not a tensor or array.
        ValueError: another shape, dtype, layout or memory.
    """
    if isinstance(attn_mask, ttnn.Tensor):
        on_device = attn_mask.storage_type() == ttnn.StorageType.DEVICE
        if on_device != (kind == "device"):
            raise ValueError(f"attn_mask: expected a {'device' if kind == 'device' else 'host'} tensor like q, got a "
                             f"{'device' if on_device else 'host'} tensor")
        if on_device:
            if attn_mask.dtype not in DEVICE_MASK_DTYPES or attn_mask.layout != ttnn.TILE_LAYOUT:
                raise ValueError(f"attn_mask: expected a bfloat16, bfloat8_b or bfloat4_b TILE device tensor, got "
                                 f"{attn_mask.dtype} {attn_mask.layout}")
            config = attn_mask.memory_config()
            if config.buffer_type != ttnn.BufferType.DRAM or config.is_sharded():
                raise ValueError(f"attn_mask: expected a DRAM-interleaved tensor, got {config}")
    elif not isinstance(attn_mask, np.ndarray):
        raise TypeError(f"attn_mask: expected a ttnn.Tensor or a numpy array, got {type(attn_mask).__name__}")
    elif kind == "device":
        raise ValueError("attn_mask: expected a device tensor with device q, k, v, got a numpy array")
    shape = tuple(int(d) for d in attn_mask.shape)
    users = shape[0] * shape[1] if len(shape) == 4 and 1 in shape[:2] else 0
    if users not in (1, batch) or shape[2:] != (n_q_heads, capacity):
        raise ValueError(f"attn_mask: expected [B, 1, {n_q_heads}, {capacity}] or [1, B, {n_q_heads}, {capacity}] "
                         f"(B = 1 or the batch {batch}; n_q_heads, the cache's capacity), got {list(shape)}")
    return users



class AttentionMask(ScoreModifier):
    KEYWORD = "attn_mask"
    FIELD = "mask_users"

    def check_field(self, modifiers) -> None:
        if modifiers.mask_users and modifiers.causal:
            raise ValueError("mask_users: an attention mask needs causal=False (as ttnn's attn_mask)")

    def named_args(self, modifiers) -> list[tuple[str, int]]:
        return [("mask_users", modifiers.mask_users)]


MODIFIER = AttentionMask()
