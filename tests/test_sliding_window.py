"""Sliding-window attention (``sliding_window_size=W``, issue 20 item 1) on the emulator, against the
float64 reference: the row at position ``p`` attends ``max(0, p + 1 - W) .. p``.

The window's start is derived on device from the POSITIONS operand (``Params::window_start``), the
reader reads only the window's tiles, the slices split only them, and the first window tile (and
the next one, when ROWS / CHUNK rows start on both sides of a tile edge) takes a window mask built
in L1. Hard inputs: windows shorter than a tile (1, 5), one tile (32), just over (33), longer than
the position (W > p), positions 0 / 31 / 32 / 63 / 64 on tile edges; NaN / +-Inf in every cache
slot outside each row's window (before it and past the position), finite +120 scores in the tiles
before the window (a leak would dominate every row); scores all in [-120, -100] inside the window.
Pass bar: tests/bars.py (PCC >= 0.9999, rel-L2 <= 1e-2), output finite.
"""

from __future__ import annotations

import numpy as np
import pytest

from bars import POISONS, assert_close, bf16 as _bf16, poison_outside as _poison_outside, random_inputs as _inputs
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op import kv_walk
from ttnn_flashdecode.op.reference import attention_reference
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode, scaled_dot_product_attention_decode



def _window_first(position, window, rows=1):
    """First position the first of ``rows`` rows ending at ``position`` attends."""
    return max(0, position - rows + 2 - window)


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("window", [1, 5, 31, 32, 33, 64, 100, 1000])
def test_decode_window_at_tile_edges_with_poison_outside(window, split):
    rng = np.random.default_rng(window * 7 + split)
    cur_pos = [0, 31, 32, 63, 64, 95, 300, 511]
    q, k, v = _inputs(rng, len(cur_pos), 8, 2, 64, 512)
    for user, p in enumerate(cur_pos):
        for i, cache in enumerate((k, v)):
            _poison_outside(cache, user, _window_first(p, window), p, user + i)
    q, k, v = _bf16(q), _bf16(k), _bf16(v)
    out = attention(q, k, v, cur_pos=cur_pos, sliding_window_size=window, split=split)
    assert_close(out, attention_reference(q, k, v, cur_pos=cur_pos, sliding_window_size=window),
                 f"decode W={window} split={split}")


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("window, rows, ratio", [(1, 4, 2), (7, 10, 3), (40, 4, 2), (33, 32, 1)])
def test_rows_each_row_its_own_window(window, rows, ratio, split):
    """ROWS: row j (position p - P + 1 + j) has its own window; the rows' starts straddle tile
    edges, so the window's first two tiles take per-row masks."""
    rng = np.random.default_rng(window + rows)
    cur_pos = [rows - 1, 40, 64, 95, 300]
    q, k, v = _inputs(rng, len(cur_pos), 2 * ratio, 2, 64, 512, rows)
    for user, p in enumerate(cur_pos):
        for i, cache in enumerate((k, v)):
            _poison_outside(cache, user, _window_first(p, window, rows), p, user + i)
    q, k, v = _bf16(q), _bf16(k), _bf16(v)
    out = attention(q, k, v, cur_pos=cur_pos, rows=rows, sliding_window_size=window, split=split)
    assert_close(out, attention_reference(q, k, v, cur_pos=cur_pos, rows=rows, sliding_window_size=window),
                 f"rows P={rows} ratio={ratio} W={window} split={split}")


@pytest.mark.parametrize("start, length, window", [(45, 20, 16), (64, 32, 33), (0, 32, 5), (100, 7, 200)])
def test_chunk_with_a_window(start, length, window):
    rng = np.random.default_rng(start + window)
    q, k, v = _inputs(rng, 1, 2, 1, 64, 256, length)
    _poison_outside(k, 0, _window_first(start + length - 1, window, length), start + length - 1, 0)
    _poison_outside(v, 0, _window_first(start + length - 1, window, length), start + length - 1, 1)
    q, k, v = _bf16(q), _bf16(k), _bf16(v)
    out = attention(q, k, v, chunk_start=start, sliding_window_size=window)
    assert_close(out, attention_reference(q, k, v, chunk_start=start, sliding_window_size=window),
                 f"chunk {start}+{length} W={window}")


@pytest.mark.parametrize("kind, split", [("decode", 1), ("decode", 3), ("rows", 1), ("rows", 4)])
def test_all_negative_large_scores_and_a_dominant_leak_before_the_window(kind, split):
    """Exact one-hot scores (tests/test_attention_adversarial.py's construction): every score in
    the window in [-120, -100] (exp() of any of them underflows float32, so the running max must be
    the window's own), +120 on every position before the window (read or unmasked, it would take
    the whole softmax), NaN past the position."""
    head_dim, capacity, window = 64, 1024, 70
    rows = 4 if kind == "rows" else 1
    n_q = 2 if kind == "rows" else 8
    lanes = n_q * rows
    rng = np.random.default_rng(split)
    position = 700
    scores = rng.integers(-240, -199, size=(lanes, capacity)) / 2.0
    first = _window_first(position, window, rows)
    scores[:, :first] = 120.0
    q = np.zeros((1, 1, rows, n_q * head_dim), np.float32)
    k = rng.standard_normal((1, 1, capacity, head_dim), dtype=np.float32)
    for head in range(n_q):
        for row in range(rows):
            lane = head * rows + row
            q[0, 0, row, head * head_dim + lane] = 1.0
            k[0, 0, :, lane] = 2.0 * scores[lane]
    v = rng.standard_normal((1, 1, capacity, head_dim), dtype=np.float32)
    k[0, 0, position + 1:] = np.nan
    v[0, 0, position + 1:] = np.nan
    q, k, v = _bf16(q), _bf16(k), _bf16(v)
    kinds = dict(cur_pos=[position], rows=rows) if kind == "rows" else dict(cur_pos=[position])
    out = attention(q, k, v, scale=0.5, sliding_window_size=window, split=split, block_tiles=1, **kinds)
    assert_close(out, attention_reference(q, k, v, scale=0.5, sliding_window_size=window, **kinds),
                 f"{kind} deep scores, leak before the window, split={split}")


def test_paged_window_never_reads_entries_before_it():
    """A paged cache whose table holds -1 before each user's window (a serving stack frees the
    blocks a sliding-window layer no longer sees): nothing before the window is read."""
    rng = np.random.default_rng(5)
    block, entries, window = 64, 16, 100
    cur_pos = [50, 300, 1000]
    blocks = len(cur_pos) * entries
    q = _bf16(rng.standard_normal((1, 1, len(cur_pos), 4 * 64), dtype=np.float32))
    k = _bf16(rng.standard_normal((blocks, 2, block, 64), dtype=np.float32))
    v = _bf16(rng.standard_normal((blocks, 2, block, 64), dtype=np.float32))
    table = rng.permutation(blocks).astype(np.int32).reshape(len(cur_pos), entries)
    contiguous_k = np.stack([np.concatenate([k[b] for b in row], axis=1) for row in table])
    contiguous_v = np.stack([np.concatenate([v[b] for b in row], axis=1) for row in table])
    for user, p in enumerate(cur_pos):
        table[user, :_window_first(p, window) // block] = -1
        table[user, p // block + 1:] = -1
    out = attention(q, k, v, cur_pos_tensor=np.asarray(cur_pos, np.int32), page_table_tensor=table,
                    sliding_window_size=window)
    assert_close(out, attention_reference(q, contiguous_k, contiguous_v, cur_pos=cur_pos, sliding_window_size=window),
                 "paged W=100")
    assert not last_report().errors  # no entry the reader followed was bad


@pytest.mark.parametrize("window, position, bound", [(256, 1024, 1.05), (256, 1100, 1.05), (512, 2048, 1.05),
                                                    (512, 4095, 1.05), (1024, 4100, 1.05)])
def test_dram_bytes_follow_the_window_not_the_position(window, position, bound, record_property):
    """Measured by the emulator: the call reads the window's tiles once (K and V) and, per request,
    Q's group rows, the scaler's and scale's three distinct rows (384 B; the rest of both tiles is
    made in L1) and a partial last tile's tail mask -- ~6 KiB a request whatever W, and each core's
    128-byte work row -- so within 1.05x of the K/V of the tiles the window touches from W = 256
    (p >= 4W; MiniCPM5-1B heads, d128; measured 1.046x at W = 256, 1.019-1.025x at 512, 1.014x at
    1024); without the window the same call reads the whole history."""
    rng = np.random.default_rng(window)
    n_q, n_kv, head_dim, capacity = 16, 2, 128, 8192
    q, k, v = (_bf16(x) for x in _inputs(rng, 1, n_q, n_kv, head_dim, capacity))
    first = _window_first(position, window)
    touched = kv_walk.live_tiles(position + 1) - first // 32
    minimum = 2 * n_kv * touched * (head_dim // 32) * 2048
    out = attention(q, k, v, cur_pos=[position], sliding_window_size=window)
    read = last_report().totals.dram_read_bytes
    assert_close(out, attention_reference(q, k, v, cur_pos=[position], sliding_window_size=window), f"W={window}")
    exact = 2 * n_kv * window * head_dim * 2  # the window's own positions, not whole tiles
    record_property("figure", f"W={window} p={position}: {read} B read, {read / minimum:.3f}x the {touched} touched "
                              f"tiles' K/V, {read / exact:.3f}x the window's positions' K/V")
    print(f"\n[emulator] W={window} p={position}: {read} B, {read / minimum:.3f}x touched tiles, {read / exact:.3f}x W")
    assert read <= bound * minimum
    attention(q, k, v, cur_pos=[position])
    assert last_report().totals.dram_read_bytes > 3 * read


def test_window_program_is_the_same_for_every_position():
    """Trace-safe: W is in the program, the window's start is not -- one program hash and one
    runtime-arg digest for every position vector."""
    rng = np.random.default_rng(3)
    q, k, v = (_bf16(x) for x in _inputs(rng, 2, 4, 2, 64, 1024))
    identities = set()
    for cur_pos in ([0, 5], [31, 1023], [700, 64], [-1, 200]):
        out = attention(q, k, v, cur_pos_tensor=np.asarray(cur_pos, np.int32), sliding_window_size=96, split=None)
        report = last_report()
        identities.add((report.program_hash, report.runtime_args_sha256))
        assert_close(out, attention_reference(q, k, v, cur_pos=cur_pos, sliding_window_size=96), f"replay {cur_pos}")
    assert len(identities) == 1
    attention(q, k, v, cur_pos=[5, 5], sliding_window_size=97)
    assert (last_report().program_hash, last_report().runtime_args_sha256) not in identities


def test_drop_ins_take_sliding_window_size_as_ttnn():
    """ttnn's keyword: W > 0 is the window, 0 and None are none (its kernels test > 0)."""
    rng = np.random.default_rng(9)
    q = _bf16(rng.standard_normal((1, 2, 8, 64), dtype=np.float32))
    k, v = (_bf16(rng.standard_normal((2, 2, 256, 64), dtype=np.float32)) for _ in range(2))
    rows_q = q.reshape(1, 1, 2, 8 * 64)
    for window in (40, 0, None):
        out = scaled_dot_product_attention_decode(q, k, v, cur_pos=[77, 200], sliding_window_size=window)
        want = attention_reference(rows_q, k, v, cur_pos=[77, 200], sliding_window_size=window or None)
        assert_close(np.asarray(out).reshape(1, 1, 2, 8 * 64), want, f"drop-in W={window}")
    table = np.arange(8, dtype=np.int32).reshape(2, 4)
    paged_k, paged_v = (x.reshape(2, 2, 4, 64, 64).transpose(0, 2, 1, 3, 4).reshape(8, 2, 64, 64) for x in (k, v))
    out = paged_scaled_dot_product_attention_decode(q, paged_k, paged_v, table,
                                                    cur_pos_tensor=np.asarray([77, 200], np.int32), sliding_window_size=40)
    want = attention_reference(rows_q, k, v, cur_pos=[77, 200], sliding_window_size=40)
    assert_close(np.asarray(out).reshape(1, 1, 2, 8 * 64), want, "paged drop-in W=40")


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "64"])
def test_bad_window_is_refused(bad):
    rng = np.random.default_rng(0)
    q, k, v = (_bf16(x) for x in _inputs(rng, 1, 2, 1, 64, 128))
    wrong_type = not isinstance(bad, int) or isinstance(bad, bool)
    with pytest.raises(TypeError if wrong_type else ValueError, match="sliding_window_size"):
        attention(q, k, v, cur_pos=[3], sliding_window_size=bad)
    with pytest.raises(ValueError, match="sliding_window_size"):
        attention_reference(q, k, v, cur_pos=[3], sliding_window_size=bad)
