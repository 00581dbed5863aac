"""The int32 operands of a call the host checks: the positions (``cur_pos`` / ``cur_pos_tensor``,
``chunk_start``) and the page table, as lists or as tensors the kernels read at run time (ttnn's
``cur_pos_tensor`` and ``page_table_tensor``). Refusals read "name: expected ..., got ..."."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import ttnn

from ttnn_flashdecode.op.modifiers.base import is_int
from ttnn_flashdecode.op.shape import WRAPPED_POSITIONS

__all__ = ["IDLE", "positions_of", "chunk_starts", "page_table_values"]

IDLE = -1
"""A position that marks an idle batch slot (as in ttnn's ``cur_pos_tensor``): no K/V read, zero output rows."""


def _int32_operand(name: str, tensor, kind: str, shape_ok, shape_text: str) -> np.ndarray | None:
    """An int32 operand the kernels read at run time (``cur_pos_tensor``, ``page_table_tensor``):
    its values when the host can see them (numpy array, host ttnn.Tensor), None for a device
    tensor, whose dtype, layout, memory and shape are checked instead.

    Raises:
        TypeError: not a numpy array or ttnn.Tensor, or not int32.
        ValueError: a shape ``shape_ok`` refuses (``shape_text`` says what it wants), not ROW_MAJOR
            DRAM interleaved, or a device tensor with host inputs (or a host one with device inputs).
    """
    if isinstance(tensor, np.ndarray):
        if kind == "device":
            raise ValueError(f"{name}: expected a device tensor with device q, k, v, got a numpy array")
        if tensor.dtype != np.int32:
            raise TypeError(f"{name}: expected an int32 array (as ttnn's {name}), got dtype {tensor.dtype}")
        shape, values = tuple(tensor.shape), tensor
    elif isinstance(tensor, ttnn.Tensor):
        if tensor.dtype != ttnn.int32:
            raise TypeError(f"{name}: expected dtype int32 (as ttnn's {name}), got {tensor.dtype}")
        on_device = tensor.storage_type() == ttnn.StorageType.DEVICE
        if on_device != (kind == "device"):
            raise ValueError(f"{name}: expected a {'device' if kind == 'device' else 'host'} tensor like q, "
                             f"got a {'device' if on_device else 'host'} tensor")
        if tensor.layout != ttnn.ROW_MAJOR_LAYOUT:
            raise ValueError(f"{name}: expected ROW_MAJOR layout, got {tensor.layout}")
        shape = tuple(int(d) for d in tensor.shape)
        if on_device:
            config = tensor.memory_config()
            if config.buffer_type != ttnn.BufferType.DRAM or config.is_sharded():
                raise ValueError(f"{name}: expected a DRAM-interleaved tensor, got {config}")
            values = None
        else:
            values = np.asarray(tensor.to_numpy()).astype(np.int32).reshape(shape)
    else:
        raise TypeError(f"{name}: expected a ttnn.Tensor or a numpy int32 array, got {type(tensor).__name__}")
    if not shape_ok(shape):
        raise ValueError(f"{name}: expected shape {shape_text}, got {list(shape)}")
    return values


def page_table_values(tensor, kind: str) -> tuple[int, int, np.ndarray | None]:
    """``(batch, entries, values)`` of ``page_table_tensor`` (int32 ``[batch, entries]``, one
    page per user); ``values`` None for a device tensor. Raises as :func:`_int32_operand`."""
    values = _int32_operand("page_table_tensor", tensor, kind, lambda shape: len(shape) == 2 and min(shape) >= 1,
                            "[batch, blocks_per_user]")
    batch, entries = (int(d) for d in tensor.shape)
    return batch, entries, None if values is None else np.ascontiguousarray(values, dtype=np.int32)


def _per_user_ints(name: str, value, batch: int, high: int, *, noun: str, rule: str, broadcast: bool,
                   idle: bool = False) -> tuple[int, ...]:
    """``value`` as one int per user, each in ``0..high`` (or :data:`IDLE` when ``idle``);
    ``broadcast``: a single int serves all.

    Raises:
        TypeError: not a sequence (or int, with ``broadcast``) of ints.
        ValueError: wrong length (``noun`` names the items) or a value outside ``0..high`` (``rule``
            states the bound).
    """
    what = "an int or one int per sequence" if broadcast else "one position per user (a sequence of ints)"
    if is_int(value):
        if not broadcast:
            raise TypeError(f"{name}: expected {what}, got a single int")
        value = (value,) * batch
    elif isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise TypeError(f"{name}: expected {what}, got {type(value).__name__}")
    values = tuple(value)
    if len(values) != batch:
        raise ValueError(f"{name}: expected {batch} {noun}, got {len(values)}")
    for user, item in enumerate(values):
        if not is_int(item):
            raise TypeError(f"{name}[{user}]: expected an int, got {type(item).__name__}")
        if not (0 <= item <= high or (idle and item == IDLE)):
            raise ValueError(f"{name}[{user}]: expected {rule}, got {item}")
    return tuple(int(item) for item in values)


def positions_of(cur_pos, cur_pos_tensor, batch: int, capacity: int, kind: str) -> tuple[int, ...] | None:
    """The host-visible positions (validated), or None for a device ``cur_pos_tensor``."""
    name = "cur_pos"
    if cur_pos_tensor is not None:
        name = "cur_pos_tensor"
        cur_pos = _positions_tensor_values(cur_pos_tensor, batch, kind)
        if cur_pos is None:
            return None
    limit = ("2**29 (a circular cache's logical positions)" if capacity == WRAPPED_POSITIONS
             else f"capacity {capacity}")
    return _per_user_ints(name, cur_pos, batch, capacity - 1, noun="positions (one per user)",
                          rule=f"0 <= position < {limit}, or {IDLE} for an idle slot", broadcast=False,
                          idle=True)


def _positions_tensor_values(tensor, batch: int, kind: str) -> list[int] | None:
    """``cur_pos_tensor``'s values when the host can see them (int32 ``[batch]``), None for a
    device tensor. Raises as :func:`_int32_operand`."""
    values = _int32_operand("cur_pos_tensor", tensor, kind, lambda shape: shape in ((batch,), (batch, 1)),
                            f"[{batch}] or [{batch}, 1] (one position per user)")
    return None if values is None else [int(value) for value in np.asarray(values).reshape(-1)]


def chunk_starts(chunk_start, batch: int, length: int, capacity: int) -> tuple[int, ...]:
    return _per_user_ints("chunk_start", chunk_start, batch, capacity - length, noun="starts (one per sequence)",
                          rule=f"0 <= start <= capacity - C = {capacity - length} (C = {length} rows)", broadcast=True)
