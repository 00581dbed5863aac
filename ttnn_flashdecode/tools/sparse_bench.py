"""``python -m ttnn_flashdecode bench --sparse``: DeepSeek-V3.2's sparse MLA decode (issue 37), top-k
latent rows per user against the dense MLA call over the whole context.

**Measured** (:func:`measure`): one user, 128 Q heads on a bfloat16 (or bfloat8_b) 576-column
latent (V its first 512), ``k`` listed rows (unsorted, spread over the whole context) out of
``context``, run through :func:`ttnn_flashdecode.attention` with ``sparse_indices=`` on the
emulator. Bytes are the emulator's exact DRAM counts (reads + writes). The minimum: the ``k`` listed
latent ROWS once (not their tiles: 1152 bytes each in bfloat16; in bfloat8_b 576 data bytes and
the row's 36 exponent bytes, two per dim tile), Q once, the 512-wide output once. bfloat8_b's
excess is the exponents' read granularity: a row's two exponent bytes per dim tile come in one
32-byte read (Wormhole's DRAM read alignment; the emulator runs Wormhole's path), and a 16-byte
data row whose virtual row cannot be paired with its parity lands through a 32-byte read.

**Modelled** (:func:`model`; nothing here ran on a card): per call ``max(DRAM time, the busiest
core's FPU time)`` as ``bench --mla`` models the dense call (:mod:`~ttnn_flashdecode.tools.mla_bench`:
n150's 288 GB/s, 64 cycles a matmul tile at HiFi4, 1 GHz), over the ``ceil(k / 32)`` virtual
position tiles instead of the context's, split as the planner splits them (2 tiles a slice, at most
the grid), the bytes the sparse minimum plus the index list once (slices 1.. copy it from their
parent in the combine tree, as Q). The gather's NoC requests are counted too: one per
32-byte face row, ``2 * 18`` per listed row, at :data:`NOC_REQUESTS_PER_US` per core (an assumed
issue rate, not a measured one), which is the term that may dominate on a card.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Sequence

import numpy as np

from ttnn_flashdecode.tools import mla_bench

__all__ = ["SparseRow", "SparseModelRow", "measure", "model", "min_bytes", "format_rows", "legend", "report", "TOP_K",
           "NOC_REQUESTS_PER_US"]

TOP_K = 2048
"""DeepSeek-V3.2's lightning indexer keeps 2048 latent rows per query."""
NOC_REQUESTS_PER_US = 200
"""Assumed NoC read requests one reader core issues per microsecond (5 ns each): an ASSUMPTION for the
model, not a figure measured on a card."""
ROW_BYTES = {"bfloat16": mla_bench.LATENT * 2, "bfloat8_b": mla_bench.LATENT + 2 * (mla_bench.LATENT // 32)}
"""A latent row's bytes in the cache: bfloat16 its 576 values; bfloat8_b a byte per value and its two
face rows' exponent bytes per dim tile."""


@dataclasses.dataclass(frozen=True)
class SparseRow:
    """One emulator run: bytes are exact counts."""

    k: int
    context: int
    cores: int
    dram_read_bytes: int
    dram_write_bytes: int
    min_bytes: int
    dtype: str = "bfloat16"

    @property
    def ratio(self) -> float:
        return (self.dram_read_bytes + self.dram_write_bytes) / self.min_bytes


def min_bytes(k: int, heads: int = mla_bench.HEADS, batch: int = 1, dtype: str = "bfloat16") -> int:
    """The least DRAM traffic of a sparse MLA call: ``k`` latent rows once (:data:`ROW_BYTES` of the
    cache's ``dtype``), Q once, the output once."""
    return batch * (k * ROW_BYTES[dtype] + heads * mla_bench.LATENT * 2 + heads * mla_bench.VALUE * 2)


def measure(k: int = TOP_K, context: int = 32768, heads: int = mla_bench.HEADS, seed: int = 0,
            dtype: str = "bfloat16") -> SparseRow:
    """One emulated sparse call (see the module docstring); ``dtype`` the latent's, ``"bfloat16"`` or
    ``"bfloat8_b"`` (a host ttnn.Tensor packed by ttnn)."""
    from ttnn_flashdecode import attention, last_report

    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((1, 1, context, mla_bench.LATENT)).astype(np.float32)
    if dtype != "bfloat16":  # ttnn's own packing, which needs tt-metal's context (mocked without a card)
        import ttnn

        from ttnn_flashdecode import ensure_host_context

        ensure_host_context()
        latent = ttnn.Tensor(latent, getattr(ttnn, dtype), layout=ttnn.TILE_LAYOUT)
    q = rng.standard_normal((1, 1, heads, mla_bench.LATENT)).astype(np.float32)
    indices = rng.permutation(context)[:k].astype(np.int32)[None]
    attention(q, latent, None, cur_pos=[context - 1], q_layout="heads", head_dim_v=mla_bench.VALUE,
              sparse_indices=indices)
    report = last_report()
    return SparseRow(k, context, sum(report.plan.split_counts), report.total_dram_read_bytes,
                     report.total_dram_write_bytes, min_bytes(k, heads, dtype=dtype), dtype)


@dataclasses.dataclass(frozen=True)
class SparseModelRow:
    """One modelled call, sparse against dense (seconds)."""

    context: int
    k: int
    dense_s: float
    sparse_dram_s: float
    sparse_fpu_s: float
    sparse_noc_s: float

    @property
    def sparse_s(self) -> float:
        return max(self.sparse_dram_s, self.sparse_fpu_s, self.sparse_noc_s)


def model(contexts: Sequence[int] = (32768, 131072), k: int = TOP_K, heads: int = mla_bench.HEADS,
          cores: int = mla_bench.GRID_CORES) -> list[SparseModelRow]:
    """Batch 1, bfloat16: the dense MLA call as ``bench --mla`` models it split over the grid, and
    the sparse call over ``ceil(k / 32)`` virtual tiles, two a slice as the planner cuts them (measured:
    32 cores at k = 2048)."""
    row_tiles = -(-heads // 32)
    per_tile = row_tiles * 2 * (mla_bench.LATENT // 32) * mla_bench.FPU_CYCLES_PER_TILE
    rows = []
    for context in contexts:
        dense = next(r for r in mla_bench.model((context,), (1,), ("bfloat16",), heads) if r.mode == "split")
        tiles = -(-k // 32)
        slices = max(1, min(cores, tiles // 2))
        per_core_tiles = -(-tiles // slices)
        dram = min_bytes(k, heads) + 4 * k
        noc = per_core_tiles * 32 * 2 * (mla_bench.LATENT // 32) / (NOC_REQUESTS_PER_US * 1e6)
        rows.append(SparseModelRow(context, k, dense.time_s, dram / (mla_bench.DRAM_GBPS * 1e9),
                                   per_core_tiles * per_tile / (mla_bench.CLOCK_GHZ * 1e9), noc))
    return rows


def format_rows(measured: Sequence[SparseRow], modelled: Sequence[SparseModelRow]) -> str:
    lines = [f"{'cache':>9} {'k':>5} {'context':>7} {'cores':>5} {'read':>12} {'written':>10} {'minimum':>12} "
             f"{'ratio':>6}"]
    for r in measured:
        lines.append(f"{r.dtype:>9} {r.k:>5} {r.context:>7} {r.cores:>5} {r.dram_read_bytes:>12} "
                     f"{r.dram_write_bytes:>10} {r.min_bytes:>12} {r.ratio:>6.3f}")
    lines.append("MEASURED above (emulator DRAM bytes); MODELLED below (no card):")
    lines.append(f"{'context':>7} {'k':>5} {'dense us':>9} {'sparse us':>9} {'dram':>7} {'fpu':>7} {'noc':>7} {'speedup':>7}")
    for r in modelled:
        lines.append(f"{r.context:>7} {r.k:>5} {r.dense_s * 1e6:>9.1f} {r.sparse_s * 1e6:>9.1f} "
                     f"{r.sparse_dram_s * 1e6:>7.1f} {r.sparse_fpu_s * 1e6:>7.1f} {r.sparse_noc_s * 1e6:>7.1f} "
                     f"{r.dense_s / r.sparse_s:>6.1f}x")
    return "\n".join(lines)


def legend() -> str:
    return ("MEASURED: emulator DRAM bytes, one user, 128 heads; ratio = (read + written) / minimum (the k listed "
            "latent rows once, Q once, the 512-wide output once; bfloat8_b rows: data and exponent bytes, the "
            "exponents read 32 bytes at a time). MODELLED (bfloat16): max(DRAM, FPU, NoC requests) per call "
            f"on n150, the NoC term at an ASSUMED {NOC_REQUESTS_PER_US} face-row reads per us per core; the dense "
            "row is bench --mla's split call. Nothing here ran on a card.")


def report(json_path: str | None, started: float) -> int:
    """``bench --sparse``: the measured rows (k = 2048 of 32k, bfloat16 and bfloat8_b) and the modelled
    rows (32k, 128k), printed (and written to ``json_path`` as JSON); returns 0."""
    measured = [measure(), measure(dtype="bfloat8_b")]
    modelled = model()
    print("ttnn_flashdecode bench --sparse -- DeepSeek-V3.2 sparse MLA decode: bytes MEASURED on the emulator; "
          "device times MODELLED, NOT MEASURED")
    print(format_rows(measured, modelled))
    print(legend())
    if json_path:
        with open(json_path, "w") as handle:
            json.dump({"note": legend(), "measured": [dataclasses.asdict(r) | {"ratio": r.ratio} for r in measured],
                       "modelled": [dataclasses.asdict(r) | {"sparse_s": r.sparse_s} for r in modelled]}, handle, indent=1)
        print(f"wrote {json_path}")
    print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0
