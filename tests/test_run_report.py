"""What ran is what was asked (issue 25 item 3): the run report of an emulated call says the K/V
block, the split-K slices, the cores and the CBs that ran, so a requested ``block_tiles``,
``split`` or drop-in ``k_chunk_size`` is checked as run, not only through the output's values
(which agree within tolerance for blocks of 1, 2 or 8)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from bars import assert_close, run_quiet
from ttnn_flashdecode import attention, attention_reference, last_report
from ttnn_flashdecode.op import protocol

N_Q, N_KV, HEAD_DIM, CAPACITY = 8, 2, 64, 1024


def _inputs(batch=1, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 1, batch, N_Q * HEAD_DIM), dtype=np.float32).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((batch, N_KV, CAPACITY, HEAD_DIM), dtype=np.float32).astype(ml_dtypes.bfloat16)
    v = rng.standard_normal((batch, N_KV, CAPACITY, HEAD_DIM), dtype=np.float32).astype(ml_dtypes.bfloat16)
    return q, k, v


def _named_args(report, kernel="attention_reader"):
    """The named compile-time args every core ran the kernel with (one set: the same on all)."""
    sets = {tuple(sorted(args[kernel].items())) for args in report.named_compile_time_args.values()}
    assert len(sets) == 1, sets
    return dict(sets.pop())


@pytest.mark.parametrize("block_tiles", [1, 2, 8])
def test_requested_block_is_the_block_that_ran(block_tiles):
    q, k, v = _inputs()
    out = run_quiet(attention, q, k, v, cur_pos=[700], block_tiles=block_tiles, split=1)
    assert_close(out, attention_reference(q, k, v, cur_pos=[700]), f"block_tiles={block_tiles}")
    report = last_report()
    assert report.plan.block_tiles == block_tiles
    for kernel in ("attention_reader", "attention_compute", "attention_writer"):
        assert _named_args(report, kernel)["block_tiles"] == block_tiles
    # K and V hold two blocks of (block_tiles x dim tiles) pages on every core: the residency that ran.
    for cbs in report.cb_pages.values():
        assert cbs[protocol.CB.K].num_pages == cbs[protocol.CB.V].num_pages == 2 * block_tiles * HEAD_DIM // 32


@pytest.mark.parametrize("split", [1, 3, 5])
def test_requested_split_is_the_split_that_ran(split):
    q, k, v = _inputs()
    out = run_quiet(attention, q, k, v, cur_pos=[900], split=split, block_tiles=1)
    assert_close(out, attention_reference(q, k, v, cur_pos=[900]), f"split={split}")
    report = last_report()
    assert report.plan.split_counts == (split,) * N_KV
    assert len(report.kernel_cores["attention_compute"]) == split * N_KV == len(report.plan.cores)
    assert _named_args(report)["inbox_slots"] == protocol.tree_levels(split)
    assert (protocol.CB.PARTIALS in next(iter(report.cb_pages.values()))) == (split > 1)


@pytest.mark.parametrize("k_chunk_size", [32, 64, 256])
def test_a_drop_ins_k_chunk_size_is_the_block_that_ran(k_chunk_size):
    import ttnn

    from ttnn_flashdecode import transformer

    q, k, v = _inputs()
    q_heads = np.asarray(q, np.float32).reshape(1, 1, N_Q, HEAD_DIM)
    config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=0, k_chunk_size=k_chunk_size)
    out = run_quiet(transformer.scaled_dot_product_attention_decode, q_heads, k, v, cur_pos=[500], program_config=config)
    assert_close(out.reshape(q.shape), attention_reference(q, k, v, cur_pos=[500]), f"k_chunk_size={k_chunk_size}")
    assert last_report().plan.block_tiles == k_chunk_size // 32
    assert _named_args(last_report())["block_tiles"] == k_chunk_size // 32
