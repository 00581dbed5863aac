"""The mirror's bf16-DST score floor (mirror.py): it raises a bf16-DST rel-L2 bar only by its excess
over the floor of the inputs the config's bar was measured on, so ordinary inputs keep the config's
bar, and it grows where an outlier makes large scores (10x a query and a key element), where
bfloat16 steps of ~2^-9 x the score shift the softmax."""

from __future__ import annotations

import numpy as np
import pytest

from mirror import bf16_dst_score_floor, compute_config, config_case_score_floor, reference, rel_l2_bar


def _floor(outlier: bool) -> float:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 1, 8, 128))
    k = rng.standard_normal((1, 1, 512, 128))
    v = rng.standard_normal((1, 1, 512, 128))
    if outlier:
        q[0, 0, :, 7] = 10.0
        k[0, 0, 100:108, 7] = 10.0
    keywords = dict(first=[0], last=[511], scale=128 ** -0.5)
    return bf16_dst_score_floor(reference(q, k, v, **keywords), q, k, v, **keywords)


def test_unit_normal_inputs_keep_the_config_bar():
    bf16_dst = compute_config("HiFi4")
    assert 0 < config_case_score_floor() < rel_l2_bar(bf16_dst)
    assert rel_l2_bar(bf16_dst, config_case_score_floor()) == rel_l2_bar(bf16_dst)
    assert rel_l2_bar(bf16_dst, _floor(outlier=False)) < 1.1 * rel_l2_bar(bf16_dst)


def test_the_floor_grows_with_the_scores_an_outlier_makes():
    assert _floor(outlier=True) > 3 * _floor(outlier=False)
    bf16_dst = compute_config("HiFi4")
    assert rel_l2_bar(bf16_dst, _floor(outlier=True)) == pytest.approx(
        rel_l2_bar(bf16_dst) + _floor(True) - config_case_score_floor(), rel=1e-12)


def test_fp32_dst_bars_take_no_floor():
    fp32_dst = compute_config("HiFi4", True)
    assert rel_l2_bar(fp32_dst, 0.5) == rel_l2_bar(fp32_dst)
