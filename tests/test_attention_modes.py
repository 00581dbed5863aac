"""CHUNK and ROWS request kinds end to end, against the float64 reference (on the emulator here).

Same pass bar as ``test_attention.py`` and for the same reasons: PCC >= 0.9999 and relative L2
<= 1e-2 on unit-variance bfloat16 inputs (a correct kernel lands near 0.3-0.5% relative L2; a
wrong mask row moves a whole softmax row far above 1%). Every case prints its figures (``-s``).

- CHUNK (``chunk_start=``): a causal chunk of C consecutive positions per sequence, one request
  per (sequence, Q head); C in {1, 2, 7, 31, 32} from a tile-aligned start (the last tile takes
  causal mask C - 1 whole), a start at another tile boundary, and a mid-tile start (45: chunks of
  20 or more cross a tile edge, so two tiles take per-row masks).
- ROWS (``cur_pos=`` with ``rows=P``): P consecutive query rows per user served by one request
  per KV group through a staircase mask; every valid P for GQA ratios 1, 3 and 8 (up to 32, 10
  and 4), each call with users whose rows start at position 0, at a tile edge, mid-tile, straddle
  a tile edge, and end on a tile's last position.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op.reference import attention_reference, max_abs, pcc, relative_l2
from bars import CONSTANT_ROWS_BYTES, work_row_bytes

from bars import run_quiet

MIN_PCC = 0.9999
MAX_RELATIVE_L2 = 1e-2


def _inputs(rows, batch, n_q, n_kv, head_dim, capacity, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 1, rows, n_q * head_dim), dtype=np.float32).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32).astype(ml_dtypes.bfloat16)
    v = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32).astype(ml_dtypes.bfloat16)
    return q, k, v


def run_case(label, *, batch=1, n_q=4, n_kv=2, head_dim=64, capacity=256, chunk_start=None, chunk=None,
             cur_pos=None, rows=None, split=None, block_tiles=None, seed=0):
    """One CHUNK case (``chunk_start`` with ``chunk`` = C) or ROWS case (``cur_pos`` with ``rows``)
    on the emulator, compared with float64; prints and asserts the figures."""
    per_user = chunk if chunk_start is not None else rows
    q, k, v = _inputs(batch * per_user, batch, n_q, n_kv, head_dim, capacity, seed)
    kinds = dict(chunk_start=chunk_start) if chunk_start is not None else dict(cur_pos=cur_pos, rows=rows)
    out = run_quiet(attention, q, k, v, split=split, block_tiles=block_tiles, **kinds)
    assert out.shape == q.shape and out.dtype == q.dtype
    want = attention_reference(q, k, v, **kinds)
    got = np.asarray(out, dtype=np.float64)
    figures = dict(pcc=pcc(got, want), rel_l2=relative_l2(got, want), max_abs=max_abs(got, want))
    print(f"\n[emulator] {label}: PCC {figures['pcc']:.6f}  rel-L2 {figures['rel_l2']:.2e}  max-abs {figures['max_abs']:.4f}")
    assert np.isfinite(got).all(), f"{label}: non-finite output"
    assert figures["pcc"] >= MIN_PCC, f"{label}: {figures}"
    assert figures["rel_l2"] <= MAX_RELATIVE_L2, f"{label}: {figures}"
    return figures


# ---------------------------------------------------------------------------------------- CHUNK

@pytest.mark.parametrize("start", [0, 64, 45], ids=["start0", "tile-edge64", "mid-tile45"])
@pytest.mark.parametrize("length", [1, 2, 7, 31, 32])
def test_chunk_lengths_and_starts(length, start):
    run_case(f"chunk C={length} start={start}", chunk_start=start, chunk=length, seed=length * 100 + start)


def test_chunk_batch_of_sequences_with_their_own_starts():
    """Five sequences of 7-row chunks (sequence 4's rows 28..34 straddle Q's first and second row
    tile; sequence 4's chunk ends at the cache's last position), MiniCPM5-1B heads; one request per
    (sequence, Q head), each writing its rows once."""
    run_case("chunk batch=5 C=7", batch=5, n_q=16, n_kv=2, head_dim=128, capacity=2048, chunk_start=[0, 45, 1000, 31, 2041],
             chunk=7, seed=5)
    assert last_report().totals.zones["fd-writer-out"] == 5 * 16


@pytest.mark.parametrize("split", [2, 5])
def test_chunk_split_k(split):
    """Split-K with the two masked tiles (positions 1005..1036 cross tile 31 -> 32) on different slices."""
    run_case(f"chunk C=32 start=1005 split={split}", capacity=2048, chunk_start=1005, chunk=32, split=split, seed=split)
    assert len(last_report().cores) == 4 * split


def test_chunk_reads_kv_once_per_q_head():
    """DRAM bytes: each Q head's live K and V tiles once, its C = 32 query rows (rows 0..31 of its Q
    tiles: read as whole tiles, 4 x 2048), scaler and scale, and per masked tile its C mask rows (two
    64-byte chunks each)."""
    run_case("chunk traffic", n_q=2, n_kv=1, head_dim=128, capacity=1024, chunk_start=45, chunk=32, split=1)
    live_tiles = -(-(45 + 32) // 32)
    per_head = 2 * live_tiles * 4 * 2048 + 4 * 2048 + CONSTANT_ROWS_BYTES + 2 * 32 * 128
    # + each core's POSITIONS page and work row
    assert last_report().totals.dram_read_bytes == 2 * per_head + 2 * 4 + work_row_bytes(2)
    assert last_report().totals.dram_write_bytes == 2 * 32 * 4 * 64  # one 64-byte row per (head, row, dim tile)


def test_tile_aligned_chunk_reads_the_causal_tile_whole():
    run_case("chunk traffic aligned", n_q=1, n_kv=1, head_dim=64, capacity=1024, chunk_start=64, chunk=20, split=1)
    # K/V, query rows, scaler, scale, causal mask 20, POSITIONS page, work row
    assert last_report().totals.dram_read_bytes == (2 * 3 * 2 * 2048 + 20 * 2 * 128 + CONSTANT_ROWS_BYTES + 2048 + 4
                                                    + work_row_bytes(1))


# ----------------------------------------------------------------------------------------- ROWS

def _rows_positions(rows):
    """cur_pos of five users: rows starting at 0, at a tile edge (64), mid-tile (40), straddling
    the tile edge at 160 (P >= 2), and ending on a tile's last position (95)."""
    return [rows - 1, 64 + rows - 1, 40 + rows - 1, 160 - rows // 2 + rows - 1, 95]


ROWS_CASES = [(ratio, rows) for ratio, most in ((1, 32), (3, 10), (8, 4)) for rows in range(1, most + 1)]


@pytest.mark.parametrize("ratio, rows", ROWS_CASES, ids=[f"ratio{r}-P{p}" for r, p in ROWS_CASES])
def test_rows_every_valid_positions(ratio, rows):
    run_case(f"rows GQA {ratio} P={rows}", batch=5, n_q=2 * ratio, n_kv=2, cur_pos=_rows_positions(rows), rows=rows,
             seed=ratio * 100 + rows)


@pytest.mark.parametrize("split", [2, 7])
def test_rows_split_k(split):
    run_case(f"rows GQA 8 P=4 split={split}", n_q=8, n_kv=1, head_dim=128, capacity=4096, cur_pos=[3000], rows=4,
             split=split, seed=split)
    assert len(last_report().cores) == split


def test_rows_read_kv_once_for_every_row():
    """One request per KV group serves all P rows of all its heads: K/V bytes as for one decode row."""
    run_case("rows traffic", n_q=8, n_kv=1, head_dim=128, capacity=1024, cur_pos=[999], rows=4, split=1)
    live_tiles = -(-1000 // 32)
    kv_bytes = 2 * live_tiles * 4 * 2048
    q_bytes = 32 * 4 * 128  # 8 heads x 4 rows, two 64-byte chunks per (row, dim tile)
    mask_bytes = 32 * 128  # rows 996..999 end in tile 31: one gathered mask, 32 stage rows
    # + POSITIONS and the work row
    assert last_report().totals.dram_read_bytes == kv_bytes + q_bytes + CONSTANT_ROWS_BYTES + mask_bytes + 4 + work_row_bytes(1)
    assert last_report().totals.zones["fd-compute-scores"] == 2  # two blocks of 16 tiles, read once
