"""Attention sinks (``attention_sink=``, issue 20 item 2) on the emulator, against the float64
reference: per Q head ``h`` a logit ``s_h`` joins each of its rows' softmax denominators with no
value, ``out = sum_j e^(S_j) V_j / (sum_j e^(S_j) + e^(s_h))``.

The reader gathers each stage row's sink (its Q head's, ``Params::first_q_head``) from the sink
tiles appended to the constants operand; the normalising core folds it in once, with the running
max taken over the sink too (``fold_sink``). Hard inputs: sinks far above every score (the output
shrinks by e^-30 .. e^-40 and must keep its relative accuracy), far below (a plain softmax), scores
all in [-120, -100], every request kind and Q layout, split and unsplit, a window beside the sink
(gpt-oss's sliding layers), idle slots. ttnn's drop-ins multiply the sink by ``scale``, as ttnn
does (tt-metal #55337); ``attention()`` takes the logit itself. Pass bar: tests/bars.py.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import ttnn

from bars import assert_close, one_hot_scores
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op.reference import attention_reference
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode, scaled_dot_product_attention_decode


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16)


def _sinks(rng, n_q, spread=4.0):
    """gpt-oss-like sinks (unit normal x 4), exact in bfloat16."""
    return _bf16(rng.standard_normal(n_q) * spread).astype(np.float64)


def _inputs(rng, batch, n_q, n_kv, head_dim, capacity, rows=1):
    q = _bf16(rng.standard_normal((1, 1, batch * rows, n_q * head_dim), dtype=np.float32))
    k = _bf16(rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32))
    v = _bf16(rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32))
    return q, k, v


@pytest.mark.parametrize("split", [1, None, 3])
def test_decode_with_sinks_every_head_its_own(split):
    rng = np.random.default_rng(11)
    q, k, v = _inputs(rng, 4, 16, 4, 64, 512)
    sinks = _sinks(rng, 16)
    cur_pos = [0, 31, 32, 400]
    out = attention(q, k, v, cur_pos=cur_pos, attention_sink=sinks, split=split)
    assert_close(out, attention_reference(q, k, v, cur_pos=cur_pos, attention_sink=sinks), f"decode split={split}")
    plain = attention_reference(q, k, v, cur_pos=cur_pos)
    assert np.abs(plain - attention_reference(q, k, v, cur_pos=cur_pos, attention_sink=sinks)).max() > 0.05


@pytest.mark.parametrize("kind, split", [("rows", 1), ("rows", 3), ("chunk", 1), ("chunk", 2)])
def test_rows_and_chunks_take_their_heads_sinks(kind, split):
    rng = np.random.default_rng(12)
    if kind == "rows":
        q, k, v = _inputs(rng, 2, 6, 2, 64, 256, rows=4)
        kinds = dict(cur_pos=[40, 200], rows=4)
        sinks = _sinks(rng, 6)
    else:
        q, k, v = _inputs(rng, 1, 4, 2, 64, 256, rows=20)
        kinds = dict(chunk_start=45)
        sinks = _sinks(rng, 4)
    out = attention(q, k, v, attention_sink=sinks, split=split, **kinds)
    assert_close(out, attention_reference(q, k, v, attention_sink=sinks, **kinds), f"{kind} split={split}")




@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("pattern", ["sink-far-above-deep-scores", "sink-above-high-scores", "sink-far-below",
                                     "sink-between"])
def test_sink_dominating_or_vanishing_stays_finite_and_accurate(pattern, split):
    """The running max must include the sink: scores in [-120, -100] with sinks near -70 (every
    score's weight e^-30..-50 of the sink's: without the sink in the max, e^(sink - m) overflows or
    the scores' own e^() underflows); scores in [80, 120] with sinks near 150 (exp(sink) alone
    overflows float32); sinks 1000 below every score (exactly the plain softmax); sinks among the
    scores. The output's scale follows the sink, and its relative accuracy must not."""
    rng = np.random.default_rng(split)
    lanes, capacity, position = 8, 512, 300
    band, sink = {"sink-far-above-deep-scores": ((-120, -100), (-75, -65)),
                  "sink-above-high-scores": ((80, 120), (145, 155)),
                  "sink-far-below": ((-10, 10), (-1010, -990)),
                  "sink-between": ((-10, 10), (-2, 8))}[pattern]
    scores = rng.integers(2 * band[0], 2 * band[1] + 1, size=(lanes, capacity)) / 2.0
    q, k, v = one_hot_scores(rng, scores)
    sinks = rng.integers(sink[0], sink[1] + 1, size=lanes).astype(np.float64)
    out = attention(q, k, v, cur_pos=[position], scale=0.5, attention_sink=sinks, split=split, block_tiles=1)
    want = attention_reference(q, k, v, cur_pos=[position], scale=0.5, attention_sink=sinks)
    got = assert_close(out, want, f"{pattern} split={split}")
    if pattern == "sink-far-below":
        np.testing.assert_allclose(want, attention_reference(q, k, v, cur_pos=[position], scale=0.5), rtol=1e-12)
    if pattern.startswith("sink-above") or pattern.startswith("sink-far-above"):
        assert np.abs(want).max() < 1e-8 and np.abs(got).max() > 0  # tiny, not flushed to zero


def test_sinks_with_a_sliding_window_on_a_paged_cache_and_idle_slots():
    """gpt-oss's sliding layers: sinks and a 128-position window, paged, with an idle slot."""
    rng = np.random.default_rng(21)
    block, entries = 64, 8
    cur_pos = [300, -1, 511]
    n_q, n_kv = 8, 2
    blocks = len(cur_pos) * entries
    q = _bf16(rng.standard_normal((1, 1, len(cur_pos), n_q * 64), dtype=np.float32))
    k = _bf16(rng.standard_normal((blocks, n_kv, block, 64), dtype=np.float32))
    v = _bf16(rng.standard_normal((blocks, n_kv, block, 64), dtype=np.float32))
    table = rng.permutation(blocks).astype(np.int32).reshape(len(cur_pos), entries)
    flat_k = np.stack([np.concatenate([k[b] for b in row], axis=1) for row in table])
    flat_v = np.stack([np.concatenate([v[b] for b in row], axis=1) for row in table])
    sinks = _sinks(rng, n_q)
    for split in (1, 3):
        out = attention(q, k, v, cur_pos_tensor=np.asarray(cur_pos, np.int32), page_table_tensor=table,
                        sliding_window_size=128, attention_sink=sinks, split=split)
        want = attention_reference(q, flat_k, flat_v, cur_pos=cur_pos, sliding_window_size=128, attention_sink=sinks)
        got = assert_close(out, want, f"paged window+sink split={split}")
        assert not got[0, 0, 1].any()  # the idle slot's rows are zero


def test_drop_ins_scale_the_sink_as_ttnn_does():
    """ttnn's [nh, 32] sink tensor (column 0) is multiplied by ``scale`` (tt-metal #55337): the
    drop-ins match ttnn, so gpt-oss's sinks go in divided by ``scale`` -- tt-metal's own sink test
    does exactly that -- and come out as attention()'s logits."""
    rng = np.random.default_rng(31)
    n_q, head_dim = 8, 64
    q = _bf16(rng.standard_normal((1, 2, n_q, head_dim), dtype=np.float32))
    k, v = (_bf16(rng.standard_normal((2, 2, 256, head_dim), dtype=np.float32)) for _ in range(2))
    scale = 1 / math.sqrt(head_dim)
    logits = _sinks(rng, n_q)
    ttnn_sink = np.zeros((n_q, 32), np.float32)
    ttnn_sink[:, 0] = logits / scale  # as tt-metal's test_sdpa_decode_sink prepares gpt-oss's sinks
    rows_q = q.reshape(1, 1, 2, n_q * head_dim)
    want = attention_reference(rows_q, k, v, cur_pos=[77, 200], attention_sink=logits)
    out = scaled_dot_product_attention_decode(q, k, v, cur_pos=[77, 200], attention_sink=_bf16(ttnn_sink))
    assert_close(np.asarray(out).reshape(1, 1, 2, n_q * head_dim), want, "drop-in sink")
    table = np.arange(8, dtype=np.int32).reshape(2, 4)
    paged_k, paged_v = (x.reshape(2, 2, 4, 64, head_dim).transpose(0, 2, 1, 3, 4).reshape(8, 2, 64, head_dim) for x in (k, v))
    out = paged_scaled_dot_product_attention_decode(q, paged_k, paged_v, table, cur_pos_tensor=np.asarray([77, 200], np.int32),
                                                    attention_sink=_bf16(ttnn_sink), sliding_window_size=100)
    want = attention_reference(rows_q, k, v, cur_pos=[77, 200], attention_sink=logits, sliding_window_size=100)
    assert_close(np.asarray(out).reshape(1, 1, 2, n_q * head_dim), want, "paged drop-in sink + window")


def test_sink_layouts_and_refusals():
    rng = np.random.default_rng(41)
    q, k, v = _inputs(rng, 1, 4, 1, 64, 128)
    logits = _sinks(rng, 4)
    want = attention_reference(q, k, v, cur_pos=[50], attention_sink=logits)
    padded = np.zeros((4, 32))
    padded[:, 0] = logits
    host = ttnn.Tensor(padded.astype(np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT)  # ttnn's [nh, 32]
    for layout in (logits, logits.tolist(), logits[:, None], padded, host):
        assert_close(attention(q, k, v, cur_pos=[50], attention_sink=layout), want, f"layout {np.shape(layout)}")
    assert last_report().totals.dram_read_bytes > 0
    for bad, error in ((logits[:3], ValueError), (np.full(4, np.nan), ValueError), (np.zeros((2, 2)), ValueError),
                       ("sinks", TypeError), (np.array([True, False, True, False]), TypeError)):
        with pytest.raises(error, match="attention_sink"):
            attention(q, k, v, cur_pos=[50], attention_sink=bad)
