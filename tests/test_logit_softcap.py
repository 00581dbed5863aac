"""Logit softcap (``logit_softcap=c``, issue 21 item 1; Gemma 2's 50, Grok's 30, FA3's ``softcap``,
FlashInfer's ``logits_soft_cap``) on the emulator, against the float64 reference: every scaled
score ``s`` becomes ``c * tanh(s / c)`` before the causal, window, chunk and attention masks and
the sinks (the sink logit itself is not capped).

On device the compute kernel's stage ``cap_scores``: DST times ``1 / c`` (fp32 scalar), the LLK's
accurate tanh (``tanh_tile<false>``), times ``c``. The emulator models the LLK's two tanh paths
(compute_engine.cpp ``tanh_tile``): with fp32 DST (the default config) tanh rounded to fp32 (the
LLK's expm1-based path is fp32 grade), with bfloat16 DST the LLK's degree-6 polynomial clamped at
1 and rounded to bfloat16 (max |error| 2.3e-3 of tanh, i.e. 2.3e-3 * c in score units).

Hard inputs: scores far past the cap (|s| up to ~40 c: every score saturates to within bfloat16
of +-c, so the softmax is decided by how saturated values compare), a cap below every score
(c = 1), a sink above the cap (2 c: capping it would change every row), NaN poison past each
position.

Bars. The cap itself is computed in DST (fp32 by default) and adds ~1e-7 relative: capping is a
smooth, contracting map (|d/ds c tanh(s / c)| <= 1). But the op keeps a block's scores in CB S in
bfloat16 between the matmul and the softmax (as it does uncapped), and scores far past the cap all
sit near +-c, where a bfloat16 ulp is 2^(e-7) (0.25 between 32 and 64): the float64 reference tells
49.99 from 49.90, the op cannot, and a row whose softmax spreads over many saturated positions
takes up to ~3% rel-L2 from that rounding alone. So the hard inputs are checked twice: against a
float64 reference whose capped scores are rounded to bfloat16 once, as CB S holds them
(:func:`_stored_scores_reference`), with tests/bars.py's bar (PCC >= 0.9999, rel-L2 <= 1e-2) --
the kernel's cap is right up to that documented rounding -- and against the plain float64
reference with the measured bar :data:`FAR_MIN_PCC` / :data:`FAR_MAX_RELATIVE_L2`. Scores within
the cap, or a small cap (c = 5: ulp 2^-5 near +-5), meet the plain bar directly.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import ttnn

from bars import assert_close, run_quiet
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op import tiles
from ttnn_flashdecode.op.reference import attention_reference, max_abs, pcc, relative_l2
from ttnn_flashdecode.op.compute_options import ComputeOptions
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode, scaled_dot_product_attention_decode

BF16_DST = ComputeOptions(math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=False)


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16)


def _inputs(rng, batch, n_q, n_kv, head_dim, capacity, rows=1, score_std=1.0):
    """Q, K, V with scaled scores of standard deviation ``score_std`` (scale 1/sqrt(head_dim))."""
    q = rng.standard_normal((1, 1, batch * rows, n_q * head_dim), dtype=np.float32) * np.float32(np.sqrt(score_std))
    k = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32) * np.float32(np.sqrt(score_std))
    v = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32)
    return q, k, v


def _poison_past(cache, positions, rows=1):
    for user, p in enumerate(positions):
        cache[user, :, p + 1:] = np.nan


FAR_MIN_PCC = 0.999
FAR_MAX_RELATIVE_L2 = 5e-2


def _stored_scores_reference(q, k, v, cur_pos, rows, cap, scale=None):
    """Float64 attention (decode / ROWS, ``q`` ``[1, 1, B * rows, H * D]``) whose capped scores are
    rounded to bfloat16 once, as the op's CB S holds them between the matmul and the softmax."""
    q64, k64, v64 = (np.asarray(x, np.float64) for x in (q, k, v))
    batch, n_kv, _, head_dim = k64.shape
    n_q = q64.shape[-1] // head_dim
    scale = 1.0 / np.sqrt(head_dim) if scale is None else scale
    out = np.zeros_like(q64)
    for b in range(batch):
        for j in range(rows):
            p = cur_pos[b] - rows + 1 + j
            for h in range(n_q):
                g = h // (n_q // n_kv)
                qh = q64[0, 0, b * rows + j, h * head_dim:(h + 1) * head_dim]
                s = cap * np.tanh(k64[b, g, :p + 1] @ qh * scale / cap)
                s = s.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
                w = np.exp(s - s.max())
                out[0, 0, b * rows + j, h * head_dim:(h + 1) * head_dim] = w @ v64[b, g, :p + 1] / w.sum()
    return out


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("cap", [50.0, 5.0])
@pytest.mark.parametrize("kind", ["decode", "rows", "prefill"])
def test_scores_far_past_the_cap(kind, cap, split):
    """Scores of standard deviation 10 c (|s| up to ~40 c): capped, most saturate; uncapped, the
    largest would take the whole softmax."""
    rng = np.random.default_rng(int(cap) + split)
    rows = {"decode": 1, "rows": 4, "prefill": 20}[kind]
    batch = 1 if kind == "prefill" else 4
    q, k, v = _inputs(rng, batch, 8 if kind != "prefill" else 2, 2 if kind != "prefill" else 1, 64, 512, rows,
                      score_std=10 * cap)
    if kind == "prefill":
        kinds = dict(chunk_start=45)
        positions = [45 + rows - 1]
    else:
        positions = [rows - 1, 31 + rows, 200, 511][:batch]
        kinds = dict(cur_pos=positions, rows=rows) if rows > 1 else dict(cur_pos=positions)
    q, k, v = _bf16(q), _bf16(k), _bf16(v)
    poisoned_k, poisoned_v = k.copy(), v.copy()
    _poison_past(poisoned_k, positions)
    _poison_past(poisoned_v, positions)
    out = run_quiet(attention, q, poisoned_k, poisoned_v, logit_softcap=cap, split=split, **kinds)
    want = attention_reference(q, k, v, logit_softcap=cap, **kinds)
    got = np.asarray(out, np.float64)
    assert np.isfinite(got).all(), "poison past the position reached the output"
    label = f"{kind} c={cap} split={split}: PCC {pcc(got, want):.6f}, rel-L2 {relative_l2(got, want):.2e}"
    assert pcc(got, want) >= FAR_MIN_PCC and relative_l2(got, want) <= FAR_MAX_RELATIVE_L2, label
    if kind != "prefill":
        assert_close(out, _stored_scores_reference(q, k, v, positions, rows, cap), f"{label} (bfloat16 S)")
    uncapped = attention_reference(q, k, v, **kinds)
    assert relative_l2(uncapped, want) > 0.1, "the inputs do not exercise the cap"


@pytest.mark.usefixtures("mock_cluster")  # ttnn's block-float packer needs tt-metal's context
@pytest.mark.parametrize("split", [1, 3])
def test_softcap_with_window_sinks_and_a_paged_bfloat8_b_cache(split):
    """The cap comes before the window's mask and the sinks, and the sink (2 c, above every capped
    score) is not capped: capping it to c would change every row's denominator."""
    rng = np.random.default_rng(split)
    cap, window, block, entries = 5.0, 100, 64, 8
    cur_pos = [5, 64, 300, 511]
    n_q, n_kv, head_dim = 8, 2, 128
    q, k_raw, v_raw = _inputs(rng, len(cur_pos), n_q, n_kv, head_dim, block * entries, score_std=5 * cap)
    q = _bf16(q)
    k_values, v_values = (tiles.block_float_values(x, "bfloat8_b") for x in (k_raw, v_raw))
    table = rng.permutation(len(cur_pos) * entries).astype(np.int32).reshape(len(cur_pos), entries)
    paged = np.empty((len(cur_pos) * entries, n_kv, block, head_dim), np.float32), np.empty(
        (len(cur_pos) * entries, n_kv, block, head_dim), np.float32)
    for user, row in enumerate(table):
        for i, b in enumerate(row):
            paged[0][b] = k_values[user, :, i * block:(i + 1) * block]
            paged[1][b] = v_values[user, :, i * block:(i + 1) * block]
    k = ttnn.Tensor(paged[0], ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT)
    v = ttnn.Tensor(paged[1], ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT)
    sinks = [2 * cap - 1.5 * h for h in range(n_q)]
    sinks_bf16 = [float(x) for x in _bf16(sinks)]
    out = run_quiet(attention, q, k, v, cur_pos_tensor=np.asarray(cur_pos, np.int32), page_table_tensor=table,
                    logit_softcap=cap, sliding_window_size=window, attention_sink=sinks, split=split)
    want = attention_reference(q, k_values, v_values, cur_pos=cur_pos, logit_softcap=cap, sliding_window_size=window,
                               attention_sink=sinks_bf16)
    assert_close(out, want, f"paged bfloat8_b c={cap} W={window} sinks split={split}")
    capped_sink = attention_reference(q, k_values, v_values, cur_pos=cur_pos, logit_softcap=cap,
                                      sliding_window_size=window, attention_sink=np.minimum(sinks_bf16, cap))
    assert relative_l2(capped_sink, want) > 0.05, "the sinks do not tell a capped sink from an uncapped one"


def test_a_huge_cap_is_the_identity():
    """c = 1e6: s / c is below 2^-12 for these scores, where the LLK's tanh returns its input, so
    the capped scores are the scores (to fp32 rounding of s / c * c)."""
    rng = np.random.default_rng(4)
    q, k, v = (_bf16(x) for x in _inputs(rng, 2, 4, 2, 64, 256, score_std=4.0))
    out = run_quiet(attention, q, k, v, cur_pos=[100, 255], logit_softcap=1e6)
    assert_close(out, attention_reference(q, k, v, cur_pos=[100, 255]), "c=1e6 against the uncapped reference")


# The measured error table (issue 21: "the error against float64 is measured and stated").
TABLE = [  # (label, cap, score std, compute config)
    ("c=50, scores within the cap (std 5)", 50.0, 5.0, None),
    ("c=50, scores 10x past the cap (std 500)", 50.0, 500.0, None),
    ("c=30, scores 10x past the cap (std 300)", 30.0, 300.0, None),
    ("c=5, scores 10x past the cap (std 50)", 5.0, 50.0, None),
    ("c=1, every score past the cap (std 20)", 1.0, 20.0, None),
    ("bf16 DST: c=50, within (std 5)", 50.0, 5.0, BF16_DST),
    ("bf16 DST: c=50, 10x past (std 500)", 50.0, 500.0, BF16_DST),
    ("bf16 DST: c=5, 10x past (std 50)", 5.0, 50.0, BF16_DST),
]
BF16_DST_MIN_PCC = 0.999
# Against the stored-scores reference at d128 the op also rounds Q * scale to bfloat16 (1/sqrt(128)
# is not a bfloat16 value: ~1e-3 of each score, i.e. ~0.5 before a cap of 50 at std 500) and P to
# bfloat16: measured 1.24e-2 at c = 50, std 500 (1.28e-2 uncapped at std 5, the op's own figure).
STORED_MAX_RELATIVE_L2 = 1.5e-2
BF16_DST_MAX_RELATIVE_L2 = 0.05


def test_softcap_error_against_float64(record_property):
    """PCC, rel-L2 and max-abs of the output against float64 (and, in brackets, rel-L2 against
    float64 with the capped scores rounded to bfloat16 once, as CB S holds them), 8 users x 8 Q
    heads (GQA 4), d128, positions 100..2047. Bars: the default config (fp32 DST) within
    :data:`FAR_MIN_PCC` / :data:`FAR_MAX_RELATIVE_L2` of float64 everywhere and within
    :data:`STORED_MAX_RELATIVE_L2` of the stored-scores reference; the bfloat16-DST
    config (fp32_dest_acc_en=False: scores bfloat16 in DST before and after the cap, the LLK's
    polynomial tanh, 2.3e-3 max error times c) within :data:`BF16_DST_MIN_PCC` /
    :data:`BF16_DST_MAX_RELATIVE_L2` of float64."""
    rng = np.random.default_rng(21)
    cur_pos = [100, 255, 256, 700, 1023, 1500, 2000, 2047]
    lines, failures = [], []
    for label, cap, std, config in TABLE:
        q, k, v = (_bf16(x) for x in _inputs(rng, len(cur_pos), 8, 2, 128, 2048, score_std=std))
        out = run_quiet(attention, q, k, v, cur_pos=cur_pos, logit_softcap=cap, compute_kernel_config=config)
        got = np.asarray(out, dtype=np.float64)
        want = attention_reference(q, k, v, cur_pos=cur_pos, logit_softcap=cap)
        stored = _stored_scores_reference(q, k, v, cur_pos, 1, cap)
        figures = pcc(got, want), relative_l2(got, want), max_abs(got, want), relative_l2(got, stored)
        lines.append(f"{label:42s} PCC {figures[0]:.6f}  rel-L2 {figures[1]:.2e}  max-abs {figures[2]:.2e}  "
                     f"(bf16-S ref: rel-L2 {figures[3]:.2e})")
        if config is None:
            ok = figures[0] >= FAR_MIN_PCC and figures[1] <= FAR_MAX_RELATIVE_L2 and figures[3] <= STORED_MAX_RELATIVE_L2
        else:
            ok = figures[0] >= BF16_DST_MIN_PCC and figures[1] <= BF16_DST_MAX_RELATIVE_L2
        if not ok:
            failures.append(lines[-1])
    record_property("figure", " | ".join(lines))
    print("\n[emulator] logit softcap vs float64\n" + "\n".join(lines))
    assert not failures, failures


def test_softcap_is_in_the_program():
    rng = np.random.default_rng(3)
    q, k, v = (_bf16(x) for x in _inputs(rng, 2, 4, 2, 64, 256))
    hashes = set()
    for cap in (50.0, 50.0, 30.0, None):
        run_quiet(attention, q, k, v, cur_pos=[5, 200], logit_softcap=cap)
        hashes.add(last_report().program_hash)
    assert len(hashes) == 3


def test_drop_ins_take_logit_softcap():
    rng = np.random.default_rng(9)
    q = _bf16(rng.standard_normal((1, 2, 8, 64), dtype=np.float32) * 4)
    k, v = (_bf16(rng.standard_normal((2, 2, 256, 64), dtype=np.float32) * 4) for _ in range(2))
    rows_q = q.reshape(1, 1, 2, 8 * 64)
    out = run_quiet(scaled_dot_product_attention_decode, q, k, v, cur_pos=[77, 200], logit_softcap=2.0)
    want = attention_reference(rows_q, k, v, cur_pos=[77, 200], logit_softcap=2.0)
    assert_close(np.asarray(out).reshape(1, 1, 2, 8 * 64), want, "drop-in c=2")
    table = np.arange(8, dtype=np.int32).reshape(2, 4)
    paged_k, paged_v = (x.reshape(2, 2, 4, 64, 64).transpose(0, 2, 1, 3, 4).reshape(8, 2, 64, 64) for x in (k, v))
    out = run_quiet(paged_scaled_dot_product_attention_decode, q, paged_k, paged_v, table,
                    cur_pos_tensor=np.asarray([77, 200], np.int32), logit_softcap=2, attention_chunk_size=128)
    want = attention_reference(rows_q, k, v, cur_pos=[77, 200], logit_softcap=2.0, attention_chunk_size=128)
    assert_close(np.asarray(out).reshape(1, 1, 2, 8 * 64), want, "paged drop-in c=2 C=128")


@pytest.mark.parametrize("bad, error", [(0.0, ValueError), (-1.0, ValueError), (float("nan"), ValueError),
                                        (float("inf"), ValueError), (2.0**64 * 1.01, ValueError), (2.0**-65, ValueError), (True, TypeError),
                                        ("50", TypeError), ([50.0], TypeError)])
def test_bad_cap_is_refused(bad, error):
    rng = np.random.default_rng(0)
    q, k, v = (_bf16(x) for x in _inputs(rng, 1, 2, 1, 64, 128))
    with pytest.raises(error, match="logit_softcap: expected"):
        attention(q, k, v, cur_pos=[3], logit_softcap=bad)
