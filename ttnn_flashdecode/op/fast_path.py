"""The program-cache-hit fast path of a device call (issue 19, the host path).

A decode loop calls the op with tensors whose specs never change (only their contents and, for Q
and the output, their addresses): the first call validates everything and prepares a
:class:`~ttnn_flashdecode.op.launch.DeviceLaunch`; later calls whose options and tensor specs
match skip validation and planning and only launch. Only calls whose every input the host never
reads are eligible: device Q/K/V, positions as a device ``cur_pos_tensor``, a device page table (a
``cur_pos`` list, a chunk's starts, a mask or sinks are values the host validates on every call).

Two steps, each priced for a per-layer call (measured on a mock Wormhole, this project's machines):

* the **options key**: every keyword of the call but the tensors, plus Q's device; hashable values
  only (a CoreRangeSet grid, a list: not eligible).
* the **tensor specs**: each tensor's ``ttnn.TensorSpec`` (shape, dtype, layout, memory config;
  ~0.6 us to read) compared with ``==`` (~0.4 us) against the specs of the call that was
  validated. ttnn 0.81's ``TensorSpec`` and ``Shape`` hashes are not value hashes (equal specs may
  hash differently), so specs are compared, never hashed; the address is not part of a spec, so a
  new Q of the same kind hits.
"""

from __future__ import annotations

import threading

import ttnn

from ttnn_flashdecode.op.shape import ComputeOptions

__all__ = ["options_key", "lookup", "remember", "clear"]

MAX_ENTRIES = 256
"""Option keys kept; past that the oldest is dropped (a model has a handful per layer type)."""
MAX_SPECS_PER_KEY = 8
"""Tensor-spec sets kept per options key (e.g. one per batch size a server serves)."""

_entries: dict = {}
_lock = threading.Lock()
_DEVICE = ttnn.StorageType.DEVICE
#: attention()'s tensor keywords: compared by spec, never part of the options key.
_TENSORS = frozenset(("q", "k", "v", "cur_pos_tensor", "page_table_tensor"))


def options_key(call: dict) -> tuple | None:
    """The options key of an :func:`~ttnn_flashdecode.attention` call, given as its keywords by name
    (``locals()`` at its entry: ``q``, ``k``, ``v`` and every keyword), or None when the call is not
    eligible (see the module docstring). Never raises: anything unexpected makes the call take the
    validated path, which raises what it must."""
    if call["cur_pos"] is not None or call["chunk_start"] is not None or call["backend"] == "emulator":
        return None
    if call["attention_sink"] is not None or call["attn_mask"] is not None or call["is_causal"] is not True:
        return None  # values the host validates on every call
    q = call["q"]
    if type(q) is not ttnn.Tensor or call["cur_pos_tensor"] is None or type(call["return_lse"]) is not bool:
        return None
    try:
        values = list(call.values())
        last_values, key, tensor_slots = _last
        for slot in tensor_slots:  # tensors compare by spec in lookup, never here (== on ttnn tensors is an op)
            values[slot] = None
        device = id(q.device())
        if device != key[0] or values != last_values:  # a decode loop repeats its options: one list comparison
            key = _remember_options(call, device)
        return key
    except (TypeError, AttributeError, RuntimeError, ValueError):  # unhashable or odd inputs: the long way
        return None


_last: tuple = ([], (None,), ())
"""(the last options' values with None for its tensors, their key, the tensor keywords' slots): a
decode loop's next call compares its values with these instead of building and hashing a key."""


def _remember_options(call: dict, device: int) -> tuple:
    """Build the options key of ``call`` on device ``device`` (an id) and keep it for the next call."""
    global _last
    tensor_slots = tuple(slot for slot, name in enumerate(call) if name in _TENSORS)
    values = [None if name in _TENSORS else value for name, value in call.items()]
    compute = ComputeOptions.from_config(call["compute_kernel_config"])
    options = tuple(compute if name == "compute_kernel_config" else value for name, value in zip(call, values))
    # The device object's id: an entry's launch holds the device (its operands do), so the id is
    # never reused, and a device closed and opened again is a new object with a new key.
    key = (device, options)
    hash(key)
    _last = values, key, tensor_slots
    return key


def _specs(q, k, v, positions, page_table) -> tuple | None:
    """The specs of a call's tensors (None for a missing page table) and whether V is K (a
    values-from-keys program reads no V), or None when one is not a device ttnn.Tensor."""
    specs = []
    for tensor in (q, k, v, positions, page_table):
        if tensor is None and page_table is None and len(specs) == 4:
            specs.append(None)
        elif type(tensor) is not ttnn.Tensor or tensor.storage_type() != _DEVICE:
            return None
        else:
            specs.append(tensor.spec)
    return (*specs, v is k)


def lookup(key, q, k, v, positions, page_table):
    """The launch remembered for options ``key`` and these tensors' specs (None: a miss)."""
    global _last_lookup
    last_key, remembered = _last_lookup
    if key is not last_key:  # options_key returns the same key object while the options repeat
        remembered = _entries.get(key)
        if remembered is None:
            return None
        _last_lookup = key, remembered
    specs = _specs(q, k, v, positions, page_table)
    if specs is None:
        return None
    for known, launch in remembered:
        if known == specs:
            return launch
    return None


def remember(key, q, k, v, positions, page_table, launch) -> None:
    """Keep ``launch`` for options ``key`` and these tensors' specs (the validated call that
    prepared it). A call the op rewrote before launching (a block-float Q typecast to bfloat16,
    ``[batch, 1]`` positions reshaped) is not kept: its tensors are not what the launch binds."""
    specs = _specs(q, k, v, positions, page_table)
    if specs is None or q.dtype != ttnn.bfloat16 or len(positions.shape) != 1:
        return
    with _lock:
        remembered = _entries.pop(key, [])
        if len(_entries) >= MAX_ENTRIES:
            _entries.pop(next(iter(_entries)))
        # In place: lookup's memo may hold this list.
        remembered[:] = [(specs, launch)] + [entry for entry in remembered if entry[0] != specs][:MAX_SPECS_PER_KEY - 1]
        _entries[key] = remembered


_last_lookup: tuple = (None, [])
"""(the options key lookup saw last, its remembered list): no dict lookup (a hash of the whole key)
while the options repeat."""


def clear() -> None:
    """Forget every launch (e.g. after closing a device)."""
    global _last_lookup
    with _lock:
        _entries.clear()
        _last_lookup = (None, [])
