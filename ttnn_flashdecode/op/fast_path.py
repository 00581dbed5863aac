"""The program-cache-hit fast path of a device call (issue 19, the host path).

A decode loop calls the op with tensors whose specs never change (only their contents and, for Q
and the output, their addresses): the first call validates everything and prepares a
:class:`~ttnn_flashdecode.op.launch.DeviceLaunch`; later calls whose tensor specs and options
match skip validation and planning and only launch. Only calls whose every input the host never
reads are eligible: device Q/K/V, positions as a device ``cur_pos_tensor``, a device page table
(a ``cur_pos`` list or a chunk's starts are values the host validates on every call).

The key holds each tensor's shape, dtype, layout and memory config (not its identity or address: a
new Q tensor of the same kind hits). Measured on this project's machines: those four attributes
cost ~1 us a tensor with the shape as its text (0.7 us; ``tuple(shape)`` costs 2-4 us). ttnn 0.81's
``Shape`` and ``TensorSpec`` hashes are not value hashes (two equal shapes hash differently, two
different ones may collide), so neither object may sit in a dict key; a ``TensorSpec`` equality
test costs ~6 us.
"""

from __future__ import annotations

import threading

import ttnn

from ttnn_flashdecode.op.shape import ComputeOptions

__all__ = ["call_key", "lookup", "remember", "clear"]

MAX_ENTRIES = 256
"""Keys kept; past that the oldest is dropped (a model has a handful per layer type)."""

_entries: dict = {}
_lock = threading.Lock()


def _device_spec(tensor):
    """``(shape text, dtype, layout, memory config)`` of a device ttnn.Tensor, else None (not eligible)."""
    if type(tensor) is not ttnn.Tensor or tensor.storage_type() != ttnn.StorageType.DEVICE:
        return None
    # Enum values, not the enums: a ttnn enum's hash runs in Python (~1 us), its value is an int.
    return str(tensor.shape), tensor.dtype.value, tensor.layout.value, tensor.memory_config()


def call_key(q, k, v, *, cur_pos, cur_pos_tensor, page_table_tensor, chunk_start, rows, scale, block_tiles, q_layout,
             compute_kernel_config, memory_config, split, backend, grid=None, max_split=None, sliding_window_size=None,
             attention_sink=None, is_causal=True, attn_mask=None, cache_position_modulo=None,
             users_per_table_row=1, batch_invariant=False, logit_softcap=None, attention_chunk_size=None,
             return_lse=False):
    """The fast-path key of an :func:`~ttnn_flashdecode.attention` call, or None when the call is not
    eligible (see the module docstring). Never raises: anything unexpected makes the call take the
    validated path, which raises what it must."""
    if cur_pos is not None or chunk_start is not None or backend == "emulator":
        return None
    if attention_sink is not None or attn_mask is not None or is_causal is not True:  # values: validated each call
        return None
    if not isinstance(return_lse, bool):  # validated (and refused) the long way
        return None
    if grid is not None and not isinstance(grid, tuple):  # a CoreRangeSet: no value hash to key on
        return None
    try:
        specs = (_device_spec(q), _device_spec(k), _device_spec(v), _device_spec(cur_pos_tensor))
        if None in specs or q.dtype != ttnn.bfloat16:  # a block-float Q is typecast first: the validated path
            return None
        if len(cur_pos_tensor.shape) != 1:  # [b, 1] positions are reshaped first: the validated path
            return None
        table = None if page_table_tensor is None else _device_spec(page_table_tensor)
        if page_table_tensor is not None and table is None:
            return None
        compute = ComputeOptions.from_config(compute_kernel_config)
        # The device object's id: the entry holds the device (its operands do), so the id is never
        # reused, and a device closed and opened again is a new object with a new key.
        return (id(q.device()), specs, table, rows, scale, block_tiles, q_layout, compute, memory_config, split, backend,
                grid, max_split, sliding_window_size, cache_position_modulo,
                users_per_table_row, batch_invariant, logit_softcap, attention_chunk_size, return_lse is True)
    except (TypeError, AttributeError, RuntimeError, ValueError):  # unhashable or odd inputs: validate them the long way
        return None


def lookup(key):
    """The launch remembered for ``key`` (None: a miss)."""
    return _entries.get(key)


def remember(key, launch) -> None:
    """Keep ``launch`` for ``key`` (the validated call that prepared it)."""
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            _entries.pop(next(iter(_entries)))
        _entries[key] = launch


def clear() -> None:
    """Forget every launch (e.g. after closing a device)."""
    with _lock:
        _entries.clear()
