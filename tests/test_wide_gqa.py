"""More than 32 Q heads per KV head (issue 20 item 6: 64 Q heads per KV head span two tile rows),
on the emulator against the float64 reference.

A KV group whose heads span several row tiles is served by one decode request per 32 of its
heads (``DecodeShape.q_rows``); each reads the group's K/V, so the group's K/V is read once per
row tile of heads (2x for 64 heads per KV head; the bytes test pins that cost, so a change that
shares one read would show here). Hard inputs: both Q layouts, paged and split, an idle user,
positions 0 / 31 / 32, scores all large and negative. Pass bar: tests/bars.py.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from bars import assert_close, run_quiet
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op.reference import attention_reference
from ttnn_flashdecode.transformer import scaled_dot_product_attention_decode


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _inputs(seed, batch, n_q, n_kv, head_dim, capacity, k_shift=0.0):
    rng = np.random.default_rng(seed)
    q = _bf16(rng.standard_normal((1, 1, batch, n_q * head_dim)))
    k = _bf16(rng.standard_normal((batch, n_kv, capacity, head_dim)) + k_shift)
    v = _bf16(rng.standard_normal((batch, n_kv, capacity, head_dim)))
    return q, k, v


@pytest.mark.parametrize("n_q, n_kv", [(64, 1), (128, 2), (96, 1)])
@pytest.mark.parametrize("split", [1, 2])
def test_decode_heads_past_one_tile_row(n_q, n_kv, split):
    positions = [0, 31, 32, 200]
    q, k, v = _inputs(n_q + split, 4, n_q, n_kv, 64, 256)
    out = run_quiet(attention, q, k, v, cur_pos=positions, split=split)
    assert_close(out, attention_reference(q, k, v, cur_pos=positions), f"{n_q}/{n_kv} split {split}")


def test_ttnn_heads_layout_paged_with_an_idle_user():
    """ttnn's ``[1, b, nh, dh]`` Q through the drop-in's paged twin, 64 heads on one KV head."""
    from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode

    batch, n_q, head_dim, block = 2, 64, 128, 64
    q, k, v = _inputs(5, batch, n_q, 1, head_dim, 512)
    table = np.arange(batch * 8, dtype=np.int32)[::-1].reshape(batch, 8).copy()
    paged_k, paged_v = (np.zeros((batch * 8, 1, block, head_dim), np.float32) for _ in range(2))
    for user in range(batch):
        for entry in range(8):
            paged_k[table[user, entry]] = k[user, :, entry * block:(entry + 1) * block]
            paged_v[table[user, entry]] = v[user, :, entry * block:(entry + 1) * block]
    positions = np.array([300, -1], np.int32)
    out = run_quiet(paged_scaled_dot_product_attention_decode, q.reshape(1, batch, n_q, head_dim), paged_k, paged_v,
                    table, cur_pos_tensor=positions)
    want = attention_reference(q, k, v, cur_pos=[300, -1])
    got = np.asarray(out, np.float64).reshape(1, 1, batch, n_q * head_dim)
    assert_close(got[:, :, :1], want[:, :, :1], "paged 64 heads, user 0")
    assert not got[:, :, 1].any(), "an idle user's rows are zero"


def test_large_negative_scores_every_row_tile():
    """Exact scores (tests/test_sliding_window.py's construction): head ``h``'s Q is one-hot in dim
    ``h``, K's dim ``h`` holds its scores, half-integers in [-120, -100] (exp() of any underflows
    float32), for both row tiles of heads: each request keeps its own running max."""
    n_q, head_dim, capacity = 64, 64, 128
    rng = np.random.default_rng(9)
    scores = rng.integers(-240, -199, size=(n_q, capacity)) / 2.0
    q = np.zeros((1, 1, 1, n_q * head_dim), np.float32)
    k = rng.standard_normal((1, 1, capacity, head_dim)).astype(np.float32)
    for head in range(n_q):
        q[0, 0, 0, head * head_dim + head] = 1.0
        k[0, 0, :, head] = 2.0 * scores[head]
    v = _bf16(rng.standard_normal((1, 1, capacity, head_dim)))
    q, k = _bf16(q), _bf16(k)
    out = run_quiet(scaled_dot_product_attention_decode, q.reshape(1, 1, n_q, head_dim), k, v, cur_pos=[127], scale=0.5)
    want = attention_reference(q, k, v, cur_pos=[127], scale=0.5)
    assert_close(np.asarray(out, np.float64).reshape(want.shape), want, "large negative scores")


def test_each_row_tile_of_heads_reads_the_group_once():
    """64 heads per KV head read the group's K/V twice (one request per row tile of heads); 32
    heads once. Measured DRAM K/V bytes differ by exactly the group's live K/V."""
    reads = {}
    for n_q in (32, 64):
        q, k, v = _inputs(1, 1, n_q, 1, 64, 1024)
        run_quiet(attention, q, k, v, cur_pos=[1023], split=1)
        reads[n_q] = last_report().totals.dram_read_bytes
    kv_bytes = 2 * 1024 * 64 * 2  # K and V, 1024 positions, head_dim 64, bfloat16
    q_bytes = 32 * 64 * 2 * 2  # the second row tile of Q, read, and its output tile is written not read
    assert kv_bytes <= reads[64] - reads[32] <= kv_bytes + 4 * q_bytes, reads
