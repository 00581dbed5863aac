"""Context-parallel decode (issue 23, item 2) on the emulated mesh, against float64.

One model's cache is split by SEQUENCE over ``D`` devices (``shard_sequence``: device ``i`` holds
global positions ``shard_starts[i] ..``), Q replicated; ``context_parallel_attention`` runs every
device's shard through the emulator with its local positions (``clamp(p - start_i, -1, length_i -
1)``), all-gathers the partial (out, lse) pairs along the axis as ttnn defines ``all_gather`` and
merges them on every device. Every device's merged output must match the float64 reference of the
WHOLE unsharded call (tests/bars.py's bar: PCC >= 0.9999, rel-L2 <= 1e-2), and its max-abs error
stays within :func:`max_abs_bar` (a few bfloat16 ulps of the output: the op rounds each partial to
bfloat16 before the merge, the merge rounds once more). LSEs are checked with test_lse.py's bound
(``2e-3 + |S|max * 2**-7``: the bfloat16 scores' error).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import ttnn

from ttnn_flashdecode import attention, attention_reference, context_parallel_attention
from ttnn_flashdecode.op import tiles
from ttnn_flashdecode.op.context_parallel import (NO_SINK, all_gather_host, local_positions, shard_bounds,
                                                  shard_sequence)
from ttnn_flashdecode.op.mesh import host_mesh_tensor, shard_kv_heads

from bars import POISONS, assert_close

pytestmark = pytest.mark.usefixtures("mock_cluster")  # ttnn's TILE / block-float packing needs tt-metal's context

BF16 = ml_dtypes.bfloat16
B, NQ, NKV, D = 4, 8, 2, 64
def max_abs_bar(want) -> float:
    """Max-abs bar of a merged output: ``2**-6 * max(1, |want|max)``, four bfloat16 half-ulps of the
    largest output (the partials and the merged output are each rounded to bfloat16 once; the rest is
    the bfloat16 scores' error). Measured: 2e-3 .. 9e-3 at |o| ~ 1, 1.6e-2 with scores of tens."""
    return 2.0**-6 * max(1.0, float(np.abs(np.nan_to_num(np.asarray(want, np.float64))).max()))


def _bf16(rng, shape, gain: float = 1.0):
    return (rng.standard_normal(shape, dtype=np.float32) * gain).astype(BF16).astype(np.float32)


def _model(seed: int, capacity: int, gain: float = 1.0, batch: int = B):
    rng = np.random.default_rng(seed)
    return (_bf16(rng, (1, 1, batch, NQ * D), gain), _bf16(rng, (batch, NKV, capacity, D)),
            _bf16(rng, (batch, NKV, capacity, D)))


def _run(q, ks, vs, devices: int, **keywords):
    """The context-parallel call on an emulated 1 x ``devices`` mesh; returns each device's merged
    output (and LSE) as float64 arrays."""
    result = context_parallel_attention(host_mesh_tensor([q] * devices), host_mesh_tensor(ks), host_mesh_tensor(vs),
                                        return_lse=True, **keywords)
    outs, lses = ([np.asarray(s.to_list(), np.float64) for s in ttnn.get_device_tensors(t)] for t in result)
    assert len(outs) == devices
    for out, lse in zip(outs[1:], lses[1:]):  # replicated along the axis: every device merged the same partials
        np.testing.assert_array_equal(out, outs[0])
        np.testing.assert_array_equal(lse, lses[0])
    return outs[0], lses[0]


def _check(got, got_lse, want, want_lse, bound_s: float, label: str, record_property, live=None):
    live = slice(None) if live is None else live
    assert_close(got[0, 0, live], want[0, 0, live], label)
    err = float(np.abs(got[0, 0, live] - want[0, 0, live]).max())
    finite = np.isfinite(want_lse)
    assert np.array_equal(np.isneginf(got_lse), np.isneginf(want_lse)), f"{label}: -inf rows differ"
    lse_err = float(np.abs(got_lse[finite] - want_lse[finite]).max())
    record_property("figure", f"{label}: max-abs {err:.2e}, LSE max-abs {lse_err:.2e}")
    assert err <= max_abs_bar(want[0, 0, live]), f"{label}: max-abs {err:.3e}"
    assert lse_err <= 2e-3 + bound_s * 2.0**-7, f"{label}: LSE max-abs {lse_err:.3e}"


def _score_bound(q, k):
    q64 = q.astype(np.float64).reshape(q.shape[2], NKV, NQ // NKV, D)
    return float(np.abs(np.einsum("bgqd,bgld->bgql", q64, np.nan_to_num(k.astype(np.float64)))).max() / math.sqrt(D))


@pytest.mark.parametrize("devices", [2, 4, 8])
def test_context_parallel_matches_float64(devices, record_property):
    """Even shards of 64 positions a device: position 0 (every later device empty), the last of
    device 0 and the first of device 1 (a shard boundary), a mid-shard one and the very last."""
    local = 64
    capacity = devices * local
    positions = [0, local - 1, local, capacity - 1]
    q, k, v = _model(devices, capacity)
    ks, vs = shard_sequence(k, v, [i * local for i in range(devices)], local)
    got, got_lse = _run(q, ks, vs, devices, cur_pos=positions)
    want, want_lse = attention_reference(q, k, v, cur_pos=positions, return_lse=True)
    _check(got, got_lse, want, want_lse, _score_bound(q, k), f"context parallel {devices} devices", record_property)


def test_context_parallel_uneven_shards_with_boundaries_at_31_and_32(record_property):
    """Uneven shards (32, 64, 64 and 128 positions; every cache holds 128): positions 0, 31 (device 0's
    last), 32 (device 1's first), 95, 96 and the last, plus an idle user."""
    starts, local = [0, 32, 96, 160], 128
    capacity = starts[-1] + local
    positions = [0, 31, 32, 95, 96, capacity - 1, -1]
    q, k, v = _model(30, capacity, batch=len(positions))
    ks, vs = shard_sequence(k, v, starts, local, fill=np.nan)  # slots past each shard: NaN, never read
    got, got_lse = _run(q, ks, vs, 4, cur_pos=positions, shard_starts=starts)
    want, want_lse = attention_reference(q, k, v, cur_pos=positions, return_lse=True)
    assert not got[0, 0, 6].any() and np.isneginf(got_lse[0, 0, 6]).all()
    _check(got, got_lse, want, want_lse, _score_bound(q, k), "uneven shards", record_property, live=slice(0, 6))


def test_context_parallel_short_request_leaves_later_devices_empty(record_property):
    """A short request (position 10 of 8 x 64) over 8 devices: devices 1..7 get local position -1, an
    empty partial (out 0, LSE -inf: the op's idle slot), and never read their caches: all NaN there."""
    devices, local = 8, 64
    starts = [i * local for i in range(devices)]
    assert [int(local_positions([10], s, local)[0]) for s in starts] == [10] + [-1] * 7
    q, k, v = _model(31, devices * local)
    ks, vs = shard_sequence(k, v, starts, local)
    for shard in (*ks[1:], *vs[1:]):
        shard[...] = np.nan
    ks[0][:, :, 11:] = vs[0][:, :, 11:] = np.inf  # device 0 past the position: never reaches the output
    positions = [10, 0, 3, 10]
    out, lse = attention(q, ks[5], vs[5], cur_pos=[-1] * B, return_lse=True)  # what device 5 returns
    assert not np.asarray(out, np.float32).any() and np.isneginf(lse).all()
    got, got_lse = _run(q, ks, vs, devices, cur_pos=positions)
    k_clean, v_clean = (np.nan_to_num(a, posinf=0.0) for a in (k, v))
    want, want_lse = attention_reference(q, k_clean, v_clean, cur_pos=positions, return_lse=True)
    _check(got, got_lse, want, want_lse, _score_bound(q, k_clean), "short request", record_property)


def test_context_parallel_idle_users_are_zero_on_every_device():
    """Idle slots (-1) through a positions tensor: zero rows and LSE -inf after the merge; the other
    users match float64."""
    q, k, v = _model(32, 256)
    ks, vs = shard_sequence(k, v, [0, 64, 128, 192], 64)
    positions = np.array([-1, 200, -1, 63], np.int32)
    result = context_parallel_attention(host_mesh_tensor([q] * 4), host_mesh_tensor(ks), host_mesh_tensor(vs),
                                        cur_pos_tensor=positions, return_lse=True)
    want = attention_reference(q, k, v, cur_pos=positions.tolist())
    for out, lse in zip(*(ttnn.get_device_tensors(t) for t in result)):
        got, got_lse = np.asarray(out.to_list(), np.float64), np.asarray(lse.to_numpy(), np.float64)
        assert not got[0, 0, [0, 2]].any() and np.isneginf(got_lse[0, 0, [0, 2]]).all()
        assert np.isfinite(got_lse[0, 0, [1, 3]]).all()
        assert_close(got[0, 0, [1, 3]], want[0, 0, [1, 3]], "idle users")


@pytest.mark.parametrize("devices", [2, 4])
def test_context_parallel_paged_bfloat8_b_one_page_table_per_device(devices, record_property):
    """Each device a paged bfloat8_b cache of its own (its shard's blocks, shuffled) and its own page
    table mapping LOCAL positions to its blocks; NaN in the spare blocks."""
    block, per_user = 64, 2
    local = block * per_user
    capacity = devices * local
    positions = [5, local, capacity - 1, 2 * local - 1]
    q, k, v = _model(40 + devices, capacity)
    k_values, v_values = (tiles.block_float_values(a, "bfloat8_b") for a in (k, v))
    ks, vs = shard_sequence(k, v, [i * local for i in range(devices)], local)
    rng = np.random.default_rng(devices)
    blocks = B * per_user + 2
    paged_k, paged_v, tables = [], [], []
    for dk, dv in zip(ks, vs):
        table = rng.permutation(blocks)[: B * per_user].reshape(B, per_user).astype(np.int32)
        pk, pv = (np.full((blocks, NKV, block, D), np.nan, np.float32) for _ in range(2))
        for b in range(B):
            for j in range(per_user):
                pk[table[b, j]] = dk[b, :, j * block:(j + 1) * block]
                pv[table[b, j]] = dv[b, :, j * block:(j + 1) * block]
        paged_k.append(pk)
        paged_v.append(pv)
        tables.append(table)
    for pk, pv in zip(paged_k, paged_v):  # the spare blocks: zero for the packer, then left unread
        pk[np.isnan(pk)] = 0.0
        pv[np.isnan(pv)] = 0.0
    result = context_parallel_attention(
        host_mesh_tensor([q] * devices), host_mesh_tensor(paged_k, dtype=ttnn.bfloat8_b),
        host_mesh_tensor(paged_v, dtype=ttnn.bfloat8_b), cur_pos=positions,
        page_table_tensor=host_mesh_tensor(tables), return_lse=True)
    got, got_lse = (np.asarray(ttnn.get_device_tensors(t)[-1].to_list(), np.float64) for t in result)
    want, want_lse = attention_reference(q, k_values, v_values, cur_pos=positions, return_lse=True)
    _check(got, got_lse, want, want_lse, _score_bound(q, k_values), f"paged bfp8 {devices} devices", record_property)


def test_context_parallel_poison_beyond_each_devices_live_range(record_property):
    """NaN / +-inf in every cache slot a device does not attend: past each user's local position on
    its partial device, past each shard's end (uneven shards), and everywhere on empty devices."""
    starts, local = [0, 64, 192], 128
    capacity = starts[-1] + local
    positions = [63, 64, 200, capacity - 1]
    q, k, v = _model(50, capacity)
    ks, vs = shard_sequence(k, v, starts, local)
    _, lengths = shard_bounds(starts, 3, local)
    for i, (start, length) in enumerate(zip(starts, lengths)):
        for user, p in enumerate(positions):
            last = int(local_positions([p], start, length)[0])
            for cache in (ks[i], vs[i]):
                cache[user, :, last + 1:] = POISONS[(i + user) % 3]
                cache[user, :, last + 1::3] = POISONS[(i + user + 1) % 3]
    got, got_lse = _run(q, ks, vs, 3, cur_pos=positions, shard_starts=starts)
    want, want_lse = attention_reference(q, k, v, cur_pos=positions, return_lse=True)
    _check(got, got_lse, want, want_lse, _score_bound(q, k), "poisoned", record_property)


def test_context_parallel_equals_the_single_device_call(record_property):
    """The merge of 4 devices' partials against attention() of the unsharded cache on one device: the
    bar and the LSE bound between the two (both against the same bfloat16 inputs)."""
    capacity = 512
    positions = [100, 511, 256, 300]
    q, k, v = _model(60, capacity, gain=2.0)
    ks, vs = shard_sequence(k, v, [0, 128, 256, 384], 128)
    got, got_lse = _run(q, ks, vs, 4, cur_pos=positions)
    whole, whole_lse = attention(q, k, v, cur_pos=positions, return_lse=True)
    _check(got, got_lse, np.asarray(whole, np.float64), np.asarray(whole_lse, np.float64), _score_bound(q, k),
           "merged vs single device", record_property)


def test_context_parallel_large_logits(record_property):
    """Scores of tens (Q x 8): the partials' LSEs differ by tens between devices, so the merge's
    weights span e^-40 and more. At such scores the bfloat16 scores themselves cost accuracy: the
    single-device call on the unsharded cache is at PCC 0.99987, rel-L2 1.6e-2 against float64
    (measured), outside the bar, so the merged output is held to the bar against THAT call (context
    parallelism adds no error of its own), and the LSE against float64 with test_lse.py's bound."""
    q, k, v = _model(70, 256, gain=8.0)
    positions = [255, 128, 64, 200]
    ks, vs = shard_sequence(k, v, [0, 64, 128, 192], 64)
    got, got_lse = _run(q, ks, vs, 4, cur_pos=positions)
    whole = np.asarray(attention(q, k, v, cur_pos=positions), np.float64)
    _, want_lse = attention_reference(q, k, v, cur_pos=positions, return_lse=True)
    bound = _score_bound(q, k)
    assert bound > 20
    assert_close(got, whole, "large logits vs the single-device call")
    err, lse_err = float(np.abs(got - whole).max()), float(np.abs(got_lse - want_lse).max())
    record_property("figure", f"large logits: max-abs {err:.2e} vs one device, LSE max-abs {lse_err:.2e} vs float64")
    assert err <= max_abs_bar(whole) and lse_err <= 2e-3 + bound * 2.0**-7, (err, lse_err)


def test_context_parallel_sinks_are_folded_once():
    """gpt-oss's sinks: the first device of the axis folds them, the others get NO_SINK (weight 0); an
    idle user's LSE stays -inf."""
    sinks = [-1.0, 0.5, 2.0, 8.0, -8.0, 0.0, 1.5, 3.0]
    q, k, v = _model(80, 256)
    ks, vs = shard_sequence(k, v, [0, 64, 128, 192], 64)
    positions = [10, 255, -1, 130]
    got, got_lse = _run(q, ks, vs, 4, cur_pos=positions, attention_sink=sinks)
    want, want_lse = attention_reference(q, k, v, cur_pos=positions, attention_sink=np.array(sinks), return_lse=True)
    live = [0, 1, 3]
    assert_close(got[0, 0, live], want[0, 0, live], "sinks")
    assert np.abs(got_lse[0, 0, live] - want_lse[0, 0, live]).max() <= 2e-3 + _score_bound(q, k) * 2.0**-7
    assert np.isneginf(got_lse[0, 0, 2]).all() and not got[0, 0, 2].any()
    # NO_SINK on a device with live positions is no sink at all
    plain = attention(q, ks[1], vs[1], cur_pos=[63] * B, return_lse=True)
    nosink = attention(q, ks[1], vs[1], cur_pos=[63] * B, attention_sink=[NO_SINK] * NQ, return_lse=True)
    np.testing.assert_array_equal(np.asarray(plain[0], np.float32), np.asarray(nosink[0], np.float32))
    np.testing.assert_array_equal(plain[1], nosink[1])


@pytest.mark.parametrize("axis", [1, 0])
def test_context_parallel_2d_mesh_heads_on_one_axis_sequence_on_the_other(axis):
    """Galaxy-style 2D meshes: the sequence over ``mesh_axis`` (4 devices, 64 positions each), the KV
    heads over the other axis (2 devices, tensor parallel): a 2x4 mesh with ``mesh_axis=1`` and a 4x2
    mesh with ``mesh_axis=0``. Each device's merged output is its heads' slice of the whole call."""
    q, k, v = _model(90, 256, batch=2)
    positions = [70, 255]
    want = attention_reference(q, k, v, cur_pos=positions)
    qs, kh, vh = shard_kv_heads(q, k, v, 2)
    shape = (2, 4) if axis == 1 else (4, 2)
    coords = [(r, c) for r in range(shape[0]) for c in range(shape[1])]
    heads = [coord[1 - axis] for coord in coords]
    seqs = [coord[axis] for coord in coords]
    qm = [qs[h] for h in heads]
    km = [kh[h][:, :, 64 * i:64 * i + 64] for h, i in zip(heads, seqs)]
    vm = [vh[h][:, :, 64 * i:64 * i + 64] for h, i in zip(heads, seqs)]
    mesh_shape = ttnn.MeshShape(*shape)
    out = context_parallel_attention(*(host_mesh_tensor(s, mesh_shape=mesh_shape) for s in (qm, km, vm)),
                                     cur_pos=positions, mesh_axis=axis)
    width = NQ // 2 * D
    for index, (shard, head) in enumerate(zip(ttnn.get_device_tensors(out), heads)):
        assert_close(np.asarray(shard.to_list(), np.float64), want[..., head * width:(head + 1) * width],
                     f"{shape} mesh, axis {axis}, device {index}")


def test_context_parallel_all_gather_host_is_ttnn_all_gather():
    """The host model of ``ttnn.all_gather(x, dim, cluster_axis)`` on a 2x4 mesh: each device its line's
    tensors, in line order, concatenated on ``dim``; lines gather independently."""
    shards = [np.full((1, 2), 10 * r + c) for r in range(2) for c in range(4)]
    along_rows = all_gather_host(shards, (2, 4), axis=1, dim=1)
    assert along_rows[5].tolist() == [[10, 10, 11, 11, 12, 12, 13, 13]]
    along_cols = all_gather_host(shards, (2, 4), axis=0, dim=0)
    assert along_cols[6].tolist() == [[2, 2], [12, 12]]


def test_context_parallel_local_positions_and_refusals():
    assert local_positions([-1, 0, 31, 32, 95, 96, 500], 32, 64).tolist() == [-1, -1, -1, 0, 63, 63, 63]
    assert shard_bounds(None, 4, 64) == ([0, 64, 128, 192], [64, 64, 64, 64])
    assert shard_bounds([0, 32, 96], 3, 64) == ([0, 32, 96], [32, 64, 64])
    for bad, message in (([0, 32], "expected 3 starts"), ([5, 32, 96], "start at position 0"),
                         ([0, 32, 32], "expected increasing starts"), ([0, 100, 120], "device 0 holds 100")):
        with pytest.raises(ValueError, match=message):
            shard_bounds(bad, 3, 64)
    with pytest.raises(TypeError, match="shard_starts: expected a sequence of 2 ints"):
        shard_bounds([0, 1.5], 2, 64)
    q, k, v = _model(99, 128)
    ks, vs = shard_sequence(k, v, [0, 64], 64)
    mq, mk, mv = host_mesh_tensor([q] * 2), host_mesh_tensor(ks), host_mesh_tensor(vs)
    for name, value in (("sliding_window_size", 64), ("attention_chunk_size", 64), ("rows", 2)):
        with pytest.raises(NotImplementedError, match=f"{name}: not supported with context parallelism"):
            context_parallel_attention(mq, mk, mv, cur_pos=[1] * B, **{name: value})
    with pytest.raises(ValueError, match=r"expected global positions -1 \.\. 127"):
        context_parallel_attention(mq, mk, mv, cur_pos=[128, 0, 0, 0])
    with pytest.raises(TypeError, match="expected one of them"):
        context_parallel_attention(mq, mk, mv)
    with pytest.raises(TypeError, match="q: expected a multi-device tensor"):
        context_parallel_attention(q, mk, mv, cur_pos=[1] * B)
    with pytest.raises(ValueError, match="mesh_axis: expected 0 or 1"):
        context_parallel_attention(mq, mk, mv, cur_pos=[1] * B, mesh_axis=2)
    with pytest.raises(ValueError, match="mesh device 0 of 2: block_tiles"):  # a device's call refused, named
        context_parallel_attention(mq, mk, mv, cur_pos=[1] * B, block_tiles=10**6)
    with pytest.raises(ValueError, match="^scale: expected a finite positive"):  # the options: once, before any device
        context_parallel_attention(mq, mk, mv, cur_pos=[1] * B, scale=-1.0)


def test_context_parallel_merge_false_returns_the_gathered_partials():
    """``merge=False`` stops after the all-gather: every device holds the line's partials stacked on a
    leading dim (what ``ttnn.all_gather(x, dim=0)`` gives on a device mesh); merged, they are the call."""
    from ttnn_flashdecode import merge_attention_states

    q, k, v = _model(95, 256)
    ks, vs = shard_sequence(k, v, [0, 64, 128, 192], 64)
    positions = [3, 100, 255, -1]
    outs, lses = context_parallel_attention(host_mesh_tensor([q] * 4), host_mesh_tensor(ks), host_mesh_tensor(vs),
                                            cur_pos=positions, merge=False)
    out0 = np.asarray(ttnn.get_device_tensors(outs)[2].to_list(), np.float32)
    lse0 = np.asarray(ttnn.get_device_tensors(lses)[2].to_numpy(), np.float32)
    assert out0.shape == (4, 1, B, NQ * D) and lse0.shape == (4, 1, B, NQ)
    assert np.isneginf(lse0[1:, 0, 0]).all() and not out0[1:, 0, 0].any()  # user 0 (position 3): devices 1.. empty
    merged, _ = merge_attention_states([o[None] for o in out0], [s[None] for s in lse0])
    want = attention_reference(q, k, v, cur_pos=positions)
    assert_close(merged[0, 0, :3], want[0, 0, :3], "gathered, merged by the caller")


def test_context_parallel_heads_layout():
    """``q_layout="heads"`` (ttnn's decode layout, what tt-transformers holds): Q and the merged output
    ``[1, batch, n_q_heads, head_dim]``, the LSE ``[1, batch, n_q_heads]``."""
    q, k, v = _model(96, 128)
    ks, vs = shard_sequence(k, v, [0, 64], 64)
    heads = q.reshape(1, B, NQ, D)
    out, lse = context_parallel_attention(host_mesh_tensor([heads] * 2), host_mesh_tensor(ks), host_mesh_tensor(vs),
                                          cur_pos=[0, 64, 127, -1], q_layout="heads", return_lse=True)
    got = np.asarray(ttnn.get_device_tensors(out)[1].to_list(), np.float64)
    got_lse = np.asarray(ttnn.get_device_tensors(lse)[1].to_numpy(), np.float64)
    want, want_lse = attention_reference(q, k, v, cur_pos=[0, 64, 127, -1], return_lse=True)
    assert got.shape == (1, B, NQ, D) and got_lse.shape == (1, B, NQ)
    assert_close(got.reshape(1, 1, B, NQ * D)[0, 0, :3], want[0, 0, :3], "heads layout")
    assert np.abs(got_lse[0, :3] - want_lse[0, 0, :3]).max() <= 2e-3 + _score_bound(q, k) * 2.0**-7
    assert np.isneginf(got_lse[0, 3]).all() and not got[0, 3].any()
