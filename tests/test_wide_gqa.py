"""More than 32 Q heads per KV head (issue 20 item 6: 64 Q heads per KV head span two tile rows;
issue 22: MLA's 128), on the emulator against the float64 reference.

A KV group whose heads span R = heads / 32 row tiles is one request of R row tiles
(``attention_protocol.hpp`` "Q row tiles"), split or not: every K/V block that reaches L1 serves
all R, so the group's K/V is read once (the bytes tests bound it at 1.05x the minimum, unsplit and
split over 8 cores); a split request's combine runs a round per row tile. Hard inputs: both Q
layouts, paged, an idle user, positions 0 / 31 / 32, scores all large and negative, empty split
slices, return_lse and attention sinks at 128 heads, split and not. Pass bar: tests/bars.py.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import ttnn

from bars import CONSTANT_ROWS_BYTES, assert_close, run_quiet, work_row_bytes
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op.reference import attention_reference
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode, scaled_dot_product_attention_decode

MAX_BYTES_OVER_MINIMUM = 1.05
"""Issue 20 item 6 / issue 22: DRAM bytes of an unsplit wide group within 1.05x of its minimum."""


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _inputs(seed, batch, n_q, n_kv, head_dim, capacity, k_shift=0.0):
    rng = np.random.default_rng(seed)
    q = _bf16(rng.standard_normal((1, 1, batch, n_q * head_dim)))
    k = _bf16(rng.standard_normal((batch, n_kv, capacity, head_dim)) + k_shift)
    v = _bf16(rng.standard_normal((batch, n_kv, capacity, head_dim)))
    return q, k, v


def _row_tiles() -> int:
    """Q row tiles per request of the last emulated call's plan."""
    return last_report().plan.shape.row_tiles


@pytest.mark.parametrize("n_q, n_kv", [(64, 1), (128, 2), (96, 1)])
@pytest.mark.parametrize("split", [1, 2])
def test_decode_heads_past_one_tile_row(n_q, n_kv, split):
    """One request of every row tile per group, split or not (split: the combine a round per row
    tile)."""
    positions = [0, 31, 32, 200]
    q, k, v = _inputs(n_q + split, 4, n_q, n_kv, 64, 256)
    out = run_quiet(attention, q, k, v, cur_pos=positions, split=split)
    assert_close(out, attention_reference(q, k, v, cur_pos=positions), f"{n_q}/{n_kv} split {split}")
    assert _row_tiles() == n_q // n_kv // 32


@pytest.mark.parametrize("max_cores", [1, 8])
def test_ttnn_heads_layout_paged_with_an_idle_user(max_cores):
    """ttnn's ``[1, b, nh, dh]`` Q through the drop-in's paged twin, 64 heads on one KV head:
    ``max_cores_per_head_batch`` 1 keeps each group on one core, 8 splits it; one request of two
    row tiles either way."""
    batch, n_q, head_dim, block = 2, 64, 128, 64
    q, k, v = _inputs(5, batch, n_q, 1, head_dim, 512)
    table = np.arange(batch * 8, dtype=np.int32)[::-1].reshape(batch, 8).copy()
    paged_k, paged_v = (np.zeros((batch * 8, 1, block, head_dim), np.float32) for _ in range(2))
    for user in range(batch):
        for entry in range(8):
            paged_k[table[user, entry]] = k[user, :, entry * block:(entry + 1) * block]
            paged_v[table[user, entry]] = v[user, :, entry * block:(entry + 1) * block]
    positions = np.array([300, -1], np.int32)
    config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=0, k_chunk_size=0,
                                    exp_approx_mode=False, max_cores_per_head_batch=max_cores)
    out = run_quiet(paged_scaled_dot_product_attention_decode, q.reshape(1, batch, n_q, head_dim), paged_k, paged_v,
                    table, cur_pos_tensor=positions, program_config=config)
    assert _row_tiles() == 2
    assert last_report().plan.split == (max_cores > 1)
    want = attention_reference(q, k, v, cur_pos=[300, -1])
    got = np.asarray(out, np.float64).reshape(1, 1, batch, n_q * head_dim)
    assert_close(got[:, :, :1], want[:, :, :1], "paged 64 heads, user 0")
    assert not got[:, :, 1].any(), "an idle user's rows are zero"


@pytest.mark.parametrize("split", [1, 4])
def test_large_negative_scores_every_row_tile(split):
    """Exact scores (tests/test_sliding_window.py's construction): head ``h``'s Q is one-hot in dim
    ``h``, K's dim ``h`` holds its scores, half-integers in [-126, -100] (exp() of any underflows
    float32), for both row tiles of heads, over four K/V blocks (split 4: two one-tile blocks a slice): each
    row tile keeps its own running max through every block's correction and every combine round."""
    n_q, head_dim, capacity = 64, 64, 256
    rng = np.random.default_rng(9)
    # Each head's maximum its own (head % 7 lower): the row tiles' request maxima differ row by row.
    scores = rng.integers(-240, -199, size=(n_q, capacity)) / 2.0 - np.arange(n_q)[:, None] % 7
    q = np.zeros((1, 1, 1, n_q * head_dim), np.float32)
    k = rng.standard_normal((1, 1, capacity, head_dim)).astype(np.float32)
    for head in range(n_q):
        q[0, 0, 0, head * head_dim + head] = 1.0
        k[0, 0, :, head] = 2.0 * scores[head]
    v = _bf16(rng.standard_normal((1, 1, capacity, head_dim)))
    q, k = _bf16(q), _bf16(k)
    out = run_quiet(attention, q, k, v, cur_pos=[capacity - 1], scale=0.5, split=split, block_tiles=1 if split > 1 else 2)
    assert _row_tiles() == 2
    want = attention_reference(q, k, v, cur_pos=[capacity - 1], scale=0.5)
    assert_close(out, want, "large negative scores")


@pytest.mark.parametrize("split", [1, 8])
@pytest.mark.parametrize("n_q", [64, 128])
def test_wide_group_reads_its_kv_once(n_q, split, record_property):
    """DRAM bytes (read and written) of one group of ``n_q`` heads on one KV head, unsplit and split
    over 8 cores: within 1.05x of the minimum, each live K/V tile once plus Q's rows read and the
    output's written. On top: the constants' rows and the work rows, and the row gathers' 64-byte
    DRAM chunks around each 32-byte face row of Q (2x Q's bytes; split slices copy Q and the
    partials core to core, not through DRAM). Measured (head_dim 64, 2048 positions) 1.016x at 64
    heads and 1.030x at 128, unsplit; one request per row tile read the K/V 2x / 4x."""
    head_dim, capacity = 64, 2048
    q, k, v = _inputs(1, 1, n_q, 1, head_dim, capacity)
    out = run_quiet(attention, q, k, v, cur_pos=[capacity - 1], split=split)
    assert _row_tiles() == n_q // 32
    assert last_report().plan.split == (split > 1)
    totals = last_report().totals
    moved = totals.dram_read_bytes + totals.dram_write_bytes
    kv = 2 * capacity * head_dim * 2
    rows = n_q * head_dim * 2  # Q's group rows, read; the output's, written
    minimum = kv + 2 * rows
    record_property("figure", f"{n_q} heads/KV head split {split}: {moved} B, {moved / minimum:.4f}x the minimum {minimum} B")
    print(f"\n[emulator] {n_q} heads/KV head split {split}: {moved} B moved, {moved / minimum:.4f}x the minimum")
    assert kv <= totals.dram_read_bytes
    assert moved <= MAX_BYTES_OVER_MINIMUM * minimum, (moved, minimum)
    assert moved >= minimum + rows + CONSTANT_ROWS_BYTES + work_row_bytes(split)  # Q's 64-byte chunks, constants, work
    assert_close(out, attention_reference(q, k, v, cur_pos=[capacity - 1]), f"{n_q} heads")


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("feature", ["lse", "sink"])
def test_mla_like_128_heads_per_kv_head(feature, split):
    """MLA's 128 Q heads on one KV head (head_dim 64 to stay fast), one request of four row tiles,
    on one core or split over 3 (an idle user's slices all empty): with return_lse (each row tile's
    LSE to its own heads) and with attention sinks (each row tile its own sink page, folded in by
    slice 0 after the four combine rounds), against float64; two users, one mid-tile and one idle."""
    batch, n_q, head_dim, capacity = 2, 128, 64, 512
    q, k, v = _inputs(22, batch, n_q, 1, head_dim, capacity, k_shift=0.5)
    positions = [333, -1]
    if feature == "lse":
        out, lse = run_quiet(attention, q, k, v, cur_pos=positions, split=split, return_lse=True)
        want, want_lse = attention_reference(q, k, v, cur_pos=positions, return_lse=True)
        got_lse = np.asarray(lse, np.float64).reshape(want_lse.shape)
        assert np.isneginf(got_lse[..., 1, :]).all() and np.isneginf(want_lse[..., 1, :]).all()
        np.testing.assert_allclose(got_lse[..., 0, :], want_lse[..., 0, :], rtol=0, atol=2e-2)
    else:
        sinks = _bf16(np.random.default_rng(3).standard_normal(n_q) * 4.0).astype(np.float64)
        out = run_quiet(attention, q, k, v, cur_pos=positions, split=split, attention_sink=sinks)
        want = attention_reference(q, k, v, cur_pos=positions, attention_sink=sinks)
        plain = attention_reference(q, k, v, cur_pos=positions)
        assert np.abs(plain - want).max() > 0.05  # the sinks matter
    assert _row_tiles() == 4
    got = assert_close(out, want, f"128 heads, {feature}")
    assert not got[..., 1, :].any(), "an idle user's rows are zero"


def test_a_split_too_wide_for_the_grid_counts_the_groups_requests():
    """Found by a fresh user: a forced split that fits neither plan is refused with the wider plan's
    count (4 users' requests of two row tiles each, 4 x 64 slices), not the fallback's (8 requests)."""
    q, k, v = _inputs(1, 4, 64, 1, 64, 512)
    with pytest.raises(ValueError, match=r"split: expected at most 64 cores for 4 requests x 64 slices, got 256"):
        attention(q, k, v, cur_pos=[300] * 4, split=64)


def test_row_tile_program_is_the_same_for_every_position():
    """Trace-safe: whether a group is one request of several row tiles depends on shapes only, so
    one program (hash and runtime args) serves every position vector, idle slots included."""
    q, k, v = _inputs(4, 2, 64, 1, 64, 512)
    identities = set()
    for positions in ([0, 511], [300, -1], [31, 32]):
        out = run_quiet(attention, q, k, v, cur_pos=positions, split=1)
        report = last_report()
        assert report.plan.shape.row_tiles == 2
        identities.add((report.program_hash, report.runtime_args_sha256))
        want = attention_reference(q, k, v, cur_pos=positions)
        live = [user for user, position in enumerate(positions) if position >= 0]
        assert_close(np.asarray(out)[:, :, live], want[:, :, live], f"positions {positions}")
    assert len(identities) == 1, identities
