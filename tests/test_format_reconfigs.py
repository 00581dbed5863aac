"""Data-format reconfigurations per K/V block (issue 35 item 3, "fewer data-format reconfigs per
block"), measured on the emulator.

The compute kernel remembers the CB each unit (SrcA, SrcB, the packer) was last set for
(``kernels/attention_compute_base.hpp`` ``formats``): a unit already on that CB takes no call, and
the rest take the LLK's conditional reconfig (old CB, new CB), which reprograms the unit only when
the formats differ. The emulator counts both the API calls (``CoreStats.calls``) and the
reconfigurations that reprogram a unit (``CoreStats.format_reconfigs``: a call without an old
operand always does; a conditional one when the formats differ), and it checks every unpack and
pack against the unit's format, so a reconfiguration wrongly skipped fails the run.

Per block (the difference between runs of 4 and 2 blocks of 4 position tiles, GQA 8, d128, bfloat16
K/V, one core), before this change every step reconfigured both unpackers and the packer
unconditionally: :data:`BEFORE_REPROGRAMMED` unit reprogrammings and :data:`BEFORE_CALLS` API calls a
block (HiFi4, fp32 DST). Now a unit is reprogrammed only where a step's CB format differs from the
last one's: none a block with a bfloat16 DST (every CB bfloat16), and with fp32 DST (float32
statistics CBs between bfloat16 scores and probabilities) those format changes only.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import ttnn

from bars import assert_close, run_quiet
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op.reference import attention_reference
from ttnn_flashdecode.op.compute_options import ComputeOptions

BEFORE_REPROGRAMMED = {"HiFi4 fp32 DST": 32, "HiFi2 fp32 DST": 41, "HiFi4 bf16 DST": 31}
"""Unit reprogrammings per block before this change (this emulator on commit 895fb9a's kernel)."""
BEFORE_CALLS = {"HiFi4 fp32 DST": 23, "HiFi2 fp32 DST": 32, "HiFi4 bf16 DST": 22}
"""reconfig_data_format* / pack_reconfig_data_format calls per block before this change."""
RECONFIG_APIS = ("reconfig_data_format", "reconfig_data_format_srca", "reconfig_data_format_srcb",
                 "pack_reconfig_data_format")
CONFIGS = {"HiFi4 fp32 DST": ComputeOptions(), "HiFi2 fp32 DST": ComputeOptions(math_fidelity=ttnn.MathFidelity.HiFi2),
           "HiFi4 bf16 DST": ComputeOptions(fp32_dest_acc_en=False)}
# Unit reprogrammings a block with float32 statistics: each unit goes from a bfloat16 CB to a float32
# one twice (attend_block's order: S = QS . K^T, the max, C, P, P . V, L, the rescale; SrcA K / S,
# M, S / V / the scaler, C; SrcB QS / the scaler, M, P, L / O; the packer S, M / C, P, the state).
FP32_STATS_REPROGRAMMED = {"srca": 4, "srcb": 4, "pack": 4}


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16)


def _run(blocks: int, compute):
    rng = np.random.default_rng(blocks)
    capacity = blocks * 4 * 32
    q = _bf16(rng.standard_normal((1, 1, 1, 8 * 128)))
    k, v = (_bf16(rng.standard_normal((1, 1, capacity, 128))) for _ in range(2))
    out = run_quiet(attention, q, k, v, cur_pos=[capacity - 1], compute_kernel_config=compute, split=1, block_tiles=4)
    assert_close(out, attention_reference(q, k, v, cur_pos=[capacity - 1]), f"{blocks} blocks")
    totals = last_report().totals
    return sum(totals.calls.get(api, 0) for api in RECONFIG_APIS), totals.format_reconfigs


@pytest.mark.parametrize("config", list(CONFIGS))
def test_reconfigs_per_block_only_where_formats_change(config, record_property):
    """Per block: no unit reprogrammed when every CB is bfloat16; with float32 statistics only
    where a step's format differs from the last step's; no more calls than before, fewer reprogrammings."""
    calls_2, units_2 = _run(2, CONFIGS[config])
    calls_4, units_4 = _run(4, CONFIGS[config])
    calls = (calls_4 - calls_2) / 2
    per_unit = {unit: (units_4.get(unit, 0) - units_2.get(unit, 0)) / 2 for unit in ("srca", "srcb", "pack")}
    reprogrammed = sum(per_unit.values())
    record_property("figure", f"{config}: per block {calls:.1f} reconfig calls (before {BEFORE_CALLS[config]}), "
                              f"{reprogrammed:.1f} unit reprogrammings {per_unit} (before {BEFORE_REPROGRAMMED[config]})")
    if config == "HiFi4 bf16 DST":
        assert reprogrammed == 0
    else:
        assert per_unit == FP32_STATS_REPROGRAMMED
    assert calls <= BEFORE_CALLS[config] and reprogrammed < BEFORE_REPROGRAMMED[config]
