"""The fused KV-cache append into bfloat8_b caches (issue 37 part 2, item 1), on the emulator.

The reader packs each new bfloat16 row itself (``kernels/attention_append.hpp``
``pack_block_float_face_row<7>``: the face row's largest exponent shared, mantissas rounded half to even as
ttnn's host packer rounds). Each test pins the fused call against ttnn's update-then-attend: the
caches' values with the new rows set, packed again by ttnn's own host packer
(``ttnn.Tensor(x, ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT)``), then the plain call. Outputs are
compared bit for bit and the caches byte for byte (exponent section and data), so a face row
packed with a wrong exponent, rounding or sign, or written to the wrong place, fails.

On the emulator a bfloat8_b cache is a host ``ttnn.Tensor``; the fused call updates its host
buffer in place (``op/append.py`` ``_write_block_float``), as a device cache is updated.
"""

from __future__ import annotations

import numpy as np
import pytest

from ttnn_flashdecode import attention

from block_float_append import BlockFloatAppend

pytestmark = pytest.mark.usefixtures("mock_cluster")  # ttnn's block-float packer needs tt-metal's context


_APPEND = BlockFloatAppend("bfloat8_b")
_bytes = _APPEND.bytes
_assert_fused_equals_update_then_attend, _case = _APPEND.assert_fused_equals_update_then_attend, _APPEND.case


def _edge_rows(rng, shape) -> np.ndarray:
    """Rows ``[P, batch, n_kv, head_dim]`` (head_dim 64: four face rows each) of the packer's edge
    cases, one kind per (user, head) row: zeros (and -0), bfloat16 denormals beside normals, mixed
    signs on rounding ties, one huge value over small ones, values just under a power of two (round
    up past 127: clamped), and random rows."""
    rows = rng.standard_normal(shape, dtype=np.float32)
    flat = rows.reshape(-1, shape[-1])
    flat[0] = 0.0
    flat[0, 5::7] = -0.0
    flat[1] = np.float32(3e-39) * np.sign(rng.standard_normal(shape[-1]))  # bfloat16 denormals
    flat[1, 3] = 1e-38
    flat[2] = (1 + np.arange(shape[-1]) % 8 / 128) * np.where(np.arange(shape[-1]) % 3 == 0, -1, 1)  # ties
    flat[2, ::16] = 4.0  # the shared exponent two above: every other datum shifted by 2
    flat[3, :] = rng.standard_normal(shape[-1]) * 1e-3
    flat[3, 9] = -1e30  # one huge value: the rest round to 0 (sign dropped)
    flat[4] = 1.9921875 * np.where(rng.standard_normal(shape[-1]) > 0, 1, -1)  # 0x3fff: all mantissa bits set
    flat[4, ::16] = 0.99
    return rows


@pytest.mark.parametrize("split", [1, 3])
def test_bfp8_decode_append_equals_update_then_attend(split):
    q, k, v, new_k, new_v = _case(11)
    _assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, [5, 100, 255], split=split)


def test_bfp8_append_packs_edge_rows_as_ttnn_packs():
    """The packing itself, byte for byte against ttnn's host packer, on the edge rows."""
    rng = np.random.default_rng(12)
    q, k, v, _, _ = _case(12, batch=4)
    new_k = _edge_rows(rng, (1, 4, 2, 64))
    new_v = _edge_rows(rng, (1, 4, 2, 64))[:, ::-1].copy()
    _assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, [0, 47, 16, 200])


def test_bfp8_paged_append_through_a_shuffled_page_table():
    _APPEND.assert_paged_append_through_a_shuffled_page_table(13, _edge_rows)


def test_bfp8_rows_append_spanning_a_tile_edge():
    rows = 3
    q, k, v, new_k, new_v = _case(14, rows=rows)
    _assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, [33, 130, -1], rows=rows, split=2)


def test_bfp8_refused_append_leaves_the_cache_unchanged():
    """A refused call (rows of the wrong shape) writes nothing (bfloat4_b caches are taken:
    tests/test_fused_append_bfp4.py)."""
    q, k, v, new_k, new_v = _case(15)
    before = _bytes(k).copy(), _bytes(v).copy()
    with pytest.raises(ValueError, match="append_k: expected \\[rows, batch, n_kv_heads, head_dim\\]"):
        attention(q, k, v, cur_pos=[5, 100, 255], append_k=new_k[:, :, :1], append_v=new_v)
    np.testing.assert_array_equal(_bytes(k), before[0])
    np.testing.assert_array_equal(_bytes(v), before[1])


def test_bfp8_mla_append_latent_equals_update_then_attend():
    """MLA on a bfloat8_b latent (V is K, one cache): the row packed and written once."""
    _APPEND.assert_mla_append_latent_equals_update_then_attend(
        np.random.default_rng(16), lambda rng: _edge_rows(rng, (1, 5, 1, 96))[:, [1, 3]].copy(), [77, 127])  # denormals; one huge value


def test_bfp8_paged_dropin_append_equals_update_then_attend():
    """The paged GQA drop-in (ttnn's call) with append_k / append_v on bfloat8_b caches."""
    _APPEND.assert_paged_dropin_append_equals_update_then_attend(17)
