"""Silicon check: the op's device path through tt-metal's own JIT, on a MOCK device, without a card.

``python -m ttnn_flashdecode silicon-check`` (and ``tests/test_silicon_check.py``) does, per
architecture (Wormhole B0 8x8, Blackhole 13x10):

1. **Device path** -- in a subprocess, from a scratch folder, with ``TT_METAL_MOCK_CLUSTER_DESC_PATH``
   naming this package's one-chip descriptor and ``TT_METAL_RUNTIME_ROOT`` a root whose compiler is
   Debian's upstream RISC-V GCC behind a flag-translating wrapper (:mod:`.fake_root`),
   ``ttnn.open_device`` opens a mock device and :mod:`.mock_cases` calls
   :func:`ttnn_flashdecode.attention` on real DRAM tensors for every request kind and both split
   paths. ``ttnn.generic_op`` runs tt-metal's whole host pipeline on the op's real descriptor: the
   reader and writer are JIT-compiled and linked with tt-metal's own flags, generated headers and
   linker scripts; tt-metal checks CB sizes against L1, runtime-arg counts, semaphore ids, cores
   against the worker grid and the kernel images' sizes.
   Beside them, on the mock T3K (``op/mock_clusters/t3k.yaml``: 8 Wormhole chips), ``ttnn.open_mesh_device``
   opens 1x8 and 2x4 meshes and :data:`.mock_cases.MESH_CASES` run the op tensor-parallel (heads sharded
   over the chips; one ``generic_op`` with a ``MeshProgramDescriptor`` per call): rows ``t3k ... mesh``.
2. **Compute kernel per thread** (:mod:`.compute_syntax`) -- each logged TRISC compile line
   (UNPACK, MATH, PACK; every compile-time-arg variant) replayed with ``-fsyntax-only`` against the
   wheel's LLK headers and SFPI's headers (:func:`.toolchain.sfpi_include_dir`): a real SFPI install
   where there is one, else this package's SFPI stand-in (``sfpi_standin/``).
3. **Code size** (:mod:`.code_size`) -- reader (NCRISC) and writer (BRISC) ``.text``, JIT build and
   watcher build, against ``MEM_<PROCESSOR>_KERNEL_SIZE``.

What it proves: the dataflow kernels compile and link for the real processors with tt-metal's flags
and fit their code limits; the compute kernel parses and type-checks per thread against the real
LLK API (and SFPI's API as the headers in use declare it); tt-metal's host-side program checks accept every descriptor the cases build.

What it cannot see: nothing executes (no numerics, no hangs, no NoC ordering: the emulator covers
those); SFPI's back end never runs on the compute kernel (register pressure, ``v_if`` lowering,
replay ranges, immediate-operand ranges of TTI instructions, compute code size); without an SFPI
install the compute kernel is type-checked against the package's SFPI stand-in, declarations
written for this project from the wheel's LLK call sites (not SFPI's headers), so where a
declaration guesses SFPI wrong the check can give a false error or a false pass; GCC 12 is not
SFPI's GCC 15 (dropped ``-ftt-*`` extensions, ``-Wno-attributes``); dispatch-side limits
(kernel-config buffer size) are probably not exercised on a mock device.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ttnn_flashdecode.op.devices import MOCK_CLUSTER_ARCHS, mock_cluster_descriptor

__all__ = ["ARCHS", "Row", "mock_cluster_descriptor", "run", "main"]

HERE = Path(__file__).resolve().parent
ARCHS = MOCK_CLUSTER_ARCHS
#: The op's dataflow kernels and the processor each runs on (tt-metal's JIT folder names).
DATAFLOW_KERNELS = {"attention_reader": "ncrisc", "attention_writer": "brisc"}
COMPUTE_KERNEL = "attention_compute"
#: Watcher builds are slow (a compile and link each): where a kernel's limit is L1-sized (BRISC,
#: Blackhole's NCRISC; ~1 % used) its largest JIT variants stand for the rest; under an instruction
#: RAM's limit every variant is built (``code_size.IRAM_LIMIT_BYTES``).
WATCHER_VARIANTS = 2
#: The multi-chip mock cluster of the mesh cases (issue 23; ``mock_cases.MESH_CASES``), its chips' arch,
#: and the report's ``arch`` column for their rows.
MESH_CLUSTER, MESH_ARCH = "t3k", "wormhole_b0"
CASE_TIMEOUT_S = 900
#: The arch ``--quick`` trims to ``mock_cases.QUICK_CASE_NAMES`` (Blackhole: its NCRISC has no 16 KiB
#: IRAM limit, so Wormhole is the one whose every variant's size matters).
QUICK_ARCH = "blackhole"




@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the report."""

    arch: str
    check: str  #: a mock case, or kernel and build
    where: str  #: generic_op, a processor (NCRISC, BRISC) or a TRISC thread (UNPACK, MATH, PACK)
    result: str  #: "ok", "FAIL" or "skipped"
    figure: str  #: seconds, bytes / limit, errors -- or why it failed / was skipped

    @property
    def failed(self) -> bool:
        return self.result == "FAIL"


def this_package_first(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the folder holding THIS ``ttnn_flashdecode`` first on ``PYTHONPATH``: a check's
    subprocess runs in a scratch folder, where the interpreter's own install (an editable install
    may point at another checkout) would otherwise decide which package and kernels it checks."""
    home = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (home, env.get("PYTHONPATH", "")) if p)
    return env


def _environment(arch: str, root: Path, work: Path, cluster: str | None = None) -> dict[str, str]:
    """The mock-device subprocess's environment: ``cluster`` (default ``arch``) names the mock cluster."""
    env = this_package_first(dict(os.environ))
    env.update(TT_METAL_MOCK_CLUSTER_DESC_PATH=str(mock_cluster_descriptor(cluster or arch)), TT_METAL_RUNTIME_ROOT=f"{root}/",
               TT_METAL_CACHE=f"{work / 'jit-cache'}/", TT_METAL_LOGGER_LEVEL="ERROR", LOGURU_LEVEL="WARNING",
               SILICON_CHECK_JIT_LOG=str(work / "jit.log"))
    return env


def _start_mock_cases(arch: str, root: Path, work: Path, mesh: bool = False, quick: bool = False) -> subprocess.Popen:
    """``mock_cases`` in a subprocess: the one-chip cases on ``arch``'s mock chip (``quick``: only
    ``mock_cases.QUICK_CASE_NAMES``), or (``mesh``) the mesh cases on the mock T3K (``MESH_ARCH`` chips)."""
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "ttnn_flashdecode.tools.silicon_check.mock_cases", *(["--mesh"] * mesh),
                             *(["--quick"] * quick)],
                            cwd=work, env=_environment(arch, root, work, MESH_CLUSTER if mesh else None),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _case_rows(arch: str, process: subprocess.Popen, mesh: bool = False, quick: bool = False) -> list[Row]:
    from .mock_cases import CASES, LINE_PREFIX, MESH_CASES, quick_cases

    cases = MESH_CASES if mesh else quick_cases() if quick else CASES

    try:
        stdout, stderr = process.communicate(timeout=CASE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        stderr += f"\n(timed out after {CASE_TIMEOUT_S} s)"
    records = [json.loads(line[len(LINE_PREFIX):]) for line in stdout.splitlines() if line.startswith(LINE_PREFIX)]
    rows = [Row(arch, r["name"], "generic_op", "ok" if r["ok"] else "FAIL",
                f"{r['seconds']:.1f} s" if r["ok"] else r["error"]) for r in records]
    if len(records) < len(cases):
        tail = " | ".join(line for line in stderr.splitlines()[-12:] if line.strip())[-1500:]
        rows.append(Row(arch, f"mock device run (exit status {process.returncode}; {len(records)} of {len(cases)} cases ran)",
                        "generic_op", "FAIL", tail or "no output"))
    return rows


def _size_rows(arch: str, lines, compiler: Path, scratch: Path) -> list[Row]:
    from .code_size import kernel_sizes

    rows = []
    for result in kernel_sizes(lines, arch, DATAFLOW_KERNELS, compiler, scratch, watcher_variants=WATCHER_VARIANTS):
        label = f"{result.kernel} {result.build} build ({result.variants} variants)"
        if result.error:
            rows.append(Row(arch, label, result.processor, "FAIL", result.error))
            continue
        share = 100 * result.largest_text_bytes / result.limit_bytes
        rows.append(Row(arch, label, result.processor, "ok" if result.ok else "FAIL",
                        f"{result.largest_text_bytes} / {result.limit_bytes} B ({share:.1f}%)"))
    return rows


def _compute_rows(arch: str, lines, compiler: Path) -> list[Row]:
    from .compute_syntax import check_compute_threads
    from .toolchain import SFPI_STANDIN_DIR, in_ci, sfpi_include_dir

    include, source = sfpi_include_dir()
    headers = "stand-in" if include == SFPI_STANDIN_DIR else source.split("=")[0]
    rows = []
    for result in check_compute_threads(lines, COMPUTE_KERNEL, compiler, include):
        label = f"{COMPUTE_KERNEL} -fsyntax-only ({result.variants} variants)"
        if result.skipped:
            rows.append(Row(arch, label, result.thread, "FAIL" if in_ci() else "skipped", f"{result.skipped}: {source}"))
        elif result.errors:
            rows.append(Row(arch, label, result.thread, "FAIL", " | ".join(result.errors)[:1500]))
        else:
            rows.append(Row(arch, label, result.thread, "ok", f"0 errors (SFPI headers: {headers})"))
    return rows


def run(archs: Sequence[str] = ARCHS, work_dir: Path | None = None, keep: bool = False, quick: bool = False) -> list[Row]:
    """Run the silicon check; returns the report's rows (see the module docstring).

    Args:
        archs: architectures to check, a subset of :data:`ARCHS`.
        quick: CI's tier: Blackhole runs only ``mock_cases.QUICK_CASE_NAMES`` (every compile-time
            feature once, about a third of the cases and of the time); Wormhole and the mesh run all.
        work_dir: scratch folder (JIT cache, logs, watcher builds); default a new temporary one.
            It must not hold an earlier run's JIT cache (a cached kernel is not recompiled, so its
            compile lines would not be logged).
        keep: leave ``work_dir`` in place (a temporary one is removed otherwise).

    Returns:
        Rows; a missing toolchain gives one "skipped" row per arch (a "FAIL" row under ``CI=true``)
        naming the packages and the command that installs them.
    """
    from .fake_root import build_root, wrapper_path
    from .jit_log import read_jit_log
    from .toolchain import INSTALL_HINT, in_ci, missing_toolchain

    for arch in archs:
        mock_cluster_descriptor(arch)
    missing = missing_toolchain()
    if missing:
        why = f"missing {', '.join(missing)}; install with: {INSTALL_HINT}"
        return [Row(arch, "RISC-V toolchain", "host", "FAIL" if in_ci() else "skipped", why) for arch in archs]
    root = build_root()
    compiler = wrapper_path(root)
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="ttnn-flashdecode-silicon-"))
    rows: list[Row] = []
    try:
        # The two mock devices run side by side (each is mostly one core of JIT work); the
        # per-thread compute replay then takes both cores.
        quick_on = {arch: quick and arch == QUICK_ARCH for arch in archs}
        processes = {arch: _start_mock_cases(arch, root, work / arch, quick=quick_on[arch]) for arch in archs}
        if MESH_ARCH in archs:  # the mock T3K's 1x8 mesh, beside the one-chip runs
            rows += _case_rows(MESH_CLUSTER, _start_mock_cases(MESH_ARCH, root, work / MESH_CLUSTER, mesh=True), mesh=True)
        for arch in archs:
            rows += _case_rows(arch, processes[arch], quick=quick_on[arch])
            lines = read_jit_log(work / arch / "jit.log") if (work / arch / "jit.log").exists() else []
            rows += _size_rows(arch, lines, compiler, work / arch / "watcher")
            rows += _compute_rows(arch, lines, compiler)
    finally:
        if not keep and not work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return rows


def format_table(rows: Sequence[Row]) -> str:
    """The report as an aligned text table (one row per line, header first)."""
    header = Row("arch", "check", "on", "result", "figure")
    widths = [max(len(getattr(r, f)) for r in (header, *rows)) for f in ("arch", "check", "where", "result")]
    lines = []
    for r in (header, *rows):
        cells = [getattr(r, f).ljust(w) for f, w in zip(("arch", "check", "where", "result"), widths)]
        lines.append("  ".join(cells) + "  " + r.figure)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ttnn_flashdecode silicon-check``: print the table; exit 0 when every row is ok,
    1 when any failed, 3 when something could not be checked (skipped, outside CI)."""
    parser = argparse.ArgumentParser(
        prog="python -m ttnn_flashdecode silicon-check", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__, epilog="exit status: 0 every row ok, 1 a row failed, 3 something could not be checked "
                                    "(a prerequisite is missing; under CI=true that is a failure instead)")
    parser.add_argument("--arch", action="append", choices=ARCHS, help="check only this architecture (repeatable)")
    parser.add_argument("--work", type=Path, help="scratch folder to use and keep (must not hold an earlier run)")
    parser.add_argument("--json", type=Path, help="also write the rows to this file as JSON")
    parser.add_argument("--quick", action="store_true",
                        help=f"CI's tier: {QUICK_ARCH} runs only the cases that build every compile-time feature once "
                             "(mock_cases.QUICK_CASE_NAMES); the other arch and the mesh run every case")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = run(args.arch or ARCHS, work_dir=args.work, keep=args.work is not None, quick=args.quick)
    print(format_table(rows))
    failed = sum(r.failed for r in rows)
    skipped = sum(r.result == "skipped" for r in rows)
    print(f"\nsilicon check: {len(rows) - failed - skipped} ok, {failed} failed, {skipped} skipped "
          f"in {time.perf_counter() - start:.0f} s (mock devices: nothing executed; --help says what this proves and what not)")
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    return 1 if failed else 3 if skipped else 0
