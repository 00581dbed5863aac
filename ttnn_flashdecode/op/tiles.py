"""Tilize and untilize numpy arrays in Tenstorrent's 32x32 TILE layout, on the host.

The layout (the same bytes ttnn's host ``Tensor.to(ttnn.TILE_LAYOUT)`` produces; a test
checks that):

* The last two dims ``[rows, cols]`` are zero-padded up to whole 32x32 tiles.
* Tiles are stored in row-major tile order over those two dims (tile ``(tr, tc)`` is tile
  number ``tr * col_tiles + tc``), and the leading dims are row-major around that: a KV
  cache ``[batch, heads, positions, head_dim]`` is batch -> head -> position tile -> dim
  tile, so one head's position range is one contiguous run of tiles.
* Each tile is four 16x16 faces, f0 top-left, f1 top-right, f2 bottom-left,
  f3 bottom-right, each row-major. Element ``(r, c)`` of a tile (``0 <= r, c < 32``) is
  at index ``face * 256 + (r % 16) * 16 + c % 16`` with ``face = (r // 16) * 2 + c // 16``.
* A tile is one page: 1024 elements, 2048 bytes in bfloat16, 4096 bytes in float32,
  little-endian.

Block-float tiles (``ttnn.bfloat8_b`` / ``ttnn.bfloat4_b``, tt::DataFormat Bfp8_b / Bfp4_b) are
one page per tile as well: 64 shared exponents (one byte per face row, faces f0..f3, rows 0..15),
then the 1024 data in face order, one byte each (bfp8, 1088 B) or two per byte, datum 0 in the
low nibble (bfp4, 576 B). :func:`to_block_float_tile_bytes` packs with ttnn's own host packer, so
the pages are byte for byte what a ``ttnn.Tensor(x, ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT)``
holds (TT_FACTS §1). That packer needs tt-metal's context: without a card, set
``TT_METAL_MOCK_CLUSTER_DESC_PATH`` (see :func:`to_block_float_tile_bytes`).

Everything else here is pure, vectorised numpy (one reshape/transpose copy per call), so it is
usable on whole KV caches such as ``[32, 8, 8192, 128]``.

Example:
    >>> import numpy as np, ml_dtypes
    >>> x = np.arange(40 * 50, dtype=np.float32).reshape(40, 50)
    >>> tiles = tilize(x)
    >>> tiles.shape, tiles.dtype
    ((4, 1024), dtype(bfloat16))
    >>> float(tiles[0, 256 + 3 * 16 + 3]), float(x[3, 16 + 3])  # tile 0, face f1, (3, 3)
    (169.0, 169.0)
    >>> pages = to_tile_bytes(x)
    >>> pages.shape
    (4, 2048)
    >>> y = from_tile_bytes(pages, x.shape)
    >>> bool(np.array_equal(y.astype(np.float32), x.astype(ml_dtypes.bfloat16).astype(np.float32)))
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np

__all__ = [
    "TILE_ROWS",
    "TILE_COLS",
    "FACE_ROWS",
    "FACE_COLS",
    "TILE_ELEMENTS",
    "SUPPORTED_DTYPES",
    "tile_bytes",
    "padded_shape",
    "tile_count",
    "tilize",
    "untilize",
    "to_tile_bytes",
    "from_tile_bytes",
    "BLOCK_FLOAT_TILE_BYTES",
    "to_block_float_tile_bytes",
    "from_block_float_tile_bytes",
    "block_float_values",
]

TILE_ROWS = 32
TILE_COLS = 32
FACE_ROWS = 16
FACE_COLS = 16
TILE_ELEMENTS = TILE_ROWS * TILE_COLS

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_FLOAT32 = np.dtype(np.float32)
#: Element types a tile can hold here: bfloat16 (ttnn.bfloat16) and float32 (ttnn.float32).
SUPPORTED_DTYPES = (_BFLOAT16, _FLOAT32)
# The unsigned integer of the same width, used to fix the byte order of the pages.
_LITTLE_ENDIAN_BITS = {_BFLOAT16: np.dtype("<u2"), _FLOAT32: np.dtype("<u4")}


def _check_tile_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"expected tile dtype bfloat16 or float32, got {dtype}")
    return dtype


def _check_values(array: np.ndarray, what: str) -> None:
    if array.dtype != _BFLOAT16 and array.dtype.kind != "f":
        raise ValueError(f"expected a floating-point {what} (float16/32/64 or bfloat16), got {array.dtype}")
    if array.ndim < 2:
        raise ValueError(f"expected a {what} of at least 2 dims [..., rows, cols], got shape {array.shape}")


def _check_shape(shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(int(d) for d in shape)
    if len(shape) < 2:
        raise ValueError(f"expected a shape of at least 2 dims [..., rows, cols], got {shape}")
    if any(d < 0 for d in shape):
        raise ValueError(f"expected non-negative dims, got shape {shape}")
    return shape


def tile_bytes(dtype=ml_dtypes.bfloat16) -> int:
    """Return the size of one tile (one page) in bytes.

    Parameters:
        dtype: tile element type, ``ml_dtypes.bfloat16`` (default) or ``np.float32``.

    Returns:
        2048 for bfloat16, 4096 for float32.

    Raises:
        ValueError: ``dtype`` is neither bfloat16 nor float32.
    """
    return TILE_ELEMENTS * _check_tile_dtype(dtype).itemsize


def padded_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """Return ``shape`` with its last two dims rounded up to whole tiles.

    Parameters:
        shape: logical shape ``[..., rows, cols]`` in elements (at least 2 dims).

    Returns:
        ``(..., ceil(rows/32)*32, ceil(cols/32)*32)``; the leading dims are unchanged.

    Raises:
        ValueError: fewer than 2 dims, or a negative dim.
    """
    shape = _check_shape(shape)
    *lead, rows, cols = shape
    return (*lead, -(-rows // TILE_ROWS) * TILE_ROWS, -(-cols // TILE_COLS) * TILE_COLS)


def tile_count(shape: Sequence[int]) -> int:
    """Return how many tiles (pages) an array of logical ``shape`` occupies.

    Parameters:
        shape: logical shape ``[..., rows, cols]`` in elements (at least 2 dims).

    Returns:
        ``prod(leading dims) * ceil(rows/32) * ceil(cols/32)``.

    Raises:
        ValueError: fewer than 2 dims, or a negative dim.
    """
    padded = padded_shape(shape)
    return int(np.prod(padded[:-2], dtype=np.int64)) * (padded[-2] // TILE_ROWS) * (padded[-1] // TILE_COLS)


def tilize(array: np.ndarray, dtype=ml_dtypes.bfloat16) -> np.ndarray:
    """Convert a row-major array into TILE layout.

    Parameters:
        array: ``[..., rows, cols]`` floating-point array (float16/32/64 or bfloat16), any
            number of leading dims, any ``rows``/``cols`` (padded with zeros to whole tiles).
        dtype: element type of the result, ``ml_dtypes.bfloat16`` (default) or
            ``np.float32``. Values are cast with numpy's rounding (round to nearest even).

    Returns:
        A new C-contiguous array of shape ``[..., n_tiles, 1024]`` and type ``dtype``, where
        ``n_tiles = ceil(rows/32) * ceil(cols/32)`` in row-major tile order and each row of
        1024 is one tile in face order (see the module docstring). ``.reshape(-1, 1024)``
        gives the pages in buffer order.

    Raises:
        ValueError: ``array`` has fewer than 2 dims or is not floating point, or ``dtype``
            is neither bfloat16 nor float32.
    """
    dtype = _check_tile_dtype(dtype)
    array = np.asarray(array)
    _check_values(array, "array")
    *lead, rows, cols = array.shape
    *_, padded_rows, padded_cols = padded_shape(array.shape)
    row_tiles, col_tiles = padded_rows // TILE_ROWS, padded_cols // TILE_COLS

    if (padded_rows, padded_cols) != (rows, cols):
        padded = np.zeros((*lead, padded_rows, padded_cols), dtype=dtype)
        padded[..., :rows, :cols] = array
    else:
        padded = array.astype(dtype, copy=False)

    # [..., row_tiles, face_row, 16, col_tiles, face_col, 16]
    split = padded.reshape(*lead, row_tiles, 2, FACE_ROWS, col_tiles, 2, FACE_COLS)
    n = len(lead)
    # -> [..., row_tiles, col_tiles, face_row, face_col, 16, 16]
    order = (*range(n), n, n + 3, n + 1, n + 4, n + 2, n + 5)
    tiles = np.ascontiguousarray(split.transpose(order))
    return tiles.reshape(*lead, row_tiles * col_tiles, TILE_ELEMENTS)


def untilize(tiles: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Convert TILE-layout data back to a row-major array of logical ``shape``.

    Parameters:
        tiles: the tiles in buffer order, as :func:`tilize` returns them
            (``[..., n_tiles, 1024]``) or any reshaping of the same elements (e.g. flat);
            bfloat16 or float32.
        shape: the logical shape ``[..., rows, cols]`` in elements; the padding beyond
            ``rows``/``cols`` is dropped.

    Returns:
        A new C-contiguous array of ``shape`` with the dtype of ``tiles``.

    Raises:
        ValueError: ``shape`` has fewer than 2 dims or a negative dim, ``tiles`` is neither
            bfloat16 nor float32, or ``tiles`` does not hold exactly
            ``tile_count(shape) * 1024`` elements.
    """
    shape = _check_shape(shape)
    tiles = np.asarray(tiles)
    _check_tile_dtype(tiles.dtype)
    *lead, rows, cols = shape
    *_, padded_rows, padded_cols = padded_shape(shape)
    row_tiles, col_tiles = padded_rows // TILE_ROWS, padded_cols // TILE_COLS
    expected = tile_count(shape) * TILE_ELEMENTS
    if tiles.size != expected:
        raise ValueError(
            f"expected {expected} elements ({tile_count(shape)} tiles) for shape {shape}, got {tiles.size}"
        )
    split = tiles.reshape(*lead, row_tiles, col_tiles, 2, 2, FACE_ROWS, FACE_COLS)
    n = len(lead)
    # [..., row_tiles, col_tiles, face_row, face_col, 16, 16]
    # -> [..., row_tiles, face_row, 16, col_tiles, face_col, 16]
    order = (*range(n), n, n + 2, n + 4, n + 1, n + 3, n + 5)
    full = split.transpose(order).reshape(*lead, padded_rows, padded_cols)
    return np.ascontiguousarray(full[..., :rows, :cols])


def to_tile_bytes(array: np.ndarray, dtype=ml_dtypes.bfloat16) -> np.ndarray:
    """Convert a row-major array into the bytes of its TILE-layout buffer.

    Parameters:
        array: ``[..., rows, cols]`` floating-point array, as for :func:`tilize`.
        dtype: tile element type, ``ml_dtypes.bfloat16`` (default) or ``np.float32``.

    Returns:
        A ``uint8`` array of shape ``[n_pages, page_bytes]``: one row per tile in buffer
        order (leading dims, then row-major tiles), ``page_bytes = tile_bytes(dtype)``
        (2048 for bfloat16, 4096 for float32), elements little-endian.
        ``.tobytes()`` is the buffer ttnn holds for the same tensor.

    Raises:
        ValueError: as :func:`tilize`.
    """
    dtype = _check_tile_dtype(dtype)
    tiles = tilize(array, dtype).reshape(-1, TILE_ELEMENTS)
    bits = tiles.view(_LITTLE_ENDIAN_BITS[dtype].newbyteorder("=")).astype(_LITTLE_ENDIAN_BITS[dtype], copy=False)
    return bits.view(np.uint8).reshape(-1, TILE_ELEMENTS * dtype.itemsize)


def _raw_bytes(data) -> np.ndarray:
    """``data`` (bytes-like or a uint8 array) as a flat uint8 array, without copying when it can.

    Raises:
        ValueError: ``data`` is an array of another dtype.
    """
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8:
            raise ValueError(f"expected a uint8 array of tile bytes, got {data.dtype}")
        return np.ascontiguousarray(data).reshape(-1)
    return np.frombuffer(data, dtype=np.uint8)


def from_tile_bytes(data, shape: Sequence[int], dtype=ml_dtypes.bfloat16) -> np.ndarray:
    """Convert the bytes of a TILE-layout buffer back to a row-major array.

    Parameters:
        data: the buffer: ``bytes``, ``bytearray``, ``memoryview`` or a ``uint8`` array of
            any shape (e.g. the ``[n_pages, page_bytes]`` of :func:`to_tile_bytes`).
        shape: the logical shape ``[..., rows, cols]`` in elements.
        dtype: tile element type, ``ml_dtypes.bfloat16`` (default) or ``np.float32``.

    Returns:
        A new array of ``shape`` and type ``dtype``.

    Raises:
        ValueError: ``dtype`` is unsupported, ``data`` is a non-``uint8`` array, ``shape``
            is invalid, or ``data`` is not exactly ``tile_count(shape) * tile_bytes(dtype)``
            bytes long.
    """
    dtype = _check_tile_dtype(dtype)
    shape = _check_shape(shape)
    raw = _raw_bytes(data)
    expected = tile_count(shape) * tile_bytes(dtype)
    if raw.size != expected:
        raise ValueError(
            f"expected {expected} bytes ({tile_count(shape)} tiles of {tile_bytes(dtype)}) "
            f"for shape {shape}, got {raw.size}"
        )
    bits = raw.view(_LITTLE_ENDIAN_BITS[dtype]).astype(_LITTLE_ENDIAN_BITS[dtype].newbyteorder("="), copy=False)
    return untilize(bits.view(dtype), shape)


# --- block-float tiles (bfloat8_b, bfloat4_b), through ttnn's host packer -----------------

#: Bytes of one 32x32 block-float tile, by ttnn dtype name: 64 exponent bytes + the data.
BLOCK_FLOAT_TILE_BYTES = {"bfloat8_b": 64 + 1024, "bfloat4_b": 64 + 512}
_BFP_BITS = {"bfloat8_b": 8, "bfloat4_b": 4}


def _dtype_name(dtype) -> str:
    """A dtype's ttnn name: the string itself, or ``"bfloat8_b"`` for ``ttnn.bfloat8_b`` ("DataType.BFLOAT8_B")."""
    return dtype if isinstance(dtype, str) else str(dtype).rsplit(".", 1)[-1].lower()


def _block_float_name(dtype) -> str:
    """``"bfloat8_b"`` / ``"bfloat4_b"`` from that string or ``ttnn.bfloat8_b`` / ``ttnn.bfloat4_b``."""
    name = _dtype_name(dtype)
    if name not in BLOCK_FLOAT_TILE_BYTES:
        raise ValueError(f"expected a block-float dtype bfloat8_b or bfloat4_b, got {dtype!r}")
    return name


def _ttnn_bfp(name: str, direction: str, data: np.ndarray) -> np.ndarray:
    """ttnn's ``bfp_utils.{pack,unpack}_bfp{8,4}`` on face-ordered tiles, with a hint when there is no
    tt-metal context (the packer asks tt-metal's HAL for the L1 alignment, and the HAL needs chips)."""
    import ttnn

    fn = getattr(ttnn._ttnn.bfp_utils, f"{direction}_bfp{_BFP_BITS[name]}")
    try:
        if direction == "pack":
            return fn(data, row_major_input=False, is_exp_a=False)
        return fn(data, row_major_output=False, is_exp_a=False)
    except RuntimeError as error:
        if "No chips detected" not in str(error) and "num_chips > 0" not in str(error):
            raise
        from ttnn_flashdecode.op.devices import MOCK_CLUSTER_ENV, mock_cluster_descriptor

        raise RuntimeError(
            f"ttnn's {name} packer needs tt-metal's context, which found no chips; without a card call "
            f"ttnn_flashdecode.op.devices.ensure_host_context() (or set {MOCK_CLUSTER_ENV}="
            f"{mock_cluster_descriptor('wormhole_b0')}) before ttnn first needs it (once per process)"
        ) from error


def _tensor_block_float_bytes(tensor, name: str) -> np.ndarray:
    """The raw pages of a ttnn.Tensor of dtype ``name`` in TILE layout (read back from a device first)."""
    import ttnn

    if _dtype_name(tensor.dtype) != name:
        raise ValueError(f"expected a ttnn.Tensor of dtype {name}, got {tensor.dtype}")
    if tensor.layout != ttnn.TILE_LAYOUT:
        raise ValueError(f"expected a ttnn.Tensor in TILE layout, got {tensor.layout}")
    if list(tensor.tile.tile_shape) != [TILE_ROWS, TILE_COLS]:
        raise ValueError(f"expected 32x32 tiles, got a tile shape of {list(tensor.tile.tile_shape)}")
    if tensor.storage_type() == ttnn.StorageType.DEVICE:
        tensor = tensor.cpu()
    # A host tensor has one shard, at (0, 0): its buffer, page after page, exposed through DLPack.
    raw = np.from_dlpack(tensor.host_buffer().get_shard(ttnn.MeshCoordinate(0, 0))).view(np.uint8)
    shape = tuple(tensor.shape)
    expected = tile_count(shape) * BLOCK_FLOAT_TILE_BYTES[name]
    if raw.size != expected:
        raise ValueError(f"expected {expected} bytes for a {name} tensor of shape {shape}, its buffer has {raw.size}")
    return raw.reshape(-1, BLOCK_FLOAT_TILE_BYTES[name]).copy()


def to_block_float_tile_bytes(values, dtype) -> np.ndarray:
    """Convert an array, or a block-float ttnn.Tensor, into its block-float TILE-layout pages.

    Parameters:
        values: a ``[..., rows, cols]`` floating-point array (float16/32/64 or bfloat16; rows and
            cols are zero-padded to whole tiles as in :func:`tilize`; float64 is first rounded to
            float32, since ttnn packs float32), or a ``ttnn.Tensor`` of dtype ``dtype`` in TILE
            layout with 32x32 tiles (host or device), whose raw buffer is returned as is.
        dtype: ``"bfloat8_b"`` / ``"bfloat4_b"`` or ``ttnn.bfloat8_b`` / ``ttnn.bfloat4_b``.

    Returns:
        A ``uint8`` array ``[n_tiles, page_bytes]``, ``page_bytes`` 1088 (bfloat8_b) or 576
        (bfloat4_b), tiles in :func:`to_tile_bytes` order (leading dims row-major, then tile rows,
        then tile columns). Each page is 64 shared exponents (one per face row, f0..f3), then the
        data in face order: bfloat8_b ``sign<<7 | 7-bit magnitude``, value
        ``±mag * 2**(exp - 127 - 6)``; bfloat4_b ``sign<<3 | 3-bit magnitude``, datum 0 in the low
        nibble, value ``±mag * 2**(exp - 127 - 2)``. Packed by ttnn's host packer
        (``ttnn._ttnn.bfp_utils.pack_bfp8/pack_bfp4`` on the face-ordered float32 tiles): equal,
        byte for byte, to the buffer of ``ttnn.Tensor(x, dtype, layout=ttnn.TILE_LAYOUT)``.

    Raises:
        ValueError: ``dtype`` is not block-float; ``values`` is not floating point or has fewer
            than 2 dims; a tensor of another dtype, layout or tile shape.
        RuntimeError: no tt-metal context (no card and ``TT_METAL_MOCK_CLUSTER_DESC_PATH`` unset;
            every ttnn packing call, ``ttnn.Tensor(x, ttnn.bfloat8_b, ...)`` included, needs it).
    """
    name = _block_float_name(dtype)
    if not isinstance(values, np.ndarray) and hasattr(values, "host_buffer"):
        return _tensor_block_float_bytes(values, name)
    array = np.asarray(values)
    _check_values(array, "array")
    page = BLOCK_FLOAT_TILE_BYTES[name]
    flat = tilize(array, np.float32).reshape(-1)
    if flat.size == 0:
        return np.zeros((0, page), np.uint8)
    return _ttnn_bfp(name, "pack", flat).view(np.uint8).reshape(-1, page)


def from_block_float_tile_bytes(data, shape: Sequence[int], dtype) -> np.ndarray:
    """Dequantize block-float TILE-layout pages to a row-major float32 array, as ttnn does.

    Parameters:
        data: the pages: ``bytes``, ``bytearray``, ``memoryview`` or a ``uint8`` array of any shape
            (e.g. the ``[n_tiles, page_bytes]`` of :func:`to_block_float_tile_bytes`).
        shape: the logical shape ``[..., rows, cols]`` in elements.
        dtype: ``"bfloat8_b"`` / ``"bfloat4_b"`` or ``ttnn.bfloat8_b`` / ``ttnn.bfloat4_b``.

    Returns:
        A new float32 array of ``shape``: ttnn's host unpacker
        (``ttnn._ttnn.bfp_utils.unpack_bfp8/unpack_bfp4``), the values ``Tensor.to_numpy()`` gives.

    Raises:
        ValueError: ``dtype`` is not block-float, ``data`` is a non-``uint8`` array, ``shape`` is
            invalid, or ``data`` is not ``tile_count(shape) * page_bytes`` bytes long.
        RuntimeError: no tt-metal context, as for :func:`to_block_float_tile_bytes`.
    """
    name = _block_float_name(dtype)
    shape = _check_shape(shape)
    raw = _raw_bytes(data)
    page = BLOCK_FLOAT_TILE_BYTES[name]
    expected = tile_count(shape) * page
    if raw.size != expected:
        raise ValueError(
            f"expected {expected} bytes ({tile_count(shape)} {name} tiles of {page}) for shape {shape}, got {raw.size}"
        )
    if raw.size == 0:
        return np.zeros(shape, np.float32)
    words = np.require(raw.view("<u4"), requirements=["C", "A"])
    return untilize(_ttnn_bfp(name, "unpack", words).astype(np.float32, copy=False), shape)


def block_float_values(values, dtype) -> np.ndarray:
    """The float32 values ttnn stores for ``values`` in ``dtype``: its pack then unpack round trip.

    Parameters:
        values: as for :func:`to_block_float_tile_bytes` (an array, or a block-float ttnn.Tensor).
        dtype: ``"bfloat8_b"`` / ``"bfloat4_b"`` or ``ttnn.bfloat8_b`` / ``ttnn.bfloat4_b``.

    Returns:
        A new float32 array of the logical shape of ``values``, equal to
        ``ttnn.Tensor(x, dtype, layout=ttnn.TILE_LAYOUT).to_numpy()``; use it (as float64) as the
        reference input of a block-float K/V cache.

    Raises:
        As :func:`to_block_float_tile_bytes`.
    """
    shape = tuple(values.shape)
    return from_block_float_tile_bytes(to_block_float_tile_bytes(values, dtype), shape, dtype)
