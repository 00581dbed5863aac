"""``batch_invariant=True`` (issue 21 item 4): a request's output bits depend only on its own Q,
K/V, position and options, never on the batch size, its slot, the other users or their positions.

A fixed request (user "R": its Q row, its K/V, its position) is placed in random batches of 1..9
users at a random slot, the others with random Q, K/V and positions (idle ones included); its
output rows must be bit-identical to the batch-of-one run. Without the option the scheduler
balances the batch over the grid, so the same request's split (and so its bits) changes with the
batch: the last test shows that, so the property test cannot pass vacuously. Also checked: the
plan's split and block do not change with the batch, paged and contiguous, and accuracy against
float64 (tests/bars.py).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bars import assert_close, run_quiet
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op.reference import attention_reference

N_Q, N_KV, HEAD_DIM, CAPACITY = 4, 2, 64, 2048


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _user(rng):
    return (_bf16(rng.standard_normal((N_Q * HEAD_DIM,))), _bf16(rng.standard_normal((N_KV, CAPACITY, HEAD_DIM))),
            _bf16(rng.standard_normal((N_KV, CAPACITY, HEAD_DIM))))


def _batch(users, positions, **options):
    q = np.stack([u[0] for u in users])[None, None]
    k = np.stack([u[1] for u in users])
    v = np.stack([u[2] for u in users])
    return np.asarray(run_quiet(attention, q, k, v, cur_pos=list(positions), **options))[0, 0]


REQUEST = _user(np.random.default_rng(2024))
POSITION = 1500


@settings(max_examples=8, deadline=None, derandomize=True)
@given(size=st.integers(1, 9), slot_seed=st.integers(0, 2**16), others=st.integers(0, 2**16))
def test_a_request_gives_the_same_bits_in_any_batch(size, slot_seed, others):
    alone = _batch([REQUEST], [POSITION], batch_invariant=True)[0]
    rng = np.random.default_rng(others)
    slot = slot_seed % size
    users = [_user(rng) for _ in range(size)]
    positions = [int(p) for p in rng.integers(-1, CAPACITY, size)]
    users[slot], positions[slot] = REQUEST, POSITION
    together = _batch(users, positions, batch_invariant=True)
    assert np.array_equal(together[slot], alone), f"batch {size}, slot {slot}"


def test_accurate_and_the_plan_follows_the_request_alone():
    rng = np.random.default_rng(1)
    users = [_user(rng) for _ in range(6)]
    positions = [2047, 0, 31, 32, 1000, -1]
    out = _batch(users, positions, batch_invariant=True)
    plans = []
    for size in (1, 6):
        _batch(users[:size], positions[:size], batch_invariant=True)
        plan = last_report().plan
        plans.append((plan.residency.block_tiles, max(plan.schedule.split_count(r) for r in range(plan.shape.requests))))
    assert plans[0] == plans[1], plans
    q = np.stack([u[0] for u in users])[None, None]
    k, v = np.stack([u[1] for u in users]), np.stack([u[2] for u in users])
    assert_close(out[None, None], attention_reference(q, k, v, cur_pos=positions), "batch-invariant 6 users")


def test_paged_and_windowed_requests_are_invariant_too():
    rng = np.random.default_rng(3)
    users = [_user(rng) for _ in range(4)]
    q = np.stack([u[0] for u in users])[None, None]
    k, v = np.stack([u[1] for u in users]), np.stack([u[2] for u in users])
    block = 64
    entries = CAPACITY // block
    table = rng.permutation(4 * entries).astype(np.int32).reshape(4, entries)
    pages = lambda c: np.stack([c[u, :, e * block:(e + 1) * block] for u in range(4) for e in range(entries)])[
        np.argsort(table.reshape(-1))]
    pk, pv = pages(k), pages(v)
    options = dict(batch_invariant=True, sliding_window_size=700)
    full = np.asarray(run_quiet(attention, q, pk, pv, cur_pos=[1900, 5, 800, 2047], page_table_tensor=table,
                                **options))[0, 0]
    alone = np.asarray(run_quiet(attention, q[:, :, 2:3], pk, pv, cur_pos=[800], page_table_tensor=table[2:3],
                                 **options))[0, 0]
    assert np.array_equal(full[2], alone[0])


def test_without_it_the_split_follows_the_batch():
    """The control: the default scheduler gives the lone request more slices than the same request
    in a batch of 8, so its bits differ (this is what batch_invariant removes)."""
    rng = np.random.default_rng(7)
    users = [REQUEST] + [_user(rng) for _ in range(7)]
    positions = [POSITION] + [2047] * 7
    alone = _batch([REQUEST], [POSITION])
    split_alone = last_report().plan.schedule.split_count(0)
    together = _batch(users, positions)
    split_together = last_report().plan.schedule.split_count(0)
    assert split_alone != split_together
    assert not np.array_equal(alone[0], together[0])


def test_batch_invariant_must_be_a_bool():
    with pytest.raises(TypeError, match="batch_invariant: expected a bool"):
        _batch([REQUEST], [POSITION], batch_invariant=1)


def test_the_drop_ins_take_it():
    """Both drop-ins pass batch_invariant through: a user's row in a batch of 3 equals its batch-of-one
    row bit for bit, contiguous and paged."""
    from ttnn_flashdecode.transformer import (paged_scaled_dot_product_attention_decode,
                                              scaled_dot_product_attention_decode)

    rng = np.random.default_rng(11)
    users = [REQUEST, _user(rng), _user(rng)]
    q = np.stack([u[0] for u in users]).reshape(1, 3, N_Q, HEAD_DIM)
    k, v = np.stack([u[1] for u in users]), np.stack([u[2] for u in users])
    together = run_quiet(scaled_dot_product_attention_decode, q, k, v, cur_pos=[POSITION, 7, 2047], batch_invariant=True)
    alone = run_quiet(scaled_dot_product_attention_decode, q[:, :1], k[:1], v[:1], cur_pos=[POSITION],
                      batch_invariant=True)
    assert np.array_equal(np.asarray(together)[:, :1], np.asarray(alone))
    block = 128
    pages = lambda c: c.reshape(3, N_KV, CAPACITY // block, block, HEAD_DIM).transpose(0, 2, 1, 3, 4).reshape(
        -1, N_KV, block, HEAD_DIM)
    table = np.arange(3 * (CAPACITY // block), dtype=np.int32).reshape(3, -1)
    paged = run_quiet(paged_scaled_dot_product_attention_decode, q, pages(k), pages(v), table,
                      cur_pos_tensor=np.array([POSITION, 7, 2047], np.int32), batch_invariant=True)
    assert np.array_equal(np.asarray(paged)[:, :1], np.asarray(alone))


def test_a_batch_past_the_grid_keeps_the_bits():
    """40 users x 2 KV heads = 80 requests on the 64-core grid (several per core): still the lone
    request's bits (every request unsplit, whoever shares its core)."""
    rng = np.random.default_rng(40)
    capacity = 128
    q = _bf16(rng.standard_normal((1, 1, 40, N_Q * HEAD_DIM)))
    k, v = (_bf16(rng.standard_normal((40, N_KV, capacity, HEAD_DIM))) for _ in range(2))
    positions = [int(p) for p in rng.integers(0, capacity, 40)]
    together = np.asarray(run_quiet(attention, q, k, v, cur_pos=positions, batch_invariant=True))[0, 0]
    for user in (0, 17, 39):
        alone = np.asarray(run_quiet(attention, q[:, :, user:user + 1], k[user:user + 1], v[user:user + 1],
                                     cur_pos=[positions[user]], batch_invariant=True))[0, 0]
        assert np.array_equal(together[user], alone[0]), f"user {user}"
