"""FPU timing probe: one compute API call's cycles as wolfpine simulates them, beside the device model's.

``python -m ttnn_flashdecode wolfpine-check --fpu-timing`` runs ``fpu_timing_compute.cpp`` (one core,
through ``ttnn.generic_op`` with a descriptor built here; reader ``fpu_timing_reader.cpp`` pushes two
tiles once, writer ``fpu_timing_writer.cpp`` drains one) on wolfpine's simulated Wormhole with its
cost model on (``TT_SIM_COST_MODEL=1``) and its profile counters recorded (``TT_SIM_PROFILE``). Per op
(:data:`OPS`) and compute config (:data:`CONFIGS`: math fidelity x DST mode) the kernel runs the op's
init once and then N, and in a second program 2N, calls of the op on the same tiles. The op's
simulated cycles per call are the difference of the two programs' spans over N: start-up, the CB
handshakes and the final pack cancel (:func:`.timing.thread_spans`).

Every output is checked against a float64 model of the op (:func:`expected`): small integers, exact
in bfloat16 and float32 DST, so a probe that computed garbage (an SFPU path compiled to nothing, a
wrong init) fails instead of timing nothing.

The figures: **simulated** = wolfpine 2.2's cost model, uncalibrated (its own documentation calls
every cost a floor, not silicon); **modelled** = :func:`ttnn_flashdecode.tools.device_model.llk_costs.call_cost`
(the math thread's cycles; the pack thread's for ``pack_tile``). Neither is measured on a card.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["OPS", "CONFIGS", "Op", "expected", "make_inputs", "read_counters", "program_windows", "per_call",
           "provenance", "run", "probe_main"]

LINE_PREFIX = "FPU "
HERE = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class Op:
    """One op under test: its id in ``fpu_timing_compute.cpp``, the device model's call name, the
    thread whose span times it, and the wolfpine instructions it issues (their provenance is printed)."""

    name: str
    code: int
    model_call: str
    thread: str  #: "math" (TRISC1) or "pack" (TRISC2)
    instructions: tuple[tuple[str, str], ...]  #: (unit, instruction) in wolfpine's cost table


OPS = (
    Op("matmul_tiles", 0, "matmul_tiles", "math", (("MATH", "MVMUL"), ("UNPACK", "UNPACR"))),
    Op("reduce_tile MAX ROW", 1, "reduce_tile", "math", (("MATH", "GMPOOL"), ("MATH", "MOVD2B"), ("MATH", "TRNSPSRCB"), ("UNPACK", "UNPACR"))),
    Op("reduce_tile SUM ROW", 2, "reduce_tile", "math", (("MATH", "MVMUL"), ("MATH", "GAPOOL"), ("UNPACK", "UNPACR"))),
    Op("add_tiles", 3, "add_tiles", "math", (("MATH", "ELWADD"), ("UNPACK", "UNPACR"))),
    Op("sub_tiles_bcast_cols", 4, "sub_tiles_bcast", "math", (("MATH", "ELWSUB"), ("UNPACK", "UNPACR"))),
    Op("mul_tiles", 5, "mul_tiles", "math", (("MATH", "ELWMUL"), ("UNPACK", "UNPACR"))),
    Op("copy_tile", 6, "copy_tile", "math", (("MATH", "MOVA2D"), ("UNPACK", "UNPACR"))),
    Op("pack_tile", 7, "pack_tile", "pack", (("PACK", "PACR"),)),
)

#: (math fidelity, fp32 DST)
CONFIGS = tuple((f, fp32) for fp32 in (True, False) for f in ("LoFi", "HiFi2", "HiFi4"))


def config_label(fidelity: str, fp32_dest: bool) -> str:
    return f"{fidelity} {'fp32' if fp32_dest else 'bf16'} DST"


def _sparse(rng: np.random.Generator, nonzero_per_row: int = 4) -> np.ndarray:
    """A 32x32 tile of {-1, 0, 1} with at most ``nonzero_per_row`` non-zeros a row: every sum of N <= 64
    calls' row sums stays an integer of magnitude <= 256, exact in bfloat16."""
    tile = np.zeros((32, 32), np.float32)
    for row in range(32):
        cols = rng.choice(32, size=nonzero_per_row, replace=False)
        tile[row, cols] = rng.choice([-1.0, 1.0], size=nonzero_per_row)
    return tile


def make_inputs(op: Op, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Tiles A and B for ``op``: B a permutation for matmul (so N accumulated products stay exact),
    the reduce scaler (1.0 in the first row of each 16x16 face, as tt-metal's
    ``generate_reduce_scaler`` lays it out) for reduce, otherwise another sparse tile."""
    a = _sparse(rng)
    if op.name.startswith("matmul"):
        b = np.eye(32, dtype=np.float32)[rng.permutation(32)]
    elif op.name.startswith("reduce"):
        b = np.zeros((32, 32), np.float32)
        b[[0, 16], :] = 1.0
    else:
        b = _sparse(rng)
    return a, b


def expected(op: Op, a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The probe's output tile in float64 after ``n`` calls, and the mask of the elements that are
    defined (a row reduce defines column 0 only)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    everything = np.ones((32, 32), bool)
    column0 = np.zeros((32, 32), bool)
    column0[:, 0] = True
    if op.code == 0:
        return n * (a @ b), everything
    if op.code == 1:  # MAX pools into DST, which starts at zero: max(0, row max)
        out = np.zeros((32, 32))
        out[:, 0] = np.maximum(a.max(axis=1), 0.0)
        return out, column0
    if op.code == 2:
        out = np.zeros((32, 32))
        out[:, 0] = n * a.sum(axis=1)
        return out, column0
    if op.code == 3:
        return a + b, everything
    if op.code == 4:
        return a - b[:, :1], everything
    if op.code == 5:  # ELWMUL accumulates onto DST (the ISA's rule; wolfpine models it): N products
        return n * a * b, everything
    return a, everything


# ---------------------------------------------------------------------------------------------
# The profile counters (TT_SIM_PROFILE): one timeline for the whole process, no per-program id

#: Tensix units whose ``compute_ops`` mark a program's compute activity.
TENSIX_UNITS = ("MATRIX", "UNPACKER", "PACKER")
#: Packer ops further apart than this belong to different programs (a program's packs are tens of
#: cycles apart; consecutive programs thousands: host round trips, DRAM reads).
PACK_GAP_CYCLES = 1000
#: A program starts after the host's turn between launches (thousands of idle cycles); its own idle
#: stretches (the reader's DRAM reads) are ~1,100 cycles under wolfpine's cost model.
IDLE_GAP_CYCLES = 3000


def read_counters(profile: Path):
    """The ``TT_SIM_PROFILE`` folder's counter rows (pandas: cycle, unit, counter_name, value, ...)."""
    import glob

    import pandas as pd
    import pyarrow.parquet as pq

    files = sorted(glob.glob(str(Path(profile) / "**" / "*.parquet"), recursive=True))
    if not files:
        raise FileNotFoundError(f"no parquet counters under {profile}")
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)


def program_windows(counters, programs: int) -> list[dict]:
    """Per launched program (in launch order), from the counters of a one-core run: ``span``, the
    cycles from its first Tensix op (``compute_ops`` of :data:`TENSIX_UNITS`) to its last pack, and
    the ops each unit issued in it (``MATRIX``, ``UNPACKER``, ``PACKER``).
    Its first op is the first after the window's last idle stretch longer than :data:`IDLE_GAP_CYCLES`
    (the previous program's last MATRIX op can land in a counter row just after its pack).

    wolfpine's counters carry no program id here (``kernel_id`` stays 0 under slow dispatch), so the
    programs are told apart by their packs: every program ends with one burst of packer ops;
    program k's window runs from the end of burst k-1 (exclusive) to the end of burst k. The first
    window has no previous burst and includes device start-up: the caller launches a warm-up program
    first and discards it. Each counter row covers the cycles since the previous flush
    (``TT_SIM_PROFILE_INTERVAL``), so a span is exact to about one interval.

    Raises:
        ValueError: the counters hold a different number of pack bursts than ``programs``.
    """
    ops = counters[(counters.counter_name == "compute_ops") & (counters.value > 0)
                   & counters.unit.isin(TENSIX_UNITS)]
    packs = sorted(int(c) for c in ops[ops.unit == "PACKER"].cycle.unique())
    ends = [c for i, c in enumerate(packs) if i + 1 == len(packs) or packs[i + 1] - c > PACK_GAP_CYCLES]
    if len(ends) != programs:
        raise ValueError(f"{len(ends)} pack bursts in the counters for {programs} programs launched")
    windows, previous = [], -1
    for end in ends:
        inside = ops[(ops.cycle > previous) & (ops.cycle <= end)]
        cycles = sorted(int(c) for c in inside.cycle.unique())
        start = next((b for a, b in zip(cycles[::-1][1:], cycles[::-1]) if b - a > IDLE_GAP_CYCLES), cycles[0])
        window = {"span": end - start, "start": start, "end": end}
        inside = inside[inside.cycle >= start]
        for unit in TENSIX_UNITS:
            window[unit] = int(inside[inside.unit == unit].value.sum())
        windows.append(window)
        previous = end
    return windows


def per_call(records: list[dict], windows: list[dict]) -> list[dict]:
    """Pairs each op and config's programs (N and 2N calls, or more): simulated cycles per call = the
    difference of the largest and smallest program's spans over their difference in calls; MATRIX /
    UNPACKER / PACKER ops per call likewise; ``marginals``, the cycles per call between consecutive
    programs (with three or more, equal when the cost is linear in the calls)."""
    by_key = {}
    for record, window in zip(records, windows):
        if record.get("warmup"):
            continue
        by_key.setdefault((record["op"], record["fidelity"], record["fp32_dest"]), []).append((record, window))
    results = []
    for (name, fidelity, fp32_dest), runs in by_key.items():
        runs.sort(key=lambda rw: rw[0]["n"])
        (small, w1), (large, w2) = runs[0], runs[-1]
        calls = large["n"] - small["n"]
        result = {"op": name, "fidelity": fidelity, "fp32_dest": fp32_dest, "n": small["n"],
                  "ok": all(r["ok"] for r, _ in runs),
                  "error": next((r["error"] for r, _ in runs if r.get("error")), ""),
                  "calls": [r["n"] for r, _ in runs], "spans": [w["span"] for _, w in runs],
                  "marginals": [(b[1]["span"] - a[1]["span"]) / (b[0]["n"] - a[0]["n"]) for a, b in zip(runs, runs[1:])],
                  "cycles_per_call": (w2["span"] - w1["span"]) / calls if calls else float("nan")}
        for unit in TENSIX_UNITS:
            result[f"{unit.lower()}_ops_per_call"] = (w2[unit] - w1[unit]) / calls if calls else float("nan")
        results.append(result)
    return results


def provenance(op: Op) -> str:
    """wolfpine's cost-table entries of the instructions ``op`` issues: occupancy and provenance."""
    import os

    import framework
    import yaml

    path = Path(os.path.dirname(framework.__file__)) / "pe" / "tensix" / "tensix_instruction_costs.yaml"
    units = yaml.safe_load(path.read_text())["units"]
    parts = []
    for unit, name in op.instructions:
        entry = units.get(unit, {}).get("instructions", {}).get(name)
        if entry is None:
            parts.append(f"{name}: not in the table")
            continue
        occupancy = entry.get("occupancy")
        if isinstance(occupancy, dict):
            occupancy = f"{'>=' if occupancy.get('bound') == 'at_least' else ''}{occupancy.get('cycles')}"
        scales = " x phases" if entry.get("scales_with") == "fidelity_phases" else ""
        parts.append(f"{name} {occupancy if occupancy is not None else '-'}{scales} ({entry.get('provenance')})")
    if any(unit == "UNPACK" for unit, _ in op.instructions):  # what bounds a bf16 tile's unpack in wolfpine
        rate = units["UNPACK"].get("l1_bandwidth", {})
        modes = "/".join(str(m.get("bytes_per_cycle")) for m in rate.get("throttle_modes", {}).values())
        parts.append(f"unpacker data phase {modes} B/cycle by throttle mode ({rate.get('provenance')})")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# The host side


def run(ops: Sequence[str] = (), configs: Sequence[str] = (), n: int = 16, work_dir: Path | None = None,
        interval: int = 10, timeout_s: float = 1800, multiples: Sequence[int] = (1, 2)) -> tuple[list[dict], str]:
    """Run the probes on wolfpine (one subprocess); returns :func:`per_call`'s results (plus ``model``,
    the device model's cycles, and ``provenance``) and a one-line status ("" when all ran).

    Args:
        ops: op name prefixes (default all of :data:`OPS`).
        configs: config label prefixes, e.g. "HiFi2 fp32" (default all of :data:`CONFIGS`).
        n: the smallest program's calls.
        multiples: the programs run ``n`` times these calls (default N and 2N).
        work_dir: scratch folder (JIT cache, profile); default a new temporary one, removed after.
        interval: ``TT_SIM_PROFILE_INTERVAL``, cycles per counter flush (a span's resolution).
    """
    import shutil
    import subprocess
    import tempfile

    from ttnn_flashdecode.tools.device_model import llk_costs as llk

    from . import _end_servers, _run_tag
    from .root import build_wolfpine_root, environment

    root = build_wolfpine_root()
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="ttnn-flashdecode-fpu-timing-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work / "profile", ignore_errors=True)
    tag = _run_tag()
    env = environment(root, work, tag, cost_model=True)
    env.update(TT_SIM_PROFILE=str(work / "profile"), TT_SIM_PROFILE_INTERVAL=str(interval),
               TT_METAL_CORE_GRID_OVERRIDE_TODEPRECATE="0,0")
    command = [sys.executable, "-m", "ttnn_flashdecode.tools.wolfpine_check.fpu_timing", "--n", str(n), "--multiples", ",".join(map(str, multiples))]
    for op in ops:
        command += ["--op", op]
    for config in configs:
        command += ["--config", config]
    try:
        process = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout_s)
        stdout, stderr, status = process.stdout, process.stderr, f"exit status {process.returncode}"
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
        stderr, status = "", f"timed out after {timeout_s} s"
    finally:
        _end_servers(tag)
    try:
        records = [json.loads(line[len(LINE_PREFIX):]) for line in stdout.splitlines() if line.startswith(LINE_PREFIX)]
        if not records:
            tail = " | ".join(line for line in stderr.splitlines()[-10:] if line.strip() and "DEBUG" not in line)
            return [], f"no program ran ({status}): {tail[-1500:]}"
        results = per_call(records, program_windows(read_counters(work / "profile"), len(records)))
        for result in results:
            op = next(o for o in OPS if o.name == result["op"])
            cost = llk.call_cost(op.model_call, llk.ComputeConfig(result["fidelity"], result["fp32_dest"]))
            result["model"] = cost.pack if op.thread == "pack" else cost.math
            result["thread"] = op.thread
            result["provenance"] = provenance(op)
        return results, "" if status == "exit status 0" else f"{status} (a probe failed: see its row)"
    finally:
        if not work_dir:
            shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The device side (run in a subprocess with wolfpine's environment: root.environment)


def _program(ttnn, input_tensor, output_tensor, op: Op, n: int, fidelity: str, fp32_dest: bool):
    core = ttnn.CoreCoord(0, 0)
    cores = ttnn.CoreRangeSet([ttnn.CoreRange(core, core)])
    in_bytes = 32 * 32 * 2
    out_dtype = ttnn.float32 if fp32_dest else ttnn.bfloat16
    out_bytes = 32 * 32 * (4 if fp32_dest else 2)
    cbs = [ttnn.CBDescriptor(total_size=size, core_ranges=cores, format_descriptors=[
        ttnn.CBFormatDescriptor(buffer_index=index, data_format=dtype, page_size=size)])
        for index, dtype, size in ((0, ttnn.bfloat16, in_bytes), (1, ttnn.bfloat16, in_bytes), (16, out_dtype, out_bytes))]

    def args(values):
        rt = ttnn.RuntimeArgs()
        rt[0][0] = list(values)
        return rt

    kernels = [
        ttnn.KernelDescriptor(kernel_source=str(HERE / "fpu_timing_reader.cpp"), core_ranges=cores,
                              compile_time_args=list(ttnn.TensorAccessorArgs(input_tensor).get_compile_time_args()),
                              runtime_args=args([input_tensor.buffer_address()]), config=ttnn.ReaderConfigDescriptor()),
        ttnn.KernelDescriptor(kernel_source=str(HERE / "fpu_timing_compute.cpp"), core_ranges=cores,
                              runtime_args=args([op.code, n]),
                              config=ttnn.ComputeConfigDescriptor(math_fidelity=getattr(ttnn.MathFidelity, fidelity),
                                                                  fp32_dest_acc_en=fp32_dest)),
        ttnn.KernelDescriptor(kernel_source=str(HERE / "fpu_timing_writer.cpp"), core_ranges=cores,
                              compile_time_args=list(ttnn.TensorAccessorArgs(output_tensor).get_compile_time_args()),
                              runtime_args=args([output_tensor.buffer_address()]), config=ttnn.WriterConfigDescriptor()),
    ]
    return ttnn.ProgramDescriptor(kernels=kernels, semaphores=[], cbs=cbs)


def _run_one(ttnn, device, op: Op, n: int, fidelity: str, fp32_dest: bool, rng) -> dict:
    from ttnn_flashdecode.op.launch import to_numpy

    a, b = make_inputs(op, rng)
    both = np.concatenate([a, b], axis=1).reshape(1, 1, 32, 64)
    input_tensor = ttnn.Tensor(both, ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=device, mem_config=ttnn.DRAM_MEMORY_CONFIG)
    out_dtype = ttnn.float32 if fp32_dest else ttnn.bfloat16
    output_tensor = ttnn.Tensor(np.zeros((1, 1, 32, 32), np.float32), out_dtype, layout=ttnn.TILE_LAYOUT, device=device,
                                mem_config=ttnn.DRAM_MEMORY_CONFIG)
    program = _program(ttnn, input_tensor, output_tensor, op, n, fidelity, fp32_dest)
    ttnn.generic_op([input_tensor, output_tensor], program)
    ttnn.synchronize_device(device)
    got = to_numpy(output_tensor).reshape(32, 32).astype(np.float64)
    want, defined = expected(op, a, b, n)
    bad = defined & (got != want)
    record = {"ok": not bad.any(), "mismatches": int(bad.sum())}
    if bad.any():
        where = np.argwhere(bad)[:3]
        record["error"] = f"{int(bad.sum())} of {int(defined.sum())} elements differ; " + ", ".join(
            f"{tuple(int(i) for i in w)}: got {got[tuple(w)]}, want {want[tuple(w)]}" for w in where)
    return record


def probe_main(argv: Sequence[str] | None = None) -> int:
    """The subprocess: one line ``FPU {json}`` per program launched, in launch order."""
    import ttnn

    parser = argparse.ArgumentParser()
    parser.add_argument("--op", action="append", help="op names (prefix) to run")
    parser.add_argument("--config", action="append", help="'HiFi2 fp32' style config labels to run")
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--multiples", default="1,2", help="programs of n times these calls (default N and 2N)")
    args = parser.parse_args(argv)
    multiples = [int(m) for m in args.multiples.split(",")]
    ops = [o for o in OPS if not args.op or any(o.name.startswith(p) for p in args.op)]
    configs = [c for c in CONFIGS if not args.config
               or any(config_label(*c).startswith(label) for label in args.config)]
    device = ttnn.open_device(device_id=0)
    failed = 0
    try:
        # A warm-up program first: each timed program's window then starts after a pack (program_windows).
        runs = [(OPS[6], 1, *configs[0], True)] + [(op, n, fidelity, fp32_dest, False) for fidelity, fp32_dest in configs
                                                    for op in ops for n in (m * args.n for m in multiples)]
        for op, n, fidelity, fp32_dest, warmup in runs:
            start = time.perf_counter()
            record = {"op": op.name, "fidelity": fidelity, "fp32_dest": fp32_dest, "n": n, "warmup": warmup}
            try:
                record.update(_run_one(ttnn, device, op, n, fidelity, fp32_dest, np.random.default_rng(op.code)))
            except Exception as error:  # reported, not raised
                lines = [line for line in str(error).splitlines() if line.strip()]
                record.update(ok=False, error=f"{type(error).__name__}: " + " | ".join(lines[:6])[:1500])
            record["seconds"] = round(time.perf_counter() - start, 2)
            failed += not record["ok"]
            print(LINE_PREFIX + json.dumps(record), flush=True)
    finally:
        ttnn.close_device(device)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(probe_main())
