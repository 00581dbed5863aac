"""The README's Python example runs as written and gives the reference's result."""

import pathlib
import re

import numpy as np

from ttnn_flashdecode.reference import pcc

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs_and_matches_the_reference():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has no Python example"
    namespace: dict = {}
    exec(blocks[0], namespace)  # noqa: S102 - our own README
    out, ref = namespace["out"], namespace["ref"]
    assert out.shape == ref.shape == (1, 1, 2, 16 * 128)
    assert pcc(np.asarray(out, np.float64), ref) >= 0.9999
