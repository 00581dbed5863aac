"""The README's Python example runs as written and gives the reference's result."""

import pathlib
import re

import numpy as np

from ttnn_flashdecode.op.reference import attention_reference, pcc

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs_and_matches_the_reference():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has no Python example"
    namespace: dict = {}
    for block in blocks:  # the later examples continue the first
        exec(block, namespace)  # noqa: S102 - our own README
    out, ref = namespace["out"], namespace["ref"]
    assert out.shape == ref.shape == (1, 1, 2, 16 * 128)
    assert pcc(np.asarray(out, np.float64), ref) >= 0.9999
    q4, k, v = namespace["q4"], namespace["k"], namespace["v"]
    rows_ref = attention_reference(q4, k, v, cur_pos=[4000, 8191], rows=4)
    assert pcc(np.asarray(namespace["verify"], np.float64), rows_ref) >= 0.9999
    chunk_ref = attention_reference(namespace["chunk"], k[:1], v[:1], chunk_start=45)
    assert pcc(np.asarray(namespace["prefill"], np.float64), chunk_ref) >= 0.9999
    mesh_ref = attention_reference(namespace["mq"], namespace["mk"], namespace["mv"], cur_pos=[5, 1000])
    assert pcc(np.asarray(namespace["mesh_full"], np.float64), mesh_ref) >= 0.9999  # the emulated mesh example
    lq, latent = (np.asarray(namespace[name], np.float64) for name in ("lq", "latent"))  # the MLA example
    mla_ref = np.zeros((1, 2, 128, 512))
    for user, position in enumerate([100, 1023]):
        scores = 576 ** -0.5 * lq[0, user] @ latent[user, 0, :position + 1].T
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        mla_ref[0, user] = weights / weights.sum(axis=1, keepdims=True) @ latent[user, 0, :position + 1, :512]
    assert pcc(np.asarray(namespace["mla"], np.float64), mla_ref) >= 0.9999
    cp_ref = attention_reference(namespace["mq"], namespace["mk"], namespace["mv"], cur_pos=[5, 1000])
    assert pcc(np.asarray(namespace["cp_full"], np.float64), cp_ref) >= 0.9999  # the context-parallel example
