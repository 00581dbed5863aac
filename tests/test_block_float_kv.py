"""bfloat8_b and bfloat4_b KV caches (issue 13, item 2): K/V as ttnn packs them, Q and output bfloat16.

The caches are host ``ttnn.Tensor``s packed by ttnn itself; the float64 reference runs on their
dequantised values (``tiles.block_float_values``: ttnn's own round trip), so the bars are the
bfloat16 cache's (PCC >= 0.9999, rel-L2 <= 1e-2; tests/test_attention.py): a block-float datum
(7- or 3-bit magnitude under its face row's shared exponent) is exact in the unpacker's bf16
source registers, so the format's quantisation is in the reference too and the kernels add only
bf16 rounding of P and the output. The quantisation itself is measured against the unquantised
cache and printed (bench territory), bounded loosely per format.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op import tiles
from ttnn_flashdecode.op.operation import to_numpy
from ttnn_flashdecode.op.reference import attention_reference, relative_l2

from bars import assert_close, run_quiet

pytestmark = pytest.mark.usefixtures("mock_cluster")  # ttnn's block-float packer needs tt-metal's context

DTYPES = ("bfloat8_b", "bfloat4_b")


def _ttnn(dtype):
    import ttnn

    return {"bfloat8_b": ttnn.bfloat8_b, "bfloat4_b": ttnn.bfloat4_b, "bfloat16": ttnn.bfloat16}[dtype]


def _cache(array, dtype):
    """``array`` as a host ttnn.Tensor of ``dtype`` (TILE) and the values ttnn's packing keeps."""
    import ttnn

    tensor = ttnn.Tensor(np.ascontiguousarray(array, np.float32), _ttnn(dtype), layout=ttnn.TILE_LAYOUT)
    if dtype == "bfloat16":
        return tensor, np.asarray(array, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    return tensor, tiles.block_float_values(np.asarray(array, np.float32), dtype)


def _q(rng, shape):
    import ttnn

    q = rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)
    return ttnn.Tensor(q.astype(np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT), q


@pytest.mark.parametrize("split", [1, None, 3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_on_a_block_float_cache(dtype, split, record_property):
    rng = np.random.default_rng(len(dtype) + (split or 0))
    cur_pos = [0, 33, 700, 2047]
    k_raw = rng.standard_normal((4, 2, 2048, 128), dtype=np.float32)
    v_raw = rng.standard_normal((4, 2, 2048, 128), dtype=np.float32)
    (k, k_values), (v, v_values) = _cache(k_raw, dtype), _cache(v_raw, dtype)
    q_tensor, q = _q(rng, (1, 1, 4, 8 * 128))
    got = assert_close(run_quiet(attention, q_tensor, k, v, cur_pos=cur_pos, split=split),
                 attention_reference(q, k_values, v_values, cur_pos=cur_pos), f"{dtype} split={split}")
    # What the format costs against the unquantised cache (not the kernels' error: measured here).
    quantised = relative_l2(got, attention_reference(q, k_raw, v_raw, cur_pos=cur_pos))
    record_property("figure", f"{dtype} decode split={split}: rel-L2 vs the unquantised cache {quantised:.2e}")
    assert quantised < {"bfloat8_b": 0.05, "bfloat4_b": 0.4}[dtype]


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_on_a_block_float_cache(dtype, split):
    rng = np.random.default_rng(21)
    cur_pos = [3, 70, 500]
    (k, kv_k), (v, kv_v) = (_cache(rng.standard_normal((3, 2, 512, 64), dtype=np.float32), dtype) for _ in range(2))
    q_tensor, q = _q(rng, (1, 1, 3 * 4, 4 * 64))
    assert_close(run_quiet(attention, q_tensor, k, v, cur_pos=cur_pos, rows=4, split=split),
           attention_reference(q, kv_k, kv_v, cur_pos=cur_pos, rows=4), f"{dtype} rows split={split}")


@pytest.mark.parametrize("start, length, split", [(45, 7, 1), (100, 20, 3)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_chunk_on_a_block_float_cache(dtype, start, length, split):
    rng = np.random.default_rng(start)
    (k, kv_k), (v, kv_v) = (_cache(rng.standard_normal((1, 1, 512, 64), dtype=np.float32), dtype) for _ in range(2))
    q_tensor, q = _q(rng, (1, 1, length, 2 * 64))
    assert_close(run_quiet(attention, q_tensor, k, v, chunk_start=start, split=split),
           attention_reference(q, kv_k, kv_v, chunk_start=start), f"{dtype} chunk {start}+{length} split={split}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_hard_scores_match_the_bfloat16_cache_of_the_same_values(dtype):
    """Large positive and all-negative scores (K scaled so q.k/sqrt(d) spans ~[-150, 150]: exp
    overflows without the running max), V up to ~1e3. A block-float datum is exact in bf16, so the
    op on the packed cache must give the bits it gives on a bfloat16 cache of the dequantised
    values: the unpacker's conversion is the only difference, and it must be exact."""
    rng = np.random.default_rng(3)
    q_tensor, q = _q(rng, (1, 1, 2, 4 * 64))
    k_raw = rng.standard_normal((2, 1, 1024, 64), dtype=np.float32) * 12
    v_raw = rng.standard_normal((2, 1, 1024, 64), dtype=np.float32) * 1e3
    k_raw[1] = -np.abs(k_raw[1]) * np.sign(np.asarray(q, np.float32)[0, 0, 1, :64])  # every score negative
    (k, kv_k), (v, kv_v) = _cache(k_raw, dtype), _cache(v_raw, dtype)
    for split in (1, 5):
        got = to_numpy(run_quiet(attention, q_tensor, k, v, cur_pos=[1000, 700], split=split))
        want = run_quiet(attention, q, kv_k.astype(ml_dtypes.bfloat16), kv_v.astype(ml_dtypes.bfloat16),
                         cur_pos=[1000, 700], split=split)
        assert np.isfinite(got).all() and np.array_equal(got, np.asarray(want, np.float32)), f"{dtype} split={split}"


def _poisoned_cache(rng, dtype, batch, n_kv, capacity, head_dim, last_live):
    """A ``dtype`` cache (K, V) whose slots past ``last_live[b]`` hold NaN / +-Inf as ttnn packs
    them (a poisoned face row takes exponent 255), and the dequantised values of the live part
    (the reference's cache: positions past ``last_live`` zero, never attended)."""
    k_raw = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32)
    v_raw = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32)
    for b, last in enumerate(last_live):
        k_raw[b, :, last + 1:] = (np.nan, np.inf, -np.inf, np.nan)[b % 4]
        v_raw[b, :, last + 1:, ::2] = (np.inf, np.nan, -np.inf, np.inf)[b % 4]
    live = np.arange(capacity)[None, None, :, None] <= np.asarray(last_live)[:, None, None, None]
    (k, _), (v, _) = _cache(k_raw, dtype), _cache(v_raw, dtype)
    return k, v, *(tiles.block_float_values(np.where(live, a, 0), dtype) for a in (k_raw, v_raw))


@pytest.mark.parametrize("dtype", DTYPES)
def test_poison_past_each_position_never_reaches_the_output(dtype):
    """The reader zeroes the stale rows' data; a block-float row is one position, so no live
    position shares an exponent with poison. Decode, ROWS and CHUNK, split and unsplit."""
    rng = np.random.default_rng(13)
    cur_pos = [0, 31, 45, 100]
    k, v, k_values, v_values = _poisoned_cache(rng, dtype, 4, 2, 256, 64, cur_pos)
    q_tensor, q = _q(rng, (1, 1, 4, 8 * 64))
    rows_tensor, rows_q = _q(rng, (1, 1, 4 * 3, 8 * 64))
    rows_pos = [2, 31, 45, 100]
    k_rows, v_rows, k_rows_values, v_rows_values = _poisoned_cache(rng, dtype, 4, 2, 256, 64, rows_pos)
    for split in (1, 3):
        assert_close(run_quiet(attention, q_tensor, k, v, cur_pos=cur_pos, split=split),
               attention_reference(q, k_values, v_values, cur_pos=cur_pos), f"{dtype} poison decode split={split}")
        assert_close(run_quiet(attention, rows_tensor, k_rows, v_rows, cur_pos=rows_pos, rows=3, split=split),
               attention_reference(rows_q, k_rows_values, v_rows_values, cur_pos=rows_pos, rows=3),
               f"{dtype} poison rows split={split}")
    for start, length in ((45, 7), (64, 20)):
        k_chunk, v_chunk, kc_values, vc_values = _poisoned_cache(rng, dtype, 1, 1, 256, 64, [start + length - 1])
        chunk_tensor, chunk_q = _q(rng, (1, 1, length, 2 * 64))
        for split in (1, 3):
            assert_close(run_quiet(attention, chunk_tensor, k_chunk, v_chunk, chunk_start=start, split=split),
                   attention_reference(chunk_q, kc_values, vc_values, chunk_start=start),
                   f"{dtype} poison chunk {start}+{length} split={split}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_paged_block_float_cache(dtype):
    """Paged and block-float at once: ttnn's paged layout in bfloat8_b / bfloat4_b."""
    rng = np.random.default_rng(17)
    k_raw = rng.standard_normal((2, 2, 512, 64), dtype=np.float32)
    v_raw = rng.standard_normal((2, 2, 512, 64), dtype=np.float32)
    table = rng.permutation(8 + 2)[:8].reshape(2, 4).astype(np.int32)
    pages = []
    for raw in (k_raw, v_raw):
        paged = np.full((10, 2, 128, 64), np.nan, np.float32)
        for b in range(2):
            for e in range(4):
                paged[table[b, e]] = raw[b, :, e * 128:(e + 1) * 128]
        pages.append(_cache(paged, dtype)[0])
    q_tensor, q = _q(rng, (1, 1, 2, 8 * 64))
    cur_pos = [200, 511]
    want = attention_reference(q, *(tiles.block_float_values(a, dtype) for a in (k_raw, v_raw)), cur_pos=cur_pos)
    for split in (1, None):
        assert_close(run_quiet(attention, q_tensor, *pages, cur_pos=cur_pos, page_table_tensor=table, split=split),
                     want, f"paged {dtype} split={split}")


def test_block_float_reads_its_share_of_the_bytes():
    """The point of the format: DRAM bytes per call (measured by the emulator) scale with the
    tile size, 1088 / 2048 and 576 / 2048 for the K/V part of the traffic."""
    rng = np.random.default_rng(1)
    k_raw = rng.standard_normal((1, 2, 8192, 128), dtype=np.float32)
    q_tensor, _ = _q(rng, (1, 1, 1, 16 * 128))
    read = {}
    for dtype in ("bfloat16", *DTYPES):
        k, _ = _cache(k_raw, dtype)
        run_quiet(attention, q_tensor, k, k, cur_pos=[8191])
        read[dtype] = last_report().totals.dram_read_bytes
    assert read["bfloat8_b"] <= 0.55 * read["bfloat16"], read
    assert read["bfloat4_b"] <= 0.30 * read["bfloat16"], read


def test_mixed_or_unsupported_dtypes_are_refused_by_name():
    rng = np.random.default_rng(0)
    raw = rng.standard_normal((1, 1, 128, 64), dtype=np.float32)
    k8, _ = _cache(raw, "bfloat8_b")
    k4, _ = _cache(raw, "bfloat4_b")
    q_tensor, _ = _q(rng, (1, 1, 1, 2 * 64))
    with pytest.raises(ValueError, match=r"v: expected k's dtype \(bfloat8_b\), got bfloat4_b"):
        attention(q_tensor, k8, k4, cur_pos=[5])
    # A block-float Q is accepted, as ttnn's decode op accepts it: tests/test_program_config.py.


@pytest.mark.requires_device
@pytest.mark.parametrize("dtype", DTYPES)
def test_block_float_decode_on_a_card(device, dtype):
    """On a card: a bfloat8_b / bfloat4_b device cache. Skips without one."""
    import ttnn

    rng = np.random.default_rng(6)
    cur_pos = [5, 1000]
    k_raw = rng.standard_normal((2, 2, 1024, 128), dtype=np.float32)
    v_raw = rng.standard_normal((2, 2, 1024, 128), dtype=np.float32)
    k, k_values = _cache(k_raw, dtype)
    v, v_values = _cache(v_raw, dtype)
    _, q = _q(rng, (1, 1, 2, 8 * 128))
    q_dev = ttnn.Tensor(q.astype(np.float32), ttnn.bfloat16, layout=ttnn.TILE_LAYOUT).to(device, ttnn.DRAM_MEMORY_CONFIG)
    out = attention(q_dev, k.to(device, ttnn.DRAM_MEMORY_CONFIG), v.to(device, ttnn.DRAM_MEMORY_CONFIG), cur_pos=cur_pos)
    assert_close(out, attention_reference(q, k_values, v_values, cur_pos=cur_pos), f"{dtype} on a card")
