"""SFPU on live rows only (issue 35 item 3, first bullet), on the emulator.

A GQA group of 4 or 8 heads fills 4 or 8 of a Q tile's 32 rows. When every request's stage rows
are rows 0..15 of their row tile (faces 0 and 1) every SFPU call of the compute kernel runs with
the LLK's ``VectorMode::R``, and on each of those faces only the SFPU iterations that hold live
rows (two per four rows: ``kernels/attention_compute_sfpu.hpp``); the program's named arg
``live_rows`` is the stage rows rounded up to 4, or 32 (``VectorMode::RC``, 8 iterations a face).
The emulator counts the faces and the iterations each SFPU call runs (``CoreStats.sfpu_faces``,
``CoreStats.sfpu_iterations``) and computes only the datums those iterations address.

Checked here: the face operations halve (every SFPU API: 2 faces a call, against 4 with the same
call forced to RC) and the iterations fall to 2 x live_rows / 4 a face; the output is bit-identical
to the forced-RC run's (whole tensor, so nothing the dead rows hold reaches an output element) and
within tests/bars.py's bar of the float64 reference; 16 rows take R, 17 take RC. Hard inputs: large
and all-negative scores, positions 0 / 31 / 32, sinks with return_lse, the softcap, a split-K
combine, HiFi2 (the SFPU row scaling), fp32 DST (the TF32 rounding of the state) and the
approximate exp (whose LLK runs whole faces whatever it is asked).
"""

from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np
import pytest
import ttnn

from bars import assert_close, run_quiet
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op import plan as plans
from ttnn_flashdecode.op.reference import attention_reference, pcc, relative_l2
from test_attention_adversarial import APPROX_EXP_BARS
from ttnn_flashdecode.op.compute_options import ComputeOptions
from ttnn_flashdecode.op.shape import DecodeShape

HIFI2 = ComputeOptions(math_fidelity=ttnn.MathFidelity.HiFi2)
BF16_DST = ComputeOptions(fp32_dest_acc_en=False)
APPROX_EXP = ComputeOptions(exp_approx=True)


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16)


def _inputs(seed, batch, n_q, n_kv, capacity, head_dim=64, score_shift=0.0, score_std=1.0):
    """bfloat16 Q, K, V; scores of about ``score_std`` around ``score_shift`` (Q . K / sqrt(d))."""
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((batch, n_kv, capacity, head_dim))
    q = rng.standard_normal((1, 1, batch, n_q * head_dim)) * score_std
    if score_shift:
        # A shared direction in every key and query moves every score by about score_shift.
        k[..., 0] = 1.0
        q.reshape(batch, n_q, head_dim)[..., 0] = score_shift * np.sqrt(head_dim)
    v = rng.standard_normal((batch, n_kv, capacity, head_dim))
    return _bf16(q), _bf16(k), _bf16(v)


@contextlib.contextmanager
def _forced_all_faces(monkeypatch):
    """Plans run every SFPU call on all four faces, whole (live_rows 32), as before this change."""
    plans.program_for.cache_clear()
    with monkeypatch.context() as m:
        m.setattr(DecodeShape, "live_rows", property(lambda self: 32))
        yield
    plans.program_for.cache_clear()


def _run(*args, **kwargs):
    """Output(s) of one emulated call and its totals (CoreStats) and live_row_faces."""
    out = run_quiet(attention, *args, **kwargs)
    report = last_report()
    return out, report.totals, report.plan.shape.live_row_faces


def _iterations_per_face(ratio, exp_approx=False, api=""):
    """SFPU iterations a face an API runs for a GQA group of ``ratio`` heads: 2 per 4 live rows on
    faces 0-1, 8 on RC; the approximate exp 8 whatever (its LLK is unrolled for 8)."""
    if ratio > 16 or (exp_approx and api == "exp_tile"):
        return 8
    return 2 * -(-ratio // 4)


def _as_arrays(out):
    return [np.asarray(o, np.float32) for o in (out if isinstance(out, tuple) else (out,))]


# name -> (GQA ratio, attention()'s keywords, the inputs' shape and scores)
CASES = {
    "gqa8-long": (8, dict(cur_pos=[4095]), dict(capacity=4096)),
    "gqa4-hifi2-split": (4, dict(cur_pos=[700, 31], max_split=3, compute_kernel_config=HIFI2), dict(batch=2)),
    "gqa8-sinks-lse-split": (8, dict(cur_pos=[0, 32], split=2, return_lse=True,
                                     attention_sink=[-1.0, 0.5, 2.0, 8.0, -8.0, 0.0, 1.5, 30.0]), dict(batch=2)),
    "gqa8-softcap-large": (8, dict(cur_pos=[31, 600], logit_softcap=5.0), dict(batch=2, score_std=10.0)),
    "gqa8-all-negative": (8, dict(cur_pos=[300, 1]), dict(batch=2, score_shift=-6.0, score_std=0.5)),
    "gqa16-bf16-dst": (16, dict(cur_pos=[450], compute_kernel_config=BF16_DST), dict()),
    "gqa4-approx-exp": (4, dict(cur_pos=[33, 2047], compute_kernel_config=APPROX_EXP), dict(batch=2, capacity=2048)),
    "gqa6-split": (6, dict(cur_pos=[1500], split=4), dict(capacity=2048)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_face_ops_halve_and_the_output_is_bit_identical(name, monkeypatch, record_property):
    """Every SFPU API computes 2 faces a call with <= 16 live rows (4 forced to RC), the face
    operations halve, and every output element is the RC run's, bit for bit, and within the bar."""
    ratio, kwargs, shape = CASES[name]
    shape = {"batch": 1, "capacity": 1024, **shape}
    q, k, v = _inputs(len(name), shape["batch"], ratio, 1, shape["capacity"],
                      score_shift=shape.get("score_shift", 0.0), score_std=shape.get("score_std", 1.0))
    out, live, faces = _run(q, k, v, **kwargs)
    assert faces == 2
    with _forced_all_faces(monkeypatch):
        out_rc, every, faces_rc = _run(q, k, v, **kwargs)
    assert faces_rc == 4
    assert live.sfpu_faces.keys() == every.sfpu_faces.keys()
    exp_approx = kwargs.get("compute_kernel_config") is APPROX_EXP
    for api, count in live.sfpu_faces.items():
        assert count == 2 * live.calls[api], f"{api} computed {count} faces in {live.calls[api]} calls: not all on R"
        assert every.sfpu_faces[api] == 4 * every.calls[api]
        per_face = _iterations_per_face(ratio, exp_approx, api)
        assert live.sfpu_iterations[api] == count * per_face, f"{api}: {live.sfpu_iterations[api]} iterations on {count} faces"
        assert every.sfpu_iterations[api] == 8 * every.sfpu_faces[api]
    assert 2 * live.sfpu_face_ops == every.sfpu_face_ops
    if not exp_approx:  # the SFPU's datum work: 2 x live rows / 4 of a face's 8 iterations, on 2 of 4 faces
        ratio_of_work = sum(live.sfpu_iterations.values()) / sum(every.sfpu_iterations.values())
        assert ratio_of_work == pytest.approx(_iterations_per_face(ratio) / 16)
    tiles = sum(-(-(p + 1) // 32) for p in kwargs["cur_pos"])
    record_property("sfpu_face_ops_per_live_tile", f"{live.sfpu_face_ops / tiles:.2f} (RC {every.sfpu_face_ops / tiles:.2f})")
    record_property("sfpu_iterations_per_live_tile",
                    f"{sum(live.sfpu_iterations.values()) / tiles:.1f} (RC {sum(every.sfpu_iterations.values()) / tiles:.1f})")
    for got, want in zip(_as_arrays(out), _as_arrays(out_rc)):
        assert got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32)), name
    reference_kwargs = {key: value for key, value in kwargs.items()
                        if key not in ("split", "max_split", "compute_kernel_config")}
    want = attention_reference(q, k, v, **reference_kwargs)
    if exp_approx:  # the LLK's approximate exp dominates the error: its bars (test_attention_adversarial.py)
        got = np.asarray(out, np.float64)
        assert pcc(got, want) >= APPROX_EXP_BARS.min_pcc and relative_l2(got, want) <= APPROX_EXP_BARS.max_rel_l2, name
    elif kwargs.get("return_lse"):
        assert_close(out[0], want[0], f"{name} output")
        assert_close(out[1], want[1], f"{name} LSE")
    else:
        assert_close(out, want, name)


@pytest.mark.parametrize("ratio, faces", [(16, 2), (17, 4), (32, 4)])
def test_sixteen_rows_take_faces_0_and_1_and_seventeen_take_all_four(ratio, faces):
    """The boundary: a 16-head group's rows are 0..15 (R); a 17-head group's row 16 is live (RC)."""
    q, k, v = _inputs(ratio, 2, ratio, 1, 256, score_std=4.0)
    out, totals, live_row_faces = _run(q, k, v, cur_pos=[200, 32])
    assert live_row_faces == faces
    assert totals.sfpu_faces["exp_tile"] == faces * totals.calls["exp_tile"]
    assert_close(out, attention_reference(q, k, v, cur_pos=[200, 32]), f"GQA {ratio}")


@pytest.mark.parametrize("kind, rows, ratio, faces", [("chunk", 16, 1, 2), ("chunk", 17, 1, 4), ("rows", 4, 4, 2),
                                                     ("rows", 3, 6, 4)])
def test_chunk_and_rows_requests_count_their_stage_rows(kind, rows, ratio, faces):
    """A chunk's C rows and ROWS' q_rows * positions stage rows decide the faces alike."""
    q, k, v = _inputs(rows + ratio, 1, ratio, 1, 256)
    q = _bf16(np.tile(np.asarray(q, np.float32), (1, 1, rows, 1)) * np.linspace(0.5, 1.5, rows)[:, None])
    kwargs = dict(chunk_start=[40]) if kind == "chunk" else dict(cur_pos=[131], rows=rows)
    out, _, live_row_faces = _run(q, k, v, **kwargs)
    assert live_row_faces == faces
    assert_close(out, attention_reference(q, k, v, **kwargs), f"{kind} rows={rows} ratio={ratio}")
