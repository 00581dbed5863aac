"""Garbage past a row's position never reaches its output (issue 13, item 3; contiguous cache).

A serving stack recycles cache pages, so the slots past a user's position -- in its last live
tile and in every tile it has not reached -- may hold anything. Here they hold NaN and +-Inf,
and every request kind, split and unsplit, must still match the float64 reference, which reads
only positions ``0..p``. Pass bar: tests/test_attention.py's (PCC >= 0.9999, rel-L2 <= 1e-2).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode import attention
from ttnn_flashdecode.op.reference import attention_reference

from bars import assert_close, run_quiet

POISONS = (np.nan, np.inf, -np.inf)


def _poisoned(rng, batch, n_kv, capacity, head_dim, last_live):
    """K and V with unit-variance history at positions ``0..last_live[b]`` and NaN / +-Inf (in
    turn) at every later position of user ``b``."""
    k = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32)
    v = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32)
    for b, last in enumerate(last_live):
        for i, cache in enumerate((k, v)):
            stale = cache[b, :, last + 1:]
            stale[...] = POISONS[(b + i) % len(POISONS)]
            stale[..., ::3] = POISONS[(b + i + 1) % len(POISONS)]
    return k.astype(ml_dtypes.bfloat16), v.astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("split", [1, None, 3])
@pytest.mark.parametrize("cur_pos", [[0, 31, 32, 100], [45, 63, 64, 1000]])
def test_decode_ignores_poison_past_each_position(cur_pos, split):
    rng = np.random.default_rng(sum(cur_pos))
    k, v = _poisoned(rng, 4, 2, 1024, 64, cur_pos)
    q = rng.standard_normal((1, 1, 4, 8 * 64), dtype=np.float32).astype(ml_dtypes.bfloat16)
    assert_close(run_quiet(attention, q, k, v, cur_pos=cur_pos, split=split),
                 attention_reference(q, k, v, cur_pos=cur_pos), f"decode {cur_pos} split={split}")


@pytest.mark.parametrize("split", [1, 3])
def test_rows_ignore_poison_past_each_users_last_row(split):
    rng = np.random.default_rng(7)
    cur_pos = [3, 70, 500]
    k, v = _poisoned(rng, 3, 2, 1024, 64, cur_pos)
    q = rng.standard_normal((1, 1, 3 * 4, 4 * 64), dtype=np.float32).astype(ml_dtypes.bfloat16)
    assert_close(run_quiet(attention, q, k, v, cur_pos=cur_pos, rows=4, split=split),
           attention_reference(q, k, v, cur_pos=cur_pos, rows=4), f"rows split={split}")


@pytest.mark.parametrize("start, length", [(45, 7), (64, 20), (0, 32)])
def test_chunk_ignores_poison_past_the_chunk(start, length):
    rng = np.random.default_rng(start)
    k, v = _poisoned(rng, 1, 1, 1024, 64, [start + length - 1])
    q = rng.standard_normal((1, 1, length, 2 * 64), dtype=np.float32).astype(ml_dtypes.bfloat16)
    assert_close(run_quiet(attention, q, k, v, chunk_start=start), attention_reference(q, k, v, chunk_start=start),
           f"chunk {start}+{length}")
