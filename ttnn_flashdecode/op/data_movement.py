"""The data-movement kernels' configs: which processor and NoC each runs on, in which NoC mode.

The reader issues its K/V reads on both NoCs (tt-metal #55898: a DRAM endpoint accepts about one
read request per 16.4 cycles per NoC on Blackhole, 6.8 on Wormhole, so 1088- and 576-byte pages on
one NoC reach only part of a channel; both NoCs reach ~95%). Only ``DM_DYNAMIC_NOC`` lets a kernel
issue on either NoC, and tt-metal requires one NoC mode for both data-movement kernels of a core
("KernelGroup must have the same noc mode"), so the writer runs in it too. Each keeps the NoC of
ttnn's ``Reader/WriterConfigDescriptor`` (tt-metal's preferred DRAM read / write NoCs) as its own:
everything but the K/V reads stays there (``attention_dataflow.hpp`` ``kv_read_noc``).
"""

from __future__ import annotations

import ttnn

__all__ = ["data_movement_config"]


def data_movement_config(role: str) -> ttnn.DataMovementConfigDescriptor:
    """The reader's (``"reader"``: RISCV_1, NoC 0) or the writer's (``"writer"``: RISCV_0, NoC 1)
    config, both ``DM_DYNAMIC_NOC`` (module docstring)."""
    reader = role == "reader"
    return ttnn.DataMovementConfigDescriptor(
        processor=ttnn.DataMovementProcessor.RISCV_1 if reader else ttnn.DataMovementProcessor.RISCV_0,
        noc=ttnn.NOC.NOC_0 if reader else ttnn.NOC.NOC_1,
        noc_mode=ttnn.NOC_MODE.DM_DYNAMIC_NOC,
    )
