"""constants.py: exact element values of all 66 tiles, and their bytes."""

import math

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode.op import constants, tiles
from ttnn_flashdecode.op.constants import MASK_VALUE
from ttnn_flashdecode.op.protocol import ConstTile

MASK_BF16 = float(np.float32(ml_dtypes.bfloat16(MASK_VALUE)))


def _decoded(head_dim, scale=None):
    data = constants.build_constants(head_dim, scale)
    return tiles.from_tile_bytes(data, (ConstTile.COUNT, 32, 32)).astype(np.float32)


def test_scaler_tile_is_one_in_row_zero_of_every_face_and_zero_elsewhere():
    scaler = _decoded(128)[ConstTile.SCALER]
    expected = np.zeros((32, 32), np.float32)
    expected[0, :] = 1.0  # faces 0 and 1, row 0
    expected[16, :] = 1.0  # faces 2 and 3, row 0
    np.testing.assert_array_equal(scaler, expected)
    # the same in face order: the first 16 elements of each 256-element face
    faces = tiles.tilize(expected).reshape(4, 256)
    assert (faces[:, :16] == 1).all() and (faces[:, 16:] == 0).all()


@pytest.mark.parametrize("head_dim", [64, 80, 128, 256])
def test_scale_tile_uses_the_real_head_dim(head_dim):
    scale = _decoded(head_dim)[ConstTile.SCALE]
    assert (scale == float(ml_dtypes.bfloat16(1 / math.sqrt(head_dim)))).all()


def test_explicit_scale_overrides_default():
    assert (_decoded(128, scale=0.5)[ConstTile.SCALE] == 0.5).all()


def test_tail_masks_kill_columns_at_and_above_t():
    values = _decoded(64)
    for t in range(32):
        mask = values[ConstTile.TAIL_MASK + t]
        assert (mask[:, :t] == 0).all(), t
        assert (mask[:, t:] == MASK_BF16).all(), t
    assert (values[ConstTile.TAIL_MASK] == MASK_BF16).all()  # mask 0 kills a whole tile


def test_causal_masks_live_iff_c_le_r_and_c_lt_length():
    values = _decoded(64)
    r, c = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    for length in range(1, 33):
        live = (c <= r) & (c < length)
        mask = values[ConstTile.CAUSAL_MASK + length - 1]
        np.testing.assert_array_equal(mask, np.where(live, 0.0, MASK_BF16).astype(np.float32))


def test_decode_tiles_do_not_depend_on_the_causal_block():
    data = constants.build_constants(128)
    decode_part = data[: ConstTile.CAUSAL_MASK]
    again = tiles.to_tile_bytes(constants.constant_tiles(128)[: ConstTile.CAUSAL_MASK])
    np.testing.assert_array_equal(decode_part, again)


def test_constants_bytes_is_66_tiles():
    assert constants.constants_bytes(2048) == 66 * 2048
    assert constants.build_constants(64).nbytes == constants.constants_bytes(2048)


def test_mask_value_kills_in_bfloat16():
    # exp(dead - live_max) must be exactly 0 in bf16 for any plausible live max
    assert float(ml_dtypes.bfloat16(np.exp(np.float32(MASK_BF16) - np.float32(-1e4)))) == 0.0


@pytest.mark.parametrize("bad", [dict(head_dim=0), dict(head_dim=64, scale=float("nan")), dict(head_dim=64, tile_bytes=4096)])
def test_build_constants_refuses_bad_arguments(bad):
    with pytest.raises(ValueError):
        constants.build_constants(**bad)


# sha256 of tiles 0..33 (scaler, scale, tail masks) as decode has read them since before CHUNK and
# ROWS modes existed; adding those modes must not move a byte of them.
DECODE_TILES_SHA256 = {
    64: "bb6b64dbf84368f37c9e1261f89a15bf8eb0d7654d5d1ea316a0396e573f0f9d",
    128: "a58df22a325916185d6e1d76ec2881e5cb7da496fbcbc517b580cb8080ddd627",
}


@pytest.mark.parametrize("head_dim", sorted(DECODE_TILES_SHA256))
def test_decode_tiles_are_byte_identical_with_chunk_and_rows_modes(head_dim):
    import hashlib

    data = constants.build_constants(head_dim)
    assert hashlib.sha256(data[: ConstTile.CAUSAL_MASK].tobytes()).hexdigest() == DECODE_TILES_SHA256[head_dim]


def test_decode_reads_only_tiles_below_the_causal_block():
    """Every constants tile a decode request reads whole is a tail mask (2..33); CHUNK and ROWS
    add the causal block (34..65) and rows of it."""
    from ttnn_flashdecode.op import protocol
    from ttnn_flashdecode.op import kv_walk

    for kv in range(1, 200):
        for tile in range(kv_walk.padded_tiles(kv, 1)):
            mask = kv_walk.mask_tile(kv, tile)
            assert mask == protocol.NO_MASK or ConstTile.TAIL_MASK <= mask < ConstTile.CAUSAL_MASK
    sources = {kv_walk.mask_row_source(width)[0] for width in range(33)}
    assert sources == set(range(ConstTile.TAIL_MASK, ConstTile.CAUSAL_MASK)) | {ConstTile.COUNT - 1}
