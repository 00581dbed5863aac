"""Paged caches with blocks of 16 positions (ttnn's paged ``block_size`` 16, tt-metal #37927's
regression shape; issue 20 item 6), on the emulator against the float64 reference.

ttnn pads each 16-position block to one 32-row tile (rows 16..31 padding), so a position tile
spans two blocks: the reader takes rows 0-15 from entry ``2t``'s block and rows 16-31 from entry
``2t + 1``'s, each the top half of its tile. Hard inputs: positions 0, 15, 16, 31, 32 (either
half, each edge), a shuffled table, an entry the call does not read set to -1, windows
starting in either half, a circular cache, decode / ROWS / CHUNK, split and unsplit. Pass bar:
tests/bars.py (PCC >= 0.9999, rel-L2 <= 1e-2), quiet runs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from bars import assert_close, run_quiet
from ttnn_flashdecode import attention
from ttnn_flashdecode.op.reference import attention_reference
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode

BLOCK = 16
HEAD_DIM = 64


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _paged(logical: np.ndarray, seed: int):
    """``logical`` ``[batch, nkv, S, d]`` as blocks of 16 ``[blocks, nkv, 16, d]`` through a shuffled
    table ``[batch, S / 16]``."""
    batch, n_kv, capacity, dim = logical.shape
    entries = capacity // BLOCK
    rng = np.random.default_rng(seed)
    order = rng.permutation(batch * entries).astype(np.int32)
    table = order.reshape(batch, entries)
    blocks = np.empty((batch * entries, n_kv, BLOCK, dim), np.float32)
    for user in range(batch):
        for entry in range(entries):
            blocks[table[user, entry]] = logical[user, :, entry * BLOCK:(entry + 1) * BLOCK]
    return blocks, table


def _case(seed, batch, n_q, n_kv, capacity, rows=1):
    rng = np.random.default_rng(seed)
    q = _bf16(rng.standard_normal((1, 1, batch * rows, n_q * HEAD_DIM)))
    k = _bf16(rng.standard_normal((batch, n_kv, capacity, HEAD_DIM)))
    v = _bf16(rng.standard_normal((batch, n_kv, capacity, HEAD_DIM)))
    pk, table = _paged(k, seed)
    pv, _ = _paged(v, seed)
    return q, k, v, pk, pv, table


@pytest.mark.parametrize("positions", [[0, 15], [16, 31], [32, 47], [255, 100]])
@pytest.mark.parametrize("split", [1, 2])
def test_decode_on_blocks_of_16(positions, split):
    q, k, v, pk, pv, table = _case(sum(positions) + split, 2, 8, 2, 256)
    out = run_quiet(attention, q, pk, pv, cur_pos=positions, page_table_tensor=table, split=split)
    assert_close(out, attention_reference(q, k, v, cur_pos=positions), f"block 16 p={positions} split={split}")


def test_rows_chunk_and_windows_on_blocks_of_16():
    q, k, v, pk, pv, table = _case(3, 1, 4, 1, 256, rows=4)
    out = run_quiet(attention, q, pk, pv, cur_pos=[100], rows=4, page_table_tensor=table, sliding_window_size=40)
    assert_close(out, attention_reference(q, k, v, cur_pos=[100], rows=4, sliding_window_size=40), "ROWS + window")
    chunk_q = q.reshape(1, 1, 4, 4, HEAD_DIM)[:, :, :, :1].reshape(1, 1, 4, HEAD_DIM)
    out = run_quiet(attention, chunk_q, pk, pv, chunk_start=[45], page_table_tensor=table)
    assert_close(out, attention_reference(chunk_q, k, v, chunk_start=[45]), "CHUNK from 45")


def test_unread_entries_may_be_minus_one():
    """Entries past the position (and before a window) are never read, even one whose partner
    half is read (position 16: entries 0 and 1 only)."""
    q, k, v, pk, pv, table = _case(5, 1, 4, 1, 128)
    table[0, 2:] = -1
    out = run_quiet(attention, q, pk, pv, cur_pos=[31], page_table_tensor=table)
    assert_close(out, attention_reference(q, k, v, cur_pos=[31]), "entries past the position -1")


def test_circular_cache_of_blocks_of_16():
    """cache_position_modulo 64 (4 blocks of 16, two tiles): position 200 reads slots of 137..200."""
    rng = np.random.default_rng(8)
    q = _bf16(rng.standard_normal((1, 1, 1, 2 * HEAD_DIM)))
    logical_k, logical_v = (_bf16(rng.standard_normal((1, 1, 201, HEAD_DIM))) for _ in range(2))
    table = np.array([[3, 0, 2, 1]], np.int32)
    pk, pv = (np.full((4, 1, BLOCK, HEAD_DIM), np.nan, np.float32) for _ in range(2))
    for position in range(201):  # written in order, later positions over earlier ones' slots
        slot = position % 64
        pk[table[0, slot // BLOCK], :, slot % BLOCK] = logical_k[0, :, position]
        pv[table[0, slot // BLOCK], :, slot % BLOCK] = logical_v[0, :, position]
    out = run_quiet(attention, q, pk, pv, cur_pos=[200], page_table_tensor=table, cache_position_modulo=64)
    want = attention_reference(q, logical_k, logical_v, cur_pos=[200], sliding_window_size=64)
    assert_close(out, want, "circular, blocks of 16")


def test_the_drop_in_as_ttnns_regression_calls_it():
    """tt-metal #37927's shape scaled down: b 1, nh 32 / nkv 8, block 16, cur_pos s // 2."""
    rng = np.random.default_rng(37927)
    capacity, n_q, n_kv = 512, 32, 8
    q = _bf16(rng.standard_normal((1, 1, n_q, HEAD_DIM)))
    k, v = (_bf16(rng.standard_normal((1, n_kv, capacity, HEAD_DIM))) for _ in range(2))
    pk, table = _paged(k, 1)
    pv, _ = _paged(v, 1)
    out = run_quiet(paged_scaled_dot_product_attention_decode, q, pk, pv, table,
                    cur_pos_tensor=np.array([capacity // 2], np.int32))
    want = attention_reference(q.reshape(1, 1, 1, n_q * HEAD_DIM), k, v, cur_pos=[capacity // 2])
    assert_close(np.asarray(out, np.float64).reshape(want.shape), want, "drop-in block 16")


def test_block_float_blocks_of_16_are_refused_by_name():
    import ttnn

    q = np.zeros((1, 1, 1, 64), np.float32)
    pages = ttnn.Tensor(np.zeros((4, 1, 16, 64), np.float32), ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT)
    with pytest.raises(ValueError, match="k: expected a bfloat16 cache with blocks of 16 positions"):
        attention(q, pages, pages, cur_pos=[3], page_table_tensor=np.array([[0, 1, 2, 3]], np.int32))
