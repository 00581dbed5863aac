"""Device model v2: the cards, their DRAM and the DRAM request rate (issue 35, item 1).

**Modelled, not measured.** No Tenstorrent card exists here. Every constant below cites where it
comes from; figures marked [U] are unverified assumptions, said so where they are used.

Sources
-------
- **#55898** (tt-metal issue, "Blackhole DRAM endpoints take one read request per ~16 cycles per
  NoC"): a Blackhole DRAM NoC endpoint accepts one read request per ~16.4 cycles (12 ns) per NoC,
  whatever the request size; one NoC reaches 62 % of channel peak with 576 B (bfloat4_b) pages,
  91 % with 1088 B (bfloat8_b) and 98 % with 2 KB (bfloat16); the same endpoint read on both NoCs
  at once goes 62 % -> 95 % at 576 B. Wormhole takes one request per ~6.8 cycles (bfloat4_b at 92 %).
- **#55767** (tt-metal tracker): the p100a measured there runs at 1.35 GHz with 110 worker cores.
- **#57161** (tt-metal issue): p100a DRAM peak 448 GB/s (its effective GB/s are quoted against it).
- TT_FACTS §8 (this project's docs/reference): n150 288 GB/s at 1.0 GHz, p150 512 GB/s at 1.35 GHz.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ttnn_flashdecode.tools import cost_model as cm

__all__ = ["DeviceV2", "DEVICES_V2", "device_v2", "dram_efficiency", "REQUEST_CYCLES", "ONE_NOC_EFFICIENCY", "READ_NOCS",
           "BOTH_NOC_EFFICIENCY_576", "WORMHOLE_ONE_NOC_576"]

REQUEST_CYCLES = {"blackhole": 16.4, "wormhole_b0": 6.8}
"""Cycles between read requests a DRAM endpoint accepts per NoC (tt-metal #55898)."""

ONE_NOC_EFFICIENCY = ((576, 0.62), (1088, 0.91), (2048, 0.98))
"""Blackhole, one NoC: fraction of channel peak reached at each page size in bytes (tt-metal #55898)."""

BOTH_NOC_EFFICIENCY_576 = 0.95
"""Blackhole, the same endpoint read on both NoCs at 576 B pages (tt-metal #55898)."""

WORMHOLE_ONE_NOC_576 = 0.92
"""Wormhole, one NoC, 576 B pages (tt-metal #55898: "bfp4 at 92 %")."""


READ_NOCS = {
    "K tiles": "both NoCs: alternate pages (attention_dataflow.hpp kv_read_noc; KernelWork.both_nocs)",
    "V tiles": "both NoCs, as K (tt-metal PR #57170 instead reads V on the other NoC)",
    "Q rows, positions, work row, page table": "reader NoC",
    "split-K copies (Q/constants, max, partials; L1 to L1)": "reader NoC",
    "output rows (writes)": "writer NoC",
}
"""Which NoC each of our op's transfers uses. ``op/data_movement.py`` builds the
reader on RISCV_1 with NoC 0 and the writer on RISCV_0 with NoC 1 (the NoCs of tt-metal's
``Reader/WriterDataMovementConfig``), both in ``DM_DYNAMIC_NOC``: the reader issues one
``noc_async_read`` per K/V tile (``attention_reader.cpp``), alternate pages on alternate NoCs, so a
core's K/V requests split over both NoCs' per-endpoint rates (#55898; emulator-measured 49-50% per
NoC, ``tests/test_both_nocs.py``); ttnn's decode reader (#57161) uses one NoC. Bytes per
request: one K/V tile (2048 / 1088 / 576 B for bfloat16 / bfloat8_b / bfloat4_b); a paged cache of
16-position blocks reads half tiles (bfloat16 only: two 1 KB requests a tile)."""


def dram_efficiency(arch: str, page_bytes: int, nocs: int = 1) -> float:
    """Fraction of chip DRAM peak that reads of ``page_bytes`` pages reach on ``nocs`` NoCs.

    Blackhole, one NoC: #55898's three measured points, linear in between, flat outside. Both
    NoCs: the request interval halves, so a page reads like one of twice its size on one NoC,
    except at 576 B where #55898 measured 0.95 directly (the interpolated 1152 B point would give
    0.91; the measured figure is used). Wormhole: its request interval is 6.8 / 16.4 of
    Blackhole's, so a page reads like a Blackhole page ``16.4 / 6.8`` times larger; at 576 B that
    gives 0.98 against the 0.92 #55898 measured, so the measured 0.92 caps 576 B pages on one NoC.
    """
    sizes, fractions = zip(*ONE_NOC_EFFICIENCY)
    scale = REQUEST_CYCLES["blackhole"] / REQUEST_CYCLES[arch] * nocs
    eff = float(np.interp(page_bytes * scale, sizes, fractions))
    if arch == "blackhole" and nocs >= 2 and page_bytes <= ONE_NOC_EFFICIENCY[0][0]:
        eff = BOTH_NOC_EFFICIENCY_576
    if arch == "wormhole_b0" and nocs == 1 and page_bytes <= ONE_NOC_EFFICIENCY[0][0]:
        eff = WORMHOLE_ONE_NOC_576
    return eff


@dataclasses.dataclass(frozen=True)
class DeviceV2:
    """A card as model v2 sees it: v1's :class:`cost_model.Device` plus the request rate.

    Attributes:
        base: the v1 device (arch, clock, DRAM peak, grid, NoC width) the schedules are planned on.
        note: where its figures come from.
    """

    base: cm.Device
    note: str

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def arch(self) -> str:
        return self.base.arch

    @property
    def clock_hz(self) -> float:
        return self.base.clock_ghz * 1e9

    @property
    def request_cycles(self) -> float:
        """Cycles per read request per NoC per DRAM endpoint (#55898)."""
        return REQUEST_CYCLES[self.arch]

    def effective(self, page_bytes: int, nocs: int = 1) -> cm.Device:
        """The v1 device with its DRAM bandwidth cut to what ``page_bytes`` pages on ``nocs`` NoCs reach."""
        eff = dram_efficiency(self.arch, page_bytes, nocs)
        return dataclasses.replace(self.base, dram_gbps=self.base.dram_gbps * eff)


def _make(name: str) -> DeviceV2:
    if name == "n150":
        return DeviceV2(cm.device("n150"), "Wormhole B0, 288 GB/s, 1.0 GHz (TT_FACTS §8); 8x8 grid (core descriptor)")
    if name == "n300":
        base = dataclasses.replace(cm.device("n150"), name="n300")
        return DeviceV2(base, "one of its two Wormhole B0 chips: 288 GB/s of the card's 576, 1.0 GHz (TT_FACTS §8); "
                              "grid as n150's [U]")
    if name == "p100a":
        base = dataclasses.replace(cm.device("p150", cores=110), name="p100a", dram_gbps=448.0)
        return DeviceV2(base, "Blackhole, 448 GB/s (tt-metal #57161), 1.35 GHz and 110 worker cores (tt-metal #55767)")
    if name == "p150":
        return DeviceV2(cm.device("p150"), "Blackhole, 512 GB/s, 1.35 GHz (TT_FACTS §8); 13x10 grid (core descriptor)")
    raise ValueError(f"device_v2: expected one of {DEVICES_V2}, got {name!r}")


DEVICES_V2 = ("n150", "n300", "p100a", "p150")
"""Devices model v2 knows."""


def device_v2(name: str) -> DeviceV2:
    """The :class:`DeviceV2` ``name`` (one of :data:`DEVICES_V2`)."""
    return _make(name)
