"""The emulator's L1-sharded tensors (a height-sharded Q as ``nlp_create_qkv_heads_decode`` leaves
it): the TensorAccessorArgs it builds are ttnn's own for the same tensor on a (mock) device, and a
host Q described as height-sharded is placed in the emulated cores' L1 and read there by the
reader's TensorAccessor: the output is bit-identical to the DRAM-interleaved call's, DRAM reads
drop by exactly Q's bytes and L1 reads rise by as much."""

from __future__ import annotations

import numpy as np
import pytest
import ttnn

from ttnn_flashdecode import last_report
from ttnn_flashdecode.emulator import sharded_tensor_accessor_compile_time_args
from ttnn_flashdecode.op.launch import to_numpy
from ttnn_flashdecode.transformer import scaled_dot_product_attention_decode

HEAD_DIM = 128
#: (users, core grid (y, x), shard orientation): one shard a core in a row, fewer users than the
#: grid's cores, two rows of cores, and the column-major order (banks down the columns first).
LAYOUTS = [(8, (1, 8), "ROW_MAJOR"), (3, (2, 2), "ROW_MAJOR"), (16, (2, 8), "ROW_MAJOR"), (6, (2, 4), "COL_MAJOR")]


def _config(users: int, grid, orientation: str):
    """L1 height-sharded, one tile row (32 Q heads' rows of one user) a shard, on a (y, x) grid."""
    cores = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(grid[1] - 1, grid[0] - 1))})
    spec = ttnn.ShardSpec(cores, [32, HEAD_DIM], getattr(ttnn.ShardOrientation, orientation))
    return ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)


def _banks(config):
    row_major = config.shard_spec.orientation == ttnn.ShardOrientation.ROW_MAJOR
    return ttnn.corerange_to_cores(config.shard_spec.grid, None, row_major)


@pytest.mark.parametrize("users, grid, orientation", LAYOUTS)
def test_sharded_accessor_args_are_ttnns(mock_device, users, grid, orientation):
    config = _config(users, grid, orientation)
    q = ttnn.to_device(ttnn.Tensor(np.zeros((1, users, 8, HEAD_DIM), np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT),
                       mock_device, memory_config=config)
    coords = [mock_device.worker_core_from_logical_core(c) for c in _banks(config)]
    ours = sharded_tensor_accessor_compile_time_args(2048, [users * HEAD_DIM // 32], [HEAD_DIM // 32],
                                                     [(c.x, c.y) for c in coords])
    assert ours == list(ttnn.TensorAccessorArgs(q).get_compile_time_args())


def _host_sharded(array: np.ndarray, config):
    """A host Q carrying ``config`` (what a sharded device tensor's ``.cpu()`` keeps)."""
    return ttnn.Tensor(array.reshape(-1).tolist(), list(array.shape), ttnn.bfloat16, ttnn.TILE_LAYOUT, None, config)


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("users, grid, orientation", LAYOUTS)
def test_a_height_sharded_host_q_is_read_from_l1(users, grid, orientation):
    rng = np.random.default_rng(users)
    q = rng.standard_normal((1, users, 8, HEAD_DIM)).astype(np.float32)
    k, v = (ttnn.Tensor(rng.standard_normal((users, 1, 256, HEAD_DIM)).astype(np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
            for _ in range(2))
    positions = [int(p) for p in rng.integers(0, 256, users)]
    interleaved = to_numpy(scaled_dot_product_attention_decode(ttnn.Tensor(q, ttnn.bfloat16).to(ttnn.TILE_LAYOUT), k, v,
                                                               cur_pos=positions))
    dram = last_report().totals
    sharded = to_numpy(scaled_dot_product_attention_decode(_host_sharded(q, _config(users, grid, orientation)), k, v,
                                                           cur_pos=positions))
    report = last_report()
    assert np.array_equal(sharded, interleaved)
    # The reader gathers each head's row of Q: two 64-byte face rows per head and dim tile.
    q_bytes = users * 8 * (HEAD_DIM // 32) * 2 * 64
    assert dram.dram_read_bytes - report.totals.dram_read_bytes == q_bytes
    assert report.totals.l1_read_bytes - dram.l1_read_bytes == q_bytes
    assert set(report.cores_used) == {c for cores in report.kernel_cores.values() for c in cores}


@pytest.mark.usefixtures("mock_cluster")
def test_a_sharded_q_of_the_rows_layout_is_refused():
    """attention()'s rows layout (Q ``[1, 1, batch, heads * dim]``) takes DRAM Q only, as on a device."""
    from ttnn_flashdecode import attention

    spec = ttnn.ShardSpec(ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(0, 0))}),
                          [32, 8 * HEAD_DIM], ttnn.ShardOrientation.ROW_MAJOR)
    config = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)
    q = _host_sharded(np.zeros((1, 1, 2, 8 * HEAD_DIM), np.float32), config)
    k = ttnn.Tensor(np.zeros((2, 8, 64, HEAD_DIM), np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
    with pytest.raises(ValueError, match="height-sharded"):
        attention(q, k, k, cur_pos=[3, 4])


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("users, grid, orientation", LAYOUTS[:2])
def test_a_height_sharded_output_is_written_to_l1(users, grid, orientation):
    """``memory_config=`` L1 height-sharded (the drop-in's output as tt-transformers asks for it):
    the writer writes each user's rows into the shard cores' L1, read back from there; the
    values are the DRAM output's, bit for bit, and DRAM writes drop by exactly the output's bytes."""
    rng = np.random.default_rng(7 + users)
    q = ttnn.Tensor(rng.standard_normal((1, users, 8, HEAD_DIM)).astype(np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
    k, v = (ttnn.Tensor(rng.standard_normal((users, 1, 128, HEAD_DIM)).astype(np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
            for _ in range(2))
    positions = [int(p) for p in rng.integers(0, 128, users)]
    interleaved = to_numpy(scaled_dot_product_attention_decode(q, k, v, cur_pos=positions))
    dram = last_report().totals
    sharded = to_numpy(scaled_dot_product_attention_decode(q, k, v, cur_pos=positions,
                                                           memory_config=_config(users, grid, orientation)))
    report = last_report().totals
    assert np.array_equal(sharded, interleaved)
    out_bytes = users * 8 * (HEAD_DIM // 32) * 2 * 32  # two 32-byte face rows per head and dim tile
    assert dram.dram_write_bytes - report.dram_write_bytes == out_bytes
    assert report.l1_write_bytes - dram.l1_write_bytes == out_bytes


@pytest.mark.usefixtures("mock_cluster")
def test_an_l1_interleaved_output_is_refused_on_the_emulator():
    q = ttnn.Tensor(np.zeros((1, 2, 8, HEAD_DIM), np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
    k = ttnn.Tensor(np.zeros((2, 1, 64, HEAD_DIM), np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
    with pytest.raises(ValueError, match="memory_config: expected DRAM interleaved"):
        scaled_dot_product_attention_decode(q, k, k, cur_pos=[3, 4], memory_config=ttnn.L1_MEMORY_CONFIG)


def _cores(x0, y0, x1, y1):
    return ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(x0, y0), ttnn.CoreCoord(x1, y1))})


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("cores, shard, match", [
    (_cores(0, 0, 2, 0), [32, HEAD_DIM], "memory_config: 8 shards of 32 rows on 3 cores"),
    (_cores(0, 8, 7, 8), [32, HEAD_DIM], r"memory_config: shard cores \[.*\] are outside the 8x8 grid"),
    (_cores(0, 0, 7, 0), [16, HEAD_DIM], "memory_config: a height shard of whole tile rows"),
    (_cores(0, 0, 7, 0), [32, 64], "memory_config: a height shard of whole tile rows spanning the padded width 128"),
], ids=["more-shards-than-cores", "core-outside-the-grid", "half-a-tile-row", "half-the-width"])
def test_bad_sharded_outputs_are_refused_by_name(cores, shard, match):
    q = ttnn.Tensor(np.zeros((1, 8, 8, HEAD_DIM), np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
    k = ttnn.Tensor(np.zeros((8, 1, 64, HEAD_DIM), np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
    config = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1,
                               ttnn.ShardSpec(cores, shard, ttnn.ShardOrientation.ROW_MAJOR))
    with pytest.raises(ValueError, match=match):
        scaled_dot_product_attention_decode(q, k, k, cur_pos=[3] * 8, memory_config=config)


@pytest.mark.usefixtures("mock_cluster")
def test_head_dim_80_shards_span_the_padded_width():
    """head_dim 80 pads to 3 tiles: a shard is [32, 96] (ttnn refuses [32, 80])."""
    rng = np.random.default_rng(80)
    q = rng.standard_normal((1, 2, 8, 80)).astype(np.float32)
    k, v = (ttnn.Tensor(rng.standard_normal((2, 1, 64, 80)).astype(np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
            for _ in range(2))
    config = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1,
                               ttnn.ShardSpec(_cores(0, 0, 1, 0), [32, 96], ttnn.ShardOrientation.ROW_MAJOR))
    plain = to_numpy(scaled_dot_product_attention_decode(ttnn.Tensor(q, ttnn.bfloat16).to(ttnn.TILE_LAYOUT), k, v,
                                                         cur_pos=[40, 63]))
    sharded = to_numpy(scaled_dot_product_attention_decode(_host_sharded(q, config), k, v, cur_pos=[40, 63],
                                                           memory_config=config))
    assert np.array_equal(sharded, plain)


@pytest.mark.usefixtures("mock_cluster")
def test_a_cache_outside_dram_is_refused():
    q = ttnn.Tensor(np.zeros((1, 2, 8, HEAD_DIM), np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
    k = ttnn.Tensor(np.zeros((2, 1, 64, HEAD_DIM), np.float32), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
    l1_k = ttnn.Tensor(np.zeros(2 * 64 * HEAD_DIM, np.float32).tolist(), [2, 1, 64, HEAD_DIM], ttnn.bfloat16,
                       ttnn.TILE_LAYOUT, None, ttnn.L1_MEMORY_CONFIG)
    with pytest.raises(ValueError, match="k: expected a DRAM-interleaved host cache"):
        scaled_dot_product_attention_decode(q, l1_k, k, cur_pos=[3, 4])
