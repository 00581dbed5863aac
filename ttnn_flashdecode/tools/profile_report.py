"""``python -m ttnn_flashdecode profile-report CSV``: this op's calls in a Tracy ops report.

Reads tt-metal's ``ops_perf_results_<date>.csv`` (written by ``python -m tracy -r ...`` with a
profiler-enabled tt-metal build; see ``docs/profiling.md``) with Tenstorrent's ``tt-perf-report``
(:func:`load_rows`, :func:`perf_rows`: its reader and its per-op analysis), prints every row as
tt-perf-report sees it with this op's rows named and given what it leaves blank for attention (the
plan's DRAM bytes, DRAM %, the modelled bound: :func:`perf_rows`), then per call of this op:
device kernel duration, the bytes the call had to read at least (every live K and V tile once),
the achieved GB/s and the fraction of the DRAM roofline it reached.

Finding the rows. ``attention()`` launches through ``ttnn.generic_op``, so its rows carry the
generic op's OP CODE; what identifies them is the kernel sources: ``COMPUTE KERNEL SOURCE``
names ``attention_compute.cpp`` and ``DATA MOVEMENT KERNEL SOURCE`` names
``attention_reader.cpp`` / ``attention_writer.cpp`` (``program_factory.KERNEL_FILES``).

Columns used (tt-metal ``tools/tracy/process_ops_logs.py``: ``OPS_CSV_HEADER`` and the
per-tensor columns it adds): ``OP CODE``, ``OP TYPE`` (``signpost`` rows carry Tracy signposts
in ``OP CODE``), ``GLOBAL CALL COUNT``, ``DEVICE ID``, ``DEVICE ARCH`` (newer reports),
``CORE COUNT``, ``DEVICE KERNEL DURATION [ns]``, ``DEVICE FW DURATION [ns]``,
``COMPUTE KERNEL SOURCE``, ``DATA MOVEMENT KERNEL SOURCE``, ``METAL TRACE ID`` and the shapes
``INPUT_<i>_{W,Z,Y,X}_PAD[LOGICAL]`` (cells ``padded[logical]``, e.g. ``1024[1000]``). Cells
that held commas are written with ``;`` by the profiler.

Bytes. The generic op's inputs are ``[q, k, v, constants, out]``: K (``INPUT_1``) is ``[batch,
n_kv_heads, capacity, head_dim]``. The positions attended to are not in the report, so the
minimum bytes assume every user at ``--context`` positions (default: the cache's capacity, an
upper bound of the work; pass the real context for a real GB/s):
``2 x batch x n_kv_heads x ceil(context / 32) x ceil(head_dim / 32) x tile bytes`` (the cache's, from
``INPUT_1_DATATYPE``: 2048 / 1088 / 576 for bfloat16 / bfloat8_b / bfloat4_b). Without shape
columns, ``--model`` and ``--batch`` give the shape. The roofline uses the DRAM bandwidth of the
row's ``DEVICE ARCH`` or ``--device`` (n150 / n300 288 GB/s per chip, p150 512 GB/s: TT_FACTS §8;
p100a 448 GB/s: tt-metal #57161; a p100a reports ``blackhole`` too: pass ``--device p100a``).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import re
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence

from ttnn_flashdecode.tools.cost_model import MODELS, kv_tile_bytes

__all__ = ["Call", "read_calls", "is_attention_row", "format_calls", "main", "KERNEL_SOURCES", "DRAM_GBPS",
           "load_rows", "PerfRow", "perf_rows", "format_perf_rows"]

DRAM_GBPS = {"n150": 288.0, "n300": 288.0, "p100a": 448.0, "p150": 512.0}
"""Chip DRAM peak per card, GB/s (device model v2: ``device_model.hardware``; n300 per chip)."""

_DTYPES = {"BFLOAT16": "bfloat16", "BFLOAT8_B": "bfloat8_b", "BFLOAT4_B": "bfloat4_b"}

KERNEL_SOURCES = ("attention_reader.cpp", "attention_compute.cpp", "attention_writer.cpp")
"""This op's kernel files (``program_factory.KERNEL_FILES``): how its rows are recognised."""


_ARCH_DEVICE = {"WORMHOLE": "n150", "BLACKHOLE": "p150"}  # DEVICE ARCH (any case, e.g. "blackhole") -> card
_SIGNPOST = re.compile(r"ttnn_flashdecode\.attention batch=(\d+) heads=(\d+)/(\d+)")


@dataclasses.dataclass(frozen=True)
class Call:
    """One call of the op in the report.

    Attributes:
        call: GLOBAL CALL COUNT.
        device_id: DEVICE ID.
        cores: CORE COUNT (cores the program ran on), or None.
        kernel_ns: DEVICE KERNEL DURATION [ns].
        fw_ns: DEVICE FW DURATION [ns], or None.
        batch, n_kv_heads, head_dim, capacity: from the K shape (or --model/--batch); positions.
        context: positions per user the bytes assume.
        min_bytes: every live K and V tile once.
        device: ``n150`` / ``p150`` (roofline bandwidth).
        trace_id: METAL TRACE ID, or None.
        kv_dtype: the cache's dtype (``INPUT_1_DATATYPE``; bfloat16 when absent).
        q_heads: Q heads (``INPUT_0``'s X over head_dim), or None.
        fidelity: MATH FIDELITY, or None.
    """

    call: int
    device_id: int
    cores: int | None
    kernel_ns: int
    fw_ns: int | None
    batch: int
    n_kv_heads: int
    head_dim: int
    capacity: int | None
    context: int
    min_bytes: int
    device: str
    trace_id: int | None
    kv_dtype: str = "bfloat16"
    q_heads: int | None = None
    fidelity: str | None = None

    @property
    def achieved_gbps(self) -> float:
        """``min_bytes / kernel duration``, GB/s (1e9 bytes/s)."""
        return self.min_bytes / self.kernel_ns

    @property
    def roofline_ns(self) -> float:
        """``min_bytes / DRAM bandwidth``, ns."""
        return self.min_bytes / DRAM_GBPS[self.device]

    @property
    def roofline_fraction(self) -> float:
        """Roofline time / measured time (1.0 = at the DRAM limit)."""
        return self.roofline_ns / self.kernel_ns


def _int(cell: str | None) -> int | None:
    if cell is None:
        return None
    cell = cell.strip()
    if not cell or cell.lower() == "nan":
        return None
    return int(float(cell))


def _dim(cell: str | None) -> int | None:
    """A shape cell ``padded[logical]`` (or a bare number): the logical size."""
    if cell is None or not cell.strip():
        return None
    match = re.fullmatch(r"\s*(\d+)\s*(?:\[\s*(\d+)\s*\])?\s*", cell)
    if not match:
        return None
    return int(match.group(2) or match.group(1))


def _shape(row: Mapping[str, str], operand: str) -> tuple[int, ...] | None:
    dims = [_dim(row.get(f"{operand}_{axis}_PAD[LOGICAL]")) for axis in "WZYX"]
    return None if None in dims else tuple(dims)


def is_attention_row(row: Mapping[str, str]) -> bool:
    """True when the row's kernel sources are this op's (:data:`KERNEL_SOURCES`)."""
    sources = (row.get("COMPUTE KERNEL SOURCE") or "") + (row.get("DATA MOVEMENT KERNEL SOURCE") or "")
    return any(name in sources for name in KERNEL_SOURCES)


def read_calls(
    rows: Iterable[Mapping[str, str]],
    *,
    model: str | None = None,
    batch: int | None = None,
    context: int | None = None,
    device: str | None = None,
) -> list[Call]:
    """This op's calls among ``rows`` (``csv.DictReader`` rows of an ops_perf_results CSV).

    Args:
        rows: the report's rows.
        model: a key of the model table (``minicpm5-1b``, ``llama-3.1-8b``, ``smollm2``) for rows
            without shape columns.
        batch: users, for rows without shape columns (else from the K shape, or the op's Tracy
            signpost just before the row); default 1.
        context: positions per user for the bytes; default the cache's capacity (K's Y).
        device: ``n150`` or ``p150`` for rows whose ``DEVICE ARCH`` is empty or absent (older reports).

    Raises:
        ValueError: a row of this op lacks its kernel duration, or its shape cannot be known
            (no shape columns and no ``model``), or no ``context`` and no capacity, or its device
            is unknown (no ``DEVICE ARCH`` and no ``device``).
    """
    calls = []
    signpost: tuple[int, int, int] | None = None
    for row in rows:
        if (row.get("OP TYPE") or "").strip() == "signpost":
            match = _SIGNPOST.search(row.get("OP CODE") or "")
            signpost = tuple(int(g) for g in match.groups()) if match else None
            continue
        if not is_attention_row(row):
            continue
        call = _int(row.get("GLOBAL CALL COUNT"))
        kernel_ns = _int(row.get("DEVICE KERNEL DURATION [ns]"))
        if kernel_ns is None or kernel_ns <= 0:
            raise ValueError(f"call {call}: expected a DEVICE KERNEL DURATION [ns], got {row.get('DEVICE KERNEL DURATION [ns]')!r} "
                             "(was the report made with device profiling on?)")
        k_shape = _shape(row, "INPUT_1")
        if k_shape is not None:
            users, n_kv, capacity, head_dim = k_shape
        elif model is not None:
            n_kv, head_dim = MODELS[model].n_kv_heads, MODELS[model].head_dim
            users, capacity = batch or (signpost[0] if signpost else 1), None
        else:
            raise ValueError(f"call {call}: expected INPUT_1_*_PAD[LOGICAL] shape columns or --model, got neither")
        positions = context or capacity
        if context is not None and capacity is not None and context > capacity:
            raise ValueError(f"call {call}: expected --context <= the cache's capacity {capacity}, got {context}")
        if positions is None:
            raise ValueError(f"call {call}: expected --context (the report has no K shape to take the capacity from)")
        arch = (row.get("DEVICE ARCH") or "").strip()
        name = device or next((dev for key, dev in _ARCH_DEVICE.items() if key in arch.upper()), None)
        if name not in DRAM_GBPS:
            raise ValueError(f"call {call}: expected DEVICE ARCH wormhole_b0/blackhole or --device n150/p150, got {arch or device!r}")
        dtype = (row.get("INPUT_1_DATATYPE") or "").split("::")[-1].strip().upper()
        kv_dtype = _DTYPES.get(dtype, "bfloat16")
        q_shape = _shape(row, "INPUT_0")
        q_heads = q_shape[3] // head_dim if q_shape is not None and k_shape is not None else (
            MODELS[model].n_q_heads if model is not None else None)
        min_bytes = 2 * users * n_kv * math.ceil(positions / 32) * math.ceil(head_dim / 32) * kv_tile_bytes(kv_dtype)
        calls.append(Call(
            call=call if call is not None else len(calls), device_id=_int(row.get("DEVICE ID")) or 0,
            cores=_int(row.get("CORE COUNT")), kernel_ns=kernel_ns, fw_ns=_int(row.get("DEVICE FW DURATION [ns]")),
            batch=users, n_kv_heads=n_kv, head_dim=head_dim, capacity=capacity, context=positions,
            min_bytes=min_bytes, device=name, trace_id=_int(row.get("METAL TRACE ID")), kv_dtype=kv_dtype,
            q_heads=q_heads, fidelity=(row.get("MATH FIDELITY") or "").strip() or None,
        ))
        signpost = None
    return calls


def load_rows(path: str) -> list[dict[str, str]]:
    """The report's rows as tt-perf-report reads them (``tt_perf_report.perf_report.merge_perf_traces``),
    every cell as text (empty where the report has none)."""
    from tt_perf_report import perf_report

    return _text_rows(perf_report.merge_perf_traces([path]))


def _text_rows(frame) -> list[dict[str, str]]:
    import pandas as pd

    return [{k: ("" if not isinstance(v, (list, tuple)) and pd.isna(v) else str(v)) for k, v in row.items()}
            for _, row in frame.iterrows()]


@dataclasses.dataclass(frozen=True)
class PerfRow:
    """One row of tt-perf-report's table, with what it leaves blank for this op filled in.

    Attributes:
        index: the row's position in the report.
        op_code: tt-perf-report's OP Code (this op's rows: ``ttnn_flashdecode.attention``).
        device_us: its Device Time (DEVICE KERNEL DURATION), or None (signposts, host ops).
        cores: its Cores.
        ours: whether the row is this op's (kernel sources).
        plan_bytes: DRAM bytes the op's plan reads (device model v2 at the row's shape), or None.
        dram_gbps: plan bytes / device time, or tt-perf-report's DRAM figure.
        dram_percent: of the card's DRAM peak, or tt-perf-report's DRAM %.
        bound: the modelled bound (this op) or tt-perf-report's Bound.
        modelled_us: device model v2's time for the row's shape (MODELLED), or None.
    """

    index: int
    op_code: str
    device_us: float | None
    cores: int | None
    ours: bool
    plan_bytes: int | None = None
    dram_gbps: float | None = None
    dram_percent: float | None = None
    bound: str = ""
    modelled_us: float | None = None


def _annotate(call: Call, index: int) -> PerfRow:
    """This op's row: plan bytes, DRAM %, modelled bound and time (device model v2)."""
    from ttnn_flashdecode.tools import cost_model as cm
    from ttnn_flashdecode.tools.device_model import kernel_model as km, llk_costs as llk

    plan_bytes, bound, modelled = call.min_bytes, "", None
    if call.q_heads:
        shape = cm.Shape("report", call.q_heads, call.n_kv_heads, call.head_dim)
        cfg = llk.ComputeConfig(call.fidelity if call.fidelity in llk.FIDELITY_PHASES else "HiFi4")
        try:
            result = km.estimate_v2(shape, [call.context] * call.batch, call.device, cfg, call.kv_dtype,
                                    capacity=call.capacity)
            plan_bytes, bound, modelled = result.estimate.dram_read_bytes, result.bound, result.time_s * 1e6
        except (ValueError, RuntimeError, IndexError) as error:  # a shape the model cannot plan
            bound = f"? ({type(error).__name__})"
    gbps = plan_bytes / call.kernel_ns
    return PerfRow(index, "ttnn_flashdecode.attention", call.kernel_ns / 1e3, call.cores, True, plan_bytes, gbps,
                   100 * gbps / DRAM_GBPS[call.device], bound, modelled)


def perf_rows(path: str, **options) -> list[PerfRow]:
    """Every row of the report as tt-perf-report analyses it (``analyze_op``), this op's rows named
    and annotated (``options``: :func:`read_calls`'s ``model``, ``batch``, ``context``, ``device``)."""
    from tt_perf_report import perf_report

    frame = perf_report.merge_perf_traces([path])
    fmt = perf_report.detect_csv_format(frame)
    spec = perf_report.ArchitectureSpec.from_df(frame, None) if fmt == perf_report.CsvFormat.V2_1 else None
    rows, text_rows, previous = [], _text_rows(frame), None
    ours = iter(read_calls(text_rows, **options))
    for index, (_, row) in enumerate(frame.iterrows()):
        data, _ = perf_report.analyze_op(row, previous, fmt, spec)
        if row["OP TYPE"] != "signpost":
            previous = row
        if is_attention_row(text_rows[index]):
            rows.append(_annotate(next(ours), index))
            continue
        value = {k: data[k].raw_value for k in ("OP Code", "Device Time", "Cores", "DRAM", "DRAM %", "Bound")}
        name = str(value["OP Code"]) + (" (signpost)" if row["OP TYPE"] == "signpost" else "")
        rows.append(PerfRow(index, name, value["Device Time"], value["Cores"], False,
                            dram_gbps=value["DRAM"], dram_percent=value["DRAM %"], bound=str(value["Bound"] or "")))
    return rows


def format_perf_rows(rows: Sequence[PerfRow]) -> str:
    """tt-perf-report's view of every row, with this op's DRAM %, plan bytes and modelled bound."""
    def cell(value, spec):
        return "-" if value is None else format(value, spec)

    header = (f"{'#':>3} {'OP Code':<34}{'device us':>10}{'cores':>6}{'plan bytes':>12}{'GB/s':>8}{'DRAM %':>8}"
              f"  {'bound':<13}{'model us*':>10}")
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r.index:>3} {r.op_code[:33]:<34}{cell(r.device_us, '.1f'):>10}{cell(r.cores, 'd'):>6}"
                     f"{cell(r.plan_bytes, 'd'):>12}{cell(r.dram_gbps, '.1f'):>8}{cell(r.dram_percent, '.1f'):>8}"
                     f"  {r.bound:<13}{cell(r.modelled_us, '.1f'):>10}")
    lines.append("rows read by tt-perf-report; ttnn_flashdecode.attention = GenericOpDeviceOperation with this op's kernel "
                 "sources. plan bytes, GB/s, DRAM %: the op's planned DRAM reads over the MEASURED device time; bound and "
                 "model us*: device model v2, MODELLED (not measured).")
    return "\n".join(lines)


def format_calls(calls: Sequence[Call]) -> str:
    """A table of the calls plus a median line."""
    header = (f"{'call':>8} {'dev':>3} {'arch':<5}{'cores':>6}{'batch':>6}{'kv':>4}{'ctx':>8}"
              f"{'kernel us':>11}{'fw us':>9}{'min bytes':>12}{'GB/s':>8}{'roof us':>9}{'of roof':>9}")
    lines = [header, "-" * len(header)]
    for c in calls:
        lines.append(
            f"{c.call:>8} {c.device_id:>3} {c.device:<5}{c.cores if c.cores is not None else '-':>6}{c.batch:>6}"
            f"{c.n_kv_heads:>4}{c.context:>8}{c.kernel_ns / 1e3:>11.1f}"
            f"{(f'{c.fw_ns / 1e3:.1f}' if c.fw_ns else '-'):>9}{c.min_bytes:>12}{c.achieved_gbps:>8.1f}"
            f"{c.roofline_ns / 1e3:>9.1f}{c.roofline_fraction:>9.1%}"
        )
    if calls:
        lines.append(f"{len(calls)} calls; median kernel {statistics.median(c.kernel_ns for c in calls) / 1e3:.1f} us, "
                     f"median {statistics.median(c.achieved_gbps for c in calls):.1f} GB/s, "
                     f"median {statistics.median(c.roofline_fraction for c in calls):.1%} of the DRAM roofline")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ttnn_flashdecode profile-report",
        description="Per-call duration, achieved GB/s and fraction of the DRAM roofline of ttnn_flashdecode.attention "
                    "from tt-metal's ops_perf_results CSV (Tracy).",
    )
    parser.add_argument("csv", help="ops_perf_results_<date>.csv from `python -m tracy -r ...`")
    parser.add_argument("--context", type=int, default=None,
                        help="positions per user the bytes assume (default: the cache's capacity, an upper bound)")
    parser.add_argument("--model", choices=sorted(MODELS), default=None, help="shape for rows without shape columns")
    parser.add_argument("--batch", type=int, default=None, help="users, for rows without shape columns (default 1)")
    parser.add_argument("--device", choices=sorted(DRAM_GBPS), default=None,
                        help="the card (DRAM peak; a p100a reports DEVICE ARCH blackhole like a p150); default from DEVICE ARCH")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Print the op's calls in the CSV. Returns 0, or 1 when the CSV holds none."""
    parser = _parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    for name, value in (("--context", args.context), ("--batch", args.batch)):
        if value is not None and value < 1:
            parser.error(f"{name}: expected a positive int, got {value}")
    options = dict(model=args.model, batch=args.batch, context=args.context, device=args.device)
    try:
        calls = read_calls(load_rows(args.csv), **options)  # read by tt-perf-report
        table = perf_rows(args.csv, **options) if calls else []
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        print(f"profile-report: cannot read {args.csv}: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"profile-report: {error}", file=sys.stderr)
        return 2
    if not calls:
        print(f"no ttnn_flashdecode.attention rows in {args.csv} (looked for kernel sources {', '.join(KERNEL_SOURCES)})")
        return 1
    print(format_perf_rows(table))
    print()
    print(format_calls(calls))
    if args.context is None:
        print("bytes assume every user at the cache's capacity (no --context): GB/s is an upper bound")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
