"""A circular paged cache (ttnn's ``cache_position_modulo=M``, issue 20 item 1) on the emulator,
against the float64 reference over the logical sequence.

Logical position ``L`` lives in slot ``L % M`` of the user's page-table row, so a sliding-window
layer keeps only its last ``M`` positions (Gemma's bounded sliding cache); the window defaults to
``M``. The cache here is written exactly as a serving stack writes it: every position ``0 .. p`` in
order, later ones overwriting earlier ones' slots; slots never written hold NaN / +-Inf (a recycled
block). The reference attends the logical sequence with the window, so a slot read for the wrong
position (no wrap, wrap off by a tile) or a stale slot that leaked would show. Hard inputs:
positions before the first wrap (p < M), on tile edges (31, 32), at the wrap (M - 1, M, M + 1), far
past it (7M + 5), windows shorter than M and starting mid-tile, ROWS requests straddling the wrap,
split and unsplit, bfloat8_b caches. Pass bar: tests/bars.py (PCC >= 0.9999, rel-L2 <= 1e-2),
output finite, quiet run.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import ttnn

from bars import assert_close, run_quiet
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op import tiles
from ttnn_flashdecode.op.reference import attention_reference
from ttnn_flashdecode.op.shape import WRAPPED_POSITIONS
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode

BLOCK = 32
HEAD_DIM = 64
POISON = (np.nan, np.inf, -np.inf)


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _circular_cache(logical, positions, modulo, entries, seed):
    """A paged cache ``[blocks, nkv, BLOCK, d]`` and table ``[batch, entries]`` holding ``logical``
    ``[batch, nkv, S, d]`` written position by position into slots ``L % modulo`` (user ``u`` up to
    ``positions[u]``); unwritten slots poisoned, table entries past ``modulo`` slots -1."""
    batch, n_kv, _, dim = logical.shape
    used = modulo // BLOCK
    rng = np.random.default_rng(seed)
    blocks = rng.permutation(batch * used).astype(np.int32)
    table = np.full((batch, entries), -1, np.int32)
    table[:, :used] = blocks.reshape(batch, used)
    cache = np.full((batch * used, n_kv, BLOCK, dim), POISON[seed % 3], np.float32)
    cache[..., ::5] = POISON[(seed + 1) % 3]
    for user, position in enumerate(positions):
        for slot_position in range(max(0, position + 1 - modulo), position + 1):
            slot = slot_position % modulo
            cache[table[user, slot // BLOCK], :, slot % BLOCK] = logical[user, :, slot_position]
    return cache, table


def _case(seed, batch, n_q, n_kv, positions, modulo, rows=1, entries=None):
    rng = np.random.default_rng(seed)
    length = max(positions) + 1
    q = _bf16(rng.standard_normal((1, 1, batch * rows, n_q * HEAD_DIM)))
    k = _bf16(rng.standard_normal((batch, n_kv, length, HEAD_DIM)))
    v = _bf16(rng.standard_normal((batch, n_kv, length, HEAD_DIM)))
    entries = entries or modulo // BLOCK
    pk, table = _circular_cache(k, positions, modulo, entries, seed)
    pv, _ = _circular_cache(v, positions, modulo, entries, seed)
    return q, k, v, pk, pv, table


@pytest.mark.parametrize("position", [0, 31, 32, 127, 128, 129, 7 * 128 + 5])
@pytest.mark.parametrize("split", [1, 3])
def test_decode_wraps_at_every_edge(position, split):
    """M = 128 (4 tiles): before the wrap, at it, one past it, seven wraps on; window = M."""
    modulo = 128
    positions = [position, max(0, position - 45)]
    q, k, v, pk, pv, table = _case(position + split, 2, 4, 2, positions, modulo)
    out = run_quiet(attention, q, pk, pv, cur_pos=positions, page_table_tensor=table,
                    cache_position_modulo=modulo, split=split)
    want = attention_reference(q, k, v, cur_pos=positions, sliding_window_size=modulo)
    assert_close(out, want, f"p={position} split={split}")


@pytest.mark.parametrize("window, position", [(100, 1000), (33, 160), (1, 96), (64, 63)])
def test_window_shorter_than_the_slots(window, position):
    """W < M: only the window's tiles are read, its first tile masked; the other slots hold
    positions older than the window (finite but stale) or poison."""
    modulo = 256
    q, k, v, pk, pv, table = _case(window, 1, 8, 1, [position], modulo, entries=16)
    out = run_quiet(attention, q, pk, pv, cur_pos=[position], page_table_tensor=table,
                    cache_position_modulo=modulo, sliding_window_size=window)
    want = attention_reference(q, k, v, cur_pos=[position], sliding_window_size=window)
    assert_close(out, want, f"W={window} p={position}")


@pytest.mark.parametrize("position", [129, 130, 500])
def test_rows_straddle_the_wrap(position):
    """ROWS: 4 rows per user, each with its own window start, the rows on both sides of a wrap."""
    modulo, rows = 128, 4
    q, k, v, pk, pv, table = _case(position, 1, 2, 1, [position], modulo, rows=rows)
    out = run_quiet(attention, q, pk, pv, cur_pos=[position], rows=rows, page_table_tensor=table,
                    cache_position_modulo=modulo, sliding_window_size=modulo - rows + 1)
    want = attention_reference(q, k, v, cur_pos=[position], rows=rows, sliding_window_size=modulo - rows + 1)
    assert_close(out, want, f"rows p={position}")


def test_block_float_cache_and_the_drop_in_as_ttnn_calls_it():
    """ttnn's paged call with ``cache_position_modulo`` on a bfloat8_b cache (``[1, b, nh, dh]``
    Q, cur_pos_tensor), against the reference on the dequantised logical sequence."""
    modulo, positions = 256, [1000, 255]
    q, k, v, pk, pv, table = _case(7, 2, 8, 1, positions, modulo, entries=8)
    finite = [np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0) for x in (pk, pv)]  # poison: see test_poisoned_cache
    tk, tv = (ttnn.Tensor(x, ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT) for x in finite)
    dk, dv = (tiles.block_float_values(x, "bfloat8_b").astype(np.float64) for x in finite)
    logical_k, logical_v = np.zeros_like(k, np.float64), np.zeros_like(v, np.float64)
    for user, position in enumerate(positions):  # the dequantised values, back in logical order
        for p in range(max(0, position + 1 - modulo), position + 1):
            slot = p % modulo
            logical_k[user, :, p] = dk[table[user, slot // BLOCK], :, slot % BLOCK]
            logical_v[user, :, p] = dv[table[user, slot // BLOCK], :, slot % BLOCK]
    q_heads = q.reshape(1, 2, 8, HEAD_DIM)
    out = run_quiet(paged_scaled_dot_product_attention_decode, q_heads, tk, tv,
                    page_table_tensor=table, cur_pos_tensor=np.asarray(positions, np.int32),
                    cache_position_modulo=modulo)
    want = attention_reference(q, logical_k, logical_v, cur_pos=positions, sliding_window_size=modulo)
    assert_close(np.asarray(out).reshape(1, 1, 2, 8 * HEAD_DIM), want, "bfloat8_b drop-in")


def test_dram_bytes_follow_the_slots_not_the_position():
    """The reader reads the window's tiles only: the same bytes at p = 1000 as at p = 200 000."""
    modulo = 128
    reads = []
    for position in (1000, 200_000):
        q, k, v, pk, pv, table = _case(3, 1, 4, 1, [modulo - 1], modulo)  # slot contents do not matter here
        pk, pv = np.nan_to_num(pk), np.nan_to_num(pv)
        run_quiet(attention, q, pk, pv, cur_pos=[position], page_table_tensor=table, cache_position_modulo=modulo)
        reads.append(last_report().totals.dram_read_bytes)
    assert reads[0] == reads[1]


def test_far_positions_are_valid_and_the_last_one_is_refused():
    modulo = 64
    q, k, v, pk, pv, table = _case(1, 1, 2, 1, [63], modulo)
    pk, pv = np.nan_to_num(pk), np.nan_to_num(pv)
    run_quiet(attention, q, pk, pv, cur_pos=[WRAPPED_POSITIONS - 1], page_table_tensor=table,
              cache_position_modulo=modulo)
    with pytest.raises(ValueError, match=r"cur_pos\[0\]"):
        attention(q, pk, pv, cur_pos=[WRAPPED_POSITIONS], page_table_tensor=table, cache_position_modulo=modulo)


@pytest.mark.parametrize("keywords, error, match", [
    (dict(cache_position_modulo=96), ValueError, "multiple of the block size 64"),
    (dict(cache_position_modulo=0), ValueError, "positive multiple"),
    (dict(cache_position_modulo=192), ValueError, "at most the page table's capacity 128"),
    (dict(cache_position_modulo=64, sliding_window_size=65), ValueError, "sliding_window_size: expected at most"),
    (dict(cache_position_modulo=64.0), TypeError, "cache_position_modulo: expected None or an int"),
    (dict(cache_position_modulo=True), TypeError, "cache_position_modulo"),
])
def test_bad_modulo_is_refused_by_name(keywords, error, match):
    rng = np.random.default_rng(0)
    q = _bf16(rng.standard_normal((1, 1, 1, 2 * HEAD_DIM)))
    cache = _bf16(rng.standard_normal((2, 1, 64, HEAD_DIM)))
    with pytest.raises(error, match=match):
        attention(q, cache, cache, cur_pos=[10], page_table_tensor=np.array([[0, 1]], np.int32), **keywords)


def test_modulo_needs_a_page_table():
    rng = np.random.default_rng(0)
    q = _bf16(rng.standard_normal((1, 1, 1, 2 * HEAD_DIM)))
    cache = _bf16(rng.standard_normal((1, 1, 64, HEAD_DIM)))
    with pytest.raises(ValueError, match="cache_position_modulo: expected None without page_table_tensor"):
        attention(q, cache, cache, cur_pos=[10], cache_position_modulo=64)


def test_modulo_is_causal_only():
    rng = np.random.default_rng(0)
    q = _bf16(rng.standard_normal((1, 1, 1, 2 * HEAD_DIM)))
    cache = _bf16(rng.standard_normal((2, 1, 64, HEAD_DIM)))
    with pytest.raises(ValueError, match="cache_position_modulo: expected None with is_causal=False"):
        attention(q, cache, cache, is_causal=False, page_table_tensor=np.array([[0, 1]], np.int32),
                  cache_position_modulo=64)
