"""Shapes at the edges of the tile (issue 25, item 4), against the float64 reference.

A KV group's Q heads are the rows of one tile: 31 (one row short) and 32 (full) Q heads per KV
head; 33 and 64 are refused (``GQA ratio: expected at most 32``: tests/test_boundaries.py, 32
accepted / 33 refused). head_dim 32 (one tile), 64 and 96 (three tiles); 576 is refused
(``head_dim: expected <= 512``: tests/test_boundaries.py, 512 accepted / 513 refused). Positions
on the edges of the first position tile -- 0 (one live slot), 31 (a full tile), 32 and 33 (one and
two slots into the second) -- and the cache's last, 127; the second user sits at the mirrored
position (127, 96, 95, 94, 0), more tile edges. Each for decode on a contiguous cache, on a paged
cache (block size 32: a tile edge is a block edge, through a random block permutation), and in
ttnn's heads layout (``q_layout="heads"``, Q ``[1, batch, n_q_heads, head_dim]``: with 62 or 64
heads a user's heads take two row tiles, and with 31 per group the second group straddles them).

Every slot past a user's position holds NaN or +-Inf, so a read past the position, or a mask one
slot off, cannot pass. Bar: tests/bars.py's, each user's rows on their own; every run quiet.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode import attention
from ttnn_flashdecode.op.reference import attention_reference

from bars import assert_close, run_quiet

CAPACITY = 128
N_KV = 2
BLOCK = 32
POSITIONS = [0, 31, 32, 33, CAPACITY - 1]
GROUPS = [31, 32]
HEAD_DIMS = [32, 64, 96]
LAYOUTS = ["decode", "paged", "heads"]


def _inputs(group, head_dim, cur_pos, seed):
    """Q ``[1, 1, batch, n_q * head_dim]`` and a contiguous cache with poison past each position."""
    rng = np.random.default_rng(seed)
    batch, n_q = len(cur_pos), group * N_KV
    q = rng.standard_normal((1, 1, batch, n_q * head_dim), dtype=np.float32).astype(ml_dtypes.bfloat16)
    k, v = (rng.standard_normal((batch, N_KV, CAPACITY, head_dim), dtype=np.float32) for _ in range(2))
    for user, position in enumerate(cur_pos):
        k[user, :, position + 1:] = np.nan
        v[user, :, position + 1:] = (np.inf, -np.inf)[user % 2]
    return q, k.astype(ml_dtypes.bfloat16), v.astype(ml_dtypes.bfloat16)


def _paged(k, v, seed):
    """``k`` / ``v`` in ttnn's paged layout through a random block permutation (one spare block,
    NaN), and the page table."""
    batch, n_kv, capacity, head_dim = k.shape
    entries = capacity // BLOCK
    blocks = batch * entries + 1
    table = np.random.default_rng(seed).permutation(blocks)[:batch * entries].reshape(batch, entries).astype(np.int32)
    pages = []
    for cache in (k, v):
        paged = np.full((blocks, n_kv, BLOCK, head_dim), np.nan, ml_dtypes.bfloat16)
        for user in range(batch):
            for entry in range(entries):
                paged[table[user, entry]] = cache[user, :, entry * BLOCK:(entry + 1) * BLOCK]
        pages.append(paged)
    return pages[0], pages[1], table


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_tile_edge_shapes_match_float64(layout, group, head_dim, position):
    cur_pos = [position, CAPACITY - 1 - position]
    seed = position + 1000 * head_dim + 7 * group
    q, k, v = _inputs(group, head_dim, cur_pos, seed)
    want = attention_reference(q, k, v, cur_pos=cur_pos)
    batch, n_q = len(cur_pos), group * N_KV
    if layout == "decode":
        out = run_quiet(attention, q, k, v, cur_pos=cur_pos)
    elif layout == "paged":
        k_pages, v_pages, table = _paged(k, v, seed)
        out = run_quiet(attention, q, k_pages, v_pages, cur_pos=cur_pos, page_table_tensor=table)
    else:
        heads = q.reshape(1, batch, n_q, head_dim)
        out = run_quiet(attention, heads, k, v, cur_pos=cur_pos, q_layout="heads")
        assert out.shape == heads.shape
        out = out.reshape(q.shape)
    assert out.shape == q.shape
    for user, at in enumerate(cur_pos):
        assert_close(out[:, :, user], want[:, :, user],
                     f"{layout} {n_q}/{N_KV} heads d{head_dim} user {user} at position {at}")
