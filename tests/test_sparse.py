"""Sparse decode (issue 37, DeepSeek-V3.2): ``sparse_indices=`` of ``attention()`` and the MLA
drop-ins on the emulator, against float64 (each user's listed latent rows gathered, then softmax).

DeepSeek-V3's head shapes (128 Q heads, a 576-column latent, V its first 512), scaled down in
batch and context only. Hard inputs: unsorted lists, duplicate entries (a multiset: counted twice),
``-1`` padding, a list of padding only (output 0, LSE -inf), k not a multiple of 32, NaN / inf in
every cache row no list names, a paged latent through a shuffled page table, GQA with its own V.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from bars import POISONS, assert_close, run_quiet
import ttnn_flashdecode
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op import validate
from ttnn_flashdecode.op.reference import relative_l2
from ttnn_flashdecode.op.sparse import live_entries, sparse_lists, sparse_reference
from ttnn_flashdecode.transformer import flash_multi_latent_attention_decode, paged_flash_multi_latent_attention_decode

HEADS, LATENT, VALUE = 128, 576, 512
SCALE = LATENT ** -0.5


def _bf16(x) -> np.ndarray:
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def sparse_mla_reference(q, latent, indices, positions):
    """float64: per user, softmax(scale q K[live]^T) V[live] over its live entries (duplicates
    twice), V the latent's first 512 columns; ``(out [1, b, nh, 512], lse [1, b, nh])``, an empty
    list zeros and -inf."""
    q64, k64 = np.asarray(q, np.float64), np.asarray(latent, np.float64)
    out = np.zeros(q64.shape[:3] + (VALUE,))
    lse = np.full(q64.shape[:3], -np.inf)
    for user, entries in enumerate(live_entries(indices, positions)):
        if len(entries) == 0:
            continue
        rows = k64[user, 0, entries]
        scores = SCALE * q64[0, user] @ rows.T
        top = scores.max(axis=1, keepdims=True)
        weights = np.exp(scores - top)
        out[0, user] = weights / weights.sum(axis=1, keepdims=True) @ rows[:, :VALUE]
        lse[0, user] = top[:, 0] + np.log(weights.sum(axis=1))
    return out, lse


def _case(seed, batch, capacity, k, positions):
    """Q, a latent with every unlisted row poisoned, and the lists: unsorted, a duplicate, -1 padding."""
    rng = np.random.default_rng(seed)
    q = _bf16(rng.standard_normal((1, batch, HEADS, LATENT)))
    latent = _bf16(rng.standard_normal((batch, 1, capacity, LATENT)))
    indices = np.full((batch, k), -1, np.int32)
    for user, position in enumerate(positions):
        if position < 0:
            continue
        live = rng.permutation(position + 1)[:k - 3]  # unsorted
        indices[user, :len(live)] = live
        indices[user, len(live)] = live[0]  # listed twice: weighs twice
    listed = np.zeros((batch, capacity), bool)
    for user in range(batch):
        listed[user, indices[user][indices[user] >= 0]] = True
    poison = rng.choice(POISONS, size=latent.shape)
    latent = np.where(listed[:, None, :, None], latent, poison).astype(np.float32)
    return q, latent, indices


@pytest.mark.parametrize("batch, capacity, k, positions", [
    (2, 512, 100, [300, 511]),      # k not a multiple of 32
    (3, 256, 64, [40, -1, 255]),    # an idle user; a user with fewer live entries than k
])
def test_sparse_mla_decode_matches_float64(batch, capacity, k, positions):
    q, latent, indices = _case(1, batch, capacity, k, positions)
    want, want_lse = sparse_mla_reference(q, latent, indices, positions)
    out, lse = run_quiet(flash_multi_latent_attention_decode, q, latent, None, VALUE, cur_pos=positions, scale=SCALE,
                         sparse_indices=indices, return_lse=True)
    got = assert_close(out, want, f"sparse mla {positions}")
    idle = [u for u, p in enumerate(positions) if p < 0]
    assert not got[0, idle].any()
    live = [u for u, p in enumerate(positions) if p >= 0]
    np.testing.assert_allclose(np.asarray(lse)[0, live], want_lse[0, live], atol=2e-2)
    assert np.isneginf(np.asarray(lse)[0, idle]).all()


def test_sparse_all_padding_gives_zero_and_minus_inf():
    q, latent, indices = _case(2, 2, 128, 40, [100, 127])
    indices[1] = -1  # user 1 lists nothing
    out, lse = run_quiet(flash_multi_latent_attention_decode, q, latent, None, VALUE, cur_pos=[100, 127], scale=SCALE,
                         sparse_indices=indices, return_lse=True)
    want, _ = sparse_mla_reference(q, latent, indices, [100, 127])
    got = assert_close(out, want, "sparse all padding")
    assert not got[0, 1].any() and np.isneginf(np.asarray(lse)[0, 1]).all()


def test_sparse_paged_latent_through_a_shuffled_page_table():
    capacity, block = 512, 64
    positions = [400, 511]
    q, latent, indices = _case(3, 2, capacity, 96, positions)
    blocks = capacity // block
    order = np.random.default_rng(4).permutation(2 * blocks)
    table = order.reshape(2, blocks).astype(np.int32)
    paged = np.zeros((2 * blocks, 1, block, LATENT), np.float32)
    for user in range(2):
        for entry in range(blocks):
            paged[table[user, entry], 0] = latent[user, 0, entry * block:(entry + 1) * block]
    want, _ = sparse_mla_reference(q, latent, indices, positions)
    out = run_quiet(paged_flash_multi_latent_attention_decode, q, paged, None, VALUE, table,
                    cur_pos_tensor=np.array(positions, np.int32), scale=SCALE, sparse_indices=indices[:, None])
    assert_close(out, want, "sparse paged mla")


def test_sparse_gqa_with_its_own_values():
    rng = np.random.default_rng(5)
    batch, n_kv, group, dim, capacity = 2, 2, 4, 64, 256
    q = _bf16(rng.standard_normal((1, 1, batch, n_kv * group * dim)))
    k, v = (_bf16(rng.standard_normal((batch, n_kv, capacity, dim))) for _ in range(2))
    indices = np.stack([rng.permutation(200)[:70] for _ in range(batch)]).astype(np.int32)
    indices[0, 5:9] = -1
    indices[1, 10] = indices[1, 11]
    positions = [210, 255]
    want = sparse_reference(q, k, v, indices, cur_pos=positions)
    out = run_quiet(attention, q, k, v, cur_pos=positions, sparse_indices=indices)
    assert_close(out, want, "sparse gqa")


def test_sparse_device_mask_drops_entries_past_cur_pos(monkeypatch):
    """A list the host never sees (a device tensor) is masked on device: entries past cur_pos are
    dropped by the reader. Emulated by letting the host skip its own check."""
    positions = [150, 200]
    q, latent, indices = _case(6, 2, 256, 64, positions)
    indices[0, 10:20] = np.arange(230, 240)  # past user 0's cur_pos: dropped, as -1
    unchecked = lambda values, **kw: sparse_lists(values, **{**kw, "positions": None})  # noqa: E731
    monkeypatch.setattr(validate, "sparse_lists", unchecked)
    out = run_quiet(flash_multi_latent_attention_decode, q, latent, None, VALUE, cur_pos=positions, scale=SCALE,
                    sparse_indices=indices)
    want, _ = sparse_mla_reference(q, latent, indices, positions)
    assert_close(out, want, "sparse device mask")


def test_sparse_program_depends_on_k_not_the_values():
    positions = [120, 127]
    q, latent, first = _case(7, 2, 128, 48, positions)
    run_quiet(flash_multi_latent_attention_decode, q, latent, None, VALUE, cur_pos=positions, sparse_indices=first)
    plan = last_report().plan
    second = np.flip(first, axis=1).copy()
    second[0, :7] = -1
    run_quiet(flash_multi_latent_attention_decode, q, latent, None, VALUE, cur_pos=positions, sparse_indices=second)
    assert last_report().plan.program_hash == plan.program_hash


@pytest.mark.parametrize("change, message", [
    (dict(indices=np.array([[5, 121], [1, 2]], np.int32)), r"sparse_indices\[0\]\[1\]: expected -1 or a position <= cur_pos\[0\] = 120"),
    (dict(indices=np.array([[5, -2], [1, 2]], np.int32)), r"sparse_indices\[0\]\[1\]: expected -1 \(padding\)"),
    (dict(indices=np.zeros((2, 129), np.int32)), "sparse_indices: expected k <= the cache's capacity 128"),
    (dict(indices=np.zeros((2, 3, 4), np.int32)),
     r"sparse_indices: expected shape \[2, k\], \[2, 1, k\] \(one list per user\) or \[2, 2, k\] \(one per KV head\), "
     r"got \[2, 3, 4\]"),
    (dict(indices=np.array([[[5, 6], [1, 121]], [[1, 2], [3, 4]]], np.int32)),
     r"sparse_indices\[0\]\[1\]\[1\]: expected -1 or a position <= cur_pos\[0\] = 120"),
    (dict(indices=np.zeros((2, 4), np.int64)), "sparse_indices: expected an int32 array"),
    (dict(indices=np.zeros((3, 4), np.int32)), r"sparse_indices: expected shape \[2, k\]"),
    (dict(rows=1), "rows / chunk_start: with sparse_indices, expected a decode call"),
    (dict(sliding_window_size=64), "sliding_window_size: with sparse_indices, expected None"),
])
def test_sparse_refuses_by_name(change, message):
    rng = np.random.default_rng(8)
    q = rng.standard_normal((1, 1, 2, 4 * 64), dtype=np.float32)
    k = rng.standard_normal((2, 2, 128, 64), dtype=np.float32)
    indices = change.pop("indices", np.zeros((2, 4), np.int32))
    with pytest.raises((ValueError, TypeError), match=message):
        attention(q, k, k, cur_pos=[120, 127], sparse_indices=indices, **change)


def test_sparse_refuses_a_bfloat4_b_cache():
    import ttnn

    rng = np.random.default_rng(9)
    q = rng.standard_normal((1, 1, 1, 64), dtype=np.float32)
    k = ttnn.Tensor(rng.standard_normal((1, 1, 64, 64)).astype(np.float32), ttnn.bfloat4_b, layout=ttnn.TILE_LAYOUT)
    with pytest.raises(ValueError, match="k: with sparse_indices, expected a bfloat16 or bfloat8_b cache .*got bfloat4_b"):
        attention(q, k, k, cur_pos=[10], sparse_indices=np.zeros((1, 4), np.int32))


def test_sparse_split_slices_share_the_list():
    """A split request: slices 1.. copy the compacted list from their parent (one DRAM read of it)."""
    positions = [500, 511]
    q, latent, indices = _case(10, 2, 512, 200, positions)
    want, _ = sparse_mla_reference(q, latent, indices, positions)
    out = run_quiet(flash_multi_latent_attention_decode, q, latent, None, VALUE, cur_pos=positions, scale=SCALE,
                    sparse_indices=indices, program_config=None)
    assert_close(out, want, "sparse split (planner)")
    out = run_quiet(attention, q, latent, None, cur_pos=positions, q_layout="heads", head_dim_v=VALUE, scale=SCALE,
                    sparse_indices=indices, split=4)
    assert_close(out, want, "sparse split 4")
    assert max(last_report().plan.split_counts) == 4


def test_sparse_bytes_at_2048_of_32k_within_ten_percent_of_the_rows():
    """DeepSeek-V3.2's top-k 2048 of a 32k latent, 128 heads: DRAM bytes <= 1.10x the listed rows once,
    Q once and the 512-wide output once (measured 1.011x: the excess is the 576-wide output write and
    the one index list), and the output right."""
    from ttnn_flashdecode.tools import sparse_bench

    rng = np.random.default_rng(11)
    context, k = 32768, 2048
    q = _bf16(rng.standard_normal((1, 1, HEADS, LATENT)))
    latent = _bf16(rng.standard_normal((1, 1, context, LATENT)))
    indices = rng.permutation(context)[:k].astype(np.int32)[None]
    out = run_quiet(flash_multi_latent_attention_decode, q, latent, None, VALUE, cur_pos=[context - 1], scale=SCALE,
                    sparse_indices=indices)
    report = last_report()
    ratio = (report.total_dram_read_bytes + report.total_dram_write_bytes) / sparse_bench.min_bytes(k)
    assert ratio <= 1.10, f"{ratio:.3f}x the minimum"
    want, _ = sparse_mla_reference(q, latent, indices, [context - 1])
    assert_close(out, want, "sparse 2048 of 32k")


def test_an_idle_users_stale_list_is_taken_and_attends_nothing():
    """A serving stack leaves an idle slot's last list in place: the host takes it (the device drops
    every entry of a user at -1) and the slot's output is 0."""
    rng = np.random.default_rng(11)
    q = rng.standard_normal((1, 1, 2, 4 * 64), dtype=np.float32)
    k = rng.standard_normal((2, 1, 256, 64), dtype=np.float32)
    v = rng.standard_normal((2, 1, 256, 64), dtype=np.float32)
    lists = np.tile(np.arange(40, dtype=np.int32), (2, 1))
    out = np.asarray(run_quiet(attention, q, k, v, cur_pos=[-1, 255], sparse_indices=lists), np.float64)
    want = ttnn_flashdecode.sparse_reference(q, k, v, lists, cur_pos=[-1, 255])
    assert not out[0, 0, 0].any()
    assert relative_l2(out[0, 0, 1], want[0, 0, 1]) < 1e-2


def test_a_circular_cache_is_refused_by_its_own_keyword():
    rng = np.random.default_rng(12)
    q = rng.standard_normal((1, 1, 1, 4 * 64), dtype=np.float32)
    blocks = rng.standard_normal((8, 1, 32, 64), dtype=np.float32)
    table = np.arange(8, dtype=np.int32).reshape(1, 8)
    with pytest.raises(ValueError, match=r"^cache_position_modulo: with sparse_indices, expected None, got 256"):
        attention(q, blocks, blocks, cur_pos=[100], page_table_tensor=table, cache_position_modulo=256,
                  sparse_indices=np.arange(10, dtype=np.int32)[None])
