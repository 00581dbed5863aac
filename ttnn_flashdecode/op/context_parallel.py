"""Context-parallel decode: the KV cache split by SEQUENCE over the devices of one mesh axis, each
device's partial attention merged by its log-sum-exp (issue 23, item 2).

**Layout.** Along ``mesh_axis`` of a mesh (a T3K's 1x8 line: axis 1; a Galaxy's 8x4: either), device
``i`` holds global positions ``shard_starts[i] .. shard_starts[i + 1] - 1`` of every user (the last
device up to its cache's capacity) in its own cache: contiguous ``[batch, n_kv_heads, S_local,
head_dim]``, or paged ``[blocks, n_kv_heads, block_size, head_dim]`` with ONE PAGE TABLE PER DEVICE
(a page-table mesh tensor, each device's table mapping its local positions to its blocks). The
default split is even: ``shard_starts[i] = i * S_local``. Q is replicated along the axis (every
device attends the same queries); along the other axis anything goes (tensor parallel heads, users).

**Positions are global** (one int32 per user, ``-1`` idle) and each device derives its LOCAL
position, one rule in one place (:func:`local_positions`, and its ttnn-ops twin)::

    local_i = clamp(p - start_i, -1, length_i - 1)

so a device whose shard starts after ``p`` gets ``-1``: the op's idle slot, whose partial is
``(out = 0, lse = -inf)`` and weighs nothing in the merge; a device whose shard ends before ``p``
attends its whole shard; an idle user (``-1``) is idle everywhere and merges to ``(0, -inf)``.

**Merge.** Every device runs :func:`~ttnn_flashdecode.attention` with ``return_lse=True`` on its
shard; then an all-gather of ``out`` and ``lse`` along the axis (``ttnn.all_gather(x, dim=0,
cluster_axis=mesh_axis)``: every device receives the axis' partials concatenated in device order)
and :func:`~ttnn_flashdecode.merge_attention_states` on every device. The result is replicated
along the axis (every device holds the whole attention), distributed like Q.

* **Device mesh** (device tensors on a multi-chip ``ttnn.MeshDevice``): ttnn ops only, no host round
  trip. The local positions come from ``cur_pos_tensor`` on device (``ttnn.subtract`` of a per-device
  start tensor sharded over the mesh, ``ttnn.clamp``), so a captured trace replays for new positions;
  the op is the mesh launch (one ``generic_op``); ``ttnn.all_gather`` needs the fabric
  (``ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D)`` before ``ttnn.open_mesh_device``); the
  merge is :mod:`.merge`'s ttnn-ops form (float32).
* **Emulated mesh** (host multi-device tensors, ``ttnn.from_host_shards``): every device's call runs
  through the emulator (:func:`~ttnn_flashdecode.op.mesh.device_operands`), the all-gather is modelled on
  the host as ttnn defines it (:func:`all_gather_host`), then each device merges (float64 math, out
  rounded to bfloat16).

**Sinks** (gpt-oss): a sink is one more term of the softmax denominator, so it must be counted ONCE.
The first device of the axis gets the sinks; every other device gets :data:`NO_SINK` (the most negative
bfloat16, whose ``e^(s - m)`` is exactly 0 in float32: no sink), all as per-device sinks (one program).
The first device is never empty for a live user (it holds position 0), and an idle user's LSE stays
``-inf`` (no sink is folded into an empty softmax), as on one chip.

**Refused** (``NotImplementedError``): ``sliding_window_size`` and ``attention_chunk_size`` (a
device whose shard ends before ``p`` would need a window that depends on ``p``: the op's window is a
compile-time constant), ``rows`` (several query rows per user: a full device would need each row's
causal end clamped separately).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import ttnn

from ttnn_flashdecode.op import mesh
from ttnn_flashdecode.op.merge import merge_attention_states
from ttnn_flashdecode.op.operation import attention, to_numpy
from ttnn_flashdecode.op.constants import SCALE_MAX
from ttnn_flashdecode.op.modifiers import scalar_modifiers
from ttnn_flashdecode.op.modifiers.sink import sink_logits
from ttnn_flashdecode.op.validate import IDLE

__all__ = ["context_parallel_attention", "local_positions", "shard_sequence", "shard_bounds", "all_gather_host",
           "NO_SINK"]

NO_SINK = -SCALE_MAX
"""The sink logit of the devices after the first along the axis: the most negative finite bfloat16.
Its weight ``e^(NO_SINK - m)`` underflows to exactly 0 for any finite running max ``m``."""


def shard_bounds(shard_starts: Sequence[int] | None, devices: int, local_capacity: int) -> tuple[list[int], list[int]]:
    """Each device's first global position and its number of positions.

    Args:
        shard_starts: ``devices`` ints, ``0 = start_0 < start_1 < ...``, each shard at most
            ``local_capacity`` long (``start_{i+1} - start_i <= local_capacity``); ``None``: the even
            split ``i * local_capacity``.
        devices: ``D``, the devices along the axis.
        local_capacity: positions each device's cache holds (``S_local``; paged: ``blocks_per_user *
            block_size`` of its page table).

    Returns:
        ``(starts, lengths)``: the last device's length is ``local_capacity``; the global capacity
        is ``starts[-1] + local_capacity``.

    Raises:
        TypeError: ``shard_starts`` is not a sequence of ints.
        ValueError: another count, a first start other than 0, starts not increasing, or a shard
            longer than ``local_capacity``.
    """
    if shard_starts is None:
        starts = [i * local_capacity for i in range(devices)]
    else:
        if isinstance(shard_starts, (str, bytes)) or not isinstance(shard_starts, Sequence) or \
                any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) for s in shard_starts):
            raise TypeError(f"shard_starts: expected a sequence of {devices} ints, got {shard_starts!r}")
        starts = [int(s) for s in shard_starts]
        if len(starts) != devices:
            raise ValueError(f"shard_starts: expected {devices} starts (one per device along the axis), got {len(starts)}")
        if starts[0] != 0:
            raise ValueError(f"shard_starts: expected the first device to start at position 0, got {starts[0]}")
    lengths = [b - a for a, b in zip(starts, starts[1:])] + [local_capacity]
    bad = [i for i, n in enumerate(lengths) if not 1 <= n <= local_capacity]
    if bad:
        raise ValueError(f"shard_starts: expected increasing starts, each shard 1..{local_capacity} positions (a "
                         f"device's cache), got starts {starts} (device {bad[0]} holds {lengths[bad[0]]})")
    return starts, lengths


def local_positions(positions, start: int, length: int) -> np.ndarray:
    """Global positions as one device's local ones: ``clamp(p - start, -1, length - 1)`` (int32).

    ``-1`` (idle, or a shard that starts after ``p``: the op's idle slot, an empty partial); ``length -
    1`` when the shard ends before ``p`` (its whole shard). The device form is the same clamp in
    ttnn ops (:func:`_local_positions_on_device`)."""
    p = np.asarray(positions, dtype=np.int64)
    return np.clip(p - start, IDLE, length - 1).astype(np.int32)


def shard_sequence(k: np.ndarray, v: np.ndarray, shard_starts: Sequence[int], local_capacity: int,
                   fill: float = 0.0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Split one cache ``[batch, n_kv_heads, S, head_dim]`` by sequence: device ``i`` gets positions
    ``shard_starts[i] ..`` of the next start (its cache ``[batch, n_kv_heads, local_capacity,
    head_dim]``, slots past its shard filled with ``fill``).

    Raises:
        ValueError: as :func:`shard_bounds`, or the shards do not cover the cache's positions.
    """
    starts, lengths = shard_bounds(shard_starts, len(shard_starts), local_capacity)
    total = int(k.shape[2])
    if starts[-1] >= total or starts[-1] + lengths[-1] < total:
        raise ValueError(f"shard_starts: expected shards covering the cache's {total} positions, got starts {starts} "
                         f"of {local_capacity} positions each")
    parts = ([], [])
    for start, length in zip(starts, lengths):
        length = min(length, total - start)
        for cache, out in zip((k, v), parts):
            shard = np.full((*cache.shape[:2], local_capacity, cache.shape[3]), fill, dtype=cache.dtype)
            shard[:, :, :length] = cache[:, :, start:start + length]
            out.append(shard)
    return parts


def all_gather_host(shards: Sequence[np.ndarray], mesh_shape: tuple[int, int], axis: int, dim: int = 0) -> list:
    """``ttnn.all_gather(x, dim, cluster_axis=axis)`` on the host: device ``(r, c)`` receives the
    tensors of every device of its line along ``axis`` (its row for axis 1, its column for axis 0),
    concatenated along ``dim`` in their order on the line; the other axis' lines gather
    independently. ``shards``: one numpy array per device, in row-major mesh order."""
    rows, cols = mesh_shape

    def line(r, c):
        return [shards[r * cols + j] for j in range(cols)] if axis == 1 else [shards[i * cols + c] for i in range(rows)]

    return [np.concatenate(line(r, c), axis=dim) for r in range(rows) for c in range(cols)]


def context_parallel_attention(
    q,
    k,
    v,
    *,
    cur_pos: Sequence[int] | None = None,
    cur_pos_tensor=None,
    page_table_tensor=None,
    scale: float | None = None,
    shard_starts: Sequence[int] | None = None,
    mesh_axis: int = 1,
    attention_sink=None,
    logit_softcap: float | None = None,
    q_layout: str = "rows",
    return_lse: bool = False,
    merge: bool = True,
    compute_kernel_config=None,
    block_tiles: int | None = None,
    split: int | None = None,
    max_split: int | None = None,
    grid=None,
    batch_invariant: bool = False,
    sliding_window_size: int | None = None,
    attention_chunk_size: int | None = None,
    rows: int | None = None,
):
    """Decode attention with the KV cache sharded by sequence over the devices of ``mesh_axis``.

    Each device attends its own shard of every user's positions (its global range
    ``shard_starts[i] ..``), returning its partial output and LSE; the partials are all-gathered
    along the axis and merged by their LSE on every device (module docstring). Exactly
    :func:`~ttnn_flashdecode.attention` of the unsharded cache, up to the merge's rounding.

    Parameters:
        q: a multi-device tensor, each device's shard ``[1, 1, batch, n_q_heads * head_dim]`` (``"rows"``)
            or ``[1, batch, n_q_heads, head_dim]`` (``"heads"``), as for ``attention()``, REPLICATED
            along ``mesh_axis`` (``ttnn.ReplicateTensorToMesh``; along the other axis it may be
            sharded, e.g. by heads). Device tensors on a multi-chip ``ttnn.MeshDevice`` (bfloat16
            TILE DRAM) or a host multi-device tensor (``ttnn.from_host_shards``,
            :func:`~ttnn_flashdecode.op.mesh.host_mesh_tensor`): the emulated mesh.
        k, v: the same kind, each device's shard its cache: ``[batch, n_kv_heads, S_local, head_dim]``,
            or paged ``[blocks, n_kv_heads, block_size, head_dim]`` with ``page_table_tensor``;
            bfloat16, bfloat8_b or bfloat4_b. Device ``i`` along the axis holds global positions
            ``shard_starts[i] + j`` at local position ``j``; slots past its shard may hold anything.
        cur_pos: ``batch`` GLOBAL positions (ints), ``-1 <= p < starts[-1] + S_local``; ``-1``: an idle
            slot (output rows 0, LSE ``-inf``). On a device mesh uploaded replicated.
        cur_pos_tensor: instead of ``cur_pos``, the global positions as a tensor (trace-safe): on a
            device mesh int32 ROW_MAJOR DRAM ``[batch]`` replicated over the mesh (never read by the
            host; each device derives its local positions in ttnn ops, and an entry below -1 acts as
            -1, one past the end as the last position); on the emulated mesh a numpy int32 array or a
            host int32 ``ttnn.Tensor`` ``[batch]``.
        page_table_tensor: a paged cache's tables, ONE PER DEVICE: a multi-device int32 tensor whose
            shard ``i`` is ``[batch, blocks_per_user]`` mapping device ``i``'s LOCAL positions to its
            cache's blocks (``S_local = blocks_per_user * block_size``); a single table is used by
            every device.
        scale: query scale, default ``1 / sqrt(head_dim)``.
        shard_starts: ``D`` ints, device ``i``'s first global position along the axis: ``0 = s_0 < s_1 <
            ...``, each shard ``s_{i+1} - s_i`` at most ``S_local`` positions (uneven shards allowed);
            default the even split ``i * S_local``.
        mesh_axis: the mesh axis the sequence is split over: 1 (default: a 1xD line's devices) or 0.
        attention_sink: per Q head a logit in score units, as ``attention()`` takes it (or a
            multi-device sink tensor sharded along the other axis); folded ONCE: on the first device
            of the axis (the others get :data:`NO_SINK`).
        logit_softcap, q_layout, compute_kernel_config, block_tiles, split, max_split, grid,
            batch_invariant: as ``attention()``'s, for every device's call (``fp32_dest_acc_en`` must
            stay on: the partials need their LSE).
        return_lse: also return the merged LSE (float32, natural log, score units).
        merge: ``False``: stop after the all-gather and return ``(outs, lses)``, every device holding its
            line's partials stacked on a new leading dim in line order (``[D, 1, batch, width]`` /
            ``[D, 1, batch, n_q_heads]``; heads layout ``[D, batch, n_q_heads, head_dim]`` /
            ``[D, 1, batch, n_q_heads]``), for a caller that merges them itself (e.g. fused into the next
            op; :func:`~ttnn_flashdecode.merge_attention_states` merges them). Default True.
        sliding_window_size, attention_chunk_size, rows: refused (module docstring); ``None``.

    Returns:
        ``out`` (or ``(out, lse)`` with ``return_lse``), replicated along the axis: a multi-device
        tensor of ``q``'s kind and mesh, each device's shard ``q``'s shard's shape. Device mesh: out
        bfloat16 TILE DRAM, lse float32 ROW_MAJOR DRAM (``[1, 1, batch, n_q_heads]``, heads layout
        ``[1, batch, n_q_heads]``). Emulated mesh: host tensors, out bfloat16 ROW_MAJOR, lse float32.
        With ``merge=False`` the gathered partials instead (``merge`` above).

    Raises:
        TypeError: neither or both of ``cur_pos`` / ``cur_pos_tensor`` (both: ValueError), a
            ``shard_starts`` that is not ints, ``q`` not a multi-device tensor.
        ValueError: a ``mesh_axis`` other than 0 or 1, bad ``shard_starts`` (:func:`shard_bounds`), a
            global position outside ``-1 .. starts[-1] + S_local - 1`` (emulated mesh), and whatever a
            device's ``attention()`` call raises (named ``mesh device i of D``).
        NotImplementedError: ``sliding_window_size``, ``attention_chunk_size`` or ``rows`` given.

    Example:
        >>> import numpy as np
        >>> import ttnn
        >>> from ttnn_flashdecode import context_parallel_attention
        >>> from ttnn_flashdecode.op.mesh import host_mesh_tensor
        >>> from ttnn_flashdecode.op.context_parallel import shard_sequence
        >>> rng = np.random.default_rng(0)
        >>> q = rng.standard_normal((1, 1, 2, 4 * 64), dtype=np.float32)      # 2 users, 4 Q heads
        >>> k = rng.standard_normal((2, 2, 512, 64), dtype=np.float32)        # 2 KV heads, 512 positions
        >>> ks, vs = shard_sequence(k, k, [0, 128, 256, 384], 128)           # 4 devices, 128 positions each
        >>> rm = ttnn.ROW_MAJOR_LAYOUT                                    # host tensors need no device context
        >>> out = context_parallel_attention(host_mesh_tensor([q] * 4, layout=rm), host_mesh_tensor(ks, layout=rm),
        ...                                  host_mesh_tensor(vs, layout=rm), cur_pos=[5, 300])
        >>> len(ttnn.get_device_tensors(out)), list(ttnn.get_device_tensors(out)[0].shape)
        (4, [1, 1, 2, 256])
    """
    scores = scalar_modifiers(sliding_window_size=sliding_window_size, attention_chunk_size=attention_chunk_size)
    for keyword, why, value in scores.unsupported("context_parallel"):  # each modifier's own reason
        raise NotImplementedError(f"{keyword}: not supported with context parallelism ({why}); expected None, got "
                                  f"{value!r}")
    if rows is not None:
        raise NotImplementedError("rows: not supported with context parallelism (a device whose shard ends before the "
                                  f"position would need each row's causal end clamped); expected None, got {rows!r}")
    if (cur_pos is None) == (cur_pos_tensor is None):
        if cur_pos is None:
            raise TypeError("cur_pos / cur_pos_tensor: expected one of them (global positions), got neither")
        raise ValueError("cur_pos / cur_pos_tensor: expected one of them, got both")
    if mesh_axis not in (0, 1) or isinstance(mesh_axis, bool):
        raise ValueError(f"mesh_axis: expected 0 or 1, got {mesh_axis!r}")
    on_device = isinstance(q, ttnn.Tensor) and q.storage_type() == ttnn.StorageType.DEVICE
    if on_device:
        shape = tuple(int(d) for d in q.device().shape)
    elif mesh.is_host_mesh(q):
        shape = tuple(int(d) for d in mesh._mesh_shape(q))
    else:
        raise TypeError(f"q: expected a multi-device tensor (on a ttnn.MeshDevice, or a host one from "
                        f"ttnn.from_host_shards) replicated along mesh_axis, got "
                        f"{'a single-device tensor' if isinstance(q, ttnn.Tensor) else type(q).__name__}")
    devices = shape[mesh_axis]
    starts, lengths = shard_bounds(shard_starts, devices, _local_capacity(k, page_table_tensor))
    coords = [(r, c) for r in range(shape[0]) for c in range(shape[1])]
    line_index = [coord[mesh_axis] for coord in coords]  # each device's place on its line, mesh order
    options = dict(page_table_tensor=page_table_tensor, scale=scale, logit_softcap=logit_softcap, q_layout=q_layout,
                   compute_kernel_config=compute_kernel_config, block_tiles=block_tiles, split=split,
                   max_split=max_split, grid=grid, batch_invariant=batch_invariant, return_lse=True)
    if attention_sink is not None:
        options["attention_sink"] = _sinks_once(attention_sink, _q_heads(q, k, q_layout, on_device), line_index)
    if on_device:
        positions = _local_positions_on_device(q, cur_pos, cur_pos_tensor, mesh_axis, starts, lengths)
        out, lse = attention(q, k, v, cur_pos_tensor=positions, **options)
        return _merge_on_device(out, lse, mesh_axis, devices, return_lse, merge)
    global_positions = _host_positions(cur_pos, cur_pos_tensor, starts[-1] + lengths[-1])
    positions = mesh.host_mesh_tensor([local_positions(global_positions, starts[i], lengths[i]) for i in line_index],
                                      mesh_shape=ttnn.MeshShape(*shape))
    out, lse = attention(q, k, v, cur_pos_tensor=positions, **options)
    return _merge_on_host(out, lse, q, shape, mesh_axis, return_lse=return_lse, merge=merge)


def _local_capacity(k, page_table_tensor) -> int:
    """Positions one device's cache holds: K's capacity, or its page table's blocks x block size."""
    k_shape = [int(d) for d in k.shape]  # a multi-device tensor's shape is one shard's
    if page_table_tensor is None:
        return k_shape[2]
    return int(page_table_tensor.shape[-1]) * k_shape[2]


def _q_heads(q, k, q_layout: str, on_device: bool) -> int:
    """Q heads per device (one shard's): the heads layout's dim 2, else Q's width over the (device:
    tile-padded) head_dim."""
    if q_layout == "heads":
        return int(q.shape[2])
    head_dim = int(k.shape[3])
    return int(q.shape[3]) // ((-(-head_dim // 32) * 32) if on_device else head_dim)


def _sinks_once(attention_sink, n_q_heads: int, line_index: list[int]) -> mesh.PerDeviceSinks:
    """Per-device sinks, mesh order: each device's sinks (sharded or not) on the first device of its
    line, :data:`NO_SINK` on the others."""
    logits = sink_logits(attention_sink, n_q_heads)
    per_device = list(logits) if isinstance(logits, mesh.PerDeviceSinks) else [logits] * len(line_index)
    if len(per_device) != len(line_index):
        raise ValueError(f"attention_sink: expected sinks for {len(line_index)} devices, got {len(per_device)}")
    return mesh.PerDeviceSinks(tuple(s) if i == 0 else (NO_SINK,) * n_q_heads for s, i in zip(per_device, line_index))


def _host_positions(cur_pos, cur_pos_tensor, capacity: int) -> np.ndarray:
    """The global positions as an int64 array, each in ``-1 .. capacity - 1``."""
    if cur_pos is not None:
        if isinstance(cur_pos, (str, bytes)) or not isinstance(cur_pos, Sequence) or \
                any(isinstance(p, bool) or not isinstance(p, (int, np.integer)) for p in cur_pos):
            raise TypeError(f"cur_pos: expected a sequence of ints (global positions), got {cur_pos!r}")
        values = np.asarray(cur_pos, dtype=np.int64)
    else:
        array = to_numpy(cur_pos_tensor) if isinstance(cur_pos_tensor, ttnn.Tensor) else np.asarray(cur_pos_tensor)
        if isinstance(cur_pos_tensor, ttnn.Tensor) and cur_pos_tensor.dtype != ttnn.int32 or \
                not isinstance(cur_pos_tensor, ttnn.Tensor) and array.dtype != np.int32:
            raise TypeError(f"cur_pos_tensor: expected int32 global positions, got "
                            f"{getattr(cur_pos_tensor, 'dtype', type(cur_pos_tensor).__name__)}")
        values = np.asarray(array, dtype=np.int64).reshape(-1)
    bad = values[(values < IDLE) | (values >= capacity)]
    if bad.size:
        raise ValueError(f"cur_pos: expected global positions -1 .. {capacity - 1} (the shards' {capacity} positions), "
                         f"got {bad[:4].tolist()}")
    return values


def _as_4d(shape: Sequence[int]) -> list[int]:
    """A partial's shape with a leading 1 to 4 dims (the heads layout's LSE is 3-d): what is gathered."""
    return [1] * (4 - len(shape)) + [int(d) for d in shape]


def _merge_on_host(out, lse, q, shape: tuple[int, int], axis: int, *, return_lse: bool, merge: bool):
    """The collective on the emulated mesh: an all-gather of every device's partial (out, lse) along
    ``axis`` (:func:`all_gather_host`, dim 0 of their 4-d views: ``[D, ...]``), then each device merges
    what it received (or, ``merge=False``, keeps it)."""
    parts = [[to_numpy(s) for s in ttnn.get_device_tensors(t)] for t in (out, lse)]
    out_shape, lse_shape = parts[0][0].shape, parts[1][0].shape
    gathered = [all_gather_host([a.reshape(_as_4d(a.shape)) for a in arrays], shape, axis) for arrays in parts]
    results = ([], [])
    for g_out, g_lse in zip(*gathered):
        if merge:
            g_out, g_lse = merge_attention_states([o.reshape(out_shape) for o in g_out.astype(np.float32)],
                                                  [s.reshape(lse_shape) for s in g_lse])
        results[0].append(ttnn.Tensor(np.ascontiguousarray(g_out, np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT))
        results[1].append(ttnn.Tensor(np.ascontiguousarray(g_lse, np.float32), ttnn.float32, layout=ttnn.ROW_MAJOR_LAYOUT))
    result = tuple(mesh._like_q(r, q) for r in results)
    return result if return_lse or not merge else result[0]


# ----------------------------------------------------------------------------------- device mesh

_BOUNDS_CACHE: dict = {}
"""(mesh id, axis, starts, lengths, batch) -> the per-device (start, last) int32 tensors on the mesh."""


def _bounds_on_device(device, axis: int, starts: list[int], lengths: list[int], batch: int):
    """Three int32 ROW_MAJOR DRAM tensors ``[batch]`` on the mesh: every entry device ``i``'s ``start_i``,
    its ``length_i - 1`` (both sharded over the mesh: one address, each device its own values) and -1.
    Uploaded once per (mesh, split): constants of the layout, so the local positions stay trace-safe."""
    key = (device.id(), axis, tuple(starts), tuple(lengths), batch)
    if key not in _BOUNDS_CACHE:
        rows, cols = (int(d) for d in device.shape)
        line = [(r, c)[axis] for r in range(rows) for c in range(cols)]
        tensors = []
        for values in (starts, [n - 1 for n in lengths], [IDLE] * len(starts)):
            shards = [ttnn.Tensor(np.full(batch, values[i], np.int32), ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT)
                      for i in line]
            tensors.append(ttnn.from_host_shards(shards, ttnn.MeshShape(rows, cols)).to(device, ttnn.DRAM_MEMORY_CONFIG))
        _BOUNDS_CACHE[key] = tuple(tensors)
    return _BOUNDS_CACHE[key]


def _local_positions_on_device(q, cur_pos, cur_pos_tensor, axis: int, starts: list[int], lengths: list[int]):
    """:func:`local_positions` in ttnn ops on the mesh: ``max(min(p - start_i, last_i), -1)``, three binary
    ops against the per-device constant tensors (:func:`_bounds_on_device`); the host never reads ``p``."""
    device = q.device()
    if cur_pos is not None:
        cur_pos_tensor = ttnn.Tensor(np.asarray(cur_pos, np.int32), ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT,
                                     device=device, mem_config=ttnn.DRAM_MEMORY_CONFIG)  # replicated
    batch = int(cur_pos_tensor.shape[-1])
    start, last, idle = _bounds_on_device(device, axis, starts, lengths, batch)
    local = ttnn.maximum(ttnn.minimum(ttnn.subtract(cur_pos_tensor, start), last), idle)
    if local.layout != ttnn.ROW_MAJOR_LAYOUT:
        local = ttnn.to_layout(local, ttnn.ROW_MAJOR_LAYOUT)
    return ttnn.reshape(local, ttnn.Shape([batch]))


def _merge_on_device(out, lse, axis: int, devices: int, return_lse: bool, merge: bool):
    """All-gather the partials along ``axis`` (dim 0 of their 4-d views: ``[D, ...]`` on every device)
    and merge them in ttnn ops (:func:`~ttnn_flashdecode.op.merge.merge_attention_states`' device form),
    or (``merge=False``) return what was gathered."""
    if out.memory_config() != ttnn.DRAM_MEMORY_CONFIG:  # the heads layout's L1 height-sharded output
        out = ttnn.to_memory_config(out, ttnn.DRAM_MEMORY_CONFIG)
    shapes = [[int(d) for d in t.shape] for t in (out, lse)]
    gathered = [ttnn.all_gather(t if len(s) == 4 else ttnn.reshape(t, ttnn.Shape(_as_4d(s))), dim=0, cluster_axis=axis)
                for t, s in zip((out, lse), shapes)]
    if not merge:
        return tuple(gathered)
    parts = [[ttnn.reshape(ttnn.slice(g, [i, 0, 0, 0], [i + 1, *_as_4d(s)[1:]]), ttnn.Shape(s)) for i in range(devices)]
             for g, s in zip(gathered, shapes)]
    merged_out, merged_lse = merge_attention_states(*parts)
    return (merged_out, merged_lse) if return_lse else merged_out
