"""Tests for the float64 attention reference and the comparison metrics."""

import math

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode.op.reference import attention_reference, max_abs, pcc, relative_l2


def naive_attention(q, k, v, cur_pos, scale=None):
    """Scalar-loop attention in Python floats: the most literal reading of the contract."""
    batch, n_kv, _, hd = k.shape
    n_q = q.shape[-1] // hd
    group = n_q // n_kv
    scale = 1.0 / math.sqrt(hd) if scale is None else scale
    out = np.zeros((1, 1, batch, n_q * hd))
    for b in range(batch):
        for h in range(n_q):
            g = h // group
            qv = [float(x) for x in q[0, 0, b, h * hd:(h + 1) * hd]]
            scores = []
            for t in range(cur_pos[b] + 1):
                scores.append(scale * sum(qv[d] * float(k[b, g, t, d]) for d in range(hd)))
            m = max(scores)
            w = [math.exp(s - m) for s in scores]
            z = sum(w)
            for d in range(hd):
                out[0, 0, b, h * hd + d] = sum(w[t] * float(v[b, g, t, d]) for t in range(len(w))) / z
    return out


def make(batch, n_q, n_kv, cap, hd, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 1, batch, n_q * hd)).astype(dtype)
    k = rng.standard_normal((batch, n_kv, cap, hd)).astype(dtype)
    v = rng.standard_normal((batch, n_kv, cap, hd)).astype(dtype)
    return q, k, v


@pytest.mark.parametrize(
    "batch,n_q,n_kv,cap,hd,cur_pos",
    [
        (1, 1, 1, 4, 3, [2]),
        (2, 4, 2, 8, 4, [0, 7]),
        (3, 6, 3, 5, 2, [1, 4, 3]),
        (2, 9, 3, 7, 5, [6, 2]),
    ],
)
def test_matches_naive_loops(batch, n_q, n_kv, cap, hd, cur_pos):
    q, k, v = make(batch, n_q, n_kv, cap, hd, seed=batch * 7 + n_q)
    got = attention_reference(q, k, v, cur_pos=cur_pos)
    want = naive_attention(q, k, v, cur_pos)
    assert got.shape == (1, 1, batch, n_q * hd)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_explicit_scale_matches_naive():
    q, k, v = make(2, 4, 1, 6, 3, seed=3)
    got = attention_reference(q, k, v, cur_pos=[5, 3], scale=0.37)
    np.testing.assert_allclose(got, naive_attention(q, k, v, [5, 3], scale=0.37), rtol=1e-12, atol=1e-12)
    # and the scale actually matters
    assert max_abs(got, attention_reference(q, k, v, cur_pos=[5, 3])) > 1e-3


def test_hand_computed_two_positions():
    # one user, one head, head_dim 1: scores = scale*[q*k0, q*k1] = [0, ln 3] -> weights [1/4, 3/4]
    q = np.array([[[[1.0]]]])
    k = np.array([[[[0.0], [math.log(3.0)], [123.0]]]])
    v = np.array([[[[10.0], [2.0], [-1e6]]]])
    out = attention_reference(q, k, v, cur_pos=[1], scale=1.0)
    assert out.shape == (1, 1, 1, 1)
    assert out[0, 0, 0, 0] == pytest.approx(0.25 * 10.0 + 0.75 * 2.0, rel=1e-14)


def test_cur_pos_zero_returns_first_value_row():
    # with a single live position the softmax weight is exactly 1: output = v[:, g, 0, :]
    q, k, v = make(2, 6, 3, 4, 8, seed=1)
    out = attention_reference(q, k, v, cur_pos=[0, 0]).reshape(2, 6, 8)
    for b in range(2):
        for h in range(6):
            np.testing.assert_allclose(out[b, h], v[b, h // 2, 0].astype(np.float64), rtol=0, atol=1e-15)


def test_gqa_mapping_each_q_head_reads_its_kv_head():
    # give every kv head a constant, distinct v: output of q head h must equal that of kv head h // group
    batch, n_q, n_kv, cap, hd = 1, 9, 3, 6, 4
    q, k, _ = make(batch, n_q, n_kv, cap, hd, seed=2)
    v = np.zeros((batch, n_kv, cap, hd))
    for g in range(n_kv):
        v[0, g] = 100.0 * (g + 1)
    out = attention_reference(q, k, v, cur_pos=[5]).reshape(n_q, hd)
    for h in range(n_q):
        np.testing.assert_allclose(out[h], 100.0 * (h // 3 + 1), rtol=1e-13)


def test_gqa_mapping_changing_one_kv_head_only_changes_its_group():
    q, k, v = make(1, 8, 2, 5, 4, seed=4)
    base = attention_reference(q, k, v, cur_pos=[4]).reshape(8, 4)
    k2 = k.copy()
    # kv head 1 serves q heads 4..7 (a per-position perturbation: a constant shift would cancel in the softmax)
    k2[0, 1] += np.random.default_rng(9).standard_normal(k2[0, 1].shape)
    moved = attention_reference(q, k2, v, cur_pos=[4]).reshape(8, 4)
    np.testing.assert_array_equal(moved[:4], base[:4])
    assert np.abs(moved[4:] - base[4:]).max() > 1e-3


def test_positions_past_cur_pos_are_ignored():
    q, k, v = make(2, 4, 2, 10, 4, seed=5)
    cur = [3, 6]
    base = attention_reference(q, k, v, cur_pos=cur)
    k2, v2 = k.copy(), v.copy()
    for b, p in enumerate(cur):
        k2[b, :, p + 1:] = 1e4  # huge scores if they were wrongly included
        v2[b, :, p + 1:] = -7e5
    np.testing.assert_array_equal(attention_reference(q, k2, v2, cur_pos=cur), base)


def test_softmax_invariant_to_adding_a_constant_to_scores():
    # Use head_dim 2 with q = [x, 1] and add delta to k's second component at every live position:
    # every score gains scale*delta, which the softmax must cancel.
    rng = np.random.default_rng(6)
    q = np.concatenate([rng.standard_normal((1, 1, 1, 1)), np.ones((1, 1, 1, 1))], axis=-1)
    k = rng.standard_normal((1, 1, 7, 2))
    v = rng.standard_normal((1, 1, 7, 2))
    base = attention_reference(q, k, v, cur_pos=[6])
    k2 = k.copy()
    k2[..., 1] += 50.0
    np.testing.assert_allclose(attention_reference(q, k2, v, cur_pos=[6]), base, rtol=1e-12, atol=1e-13)


def test_large_scores_stay_finite():
    # scores of ~1e4 would overflow exp() without max-subtraction
    q = np.full((1, 1, 1, 4), 100.0)
    k = np.full((1, 1, 3, 4), 100.0)
    k[0, 0, 1] = 99.0
    v = np.arange(12, dtype=np.float64).reshape(1, 1, 3, 4)
    out = attention_reference(q, k, v, cur_pos=[2], scale=1.0)
    assert np.isfinite(out).all()
    # position 1 scores 400 lower: weights ~ 1/2, 0, 1/2
    np.testing.assert_allclose(out.ravel(), (v[0, 0, 0] + v[0, 0, 2]) / 2, rtol=1e-12)


def test_bfloat16_inputs_are_upcast_exactly():
    qf, kf, vf = make(2, 6, 3, 8, 8, seed=7)
    bf = ml_dtypes.bfloat16
    q, k, v = qf.astype(bf), kf.astype(bf), vf.astype(bf)
    got = attention_reference(q, k, v, cur_pos=[7, 2])
    want = attention_reference(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), cur_pos=[7, 2])
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)


def test_output_is_convex_combination_of_values():
    q, k, v = make(3, 6, 3, 9, 4, seed=8)
    out = attention_reference(q, k, v, cur_pos=[8, 0, 4]).reshape(3, 3, 2, 4)
    for b, p in enumerate([8, 0, 4]):
        live = v[b, :, : p + 1].astype(np.float64)  # [G, L, D]
        assert (out[b] <= live.max(axis=1)[:, None, :] + 1e-12).all()
        assert (out[b] >= live.min(axis=1)[:, None, :] - 1e-12).all()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(q=np.zeros((1, 2, 8)), k=np.zeros((2, 1, 4, 4)), v=np.zeros((2, 1, 4, 4)), cur_pos=[0, 0]), "q: expected shape"),
        (dict(q=np.zeros((1, 1, 2, 8)), k=np.zeros((2, 4, 4)), v=np.zeros((2, 4, 4)), cur_pos=[0, 0]), "k: expected shape"),
        (dict(q=np.zeros((1, 1, 2, 8)), k=np.zeros((2, 1, 4, 4)), v=np.zeros((2, 1, 5, 4)), cur_pos=[0, 0]), "v: expected the same shape"),
        (dict(q=np.zeros((1, 1, 3, 8)), k=np.zeros((2, 1, 4, 4)), v=np.zeros((2, 1, 4, 4)), cur_pos=[0, 0]), "q: expected batch 2"),
        (dict(q=np.zeros((1, 1, 2, 10)), k=np.zeros((2, 1, 4, 4)), v=np.zeros((2, 1, 4, 4)), cur_pos=[0, 0]), "multiple of head_dim"),
        (dict(q=np.zeros((1, 1, 2, 12)), k=np.zeros((2, 2, 4, 4)), v=np.zeros((2, 2, 4, 4)), cur_pos=[0, 0]), "multiple of n_kv_heads"),
        (dict(q=np.zeros((1, 1, 2, 8)), k=np.zeros((2, 1, 4, 4)), v=np.zeros((2, 1, 4, 4)), cur_pos=[0]), "cur_pos: expected 2 entries"),
        (dict(q=np.zeros((1, 1, 2, 8)), k=np.zeros((2, 1, 4, 4)), v=np.zeros((2, 1, 4, 4)), cur_pos=[0, 4]), r"cur_pos\[1\]: expected an int in \[0, 3\]"),
        (dict(q=np.zeros((1, 1, 2, 8)), k=np.zeros((2, 1, 4, 4)), v=np.zeros((2, 1, 4, 4)), cur_pos=[-2, 0]), r"cur_pos\[0\]"),
        (dict(q=np.zeros((1, 1, 2, 8)), k=np.zeros((2, 1, 4, 4)), v=np.zeros((2, 1, 4, 4)), cur_pos=[0, 0], scale=0.0), "scale: expected"),
        (dict(q=np.zeros((1, 1, 2, 8), dtype=object), k=np.zeros((2, 1, 4, 4)), v=np.zeros((2, 1, 4, 4)), cur_pos=[0, 0]), "q: expected a float array"),
    ],
)
def test_shape_errors(kwargs, match):
    q, k, v = kwargs.pop("q"), kwargs.pop("k"), kwargs.pop("v")
    with pytest.raises(ValueError, match=match):
        attention_reference(q, k, v, **kwargs)


# ------------------------------------------------------------------------------------ metrics


def test_pcc_values():
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert pcc(a, 2 * a + 5) == pytest.approx(1.0, abs=1e-15)
    assert pcc(a, -a) == pytest.approx(-1.0, abs=1e-15)
    assert pcc(a, np.array([1.0, -1.0, -1.0, 1.0])) == pytest.approx(0.0, abs=1e-15)
    # by hand: x-mean = [-1,0,1], y-mean = [-1,1,0] -> r = 1 / (sqrt(2)*sqrt(2)) = 0.5
    assert pcc([1.0, 2.0, 3.0], [1.0, 3.0, 2.0]) == pytest.approx(0.5, rel=1e-14)
    assert pcc(np.ones(3), np.ones(3)) == 1.0
    assert pcc(np.ones(3), np.array([1.0, 2.0, 3.0])) == 0.0
    assert math.isnan(pcc([1.0, np.nan], [1.0, 2.0]))
    with pytest.raises(ValueError, match="same number of elements"):
        pcc(np.ones(3), np.ones(4))


def test_max_abs_and_relative_l2():
    a = np.array([[1.0, -2.0], [3.0, 0.5]])
    b = np.array([[1.5, -2.0], [0.0, 0.5]])
    assert max_abs(a, b) == 3.0
    assert relative_l2(a, b) == pytest.approx(math.sqrt(0.25 + 9.0) / math.sqrt(2.25 + 4 + 0.25), rel=1e-14)
    assert relative_l2(b, b) == 0.0
    assert relative_l2(np.zeros(2), np.zeros(2)) == 0.0
    assert relative_l2(np.ones(2), np.zeros(2)) == float("inf")
    assert max_abs(np.ones(3, dtype=ml_dtypes.bfloat16), np.zeros(3)) == 1.0


def test_idle_slot_rows_are_zero_and_leave_the_others_alone():
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 1, 3, 2 * 8))
    k = rng.standard_normal((3, 1, 16, 8))
    v = rng.standard_normal((3, 1, 16, 8))
    out = attention_reference(q, k, v, cur_pos=[4, -1, 9])
    assert not out[0, 0, 1].any()
    for user, position in ((0, 4), (2, 9)):
        alone = attention_reference(q[:, :, user:user + 1], k[user:user + 1], v[user:user + 1], cur_pos=[position])
        assert np.array_equal(out[0, 0, user], alone[0, 0, 0])


@pytest.mark.parametrize("bad", [5.0, 5.5, True, "5"])
def test_reference_refuses_a_position_that_is_not_an_int_as_attention_does(bad):
    from ttnn_flashdecode import attention

    q, k, v = (np.zeros(shape, dtype=np.float32) for shape in ((1, 1, 1, 64), (1, 1, 64, 64), (1, 1, 64, 64)))
    with pytest.raises(TypeError, match=r"cur_pos\[0\]: expected an int"):
        attention_reference(q, k, v, cur_pos=[bad])
    with pytest.raises(TypeError, match=r"cur_pos\[0\]: expected an int"):
        attention(q, k, v, cur_pos=[bad])
    with pytest.raises(TypeError, match=r"chunk_start\[0\]: expected an int"):
        attention_reference(q, k, v, chunk_start=[bad])
