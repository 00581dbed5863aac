"""What the attention tests share: the accuracy bar (tests/test_attention.py's, where it is
justified): PCC >= 0.9999 and relative L2 <= 1e-2 against float64 on the same bfloat16 (or
dequantised block-float) inputs, with the output rounded once to bfloat16; and quiet runs: a
valid call's emulated run reports no errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ttnn_flashdecode.op.operation import last_report, to_numpy
from ttnn_flashdecode.op.reference import pcc, relative_l2

MIN_PCC = 0.9999
MAX_RELATIVE_L2 = 1e-2


def assert_close(out, want, label: str) -> np.ndarray:
    """``out`` (numpy or host ttnn.Tensor) finite and within the bar of ``want``; returns it as float64."""
    got = np.asarray(to_numpy(out), dtype=np.float64)
    assert np.isfinite(got).all(), f"{label}: a non-finite output (poison reached it?)"
    figures = pcc(got, want), relative_l2(got, want)
    assert figures[0] >= MIN_PCC and figures[1] <= MAX_RELATIVE_L2, f"{label}: PCC {figures[0]:.6f}, rel-L2 {figures[1]:.2e}"
    return got


def assert_quiet(label: str = "") -> None:
    """The last emulated call of this thread (:func:`ttnn_flashdecode.last_report`) reported no
    errors: no DPRINT line starting with ERROR (a position clamped into the cache, a page-table
    entry outside it skipped, ...). Fails when the last call did not run on the emulator."""
    report = last_report()
    assert report is not None, f"{label}: no emulated run to check (the last call ran on a device, or none ran)"
    assert report.errors == [], f"{label}: the run reported errors: {report.errors}"


def run_quiet(op, *args, **kwargs):
    """``op(*args, **kwargs)`` -- :func:`ttnn_flashdecode.attention` or a drop-in -- on the
    emulator, asserting its run reported no errors (:func:`assert_quiet`); returns its output.
    Every test of a valid emulated call goes through this; tests that provoke a kernel-side error
    assert that error instead."""
    out = op(*args, **kwargs)
    assert_quiet(getattr(op, "__name__", str(op)))
    return out


CONSTANT_ROWS_BYTES = 3 * 2 * 64
"""DRAM bytes of the constants a normalising request reads for its scaler and scale tiles: their
three distinct rows (scaler rows 0 and 16, the scale's row 0), each as two 64-byte chunks; the
reader makes the rest of both tiles in L1 (``attention_reader.cpp`` ``fetch_constants``)."""

WORK_ROW_READS = 1
"""DRAM reads of a core's work row per launch: the reader's (compute's and the writer's copies are
copied from it in L1; ``attention_reader.cpp`` ``hand_over_work_row``)."""


def work_row_bytes(cores: int, requests_per_core: int = 1) -> int:
    """DRAM bytes ``cores`` cores read for their work rows (``protocol.work_row_words``, 4 bytes a word)."""
    from ttnn_flashdecode.op import protocol

    return cores * WORK_ROW_READS * 4 * protocol.work_row_words(requests_per_core)


POISONS = (np.nan, np.inf, -np.inf)
"""The values a recycled cache slot may hold; tests put them where no row may look."""


def bf16(x) -> np.ndarray:
    """``x`` rounded to bfloat16 (an ``ml_dtypes.bfloat16`` array)."""
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16)


def one_hot_scores(rng, lanes_scores, head_dim=64):
    """Q (one decode row, one KV head, ``lanes`` Q heads) and K whose scores, scaled by 0.5 (the
    callers' ``scale``), are exactly ``lanes_scores`` [lanes, capacity]; V standard normal. Returns
    bfloat16 (q, k, v)."""
    lanes, capacity = lanes_scores.shape
    q = np.zeros((1, 1, 1, lanes * head_dim), np.float32)
    k = rng.standard_normal((1, 1, capacity, head_dim), dtype=np.float32)
    for lane in range(lanes):
        q[0, 0, 0, lane * head_dim + lane] = 1.0
        k[0, 0, :, lane] = 2.0 * lanes_scores[lane]
    v = rng.standard_normal((1, 1, capacity, head_dim), dtype=np.float32)
    return bf16(q), bf16(k), bf16(v)


def poison_outside(cache, user, first, last, seed) -> None:
    """NaN / +-Inf in every slot of ``cache[user]`` outside positions ``first .. last``."""
    for span in (cache[user, :, :first], cache[user, :, last + 1:]):
        span[...] = POISONS[seed % 3]
        span[..., ::3] = POISONS[(seed + 1) % 3]


def random_inputs(rng, batch, n_q, n_kv, head_dim, capacity, rows=1):
    """Standard-normal float32 ``q`` ``[1, 1, batch * rows, n_q * head_dim]`` and ``k``, ``v``
    ``[batch, n_kv, capacity, head_dim]``."""
    q = rng.standard_normal((1, 1, batch * rows, n_q * head_dim), dtype=np.float32)
    k = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32)
    v = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32)
    return q, k, v
