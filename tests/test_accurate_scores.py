"""Scores that keep their precision (``accurate_scores=True``, issue 35 item 4) on the emulator,
against the float64 reference.

By default S (QS . K^T, through the score modifiers, into exp) is a bfloat16 CB, as in ttnn: a
score near 20 keeps an ulp of 0.125, so each weight exp(S - M) is off by up to ~6%, and a dominant
attention sink takes away the normalisation that would hide it. With ``accurate_scores`` S is a
float32 CB and each score is rounded to TF32 to nearest before the masks (SrcA, which every reader
of S goes through, holds TF32 and truncates: a truncated score biases every weight one way).

The bars: :data:`bars.MAX_RELATIVE_L2` (1e-2, the op's own bar) wherever the mode is on; the
user's case without the mode measures ~4.4e-2, so :data:`BF16_SCORES_FLOOR` shows the test can
fail. Hard inputs: a dominant sink over scores of std 6 and 12, all-negative scores, positions 0,
31, 32 and chunk / window edges, ROWS straddling a chunk edge, split-K, a block-float cache,
softcap, an attention mask (S rounded again after its bias), return_lse."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import ttnn

from bars import MAX_RELATIVE_L2, assert_close, bf16, one_hot_scores, run_quiet
from ttnn_flashdecode import attention
from ttnn_flashdecode.op import protocol, tiles
from ttnn_flashdecode.op.options import options_for
from ttnn_flashdecode.op.plan import plan_program
from ttnn_flashdecode.op.reference import attention_reference, relative_l2
from ttnn_flashdecode.op.residency import FLOAT16_B, FLOAT32, Residency, cb_plan, l1_bytes
from ttnn_flashdecode.op.compute_options import ComputeOptions

BF16_SCORES_FLOOR = 3e-2
"""The user's case with bfloat16 scores measures 4.4e-2 rel-L2 (the issue's report: 5.2e-2 on its
own inputs); above this floor, so the mode's test would fail on today's scores."""


def users_case(std: float = 6.0, sink: float = 30.0, seed: int = 35):
    """The issue's case as a new user builds it: 4 users, ROWS of 2 rows each, GQA 4 (8 Q / 2 KV
    heads, head_dim 64), an attention chunk of 64, positions on both sides of chunk edges (63, 64,
    130, 255), scores of std ``std`` (unit-normal K, Q times ``std``: head_dim 64 and the default
    scale 1/8 give std 1 per unit), and gpt-oss-like sinks around ``sink`` (above every score:
    dominant). Returns (q, k, v, keywords), every input exact in bfloat16."""
    rng = np.random.default_rng(seed)
    batch, rows, n_q, n_kv, head_dim, capacity = 4, 2, 8, 2, 64, 256
    q = bf16(rng.standard_normal((1, 1, batch * rows, n_q * head_dim)) * std)
    k = bf16(rng.standard_normal((batch, n_kv, capacity, head_dim)))
    v = bf16(rng.standard_normal((batch, n_kv, capacity, head_dim)))
    sinks = bf16(sink + rng.standard_normal(n_q)).astype(np.float64)
    keywords = dict(cur_pos=[63, 64, 130, 255], rows=rows, attention_chunk_size=64, attention_sink=sinks)
    return q, k, v, keywords


def _error(accurate: bool, q, k, v, **keywords) -> float:
    reference_keywords = {name: value for name, value in keywords.items() if name not in ("split", "block_tiles")}
    out = run_quiet(attention, q, k, v, accurate_scores=accurate, **keywords)
    return relative_l2(np.asarray(out, np.float64), attention_reference(q, k, v, **reference_keywords))


@pytest.mark.parametrize("split", [1, 3])
def test_the_users_case_is_within_the_bar_with_accurate_scores_and_not_without(split, record_property):
    q, k, v, keywords = users_case()
    before, after = _error(False, q, k, v, split=split, **keywords), _error(True, q, k, v, split=split, **keywords)
    record_property("figure", f"rel-L2 bf16 S {before:.2e}, accurate_scores {after:.2e}")
    assert before > BF16_SCORES_FLOOR, before
    assert after <= MAX_RELATIVE_L2, after


@pytest.mark.parametrize("std, sink", [(12.0, 60.0), (6.0, -1000.0), (6.0, 10.0)])
def test_larger_scores_and_sinks_far_below_or_among_the_scores(std, sink):
    """Scores of std 12 (|S| to ~40: TF32's ulp 2**-5) under a dominant sink; no sink in effect
    (1000 below); a sink among the scores."""
    q, k, v, keywords = users_case(std, sink, seed=int(std + sink) % 97)
    assert _error(True, q, k, v, **keywords) <= MAX_RELATIVE_L2




@pytest.mark.parametrize("position", [0, 31, 32, 300])
def test_all_negative_scores_under_a_sink_at_tile_edges(position):
    """Scores in [-40, -20] (not exact in bfloat16: a quarter of an ulp apart) and sinks near -15:
    every weight exp(S - sink) is small, none normalised away; positions 0, 31, 32 (one live
    column; a tile's last; the next tile's first)."""
    rng = np.random.default_rng(position)
    scores = rng.uniform(-40, -20, size=(8, 512))
    q, k, v = one_hot_scores(rng, scores)
    sinks = rng.uniform(-16, -14, size=8).round()
    keywords = dict(cur_pos=[position], scale=0.5, attention_sink=sinks)
    for split in (1, 2) if position > 32 else (1,):
        assert _error(True, q, k, v, split=split, block_tiles=1, **keywords) <= MAX_RELATIVE_L2


@pytest.mark.parametrize("window, chunk", [(100, None), (None, 64), (48, 32), (100, 64)])
def test_window_and_chunk_edges_with_rows(window, chunk):
    """ROWS of 3 straddling window and chunk edges (the CONST window pages add 0 or MASK_VALUE to
    an already rounded score), positions 2, 31, 32, 63, 64, 65, 200."""
    rng = np.random.default_rng(window or chunk)
    cur_pos = [2, 31, 32, 63, 64, 65, 200]
    rows, n_q, head_dim = 3, 4, 64
    q = bf16(rng.standard_normal((1, 1, len(cur_pos) * rows, n_q * head_dim)) * 6)
    k = bf16(rng.standard_normal((len(cur_pos), 2, 256, head_dim)))
    v = bf16(rng.standard_normal((len(cur_pos), 2, 256, head_dim)))
    keywords = dict(cur_pos=cur_pos, rows=rows, sliding_window_size=window, attention_chunk_size=chunk,
                    attention_sink=bf16(np.full(n_q, 24.0)).astype(np.float64))
    assert _error(True, q, k, v, **keywords) <= MAX_RELATIVE_L2


def test_softcap_keeps_the_capped_scores_precision():
    """logit_softcap 50 with scores of std 5 (docs/accuracy.md: ~1.2e-2 with bfloat16 S, whose ulp
    is 0.25 near the cap): the capped scores stay float32 into exp."""
    rng = np.random.default_rng(50)
    q = bf16(rng.standard_normal((1, 1, 4, 8 * 64)) * 5)
    k = bf16(rng.standard_normal((4, 2, 512, 64)))
    v = bf16(rng.standard_normal((4, 2, 512, 64)))
    keywords = dict(cur_pos=[0, 33, 300, 511], logit_softcap=50.0)
    before, after = _error(False, q, k, v, **keywords), _error(True, q, k, v, **keywords)
    assert after <= MAX_RELATIVE_L2 and after < before / 2, (before, after)


def test_an_attention_mask_is_added_and_rounded_again():
    """Biases in [0, 16] over scores of std 3 under a dominant sink (30), and a fully masked stretch:
    the bias's sum is off the TF32 grid, so the kernel rounds S again after it. Measured: 5.5e-2
    rel-L2 with bfloat16 S, 5.3e-3 with the mode, 1.2e-2 with the second rounding left out; the
    bar: the op's, and 5x better than bfloat16 S."""
    rng = np.random.default_rng(8)
    q = bf16(rng.standard_normal((1, 1, 3, 8 * 64)) * 3)
    k = bf16(rng.standard_normal((3, 2, 256, 64)))
    v = bf16(rng.standard_normal((3, 2, 256, 64)))
    mask = bf16(rng.uniform(0, 16, size=(3, 1, 8, 256))).astype(np.float32)
    mask[0, 0, 0, :96] = -np.inf
    keywords = dict(is_causal=False, attn_mask=mask, attention_sink=bf16(np.full(8, 30.0)).astype(np.float64))
    for split in (1, 3):
        before, after = _error(False, q, k, v, split=split, **keywords), _error(True, q, k, v, split=split, **keywords)
        assert after <= MAX_RELATIVE_L2 and 5 * after < before, (split, before, after)


def test_sinks_with_return_lse_keep_the_lse_to_the_scores_precision():
    """LSE = M + log(L) with scores ~20 under a sink: bfloat16 S errs by ~|S| * 2**-9 (docs/accuracy.md:
    5.4e-2 at ~35); float32 S by TF32's half ulp. Bar 1e-2 absolute: 5x TF32's half ulp at |S| < 64."""
    q, k, v, keywords = users_case(sink=20.0)
    out, lse = run_quiet(attention, q, k, v, return_lse=True, accurate_scores=True, **keywords)
    want, want_lse = attention_reference(q, k, v, return_lse=True, **keywords)
    assert_close(out, want, "output")
    assert np.abs(np.asarray(lse, np.float64) - want_lse).max() <= 1e-2


@pytest.mark.parametrize("dtype", ["bfloat8_b", "bfloat4_b"])
def test_a_block_float_cache_gives_the_bits_of_its_dequantised_values(dtype):
    """As without the mode (tests/test_block_float_kv.py): the cache's format is the unpacker's
    business, the scores' precision the same either way."""
    rng = np.random.default_rng(len(dtype))
    raw = [rng.standard_normal((2, 2, 256, 64), dtype=np.float32) for _ in range(2)]
    packed = [ttnn.Tensor(r, getattr(ttnn, dtype), layout=ttnn.TILE_LAYOUT) for r in raw]
    values = [bf16(tiles.block_float_values(r, dtype)) for r in raw]
    q = bf16(rng.standard_normal((1, 1, 2, 8 * 64)) * 6)
    keywords = dict(cur_pos=[31, 200], attention_sink=bf16(np.full(8, 25.0)).astype(np.float64), accurate_scores=True)
    on_packed = np.asarray(run_quiet(attention, q, *packed, **keywords), np.float64)
    on_values = np.asarray(run_quiet(attention, q, *values, **keywords), np.float64)
    np.testing.assert_array_equal(on_packed, on_values)


def test_the_s_cb_is_float32_only_with_the_mode_and_costs_a_block_of_tiles():
    """CB S: float32 4096-byte pages with the mode (the packer keeps fp32 DST's scores), bfloat16
    2048-byte pages without; L1 grows by 2048 bytes per block tile, nothing else changes."""
    def s_cb(residency):
        return next(cb for cb in cb_plan(residency) if cb.index == protocol.CB.S)

    plain, accurate = Residency(8, 4, 8, fp32_stats=True), Residency(8, 4, 8, fp32_stats=True, fp32_scores=True)
    assert (s_cb(plain).data_format, s_cb(plain).page_bytes) == (FLOAT16_B, 2048)
    assert (s_cb(accurate).data_format, s_cb(accurate).page_bytes) == (FLOAT32, 4096)
    assert l1_bytes(accurate) - l1_bytes(plain) == 8 * 2048


def test_the_plan_carries_the_mode_to_the_cb_and_the_kernel():
    from ttnn_flashdecode.op.plan import Target
    from ttnn_flashdecode.op.program_factory import OPERANDS
    from ttnn_flashdecode.op.shape import DecodeShape

    shape = DecodeShape(2, 8, 2, 64, 256)
    target = Target("wormhole_b0", (2, 2), tuple((2, 2048) for _ in OPERANDS), lambda x, y: (x, y))
    for accurate in (False, True):
        plan = plan_program(shape, target, compute=ComputeOptions(accurate_scores=accurate))
        assert plan.residency.fp32_scores is accurate
        assert dict(plan.named_compile_time_args)["accurate_scores"] == int(accurate)


@pytest.mark.parametrize("keywords, error, message", [
    (dict(accurate_scores=True, compute_kernel_config=ComputeOptions(fp32_dest_acc_en=False)), ValueError,
     "accurate_scores: expected a compute config with fp32_dest_acc_en=True"),
    (dict(accurate_scores=1), TypeError, "accurate_scores: expected a bool"),
    (dict(accurate_scores="yes"), TypeError, "accurate_scores: expected a bool"),
])
def test_bad_accurate_scores_are_refused_by_name(keywords, error, message):
    with pytest.raises(error, match=message):
        options_for(**keywords)


def test_the_compute_options_refuse_the_mode_on_a_bfloat16_dst():
    with pytest.raises(ValueError, match="accurate_scores: expected a compute config with fp32_dest_acc_en=True"):
        ComputeOptions(fp32_dest_acc_en=False, accurate_scores=True)
    config = ttnn.ComputeConfigDescriptor(math_fidelity=ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=True)
    assert options_for(compute_kernel_config=config, accurate_scores=True).compute.accurate_scores
    assert not options_for(compute_kernel_config=config).compute.accurate_scores  # off by default
    assert options_for(accurate_scores=None) == options_for()


def test_an_explicit_keyword_overrides_the_compute_options():
    """``accurate_scores=False`` (or True) given explicitly wins over ``ComputeOptions(accurate_scores=...)``,
    as an explicit ttnn keyword wins over a config's default; ``None`` keeps the config's."""
    on, off = ComputeOptions(accurate_scores=True), ComputeOptions()
    assert not options_for(compute_kernel_config=on, accurate_scores=False).compute.accurate_scores
    assert options_for(compute_kernel_config=off, accurate_scores=True).compute.accurate_scores
    assert options_for(compute_kernel_config=on, accurate_scores=None).compute.accurate_scores
    assert options_for(compute_kernel_config=on, accurate_scores=False) == options_for(compute_kernel_config=off)


def test_a_block_too_big_for_l1_names_what_the_mode_takes():
    """head_dim 512, V = K: a 16-tile block fits with bfloat16 S, not with float32 S."""
    q, cache = np.zeros((1, 1, 1, 512), np.float32), np.zeros((1, 1, 1024, 512), np.float32)
    with pytest.raises(ValueError, match=r"accurate_scores=True keeps CB S in float32.*largest block is 16"):
        attention(q, cache, cache, cur_pos=[5], block_tiles=16, accurate_scores=True)
    assert run_quiet(attention, q, cache, cache, cur_pos=[5], block_tiles=16).shape == q.shape


def test_a_block_the_mode_does_not_limit_is_refused_without_blaming_it():
    """head_dim 448, V = K: 18 tiles is the largest block with float32 S and with bfloat16 S, so a
    19-tile block is refused with the same words either way, not naming accurate_scores."""
    q, cache = np.zeros((1, 1, 1, 448), np.float32), np.zeros((1, 1, 1024, 448), np.float32)
    messages = []
    for accurate in (False, True):
        with pytest.raises(ValueError, match=r"block_tiles: expected <= 18 .*got 19") as refused:
            attention(q, cache, cache, cur_pos=[5], block_tiles=19, accurate_scores=accurate)
        messages.append(str(refused.value))
    assert messages[0] == messages[1]
    assert "accurate_scores" not in messages[1]


def test_the_drop_ins_take_the_mode_through_compute_options():
    """ttnn's signature has no such keyword: ``compute_kernel_config=ComputeOptions(accurate_scores=True)``
    carries it, and the drop-in gives attention()'s bits with the mode (scores of std 6, sinks ~30
    passed as ttnn takes them, divided by the scale)."""
    from ttnn_flashdecode.transformer import scaled_dot_product_attention_decode

    rng = np.random.default_rng(30)
    n_q, head_dim = 8, 64
    q = bf16(rng.standard_normal((1, 2, n_q, head_dim)) * 6)
    k, v = (bf16(rng.standard_normal((2, 2, 256, head_dim))) for _ in range(2))
    logits = bf16(30 + rng.standard_normal(n_q)).astype(np.float64)
    ttnn_sink = np.zeros((n_q, 32), np.float32)
    ttnn_sink[:, 0] = logits * 8  # the drop-in multiplies by the scale, 1/8
    rows_q = q.reshape(1, 1, 2, n_q * head_dim)
    want = run_quiet(attention, rows_q, k, v, cur_pos=[63, 200], attention_sink=logits, accurate_scores=True)
    out = run_quiet(scaled_dot_product_attention_decode, q, k, v, cur_pos=[63, 200], attention_sink=bf16(ttnn_sink),
                    compute_kernel_config=ComputeOptions(accurate_scores=True))
    np.testing.assert_array_equal(np.asarray(out, np.float64).reshape(want.shape), np.asarray(want, np.float64))
    assert relative_l2(np.asarray(want, np.float64),
                       attention_reference(rows_q, k, v, cur_pos=[63, 200], attention_sink=logits)) <= MAX_RELATIVE_L2


@pytest.mark.parametrize("field, value", [("math_fidelity", "HiFi2"), ("math_fidelity", 2), ("fp32_dest_acc_en", "no"),
                                          ("fp32_dest_acc_en", 0), ("math_approx_mode", None), ("dst_full_sync_en", 1.0),
                                          ("exp_approx", "yes"), ("exp_approx", 1)])
def test_compute_options_refuse_a_field_of_the_wrong_type_by_name(field, value):
    """A compute config's fields are checked when it is built, each by name (not deep in a launch)."""
    with pytest.raises(TypeError, match=field):
        ComputeOptions(**{field: value})
    import types

    duck = types.SimpleNamespace(math_fidelity=ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=True, math_approx_mode=False)
    if field in vars(duck):  # a ttnn-style config object with the bad field is refused the same way
        setattr(duck, field, value)
        if field == "math_fidelity":
            with pytest.raises(TypeError, match=field):
                ComputeOptions.from_config(duck)
