"""docs/request_kinds.md: each request kind's example runs as written and matches the reference."""

import pathlib
import re

import numpy as np
import pytest

from ttnn_flashdecode.op.reference import pcc, relative_l2

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "request_kinds.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_request_kinds_doc_has_one_example_per_kind():
    assert len(BLOCKS) == 3
    assert "cur_pos=[5, 200])" in BLOCKS[0] and "rows=4" in BLOCKS[1] and "chunk_start=45" in BLOCKS[2]


@pytest.mark.parametrize("index, rows", [(0, 2), (1, 8), (2, 20)], ids=["decode", "rows", "chunk"])
def test_request_kinds_doc_example_runs_and_matches_the_reference(index, rows):
    namespace: dict = {}
    exec(BLOCKS[index], namespace)  # noqa: S102 - our own documentation
    out, ref = namespace["out"], namespace["ref"]
    assert out.shape == ref.shape == (1, 1, rows, 8 * 64)
    assert pcc(np.asarray(out, np.float64), ref) >= 0.9999
    assert relative_l2(np.asarray(out, np.float64), ref) <= 1e-2
