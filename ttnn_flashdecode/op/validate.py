"""Validation of an :func:`~ttnn_flashdecode.attention` call: everything checked on the host
before anything is planned or reaches a device.

:func:`validate_inputs` turns the user's tensors and keywords into :class:`Inputs`: the call's
:class:`~ttnn_flashdecode.op.shape.DecodeShape` and the host-visible positions and page
table. Every refusal is a ``ValueError`` / ``TypeError`` of the form "name: expected ..., got ..."
(STYLE: FlashInfer's errors).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import ml_dtypes
import numpy as np
import ttnn

from ttnn_flashdecode.op import kv_walk, protocol
from ttnn_flashdecode.op.append import check_append
from ttnn_flashdecode.op.modifiers.mask import device_mask, mask_users, mask_values
from ttnn_flashdecode.op.modifiers.sink import sink_logits
from ttnn_flashdecode.op.operands import Operands
from ttnn_flashdecode.op.positions import IDLE, chunk_starts, page_table_values, positions_of
from ttnn_flashdecode.op.options import AttentionOptions, is_int
from ttnn_flashdecode.op.residency import MAX_DIM_TILES
from ttnn_flashdecode.op.shape import WRAPPED_POSITIONS, DecodeShape
from ttnn_flashdecode.op.sparse import SparseLists, check_sparse_call, sparse_lists

__all__ = ["IDLE", "Inputs", "validate_inputs", "height_sharded_l1"]




@dataclasses.dataclass(frozen=True)
class Inputs:
    shape: DecodeShape
    #: per user: cur_pos (decode, rows; -1 idle) or chunk start (chunk); None when only a device
    #: tensor holds them (cur_pos_tensor on a device: never read by the host)
    positions: tuple[int, ...] | None
    kind: str  # "numpy", "host" (ttnn host tensor) or "device"
    positions_tensor: object = None  # cur_pos_tensor on a device, passed to the kernels as it is
    #: paged cache: the page table as int32 [batch, entries] when the host can see it, else None
    page_table: np.ndarray | None = None
    page_table_tensor: object = None  # page_table_tensor on a device, passed to the kernels as it is
    #: attention sinks: one logit per Q head (score units), appended to the constants operand; None: no sinks
    sink: tuple[float, ...] | None = None
    #: attention mask (non-causal): float32 [mask_users, n_q_heads, capacity] when the host holds it
    mask: np.ndarray | None = None
    mask_tensor: object = None  # a device attn_mask (or a sparse call's index lists), passed to the kernels as it is
    append: object = None  # the fused cache append's rows (op/append.py AppendRows), None without
    #: sparse decode: the index lists (host values or the device tensor), None for a dense call
    sparse: SparseLists | None = None


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


def _request_kind(operands: Operands, rows, causal: bool) -> str:
    """``"decode"``, ``"rows"`` or ``"chunk"`` from which of the positions are given (``cur_pos``
    and ``cur_pos_tensor`` are the same positions, as a list or a tensor); non-causal: decode, no
    positions (every row attends the whole cache)."""
    cur_pos, cur_pos_tensor, chunk_start = operands.cur_pos, operands.cur_pos_tensor, operands.chunk_start
    if not causal:
        given = [name for name, value in (("cur_pos", cur_pos), ("cur_pos_tensor", cur_pos_tensor),
                                          ("chunk_start", chunk_start), ("rows", rows)) if value is not None]
        if given:
            raise ValueError(f"is_causal: non-causal attention takes no positions (decode, every position of the cache "
                             f"attended), got {', '.join(given)}")
        return "decode"
    if operands.attn_mask is not None:
        raise ValueError("attn_mask: expected None with causal attention (an attention mask is for is_causal=False, "
                         "as ttnn's)")
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
    if not is_int(rows):
        raise TypeError(f"rows: expected None or an int (query rows per user), got {type(rows).__name__} {rows!r}")
    if rows < 1:
        raise ValueError(f"rows: expected None or a positive int (query rows per user), got {rows!r}")
    return "rows"


@dataclasses.dataclass(frozen=True)
class _Cache:
    """The KV cache's geometry as validated: ``[batch, n_kv_heads, capacity, head_dim]``, or paged."""

    batch: int
    n_kv_heads: int
    capacity: int
    head_dim: int
    kv_dtype: str
    cache_block_size: int = 0
    cache_blocks: int = 0
    page_table: np.ndarray | None = None
    cache_wrap: int = 0


def validate_inputs(operands: Operands, options: AttentionOptions) -> Inputs:
    """The call's :class:`Inputs`: its :class:`~ttnn_flashdecode.op.shape.DecodeShape` and what the
    host can see of its positions, page table, sinks and mask, every rule checked
    (:func:`~ttnn_flashdecode.attention`'s Raises).

    Raises:
        TypeError, ValueError: "name: expected ..., got ..." for the first rule a tensor breaks.
    """
    q, k, v = operands.q, operands.k, operands.v
    request_kind = _request_kind(operands, options.rows, options.scores.causal)
    kind = _kind(q, "q")  # the output's kind
    kinds = {kind, _kind(k, "k"), _kind(v, "v")}
    if "device" in kinds and len(kinds) != 1:
        raise ValueError(
            f"q, k, v: expected device tensors for all three or none (host tensors and numpy arrays mix), got {sorted(kinds)}"
        )
    q_shape = _q_shape(q, k, options.q_layout, request_kind)
    cache = _cache(operands, options, kind)
    window = options.scores.window or cache.cache_wrap  # ttnn's: a circular cache's window defaults to its slots
    n_q_heads = _q_heads(q_shape[3], cache.head_dim, cache.n_kv_heads, kind, options.q_layout, request_kind)
    per_user, positions = _rows_and_positions(operands, options, request_kind, cache, height=q_shape[2], kind=kind,
                                              ratio=n_q_heads // cache.n_kv_heads)
    if kind == "device":
        _validate_device_tensors(q, k, v, options.q_layout)
    else:
        _validate_host_cache_configs(k, v)
    _validate_memory_config(options.memory_config, options.q_layout)
    attn_mask = operands.attn_mask
    mask_count = 0 if attn_mask is None else mask_users(attn_mask, cache.batch, n_q_heads, cache.capacity, kind)
    scores = dataclasses.replace(options.scores, window=window, sink=operands.attention_sink is not None,
                                 mask_users=mask_count)
    sparse = None
    if operands.sparse_indices is not None:
        check_sparse_call(request_kind=request_kind, kv_dtype=cache.kv_dtype, scores=scores, cache_wrap=cache.cache_wrap,
                          users_per_table_row=options.users_per_table_row)
        sparse = sparse_lists(operands.sparse_indices, batch=cache.batch, n_kv_heads=cache.n_kv_heads,
                              capacity=cache.capacity, positions=positions, kind=kind,
                              cache_block_size=cache.cache_block_size)
    shape = DecodeShape(cache.batch, n_q_heads, cache.n_kv_heads, cache.head_dim, cache.capacity, kind=request_kind,
                        rows=per_user, cache_block_size=cache.cache_block_size, cache_blocks=cache.cache_blocks,
                        kv_dtype=cache.kv_dtype, q_layout=options.q_layout, scores=scores, cache_wrap=cache.cache_wrap,
                        users_per_table_row=int(options.users_per_table_row), batch_invariant=options.batch_invariant,
                        lse=options.return_lse, values_from_keys=v is k,  # one tensor as both: each block read once
                        sparse_k=0 if sparse is None else sparse.k, sparse_heads=1 if sparse is None else sparse.heads)
    attended = None
    if cache.page_table is not None and positions is not None:
        attended = _check_page_table(cache.page_table, shape,
                                     positions if sparse is None else _sparse_reach(sparse, positions))
    # before anything is written: a refused call writes nothing
    rows = check_append(operands, shape, kind, positions=positions, page_table=cache.page_table, attended=attended)
    shape = shape if rows is None else dataclasses.replace(shape, append=rows.rows)
    inputs = dataclasses.replace(_inputs(shape, operands, kind, positions, cache.page_table), append=rows)
    if sparse is None:
        return inputs
    # A device list takes the MASK operand's slot (a sparse call has no mask): a page per list.
    tensor = sparse.tensor if sparse.tensor is None or len(sparse.tensor.shape) == 2 else \
        ttnn.reshape(sparse.tensor, ttnn.Shape([shape.batch * sparse.heads, sparse.k]))
    return dataclasses.replace(inputs, sparse=sparse, mask_tensor=tensor)


def _sparse_reach(sparse: SparseLists, positions):
    """A sparse call's page-table check: each user reads entries up to its lists' largest
    position (all of them when the host cannot see the lists; -1: none)."""
    if sparse.values is None:
        return positions
    return [int(max(lists.max(), -1)) if p != IDLE else IDLE for lists, p in zip(sparse.values, positions)]


def _inputs(shape: DecodeShape, operands: Operands, kind: str, positions, page_table) -> Inputs:
    """The validated call as :class:`Inputs`: device tensors passed on as the kernels read them."""
    device_positions = operands.cur_pos_tensor if positions is None else None
    if device_positions is not None and len(device_positions.shape) == 2:  # [b, 1]: one 4-byte page per user
        device_positions = ttnn.reshape(device_positions, ttnn.Shape([shape.batch]))  # the kernels read one page of b
    table_tensor = operands.page_table_tensor
    device_table = table_tensor if table_tensor is not None and page_table is None else None
    sink = None if operands.attention_sink is None else sink_logits(operands.attention_sink, shape.n_q_heads)
    mask = mask_tensor = None
    if operands.attn_mask is not None:
        if kind == "device":
            mask_tensor = device_mask(operands.attn_mask)
        else:
            mask = mask_values(operands.attn_mask).reshape(shape.scores.mask_users, shape.n_q_heads, shape.capacity)
    return Inputs(shape, positions, kind, device_positions, page_table, device_table, sink, mask, mask_tensor)


def _q_shape(q, k, q_layout: str, request_kind: str) -> tuple[int, int, int, int]:
    """Q's shape as ``[1, 1, rows, width]`` (the heads layout's ``[1, batch, heads, head_dim]`` as
    ``[1, 1, batch, heads * head_dim]``: the same heads, one row per user)."""
    q_shape, k_shape = _shape_of(q), _shape_of(k)
    if q_layout == "heads":
        if request_kind != "decode":
            raise ValueError(f"q_layout: 'heads' ([1, batch, n_q_heads, head_dim]) is for decode only, got a {request_kind} call")
        if len(q_shape) != 4 or q_shape[0] != 1 or (len(k_shape) == 4 and q_shape[3] != k_shape[3]):
            raise ValueError(f"q: expected shape [1, batch, n_q_heads, head_dim] (q_layout 'heads'; head_dim = k's "
                             f"last dim), got {list(q_shape)}")
        return (1, 1, q_shape[1], q_shape[2] * q_shape[3])
    if len(q_shape) != 4 or q_shape[:2] != (1, 1):
        raise ValueError(f"q: expected shape [1, 1, batch, n_q_heads * head_dim], got {list(q_shape)}")
    return q_shape


def _cache(operands: Operands, options: AttentionOptions, kind: str) -> _Cache:
    """The KV cache's geometry: K and V alike, contiguous or paged through the page table."""
    k, v, page_table_tensor = operands.k, operands.v, operands.page_table_tensor
    k_shape, v_shape = _shape_of(k), _shape_of(v)
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
    users_per_table_row = options.users_per_table_row
    if not is_int(users_per_table_row):
        raise TypeError(f"users_per_table_row: expected an int, got {type(users_per_table_row).__name__} "
                        f"{users_per_table_row!r}")
    if users_per_table_row < 1 or (users_per_table_row > 1 and page_table_tensor is None):
        raise ValueError(f"users_per_table_row: expected an int >= 1 (above 1 only with page_table_tensor), got "
                         f"{users_per_table_row!r}")
    if page_table_tensor is None:
        cache = _Cache(*k_shape, kv_dtype=kv_dtype)
    else:
        cache = _paged_cache(k_shape, kv_dtype, page_table_tensor, kind, users_per_table_row)
    wrap = _cache_wrap(options.cache_position_modulo, cache.cache_block_size, cache.capacity, options.scores.causal)
    return dataclasses.replace(cache, cache_wrap=wrap)


def _paged_cache(k_shape, kv_dtype: str, page_table_tensor, kind: str, users_per_table_row: int) -> _Cache:
    cache_blocks, n_kv_heads, cache_block_size, head_dim = k_shape
    if cache_block_size % 32 and cache_block_size != 16:
        raise ValueError(f"k: expected a block size (dim 2 of a paged cache) of 16 or a multiple of 32 (whole "
                         f"position tiles), got {cache_block_size}")
    if cache_block_size == 16 and kv_dtype != "bfloat16":
        raise ValueError(f"k: expected a bfloat16 cache with blocks of 16 positions (a block-float tile's top half "
                         f"is not one contiguous read), got {kv_dtype}")
    batch, entries, page_table = page_table_values(page_table_tensor, kind)
    batch *= users_per_table_row  # consecutive users share a row (ttnn's spec_multi_pos_tiles candidates)
    return _Cache(batch, n_kv_heads, entries * cache_block_size, head_dim, kv_dtype, cache_block_size, cache_blocks,
                  page_table)


def _q_heads(width: int, head_dim: int, n_kv_heads: int, kind: str, q_layout: str, request_kind: str) -> int:
    """Q heads in a Q row of ``width`` columns, checked against the KV heads (the GQA ratio)."""
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
    if ratio > protocol.MAX_Q_ROWS and (ratio % protocol.MAX_Q_ROWS or request_kind != "decode"):
        raise ValueError(
            f"GQA ratio: expected at most {protocol.MAX_Q_ROWS} Q heads per KV head (one tile's rows), or in decode a "
            f"multiple of {protocol.MAX_Q_ROWS} (one request per row tile of heads), got {ratio} ({request_kind})"
        )
    if -(-head_dim // 32) > MAX_DIM_TILES:
        raise ValueError(f"head_dim: expected <= {MAX_DIM_TILES * 32}, got {head_dim}")
    return n_q_heads


def _rows_and_positions(operands: Operands, options: AttentionOptions, request_kind: str, cache: _Cache, *, height: int,
                        kind: str, ratio: int) -> tuple[int, tuple[int, ...] | None]:
    """``(query rows per user, host-visible positions)`` of the request kind, Q's ``height`` rows
    checked against the batch."""
    batch = cache.batch
    position_capacity = WRAPPED_POSITIONS if cache.cache_wrap else cache.capacity
    batch_of = "page_table_tensor's rows" if operands.page_table_tensor is not None else "k's batch"
    if options.users_per_table_row > 1:
        batch_of += f" x users_per_table_row {options.users_per_table_row}"
    if request_kind == "chunk":
        per_user = height // batch
        if height % batch or not 1 <= per_user <= protocol.MAX_Q_ROWS:
            raise ValueError(
                f"q: expected batch x C rows for a chunk (batch {batch}, {batch_of}; C = 1..{protocol.MAX_Q_ROWS} "
                f"positions per sequence), got {height}"
            )
        return per_user, chunk_starts(operands.chunk_start, batch, per_user, position_capacity)
    per_user = 1 if request_kind == "decode" else int(options.rows)
    if request_kind == "decode" and height != batch:
        what = "users (dim 1" if options.q_layout == "heads" else "rows (one per user"
        raise ValueError(f"q: expected {batch} {what}, {batch_of}), got {height}")
    if request_kind == "rows" and ratio * per_user > protocol.MAX_Q_ROWS:
        raise ValueError(
            f"rows: expected rows * GQA ratio <= {protocol.MAX_Q_ROWS} (one tile's rows per KV group), got "
            f"{per_user} * {ratio} = {per_user * ratio}"
        )
    if request_kind == "rows" and height != batch * per_user:
        raise ValueError(f"q: expected {batch * per_user} rows (rows={per_user} per user x batch {batch}, {batch_of}), "
                         f"got {height}")
    if not options.scores.causal:  # every row attends the whole cache, i.e. sits at its last position
        return per_user, (cache.capacity - 1,) * batch
    positions = positions_of(operands.cur_pos, operands.cur_pos_tensor, batch, position_capacity, kind)
    name = "cur_pos" if operands.cur_pos is not None else "cur_pos_tensor"
    for user, position in enumerate(positions or ()):
        if position != IDLE and position < per_user - 1:
            raise ValueError(
                f"{name}[{user}]: expected >= rows - 1 = {per_user - 1} (the user's first row is position "
                f"cur_pos - rows + 1), got {position}"
            )
    return per_user, positions


def _kv_dtype(tensor) -> str:
    """The K/V cache dtype the kernels read: a block-float ttnn.Tensor's (``"bfloat8_b"``,
    ``"bfloat4_b"``), else ``"bfloat16"`` (float32 inputs are rounded to it)."""
    return _BLOCK_FLOAT.get(tensor.dtype, "bfloat16") if isinstance(tensor, ttnn.Tensor) else "bfloat16"


def _check_page_table(table: np.ndarray, shape: DecodeShape, positions: Sequence[int]) -> list[np.ndarray]:
    """Every entry a request will read (the blocks holding its user's positions ``0 .. p``; with a
    sliding window, from the block of the window's first tile; in a circular cache, the slots those
    positions wrap to) names a block of the cache. Entries
    past a user's position, or before its window, are never read and may hold anything (-1 for
    unused, as serving stacks leave them).

    Returns:
        Each user's table entries read (the fused append's shared-block check, ``op/append.py``).

    Raises:
        ValueError: naming the first entry outside ``0 .. cache_blocks - 1``.
    """
    kv = shape.kv_positions(positions)  # an idle slot (-1) reads nothing
    per_user = len(kv) // shape.batch
    attended = []
    for user in range(shape.batch):
        live = max(kv[user * per_user:(user + 1) * per_user])
        tiles = np.arange(kv_walk.window_first_tile(live, shape.scores.window, rows_per_head=shape.rows,
                                                    chunk=shape.scores.attention_chunk), -(-live // 32))
        first = kv_walk.cache_slot_tile(tiles, shape.cache_wrap_tiles) * 32  # each tile's first slot
        entries = np.unique(np.concatenate([first // shape.cache_block_size, (first + 31) // shape.cache_block_size]))
        table_row = user // shape.users_per_table_row
        attended.append(entries)
        row = table[table_row, entries]
        bad = np.flatnonzero((row < 0) | (row >= shape.cache_blocks))
        if bad.size:
            entry = int(entries[bad[0]])
            raise ValueError(
                f"page_table_tensor[{table_row}][{entry}]: expected a block of the cache (0..{shape.cache_blocks - 1}; "
                f"user {user} reads entries {int(entries[0])}..{int(entries[-1])}), got {int(table[table_row, entry])}")
    return attended


def _cache_wrap(value, cache_block_size: int, capacity: int, causal: bool) -> int:
    """``cache_position_modulo`` as :attr:`DecodeShape.cache_wrap` (0: none), checked as ttnn
    checks it: a circular cache is paged, its slots a positive multiple of the block size within
    the page table's capacity; causal only (the window fits in the slots: the window modifier's check).

    Raises:
        TypeError: not an int.
        ValueError: any other rule broken (named).
    """
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"cache_position_modulo: expected None or an int, got {type(value).__name__}")
    if not cache_block_size:
        raise ValueError("cache_position_modulo: expected None without page_table_tensor (a circular cache is paged, "
                         f"as ttnn's), got {value}")
    unit = max(cache_block_size, 32)  # slots wrap whole position tiles
    if not (0 < value <= capacity and value % unit == 0):
        raise ValueError(f"cache_position_modulo: expected a positive multiple of the block size {unit}, at "
                         f"most the page table's capacity {capacity}, got {value}")
    if not causal:
        raise ValueError("cache_position_modulo: expected None with is_causal=False (non-causal attention reads the "
                         f"whole cache in slot order), got {value}")
    return int(value)


def _validate_host_cache_configs(k, v) -> None:
    """A host K or V that carries a memory config must describe what the kernels read: a
    DRAM-interleaved cache (a sharded cache is not honoured on the emulator, so it is refused by name)."""
    for name, tensor in (("k", k), ("v", v)):
        config = tensor.memory_config() if isinstance(tensor, ttnn.Tensor) else None
        if config is not None and (config.is_sharded() or config.buffer_type != ttnn.BufferType.DRAM):
            raise ValueError(f"{name}: expected a DRAM-interleaved host cache (its memory config is what the kernels "
                             f"would read), got {config}")


def _validate_device_tensors(q, k, v, q_layout: str = "rows") -> None:
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if tensor.dtype != ttnn.bfloat16 and not (name != "q" and tensor.dtype in _BLOCK_FLOAT):
            what = "bfloat16" if name == "q" else "bfloat16, bfloat8_b or bfloat4_b"
            raise ValueError(f"{name}: expected dtype {what}, got {tensor.dtype}")
        if tensor.layout != ttnn.TILE_LAYOUT:
            raise ValueError(f"{name}: expected TILE layout, got {tensor.layout}")
        config = tensor.memory_config()
        if name == "q" and q_layout == "heads" and height_sharded_l1(config):
            continue  # nlp_create_qkv_heads_decode's Q: the reader's TensorAccessor finds its shards
        if config.buffer_type != ttnn.BufferType.DRAM or config.is_sharded():
            also = " or an L1 height-sharded one (q_layout 'heads')" if name == "q" and q_layout == "heads" else ""
            raise ValueError(f"{name}: expected a DRAM-interleaved tensor{also}, got {config}")
    devices = {t.device().id() for t in (q, k, v)}
    if len(devices) != 1:
        raise ValueError("q, k, v: expected tensors on one device, got tensors on different devices")
    # A multi-chip ttnn.MeshDevice is fine: its tensors have one device's shard shape (op/mesh.py).


def _validate_memory_config(config, q_layout: str) -> None:
    """The output's memory config: DRAM interleaved, or with the heads layout L1 height-sharded (its
    shard shape is checked against the grid when the output is placed)."""
    if config is None or (q_layout == "heads" and height_sharded_l1(config)):
        return
    if config.buffer_type != ttnn.BufferType.DRAM or config.is_sharded():
        also = " or (q_layout 'heads') L1 height-sharded" if q_layout == "heads" else ""
        raise ValueError(f"memory_config: expected DRAM interleaved{also}, got {config}")


def height_sharded_l1(config) -> bool:
    return config.buffer_type == ttnn.BufferType.L1 and config.memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
