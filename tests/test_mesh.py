"""Tensor parallelism on a mesh (issue 23), emulated device by device against float64.

The model's Q/K/V are split over ``D`` devices by KV heads as tt-transformers shards them
(``ttnn_flashdecode.op.mesh.shard_kv_heads``), held as host multi-device tensors
(``ttnn.from_host_shards``); ``attention()`` runs every device's shards through the emulator and
returns a host multi-device tensor sharded like Q, whose shards concatenated over the head dim must
match the float64 reference of the WHOLE model call (tests/bars.py's bar). Positions and page tables
are replicated (one list / one table for every device). The same calls on a mock T3K's
``ttnn.MeshDevice`` (JIT-built, dispatched, nothing executed) are the silicon check's ``t3k`` rows.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode import attention, transformer
from ttnn_flashdecode.op import tiles
from ttnn_flashdecode.op.mesh import host_mesh_tensor, is_host_mesh, mesh_to_numpy, shard_kv_heads
from ttnn_flashdecode.op.reference import attention_reference

from bars import assert_close, assert_quiet

pytestmark = pytest.mark.usefixtures("mock_cluster")  # ttnn's block-float packer needs tt-metal's context

BF16 = ml_dtypes.bfloat16


def _bf16(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32).astype(BF16).astype(np.float32)


def _model(rng, batch, n_q, n_kv, head_dim, capacity):
    return (_bf16(rng, (1, 1, batch, n_q * head_dim)), _bf16(rng, (batch, n_kv, capacity, head_dim)),
            _bf16(rng, (batch, n_kv, capacity, head_dim)))


@pytest.mark.parametrize("devices", [2, 4, 8])
def test_mesh_tensor_parallel_kv_heads_split_over_devices(devices):
    """Llama-3.1-70B's GQA (64 Q heads on 8 KV heads) at a small cache, over 2, 4 and 8 devices."""
    rng = np.random.default_rng(devices)
    cur_pos = [0, 100, 511, 300]
    q, k, v = _model(rng, 4, 64, 8, 64, 512)
    qs, ks, vs = shard_kv_heads(q, k, v, devices)
    mq, mk, mv = (host_mesh_tensor(s, layout=ttnn_row_major()) for s in (qs, ks, vs))
    out = attention(mq, mk, mv, cur_pos=cur_pos)
    assert_quiet("mesh")
    assert is_host_mesh(out) and len(ttnn_shards(out)) == devices
    assert [int(d) for d in ttnn_shards(out)[0].shape] == [1, 1, 4, 64 // devices * 64]
    assert str(out.tensor_topology()) == str(mq.tensor_topology())  # distributed like Q
    assert_close(mesh_to_numpy(out, 3), attention_reference(q, k, v, cur_pos=cur_pos), f"mesh {devices}")


def test_mesh_each_device_is_the_single_device_call():
    """Device i's output is bit for bit the single-device call on its own shards."""
    rng = np.random.default_rng(1)
    q, k, v = _model(rng, 2, 16, 4, 128, 256)
    qs, ks, vs = shard_kv_heads(q, k, v, 4)
    out = attention(*(host_mesh_tensor(s) for s in (qs, ks, vs)), cur_pos=[7, 255])
    for i, shard in enumerate(ttnn_shards(out)):
        alone = attention(qs[i], ks[i], vs[i], cur_pos=[7, 255])
        np.testing.assert_array_equal(np.asarray(shard.to_list(), np.float32), alone)


@pytest.mark.parametrize("devices", [2, 8])
def test_mesh_paged_bfloat8_b_cache_per_device(devices):
    """A paged bfloat8_b cache per device (its KV heads' blocks), one replicated page table."""
    import ttnn

    rng = np.random.default_rng(10 + devices)
    batch, n_q, n_kv, dh, block, per_user = 4, 32, 8, 128, 64, 8
    cur_pos = [5, 200, 511, 64]
    q = _bf16(rng, (1, 1, batch, n_q * dh))
    blocks = batch * per_user + 2
    k_paged, v_paged = _bf16(rng, (blocks, n_kv, block, dh)), _bf16(rng, (blocks, n_kv, block, dh))
    table = rng.permutation(blocks)[: batch * per_user].reshape(batch, per_user).astype(np.int32)
    qs, ks, vs = shard_kv_heads(q, k_paged, v_paged, devices)
    mk, mv = (host_mesh_tensor(s, dtype=ttnn.bfloat8_b) for s in (ks, vs))
    out = attention(host_mesh_tensor(qs), mk, mv, cur_pos=cur_pos, page_table_tensor=table)
    assert_quiet("mesh paged bfp8")
    # the reference on the contiguous view of the dequantised blocks
    k_values, v_values = (tiles.block_float_values(a, "bfloat8_b") for a in (k_paged, v_paged))
    k_cont, v_cont = (a[table].transpose(0, 2, 1, 3, 4).reshape(batch, n_kv, per_user * block, dh)
                      for a in (k_values, v_values))
    assert_close(mesh_to_numpy(out, 3), attention_reference(q, k_cont, v_cont, cur_pos=cur_pos), "mesh paged bfp8")


def test_mesh_idle_users_are_zero_on_every_device():
    """Idle slots (-1) through a replicated positions tensor: zero rows on every device."""
    rng = np.random.default_rng(3)
    cur_pos = np.array([-1, 40, -1, 1023], np.int32)
    q, k, v = _model(rng, 4, 8, 4, 64, 1024)
    qs, ks, vs = shard_kv_heads(q, k, v, 4)
    out = attention(*(host_mesh_tensor(s) for s in (qs, ks, vs)), cur_pos_tensor=cur_pos)
    got = mesh_to_numpy(out, 3)
    assert not got[0, 0, [0, 2]].any()
    live = [1, 3]
    want = attention_reference(q, k, v, cur_pos=cur_pos.tolist())
    assert_close(got[0, 0, live], want[0, 0, live], "mesh idle")


def test_mesh_positions_sharded_per_device_are_honoured():
    """A mesh positions tensor gives each device its own shard (data held per device)."""
    rng = np.random.default_rng(4)
    q, k, v = _model(rng, 2, 8, 2, 64, 256)
    qs, ks, vs = shard_kv_heads(q, k, v, 2)
    positions = host_mesh_tensor([np.array([10, 200], np.int32), np.array([255, -1], np.int32)])
    out = attention(*(host_mesh_tensor(s) for s in (qs, ks, vs)), cur_pos_tensor=positions)
    for i, (shard, pos) in enumerate(zip(ttnn_shards(out), ([10, 200], [255, -1]))):
        want = attention_reference(qs[i], ks[i], vs[i], cur_pos=pos)
        got = np.asarray(shard.to_list(), np.float64)
        assert_close(got[0, 0, [u for u, p in enumerate(pos) if p >= 0]],
                     want[0, 0, [u for u, p in enumerate(pos) if p >= 0]], f"mesh device {i}")


def test_mesh_drop_in_heads_layout():
    """ttnn's drop-in (Q ``[1, b, nh, dh]``) on an emulated 1x4 mesh, sharded on the head dim (2)."""
    rng = np.random.default_rng(5)
    batch, n_q, n_kv, dh, cap = 2, 16, 4, 64, 512
    q = _bf16(rng, (1, batch, n_q, dh))
    k, v = _bf16(rng, (batch, n_kv, cap, dh)), _bf16(rng, (batch, n_kv, cap, dh))
    qs, ks, vs = shard_kv_heads(q, k, v, 4, q_layout="heads")
    out = transformer.scaled_dot_product_attention_decode(*(host_mesh_tensor(s) for s in (qs, ks, vs)),
                                                          cur_pos=[100, 511])
    got = mesh_to_numpy(out, 2)
    want = attention_reference(q.reshape(1, 1, batch, n_q * dh), k, v, cur_pos=[100, 511])
    assert_close(got.reshape(1, 1, batch, n_q * dh), want, "mesh drop-in")


def test_mesh_refuses_mismatched_shards():
    rng = np.random.default_rng(6)
    q, k, v = _model(rng, 1, 8, 4, 64, 256)
    qs, ks, vs = shard_kv_heads(q, k, v, 4)
    with pytest.raises(ValueError, match="k: expected a host multi-device tensor"):
        attention(host_mesh_tensor(qs), k, v, cur_pos=[3])
    q2, k2, v2 = shard_kv_heads(q, k, v, 2)
    with pytest.raises(ValueError, match="expected a multi-device tensor of 4 shards like q, got 2"):
        attention(host_mesh_tensor(qs), host_mesh_tensor(k2), host_mesh_tensor(v2), cur_pos=[3])
    with pytest.raises(ValueError, match="mesh device 0 of 4: .*cur_pos"):
        attention(*(host_mesh_tensor(s) for s in (qs, ks, vs)), cur_pos=[300])
    with pytest.raises(ValueError, match="devices: expected a positive divisor of n_kv_heads = 4"):
        shard_kv_heads(q, k, v, 3)


def ttnn_shards(tensor):
    import ttnn

    return ttnn.get_device_tensors(tensor)


def ttnn_row_major():
    import ttnn

    return ttnn.ROW_MAJOR_LAYOUT


def test_mesh_per_device_attention_sinks():
    """gpt-oss under tensor parallelism: a sink tensor sharded over the mesh gives each device its
    heads' sinks (attention() in score units; the drop-in in ttnn's [nh, 32] layout, times scale)."""
    rng = np.random.default_rng(7)
    batch, n_q, n_kv, dh, cap, devices = 2, 16, 4, 64, 512, 4
    sinks = rng.uniform(-2.0, 3.0, n_q).astype(BF16).astype(np.float64)
    q, k, v = _model(rng, batch, n_q, n_kv, dh, cap)
    qs, ks, vs = shard_kv_heads(q, k, v, devices)
    sink_mesh = host_mesh_tensor(np.split(sinks.astype(np.float32), devices), layout=ttnn_row_major())
    out = attention(*(host_mesh_tensor(s) for s in (qs, ks, vs)), cur_pos=[30, 500], attention_sink=sink_mesh)
    want = attention_reference(q, k, v, cur_pos=[30, 500], attention_sink=sinks)
    assert_close(mesh_to_numpy(out, 3), want, "mesh sinks")
    # the drop-in: Q [1, b, nh, dh], ttnn's sink layout [nh, 32] sharded over the heads, scaled by ttnn's rule
    scale = 0.125
    ttnn_sinks = np.zeros((n_q, 32), np.float32)
    ttnn_sinks[:, 0] = sinks / scale
    q_heads = q.reshape(1, batch, n_q, dh)
    hq, hk, hv = shard_kv_heads(q_heads, k, v, devices, q_layout="heads")
    drop_in = transformer.scaled_dot_product_attention_decode(
        *(host_mesh_tensor(s) for s in (hq, hk, hv)), cur_pos=[30, 500], scale=scale,
        attention_sink=host_mesh_tensor(np.split(ttnn_sinks, devices), layout=ttnn_row_major()))
    want = attention_reference(q, k, v, cur_pos=[30, 500], attention_sink=sinks, scale=scale)
    assert_close(mesh_to_numpy(drop_in, 2).reshape(1, 1, batch, n_q * dh), want, "mesh drop-in sinks")


def test_mesh_2x4_batch_over_rows_kv_heads_over_columns():
    """A 2x4 mesh as tt-transformers' Galaxy-style 2D layout: users split over the mesh rows (data
    parallel: each row its users' Q, cache, positions and page-table rows), KV heads over the columns."""
    import ttnn

    rng = np.random.default_rng(8)
    batch, n_q, n_kv, dh, cap = 4, 16, 4, 64, 512
    cur_pos = [3, 511, -1, 250]
    q, k, v = _model(rng, batch, n_q, n_kv, dh, cap)
    qs, ks, vs, positions = [], [], [], []
    for r in range(2):  # device (r, c): users 2r, 2r+1 and KV heads c (row-major mesh order)
        users = slice(2 * r, 2 * r + 2)
        q_r, k_r, v_r = shard_kv_heads(q[:, :, users], k[users], v[users], 4)
        qs += q_r
        ks += k_r
        vs += v_r
        positions += [np.array(cur_pos[users], np.int32)] * 4
    shape = ttnn.MeshShape(2, 4)
    out = attention(*(host_mesh_tensor(s, mesh_shape=shape) for s in (qs, ks, vs)),
                    cur_pos_tensor=host_mesh_tensor(positions, mesh_shape=shape))
    shards = [np.asarray(s.to_list(), np.float64) for s in ttnn_shards(out)]
    got = np.concatenate([np.concatenate(shards[4 * r: 4 * r + 4], axis=3) for r in range(2)], axis=2)
    want = attention_reference(q, k, v, cur_pos=cur_pos)
    assert not got[0, 0, 2].any()
    assert_close(got[0, 0, [0, 1, 3]], want[0, 0, [0, 1, 3]], "mesh 2x4")


def test_mesh_one_chip_keeps_the_plain_program_descriptor(mock_device, monkeypatch):
    """On one chip (``ttnn.open_device``'s 1x1 mesh) the launch is unchanged: a plain
    ``ProgramDescriptor``, no mesh descriptor built (the mesh path is the silicon check's t3k rows)."""
    import ttnn

    from ttnn_flashdecode.op import fast_path
    from ttnn_flashdecode.op.mesh import check_device_operands, device_count, program_for_device

    def on_device(shape, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, values=None):
        data = np.random.default_rng(0).standard_normal(shape, dtype=np.float32) if values is None else values
        return ttnn.Tensor(data, dtype, layout=layout, device=mock_device, mem_config=ttnn.DRAM_MEMORY_CONFIG)

    fast_path.clear()
    q, k = on_device((1, 1, 2, 8 * 64)), on_device((2, 2, 256, 64))
    positions = on_device((2,), ttnn.int32, ttnn.ROW_MAJOR_LAYOUT, np.array([5, 200], np.int32))
    launched = []
    real = ttnn.generic_op
    monkeypatch.setattr(ttnn, "generic_op", lambda tensors, program: launched.append(type(program).__name__)
                        or real(tensors, program))
    attention(q, k, k, cur_pos_tensor=positions)
    attention(q, k, k, cur_pos_tensor=positions)  # the fast path
    assert launched == ["ProgramDescriptor"] * 2
    assert device_count(mock_device) == 1 and check_device_operands(q, {"k": k, "cur_pos_tensor": positions}) == 1
    program = object()
    assert program_for_device(mock_device, program) is program


def test_mesh_return_lse_per_device_heads():
    """return_lse on the emulated mesh: each device returns its own heads' LSE (float32), sharded
    like Q, equal to the float64 LSE of those heads."""
    rng = np.random.default_rng(9)
    q, k, v = _model(rng, 2, 16, 4, 64, 256)
    qs, ks, vs = shard_kv_heads(q, k, v, 4)
    out, lse = attention(*(host_mesh_tensor(s) for s in (qs, ks, vs)), cur_pos=[7, 255], return_lse=True)
    _, want = attention_reference(q, k, v, cur_pos=[7, 255], return_lse=True)
    got = np.concatenate([np.asarray(s.to_list(), np.float64) for s in ttnn_shards(lse)], axis=-1)
    assert got.shape == want.shape and np.abs(got - want).max() < 2e-2
    assert_close(mesh_to_numpy(out, 3), attention_reference(q, k, v, cur_pos=[7, 255]), "mesh with lse")
