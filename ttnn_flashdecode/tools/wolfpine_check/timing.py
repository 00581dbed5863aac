"""The reader's simulated cycles per K/V tile (``TT_SIM_COST_MODEL=1``), next to the cost model's.

wolfpine's ``TT_SIM_PROFILE`` counters (parquet: cycle, core, unit, counter, value, kernel_id) give,
per launched program and core, the cycles over which NCRISC (the reader) retired instructions.
Their sum over the cores, divided by the K/V tiles the call reads (:mod:`.cases` counts them from
the live ranges), is the figure: **simulated, uncalibrated** (wolfpine's own documentation calls
every cost a floor, not silicon). The cost model's figure for the same call is one K/V tile at
:attr:`ttnn_flashdecode.tools.cost_model.Device.core_dram_bytes_per_s` on n150 (the seed's
per-core reader rate, scaled to Wormhole's clock), in cycles.
"""

from __future__ import annotations

import glob
from pathlib import Path

from ttnn_flashdecode.tools.silicon_check import Row

__all__ = ["reader_spans", "timing_rows"]


def reader_spans(profile: Path) -> dict[int, int]:
    """kernel_id -> the sum over cores of NCRISC's active span (last - first cycle it retired
    instructions), from a ``TT_SIM_PROFILE`` folder."""
    import pyarrow.parquet as pq

    files = sorted(glob.glob(str(profile / "**" / "*.parquet"), recursive=True))
    spans: dict[tuple[int, int, int], list[int]] = {}
    for file in files:
        table = pq.read_table(file).to_pandas()
        rows = table[(table.unit == "NCRISC") & (table.counter_name == "instr_retired") & (table.value > 0)]
        for (kernel, y, x), group in rows.groupby([rows.kernel_id.astype(int), "core_y", "core_x"]):
            first, last = int(group.cycle.min()), int(group.cycle.max())
            have = spans.setdefault((kernel, y, x), [first, last])
            have[0], have[1] = min(have[0], first), max(have[1], last)
    totals: dict[int, int] = {}
    for (kernel, _, _), (first, last) in spans.items():
        totals[kernel] = totals.get(kernel, 0) + last - first
    return totals


def _cost_model_cycles(kv_tile_bytes: int) -> float:
    from ttnn_flashdecode.tools.cost_model import device

    n150 = device("n150")
    return kv_tile_bytes / n150.core_dram_bytes_per_s * n150.clock_ghz * 1e9


def timing_rows(profile: Path, records: list[dict]) -> list[Row]:
    ran = [r for r in records if r.get("kv_tiles")]
    try:
        spans = reader_spans(profile)
    except Exception as error:  # the counters are wolfpine's format: report, do not fail the check
        return [Row("wormhole", "reader cycles per K/V tile", "NCRISC", "skipped", f"no profile counters: {error}")]
    kernels = sorted(spans)
    if len(kernels) != len(ran):
        return [Row("wormhole", "reader cycles per K/V tile", "NCRISC", "skipped",
                    f"{len(kernels)} programs in the profile for {len(ran)} cases: cannot pair them "
                    f"(raw NCRISC cycles per program: {[spans[k] for k in kernels]})")]
    rows = []
    for kernel, record in zip(kernels, ran):
        simulated = spans[kernel] / record["kv_tiles"]
        rows.append(Row("wormhole", f"reader cycles per K/V tile: {record['name']}", "NCRISC", "ok",
                        f"{simulated:.0f} simulated, uncalibrated (a floor) vs cost model {_cost_model_cycles(record['kv_tile_bytes']):.0f} "
                        f"(n150, seed reader rate); {spans[kernel]} reader cycles over {record['cores']} cores / "
                        f"{record['kv_tiles']} K/V tiles"))
    return rows
