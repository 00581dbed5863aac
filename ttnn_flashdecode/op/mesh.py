"""The op on several chips: tensor parallelism over KV heads on a ``ttnn.MeshDevice``, and the same
call emulated device by device on the host.

**Layout (tt-transformers').** On a mesh of ``D`` devices every operand is a multi-device tensor
whose per-device shard is a valid single-device call:

* Q: its heads split evenly over the devices (``ttnn.ShardTensorToMesh`` / ``ttnn.shard_tensor_to_mesh_mapper``
  on the head dim: dim 3 of ``[1, 1, batch * R, n_q_heads * head_dim]``, dim 2 of the heads layout
  ``[1, batch, n_q_heads, head_dim]``): device ``i`` holds Q heads ``i * n_q_heads / D ..``.
* K, V: their KV heads split the same way (dim 1 of ``[batch, n_kv_heads, capacity, head_dim]`` or of
  the paged ``[cache_blocks, n_kv_heads, block_size, head_dim]``): device ``i`` holds KV heads
  ``i * n_kv_heads / D ..``, so every device keeps the GQA grouping (``n_q_heads / n_kv_heads``).
* positions (``cur_pos`` / ``cur_pos_tensor``) and page tables: replicated (``ttnn.ReplicateTensorToMesh``,
  or ``ttnn.Tensor(..., device=mesh)``, which replicates).
* the output: one shard per device, sharded like Q (its heads).

ttnn gives a multi-device tensor the shape of one shard, so validation and planning see one device's
call; the plan is the same on every device (the same shard shapes and dtypes, the same grid on
identical chips) and a mesh tensor's buffer has one address on every device, so one descriptor
serves them all. :func:`program_for_device` wraps it in a ``ttnn.MeshProgramDescriptor`` over the
whole mesh: ONE ``ttnn.generic_op`` launches it on every device (what the issue asks for; a plain
``ProgramDescriptor`` would be run SPMD too).

**Emulated mesh.** Host multi-device tensors (``ttnn.from_host_shards``, or :func:`host_mesh_tensor`)
given to :func:`~ttnn_flashdecode.attention` run device by device through the emulator
(:func:`device_operands`, :func:`gather_like_q`): shard ``i`` of every mesh operand with the replicated rest, one emulated
single-device call per device, and the outputs gathered with ``ttnn.from_host_shards`` into a host
multi-device tensor sharded like Q. Tensor parallelism needs no collective (each device's heads are
complete), so nothing is modelled between devices.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np
import ttnn

from ttnn_flashdecode.op.operands import MESH_OPERANDS, Operands

__all__ = ["device_count", "check_device_operands", "program_for_device", "is_host_mesh", "device_operands",
           "naming_device", "gather_like_q", "shard_kv_heads", "host_mesh_tensor", "mesh_to_numpy", "PerDeviceSinks",
           "shards_of"]


class PerDeviceSinks(tuple):
    """Attention sinks that differ between the devices of a mesh: one tuple of logits (one per local Q
    head, score units, bfloat16-rounded) per device, in mesh order. What
    :func:`~ttnn_flashdecode.op.modifiers.sink.sink_logits` makes of a sink tensor sharded over a mesh
    (gpt-oss under tensor parallelism: each device its heads' sinks); on a device mesh the constants
    operand is then uploaded per device (one address, each device its own sink tiles)."""


def shards_of(tensor) -> list | None:
    """The per-device shards of a multi-device ``ttnn.Tensor`` (device or host) as host tensors, in
    mesh order; None for anything else (a single-device tensor, a numpy array, a list)."""
    if not isinstance(tensor, ttnn.Tensor) or len(_coords(tensor)) < 2:
        return None
    host = tensor.cpu() if tensor.storage_type() == ttnn.StorageType.DEVICE else tensor
    return list(ttnn.get_device_tensors(host))


def device_count(device) -> int:
    """Chips behind ``device``: a ``ttnn.MeshDevice``'s ``get_num_devices()`` (1 for ``ttnn.open_device``'s 1x1 mesh)."""
    return int(device.get_num_devices()) if hasattr(device, "get_num_devices") else 1


def _coords(tensor) -> list[tuple[int, int]]:
    return [(int(c[0]), int(c[1])) for c in tensor.tensor_topology().mesh_coords()]


def check_device_operands(q, operands: dict) -> int:
    """Check that every device operand lives on ``q``'s device and, on a mesh, on every device of it.

    Args:
        q: the device Q (any shape; a single-chip or multi-chip ``ttnn.MeshDevice``'s tensor).
        operands: name -> tensor or None (``k``, ``v``, ``cur_pos_tensor``, ``page_table_tensor``,
            ``attn_mask``, ...); None, numpy arrays, lists and host tensors are skipped.

    Returns:
        The number of chips (1 on one chip).

    Raises:
        ValueError: an operand on another device than ``q`` (another mesh, or a submesh), or, on a
            mesh of ``D`` chips, a tensor distributed over fewer than ``D`` of them.
    """
    device = q.device()
    chips = device_count(device)
    for name, tensor in operands.items():
        if not isinstance(tensor, ttnn.Tensor) or tensor.storage_type() != ttnn.StorageType.DEVICE:
            continue
        if tensor.device().id() != device.id():
            raise ValueError(f"{name}: expected a tensor on q's device ({_describe(device)}), got one on "
                             f"{_describe(tensor.device())}")
    if chips > 1:
        for name, tensor in {"q": q, **operands}.items():
            if isinstance(tensor, ttnn.Tensor) and tensor.storage_type() == ttnn.StorageType.DEVICE:
                covered = len(_coords(tensor))
                if covered != chips:
                    raise ValueError(f"{name}: expected a tensor on all {chips} devices of the {_describe(device)} "
                                     f"(sharded or replicated), got one on {covered}")
    return chips


def _describe(device) -> str:
    shape = getattr(device, "shape", None)
    return f"{'x'.join(str(d) for d in shape)} mesh" if shape is not None else f"device {device.id()}"


def program_for_device(device, program):
    """What ``ttnn.generic_op`` runs on ``device``: ``program`` itself on one chip; on a mesh a
    ``ttnn.MeshProgramDescriptor`` with ``program`` for the whole mesh (``MeshCoordinateRange(device.shape)``):
    one launch, the same program on every device. Build it after the call's addresses are written into
    ``program`` (the mesh descriptor holds its own copy)."""
    if device_count(device) == 1:
        return program
    mesh_program = ttnn.MeshProgramDescriptor()
    mesh_program[ttnn.MeshCoordinateRange(device.shape)] = program
    return mesh_program


# ---------------------------------------------------------------- emulated mesh (host multi-device tensors)


def is_host_mesh(tensor) -> bool:
    """``tensor`` is a host ``ttnn.Tensor`` holding more than one device's shard (``ttnn.from_host_shards``,
    ``ttnn.distribute_tensor`` without a device, :func:`host_mesh_tensor`)."""
    return (isinstance(tensor, ttnn.Tensor) and tensor.storage_type() != ttnn.StorageType.DEVICE
            and len(_coords(tensor)) > 1)


def _mesh_shape(tensor) -> ttnn.MeshShape:
    coords = _coords(tensor)
    return ttnn.MeshShape(max(r for r, _ in coords) + 1, max(c for _, c in coords) + 1)


def _shards(name: str, tensor, devices: int) -> list:
    shards = ttnn.get_device_tensors(tensor)
    if len(shards) != devices:
        raise ValueError(f"{name}: expected a multi-device tensor of {devices} shards like q, got {len(shards)}")
    return shards


def device_operands(operands: Operands) -> list[Operands]:
    """An emulated mesh's call as one call per device: shard ``i`` of every host multi-device operand.

    Args:
        operands: Q, K and V host multi-device tensors of ``D`` shards each; shard ``i`` of each is
            device ``i``'s operand (shapes, dtypes as one device's call: e.g. Q ``[1, 1, batch,
            n_q_heads / D * head_dim]`` bfloat16, K/V ``[batch, n_kv_heads / D, capacity, head_dim]``
            bfloat16 / bfloat8_b / bfloat4_b). A :data:`~ttnn_flashdecode.op.operands.MESH_OPERANDS`
            operand that is a host multi-device tensor gives device ``i`` its shard ``i`` (per-device
            sinks, :class:`PerDeviceSinks`, their ``i``-th); every other one (``cur_pos`` lists,
            numpy arrays, single host tensors) is the same for every device.

    Returns:
        ``D`` :class:`~ttnn_flashdecode.op.operands.Operands`, mesh order. Run each, then
        :func:`gather_like_q`.

    Raises:
        ValueError: ``k`` or ``v`` is not a host multi-device tensor of ``D`` shards, or a mesh operand
            has another shard count.
    """
    q, k, v = operands.q, operands.k, operands.v
    devices = len(_coords(q))
    for name, tensor in (("k", k), ("v", v)):
        if not is_host_mesh(tensor):
            raise ValueError(f"{name}: expected a host multi-device tensor (one shard per device) like q, got "
                             f"{'a single-device tensor' if isinstance(tensor, ttnn.Tensor) else type(tensor).__name__}")
    split = {"q": _shards("q", q, devices), "k": _shards("k", k, devices), "v": _shards("v", v, devices)}
    for name in MESH_OPERANDS:
        value = getattr(operands, name)
        if is_host_mesh(value):
            split[name] = _shards(name, value, devices)
    sinks = operands.attention_sink
    if isinstance(sinks, PerDeviceSinks):  # the drop-in's per-device sinks, already read
        if len(sinks) != devices:
            raise ValueError(f"attention_sink: expected sinks for {devices} devices like q, got {len(sinks)}")
        split["attention_sink"] = list(sinks)
    return [operands.replace(**{name: shards[i] for name, shards in split.items()}) for i in range(devices)]


@contextlib.contextmanager
def naming_device(index: int, devices: int):
    """Refusals raised inside name the emulated mesh's device: ``mesh device i of D: ...``."""
    try:
        yield
    except (ValueError, TypeError) as error:
        raise type(error)(f"mesh device {index} of {devices}: {error}") from error


def gather_like_q(outputs: list, q):
    """One output per device (or ``(out, lse)`` per device) as host multi-device tensors distributed like ``q``.

    Returns:
        A host multi-device tensor of ``D`` shards in Q's mesh shape and with Q's distribution (each
        shard one device's output, in Q's layout); with ``return_lse`` a pair of them, the output and
        the LSE (each device's heads' LSE, float32).
    """
    if isinstance(outputs[0], tuple):  # return_lse: (out, lse) per device, each sharded like Q
        return tuple(_like_q([o[j] for o in outputs], q) for j in range(2))
    return _like_q(outputs, q)


def _like_q(shards: list, q):
    """``shards`` (one host tensor per device) as one host multi-device tensor distributed like ``q``."""
    result = ttnn.from_host_shards(shards, _mesh_shape(q))
    result.update_tensor_topology(q.tensor_topology())
    return result


def shard_kv_heads(q: np.ndarray, k: np.ndarray, v: np.ndarray, devices: int, *, q_layout: str = "rows"):
    """Split one model's Q/K/V over ``devices`` by KV heads, as tt-transformers shards them.

    Args:
        q: ``[1, 1, batch * R, n_q_heads * head_dim]`` (``q_layout="rows"``) or ``[1, batch,
            n_q_heads, head_dim]`` (``"heads"``); any numpy dtype.
        k, v: ``[batch, n_kv_heads, capacity, head_dim]`` or paged ``[blocks, n_kv_heads, block_size,
            head_dim]``.
        devices: ``D``, dividing ``n_kv_heads`` (and so ``n_q_heads``).

    Returns:
        ``(qs, ks, vs)``: lists of ``D`` arrays; device ``i`` holds Q heads ``i * n_q_heads / D ..
        (i + 1) * n_q_heads / D - 1`` and KV heads ``i * n_kv_heads / D ..``, so its GQA groups are
        the model's.

    Raises:
        ValueError: ``devices`` < 1 or not dividing ``n_kv_heads``, or ``n_kv_heads`` not dividing
            ``n_q_heads``, or a ``q_layout`` other than ``"rows"`` / ``"heads"``.
    """
    n_kv = int(k.shape[1])
    if q_layout not in ("rows", "heads"):
        raise ValueError(f"q_layout: expected 'rows' or 'heads', got {q_layout!r}")
    if not isinstance(devices, int) or devices < 1 or n_kv % devices:
        raise ValueError(f"devices: expected a positive divisor of n_kv_heads = {n_kv}, got {devices!r}")
    axis = 3 if q_layout == "rows" else 2
    n_q = int(q.shape[2]) if q_layout == "heads" else None
    if n_q is not None and n_q % n_kv:
        raise ValueError(f"q: expected a multiple of n_kv_heads = {n_kv} Q heads, got {n_q}")
    if n_q is None and (int(q.shape[3]) % n_kv):
        raise ValueError(f"q: expected a width that is a multiple of n_kv_heads = {n_kv} heads, got {q.shape[3]}")
    return ([np.ascontiguousarray(part) for part in np.split(q, devices, axis=axis)],
            [np.ascontiguousarray(part) for part in np.split(k, devices, axis=1)],
            [np.ascontiguousarray(part) for part in np.split(v, devices, axis=1)])


def host_mesh_tensor(shards: Sequence, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, mesh_shape=None):
    """A host multi-device tensor from per-device shards (numpy arrays or host ``ttnn.Tensor``s).

    Args:
        shards: one per device, all of one shape; numpy arrays become ``ttnn.Tensor(array, dtype,
            layout=layout)`` (float arrays as float32; int32 arrays keep int32, ROW_MAJOR).
        dtype, layout: for numpy float shards (default bfloat16 TILE; ``ttnn.bfloat8_b`` /
            ``ttnn.bfloat4_b`` need TILE and, without a card, tt-metal's context:
            :func:`~ttnn_flashdecode.op.devices.ensure_host_context`).
        mesh_shape: a ``ttnn.MeshShape``; default ``1 x len(shards)`` (a T3K's 1x8 line).

    Returns:
        A host ``ttnn.Tensor`` whose shards ``ttnn.get_device_tensors`` returns in order.

    Raises:
        ValueError: no shards, or shards of different shapes.
    """
    if not shards:
        raise ValueError("shards: expected one per device, got none")
    tensors = []
    for shard in shards:
        if isinstance(shard, np.ndarray):
            if shard.dtype == np.int32:
                shard = ttnn.Tensor(np.ascontiguousarray(shard), ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT)
            else:
                shard = ttnn.Tensor(np.ascontiguousarray(shard, dtype=np.float32), dtype, layout=layout)
        tensors.append(shard)
    shapes = {tuple(int(d) for d in t.shape) for t in tensors}
    if len(shapes) != 1:
        raise ValueError(f"shards: expected one shape on every device, got {sorted(shapes)}")
    return ttnn.from_host_shards(tensors, mesh_shape or ttnn.MeshShape(1, len(tensors)))


def mesh_to_numpy(tensor, dim: int) -> np.ndarray:
    """A multi-device tensor (host or device) as one numpy float32 array: its shards concatenated
    along ``dim`` in device order (the inverse of sharding over ``dim``; e.g. the output's head dim,
    3 for the rows layout, 2 for the heads layout)."""
    host = tensor.cpu() if tensor.storage_type() == ttnn.StorageType.DEVICE else tensor
    return np.concatenate([np.asarray(shard.to_list(), dtype=np.float32) for shard in ttnn.get_device_tensors(host)],
                          axis=dim)
