"""The fused KV-cache append into bfloat4_b caches, on the emulator.

ttnn's ``paged_update_cache`` / ``update_cache`` take BFLOAT4_B caches, so the fused append does
too. The reader packs each new bfloat16 row itself (``kernels/attention_append.hpp``
``pack_block_float_face_row<3>``: the face row's largest exponent shared, 3 magnitude bits rounded
half to even and clamped at 7, as ttnn's host packer packs), and the writer writes back the 16-byte
piece holding each 8-byte face row (a read-modify-write: the piece's other face row is the same
tile's, as read in this call). Each test pins the fused call against ttnn's update-then-attend:
the caches' values with the new rows set, packed again by ttnn's own host packer
(``ttnn.Tensor(x, ttnn.bfloat4_b, layout=ttnn.TILE_LAYOUT)``), then the plain call. Outputs are
compared bit for bit and the caches byte for byte (exponent section and data), so a face row packed
with a wrong exponent, rounding, nibble order or sign, written to the wrong place, or a neighbouring
face row clobbered by the 16-byte write-back, fails.

On the emulator a bfloat4_b cache is a host ``ttnn.Tensor``; the fused call updates its host
buffer in place (``op/append.py`` ``_write_block_float``), as a device cache is updated.
"""

from __future__ import annotations

import numpy as np
import pytest

from ttnn_flashdecode import attention

from block_float_append import BlockFloatAppend

pytestmark = pytest.mark.usefixtures("mock_cluster")  # ttnn's block-float packer needs tt-metal's context


_APPEND = BlockFloatAppend("bfloat4_b")
_bytes = _APPEND.bytes
_assert_fused_equals_update_then_attend, _case = _APPEND.assert_fused_equals_update_then_attend, _APPEND.case


def _edge_rows(rng, shape) -> np.ndarray:
    """Rows ``[P, batch, n_kv, head_dim]`` (head_dim 64: four face rows each) of the 3-bit packer's
    edge cases, one kind per (user, head) row: zeros (and -0), bfloat16 denormals beside normals,
    mixed signs on every 3-bit rounding tie (1 + m / 8: m odd is half-way; 1.875 rounds to 8, clamped
    at 7), those ties two exponents below the row's largest, one huge value over small ones, and
    random rows."""
    rows = rng.standard_normal(shape, dtype=np.float32)
    flat = rows.reshape(-1, shape[-1])
    signs = np.where(np.arange(shape[-1]) % 3 == 0, -1, 1)
    flat[0] = 0.0
    flat[0, 5::7] = -0.0
    flat[1] = np.float32(3e-39) * np.sign(rng.standard_normal(shape[-1]))  # bfloat16 denormals
    flat[1, 3] = 1e-38
    flat[2] = (1 + np.arange(shape[-1]) % 8 / 8) * signs  # every 3-bit tie, and 1.875 past the top
    flat[3] = (1 + np.arange(shape[-1]) % 16 / 16) * signs  # the shared exponent two above: shifted by 2
    flat[3, ::16] = 4.0
    flat[4, :] = rng.standard_normal(shape[-1]) * 1e-2
    flat[4, 9] = -1e30  # one huge value: the rest round to 0 (sign dropped)
    flat[5] = 1.9921875 * np.where(rng.standard_normal(shape[-1]) > 0, 1, -1)  # all mantissa bits set
    flat[5, ::16] = 0.99
    return rows


@pytest.mark.parametrize("split", [1, 3])
def test_bfp4_decode_append_equals_update_then_attend(split):
    q, k, v, new_k, new_v = _case(21)
    _assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, [5, 100, 255], split=split)


def test_bfp4_append_packs_edge_rows_as_ttnn_packs():
    """The packing itself, byte for byte against ttnn's host packer, on the edge rows; odd and even
    rows (the 16-byte write-back piece holds the face row and its neighbour), the tile's last row."""
    rng = np.random.default_rng(22)
    q, k, v, _, _ = _case(22, batch=6)
    new_k = _edge_rows(rng, (1, 6, 2, 64))
    new_v = _edge_rows(rng, (1, 6, 2, 64))[:, ::-1].copy()
    _assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, [0, 47, 16, 200, 31, 62])


def test_bfp4_paged_append_through_a_shuffled_page_table():
    _APPEND.assert_paged_append_through_a_shuffled_page_table(23, _edge_rows)


@pytest.mark.parametrize("positions", [[33, 130, -1], [34, 17, 255]])
def test_bfp4_rows_append_spanning_a_tile_edge(positions):
    """ROWS 3: rows 31..33 across a tile edge (rows 32 and 33 share a 16-byte piece), and pieces
    whose other face row is appended too or not (rows 32..34, 15..17 across a face edge)."""
    rows = 3
    q, k, v, new_k, new_v = _case(24, rows=rows)
    _assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, positions, rows=rows, split=2)


def test_bfp4_refused_append_leaves_the_cache_unchanged():
    """A refused call (rows of the wrong shape) writes nothing."""
    q, k, v, new_k, new_v = _case(25)
    before = _bytes(k).copy(), _bytes(v).copy()
    with pytest.raises(ValueError, match="append_k: expected \\[rows, batch, n_kv_heads, head_dim\\]"):
        attention(q, k, v, cur_pos=[5, 100, 255], append_k=new_k[:, :, :1], append_v=new_v)
    with pytest.raises(ValueError, match="append_v: expected \\[rows, batch, n_kv_heads, head_dim\\]"):
        attention(q, k, v, cur_pos=[5, 100, 255], append_k=new_k, append_v=new_v[:, :2])
    np.testing.assert_array_equal(_bytes(k), before[0])
    np.testing.assert_array_equal(_bytes(v), before[1])


def test_bfp4_mla_append_latent_equals_update_then_attend():
    """MLA on a bfloat4_b latent (V is K, one cache): the row packed and written once."""
    _APPEND.assert_mla_append_latent_equals_update_then_attend(
        np.random.default_rng(26), lambda rng: _edge_rows(rng, (1, 6, 1, 96))[:, [2, 4]].copy(), [77, 126])  # the ties; one huge value


def test_bfp4_paged_dropin_append_equals_update_then_attend():
    """The paged GQA drop-in (ttnn's call) with append_k / append_v on bfloat4_b caches."""
    _APPEND.assert_paged_dropin_append_equals_update_then_attend(27)
