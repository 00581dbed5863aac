"""``attention()``: flash-decode GQA attention against a KV cache, on a card or the host emulator.

Three request kinds (DESIGN.md §3, §5; ``docs/request_kinds.md``): decode (``cur_pos=``, one
query row per user), ROWS (``cur_pos=`` and ``rows=P``, P consecutive query rows per user, e.g.
draft tokens to verify) and CHUNK (``chunk_start=``, a causal chunk of up to 32 consecutive
positions per sequence: prefill).

Lifecycle (FlashInfer's plan/run split): the first call for a given (shapes, block size, compute
config, grid) builds a :class:`~ttnn_flashdecode.program_factory.Plan`, and the first call for a
plan and a set of buffer addresses builds its ``ttnn.ProgramDescriptor``; both are cached, so a
decode loop only validates its inputs and launches the same descriptor -- through
``ttnn.generic_op`` on a device, through :mod:`ttnn_flashdecode.emulator` otherwise.

Trace-safe: positions are not in the program. The kernels read them at run time from the
POSITIONS operand (``cur_pos_tensor``, one int32 per user, as ttnn's own decode op), and the plan
assumes every request at full capacity, so cores, CBs, compile-time and runtime args and
``custom_program_hash`` depend on shapes, dtypes, compute config, grid and addresses only: a
program captured with ``ttnn.begin_trace_capture`` replays correctly for any positions written to
the same tensor.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from collections.abc import Sequence

import ml_dtypes
import numpy as np
import ttnn

from ttnn_flashdecode import constants, protocol, tiles
from ttnn_flashdecode.program_factory import (
    Q_LAYOUTS,
    Addresses,
    ComputeOptions,
    DecodeShape,
    Plan,
    build_program,
    decode_requests,
    operand_accessor_args,
    max_requests_per_core,
    plan_decode,
)
from ttnn_flashdecode.residency import (
    MAX_DIM_TILES, Residency, cb_budget_bytes, device_cb_budget_bytes, l1_bytes, max_block_tiles,
)
from ttnn_flashdecode.schedule import schedule

__all__ = ["attention", "last_report", "plan_program", "program_for", "DEFAULT_BLOCK_TILES", "DEFAULT_ARCH", "IDLE"]

DEFAULT_BLOCK_TILES = 16
"""The seed's block size (DESIGN.md §8): 16 position tiles = 512 positions per K/V block."""

DEFAULT_ARCH = "wormhole_b0"
"""Architecture the emulator models when no device says otherwise (n150 / n300)."""

BACKENDS = ("auto", "device", "emulator")

IDLE = -1
"""A position that marks an idle batch slot (as in ttnn's ``cur_pos_tensor``): no K/V read, zero output rows."""

_last_report = threading.local()


def last_report():
    """The emulator's :class:`~ttnn_flashdecode.emulator.RunReport` of this thread's last
    emulated :func:`attention` call (DRAM/NoC bytes per core, API call counts, cores, time), or
    ``None`` if the last call ran on a device or none ran yet."""
    return getattr(_last_report, "value", None)


@dataclasses.dataclass(frozen=True)
class _Inputs:
    shape: DecodeShape
    #: per user: cur_pos (decode, rows; -1 idle) or chunk start (chunk); None when only a device
    #: tensor holds them (cur_pos_tensor on a device: never read by the host)
    positions: tuple[int, ...] | None
    kind: str  # "numpy", "host" (ttnn host tensor) or "device"
    positions_tensor: object = None  # cur_pos_tensor on a device, passed to the kernels as it is
    #: paged cache: the page table as int32 [batch, entries] when the host can see it, else None
    page_table: np.ndarray | None = None
    page_table_tensor: object = None  # page_table_tensor on a device, passed to the kernels as it is


def _shape_of(tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in tensor.shape)


_BLOCK_FLOAT = {ttnn.bfloat8_b: "bfloat8_b", ttnn.bfloat4_b: "bfloat4_b"}


def _kind(tensor, name: str) -> str:
    if isinstance(tensor, np.ndarray):
        if tensor.dtype not in (np.float32, ml_dtypes.bfloat16):
            raise ValueError(f"{name}: expected a float32 or bfloat16 array, got dtype {tensor.dtype}")
        return "numpy"
    if isinstance(tensor, ttnn.Tensor):
        cache = name in ("k", "v")
        if tensor.dtype not in (ttnn.bfloat16, ttnn.float32) and not (cache and tensor.dtype in _BLOCK_FLOAT):
            what = "bfloat16, float32, bfloat8_b or bfloat4_b" if cache else "bfloat16 or float32"
            raise ValueError(f"{name}: expected a {what} ttnn.Tensor, got dtype {tensor.dtype}")
        if tensor.dtype in _BLOCK_FLOAT and tensor.layout != ttnn.TILE_LAYOUT:
            raise ValueError(f"{name}: expected a {tensor.dtype} tensor in TILE layout (block-float is tiled), got {tensor.layout}")
        return "device" if tensor.storage_type() == ttnn.StorageType.DEVICE else "host"
    raise TypeError(f"{name}: expected a ttnn.Tensor or numpy.ndarray, got {type(tensor).__name__}")


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _request_kind(cur_pos, chunk_start, rows, cur_pos_tensor=None) -> str:
    """``"decode"``, ``"rows"`` or ``"chunk"`` from which of the arguments are given (``cur_pos``
    and ``cur_pos_tensor`` are the same positions, as a list or a tensor)."""
    if cur_pos is not None and cur_pos_tensor is not None:
        raise ValueError("cur_pos, cur_pos_tensor: expected one of them (the same positions, as a list or a tensor), got both")
    if cur_pos_tensor is not None and chunk_start is not None:
        raise ValueError("chunk_start: cur_pos_tensor is for decode and ROWS; a chunk takes chunk_start= only")
    if cur_pos is None:
        cur_pos = cur_pos_tensor
    if chunk_start is not None:
        if cur_pos is not None:
            raise ValueError("cur_pos, chunk_start: expected one of them (cur_pos for decode and rows, chunk_start "
                             "for a chunk), got both")
        if rows is not None:
            raise ValueError(f"rows: expected None with chunk_start (a chunk's rows are q's rows), got {rows!r}")
        return "chunk"
    if cur_pos is None:
        raise TypeError("attention() needs cur_pos= or cur_pos_tensor= (decode; with rows=, ROWS) or chunk_start= (a causal chunk)")
    if rows is None:
        return "decode"
    if not _is_int(rows) or rows < 1:
        raise ValueError(f"rows: expected None or a positive int (query rows per user), got {rows!r}")
    return "rows"


def _validate(q, k, v, cur_pos, chunk_start=None, rows=None, cur_pos_tensor=None, page_table_tensor=None,
              q_layout="rows") -> _Inputs:
    request_kind = _request_kind(cur_pos, chunk_start, rows, cur_pos_tensor)
    kind = _kind(q, "q")  # the output's kind
    kinds = {kind, _kind(k, "k"), _kind(v, "v")}
    if "device" in kinds and len(kinds) != 1:
        raise ValueError(
            f"q, k, v: expected device tensors for all three or none (host tensors and numpy arrays mix), got {sorted(kinds)}"
        )
    q_shape, k_shape, v_shape = _shape_of(q), _shape_of(k), _shape_of(v)
    if q_layout not in Q_LAYOUTS:
        raise ValueError(f"q_layout: expected one of {Q_LAYOUTS}, got {q_layout!r}")
    if q_layout == "heads":
        if request_kind != "decode":
            raise ValueError(f"q_layout: 'heads' ([1, batch, n_q_heads, head_dim]) is for decode only, got a {request_kind} call")
        if len(q_shape) != 4 or q_shape[0] != 1 or (len(k_shape) == 4 and q_shape[3] != k_shape[3]):
            raise ValueError(f"q: expected shape [1, batch, n_q_heads, head_dim] (q_layout 'heads'; head_dim = k's "
                             f"last dim), got {list(q_shape)}")
        # Checked below as [1, 1, batch, n_q_heads * head_dim]: the same heads, one row per user.
        q_shape = (1, 1, q_shape[1], q_shape[2] * q_shape[3])
    elif len(q_shape) != 4 or q_shape[:2] != (1, 1):
        raise ValueError(f"q: expected shape [1, 1, batch, n_q_heads * head_dim], got {list(q_shape)}")
    layout = ("[cache_blocks, n_kv_heads, block_size, head_dim] (paged: page_table_tensor given)"
              if page_table_tensor is not None else "[batch, n_kv_heads, capacity, head_dim]")
    if len(k_shape) != 4:
        raise ValueError(f"k: expected shape {layout}, got {list(k_shape)}")
    if v_shape != k_shape:
        raise ValueError(f"v: expected the shape of k {list(k_shape)}, got {list(v_shape)}")
    if min(k_shape) < 1:
        raise ValueError(f"k: expected every dimension >= 1, got {list(k_shape)}")
    kv_dtype = _kv_dtype(k)
    if _kv_dtype(v) != kv_dtype:
        got = _kv_dtype(v) if isinstance(v, ttnn.Tensor) else f"a {v.dtype} array (read as bfloat16)"
        raise ValueError(f"v: expected k's dtype ({kv_dtype}), got {got}")
    page_table = None
    cache_block_size = cache_blocks = 0
    if page_table_tensor is None:
        batch, n_kv_heads, capacity, head_dim = k_shape
    else:
        cache_blocks, n_kv_heads, cache_block_size, head_dim = k_shape
        if cache_block_size % 32:
            raise ValueError(f"k: expected a block size (dim 2 of a paged cache) that is a multiple of 32 (whole "
                             f"position tiles), got {cache_block_size}")
        batch, entries, page_table = _page_table_values(page_table_tensor, kind)
        capacity = entries * cache_block_size
    width = q_shape[3]
    # On a device Q is a TILE-layout tensor whose heads start on tile columns (DESIGN.md §5): each
    # head takes head_dim rounded up to 32 columns, zero-padded. The emulator pads host inputs itself.
    head_columns = -(-head_dim // 32) * 32 if kind == "device" and q_layout == "rows" else head_dim
    if width % head_columns:
        what = (f"head_dim {head_dim}" if head_columns == head_dim else
                f"{head_columns} (head_dim {head_dim} padded to whole tiles: on a device each head takes {head_columns} columns)")
        raise ValueError(f"q: expected a width that is a multiple of {what}, got {width}")
    n_q_heads = width // head_columns
    if n_q_heads % n_kv_heads:
        raise ValueError(
            f"GQA ratio: expected n_q_heads ({n_q_heads}) to be a multiple of n_kv_heads ({n_kv_heads})"
        )
    ratio = n_q_heads // n_kv_heads
    if ratio > protocol.MAX_Q_ROWS:
        raise ValueError(
            f"GQA ratio: expected at most {protocol.MAX_Q_ROWS} Q heads per KV head (one tile's rows), got {ratio}"
        )
    if -(-head_dim // 32) > MAX_DIM_TILES:
        raise ValueError(f"head_dim: expected <= {MAX_DIM_TILES * 32}, got {head_dim}")
    height = q_shape[2]
    batch_of = "page_table_tensor's rows" if page_table_tensor is not None else "k's batch"
    if request_kind == "decode":
        per_user = 1
        if height != batch:
            what = "users (dim 1" if q_layout == "heads" else "rows (one per user"
            raise ValueError(f"q: expected {batch} {what}, {batch_of}), got {height}")
        positions = _positions(cur_pos, cur_pos_tensor, batch, capacity, kind)
    elif request_kind == "rows":
        per_user = int(rows)
        if ratio * per_user > protocol.MAX_Q_ROWS:
            raise ValueError(
                f"rows: expected rows * GQA ratio <= {protocol.MAX_Q_ROWS} (one tile's rows per KV group), got "
                f"{per_user} * {ratio} = {per_user * ratio}"
            )
        if height != batch * per_user:
            raise ValueError(f"q: expected {batch * per_user} rows (rows={per_user} per user x batch {batch}, {batch_of}), "
                             f"got {height}")
        positions = _positions(cur_pos, cur_pos_tensor, batch, capacity, kind)
        name = "cur_pos" if cur_pos is not None else "cur_pos_tensor"
        for user, position in enumerate(positions or ()):
            if position != IDLE and position < per_user - 1:
                raise ValueError(
                    f"{name}[{user}]: expected >= rows - 1 = {per_user - 1} (the user's first row is position "
                    f"cur_pos - rows + 1), got {position}"
                )
    else:
        per_user = height // batch
        if height % batch or not 1 <= per_user <= protocol.MAX_Q_ROWS:
            raise ValueError(
                f"q: expected batch x C rows for a chunk (batch {batch}, {batch_of}; C = 1..{protocol.MAX_Q_ROWS} "
                f"positions per sequence), got {height}"
            )
        positions = _chunk_starts(chunk_start, batch, per_user, capacity)
    if kind == "device":
        _validate_device_tensors(q, k, v, q_layout)
    shape = DecodeShape(batch, n_q_heads, n_kv_heads, head_dim, capacity, kind=request_kind, rows=per_user,
                        cache_block_size=cache_block_size, cache_blocks=cache_blocks, kv_dtype=kv_dtype,
                        q_layout=q_layout)
    if page_table is not None and positions is not None:
        _check_page_table(page_table, shape, positions)
    device_positions = cur_pos_tensor if positions is None else None
    device_table = page_table_tensor if page_table_tensor is not None and page_table is None else None
    return _Inputs(shape, positions, kind, device_positions, page_table, device_table)


def _kv_dtype(tensor) -> str:
    """The K/V cache dtype the kernels read: a block-float ttnn.Tensor's (``"bfloat8_b"``,
    ``"bfloat4_b"``), else ``"bfloat16"`` (float32 inputs are rounded to it)."""
    return _BLOCK_FLOAT.get(tensor.dtype, "bfloat16") if isinstance(tensor, ttnn.Tensor) else "bfloat16"


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


def _page_table_values(tensor, kind: str) -> tuple[int, int, np.ndarray | None]:
    """``(batch, entries, values)`` of ``page_table_tensor`` (int32 ``[batch, entries]``, one
    page per user); ``values`` None for a device tensor. Raises as :func:`_int32_operand`."""
    values = _int32_operand("page_table_tensor", tensor, kind, lambda shape: len(shape) == 2 and min(shape) >= 1,
                            "[batch, blocks_per_user]")
    batch, entries = (int(d) for d in tensor.shape)
    return batch, entries, None if values is None else np.ascontiguousarray(values, dtype=np.int32)


def _check_page_table(table: np.ndarray, shape: DecodeShape, positions: Sequence[int]) -> None:
    """Every entry a request will read (the blocks holding its user's positions ``0 .. p``) names
    a block of the cache. Entries past a user's position are never read and may hold anything
    (-1 for unused, as serving stacks leave them).

    Raises:
        ValueError: naming the first entry outside ``0 .. cache_blocks - 1``.
    """
    kv = shape.kv_positions(positions)  # an idle slot (-1) reads nothing
    per_user = len(kv) // shape.batch
    for user in range(shape.batch):
        live = max(kv[user * per_user:(user + 1) * per_user])
        used = -(-live // shape.cache_block_size)
        row = table[user, :used]
        bad = np.flatnonzero((row < 0) | (row >= shape.cache_blocks))
        if bad.size:
            entry = int(bad[0])
            raise ValueError(
                f"page_table_tensor[{user}][{entry}]: expected a block of the cache (0..{shape.cache_blocks - 1}; "
                f"user {user} reads entries 0..{used - 1}), got {int(row[entry])}")


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
    if _is_int(value):
        if not broadcast:
            raise TypeError(f"{name}: expected {what}, got a single int")
        value = (value,) * batch
    elif isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise TypeError(f"{name}: expected {what}, got {type(value).__name__}")
    values = tuple(value)
    if len(values) != batch:
        raise ValueError(f"{name}: expected {batch} {noun}, got {len(values)}")
    for user, item in enumerate(values):
        if not _is_int(item):
            raise TypeError(f"{name}[{user}]: expected an int, got {type(item).__name__}")
        if not (0 <= item <= high or (idle and item == IDLE)):
            raise ValueError(f"{name}[{user}]: expected {rule}, got {item}")
    return tuple(int(item) for item in values)


def _positions(cur_pos, cur_pos_tensor, batch: int, capacity: int, kind: str) -> tuple[int, ...] | None:
    """The host-visible positions (validated), or None for a device ``cur_pos_tensor``."""
    name = "cur_pos"
    if cur_pos_tensor is not None:
        name = "cur_pos_tensor"
        cur_pos = _positions_tensor_values(cur_pos_tensor, batch, kind)
        if cur_pos is None:
            return None
    return _per_user_ints(name, cur_pos, batch, capacity - 1, noun="positions (one per user)",
                          rule=f"0 <= position < capacity {capacity}, or {IDLE} for an idle slot", broadcast=False,
                          idle=True)


def _positions_tensor_values(tensor, batch: int, kind: str) -> list[int] | None:
    """``cur_pos_tensor``'s values when the host can see them (int32 ``[batch]``), None for a
    device tensor. Raises as :func:`_int32_operand`."""
    values = _int32_operand("cur_pos_tensor", tensor, kind, lambda shape: shape == (batch,),
                            f"[{batch}] (one position per user)")
    return None if values is None else [int(value) for value in values]


def _chunk_starts(chunk_start, batch: int, length: int, capacity: int) -> tuple[int, ...]:
    return _per_user_ints("chunk_start", chunk_start, batch, capacity - length, noun="starts (one per sequence)",
                          rule=f"0 <= start <= capacity - C = {capacity - length} (C = {length} rows)", broadcast=True)


def _validate_device_tensors(q, k, v, q_layout: str = "rows") -> None:
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if tensor.dtype != ttnn.bfloat16 and not (name != "q" and tensor.dtype in _BLOCK_FLOAT):
            what = "bfloat16" if name == "q" else "bfloat16, bfloat8_b or bfloat4_b"
            raise ValueError(f"{name}: expected dtype {what}, got {tensor.dtype}")
        if tensor.layout != ttnn.TILE_LAYOUT:
            raise ValueError(f"{name}: expected TILE layout, got {tensor.layout}")
        config = tensor.memory_config()
        if name == "q" and q_layout == "heads" and _height_sharded_l1(config):
            continue  # nlp_create_qkv_heads_decode's Q: the reader's TensorAccessor finds its shards
        if config.buffer_type != ttnn.BufferType.DRAM or config.is_sharded():
            also = " or an L1 height-sharded one (q_layout 'heads')" if name == "q" and q_layout == "heads" else ""
            raise ValueError(f"{name}: expected a DRAM-interleaved tensor{also}, got {config}")
    devices = {t.device().id() for t in (q, k, v)}
    if len(devices) != 1:
        raise ValueError("q, k, v: expected tensors on one device, got tensors on different devices")
    chips = q.device().get_num_devices() if hasattr(q.device(), "get_num_devices") else 1
    if chips != 1:
        raise NotImplementedError(f"device: expected a single-chip (1x1) mesh, got {chips} chips; shard the batch per chip")


def _height_sharded_l1(config) -> bool:
    return config.buffer_type == ttnn.BufferType.L1 and config.memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED


def _check_block_tiles(shape: DecodeShape, requested: int | None, arch: str, fp32_stats: bool,
                       l1_budget: int | None) -> int:
    """The largest block that fits L1 unsplit; ``requested`` validated against it when given."""
    fit = max_block_tiles(shape.q_rows, shape.dim_tiles, 2048, arch, fp32_stats=fp32_stats, budget_bytes=l1_budget,
                          **shape.cache_fields)
    if fit == 0:
        where = f"L1 on {arch}" if l1_budget is None else f"the {l1_budget} bytes of L1 the device's allocator leaves for CBs"
        raise ValueError(f"head_dim: {shape.head_dim} ({shape.dim_tiles} tiles) does not fit {where} even with block_tiles 1")
    if requested is None:
        return fit
    if isinstance(requested, bool) or not isinstance(requested, (int, np.integer)) or requested < 1:
        raise ValueError(f"block_tiles: expected a positive int, got {requested!r}")
    if requested > fit:
        raise ValueError(f"block_tiles: expected <= {fit} (the largest that fits {arch} L1 for head_dim {shape.head_dim}), got {requested}")
    return int(requested)


def _default_block_tiles(shape: DecodeShape, upto: int, arch: str, max_split: int, fp32_stats: bool,
                         l1_budget: int | None, at_least: int | None = None) -> int:
    """A block b <= ``upto`` that fits L1 beside the split-K inbox and whose double block tiles the
    cache (2*b divides capacity_tiles, so every position up to capacity-1 has a padded window inside
    the cache): the smallest such b >= ``at_least`` (default ``upto``), else the largest below it;
    1 when none does."""
    at_least = upto if at_least is None else at_least
    fit = max_block_tiles(shape.q_rows, shape.dim_tiles, 2048, arch, max_split=max_split, fp32_stats=fp32_stats,
                          **shape.cache_fields,
                          budget_bytes=l1_budget)
    valid = [b for b in range(1, min(upto, fit) + 1) if shape.capacity_tiles % (2 * b) == 0]
    covering = [b for b in valid if b >= at_least]
    return min(covering) if covering else max(valid, default=1)


def _check_windows(plan: Plan) -> None:
    """Refuse a cache in which some position could not be attended: every request's padded read
    window (its live tiles rounded up to whole double blocks, the parameter block's contract) must
    lie inside the cache, and the longest window is the one at the cache's last position. Checked
    on every call, whatever the positions, so a cache that would fail once it fills up fails on
    the first call instead."""
    shape = plan.shape
    block, capacity_tiles = plan.residency.block_tiles, shape.capacity_tiles
    window = protocol.padded_tiles(shape.capacity, block)
    if window > capacity_tiles:
        multiple = 64 * block
        if shape.paged:  # the capacity is the table's: entries x block_size
            entries = multiple // math.gcd(multiple, shape.cache_block_size)
            fix = (f"give the page table a multiple of {entries} entries per user (pad rows with -1: entries past a "
                   f"user's position are never read)")
            where = f"page_table_tensor ({shape.page_table_entries} entries x block size {shape.cache_block_size})"
        else:
            fix = f"use a capacity that is a multiple of {multiple} positions"
            where = "k"
        raise ValueError(
            f"{where}: expected a KV cache of whole double blocks ({2 * block} position tiles, block_tiles {block}), so "
            f"that its last positions can be attended, got capacity {shape.capacity} positions "
            f"({capacity_tiles} tiles; the last position's padded read window is {window} tiles); "
            + fix + (" or a smaller block_tiles" if block > 1 else ""))


def attention(
    q,
    k,
    v,
    *,
    cur_pos: Sequence[int] | None = None,
    cur_pos_tensor=None,
    page_table_tensor=None,
    chunk_start: int | Sequence[int] | None = None,
    rows: int | None = None,
    scale: float | None = None,
    block_tiles: int | None = None,
    q_layout: str = "rows",
    compute_kernel_config=None,
    memory_config=None,
    split: int | None = None,
    backend: str = "auto",
):
    """Flash-decode GQA attention against a KV cache: decode, several rows per user, or a causal chunk.

    Q head ``h`` uses KV head ``h // (n_q_heads // n_kv_heads)``; every query row attends to
    positions ``0..p`` of its user's K/V, ``p`` its own position. Three request kinds:

    * **decode** (``cur_pos=``): one query row per user, at position ``cur_pos[b]``. One request
      per (user, KV group); the KV cache is read once per group.
    * **ROWS** (``cur_pos=`` and ``rows=P``): ``P`` consecutive query rows per user, the last at
      ``cur_pos[b]`` (row ``j`` of user ``b`` is position ``cur_pos[b] - P + 1 + j``), e.g. draft
      tokens to verify or several new tokens of one user. One request per (user, KV group) serves
      all ``P`` rows of all its Q heads: K/V read once.
    * **CHUNK** (``chunk_start=``): prefill of a chunk of ``C`` (1..32) consecutive positions per
      sequence, causal: row ``r`` (position ``chunk_start[b] + r``) attends to ``0..chunk_start[b]
      + r``. The chunk's own K/V must already be in the cache at ``chunk_start .. chunk_start +
      C - 1``. One request per (sequence, Q head).

    Each request runs on one core (or is cut into split-K slices over several) with an online
    softmax.

    Parameters:
        q: ``[1, 1, batch * R, n_q_heads * head_dim]``, activation layout, ``R`` query rows per
            user (1 for decode, ``rows`` for ROWS, the chunk length ``C`` for CHUNK); rows ``b * R
            .. b * R + R - 1`` are user ``b``'s, in position order. On a device: bfloat16, TILE
            layout, DRAM interleaved, whole-tile heads (``n_q_heads * ceil(head_dim / 32) * 32``
            columns, each head zero-padded to whole tiles; the output likewise). On the host: a numpy array (float32 or
            ``ml_dtypes.bfloat16``) or a host ``ttnn.Tensor``. With ``q_layout="heads"`` (decode
            only): ``[1, batch, n_q_heads, head_dim]``, ttnn's decode layout (on a device also L1
            height-sharded, as ``nlp_create_qkv_heads_decode`` leaves it).
        k, v: KV cache ``[batch, n_kv_heads, capacity, head_dim]``, same kind as ``q`` (numpy
            arrays and host tensors mix); with ``page_table_tensor``, a paged cache
            ``[cache_blocks, n_kv_heads, block_size, head_dim]`` (ttnn's paged layout, ``block_size``
            a multiple of 32). ttnn tensors may be bfloat16, ``ttnn.bfloat8_b`` or
            ``ttnn.bfloat4_b`` (TILE; block-float tiles of 1088 / 576 bytes, unpacked on the fly;
            numpy arrays are read as bfloat16); on a device DRAM interleaved. Tiles past the last live one are never
            read, and the slots past a request's position in its last live tile are zeroed in L1
            before compute, so anything there (NaN, inf: a recycled cache) never reaches the
            output; the positions a row attends must hold finite values.
        cur_pos: decode and ROWS: one int per user, the position of the user's last query row,
            ``0 <= cur_pos[b] < capacity`` (ROWS: ``>= rows - 1``), or -1 for an idle batch slot
            (no K/V read; its output rows are zero). Uploaded as a POSITIONS tensor: the same
            path as ``cur_pos_tensor``. ``None`` for CHUNK.
        cur_pos_tensor: decode and ROWS, instead of ``cur_pos``: the positions as a tensor the
            kernels read at run time, as ttnn's own op takes them -- trace-safe: one captured
            program serves every position written to it. On a device: int32, ROW_MAJOR, DRAM
            interleaved, ``batch`` entries (ttnn's ``cur_pos_tensor``); the host never reads it,
            so the kernels clamp an entry outside ``-1 .. capacity - 1`` into the cache (below -1:
            idle) rather than read outside it. On the emulator: a numpy int32 array or a host
            int32 ``ttnn.Tensor``, shape ``[batch]``, validated like ``cur_pos``.
        page_table_tensor: a paged cache's page table, int32 ``[batch, blocks_per_user]``:
            user ``b``'s positions ``i * block_size .. (i + 1) * block_size - 1`` live in cache
            block ``page_table_tensor[b][i]`` (``capacity = blocks_per_user * block_size``). The
            reader maps each position tile through it on device, a 256-entry chunk at a time
            (any table length), so a captured trace replays with new tables too. On a device:
            int32, ROW_MAJOR, DRAM interleaved (ttnn's ``page_table_tensor``); the host never reads
            it, and an entry outside ``0 .. cache_blocks - 1`` is never read (its tiles read as
            zeros; the reader reports it). On the emulator: a numpy int32 array or a host int32
            ``ttnn.Tensor``; the entries a call reads (a user's blocks up to its position) must be
            blocks of the cache; later entries may hold anything (e.g. -1). Blocks may be shared.
        chunk_start: CHUNK: the chunk's first position, one int for every sequence or one per
            sequence; ``0 <= chunk_start[b] <= capacity - C``. ``None`` (default) otherwise.
        rows: ROWS: query rows per user ``P``, ``1 <= P`` and ``P * (n_q_heads // n_kv_heads)
            <= 32``. ``None`` (default) for decode and CHUNK.
        scale: query scale, a finite positive number; default ``1/sqrt(head_dim)`` of the real head_dim.
        block_tiles: position tiles per K/V block (residency); default: the largest <= 16 that
            fits L1 and whose double block divides the cache's tiles.
        compute_kernel_config: ``ttnn.ComputeConfigDescriptor`` / ttnn compute config /
            :class:`~ttnn_flashdecode.program_factory.ComputeOptions`; default HiFi4 with fp32
            DST accumulation.
        memory_config: output memory config on a device; must be DRAM interleaved (default).
        split: split-K slices per request. ``None`` (default): the scheduler cuts long requests
            so every core of the grid gets about the same live tiles (short requests stay whole);
            ``1``: never split; ``k``: cut every request into ``k`` slices (some may be empty).
        backend: ``"auto"`` (device tensors -> device, otherwise emulator), ``"device"`` or
            ``"emulator"``.
        q_layout: ``"rows"`` (default, the activation layout above) or ``"heads"`` (decode: Q and
            the output ``[1, batch, n_q_heads, head_dim]``, read and written in place).

    Returns:
        The shape of ``q`` (``[1, 1, batch * R, n_q_heads * head_dim]``, row for row; with
        ``q_layout="heads"`` ``[1, batch, n_q_heads, head_dim]``) and of its kind: a device tensor
        (bfloat16 TILE, in ``memory_config``), a host ``ttnn.Tensor`` (bfloat16 ROW_MAJOR), or a
        numpy array of ``q``'s dtype.

    Raises:
        TypeError: an input is neither a ttnn.Tensor nor a numpy array; none of ``cur_pos``,
            ``cur_pos_tensor`` and ``chunk_start`` is given; ``cur_pos_tensor`` is not int32; ``cur_pos`` is not a sequence of ints; ``chunk_start`` is
            not an int or a sequence of ints.
        ValueError: shapes disagree (``q`` rows vs batch x rows per user, ``k`` vs ``v``, width
            not a multiple of head_dim, on a device of the tile-padded head), the GQA ratio is not an integer or exceeds 32, both
            ``cur_pos`` and ``chunk_start`` (or ``cur_pos`` and ``cur_pos_tensor``, or ``rows``
            or ``cur_pos_tensor`` with ``chunk_start``) are given, ``cur_pos_tensor`` or
            ``page_table_tensor`` has the wrong length, shape, layout, memory or storage (device vs
            host), a paged block size that is not a multiple of 32, a page-table entry the call
            reads that is not a block of the cache, K and V of different dtypes, a block-float Q,
            ``q_layout="heads"`` with ``rows`` or ``chunk_start`` or a Q that is not
            ``[1, batch, n_q_heads, head_dim]``,
            ``rows`` x GQA ratio exceeds 32, a chunk longer than 32, a position is negative or
            past capacity (ROWS: below ``rows - 1``; CHUNK: the chunk runs past capacity), a cache
            whose capacity is not a whole number of double blocks (its last positions' padded
            window would leave it; any position), head_dim or block_tiles does not fit L1 (on a
            device: what its L1 allocator leaves beside L1 tensors and ``l1_small_size``), a split
            larger than the grid or the reducer's L1 inbox allows, more requests than the grid's
            runtime-arg capacity, device tensors that are not bfloat16 (K/V: or block-float) / TILE /
            DRAM interleaved (Q and output of the heads layout: or L1 height-sharded) or live on
            different devices, a bad backend or memory_config. All raised
            before anything reaches a device.

    Example:
        >>> import numpy as np
        >>> from ttnn_flashdecode import attention
        >>> rng = np.random.default_rng(0)
        >>> q = rng.standard_normal((1, 1, 2, 4 * 64), dtype=np.float32)   # 2 users, 4 Q heads
        >>> k = rng.standard_normal((2, 2, 128, 64), dtype=np.float32)     # 2 KV heads
        >>> v = rng.standard_normal((2, 2, 128, 64), dtype=np.float32)
        >>> out = attention(q, k, v, cur_pos=[5, 100])                      # runs on the emulator
        >>> out.shape
        (1, 1, 2, 256)
        >>> rows = attention(np.repeat(q, 3, axis=2), k, v, cur_pos=[5, 100], rows=3)  # 3 rows per user
        >>> rows.shape
        (1, 1, 6, 256)
        >>> chunk = attention(q[:, :, :1].repeat(7, axis=2), k[:1], v[:1], chunk_start=40)  # positions 40..46
        >>> chunk.shape
        (1, 1, 7, 256)
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    if split is not None and (isinstance(split, bool) or not isinstance(split, (int, np.integer)) or not 1 <= split <= protocol.MAX_SPLIT):
        raise ValueError(f"split: expected None or an int in 1..{protocol.MAX_SPLIT}, got {split!r}")
    inputs = _validate(q, k, v, cur_pos, chunk_start, rows, cur_pos_tensor, page_table_tensor, q_layout)
    compute = ComputeOptions.from_config(compute_kernel_config)
    if scale is not None and not (
        isinstance(scale, (int, float, np.floating)) and not isinstance(scale, bool) and math.isfinite(scale) and scale > 0
    ):
        raise ValueError(f"scale: expected a finite positive number, got {scale!r}")
    run_on_device = backend == "device" or (backend == "auto" and inputs.kind == "device")
    if run_on_device:
        if inputs.kind != "device":
            raise ValueError(f"backend: 'device' expects device tensors, got {inputs.kind} inputs")
        return _run_on_device(q, k, v, inputs, scale, block_tiles, split, compute, memory_config)
    if memory_config is not None and memory_config != ttnn.DRAM_MEMORY_CONFIG:
        raise ValueError(f"memory_config: expected None or ttnn.DRAM_MEMORY_CONFIG on the emulator, got {memory_config}")
    _last_report.value = None
    return _run_on_emulator(q, k, v, inputs, scale, block_tiles, split, compute)


# ---------------------------------------------------------------- host arrays <-> tile pages

def to_numpy(tensor) -> np.ndarray:
    """``tensor`` as a numpy array: itself if it is one, else a ttnn.Tensor's values (float32 for
    bfloat16; read back from a device first), row-major."""
    if isinstance(tensor, np.ndarray):
        return tensor
    host = tensor.cpu() if tensor.storage_type() == ttnn.StorageType.DEVICE else tensor
    if host.layout != ttnn.ROW_MAJOR_LAYOUT:
        host = host.to(ttnn.ROW_MAJOR_LAYOUT)
    if host.dtype == ttnn.float32:
        return host.to_numpy()
    return np.asarray(host.to_list(), dtype=np.float32)


def _heads_padded(q: np.ndarray, shape: DecodeShape) -> np.ndarray:
    """``[1, 1, batch, n_q_heads*head_dim]`` -> ``[1, 1, batch, n_q_heads*dim_tiles*32]``: each head
    starts on a tile column (DESIGN.md §5)."""
    padded_dim = shape.dim_tiles * 32
    if padded_dim == shape.head_dim:
        return q
    heads = q.reshape(*q.shape[:3], shape.n_q_heads, shape.head_dim)
    out = np.zeros((*q.shape[:3], shape.n_q_heads, padded_dim), dtype=q.dtype)
    out[..., : shape.head_dim] = heads
    return out.reshape(*q.shape[:3], shape.n_q_heads * padded_dim)


def _heads_unpadded(out: np.ndarray, shape: DecodeShape) -> np.ndarray:
    padded_dim = shape.dim_tiles * 32
    heads = out.reshape(*out.shape[:3], shape.n_q_heads, padded_dim)[..., : shape.head_dim]
    return heads.reshape(*out.shape[:3], shape.n_q_heads * shape.head_dim)


def _positions_page(positions: Sequence[int]) -> np.ndarray:
    """The POSITIONS operand's one page: ``positions`` (per user: cur_pos, or the chunk start) as
    little-endian int32, ``4 * batch`` bytes."""
    return np.asarray(positions, dtype="<i4")


# ---------------------------------------------------------------- emulator backend

@functools.lru_cache(maxsize=4)
def _emulator(arch: str):
    from ttnn_flashdecode.emulator import Emulator

    return Emulator(arch=arch)


def _max_split(shape: DecodeShape, block_tiles: int, arch: str, grid_cores: int, fp32_stats: bool,
               l1_budget: int | None) -> int:
    """Most split-K slices per request: bounded by the grid, word 5's byte, and the L1 left beside
    blocks of ``block_tiles`` for the inbox (one partial per level of the combine tree)."""
    for split in range(min(protocol.MAX_SPLIT, grid_cores), 1, -1):
        residency = Residency(shape.q_rows, shape.dim_tiles, block_tiles, max_split=split, fp32_stats=fp32_stats,
                              **shape.cache_fields)
        if l1_bytes(residency) <= cb_budget_bytes(arch, l1_budget):
            return split
    return 1


@functools.lru_cache(maxsize=64)
def plan_program(shape: DecodeShape, block_tiles, split, compute: ComputeOptions, arch: str, grid,
                 accessor_args, noc_xy, l1_budget: int | None = None) -> Plan:
    """The plan :func:`attention` runs for these shapes, without running it (no device needed).

    Positions play no part (trace-safe: one program for every position vector): the requests are
    scheduled as if every one were at the cache's full capacity
    (:attr:`~ttnn_flashdecode.program_factory.DecodeShape.planned_kv_positions`), so a long cache
    splits every request into the same number of slices, and on device each slice takes its
    ``ceil``-balanced share of its request's live tiles. Then sizes the residency (block size,
    inbox, statistics format) and plans the program; plans are cached.

    Args:
        shape: validated shapes (:class:`~ttnn_flashdecode.program_factory.DecodeShape`).
        block_tiles: ``None`` for the op's default, else the caller's block (position tiles).
        split: ``None`` (by work), 1 (never) or a forced slice count.
        compute: compute-kernel options.
        arch: ``"wormhole_b0"`` or ``"blackhole"``.
        grid: compute grid ``(x, y)`` in cores.
        accessor_args: the seven operands' TensorAccessorArgs compile-time args (``program_factory.OPERANDS``).
        noc_xy: logical core -> NoC coordinate.
        l1_budget: L1 bytes for CBs (on a device, what its allocator leaves:
            :func:`ttnn_flashdecode.residency.device_cb_budget_bytes`); default: the arch's whole free L1.

    Raises:
        ValueError: as :func:`attention` for block size, split and request-count limits.
    """
    fp32_stats = compute.fp32_dest_acc_en
    fit = _check_block_tiles(shape, block_tiles, arch, fp32_stats, l1_budget)
    grid_cores = grid[0] * grid[1]
    # Room for the inbox is counted with the smallest block the planner may pick (1), or the
    # caller's block when given.
    max_split = 1 if split == 1 else _max_split(shape, block_tiles or 1, arch, grid_cores, fp32_stats, l1_budget)
    if split is not None and split > max_split:
        raise ValueError(f"split: expected <= {max_split} (grid cores, and L1 for the reducer's inbox on {arch}), got {split}")
    kv_positions = shape.planned_kv_positions
    per_core = max_requests_per_core(grid_cores if max_split > 1 else 0)
    if len(kv_positions) > grid_cores * per_core:
        heads = "n_q_heads" if shape.kind == "chunk" else "n_kv_heads"
        raise ValueError(
            f"requests: expected at most {grid_cores * per_core} (batch x {heads}) on a {grid[0]}x{grid[1]} grid "
            f"({per_core} per core), got {len(kv_positions)} ({shape.batch} x {shape.requests // shape.batch})"
        )
    plan_schedule = schedule(kv_positions, grid_cores, max_split=max_split, max_slices_per_core=per_core, split=split)
    largest = max(plan_schedule.split_count(r) for r in range(len(kv_positions)))
    if block_tiles is not None:
        blocks = block_tiles
    else:
        # A split request's slices are short: one block holds the longest when L1 allows, so every
        # slice goes max first (no rescale) and no block after a slice's first pays a rescale of the
        # running state (~85 compute calls, the cost model's later_blocks).
        longest = max(s.live_tiles(kv_positions[s.request]) for slices in plan_schedule.cores for s in slices)
        if largest == 1:
            blocks = _default_block_tiles(shape, min(DEFAULT_BLOCK_TILES, fit), arch, largest, fp32_stats, l1_budget)
        else:
            blocks = _default_block_tiles(shape, fit, arch, largest, fp32_stats, l1_budget, at_least=longest)
    residency = Residency(shape.q_rows, shape.dim_tiles, blocks, max_split=largest, fp32_stats=fp32_stats,
                          batch=shape.batch, **shape.cache_fields)
    return plan_decode(shape, residency, grid=grid, arch=arch, compute=compute, accessor_args=accessor_args,
                       schedule=plan_schedule, noc_xy=noc_xy, l1_budget_bytes=l1_budget)


@functools.lru_cache(maxsize=64)
def program_for(plan: Plan, addresses: Addresses):
    """The ``ttnn.ProgramDescriptor`` of ``plan`` for these operand addresses, built once and
    reused (a decode loop's addresses repeat; its positions live in the POSITIONS operand).

    Raises:
        ValueError: as :func:`~ttnn_flashdecode.program_factory.build_program`.
    """
    return build_program(plan, decode_requests(plan, addresses), addresses.positions, addresses.page_table)


@functools.lru_cache(maxsize=16)
def _constant_pages(head_dim: int, scale: float | None) -> np.ndarray:
    """The constants operand's pages, built once per (head_dim, scale): a model reuses them every call."""
    pages = constants.build_constants(head_dim, scale)
    pages.flags.writeable = False
    return pages


def _run_on_emulator(q, k, v, inputs: _Inputs, scale, block_tiles, split, compute: ComputeOptions):
    from ttnn_flashdecode.emulator import tensor_accessor_compile_time_args

    shape = inputs.shape
    emu = _emulator(DEFAULT_ARCH)
    q_np = to_numpy(q)
    q_pages = tiles.to_tile_bytes(_heads_padded(q_np, shape) if shape.q_layout == "rows" else q_np)
    if shape.kv_dtype == "bfloat16":
        kv_pages = [tiles.to_tile_bytes(to_numpy(t)) for t in (k, v)]
    else:  # the tensors' own packed pages (ttnn's host packing)
        kv_pages = [tiles.to_block_float_tile_bytes(t, shape.kv_dtype) for t in (k, v)]
    const_pages = _constant_pages(shape.head_dim, scale)
    buffers = []
    try:
        for pages in (q_pages, *kv_pages, const_pages):
            buffer = emu.allocate_dram(len(pages), pages.shape[1])
            buffers.append(buffer)
            emu.write_pages(buffer, pages)
        out_buffer = emu.allocate_dram(len(q_pages), q_pages.shape[1])
        buffers.append(out_buffer)
        emu.write_pages(out_buffer, np.zeros_like(q_pages))
        positions = _positions_page(inputs.positions)
        buffers.append(emu.allocate_dram(1, positions.nbytes))  # one page: the whole vector
        emu.write_pages(buffers[-1], positions)
        operands = list(buffers)
        if shape.paged:  # one page per user: its row
            table = inputs.page_table.astype("<i4")
            buffers.append(emu.allocate_dram(table.shape[0], table.shape[1] * 4))
            emu.write_pages(buffers[-1], table)
            operands.append(buffers[-1])
        accessor_args = operand_accessor_args([tensor_accessor_compile_time_args(b) for b in operands])
        plan = plan_program(shape, block_tiles, split, compute, DEFAULT_ARCH, tuple(emu.grid), accessor_args,
                            emu.worker_core_from_logical_core)
        _check_windows(plan)
        program = program_for(plan, Addresses(*(b.address for b in operands)))
        report = emu.run(program)
        result = tiles.from_tile_bytes(emu.read_pages(out_buffer), shape.q_tiled_shape)
    finally:
        for buffer in buffers:
            emu.free(buffer)
    _last_report.value = report
    if shape.q_layout == "rows":
        result = _heads_unpadded(result[:, :, :shape.q_height], shape)
    else:
        result = result[:, :, :shape.n_q_heads, :shape.head_dim]
    if inputs.kind == "host":
        return ttnn.Tensor(np.ascontiguousarray(result, dtype=np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT)
    return result.astype(q_np.dtype)


# ---------------------------------------------------------------- device backend

def _run_on_device(q, k, v, inputs: _Inputs, scale, block_tiles, split, compute: ComputeOptions, memory_config):
    shape = inputs.shape
    sharded_ok = shape.q_layout == "heads" and memory_config is not None and _height_sharded_l1(memory_config)
    if memory_config is not None and not sharded_ok and (
            memory_config.buffer_type != ttnn.BufferType.DRAM or memory_config.is_sharded()):
        also = " or (q_layout 'heads') L1 height-sharded" if shape.q_layout == "heads" else ""
        raise ValueError(f"memory_config: expected DRAM interleaved{also}, got {memory_config}")
    device = q.device()
    arch = "blackhole" if "BLACKHOLE" in str(device.arch()).upper() else "wormhole_b0"
    grid = device.compute_with_storage_grid_size()
    out = ttnn.allocate_tensor_on_device(
        q.shape, ttnn.bfloat16, ttnn.TILE_LAYOUT, device, memory_config or ttnn.DRAM_MEMORY_CONFIG
    )
    # The POSITIONS operand: the caller's cur_pos_tensor, or cur_pos uploaded as one (int32 [batch],
    # ROW_MAJOR, DRAM: one page). Under trace capture only the former works (no host writes).
    positions = inputs.positions_tensor
    if positions is None:
        positions = ttnn.Tensor(_positions_page(inputs.positions), ttnn.int32, device=device,
                                layout=ttnn.ROW_MAJOR_LAYOUT, mem_config=ttnn.DRAM_MEMORY_CONFIG)
    operands = (q, k, v, _device_constants(device, shape.head_dim, scale), out, positions)
    if shape.paged:  # with device inputs the page table is a device tensor (_int32_operand refuses others)
        operands += (inputs.page_table_tensor,)
    accessor_args = operand_accessor_args([ttnn.TensorAccessorArgs(t).get_compile_time_args() for t in operands])
    plan = plan_program(shape, block_tiles, split, compute, arch, (grid.x, grid.y), accessor_args,
                        _device_noc_xy(device), device_cb_budget_bytes(device))
    _check_windows(plan)
    program = program_for(plan, Addresses(*(t.buffer_address() for t in operands)))
    # A Tracy signpost names the call in ops_perf_results (profile-report reads it). ttnn.tracy_message
    # is what tracy.signpost sends, without its loguru INFO line on every call of a per-layer op.
    ttnn.tracy_message(f"`TT_SIGNPOST: ttnn_flashdecode.attention {shape.kind} batch={shape.batch} rows={shape.rows} "
                       f"heads={shape.n_q_heads}/{shape.n_kv_heads}`")
    # generic_op's last tensor is its output; the rest are inputs kept alive for the launch.
    return ttnn.generic_op([q, k, v, operands[3], *operands[5:], out], program)


@functools.lru_cache(maxsize=8)
def _device_noc_xy(device):
    """Logical worker core -> NoC coordinate on ``device`` (cached so plans cache per device)."""

    def noc_xy(x: int, y: int) -> tuple[int, int]:
        core = device.worker_core_from_logical_core(ttnn.CoreCoord(x, y))
        return core.x, core.y

    return noc_xy


_device_constants_cache: dict = {}


def _device_constants(device, head_dim: int, scale: float | None):
    """The constants operand on ``device``, uploaded once per (device id, head_dim, scale) and kept
    for the process's life (66 tiles, 132 KiB of DRAM)."""
    key = (device.id(), head_dim, scale)
    if key not in _device_constants_cache:
        tiles_rows = constants.constant_tiles(head_dim, scale).reshape(1, 1, protocol.ConstTile.COUNT * 32, 32)
        _device_constants_cache[key] = ttnn.Tensor(
            tiles_rows, ttnn.bfloat16, device=device, layout=ttnn.TILE_LAYOUT, mem_config=ttnn.DRAM_MEMORY_CONFIG
        )
    return _device_constants_cache[key]
