"""wolfpine check: the op's REAL reader and writer, executed on an independent Wormhole simulator.

``python -m ttnn_flashdecode wolfpine-check`` (and ``tests/test_wolfpine_check.py``) opens a
simulated Wormhole (wolfpine, PyPI, BSD-3: a cycle-approximate simulator built from Tenstorrent's
public ISA documentation, plugged into tt-metal's UMD simulation backend) and, in a subprocess
(:mod:`.cases`), calls :func:`ttnn_flashdecode.attention` on real device tensors. tt-metal JIT-builds
``kernels/attention_reader.cpp`` and ``kernels/attention_writer.cpp`` exactly as for a card (the
silicon check's runtime root: :mod:`.root`) and runs them on the simulated RISC-V cores, NoC and
DRAM, through ``ttnn.generic_op`` with the op's own descriptor (``prepare_device_launch``,
``build_program``). One thing is replaced: the compute kernel is a probe (``probe_compute.cpp``),
FPU-only, that consumes exactly the attention compute kernel's CB traffic (work row, positions, Q,
constants, every K/V block, the split-K inboxes) and produces what the writer and the split-K
combine expect, as a fingerprint (Q, the sums of the K and V tiles it received, the maxima and
partials that crossed cores) that a float64 model (:func:`.cases.expected`) predicts exactly: every
output element is compared bit for bit. The inputs poison every cache position outside the
attended range (NaN), so a stale row the reader fails to zero shows.

Cases (:data:`.cases.CASES`): contiguous bf16 decode; paged bf16 with a shuffled page table; split-K
over 3 cores with the combine (semaphores, NoC copies of Q / max / partials); positions from a device
tensor with an idle slot; ROWS; a sliding window. Planted reader bugs (:data:`PLANTED_BUGS`, with
``--planted``) must each make the check fail.

What it proves: the reader's addressing (TensorAccessor banks and pages, the page-table walk,
positions read from DRAM at run time), its stale-row zeroing, the split-K handshakes and the
writer's placement work on a machine model that is not ours, with binaries built by tt-metal.

What it cannot see: the attention compute kernel (SFPU code cannot be built without SFPI's
compiler: exp, reciprocal, max never run; the probe stands in); bfloat8_b / bfloat4_b caches
(wolfpine 2.2's unpacker has no BFP datum conversion: that case is reported blocked); timing:
with ``--cost-model`` (``TT_SIM_COST_MODEL=1``) the reader's simulated cycles per K/V tile are
reported next to :mod:`ttnn_flashdecode.tools.cost_model`'s figure, but wolfpine's cost model is a
floor, not calibrated to silicon. Wormhole only (the silicon check's root patches Wormhole's LLK).

``--fpu-timing`` runs :mod:`.fpu_timing` instead: single FPU / unpack / pack compute API calls
(matmul, row reduce, add, sub with a column broadcast, mul, copy, pack) timed on the simulator, N
and 2N calls per op and compute config, printed beside the device model's cycles for the same call.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ttnn_flashdecode.tools.silicon_check import Row, format_table

__all__ = ["PLANTED_BUGS", "PlantedBug", "run", "main"]

CASE_TIMEOUT_S = 900


@dataclasses.dataclass(frozen=True)
class PlantedBug:
    """A one-line change to the reader that the check must catch."""

    name: str
    original: str
    mutated: str
    bug: str
    case: str  #: the case (name prefix) it runs on
    cost_model: bool = False  #: run with TT_SIM_COST_MODEL=1 (without it a NoC read lands at once)


PLANTED_BUGS = (
    PlantedBug(
        "device-only page offset",
        "            noc_async_read_page(first + d, reader, dst + d * kKvTileBytes, 0, kv_read_noc(first + d));",
        "#ifndef TT_EMULATOR\n            noc_async_read_page(first + d + kDimTiles, reader, dst + d * kKvTileBytes, 0, "
        "kv_read_noc(first + d));\n"
        "#else\n            noc_async_read_page(first + d, reader, dst + d * kKvTileBytes, 0, kv_read_noc(first + d));\n#endif",
        "a contiguous / paged K/V tile read one position tile late, in the device build only (TT_EMULATOR unset)",
        "decode bf16"),
    PlantedBug(
        "no read barrier before the K push",
        "        read_block(kCbK, p, p.k, k_reader, block, table);\n        kv_read_barrier();",
        "        read_block(kCbK, p, p.k, k_reader, block, table);",
        "K pages pushed to compute while their DRAM reads may still be in flight (and stale rows zeroed before they land)",
        "decode bf16", cost_model=True),
)


def _run_tag() -> str:
    from .root import RUN_TAG_PREFIX

    return f"{RUN_TAG_PREFIX}{os.getpid()}-{time.monotonic_ns()}"


def _end_servers(tag: str) -> None:
    """Ends simulator servers still running with ``--run-tag tag`` (orphaned by a crash or timeout),
    each by its PID."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if tag.encode() in words and b"framework.sim.wormhole" in words:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


def _run_cases(root: Path, work: Path, cases: Sequence[str], cost_model: bool, kernel_dir: Path | None = None) -> tuple[list[dict], str]:
    from .root import environment

    work.mkdir(parents=True, exist_ok=True)
    tag = _run_tag()
    env = environment(root, work, tag, cost_model)
    if cost_model:
        env["TT_SIM_PROFILE"] = str(work / "profile")
    if kernel_dir is not None:
        env["TTNN_FLASHDECODE_KERNEL_DIR"] = str(kernel_dir)
    command = [sys.executable, "-m", "ttnn_flashdecode.tools.wolfpine_check.cases"]
    for case in cases:
        command += ["--case", case]
    process = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=CASE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        stderr += f"\n(timed out after {CASE_TIMEOUT_S} s)"
    finally:
        _end_servers(tag)
    from .cases import LINE_PREFIX

    records = [json.loads(line[len(LINE_PREFIX):]) for line in stdout.splitlines() if line.startswith(LINE_PREFIX)]
    tail = " | ".join(line for line in stderr.splitlines()[-12:] if line.strip() and "DEBUG" not in line)[-1500:]
    return records, f"exit status {process.returncode}: {tail}"


def _case_rows(records: list[dict], expected: int, why: str, label: str = "") -> list[Row]:
    rows = []
    for r in records:
        if r.get("blocked"):
            rows.append(Row("wormhole", label + r["name"], "wolfpine", "blocked", r["blocked"]))
        elif r["ok"]:
            rows.append(Row("wormhole", label + r["name"], "wolfpine", "ok",
                            f"{r['seconds']:.1f} s, {r['elements']} outputs bit-exact, {r['cores']} cores, "
                            f"splits {r['split_counts']}"))
        else:
            rows.append(Row("wormhole", label + r["name"], "wolfpine", "FAIL", r.get("error", "?")))
    if len(records) < expected:
        rows.append(Row("wormhole", f"{label}simulated device run ({len(records)} of {expected} cases ran)", "wolfpine",
                        "FAIL", why))
    return rows


def _planted_rows(root: Path, work: Path, names: Sequence[str] = ()) -> list[Row]:
    from ttnn_flashdecode.op.paths import kernel_dir

    rows = []
    for bug in PLANTED_BUGS:
        if names and bug.name not in names:
            continue
        copy = work / "kernels"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(kernel_dir(), copy)
        reader = copy / "attention_reader.cpp"
        text = reader.read_text()
        if text.count(bug.original) != 1:
            rows.append(Row("wormhole", f"planted bug: {bug.name}", "wolfpine", "FAIL",
                            "its original line is not (once) in the reader any more: update PLANTED_BUGS"))
            continue
        reader.write_text(text.replace(bug.original, bug.mutated))
        records, why = _run_cases(root, work / "run", [bug.case], cost_model=bug.cost_model, kernel_dir=copy)
        caught = [r for r in records if r.get("ok") is False]
        if caught:
            rows.append(Row("wormhole", f"planted bug: {bug.name}", "wolfpine", "ok",
                            f"caught on '{records[0]['name']}': {caught[0].get('error', '')[:300]}"))
        elif records:
            rows.append(Row("wormhole", f"planted bug: {bug.name}", "wolfpine", "FAIL",
                            f"NOT caught: '{records[0]['name']}' still matches the model ({bug.bug})"))
        else:
            rows.append(Row("wormhole", f"planted bug: {bug.name}", "wolfpine", "ok",
                            f"caught: the run did not finish ({why[:300]})"))
    return rows


def _timing_rows(work: Path, records: list[dict]) -> list[Row]:
    from .timing import timing_rows

    return timing_rows(work / "profile", [r for r in records if not r.get("blocked")])


def run(cases: Sequence[str] = (), planted: bool | Sequence[str] = False, cost_model: bool = False, work_dir: Path | None = None,
        keep: bool = False) -> list[Row]:
    """Run the wolfpine check; returns the report's rows (see the module docstring).

    Args:
        cases: case name prefixes (default: all of :data:`.cases.CASES`).
        planted: also run :data:`PLANTED_BUGS` (each must fail its case): True for all, or their names.
        cost_model: ``TT_SIM_COST_MODEL=1``: report the reader's simulated cycles per K/V tile.
        work_dir: scratch folder (JIT cache, profiles); default a new temporary one.
        keep: leave ``work_dir`` in place.

    Returns:
        Rows; wolfpine or the RISC-V toolchain missing gives one "skipped" row ("FAIL" under ``CI=true``).
    """
    from ttnn_flashdecode.tools.silicon_check.toolchain import INSTALL_HINT, in_ci, missing_toolchain

    from .cases import CASES
    from .root import build_wolfpine_root, wolfpine_missing

    why = wolfpine_missing()
    missing = missing_toolchain()
    if missing:
        why = f"missing {', '.join(missing)}; install with: {INSTALL_HINT}"
    if why:
        return [Row("wormhole", "wolfpine and the RISC-V toolchain", "host", "FAIL" if in_ci() else "skipped", why)]
    root = build_wolfpine_root()
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="ttnn-flashdecode-wolfpine-"))
    try:
        selected = [c.name for c in CASES if not cases or any(c.name.startswith(n) for n in cases)]
        if cost_model:  # one process per case: the profile's counters do not tell programs apart
            rows = []
            for i, name in enumerate(selected):
                records, why = _run_cases(root, work / f"case{i}", [name], cost_model)
                rows += _case_rows(records, 1, why) + _timing_rows(work / f"case{i}", records)
        else:
            records, why = _run_cases(root, work / "cases", list(cases), cost_model)
            rows = _case_rows(records, len(selected), why)
        if planted:
            rows += _planted_rows(root, work / "planted", () if planted is True else planted)
    finally:
        if not keep and not work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ttnn_flashdecode wolfpine-check``: print the table; exit 0 when every row is ok
    (or blocked, with its reason), 1 when any failed, 3 when the check could not run (outside CI)."""
    parser = argparse.ArgumentParser(
        prog="python -m ttnn_flashdecode wolfpine-check", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__, epilog="exit status: 0 every row ok (blocked rows say why), 1 a row failed, 3 the check "
                                    "could not run (wolfpine or the RISC-V toolchain missing; under CI=true a failure)")
    parser.add_argument("--case", action="append", default=[], help="run only cases whose name starts with this")
    parser.add_argument("--planted", action="store_true", help="also run the planted reader bugs (each must be caught)")
    parser.add_argument("--cost-model", action="store_true",
                        help="TT_SIM_COST_MODEL=1: the reader's simulated cycles per K/V tile (uncalibrated)")
    parser.add_argument("--work", type=Path, help="scratch folder to use and keep")
    parser.add_argument("--json", type=Path, help="also write the rows to this file as JSON")
    parser.add_argument("--fpu-timing", action="store_true",
                        help="instead: time single FPU / unpack / pack compute API calls on wolfpine (fpu_timing.py) and "
                             "print them beside the device model's cycles; --case then selects ops, --config configs")
    from .fpu_timing import CONFIGS, OPS, config_label

    labels = [config_label(*config) for config in CONFIGS]
    parser.add_argument("--config", action="append", default=[],
                        help="with --fpu-timing: configs by label or a prefix of one (default all): "
                             + ", ".join(repr(label) for label in labels) + "; e.g. 'HiFi2 fp32' "
                             "(ops for --case: " + ", ".join(op.name for op in OPS) + ")")
    parser.add_argument("--calls", type=int, default=16, help="with --fpu-timing: N (the second program runs 2N calls)")
    args = parser.parse_args(argv)
    unknown = [c for c in args.config if not any(label.startswith(c) for label in labels)]
    if unknown:
        parser.error(f"--config: expected a config label or a prefix of one ({', '.join(labels)}), got {unknown[0]!r}")
    start = time.perf_counter()
    if args.fpu_timing:
        return _fpu_timing_main(args, start)
    rows = run(args.case, args.planted, args.cost_model or os.environ.get("TT_SIM_COST_MODEL") == "1",
               work_dir=args.work, keep=args.work is not None)
    print(format_table(rows))
    failed = sum(r.failed for r in rows)
    skipped = sum(r.result == "skipped" for r in rows)
    blocked = sum(r.result == "blocked" for r in rows)
    print(f"\nwolfpine check: {len(rows) - failed - skipped - blocked} ok, {failed} failed, {blocked} blocked, "
          f"{skipped} skipped in {time.perf_counter() - start:.0f} s (simulated Wormhole; probe compute kernel: "
          f"--help says what this proves and what not)")
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    return 1 if failed else 3 if skipped else 0


def _fpu_timing_main(args, start: float) -> int:
    """``wolfpine-check --fpu-timing``: the table of :func:`.fpu_timing.run`; exit 0 all ran and computed
    right, 1 a probe failed, 3 wolfpine or the toolchain missing (outside CI)."""
    from ttnn_flashdecode.tools.device_model.report import format_fpu_timing
    from ttnn_flashdecode.tools.silicon_check.toolchain import INSTALL_HINT, in_ci, missing_toolchain

    from .fpu_timing import run as run_fpu_timing
    from .root import wolfpine_missing

    missing = missing_toolchain()
    why = wolfpine_missing() or (f"missing {', '.join(missing)}; install with: {INSTALL_HINT}" if missing else None)
    if why:
        print(f"wolfpine FPU timing {'FAILED' if in_ci() else 'skipped'}: {why}")
        return 1 if in_ci() else 3
    results, status = run_fpu_timing(args.case, args.config, args.calls, work_dir=args.work)
    if results:
        print(format_fpu_timing(results))
    if status:
        print(f"\n{status}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    failed = not results or any(not r["ok"] for r in results)
    print(f"\nwolfpine FPU timing: {len(results)} op x config rows in {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0
