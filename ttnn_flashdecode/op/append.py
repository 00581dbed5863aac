"""The KV-cache append fused into the op: ``attention(..., append_k=, append_v=)`` (MLA:
``append_latent=``), host half. Device half: ``kernels/attention_append.hpp`` (where the rows are
patched into the K/V pages in L1 and who writes them back); docs: ``docs/options.md`` "append_k,
append_v".

Semantics: ttnn's ``paged_update_cache`` (``update_cache`` for a contiguous cache) followed by the
decode call, bit for bit (:func:`reference_update` is the update on the host). Each user's ``P``
new rows (``P`` = 1 for decode, ``rows`` for ROWS) go to positions ``cur_pos - P + 1 .. cur_pos``
of every KV head, through the page table; an idle user (-1) appends nothing.

Here: :func:`check_append` (every rule, before anything is written), :func:`append_named_args`,
:func:`append_pages` (the APPEND operand) and :func:`write_back` (the emulator's updated cache rows
into the caller's numpy cache: the cache is updated in place, as a device cache is)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import ttnn

from ttnn_flashdecode.op import tiles

__all__ = ["check_append", "append_named_args", "append_pages", "write_back", "reference_update", "AppendRows",
           "check_append_accessors", "check_shared_blocks"]

IDLE = -1


class AppendRows:
    """A call's validated append: ``k`` (and ``v``, None when V is K) as float32 ``[P, batch,
    n_kv_heads, head_dim]``, the bfloat16 values the cache will hold (host inputs), or the device
    tensors as given (the APPEND_K and APPEND_V operands)."""

    def __init__(self, k, v, rows: int):
        self.k, self.v, self.rows = k, v, rows


def append_named_args(shape) -> list[tuple[str, int]]:
    """The named compile-time args of ``attention_append.hpp``: rows appended per user (0: none),
    the GQA ratio and the KV heads (all 0 / 1 without an append, so no other program changes)."""
    if not shape.append:
        return [("append_rows", 0), ("append_gqa", 1), ("append_kv_heads", 0), ("append_batch", 0)]
    return [("append_rows", shape.append), ("append_gqa", shape.gqa_ratio), ("append_kv_heads", shape.n_kv_heads),
            ("append_batch", shape.batch)]


def _rows(tensor, name: str, dims: tuple, kind: str):
    """``tensor``, ttnn's update input ``[P, batch, n_kv_heads, head_dim]`` (``dims``), checked: host
    inputs as float32 rounded to bfloat16 (the cache's values), a device tensor as it is (bfloat16
    TILE, DRAM interleaved, on the call's device kind)."""
    if not isinstance(tensor, (np.ndarray, ttnn.Tensor)):
        raise TypeError(f"{name}: expected a numpy.ndarray or ttnn.Tensor, got {type(tensor).__name__}")
    shape = tuple(int(d) for d in tensor.shape)
    if shape != dims:
        raise ValueError(f"{name}: expected [rows, batch, n_kv_heads, head_dim] = {list(dims)} (ttnn's update input "
                         f"for this cache), got {list(shape)}")
    on_device = isinstance(tensor, ttnn.Tensor) and tensor.storage_type() == ttnn.StorageType.DEVICE
    if on_device != (kind == "device"):
        raise ValueError(f"{name}: expected a {'device' if kind == 'device' else 'host'} tensor like the cache's, got a "
                         f"{'device' if on_device else 'host'} {type(tensor).__name__}")
    if on_device:
        if tensor.dtype != ttnn.bfloat16 or tensor.layout != ttnn.TILE_LAYOUT or tensor.memory_config().is_sharded() \
                or tensor.memory_config().buffer_type != ttnn.BufferType.DRAM:
            raise ValueError(f"{name}: expected a bfloat16 TILE DRAM-interleaved device tensor, got {tensor.dtype} "
                             f"{tensor.layout} {tensor.memory_config()}")
        return tensor
    if isinstance(tensor, np.ndarray) and tensor.dtype not in (np.float32, ml_dtypes.bfloat16):
        raise ValueError(f"{name}: expected a float32 or bfloat16 array, got dtype {tensor.dtype}")
    if isinstance(tensor, ttnn.Tensor) and tensor.dtype not in (ttnn.bfloat16, ttnn.float32):
        raise ValueError(f"{name}: expected a bfloat16 or float32 tensor (ttnn's update input), got {tensor.dtype}")
    values = tensor if isinstance(tensor, np.ndarray) else _host_values(tensor)
    return np.ascontiguousarray(np.asarray(values, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32))


def _host_values(tensor) -> np.ndarray:
    """A host ``ttnn.Tensor``'s values as float32, any layout (TILE or ROW_MAJOR) at its logical
    shape, without torch: as ``op/launch.py``'s ``to_numpy`` reads host tensors."""
    if tensor.dtype == ttnn.float32:
        return np.asarray(tensor.to_numpy(), dtype=np.float32)
    return np.asarray(tensor.to_list(), dtype=np.float32)


def check_append(operands, shape, kind: str, *, positions=None, page_table=None,
                 attended=None) -> AppendRows | None:
    """The call's validated :class:`AppendRows`, or None without ``append_k``; ``shape`` is the call's
    :class:`~ttnn_flashdecode.op.shape.DecodeShape` (without the append), ``kind`` its inputs' kind;
    ``positions``, ``page_table`` (host-visible ones; None otherwise) and ``attended`` (each user's
    page-table entries read, as ``op/validate.py`` checks them) for the shared-block check.

    Raises:
        TypeError, ValueError: naming ``append_k`` / ``append_v``: rows of the wrong shape or dtype, a V
            missing (or given when V is K), or a call the fused append does not take (a chunk, a
            non-causal call, 16-position blocks, a circular cache, shared page-table rows, a block
            appended into that another user attends; on the emulator a bfloat16 cache not in numpy
            or a bfloat8_b / bfloat4_b cache not a host ttnn.Tensor). bfloat16, bfloat8_b and
            bfloat4_b caches are all taken (ttnn's update takes them): a block-float row is packed
            on the device as ttnn's host packer packs it (``kernels/attention_append.hpp``).
    """
    k_rows, v_rows = _latent_or_k(operands, shape)
    if k_rows is None:
        if v_rows is not None:
            raise ValueError(f"append_v: given without append_k: expected None (or append_k as well), got {_what(v_rows)}")
        return None
    _check_call(shape, kind, operands)
    values_from_keys = shape.values_from_keys
    if values_from_keys and v_rows is not None:  # the same object as append_k too: one cache takes its rows once
        raise ValueError("append_v: V is K (one cache, e.g. MLA's latent): the rows of append_k are appended once; "
                         f"expected None, got {_what(v_rows)}" + (" (append_k itself)" if v_rows is k_rows else ""))
    if not values_from_keys and v_rows is None:
        raise ValueError("append_v: expected V's new rows (append_k is given and V is its own cache), got None")
    if page_table is not None and positions is not None and attended is not None:
        check_shared_blocks(shape, positions, page_table, attended)
    dims = (shape.rows, shape.batch, shape.n_kv_heads, shape.head_dim)
    k = _rows(k_rows, "append_k" if operands.append_latent is None else "append_latent", dims, kind)
    v = None if values_from_keys else _rows(v_rows, "append_v", dims, kind)
    return AppendRows(k, v, shape.rows)


def _what(value) -> str:
    """``value`` for a refusal's "got": its type and, for an array or tensor, its shape."""
    shape = getattr(value, "shape", None)
    return type(value).__name__ + ("" if shape is None else f" of shape {[int(d) for d in shape]}")


def check_shared_blocks(shape, positions, page_table, attended) -> None:
    """Refuses, naming ``append_k``, a paged append into a block another live user's table row
    references among the entries it attends: that user's core may read the tile in the same call,
    before or after the row lands (the cache ends right, that user's output may not).

    Args:
        positions: each user's ``cur_pos`` (-1 idle).
        page_table: the host-visible table ``[rows, blocks_per_user]`` (one row a user here).
        attended: per user, the table entries its attention reads (an idle user's: empty).
    """
    readers: dict[int, list[tuple[int, int]]] = {}
    for user, entries in enumerate(attended):
        for entry in entries:
            readers.setdefault(int(page_table[user][entry]), []).append((user, int(entry)))
    for user, block, _row, _j in _cache_rows(shape, positions, page_table):
        others = [(reader, entry) for reader, entry in readers.get(block, ()) if reader != user]
        if others:
            reader, entry = others[0]
            raise ValueError(
                f"append_k: expected the blocks a user appends into to be read by no other user in the call (another "
                f"core may read the tile before or after the new row lands), got user {user} appending into block "
                f"{block}, which user {reader} attends (page_table_tensor[{reader}][{entry}]): give each user its own "
                f"last block, or append with ttnn's update first")


def _latent_or_k(operands, shape) -> tuple:
    """``(K rows, V rows)``: ``append_latent`` (MLA: V is K) as the K rows, else ``append_k`` / ``append_v``."""
    latent = operands.append_latent
    if latent is None:
        return operands.append_k, operands.append_v
    if operands.append_k is not None or operands.append_v is not None:
        given = ", ".join(f"{name} {_what(value)}" for name, value in (("append_k", operands.append_k),
                                                                       ("append_v", operands.append_v)) if value is not None)
        raise ValueError("append_latent: given with append_k / append_v: expected them None (the latent's rows are "
                         f"append_latent alone), got {given}")
    if not shape.values_from_keys:
        raise ValueError("append_latent: expected an MLA call whose V is the latent (v None with head_dim_v, or v is "
                         f"k); a separate V cache takes append_k and append_v, got a separate V ({type(operands.v).__name__}, "
                         "not k itself)")
    return latent, None


def _check_call(shape, kind: str, operands) -> None:
    """Refuses, naming ``append_k``, a call the fused append does not take."""
    refusals = [
        (shape.kind == "chunk", "a chunk (its K/V is in the cache already): decode and ROWS calls only"),
        (not shape.scores.causal, "a non-causal call (every row sits at the cache's end): causal calls only"),
        (shape.cache_half_blocks, "a paged cache of 16-position blocks: blocks of a multiple of 32 positions only"),
        (shape.cache_wrap != 0, "a circular cache (cache_position_modulo)"),
        (shape.users_per_table_row != 1, "users sharing a page-table row (users_per_table_row > 1)"),
        (shape.sparse_k != 0, "sparse_indices (a sparse call gathers rows, not the tile the new row is patched "
                              "into): append with a dense call first"),
        (kind != "device" and shape.kv_dtype == "bfloat16"
         and not (isinstance(operands.k, np.ndarray) and isinstance(operands.v, np.ndarray)),
         "host ttnn.Tensor bfloat16 caches: on the emulator the caches are numpy arrays, updated in place"),
    ]
    for refused, why in refusals:
        if refused:
            raise ValueError(f"append_k: not supported with {why}")
    for name in ("k", "v") if kind != "device" and shape.kv_dtype == "bfloat16" else ():
        cache = getattr(operands, name)
        if not cache.flags.writeable:
            raise ValueError(f"append_k: the {name} cache is read-only (the append updates it in place)")


def check_append_accessors(operand_args: list, rows_args: list) -> None:
    """The device reader addresses V through K's TensorAccessorArgs and the appended rows through
    CONST's (``attention_append.hpp``): refuses, naming them, a call where those differ.

    Args:
        operand_args: the call's TensorAccessorArgs lists in ``OPERANDS`` order (Q, K, V, CONST, ...).
        rows_args: those of ``append_k`` (and ``append_v``).
    """
    k_args, v_args, const_args = (list(operand_args[i]) for i in (1, 2, 3))
    if v_args != k_args:
        raise ValueError(f"append_k: expected K and V caches of one kind (TensorAccessorArgs {k_args} and {v_args})")
    for name, args in zip(("append_k", "append_v"), rows_args):
        if list(args) != const_args:
            raise ValueError(f"{name}: expected a DRAM-interleaved bfloat16 TILE tensor (TensorAccessorArgs "
                             f"{const_args}), got {list(args)}")


def append_pages(append: AppendRows) -> dict[str, np.ndarray]:
    """The APPEND_K (and APPEND_V) operands' pages (``attention_append.hpp``), by operand name:
    ``[P, batch, n_kv_heads, head_dim]`` in tiles, as a device tensor holds them."""
    pages = {"append": tiles.to_tile_bytes(append.k)}
    return pages if append.v is None else pages | {"append_v": tiles.to_tile_bytes(append.v)}


def _cache_rows(shape, positions, page_table):
    """``(user, cache index, row)`` of every appended position: ``cache[index, head, row]`` holds it
    (contiguous: index = user; paged: the page-table block)."""
    for user, position in enumerate(positions):
        if position == IDLE:
            continue
        for logical in range(position - shape.rows + 1, position + 1):
            if shape.paged:
                block, row = divmod(logical, shape.cache_block_size)
                yield user, int(page_table[user][block]), row, logical - (position - shape.rows + 1)
            else:
                yield user, user, logical, logical - (position - shape.rows + 1)


def write_back(operands, inputs, k_pages: np.ndarray, v_pages: np.ndarray | None) -> None:
    """Copies the appended rows the kernels wrote into the emulated K (and V) buffers, ``k_pages`` /
    ``v_pages``, into the caller's caches: numpy bfloat16 caches (only those rows: the rest of the
    buffer is the cache as uploaded), or host ttnn.Tensor bfloat8_b / bfloat4_b caches
    (:func:`_write_block_float`)."""
    shape = inputs.shape
    targets = [(operands.k, k_pages)] + ([] if v_pages is None or operands.v is operands.k else [(operands.v, v_pages)])
    for cache, pages in targets:
        if shape.kv_dtype != "bfloat16":
            _write_block_float(cache, pages)
            continue
        dims = tuple(int(d) for d in cache.shape)
        device = tiles.from_tile_bytes(pages, tiles.padded_shape(dims)).astype(np.float32)
        for _user, index, row, _j in _cache_rows(shape, inputs.positions, inputs.page_table):
            cache[index, :, row, :] = device[index, :, row, :dims[3]].astype(cache.dtype)


def _write_block_float(cache, pages: np.ndarray) -> None:
    """The emulated buffer ``pages`` (the uploaded pages of the host ttnn.Tensor ``cache`` with the
    kernels' 16-byte writes) into ``cache``'s own host buffer, in place: the caller's tensor (and
    every tensor sharing its storage, as a device cache would be) holds the appended rows. The
    buffer, exposed read-only through DLPack, is written through its address.

    Raises:
        ValueError: the buffer's size differs from the pages' (not the tensor uploaded).
    """
    import ctypes

    raw = np.from_dlpack(cache.host_buffer().get_shard(ttnn.MeshCoordinate(0, 0))).view(np.uint8)
    data = np.ascontiguousarray(pages, np.uint8).reshape(-1)
    if raw.size < data.size or not raw.flags.c_contiguous:
        raise ValueError(f"append_k: the {cache.dtype} cache's host buffer ({raw.size} bytes) is not the "
                         f"{data.size} bytes uploaded")
    ctypes.memmove(raw.ctypes.data, data.ctypes.data, data.size)


def reference_update(cache: np.ndarray, rows: np.ndarray, cur_pos, page_table=None, block_size: int = 0) -> None:
    """ttnn's ``update_cache`` / ``paged_update_cache`` on the host, in place: user ``b``'s rows
    ``rows[j, b]`` (``[P, batch, n_kv_heads, head_dim]``) into positions ``cur_pos[b] - P + 1 + j``
    of a bfloat16 cache (float32 or bfloat16 numpy holding bfloat16 values), through ``page_table``
    (paged, ``block_size`` positions a block); -1 appends nothing."""
    count = rows.shape[0]
    for user, position in enumerate(cur_pos):
        if position == IDLE:
            continue
        for j in range(count):
            logical = position - count + 1 + j
            if page_table is None:
                index, row = user, logical
            else:
                block, row = divmod(logical, block_size)
                index = int(page_table[user][block])
            cache[index, :, row, :] = rows[j, user].astype(ml_dtypes.bfloat16).astype(cache.dtype)
