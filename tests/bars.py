"""The accuracy bar the attention tests share (tests/test_attention.py's, where it is justified):
PCC >= 0.9999 and relative L2 <= 1e-2 against float64 on the same bfloat16 (or dequantised
block-float) inputs, with the output rounded once to bfloat16."""

from __future__ import annotations

import numpy as np

from ttnn_flashdecode.op.operation import to_numpy
from ttnn_flashdecode.op.reference import pcc, relative_l2

MIN_PCC = 0.9999
MAX_RELATIVE_L2 = 1e-2


def assert_close(out, want, label: str) -> np.ndarray:
    """``out`` (numpy or host ttnn.Tensor) finite and within the bar of ``want``; returns it as float64."""
    got = np.asarray(to_numpy(out), dtype=np.float64)
    assert np.isfinite(got).all(), f"{label}: a non-finite output (poison reached it?)"
    figures = pcc(got, want), relative_l2(got, want)
    assert figures[0] >= MIN_PCC and figures[1] <= MAX_RELATIVE_L2, f"{label}: PCC {figures[0]:.6f}, rel-L2 {figures[1]:.2e}"
    return got


WORK_ROW_READS = 3
"""DRAM reads of a core's work row per launch: the reader's own copy, the copy it hands compute,
and the writer's (``attention_dataflow.hpp`` ``read_work_row``)."""


def work_row_bytes(cores: int, requests_per_core: int = 1) -> int:
    """DRAM bytes ``cores`` cores read for their work rows (``protocol.work_row_words``, 4 bytes a word)."""
    from ttnn_flashdecode.op import protocol

    return cores * WORK_ROW_READS * 4 * protocol.work_row_words(requests_per_core)
