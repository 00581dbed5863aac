"""The fused KV-cache append through the drop-ins (issue 37 part 2, item 2): ``append_k`` /
``append_v`` on ``scaled_dot_product_attention_decode`` / ``paged_scaled_dot_product_attention_decode``
and ``append_latent`` on the MLA drop-ins, on the emulator.

Each pins the fused drop-in call against ttnn's update-then-attend through the same drop-in: the
caches updated on the host as ``update_cache`` / ``paged_update_cache`` update them
(:func:`~ttnn_flashdecode.op.append.reference_update`), then the plain call; outputs bit for bit,
caches equal after. Refusals name the keyword and leave the caches unchanged.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode.op import mla, transformer
from ttnn_flashdecode.op.append import reference_update

from bars import run_quiet

BATCH, NQ, NKV, D, CAP = 3, 8, 2, 64, 256


def _bf16(rng, shape) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)


def _updated(cache, rows, positions, table=None, block_size=0):
    cache = cache.copy()
    reference_update(cache, rows, positions, table, block_size)
    return cache


def _assert_equal_caches(got, expected):
    np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("split", [1, 2])
def test_gqa_dropin_append_equals_update_then_attend(split):
    rng = np.random.default_rng(31)
    q = rng.standard_normal((1, BATCH, NQ, D), dtype=np.float32)
    k, v = _bf16(rng, (BATCH, NKV, CAP, D)), _bf16(rng, (BATCH, NKV, CAP, D))
    new_k, new_v = (rng.standard_normal((1, BATCH, NKV, D), dtype=np.float32) for _ in range(2))
    positions = [7, -1, 255]
    config = dict(cur_pos=positions, program_config=None)
    k_ref, v_ref = _updated(k, new_k, positions), _updated(v, new_v, positions)
    expected = run_quiet(transformer.scaled_dot_product_attention_decode, q, k_ref, v_ref, **config)
    out = run_quiet(transformer.scaled_dot_product_attention_decode, q, k, v, append_k=new_k, append_v=new_v, **config)
    np.testing.assert_array_equal(out, expected)
    _assert_equal_caches(k, k_ref)
    _assert_equal_caches(v, v_ref)


def test_paged_gqa_dropin_append_equals_update_then_attend():
    rng = np.random.default_rng(32)
    block_size = 64
    table = rng.permutation(BATCH * 4).reshape(BATCH, 4).astype(np.int32)
    q = rng.standard_normal((1, BATCH, NQ, D), dtype=np.float32)
    k, v = _bf16(rng, (BATCH * 4, NKV, block_size, D)), _bf16(rng, (BATCH * 4, NKV, block_size, D))
    new_k, new_v = (rng.standard_normal((1, BATCH, NKV, D), dtype=np.float32) for _ in range(2))
    positions = np.asarray([64, 130, -1], np.int32)
    k_ref, v_ref = _updated(k, new_k, positions, table, block_size), _updated(v, new_v, positions, table, block_size)
    call = transformer.paged_scaled_dot_product_attention_decode
    expected = run_quiet(call, q, k_ref, v_ref, table, cur_pos_tensor=positions)
    out = run_quiet(call, q, k, v, table, cur_pos_tensor=positions, append_k=new_k, append_v=new_v)
    np.testing.assert_array_equal(out, expected)
    _assert_equal_caches(k, k_ref)
    _assert_equal_caches(v, v_ref)


@pytest.mark.parametrize("paged", [False, True])
def test_mla_dropin_append_latent_equals_update_then_attend(paged):
    rng = np.random.default_rng(33)
    batch, n_q, head_dim, head_dim_v, block_size = 2, 16, 96, 64, 64
    q = rng.standard_normal((1, batch, n_q, head_dim), dtype=np.float32)
    new = rng.standard_normal((1, batch, 1, head_dim), dtype=np.float32)
    positions = np.asarray([77, 127], np.int32)
    if paged:
        table = rng.permutation(batch * 2).reshape(batch, 2).astype(np.int32)
        latent = _bf16(rng, (batch * 2, 1, block_size, head_dim))
        updated = _updated(latent, new, positions, table, block_size)

        def call(cache, **more):
            return mla.paged_flash_multi_latent_attention_decode(q, cache, None, head_dim_v, table,
                                                                 cur_pos_tensor=positions, **more)
    else:
        latent = _bf16(rng, (batch, 1, 128, head_dim))
        updated = _updated(latent, new, positions)

        def call(cache, **more):
            return mla.flash_multi_latent_attention_decode(q, cache, None, head_dim_v, cur_pos=list(positions), **more)
    expected = run_quiet(call, updated)
    out = run_quiet(call, latent, append_latent=new)
    np.testing.assert_array_equal(out, expected)
    _assert_equal_caches(latent, updated)


def test_dropin_append_refusals_write_nothing():
    import ttnn

    rng = np.random.default_rng(34)
    q = rng.standard_normal((1, BATCH, NQ, D), dtype=np.float32)
    k, v = _bf16(rng, (1, NKV, CAP, D)), _bf16(rng, (1, NKV, CAP, D))
    new = rng.standard_normal((1, BATCH, NKV, D), dtype=np.float32)
    before = k.copy(), v.copy()
    with pytest.raises(ValueError, match="append_k: not supported with share_cache=True"):
        transformer.scaled_dot_product_attention_decode(q, k, v, cur_pos=[1, 2, 3], share_cache=True, append_k=new,
                                                        append_v=new)
    table = np.arange(4, dtype=np.int32).reshape(1, 4)
    paged_k, paged_v = _bf16(rng, (4, NKV, 64, D)), _bf16(rng, (4, NKV, 64, D))
    paged_before = paged_k.copy()
    geometry = ttnn.PagedCacheGeometryOverride(block_size=128, num_kv_heads=1)
    with pytest.raises(ValueError, match="append_k: not supported with a paged_cache_geometry view"):
        transformer.paged_scaled_dot_product_attention_decode(
            q[:, :1], paged_k, paged_v, table, cur_pos_tensor=np.asarray([5], np.int32), paged_cache_geometry=geometry,
            append_k=new[:, :1], append_v=new[:, :1])
    latent = _bf16(rng, (BATCH, 1, 128, 96))
    latent_before = latent.copy()
    q_mla = rng.standard_normal((1, BATCH, 16, 96), dtype=np.float32)
    with pytest.raises(ValueError, match="append_latent: expected input_tensor_v None"):
        mla.flash_multi_latent_attention_decode(q_mla, latent, latent[..., :64].copy(), 64, cur_pos=[1, 2, 3],
                                                append_latent=new[..., :96])
    with pytest.raises(ValueError, match="append_latent: expected \\[rows, batch, n_kv_heads, head_dim\\]"):
        mla.flash_multi_latent_attention_decode(q_mla, latent, None, 64, cur_pos=[1, 2, 3],
                                                append_latent=rng.standard_normal((1, BATCH, 1, 64)).astype(np.float32))
    _assert_equal_caches(k, before[0])
    _assert_equal_caches(v, before[1])
    _assert_equal_caches(paged_k, paged_before)
    _assert_equal_caches(latent, latent_before)
