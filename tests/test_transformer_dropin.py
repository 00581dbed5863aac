"""The drop-in for ttnn's decode call, in a tt-transformers-style decode step (emulator).

The step: fused QKV projection of the token's hidden state, split into Q heads ``[1, b, nh, dh]``
and the new K/V rows (what ``nlp_create_qkv_heads_decode`` gives), cache update at each user's
position, attention through ``ttnn_flashdecode.transformer.scaled_dot_product_attention_decode``
(the call tt-transformers makes, swapped), heads concatenated. Compared with float64 on the same
cache; bar as tests/test_attention.py (PCC >= 0.9999, rel-L2 <= 1e-2 on bf16 inputs).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import ttnn

from ttnn_flashdecode.op import tiles, transformer
from ttnn_flashdecode.op.operation import to_numpy
from ttnn_flashdecode.op.reference import attention_reference, pcc, relative_l2

from bars import run_quiet

B, NQ, NKV, D, S, HIDDEN = 3, 8, 2, 64, 256, 128
BF16 = ml_dtypes.bfloat16


def _token_heads(rng):
    """The token's fused QKV projection split into heads (``nlp_create_qkv_heads_decode``): Q
    ``[1, b, nh, dh]`` (bfloat16) and each user's new K and V rows ``[b, nkv, dh]``."""
    x = rng.standard_normal((1, 1, B, HIDDEN), dtype=np.float32)
    wqkv = rng.standard_normal((HIDDEN, (NQ + 2 * NKV) * D), dtype=np.float32) / np.sqrt(HIDDEN)
    qkv = (x @ wqkv).reshape(B, NQ + 2 * NKV, D)
    return qkv[:, :NQ].reshape(1, B, NQ, D).astype(BF16), qkv[:, NQ:NQ + NKV], qkv[:, NQ + NKV:]


def _step(rng, k_cache, v_cache, cur_pos, **kwargs):
    q, new_k, new_v = _token_heads(rng)
    for user, position in enumerate(cur_pos):
        if position >= 0:
            k_cache[user, :, position] = new_k[user].astype(BF16)
            v_cache[user, :, position] = new_v[user].astype(BF16)
    attn = run_quiet(transformer.scaled_dot_product_attention_decode, q, k_cache, v_cache, cur_pos=cur_pos, **kwargs)
    concat = np.asarray(attn, dtype=np.float64).reshape(1, 1, B, NQ * D)  # nlp_concat_heads_decode
    want = attention_reference(q.reshape(1, 1, B, NQ * D), k_cache, v_cache, cur_pos=cur_pos, scale=kwargs.get("scale"))
    return concat, want


def _cache(rng):
    return (rng.standard_normal((B, NKV, S, D), dtype=np.float32).astype(BF16) for _ in range(2))


@pytest.mark.parametrize("kwargs", [{}, {"scale": 0.2}, {"program_config": "k_chunk_64"}])
def test_decode_step_with_the_drop_in_matches_float64(kwargs):
    rng = np.random.default_rng(4)
    if kwargs.get("program_config") == "k_chunk_64":
        kwargs = {"program_config": ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(8, 8),
                                                           q_chunk_size=32, k_chunk_size=64)}
    k_cache, v_cache = _cache(rng)
    for cur_pos in ([5, 130, -1], [6, 131, 0]):  # two tokens; the idle slot starts on the second
        got, want = _step(rng, k_cache, v_cache, cur_pos, **kwargs)
        idle = [u for u, p in enumerate(cur_pos) if p < 0]
        live = [u for u, p in enumerate(cur_pos) if p >= 0]
        assert not got[0, 0, idle].any()
        figures = pcc(got[0, 0, live], want[0, 0, live]), relative_l2(got[0, 0, live], want[0, 0, live])
        assert figures[0] >= 0.9999 and figures[1] <= 1e-2, (cur_pos, figures)


def test_bad_k_chunk_size_and_q_shape_are_refused():
    rng = np.random.default_rng(0)
    k_cache, v_cache = _cache(rng)
    config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(8, 8), q_chunk_size=32, k_chunk_size=48)
    with pytest.raises(ValueError, match="k_chunk_size: expected 0 .the op chooses. or a positive multiple of 32"):
        transformer.scaled_dot_product_attention_decode(np.zeros((1, B, NQ, D), BF16), k_cache, v_cache,
                                                        cur_pos=[1, 2, 3], program_config=config)
    with pytest.raises(ValueError, match=r"expected shape \[1, b, nh, dh\]"):
        transformer.scaled_dot_product_attention_decode(np.zeros((B, NQ, D), BF16), k_cache, v_cache, cur_pos=[1, 2, 3])


def test_host_ttnn_tensors_and_a_positions_tensor_go_through():
    rng = np.random.default_rng(9)
    k_cache, v_cache = _cache(rng)
    q = rng.standard_normal((1, B, NQ, D), dtype=np.float32).astype(BF16)

    def host(array, dtype=ttnn.bfloat16):
        return ttnn.Tensor(np.asarray(array, np.float32 if dtype == ttnn.bfloat16 else np.int32), dtype,
                           layout=ttnn.ROW_MAJOR_LAYOUT)

    positions = host([40, -1, 255], ttnn.int32)
    out = run_quiet(transformer.scaled_dot_product_attention_decode, host(q), host(k_cache), host(v_cache),
                    cur_pos_tensor=positions)
    assert isinstance(out, ttnn.Tensor) and tuple(out.shape) == (1, B, NQ, D)
    same = run_quiet(transformer.scaled_dot_product_attention_decode, q, k_cache, v_cache, cur_pos=[40, -1, 255])
    assert np.array_equal(to_numpy(out), np.asarray(same, np.float32))
    assert np.abs(np.asarray(same, np.float32)).sum() > 0


# ---------------------------------------------------------------- paged and block-float caches

BLOCK = 64


def _paged_step(rng, k_pages, v_pages, table, cur_pos, kv_dtype, **kwargs):
    """One decode step on a paged cache, tt-transformers style: the new token's K/V into its
    block (``paged_update_cache``), then the paged drop-in. Returns (output, float64 reference on
    the cache's contiguous view)."""
    q, new_k, new_v = _token_heads(rng)
    for user, position in enumerate(cur_pos):
        if position >= 0:
            block, slot = table[user, position // BLOCK], position % BLOCK
            k_pages[block, :, slot] = new_k[user]
            v_pages[block, :, slot] = new_v[user]
    dtype = getattr(ttnn, kv_dtype)
    k, v = (ttnn.Tensor(np.ascontiguousarray(a, np.float32), dtype, layout=ttnn.TILE_LAYOUT) for a in (k_pages, v_pages))
    positions = np.asarray(cur_pos, np.int32)
    out = run_quiet(transformer.paged_scaled_dot_product_attention_decode, q, k, v, table, cur_pos_tensor=positions,
                    **kwargs)
    # The reference reads the cache as ttnn stores it (its dequantised values), through the table.
    stored = [tiles.block_float_values(a, kv_dtype) if kv_dtype != "bfloat16" else a.astype(BF16).astype(np.float32)
              for a in (k_pages, v_pages)]
    contiguous = [np.concatenate([a[table[u]].transpose(1, 0, 2, 3).reshape(NKV, -1, D)[None] for u in range(B)])
                  for a in stored]
    want = attention_reference(q.reshape(1, 1, B, NQ * D), *contiguous, cur_pos=cur_pos)
    return np.asarray(out, np.float64).reshape(1, 1, B, NQ * D), want


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("kv_dtype", ["bfloat16", "bfloat8_b", "bfloat4_b"])
def test_paged_decode_step_with_the_drop_in_matches_float64(kv_dtype):
    rng = np.random.default_rng(12)
    per_user = S // BLOCK
    table = rng.permutation(B * per_user + 2)[:B * per_user].reshape(B, per_user).astype(np.int32)
    k_pages = rng.standard_normal((B * per_user + 2, NKV, BLOCK, D), dtype=np.float32)
    v_pages = rng.standard_normal((B * per_user + 2, NKV, BLOCK, D), dtype=np.float32)
    for cur_pos in ([5, 130, -1], [6, 131, 0], [63, 64, 1]):  # crossing a block boundary on the third
        got, want = _paged_step(rng, k_pages, v_pages, table, cur_pos, kv_dtype)
        live = [u for u, p in enumerate(cur_pos) if p >= 0]
        assert not got[0, 0, [u for u, p in enumerate(cur_pos) if p < 0]].any()
        figures = pcc(got[0, 0, live], want[0, 0, live]), relative_l2(got[0, 0, live], want[0, 0, live])
        assert figures[0] >= 0.9999 and figures[1] <= 1e-2, (kv_dtype, cur_pos, figures)


def test_heads_layout_groups_may_straddle_a_row_tile():
    """40 Q heads in groups of 5: the group of heads 30..34 spans two row tiles of Q and the output."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 2, 40, 64), dtype=np.float32).astype(BF16)
    k, v = (rng.standard_normal((2, 8, 128, 64), dtype=np.float32).astype(BF16) for _ in range(2))
    out = run_quiet(transformer.scaled_dot_product_attention_decode, q, k, v, cur_pos=[100, 7])
    want = attention_reference(q.reshape(1, 1, 2, 40 * 64), k, v, cur_pos=[100, 7]).reshape(1, 2, 40, 64)
    got = np.asarray(out, np.float64)
    assert pcc(got, want) >= 0.9999 and relative_l2(got, want) <= 1e-2


def test_paged_cache_geometry_views_the_cache_as_ttnn_does():
    """ttnn's paged_cache_geometry: one buffer of [blocks, 2 heads, 64, dh] blocks read as [blocks,
    1 head, 128, dh] (the same elements per block, HMA sharing across layers of different KV-head
    counts): the op must give attention over the viewed cache, like ttnn's golden's reshape."""
    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, B, NQ, D), dtype=np.float32).astype(BF16)
    physical = rng.standard_normal((B * 2, 2, 64, D), dtype=np.float32).astype(BF16)
    table = np.arange(B * 2, dtype=np.int32).reshape(B, 2)
    geometry = ttnn.PagedCacheGeometryOverride(block_size=128, num_kv_heads=1)
    out = run_quiet(transformer.paged_scaled_dot_product_attention_decode, q, physical, physical, table,
                    cur_pos_tensor=np.array([200, 77, 5], np.int32), paged_cache_geometry=geometry)
    viewed = physical.reshape(B * 2, 1, 128, D)
    logical = np.stack([np.concatenate([viewed[table[u, e], 0] for e in range(2)]) for u in range(B)])[:, None]
    want = attention_reference(q.reshape(1, 1, B, NQ * D), logical, logical, cur_pos=[200, 77, 5]).reshape(q.shape)
    got = np.asarray(out, np.float64)
    assert pcc(got, want) >= 0.9999 and relative_l2(got, want) <= 1e-2
    unchanged = run_quiet(transformer.paged_scaled_dot_product_attention_decode, q, viewed, viewed, table,
                          cur_pos_tensor=np.array([200, 77, 5], np.int32),
                          paged_cache_geometry=ttnn.PagedCacheGeometryOverride(block_size=0, num_kv_heads=0))
    assert np.array_equal(np.asarray(unchanged), np.asarray(out))


@pytest.mark.parametrize("geometry, error, match", [
    ("geometry", TypeError, "paged_cache_geometry: expected None or a ttnn.PagedCacheGeometryOverride"),
    (dict(block_size=64, num_kv_heads=0), ValueError, "paged_cache_geometry: expected a positive num_kv_heads"),
    (dict(block_size=96, num_kv_heads=1), ValueError, "num_kv_heads x block_size"),
    (dict(block_size=48, num_kv_heads=2), ValueError, "a multiple of 32"),
])
def test_bad_paged_cache_geometry_is_refused_by_name(geometry, error, match):
    q = np.zeros((1, B, NQ, D), BF16)
    pages = np.zeros((B * 4, 2, 32 * 2, D), BF16)
    table = np.arange(B * 4, dtype=np.int32).reshape(B, 4)
    geometry = ttnn.PagedCacheGeometryOverride(**geometry) if isinstance(geometry, dict) else geometry
    with pytest.raises(error, match=match):
        transformer.paged_scaled_dot_product_attention_decode(q, pages, pages, table, cur_pos_tensor=np.zeros(B, np.int32),
                                                              paged_cache_geometry=geometry)
    with pytest.raises(TypeError, match="cur_pos_tensor"):
        transformer.paged_scaled_dot_product_attention_decode(q, pages, pages, table)


@pytest.mark.requires_device
def test_decode_step_with_the_drop_in_on_a_card(device):
    """On a card: Q height-sharded in L1 as nlp_create_qkv_heads_decode leaves it, a paged
    bfloat8_b cache and device page table / positions; the output height-sharded like Q. Skips
    without a card (never run here)."""
    rng = np.random.default_rng(5)
    per_user = S // BLOCK
    table = rng.permutation(B * per_user).reshape(B, per_user).astype(np.int32)
    k_pages = rng.standard_normal((B * per_user, NKV, BLOCK, D), dtype=np.float32)
    v_pages = rng.standard_normal((B * per_user, NKV, BLOCK, D), dtype=np.float32)
    cur_pos = [5, 130, 255]
    q = rng.standard_normal((1, B, NQ, D), dtype=np.float32).astype(BF16)
    grid = device.compute_with_storage_grid_size()
    sharded = ttnn.create_sharded_memory_config(
        shape=(32, D), core_grid=ttnn.num_cores_to_corerangeset(B, grid, row_wise=True),
        strategy=ttnn.ShardStrategy.HEIGHT, orientation=ttnn.ShardOrientation.ROW_MAJOR,
        use_height_and_width_as_shard_shape=True)
    q_dev = ttnn.to_memory_config(ttnn.Tensor(q.astype(np.float32), ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)
                                  .to(device, ttnn.DRAM_MEMORY_CONFIG), sharded)
    k, v = (ttnn.Tensor(a, ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT).to(device, ttnn.DRAM_MEMORY_CONFIG)
            for a in (k_pages, v_pages))
    table_dev, positions = (ttnn.Tensor(np.asarray(a, np.int32), ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT)
                            .to(device, ttnn.DRAM_MEMORY_CONFIG) for a in (table, cur_pos))
    out = transformer.paged_scaled_dot_product_attention_decode(q_dev, k, v, table_dev, cur_pos_tensor=positions,
                                                                memory_config=sharded)
    got = np.asarray(ttnn.to_layout(ttnn.to_memory_config(out, ttnn.DRAM_MEMORY_CONFIG).cpu(), ttnn.ROW_MAJOR_LAYOUT)
                     .to_list(), np.float64).reshape(1, 1, B, NQ * D)
    stored = [tiles.block_float_values(a, "bfloat8_b") for a in (k_pages, v_pages)]
    contiguous = [np.concatenate([a[table[u]].transpose(1, 0, 2, 3).reshape(NKV, -1, D)[None] for u in range(B)])
                  for a in stored]
    want = attention_reference(q.reshape(1, 1, B, NQ * D), *contiguous, cur_pos=cur_pos)
    assert pcc(got, want) >= 0.9999 and relative_l2(got, want) <= 1e-2


def test_drop_in_refusals_name_the_drop_in_arguments():
    rng = np.random.default_rng(0)
    k_cache, v_cache = _cache(rng)
    q = np.zeros((1, B, NQ, D), BF16)
    pages = np.zeros((B * 4, NKV, BLOCK, D), BF16)
    with pytest.raises(TypeError, match="page_table_tensor: the paged decode call needs the page table"):
        transformer.paged_scaled_dot_product_attention_decode(q, pages, pages, None, cur_pos_tensor=np.zeros(B, np.int32))
    with pytest.raises(TypeError, match="cur_pos, cur_pos_tensor: the decode call needs the users' positions"):
        transformer.scaled_dot_product_attention_decode(q, k_cache, v_cache)
    with pytest.raises(TypeError, match="program_config: expected a ttnn.SDPAProgramConfig or None, got object"):
        transformer.scaled_dot_product_attention_decode(q, k_cache, v_cache, cur_pos=[1, 2, 3], program_config=object())
    with pytest.raises(ValueError, match=r"input_tensor_q: expected shape \[1, b, nh, dh\] \(dh = the cache's head_dim 64\)"):
        transformer.scaled_dot_product_attention_decode(q.reshape(1, 1, B, NQ * D), k_cache, v_cache, cur_pos=[1, 2, 3])


def test_share_cache_must_be_a_bool():
    q = np.zeros((1, 2, 8, 64), np.float32)
    k = np.zeros((1, 2, 128, 64), np.float32)
    with pytest.raises(TypeError, match="share_cache: expected None or a bool, got str 'yes'"):
        transformer.scaled_dot_product_attention_decode(q, k, k, cur_pos=[3, 4], share_cache="yes")
