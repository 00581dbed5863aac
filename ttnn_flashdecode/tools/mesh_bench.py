"""``python -m ttnn_flashdecode bench --mesh``: MODELLED time and DRAM bytes per device of one decode
attention call (one layer, one token) on a mesh, tensor parallel and context parallel (issue 23, item 4).

Llama-3.1-70B's attention (64 Q / 8 KV heads, head_dim 128) at batch 1 and 32:

* **TP8 T3K**: tensor parallel on a T3K (1x8): each device 8 Q heads on 1 KV head, the whole context.
  No collective in the attention (each device's heads are complete; the output stays sharded like Q).
* **CP8 T3K**: context parallel on a T3K: each device all 64/8 heads on 1/8 of the context; then the
  merge (:func:`ttnn_flashdecode.context_parallel_attention`).
* **CP32**: context parallel over 32 devices (a Galaxy's chips as one line): 1/32 of the context each.
* **TP8xCP4 Galaxy**: an 8x4 Galaxy, heads over the 8 (1 KV head a device) and the context over the 4.

Per row: the attention on ONE device (:mod:`.cost_model`'s Wormhole chip: the n150 model, 8x8 grid as
the mock T3K reports, 288 GB/s DRAM, 1.0 GHz; a T3K / Galaxy chip is the same Wormhole B0), and next
to it the merge: the all-gather's bytes and time over ethernet, and the merge's ttnn ops.

Every time here is MODELLED, nothing is measured (no card, no mesh). The figures and their sources:

* :data:`ETH_LINK_GBPS` = 12.5 GB/s per ethernet link per direction (Wormhole: 100 Gb/s per link per
  direction; tt-metal ``tech_reports/EthernetMultichip/BasicEthernetGuide.md``, "12.5 GB/s per direction
  per link"), one link used (the worst device of a line receives every partial through one link).
* :data:`ETH_HOP_S` = 1 us per hop (same report: ~650 ns per hop for single-flit ring pings on an
  8-chip ring, "roughly a 1us per hop latency" at 1 KB packets; the 1 KB figure taken).
* The all-gather along a line of ``D`` devices: ``(D - 1)`` hops of latency plus ``(D - 1)`` partials
  serialised through one link (the line's end device): ``(D-1) * ETH_HOP_S + (D-1) * P / ETH_LINK``; ``P``
  = one device's partial, its output tile-padded bfloat16 (rows padded to 32) plus its LSE (float32
  row-major).
* The merge: :func:`merge_op_count` ttnn ops (counted from ``op/merge.py`` and ``op/context_parallel.py``:
  they grow with ``D``), each :data:`OP_LAUNCH_S` = 2 us [U] (an assumed per-op device dispatch cost in
  a captured trace: NOT sourced, shown separately so it can be rescaled), plus their DRAM traffic
  (:func:`merge_dram_bytes`, each op reading its inputs and writing its output in DRAM) at the chip's
  DRAM bandwidth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ttnn_flashdecode.tools import cost_model as cm

__all__ = ["LAYOUTS", "MeshRow", "run", "format_table", "merge_op_count", "merge_dram_bytes", "gather_bytes",
           "ETH_LINK_GBPS", "ETH_HOP_S", "OP_LAUNCH_S", "LAYERS"]

ETH_LINK_GBPS = 12.5
"""Wormhole ethernet, GB/s per link per direction (tt-metal BasicEthernetGuide.md)."""

ETH_HOP_S = 1.0e-6
"""Latency per ethernet hop, seconds (tt-metal BasicEthernetGuide.md: ~1 us at 1 KB packets)."""

OP_LAUNCH_S = 2.0e-6
"""[U] Assumed device cost of one ttnn op of the merge in a captured trace (not sourced)."""

LAYERS = 80
"""Llama-3.1-70B's layers: the per-token column is one call times this."""

HEAD_DIM, Q_HEADS, KV_HEADS = 128, 64, 8


@dataclasses.dataclass(frozen=True)
class Layout:
    """How Llama-3.1-70B's attention is spread: ``tp`` devices over the KV heads, ``cp`` over the context."""

    name: str
    tp: int
    cp: int

    @property
    def devices(self) -> int:
        return self.tp * self.cp


LAYOUTS = (Layout("TP8 T3K", 8, 1), Layout("CP8 T3K", 1, 8), Layout("CP32", 1, 32),
           Layout("TP8xCP4 Galaxy", 8, 4))
"""The issue's layouts: TP on T3K; CP at 8 and 32 devices; and the Galaxy's 2D TP x CP."""

CONTEXTS = {"TP8 T3K": (8192, 32768, 131072)}
"""Contexts per layout; the others run the issue's 128k and 1M."""
CP_CONTEXTS = (131072, 1048576)


@dataclasses.dataclass(frozen=True)
class MeshRow:
    """One modelled row (seconds, bytes; per device)."""

    layout: str
    devices: int
    context: int
    batch: int
    kv_dtype: str
    q_heads: int  # per device
    kv_heads: int  # per device
    local_positions: int  # context per device
    attention_s: float
    dram_read_bytes: int
    roofline_s: float
    critical: str
    gather_bytes: int  # received per device over ethernet
    gather_s: float
    merge_ops: int
    merge_dram_bytes: int
    merge_s: float

    @property
    def total_s(self) -> float:
        return self.attention_s + self.gather_s + self.merge_s


def gather_bytes(batch: int, q_heads: int, cp: int) -> tuple[int, int]:
    """``(P, received)``: one device's partial in tt-transformers' decode layout (the output ``[1, batch,
    q_heads, 128]`` bfloat16 TILE, each user's heads padded to 32 rows, and the LSE ``[1, batch, q_heads]``
    float32 row-major) and what the all-gather delivers to each device, ``(cp - 1) * P``."""
    partial = _elements(batch, q_heads) * 2 + batch * q_heads * 4
    return partial, (cp - 1) * partial


def _elements(batch: int, q_heads: int) -> int:
    """Elements of one output partial as TILE: ``batch`` users x heads padded to 32 x head_dim."""
    return batch * -(-q_heads // 32) * 32 * HEAD_DIM


def merge_op_count(cp: int) -> int:
    """ttnn ops of the context-parallel merge of ``cp`` partials, the all-gathers excluded:
    ``context_parallel._merge_on_device`` (2 reshapes, a slice and a reshape per partial of each of
    out and lse: ``4 cp + 2``), ``merge._merge_on_device`` (per LSE a reshape and a to_layout, ``cp - 1``
    maxima, a clamp, per partial a subtract and an exp, ``cp - 1`` adds, log, add; per output a typecast,
    a reshape, a multiply, ``cp - 1`` adds; then clamp, reciprocal, multiply, reshape, typecast, and the
    LSE's to_layout and reshape: ``11 cp + 7``), and the local positions (subtract, minimum, maximum,
    to_layout, reshape: 5). 0 for ``cp = 1`` (nothing to merge)."""
    return 0 if cp == 1 else (4 * cp + 2) + (11 * cp + 7) + 5


def merge_dram_bytes(batch: int, q_heads: int, cp: int) -> int:
    """DRAM bytes the merge's ops read and write on one device: per partial its output to float32 (read
    2, write 4 bytes an element), times its weight (read 4 + the weight tile, write 4), into the sum (read
    8, write 4), and its LSE statistics (``[1, batch, q_heads, 1]`` as TILE: ``batch * ceil(q_heads/32)``
    float32 tiles, about 12 passes: layout, max, subtract, exp, add, broadcast read); then the
    normalisation (read 8, write 4) and bfloat16 cast (read 4, write 2)."""
    if cp == 1:
        return 0
    elements = _elements(batch, q_heads)
    stat = batch * -(-q_heads // 32) * 32 * 32 * 4
    return cp * (elements * 26 + stat * 12) + elements * 18


def _attention(layout: Layout, context: int, batch: int, kv_dtype: str, dev, seed, models) -> dict:
    q_heads, kv_heads = Q_HEADS // layout.tp, KV_HEADS // layout.tp
    local = context // layout.cp
    shape = cm.Shape(f"Llama-3.1-70B/{layout.tp}", q_heads, kv_heads, HEAD_DIM)
    model = models.setdefault(shape.q_rows, cm.calibrate(shape.q_rows, shape.dim_tiles))
    plan, kv, block_tiles = cm.op_schedule(shape, [local] * batch, dev, kv_dtype=kv_dtype)
    est = cm.estimate(plan, kv, block_tiles, model, seed, dev, users=batch, kv_dtype=kv_dtype)
    return dict(q_heads=q_heads, kv_heads=kv_heads, local_positions=local, attention_s=est.time_s,
                dram_read_bytes=est.dram_read_bytes, roofline_s=est.roofline_s, critical=est.critical)


def run(layouts: Sequence[str] | None = None, batches: Sequence[int] = (1, 32),
        kv_dtypes: Sequence[str] = ("bfloat16", "bfloat8_b"), contexts: Sequence[int] | None = None) -> list[MeshRow]:
    """Every row (module docstring). ``layouts``: names from :data:`LAYOUTS` (default all);
    ``contexts``: override every layout's contexts.

    Raises:
        ValueError: an unknown layout name.
    """
    chosen = [layout for layout in LAYOUTS if layouts is None or layout.name in layouts]
    if layouts is not None and len(chosen) != len(set(layouts)):
        raise ValueError(f"layouts: expected names from {[layout.name for layout in LAYOUTS]}, got {list(layouts)}")
    dev = cm.device("n150")
    seed = cm.calibrate(cm.SEED_Q_ROWS, cm.SEED_HEAD_DIM // 32)
    models: dict = {}
    rows = []
    for layout in chosen:
        for context in contexts or CONTEXTS.get(layout.name, CP_CONTEXTS):
            for batch in batches:
                for kv_dtype in kv_dtypes:
                    att = _attention(layout, context, batch, kv_dtype, dev, seed, models)
                    partial, received = gather_bytes(batch, att["q_heads"], layout.cp)
                    hops = layout.cp - 1
                    gather_s = hops * ETH_HOP_S + received / (ETH_LINK_GBPS * 1e9) if hops else 0.0
                    ops = merge_op_count(layout.cp)
                    merge_bytes = merge_dram_bytes(batch, att["q_heads"], layout.cp)
                    rows.append(MeshRow(layout=layout.name, devices=layout.devices, context=context, batch=batch,
                                        kv_dtype=kv_dtype, gather_bytes=received, gather_s=gather_s, merge_ops=ops,
                                        merge_dram_bytes=merge_bytes,
                                        merge_s=ops * OP_LAUNCH_S + merge_bytes / (dev.dram_gbps * 1e9), **att))
    return rows


def format_table(rows: Sequence[MeshRow]) -> str:
    """The rows as a fixed-width table: times in microseconds, bytes per device."""
    header = (f"{'layout':<16}{'dev':>4}{'ctx':>9}{'batch':>6} {'kv':<5}{'heads/dev':>10}{'pos/dev':>9}"
              f"{'attn us*':>10}{'DRAM/dev':>10}{'roof us':>9}  {'bound':<6}{'gather':>9}{'gath us*':>10}"
              f"{'ops':>5}{'merge us*':>10}{'total us*':>10}{f'x{LAYERS} ms*':>9}")
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.layout:<16}{r.devices:>4}{r.context:>9}{r.batch:>6} {cm.KV_SHORT[r.kv_dtype]:<5}"
            f"{f'{r.q_heads}/{r.kv_heads}':>10}{r.local_positions:>9}{r.attention_s * 1e6:>10.1f}"
            f"{cm.format_bytes(r.dram_read_bytes):>10}{r.roofline_s * 1e6:>9.1f}  {r.critical:<6}"
            f"{cm.format_bytes(r.gather_bytes) if r.gather_bytes else '-':>9}{r.gather_s * 1e6:>10.1f}{r.merge_ops:>5}"
            f"{r.merge_s * 1e6:>10.1f}{r.total_s * 1e6:>10.1f}{r.total_s * LAYERS * 1e3:>9.2f}")
    return "\n".join(lines)


def legend() -> str:
    """What the columns mean and where each figure comes from."""
    return "\n".join([
        "* MODELLED, NOT MEASURED (no card, no mesh). Llama-3.1-70B attention (64 Q / 8 KV heads, d128), one layer,",
        "  one decode step, every user at the full context. attn: ttnn_flashdecode.tools.cost_model on one Wormhole",
        "  chip (n150 model: 8x8 grid, 288 GB/s, 1.0 GHz) for the device's heads and positions; DRAM/dev: its DRAM",
        "  reads (K/V, Q, constants); roof: minimum bytes / 288 GB/s; bound: what bounds the call.",
        "  gather: bytes each device receives in the all-gather of the partials (out [1, b, nh, 128] bfloat16 TILE, heads",
        "  padded to 32 rows, + LSE float32: the heads layout, q_layout='heads', as tt-transformers holds decode Q);",
        f"  gath: (D-1) hops x {ETH_HOP_S * 1e6:.1f} us + those bytes through one link at {ETH_LINK_GBPS} GB/s (Wormhole",
        "  ethernet per link per direction; tt-metal tech_reports/EthernetMultichip/BasicEthernetGuide.md).",
        f"  ops / merge: the merge's ttnn ops x {OP_LAUNCH_S * 1e6:.0f} us [U: assumed per-op cost in a trace, not sourced]",
        "  + their DRAM traffic at 288 GB/s. total: attn + gath + merge; "
        f"x{LAYERS}: total x {LAYERS} layers (ms per token, attention only).",
    ])
