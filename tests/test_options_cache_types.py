"""The options cache keys on each keyword's type, nested ones included: a grid of floats refused once
must not be handed back, cached, to a later call whose grid of ints equals it (hash and == agree
across 1 and 1.0)."""

from __future__ import annotations

import numpy as np
import pytest

from bars import run_quiet
from ttnn_flashdecode import attention


def test_an_int_grid_after_an_equal_float_grid_was_refused_runs():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 1, 1, 4 * 64), dtype=np.float32)
    k = rng.standard_normal((1, 1, 128, 64), dtype=np.float32)
    v = rng.standard_normal((1, 1, 128, 64), dtype=np.float32)
    with pytest.raises(TypeError, match=r"grid: expected None, \(x, y\).*got \(1\.0, 1\.0\)"):
        attention(q, k, v, cur_pos=[100], grid=(1.0, 1.0))
    out = run_quiet(attention, q, k, v, cur_pos=[100], grid=(1, 1))
    assert np.isfinite(out).all() and out.shape == q.shape
