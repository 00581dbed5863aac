"""The emulator's run report names the program it ran: ``program_hash`` (the descriptor's
``custom_program_hash``) and ``runtime_args_sha256`` (every kernel's runtime args on every core)."""

from __future__ import annotations

import numpy as np

from ttnn_flashdecode import attention, last_report


def _call(cur_pos, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 1, 2, 4 * 64), dtype=np.float32)
    k = rng.standard_normal((2, 2, 256, 64), dtype=np.float32)
    attention(q, k, k, cur_pos=cur_pos)
    return last_report()


def test_run_report_identity_is_stable_for_the_same_call_and_data_independent():
    first, again, other_data = _call([100, 200]), _call([100, 200]), _call([100, 200], seed=1)
    assert first.program_hash is not None and len(first.runtime_args_sha256) == 64
    assert (first.program_hash, first.runtime_args_sha256) == (again.program_hash, again.runtime_args_sha256)
    assert (first.program_hash, first.runtime_args_sha256) == (other_data.program_hash, other_data.runtime_args_sha256)


def test_run_report_identity_does_not_see_positions():
    # Positions travel in the POSITIONS operand, not in the runtime args (issue 12): a new position
    # within the same schedule runs the very same program with the very same args.
    one, other = _call([100, 200]), _call([101, 200])
    assert (one.program_hash, one.runtime_args_sha256) == (other.program_hash, other.runtime_args_sha256)
