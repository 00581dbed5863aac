"""return_lse and merge_attention_states (issue 21, item 3).

The LSE of every row against the float64 reference (``attention_reference(..., return_lse=True)``)
on the same bfloat16 (or dequantised block-float) inputs: decode, ROWS, CHUNK, paged, the heads
layout; bfloat16 and bfloat8_b caches; split and unsplit; with a window, sinks, a softcap and a
chunk; large and all-negative scores; positions 0, 31, 32; NaN poison outside every attended range;
idle slots (-inf). The kernels' LSE is ``M + log L`` from the fp32 statistics, so its error is the
bfloat16 scores' (``scale * q`` and ``S = q . k`` are packed to bfloat16, as the output sees them):
each score is off by at most ~2**-8 of its size, and so is a logsumexp. The bar is therefore
``2e-3 + |S|max * 2**-7`` (twice that), and each case records its measured max-abs error.

Then the issue's bar: the states of disjoint shards of one cache (shard ``[m, p]`` is the window
``p - m + 1`` at position ``p``), merged, equal attention over the whole cache: PCC >= 0.9999 and
LSE within 0.05, for two and four shards. And a hypothesis property test of the merge against a
float64 logsumexp model, empty (-inf) shards included.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import ttnn
from hypothesis import given, settings
from hypothesis import strategies as st

from ttnn_flashdecode import attention, attention_reference, merge_attention_states
from ttnn_flashdecode.op import tiles
from ttnn_flashdecode.op.operation import to_numpy
from ttnn_flashdecode.op.reference import pcc

from bars import assert_close, run_quiet

BF16 = ml_dtypes.bfloat16
B, NQ, NKV, D, CAP = 4, 8, 2, 64, 256
POSITIONS = [0, 31, 32, 255]


def _bf16(x) -> np.ndarray:
    return np.asarray(x, np.float32).astype(BF16).astype(np.float64)


def _inputs(seed: int, q_gain: float = 1.0, rows: int = 1, negative: bool = False):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 1, B * rows, NQ * D)) * q_gain
    k = rng.standard_normal((B, NKV, CAP, D))
    v = rng.standard_normal((B, NKV, CAP, D))
    if negative:  # every score negative and large: q . k < 0 for every pair
        k = np.abs(k) + 0.5
        q = -np.abs(q) * q_gain
    return _bf16(q).astype(BF16), _bf16(k).astype(BF16), _bf16(v).astype(BF16)


def _poison(k, v, last, first=None):
    """NaN in every cache slot user ``b``'s rows never attend: past ``last[b]`` and before ``first[b]``."""
    k, v = k.astype(np.float32), v.astype(np.float32)
    for b, p in enumerate(last):
        k[b, :, p + 1:] = v[b, :, p + 1:] = np.nan
        if first is not None:
            k[b, :, :first[b]] = v[b, :, :first[b]] = np.nan
    return k.astype(BF16), v.astype(BF16)


def _score_bound(q, k, scale=None, rows=1):
    """``|S|max`` over every (row, head, position) of the cache (finite entries)."""
    q64 = np.asarray(q, np.float64).reshape(B, rows, NKV, NQ // NKV, D)
    k64 = np.nan_to_num(np.asarray(k, np.float64))
    s = np.einsum("brgqd,bgld->brgql", q64, k64) * (scale or 1 / math.sqrt(D))
    return float(np.abs(s).max())


def _check(got_lse, want_lse, bound: float, label: str, record_property) -> float:
    got = np.asarray(to_numpy(got_lse), np.float64)
    want = np.asarray(want_lse, np.float64).reshape(got.shape)
    assert got.dtype == np.float64 and np.array_equal(np.isneginf(got), np.isneginf(want)), f"{label}: -inf rows differ"
    live = np.isfinite(want)
    assert np.isfinite(got[live]).all(), f"{label}: a non-finite LSE"
    err = float(np.abs(got[live] - want[live]).max()) if live.any() else 0.0
    record_property("figure", f"LSE {label}: max-abs {err:.2e} (|S|max {bound:.1f})")
    print(f"LSE {label}: max-abs {err:.3e} (|S|max {bound:.1f})")
    assert err <= 2e-3 + bound * 2.0**-7, f"{label}: LSE max-abs {err:.3e}, |S|max {bound:.1f}"
    return err


@pytest.mark.parametrize("split", [1, 4])
def test_decode_lse_matches_float64(split, record_property):
    q, k, v = _inputs(1)
    k, v = _poison(k, v, POSITIONS)
    out, lse = run_quiet(attention, q, k, v, cur_pos=POSITIONS, split=split, return_lse=True)
    want_out, want_lse = attention_reference(q, k, v, cur_pos=POSITIONS, return_lse=True)
    assert lse.dtype == np.float32 and lse.shape == (1, 1, B, NQ)
    assert_close(out, want_out, f"decode split={split}")
    _check(lse, want_lse, _score_bound(q, k), f"decode split={split}", record_property)


@pytest.mark.parametrize("split", [1, 3])
def test_rows_lse_matches_float64(split, record_property):
    rows, positions = 3, [2, 31, 32, 255]
    q, k, v = _inputs(2, rows=rows)
    k, v = _poison(k, v, positions)
    out, lse = run_quiet(attention, q, k, v, cur_pos=positions, rows=rows, split=split, return_lse=True)
    want_out, want_lse = attention_reference(q, k, v, cur_pos=positions, rows=rows, return_lse=True)
    assert lse.shape == (1, 1, B * rows, NQ)
    assert_close(out, want_out, f"rows split={split}")
    _check(lse, want_lse, _score_bound(q, k, rows=rows), f"ROWS split={split}", record_property)


def test_chunk_lse_matches_float64(record_property):
    c, starts = 8, [0, 24, 32, 200]
    q, k, v = _inputs(3, rows=c)
    k, v = _poison(k, v, [s + c - 1 for s in starts])
    out, lse = run_quiet(attention, q, k, v, chunk_start=starts, return_lse=True)
    want_out, want_lse = attention_reference(q, k, v, chunk_start=starts, return_lse=True)
    assert_close(out, want_out, "chunk")
    _check(lse, want_lse, _score_bound(q, k, rows=c), "CHUNK", record_property)


@pytest.mark.parametrize("split", [1, 4])
def test_paged_lse_matches_float64(split, record_property):
    block = 64
    q, k, v = _inputs(4)
    k, v = _poison(k, v, POSITIONS)
    per_user = CAP // block
    table = np.random.default_rng(5).permutation(B * per_user).reshape(B, per_user).astype(np.int32)
    paged = [np.zeros((B * per_user, NKV, block, D), BF16) for _ in range(2)]
    for b in range(B):
        for i in range(per_user):
            paged[0][table[b, i]] = k[b, :, i * block:(i + 1) * block]
            paged[1][table[b, i]] = v[b, :, i * block:(i + 1) * block]
    out, lse = run_quiet(attention, q, *paged, cur_pos=POSITIONS, page_table_tensor=table, split=split, return_lse=True)
    want_out, want_lse = attention_reference(q, k, v, cur_pos=POSITIONS, return_lse=True)
    assert_close(out, want_out, f"paged split={split}")
    _check(lse, want_lse, _score_bound(q, k), f"paged split={split}", record_property)


def test_heads_layout_and_idle_slot(record_property):
    """q_layout="heads": the LSE is [1, batch, n_q_heads]; an idle slot's rows are -inf (output 0)."""
    q, k, v = _inputs(6)
    positions = [0, -1, 32, 255]
    heads = q.reshape(1, B, NQ, D)
    out, lse = run_quiet(attention, heads, k, v, cur_pos=positions, q_layout="heads", return_lse=True)
    want_out, want_lse = attention_reference(q, k, v, cur_pos=positions, return_lse=True)
    assert lse.shape == (1, B, NQ) and np.isneginf(lse[0, 1]).all() and not np.asarray(out[0, 1], np.float32).any()
    _check(lse, want_lse.reshape(1, B, NQ), _score_bound(q, k), "heads layout, idle slot", record_property)


@pytest.mark.parametrize("split", [1, 4])
def test_block_float_cache_lse(split, record_property, mock_cluster):
    q, k, v = _inputs(7)
    k_tt, v_tt = (ttnn.Tensor(np.ascontiguousarray(t, np.float32), ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT) for t in (k, v))
    k_values, v_values = (tiles.block_float_values(np.asarray(t, np.float32), "bfloat8_b") for t in (k, v))
    q_tt = ttnn.Tensor(np.asarray(q, np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT)
    out, lse = run_quiet(attention, q_tt, k_tt, v_tt, cur_pos=POSITIONS, split=split, return_lse=True)
    assert isinstance(lse, ttnn.Tensor) and lse.dtype == ttnn.float32 and tuple(lse.shape) == (1, 1, B, NQ)
    want_out, want_lse = attention_reference(q, k_values, v_values, cur_pos=POSITIONS, return_lse=True)
    assert_close(out, want_out, f"bfloat8_b split={split}")
    _check(lse, want_lse, _score_bound(q, k_values), f"bfloat8_b split={split}", record_property)


MODIFIERS = {
    "window": dict(sliding_window_size=40),
    "sink": dict(attention_sink=[-1.0, 0.5, 2.0, 8.0, -8.0, 0.0, 1.5, 30.0]),
    "softcap": dict(logit_softcap=5.0),
    "chunk": dict(attention_chunk_size=64),
}


@pytest.mark.parametrize("split", [1, 4])
@pytest.mark.parametrize("modifier", sorted(MODIFIERS))
def test_score_modifiers_lse(modifier, split, record_property):
    """The final scores' LSE: the window's and chunk's positions only (NaN before them), the sink in
    the denominator, the capped scores (q scaled x4 so scores pass the cap)."""
    keywords = MODIFIERS[modifier]
    q, k, v = _inputs(8, q_gain=4.0 if modifier == "softcap" else 1.0)
    first = None
    if modifier == "window":
        first = [max(0, p + 1 - 40) for p in POSITIONS]
    elif modifier == "chunk":
        first = [p // 64 * 64 for p in POSITIONS]
    k, v = _poison(k, v, POSITIONS, first)
    out, lse = run_quiet(attention, q, k, v, cur_pos=POSITIONS, split=split, return_lse=True, **keywords)
    want_out, want_lse = attention_reference(q, k, v, cur_pos=POSITIONS, return_lse=True, **keywords)
    assert_close(out, want_out, f"{modifier} split={split}")
    bound = min(_score_bound(q, k), 5.0) if modifier == "softcap" else _score_bound(q, k)
    _check(lse, want_lse, bound, f"{modifier} split={split}", record_property)


@pytest.mark.parametrize("case", ["large", "all-negative"])
@pytest.mark.parametrize("split", [1, 4])
def test_extreme_scores_lse(case, split, record_property):
    """Scores of tens (q x 8) and scores all below -20: the LSE follows them (no clamp at 0, no
    bfloat16 LSE)."""
    q, k, v = _inputs(9, q_gain=8.0 if case == "large" else 3.0, negative=case == "all-negative")
    out, lse = run_quiet(attention, q, k, v, cur_pos=POSITIONS, split=split, return_lse=True)
    want_out, want_lse = attention_reference(q, k, v, cur_pos=POSITIONS, return_lse=True)
    if case == "all-negative":
        assert (want_lse < -20).all()
    _check(lse, want_lse, _score_bound(q, k), f"{case} scores split={split}", record_property)
    # Against the same logsumexp of the scores as the kernels round them (scale * q, then q . k, to
    # bfloat16) the error is fp32-statistics small: a bfloat16 LSE of ~-86 would be off by up to 0.25.
    model = _bf16_score_lse(q, k, POSITIONS)
    residual = float(np.abs(lse - model).max())
    record_property("figure", f"LSE {case} split={split} vs the bfloat16-score model: max-abs {residual:.2e}")
    assert residual <= 5e-3, residual


def _bf16_score_lse(q, k, positions):
    """Decode LSE in float64 of the scores rounded as the kernels round them: QS = bf16(q * bf16(scale)),
    S = bf16(QS . K)."""
    scale = _bf16(1 / math.sqrt(D))
    qs = _bf16(np.asarray(q, np.float64) * scale).reshape(B, NKV, NQ // NKV, D)
    lse = np.zeros((1, 1, B, NQ))
    for b, p in enumerate(positions):
        s = _bf16(np.einsum("gqd,gld->gql", qs[b], np.asarray(k, np.float64)[b, :, :p + 1]))
        top = s.max(-1, keepdims=True)
        lse[0, 0, b] = (top + np.log(np.exp(s - top).sum(-1, keepdims=True))).reshape(NQ)
    return lse


# ------------------------------------------------------------------------------- shard merge

FULL = CAP - 1  # every user at the cache's last position: the whole cache is attended


def _shards(count: int) -> list[tuple[int, int]]:
    size = CAP // count
    return [(i * size, (i + 1) * size - 1) for i in range(count)]


@pytest.mark.parametrize("count", [2, 4])
@pytest.mark.parametrize("split", [1, None])
def test_merged_shards_equal_the_whole_cache(count, split, record_property):
    """Shard [m, p] of one cache: the window p - m + 1 at position p. Merged, the shards' states give
    attention over positions 0..255: PCC >= 0.9999 against the op over the whole cache and against
    float64, LSE within 0.05."""
    q, k, v = _inputs(10 + count, q_gain=2.0)
    outs, lses = [], []
    for m, p in _shards(count):
        window = None if m == 0 else p - m + 1
        out, lse = run_quiet(attention, q, k, v, cur_pos=[p] * B, sliding_window_size=window, split=split,
                             return_lse=True)
        outs.append(out)
        lses.append(lse)
    merged, merged_lse = merge_attention_states(outs, lses)
    whole, whole_lse = run_quiet(attention, q, k, v, cur_pos=[FULL] * B, split=split, return_lse=True)
    want, want_lse = attention_reference(q, k, v, cur_pos=[FULL] * B, return_lse=True)
    figures = (pcc(merged, whole), pcc(merged, want), float(np.abs(merged_lse - whole_lse).max()),
               float(np.abs(merged_lse - want_lse).max()))
    record_property("figure", f"{count} shards split={split}: PCC vs whole {figures[0]:.6f}, vs float64 {figures[1]:.6f}; "
                              f"LSE vs whole {figures[2]:.2e}, vs float64 {figures[3]:.2e}")
    print(f"{count} shards split={split}: PCC vs whole {figures[0]:.6f}, vs float64 {figures[1]:.6f}; "
          f"LSE vs whole {figures[2]:.3e}, vs float64 {figures[3]:.3e}")
    assert figures[0] >= 0.9999 and figures[1] >= 0.9999, figures
    assert figures[2] <= 0.05 and figures[3] <= 0.05, figures


def test_merge_of_separate_caches_with_an_empty_shard():
    """Shards as separate caches (the first 96 positions, the rest), plus an idle user's shard (all
    -inf): the merge ignores it; a user idle in every shard merges to 0 and -inf."""
    q, k, v = _inputs(20)
    cut = 96
    head = run_quiet(attention, q, k[:, :, :128], v[:, :, :128], cur_pos=[cut - 1, cut - 1, cut - 1, -1], return_lse=True)
    tail_k, tail_v = np.zeros_like(k[:, :, :CAP - cut + 32]), np.zeros_like(v[:, :, :CAP - cut + 32])
    tail_k[:, :, :CAP - cut], tail_v[:, :, :CAP - cut] = k[:, :, cut:], v[:, :, cut:]
    tail = run_quiet(attention, q, tail_k, tail_v, cur_pos=[CAP - cut - 1] * 3 + [-1], return_lse=True)
    empty = run_quiet(attention, q, k, v, cur_pos=[-1] * B, return_lse=True)
    out, lse = merge_attention_states([head[0], empty[0], tail[0]], [head[1], empty[1], tail[1]])
    want, want_lse = attention_reference(q, k, v, cur_pos=[FULL] * 3 + [-1], return_lse=True)
    assert_close(out[:, :, :3], want[:, :, :3], "separate caches")
    assert np.abs(lse[:, :, :3] - want_lse[:, :, :3]).max() <= 0.05
    assert np.isneginf(lse[0, 0, 3]).all() and not out[0, 0, 3].astype(np.float32).any()


def test_merge_of_host_tensors_and_errors():
    o = [ttnn.Tensor(np.ones((1, 1, 2, 8), np.float32) * i, ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT) for i in (1, 3)]
    s = [ttnn.Tensor(np.zeros((1, 1, 2, 2), np.float32), ttnn.float32, layout=ttnn.ROW_MAJOR_LAYOUT) for _ in range(2)]
    out, lse = merge_attention_states(o, s)
    assert np.allclose(to_numpy(out), 2.0) and np.allclose(to_numpy(lse), math.log(2.0))
    with pytest.raises(ValueError, match="expected the same number"):
        merge_attention_states([], [])
    with pytest.raises(ValueError, match="lses: expected the outputs' shape"):
        merge_attention_states([np.zeros((1, 1, 2, 8))], [np.zeros((1, 1, 2, 3))])
    with pytest.raises(TypeError, match="expected all numpy arrays"):
        merge_attention_states([np.zeros((1, 1, 2, 8)), o[0]], [np.zeros((1, 1, 2, 2))] * 2)
    with pytest.raises(TypeError, match="expected sequences"):
        merge_attention_states(np.zeros((1, 1, 2, 8)), [np.zeros((1, 1, 2, 2))])
    with pytest.raises(TypeError, match=r"got \['list'\]"):  # lists, not arrays: named as such
        merge_attention_states([[0.0] * 8], [[0.0] * 2])
    partial, lse = np.ones((1, 1, 2, 8)), np.zeros((1, 1, 2, 2))
    for bad in (np.inf, np.nan):  # an LSE is finite or -inf (an empty partial); these would give NaN everywhere
        with pytest.raises(ValueError, match="lses: expected finite values or -inf"):
            merge_attention_states([partial, partial], [lse, np.full_like(lse, bad)])
    with pytest.raises(TypeError, match="lses: expected float arrays"):
        merge_attention_states([partial], [lse.astype(np.int32)])


def test_return_lse_needs_fp32_statistics():
    q, k, v = _inputs(21)
    from ttnn_flashdecode.op.compute_options import ComputeOptions

    with pytest.raises(ValueError, match="return_lse: expected a compute config with fp32_dest_acc_en=True"):
        attention(q, k, v, cur_pos=POSITIONS, return_lse=True, compute_kernel_config=ComputeOptions(fp32_dest_acc_en=False))
    with pytest.raises(TypeError, match="return_lse: expected a bool"):
        attention(q, k, v, cur_pos=POSITIONS, return_lse=1)


# ------------------------------------------------------------------------------- merge property

def _model(outs, lses):
    """float64 logsumexp model, row by row, of FlashInfer's merge_state."""
    s = np.stack(lses).astype(np.float64)
    o = np.stack(outs).astype(np.float64)
    finite = np.isfinite(s)
    lse = np.full(s.shape[1:], -np.inf)
    out = np.zeros(o.shape[1:])
    for idx in np.ndindex(*s.shape[1:]):
        live = [i for i in range(len(outs)) if finite[(i, *idx)]]
        if not live:
            continue
        vals = np.array([s[(i, *idx)] for i in live])
        top = vals.max()
        lse[idx] = top + math.log(sum(math.exp(x - top) for x in vals))
        out[idx] = sum(math.exp(s[(i, *idx)] - lse[idx]) * o[(i, *idx)] for i in live)
    return out, lse


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 5),
    rows=st.integers(1, 3),
    heads=st.integers(1, 3),
    dim=st.integers(1, 4),
    data=st.data(),
)
def test_merge_matches_a_float64_logsumexp_model(n, rows, heads, dim, data):
    lse_values = st.one_of(st.just(-math.inf), st.floats(-80.0, 80.0, allow_nan=False, width=32))
    lses = [np.array(data.draw(st.lists(lse_values, min_size=rows * heads, max_size=rows * heads)), np.float32)
            .reshape(1, rows, heads) for _ in range(n)]
    outs = [np.array(data.draw(st.lists(st.floats(-4.0, 4.0, width=32), min_size=rows * heads * dim,
                                        max_size=rows * heads * dim)), np.float32).reshape(1, rows, heads, dim)
            for _ in range(n)]
    out, lse = merge_attention_states(outs, lses)
    want_out, want_lse = _model(outs, lses)
    assert lse.dtype == np.float32 and lse.shape == (1, rows, heads) and out.shape == (1, rows, heads, dim)
    assert np.array_equal(np.isneginf(lse), np.isneginf(want_lse))
    live = np.isfinite(want_lse)
    assert np.allclose(lse[live], want_lse[live], rtol=1e-6, atol=1e-5)
    assert np.allclose(out, want_out, rtol=1e-5, atol=1e-5)
    # the rows layout ([..., heads * dim] with [..., heads]) merges the same
    flat, flat_lse = merge_attention_states([o.reshape(1, rows, heads * dim) for o in outs], lses)
    assert np.array_equal(flat.reshape(out.shape), out) and np.array_equal(flat_lse, lse)


def test_drop_ins_return_lse(record_property):
    """Both drop-ins: ``return_lse=True`` gives ``(out, lse)``, ``lse`` ``[1, b, nh]``."""
    from ttnn_flashdecode.op import transformer

    q, k, v = _inputs(22)
    heads = q.reshape(1, B, NQ, D)
    want_out, want_lse = attention_reference(q, k, v, cur_pos=POSITIONS, return_lse=True)
    out, lse = run_quiet(transformer.scaled_dot_product_attention_decode, heads, k, v, cur_pos=POSITIONS, return_lse=True)
    assert lse.shape == (1, B, NQ)
    assert_close(out.reshape(want_out.shape), want_out, "drop-in")
    _check(lse, want_lse.reshape(1, B, NQ), _score_bound(q, k), "drop-in", record_property)
    block, per_user = 64, CAP // 64
    table = np.arange(B * per_user, dtype=np.int32).reshape(B, per_user)
    paged = [t.reshape(B, NKV, per_user, block, D).transpose(0, 2, 1, 3, 4).reshape(B * per_user, NKV, block, D)
             for t in (k, v)]
    out, lse = run_quiet(transformer.paged_scaled_dot_product_attention_decode, heads, *paged, table,
                         cur_pos_tensor=np.asarray(POSITIONS, np.int32), return_lse=True)
    assert lse.shape == (1, B, NQ)
    _check(lse, want_lse.reshape(1, B, NQ), _score_bound(q, k), "paged drop-in", record_property)


@pytest.mark.parametrize("split", [1, 4])
def test_idle_slot_with_sinks_is_minus_inf(split):
    """An idle slot's LSE is -inf with sinks too (no sink is folded into its empty softmax); its
    output rows stay 0 and the other users' LSE include their sinks."""
    q, k, v = _inputs(23)
    positions = [-1, 31, -1, 255]
    sinks = MODIFIERS["sink"]["attention_sink"]
    out, lse = run_quiet(attention, q, k, v, cur_pos=positions, split=split, attention_sink=sinks, return_lse=True)
    want_out, want_lse = attention_reference(q, k, v, cur_pos=positions, attention_sink=sinks, return_lse=True)
    assert np.isneginf(lse[0, 0, [0, 2]]).all() and not np.asarray(out[0, 0, [0, 2]], np.float32).any()
    assert np.abs(lse[0, 0, [1, 3]] - want_lse[0, 0, [1, 3]]).max() <= 2e-3 + _score_bound(q, k) * 2.0**-7
