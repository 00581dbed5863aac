"""Host tilize/untilize (ttnn_flashdecode.op.tiles): placement, padding, round trips, and
byte-for-byte agreement with ttnn's own host tilize."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttnn_flashdecode.op import tiles

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)


def _values(shape, seed=0, dtype=np.float32):
    """Distinct, nonzero values exact in bfloat16, so placement and padding are visible."""
    count = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 2.0, count) * rng.choice([-1.0, 1.0], count)
    return values.astype(ml_dtypes.bfloat16).astype(dtype).reshape(shape)


def _reference_tile_index(rows: int, cols: int, r: int, c: int) -> tuple[int, int]:
    """(tile number, index in tile) of element (r, c) of a [rows, cols] matrix, from the spec."""
    col_tiles = -(-cols // 32)
    tile = (r // 32) * col_tiles + c // 32
    tr, tc = r % 32, c % 32
    face = (tr // 16) * 2 + tc // 16
    return tile, face * 256 + (tr % 16) * 16 + tc % 16


# --- layout -----------------------------------------------------------------------------


def test_tilize_places_elements_in_faces():
    x = np.arange(64 * 96, dtype=np.float32).reshape(64, 96) % 251  # exact in bfloat16
    t = tiles.tilize(x, np.float32)
    assert t.shape == (2 * 3, 1024)
    # (row, col) -> (tile, index), worked by hand:
    cases = {
        (0, 0): (0, 0),  # f0 first element
        (0, 15): (0, 15),  # f0 end of first row
        (0, 16): (0, 256),  # f1 first element
        (1, 0): (0, 16),  # f0 second row
        (16, 0): (0, 512),  # f2 first element
        (16, 16): (0, 768),  # f3 first element
        (31, 31): (0, 1023),  # f3 last element
        (5, 20): (0, 256 + 5 * 16 + 4),  # f1
        (20, 3): (0, 512 + 4 * 16 + 3),  # f2
        (0, 32): (1, 0),  # next tile along the row
        (0, 64): (2, 0),
        (32, 0): (3, 0),  # tile row 1 starts at tile 3 (3 tile columns)
        (63, 95): (5, 1023),
    }
    for (r, c), (tile, index) in cases.items():
        assert t[tile, index] == x[r, c], f"element ({r}, {c}): expected at tile {tile} index {index}"
        assert _reference_tile_index(64, 96, r, c) == (tile, index)


def test_tilize_matches_spec_formula_everywhere():
    rows, cols = 70, 45
    x = _values((rows, cols))
    t = tiles.tilize(x, np.float32)
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    col_tiles = -(-cols // 32)
    tile = (r // 32) * col_tiles + c // 32
    face = ((r % 32) // 16) * 2 + (c % 32) // 16
    index = face * 256 + (r % 16) * 16 + c % 16
    np.testing.assert_array_equal(t[tile, index], x)


def test_tilize_orders_leading_dims_then_tiles():
    # [batch, heads, positions, head_dim]: batch -> head -> position tile -> dim tile.
    x = _values((2, 3, 64, 64))
    t = tiles.tilize(x, np.float32)
    assert t.shape == (2, 3, 4, 1024)
    flat = t.reshape(-1, 1024)
    for b in range(2):
        for h in range(3):
            for tr in range(2):
                for tc in range(2):
                    page = ((b * 3 + h) * 2 + tr) * 2 + tc
                    np.testing.assert_array_equal(
                        flat[page], tiles.tilize(x[b, h, tr * 32 : tr * 32 + 32, tc * 32 : tc * 32 + 32], np.float32)[0]
                    )


def test_tilize_pads_with_zeros():
    x = _values((3, 33, 17))  # all values nonzero
    t = tiles.tilize(x)
    assert t.shape == (3, 2, 1024)
    full = tiles.untilize(t, (3, 64, 32))
    assert np.count_nonzero(full[:, 33:, :].astype(np.float32)) == 0
    assert np.count_nonzero(full[:, :, 17:].astype(np.float32)) == 0
    assert np.count_nonzero(full[:, :33, :17].astype(np.float32)) == 3 * 33 * 17


def test_padded_shape_and_tile_count():
    assert tiles.padded_shape((1, 1)) == (32, 32)
    assert tiles.padded_shape((2, 8, 8192, 128)) == (2, 8, 8192, 128)
    assert tiles.padded_shape((5, 33, 65)) == (5, 64, 96)
    assert tiles.padded_shape((0, 0)) == (0, 0)
    assert tiles.tile_count((2, 8, 100, 128)) == 2 * 8 * 4 * 4
    assert tiles.tile_bytes() == 2048
    assert tiles.tile_bytes(np.float32) == 4096


# --- round trips ------------------------------------------------------------------------

shapes = st.tuples(
    st.lists(st.integers(1, 3), min_size=0, max_size=2),
    st.integers(1, 100),
    st.integers(1, 100),
).map(lambda t: (*t[0], t[1], t[2]))


@settings(max_examples=60, deadline=None)
@given(shape=shapes, dtype=st.sampled_from([BF16, F32]), seed=st.integers(0, 2**16))
def test_tilize_untilize_round_trip(shape, dtype, seed):
    x = _values(shape, seed, dtype)
    t = tiles.tilize(x, dtype)
    assert t.dtype == dtype
    assert t.shape == (*shape[:-2], tiles.tile_count(shape[-2:]), 1024)
    back = tiles.untilize(t, shape)
    assert back.dtype == dtype and back.shape == shape
    np.testing.assert_array_equal(back, x)
    # Flat input works too.
    np.testing.assert_array_equal(tiles.untilize(t.reshape(-1), shape), x)


@settings(max_examples=60, deadline=None)
@given(shape=shapes, dtype=st.sampled_from([BF16, F32]), seed=st.integers(0, 2**16))
def test_tile_bytes_round_trip(shape, dtype, seed):
    x = _values(shape, seed)
    pages = tiles.to_tile_bytes(x, dtype)
    assert pages.dtype == np.uint8
    assert pages.shape == (tiles.tile_count(shape), tiles.tile_bytes(dtype))
    expected = x.astype(dtype)
    np.testing.assert_array_equal(tiles.from_tile_bytes(pages, shape, dtype), expected)
    np.testing.assert_array_equal(tiles.from_tile_bytes(pages.tobytes(), shape, dtype), expected)


def test_tile_bytes_are_little_endian():
    x = np.zeros((32, 32), dtype=np.float32)
    x[0, 0] = 1.0  # bfloat16 0x3F80, float32 0x3F800000
    x[0, 16] = 2.0  # face f1 -> byte offset 256 elements in
    bf = tiles.to_tile_bytes(x)[0]
    assert bf[:2].tolist() == [0x80, 0x3F]
    assert bf[512:514].tolist() == [0x00, 0x40]
    f32 = tiles.to_tile_bytes(x, np.float32)[0]
    assert f32[:4].tolist() == [0x00, 0x00, 0x80, 0x3F]


def test_tilize_rounds_float32_to_nearest_even_bfloat16():
    # 1 + 2^-8 is halfway between bfloat16 1.0 and 1 + 2^-7: ties to even -> 1.0.
    # 1 + 3*2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even -> 1 + 2^-6.
    x = np.zeros((1, 2), dtype=np.float32)
    x[0] = [1 + 2**-8, 1 + 3 * 2**-8]
    t = tiles.tilize(x)
    assert float(t[0, 0]) == 1.0
    assert float(t[0, 1]) == 1 + 2**-6


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.zeros(5, np.float32), np.float32(1.0)])
def test_tilize_rejects_fewer_than_two_dims(bad):
    with pytest.raises(ValueError, match="at least 2 dims"):
        tiles.tilize(bad)


@pytest.mark.parametrize("bad", [np.zeros((2, 2), np.int32), np.zeros((2, 2), bool), np.zeros((2, 2), np.complex64)])
def test_tilize_rejects_non_float_input(bad):
    with pytest.raises(ValueError, match="floating-point"):
        tiles.tilize(bad)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, ml_dtypes.float8_e4m3fn])
def test_tilize_rejects_unsupported_tile_dtype(dtype):
    with pytest.raises(ValueError, match="bfloat16 or float32"):
        tiles.tilize(np.zeros((2, 2), np.float32), dtype)


def test_untilize_rejects_wrong_size():
    t = tiles.tilize(np.zeros((32, 64), np.float32))
    with pytest.raises(ValueError, match="expected 1024 elements"):
        tiles.untilize(t, (32, 32))
    with pytest.raises(ValueError, match="at least 2 dims"):
        tiles.untilize(t, (2048,))


def test_from_tile_bytes_rejects_wrong_length_and_type():
    pages = tiles.to_tile_bytes(np.zeros((32, 32), np.float32))
    with pytest.raises(ValueError, match="expected 4096 bytes"):
        tiles.from_tile_bytes(pages, (32, 64))
    with pytest.raises(ValueError, match="uint8"):
        tiles.from_tile_bytes(pages.view(np.uint16), (32, 32))


# --- agreement with ttnn ----------------------------------------------------------------


def _ttnn_tile_bytes(ttnn, x: np.ndarray, dtype) -> np.ndarray:
    """Tilize ``x`` with ttnn on the host and return the raw bytes of the result."""
    host = ttnn.Tensor(np.ascontiguousarray(x, dtype=np.float32), dtype)  # ROW_MAJOR, on host
    tiled = host.to(ttnn.TILE_LAYOUT)
    assert tiled.layout == ttnn.TILE_LAYOUT
    # One host shard per mesh coordinate; a plain host tensor has exactly one, at (0, 0).
    # Its buffer exposes DLPack: the bytes ttnn would copy to the device, page after page.
    shard = tiled.host_buffer().get_shard(ttnn.MeshCoordinate(0, 0))
    return np.from_dlpack(shard).view(np.uint8).copy()


@pytest.mark.parametrize(
    "shape",
    [(32, 32), (1, 1, 32, 64), (3, 40, 50), (2, 2, 70, 128), (1, 1, 1, 96), (2, 3, 64, 33)],
)
@pytest.mark.parametrize("dtype_name", ["bfloat16", "float32"])
def test_tile_bytes_equal_ttnn_host_tilize(mock_cluster, shape, dtype_name):
    """Our pages are byte-for-byte the pages ttnn's host tilize produces.

    Without a card, ``Tensor.to(TILE_LAYOUT)`` needs a mock cluster: tt-metal asks its
    (lazily created) context for the tile size and that context looks for chips. The
    ``mock_cluster`` fixture points ``TT_METAL_MOCK_CLUSTER_DESC_PATH`` at a one-chip
    descriptor (ttnn_flashdecode/op/mock_clusters/wormhole_b0.yaml); on a machine with a card the real cluster is used.
    """
    import ttnn  # a dependency of the package: fail, don't skip, if it is missing
    x = _values(shape, seed=sum(shape))
    ours = tiles.to_tile_bytes(x, BF16 if dtype_name == "bfloat16" else F32)
    theirs = _ttnn_tile_bytes(ttnn, x, getattr(ttnn, dtype_name))
    assert theirs.size == ours.size, f"expected {ours.size} bytes like ours, ttnn gave {theirs.size}"
    mismatched = np.flatnonzero(theirs != ours.reshape(-1))
    assert mismatched.size == 0, (
        f"{mismatched.size} bytes differ; first at byte {mismatched[0]}: ttnn {theirs[mismatched[0]]}, "
        f"ours {ours.reshape(-1)[mismatched[0]]}"
    )


# --- block-float pages (bfloat8_b, bfloat4_b), packed by ttnn ------------------------------

BLOCK_FLOAT = ["bfloat8_b", "bfloat4_b"]


def _hard_block_float_values(shape, seed=0) -> np.ndarray:
    """float32 values over many binades per face row, with zeros, negatives and a zero row."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-40, 40, shape))
    x.reshape(-1)[::5] = 0.0
    x[..., 0, :] = 0.0
    return x.astype(np.float32)


@pytest.mark.parametrize("shape", [(32, 32), (1, 1, 64, 128), (2, 3, 64, 96), (3, 40, 50), (1, 1, 1, 96)])
@pytest.mark.parametrize("name", BLOCK_FLOAT)
def test_block_float_pages_equal_ttnn_tensor_bytes(mock_cluster, shape, name):
    """Our pages are byte for byte the buffer of ttnn.Tensor(x, dtype, TILE_LAYOUT), padding included."""
    import ttnn

    x = _hard_block_float_values(shape, seed=sum(shape))
    ours = tiles.to_block_float_tile_bytes(x, name)
    assert ours.dtype == np.uint8 and ours.shape == (tiles.tile_count(shape), tiles.BLOCK_FLOAT_TILE_BYTES[name])
    tensor = ttnn.Tensor(x, getattr(ttnn, name), layout=ttnn.TILE_LAYOUT)
    theirs = np.from_dlpack(tensor.host_buffer().get_shard(ttnn.MeshCoordinate(0, 0))).view(np.uint8)
    mismatched = np.flatnonzero(theirs != ours.reshape(-1))
    assert mismatched.size == 0, f"{mismatched.size} bytes differ; first at byte {mismatched[0]}"
    # A block-float tensor gives its own bytes back, with the dtype as ttnn names it too.
    np.testing.assert_array_equal(tiles.to_block_float_tile_bytes(tensor, getattr(ttnn, name)), ours)


@pytest.mark.parametrize("name", BLOCK_FLOAT)
def test_block_float_values_equal_ttnn_round_trip(mock_cluster, name):
    """float64 references: the values are float32(x) through ttnn's pack and unpack, bit for bit."""
    import ttnn

    x = _hard_block_float_values((2, 64, 96), seed=3).astype(np.float64) * (1 + 2.0**-30)
    got = tiles.block_float_values(x, name)
    want = ttnn.Tensor(x.astype(np.float32), getattr(ttnn, name), layout=ttnn.TILE_LAYOUT).to_numpy()
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    pages = tiles.to_block_float_tile_bytes(x, name)
    np.testing.assert_array_equal(tiles.from_block_float_tile_bytes(pages.tobytes(), x.shape, name), got)


def test_block_float_page_layout_by_hand(mock_cluster):
    """Exponents per face row first; bfp8 one sign-magnitude byte per datum, bfp4 datum 0 in the low nibble."""
    x = np.zeros((32, 32), np.float32)
    x[0, :2] = [1.0, -0.5]  # f0 row 0: exponent 127; 1.0 = 0x40 (hidden bit), -0.5 = sign | 0x20
    x[0, 16] = 3.0  # f1 row 0: exponent 128
    x[17, 0] = 2.0**-100  # f2 row 1
    b8 = tiles.to_block_float_tile_bytes(x, "bfloat8_b")[0]
    b4 = tiles.to_block_float_tile_bytes(x, "bfloat4_b")[0]
    for page in (b8, b4):
        assert page[0] == 127 and page[16] == 128 and page[32 + 1] == 27 and page[1] == 0  # zero row: exponent 0
    assert b8[64] == 0x40 and b8[65] == 0x80 | 0x20 and b8[64 + 256] == 0x60  # 3.0 = 0x60 * 2^(128-133)
    assert b4[64] == 0x4 | (0x8 | 0x2) << 4 and b4[64 + 128] == 0x6  # value = mag * 2^(exp-127-2)


def test_block_float_rejects_bad_arguments(mock_cluster):
    import ttnn

    with pytest.raises(ValueError, match="bfloat8_b or bfloat4_b"):
        tiles.to_block_float_tile_bytes(np.zeros((32, 32)), "bfloat16")
    pages = tiles.to_block_float_tile_bytes(np.zeros((32, 32)), "bfloat4_b")
    with pytest.raises(ValueError, match="expected 1152 bytes"):
        tiles.from_block_float_tile_bytes(pages, (32, 64), "bfloat4_b")
    with pytest.raises(ValueError, match="uint8"):
        tiles.from_block_float_tile_bytes(pages.view(np.uint32), (32, 32), "bfloat4_b")
    tensor = ttnn.Tensor(np.zeros((32, 32), np.float32), ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT)
    with pytest.raises(ValueError, match="dtype bfloat4_b"):
        tiles.to_block_float_tile_bytes(tensor, "bfloat4_b")
    with pytest.raises(ValueError, match="dtype bfloat8_b"):
        tiles.to_block_float_tile_bytes(ttnn.Tensor(np.zeros((32, 32), np.float32), ttnn.float32), "bfloat8_b")


def test_block_float_without_context_names_the_mock_cluster(tmp_path):
    """Without a card and without TT_METAL_MOCK_CLUSTER_DESC_PATH, ttnn's packer cannot run: the error says what to set."""
    import glob
    import os
    import subprocess
    import sys

    if glob.glob("/dev/tenstorrent/*"):
        pytest.skip("a Tenstorrent card is present: the packer has a context")
    env = {k: v for k, v in os.environ.items() if k != "TT_METAL_MOCK_CLUSTER_DESC_PATH"}
    code = ("import numpy as np; from ttnn_flashdecode.op import tiles\n"
            "try:\n    tiles.to_block_float_tile_bytes(np.ones((32, 32)), 'bfloat8_b')\n"
            "except RuntimeError as e:\n    print('HINT', e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120)
    assert "HINT" in run.stdout and "TT_METAL_MOCK_CLUSTER_DESC_PATH=" in run.stdout, run.stdout + run.stderr[-2000:]
