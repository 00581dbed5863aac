"""``python -m ttnn_flashdecode bench --mla``: DeepSeek-V3's MLA decode (issue 22): DRAM bytes MEASURED
on the emulator against the minimum, and a MODELLED bound on device time that says where the call
turns compute-bound.

**Measured** (:func:`measure`): one user, DeepSeek-V3's per-device heads (16, 64 or 128 Q heads on one
latent "head" of 576 columns, V its first 512), the latent bfloat16, run through
:func:`ttnn_flashdecode.attention` (``head_dim_v=512``, the latent as K and V: each block read once,
``attention_protocol.hpp`` "Values from keys") on the emulator, unsplit (``split=1``: one request serves
all the group's Q row tiles) and as the planner splits it. Bytes are the emulator's exact DRAM counts
(reads + writes). The minimum: every live latent tile once, Q once, the ``head_dim_v``-wide output once.

**Modelled** (:func:`model`; nothing here ran on a card): per call ``max(DRAM bytes / chip bandwidth,
the busiest core's FPU time)``:

* DRAM: n150's 288 GB/s (TT_FACTS §8); bytes as measured above, scaled: the latent is read once,
  unsplit or split (the group is one request of every Q row tile either way, its combine a round
  per row tile: what the emulator counts), plus Q and the output.
* FPU: every 32x32x32 matmul tile costs 64 cycles at HiFi4, the default fidelity (TT_FACTS §8:
  ``tech_reports/matrix_engine/matrix_engine.md``, GEMM_FLOPS.md), at 1.0 GHz (n150). Per live
  position tile a row tile takes ``dim_tiles`` tiles for Q.K^T and ``dim_tiles`` for P.V (the
  op multiplies the whole latent and cuts the output, ``op/latent.py``). Only the matrix unit is
  counted (no exp, reductions, unpack or pack), so the FPU time is a LOWER bound: a row that the
  model calls DRAM-bound may still be compute-bound on a card; one it calls compute-bound is.
* Cores: unsplit, one per user (``batch`` busy cores, at most the 64 of the grid); split, the
  planner's slices, each user's request (all its row tiles) cut over ``64 // batch`` cores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ttnn_flashdecode.tools import cost_model as cm

__all__ = ["MeasuredRow", "ModelledRow", "measure", "model", "format_measured", "format_modelled", "legend",
           "LATENT", "VALUE", "HEADS", "FPU_CYCLES_PER_TILE", "GRID_CORES", "DRAM_GBPS", "CLOCK_GHZ"]

LATENT, VALUE, HEADS = 576, 512, 128
"""DeepSeek-V3 per device: the latent's 576 columns (kv_lora_rank 512 + RoPE 64), V's 512, 128 Q heads."""
FPU_CYCLES_PER_TILE = 64
"""Cycles of one 32x32x32 matmul tile at HiFi4 (TT_FACTS §8, tt-metal matrix_engine.md)."""
_N150 = cm.device("n150")
GRID_CORES, DRAM_GBPS, CLOCK_GHZ = _N150.cores, _N150.dram_gbps, _N150.clock_ghz
"""n150 (Wormhole B0): worker cores, DRAM GB/s, AI clock, as the cost model holds them (TT_FACTS §8)."""


@dataclasses.dataclass(frozen=True)
class MeasuredRow:
    """One emulator run: bytes are exact counts."""

    heads: int
    context: int
    mode: str  # "unsplit" or "planner"
    cores: int
    dram_read_bytes: int
    dram_write_bytes: int
    min_bytes: int

    @property
    def ratio(self) -> float:
        return (self.dram_read_bytes + self.dram_write_bytes) / self.min_bytes


def min_bytes(heads: int, context: int, batch: int = 1, kv_dtype: str = "bfloat16") -> int:
    """The least DRAM traffic of an MLA decode call: each live latent tile once, Q once, and the
    ``head_dim_v``-wide output once (bfloat16; a tile's padding rows are not data)."""
    latent = -(-context // 32) * (LATENT // 32) * cm.kv_tile_bytes(kv_dtype)
    return batch * (latent + heads * LATENT * 2 + heads * VALUE * 2)


def measure(heads_list: Sequence[int] = (16, 64, 128), context: int = 1024, log=None) -> list[MeasuredRow]:
    """Run the emulator once per (heads, mode) and count DRAM bytes (see the module docstring)."""
    from ttnn_flashdecode import attention, last_report

    rng = np.random.default_rng(0)
    latent = rng.standard_normal((1, 1, context, LATENT)).astype(np.float32)
    rows = []
    for heads in heads_list:
        q = rng.standard_normal((1, 1, heads, LATENT)).astype(np.float32)
        for mode, split in (("unsplit", 1), ("planner", None)):
            if log:
                log(f"emulating {heads} heads, {context} positions, {mode}")
            attention(q, latent, None, cur_pos=[context - 1], q_layout="heads", head_dim_v=VALUE, split=split)
            report = last_report()
            rows.append(MeasuredRow(heads, context, mode, sum(report.plan.split_counts), report.total_dram_read_bytes,
                                    report.total_dram_write_bytes, min_bytes(heads, context)))
    return rows


@dataclasses.dataclass(frozen=True)
class ModelledRow:
    """One modelled call (seconds)."""

    context: int
    batch: int
    kv_dtype: str
    mode: str
    cores: int
    latent_reads: int
    dram_bytes: int
    dram_s: float
    fpu_s: float

    @property
    def bound(self) -> str:
        return "compute" if self.fpu_s > self.dram_s else "DRAM"

    @property
    def time_s(self) -> float:
        return max(self.dram_s, self.fpu_s)


def model(contexts: Sequence[int] = (1024, 8192, 32768), batches: Sequence[int] = (1, 32),
          kv_dtypes: Sequence[str] = ("bfloat16", "bfloat8_b"), heads: int = HEADS) -> list[ModelledRow]:
    """DeepSeek-V3 (``heads`` Q heads per device) unsplit and split (see the module docstring)."""
    row_tiles = -(-heads // 32)
    rows = []
    for context in contexts:
        tiles = -(-context // 32)
        for batch in batches:
            for kv_dtype in kv_dtypes:
                base = min_bytes(heads, context, batch, kv_dtype)
                latent = batch * tiles * (LATENT // 32) * cm.kv_tile_bytes(kv_dtype)
                per_position_tile = row_tiles * 2 * (LATENT // 32) * FPU_CYCLES_PER_TILE  # cycles, one row tile each
                plans = [("unsplit", min(batch, GRID_CORES), 1, tiles * per_position_tile * -(-batch // GRID_CORES))]
                slices = GRID_CORES // batch
                if slices > 1:  # each user's request of every row tile over `slices` cores: the latent read once
                    per_core = -(-tiles // slices) * per_position_tile
                    plans.append(("split", batch * slices, 1, per_core))
                for mode, cores, reads, cycles in plans:
                    dram = base + (reads - 1) * latent
                    rows.append(ModelledRow(context, batch, kv_dtype, mode, cores, reads, dram,
                                            dram / (DRAM_GBPS * 1e9), cycles / (CLOCK_GHZ * 1e9)))
    return rows


def format_measured(rows: Sequence[MeasuredRow]) -> str:
    lines = [f"{'heads':>5} {'context':>7} {'mode':>8} {'cores':>5} {'read':>10} {'written':>10} {'minimum':>10} {'ratio':>6}"]
    for r in rows:
        lines.append(f"{r.heads:>5} {r.context:>7} {r.mode:>8} {r.cores:>5} {cm.format_bytes(r.dram_read_bytes):>10} "
                     f"{cm.format_bytes(r.dram_write_bytes):>10} {cm.format_bytes(r.min_bytes):>10} {r.ratio:>5.3f}x")
    return "\n".join(lines)


def format_modelled(rows: Sequence[ModelledRow]) -> str:
    lines = [f"{'context':>7} {'batch':>5} {'kv':>4} {'mode':>7} {'cores':>5} {'reads':>5} {'DRAM':>10} "
             f"{'DRAM us':>8} {'FPU us':>8} {'bound':>7}"]
    for r in rows:
        lines.append(f"{r.context:>7} {r.batch:>5} {cm.KV_SHORT[r.kv_dtype]:>4} {r.mode:>7} {r.cores:>5} {r.latent_reads:>5} "
                     f"{cm.format_bytes(r.dram_bytes):>10} {r.dram_s * 1e6:>8.1f} {r.fpu_s * 1e6:>8.1f} {r.bound:>7}")
    return "\n".join(lines)


def legend() -> str:
    return ("MEASURED: emulator DRAM bytes, one user; ratio = (read + written) / minimum (latent once, Q once, the "
            "512-wide output once).\nMODELLED (n150, not measured): DRAM us = bytes / 288 GB/s; FPU us = the busiest "
            "core's matmul tiles x 64 cycles (HiFi4) at 1 GHz, a lower bound (no SFPU, unpack or pack); "
            "reads = times the latent is read.")
