"""The README's Python examples run as written and give the float64 reference's result.

Every ```python block of README.md runs, in order, in one namespace (the later examples continue
the first). A block that needs a card is fenced without a language (and marked
``<!-- not run: needs a card -->``), so it is not run here.
"""

import pathlib
import re

import numpy as np
import pytest
import ttnn

from ttnn_flashdecode.op.reference import attention_reference, pcc, relative_l2

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def namespace():
    assert BLOCKS, "the README has no Python example"
    names: dict = {}
    for block in BLOCKS:
        exec(block, names)  # noqa: S102 - our own README
    return names


def _f64(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def test_readme_numpy_quick_start(namespace):
    out, ref = namespace["out"], namespace["ref"]
    assert out.shape == ref.shape == (1, 1, 2, 16 * 128)
    assert pcc(_f64(out), ref) >= 0.9999


def test_readme_host_tensor_quick_start(namespace):
    """Host ttnn tensors from numpy through the paged drop-in, against float64."""
    assert isinstance(namespace["host_out"], ttnn.Tensor)
    got, ref = namespace["host_got"], namespace["host_ref"]
    assert got.shape == (1, 2, 8, 64)
    assert pcc(_f64(got).reshape(ref.shape), ref) >= 0.9999
    assert relative_l2(_f64(got).reshape(ref.shape), ref) <= 1e-2


def test_readme_host_output_has_the_layout_of_q(namespace):
    """The README says a host output has Q's layout: TILE for the example's TILE Q, as ttnn's op returns."""
    assert namespace["host_out"].layout == ttnn.TILE_LAYOUT


def test_readme_sink_warning(namespace):
    """The warning's two calls agree, and the sinks passed unconverted to the drop-in do not."""
    by_op, by_dropin = _f64(namespace["by_op"]), _f64(namespace["by_dropin"])
    assert pcc(by_op.reshape(-1), by_dropin.reshape(-1)) >= 0.9999
    hq, hk, hv, sinks = (namespace[name] for name in ("hq", "hk", "hv", "sinks"))
    ref = attention_reference(hq.reshape(1, 1, 2, 8 * 64), hk, hv, cur_pos=[5, 200], attention_sink=sinks)
    assert relative_l2(by_op, ref) <= 1e-2
    wrong = namespace["transformer"].scaled_dot_product_attention_decode(hq, hk, hv, cur_pos=[5, 200],
                                                                         attention_sink=sinks)
    assert relative_l2(_f64(wrong).reshape(ref.shape), ref) > 5e-2  # silently wrong: no error raised


def test_readme_request_kinds(namespace):
    q4, k, v = namespace["q4"], namespace["k"], namespace["v"]
    rows_ref = attention_reference(q4, k, v, cur_pos=[4000, 8191], rows=4)
    assert pcc(_f64(namespace["verify"]), rows_ref) >= 0.9999
    chunk_ref = attention_reference(namespace["chunk"], k[:1], v[:1], chunk_start=45)
    assert pcc(_f64(namespace["prefill"]), chunk_ref) >= 0.9999


def test_readme_lse_and_merge(namespace):
    ref, lse = attention_reference(namespace["lq"], namespace["lk"], namespace["lv"], cur_pos=[200, 128],
                                   return_lse=True)
    assert pcc(_f64(namespace["merged"]), ref) >= 0.9999
    assert np.abs(_f64(namespace["merged_lse"]) - lse).max() <= 1e-2


def test_readme_mla(namespace):
    mq, latent = (_f64(namespace[name]) for name in ("mq", "latent"))
    ref = np.zeros((1, 2, 128, 512))
    for user, position in enumerate([100, 1023]):
        scores = 576 ** -0.5 * mq[0, user] @ latent[user, 0, :position + 1].T
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        ref[0, user] = weights / weights.sum(axis=1, keepdims=True) @ latent[user, 0, :position + 1, :512]
    assert pcc(_f64(namespace["mla"]), ref) >= 0.9999
