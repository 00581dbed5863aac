"""Host-path benchmark: ``python -m ttnn_flashdecode host-bench``.

Measures, on this machine's CPU, what one decode call costs the host: our op before
``ttnn.generic_op`` (validation, the cached plan and descriptor, the tensors it passes), our op
including ``generic_op``, ``generic_op`` alone on our cached descriptor (its floor: the launch
with inputs bound once) and on the smallest descriptor the op produces (one core: tt-metal's own
floor for this op), and ttnn's own ``ttnn.transformer.scaled_dot_product_attention_decode``
on the same shapes with a ``cur_pos_tensor``. Without a card it runs on a MOCK device (the silicon
check's fake tt-metal root and mock cluster descriptor, in a subprocess): ``generic_op`` then runs
tt-metal's whole host pipeline (program cache lookup, runtime-arg override, dispatch commands to a
mock queue) but nothing executes, so these are host figures only, never device time.

Prints one row per (batch, path): median and p90 microseconds per call over ``--calls`` calls
after ``--warmup`` calls (the first compiles). The paths take turns in rounds of :data:`ROUND`
calls, so a shared machine's changing load weighs on all of them alike.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

LINE_PREFIX = "HOSTBENCH "
#: MiniCPM5-1B's attention (16 Q / 2 KV heads, head_dim 128) on a 2048-position cache.
N_Q, N_KV, HEAD_DIM, CAPACITY = 16, 2, 128, 2048


ROUND = 10
"""Calls per path per round: the paths take turns, ROUND calls each, so a change in the machine's
load (this project's machines are shared) weighs on every path alike and the ratios hold."""


def _time_interleaved(paths: dict, calls: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per call of each path (``name -> (call, setup)``; ``setup`` a context manager factory
    or None), the paths taking turns in rounds of :data:`ROUND` calls."""
    seconds = {name: [] for name in paths}
    for name, (call, setup) in paths.items():
        with setup() if setup else contextlib.nullcontext():
            for _ in range(warmup):
                call()
    for first in range(0, calls, ROUND):
        for name, (call, setup) in paths.items():
            with setup() if setup else contextlib.nullcontext():
                for _ in range(min(ROUND, calls - first)):
                    start = time.perf_counter()
                    call()
                    seconds[name].append(time.perf_counter() - start)
    return seconds


def measure(device, batch: int, calls: int = 200, warmup: int = 5) -> dict[str, list[float]]:
    """Seconds per call for each host path at ``batch`` users on ``device`` (see the module docstring)."""
    import ttnn

    from ttnn_flashdecode import attention
    from ttnn_flashdecode.op import launch
    from ttnn_flashdecode.op.operation import cached_launch

    rng = np.random.default_rng(0)

    def tensor(shape, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, values=None):
        data = rng.standard_normal(shape, dtype=np.float32) if values is None else values
        return ttnn.Tensor(data, dtype, layout=layout, device=device, mem_config=ttnn.DRAM_MEMORY_CONFIG)

    q = tensor((1, 1, batch, N_Q * HEAD_DIM))
    q_1bqd = tensor((1, batch, N_Q, HEAD_DIM))
    k = tensor((batch, N_KV, CAPACITY, HEAD_DIM))
    v = tensor((batch, N_KV, CAPACITY, HEAD_DIM))
    positions = tensor((batch,), ttnn.int32, ttnn.ROW_MAJOR_LAYOUT,
                       np.arange(batch, dtype=np.int32) * (CAPACITY // max(batch, 1)))
    real_generic_op = ttnn.generic_op

    @contextlib.contextmanager
    def before_launch():  # stop just before the launch
        launch.ttnn.generic_op = lambda tensors, program: tensors[-1]
        try:
            yield
        finally:
            launch.ttnn.generic_op = real_generic_op

    attention(q, k, v, cur_pos_tensor=positions)  # the validated first call: the rest take the fast path
    # generic_op's own floor on this op's cached descriptor: the launch alone, inputs bound once.
    prepared = cached_launch(q, k, v, cur_pos_tensor=positions)
    bound = prepared.bind(q, k, v, positions)
    # ... and on the smallest descriptor this op produces: one user, one head of 32, 64 positions, one core.
    tiny = (tensor((1, 1, 1, 32)), tensor((1, 1, 64, 32)), tensor((1, 1, 64, 32)),
            tensor((1,), ttnn.int32, ttnn.ROW_MAJOR_LAYOUT, np.zeros(1, dtype=np.int32)))
    attention(*tiny[:3], cur_pos_tensor=tiny[3], grid=(1, 1))
    smallest = cached_launch(*tiny[:3], cur_pos_tensor=tiny[3], grid=(1, 1))
    smallest_bound = smallest.bind(*tiny)
    scale = HEAD_DIM ** -0.5
    return _time_interleaved({
        "ours, before generic_op": (lambda: attention(q, k, v, cur_pos_tensor=positions), before_launch),
        "ours, with generic_op": (lambda: attention(q, k, v, cur_pos_tensor=positions), None),
        "generic_op alone, our descriptor": (lambda: ttnn.generic_op(bound, prepared.program), None),
        "generic_op alone, smallest (1 core)": (lambda: ttnn.generic_op(smallest_bound, smallest.program), None),
        "ttnn sdpa_decode, with launch": (lambda: ttnn.transformer.scaled_dot_product_attention_decode(
            q_1bqd, k, v, cur_pos_tensor=positions, scale=scale), None),
    }, calls, warmup)


FLOOR_CBS, FLOOR_NAMED_ARGS = 20, 21
"""The synthetic descriptors' sizes: as many CBs as this op's unsplit program, and the named args
its reader reads."""


def _synthetic_program(ttnn, *, cbs: int = 0, named_args: int = 0, kernels: int = 1):
    """A one-core descriptor of ``kernels`` empty dataflow kernels (1 or 2) with ``named_args`` named
    compile-time args each and ``cbs`` CBs of one bfloat16 tile: what generic_op costs per item."""
    core = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(0, 0))])
    configs = (ttnn.ReaderConfigDescriptor, ttnn.WriterConfigDescriptor)
    program = ttnn.ProgramDescriptor(
        kernels=[ttnn.KernelDescriptor(
            kernel_source="void kernel_main() {}\n", source_type=ttnn.KernelDescriptor.SourceType.SOURCE_CODE,
            core_ranges=core, compile_time_args=[], named_compile_time_args=[(f"arg{i}", i) for i in range(named_args)],
            runtime_args=ttnn.RuntimeArgs(), common_runtime_args=[], config=configs[index]())
            for index in range(kernels)],
        semaphores=[],
        cbs=[ttnn.CBDescriptor(total_size=2048, core_ranges=core, format_descriptors=[ttnn.CBFormatDescriptor(
            buffer_index=index, data_format=ttnn.bfloat16, page_size=2048)]) for index in range(cbs)])
    program.custom_program_hash = 0xF1008 + 1000 * cbs + 10 * named_args + kernels
    return program


def measure_floor(device, calls: int = 200, warmup: int = 5) -> dict[str, list[float]]:
    """Seconds per cache-hit ``generic_op`` call on synthetic one-core descriptors: one empty kernel,
    then with :data:`FLOOR_CBS` CBs, then two kernels of :data:`FLOOR_NAMED_ARGS` named args each
    (what tt-metal's generic_op costs per CB and per named arg, whatever the kernels do)."""
    import ttnn

    def tile():
        return ttnn.Tensor(np.zeros((1, 1, 32, 32), dtype=np.float32), ttnn.bfloat16, layout=ttnn.TILE_LAYOUT,
                           device=device, mem_config=ttnn.DRAM_MEMORY_CONFIG)

    io = [tile(), tile()]
    programs = {
        "floor: 1 empty kernel": _synthetic_program(ttnn),
        f"floor: + {FLOOR_CBS} CBs": _synthetic_program(ttnn, cbs=FLOOR_CBS),
        f"floor: 2 kernels x {FLOOR_NAMED_ARGS} named args": _synthetic_program(ttnn, named_args=FLOOR_NAMED_ARGS, kernels=2),
    }
    return _time_interleaved({name: ((lambda p=program: ttnn.generic_op(io, p)), None)
                              for name, program in programs.items()}, calls, warmup)


def _child(batches: Sequence[int], calls: int, warmup: int, floor: bool = False) -> int:
    import ttnn

    device = ttnn.open_device(device_id=0)
    try:
        for batch in batches:
            for path, seconds in measure(device, batch, calls, warmup).items():
                print(LINE_PREFIX + json.dumps({"batch": batch, "path": path, "seconds": seconds}), flush=True)
        if floor:
            for path, seconds in measure_floor(device, calls, warmup).items():
                print(LINE_PREFIX + json.dumps({"batch": "-", "path": path, "seconds": seconds}), flush=True)
    finally:
        ttnn.close_device(device)
    return 0


def run(batches: Sequence[int] = (1, 32), calls: int = 200, warmup: int = 5, arch: str = "wormhole_b0",
        floor: bool = False) -> list[dict]:
    """Run the benchmark in a subprocess on a card when one is present, else on a mock ``arch``
    device; returns ``[{"batch", "path", "seconds"}]`` (``floor``: also :func:`measure_floor`'s rows,
    batch ``"-"``).

    Raises:
        RuntimeError: no card and no RISC-V toolchain for the mock device (the message says how to
            install it), or the subprocess failed.
    """
    from ttnn_flashdecode.op.devices import detect_devices

    args = [sys.executable, "-m", "ttnn_flashdecode.tools.host_bench", "--child", "--calls", str(calls),
            "--warmup", str(warmup), "--batches", ",".join(map(str, batches)), *(["--floor"] if floor else [])]
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="ttnn-flashdecode-host-bench-") as work:
        if detect_devices().count == 0:
            from ttnn_flashdecode.tools import silicon_check
            from ttnn_flashdecode.tools.silicon_check.fake_root import build_root
            from ttnn_flashdecode.tools.silicon_check.toolchain import INSTALL_HINT, missing_toolchain

            missing = missing_toolchain()
            if missing:
                raise RuntimeError(f"no card, and the mock device needs {', '.join(missing)}: {INSTALL_HINT}")
            env = silicon_check._environment(arch, build_root(), Path(work))
        done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True)
    rows = [json.loads(line[len(LINE_PREFIX):]) for line in done.stdout.splitlines() if line.startswith(LINE_PREFIX)]
    if done.returncode != 0 or not rows:
        raise RuntimeError(f"host-bench subprocess failed ({done.returncode}): {done.stderr[-2000:]}")
    return rows


def format_table(rows: Sequence[dict]) -> str:
    lines = [f"{'batch':>5}  {'path':36}  {'median us':>9}  {'p90 us':>8}  (host CPU time per call, measured)"]
    for row in rows:
        seconds = sorted(row["seconds"])
        p90 = seconds[int(0.9 * (len(seconds) - 1))]
        lines.append(f"{row['batch']:>5}  {row['path']:36}  {statistics.median(seconds) * 1e6:9.1f}  {p90 * 1e6:8.1f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ttnn_flashdecode host-bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="1,32", help="comma-separated batch sizes (default 1,32)")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per path (default 200)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    parser.add_argument("--floor", action="store_true",
                        help="also time generic_op on synthetic one-core descriptors (its cost per CB and per named arg)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    batches = [int(b) for b in options.batches.split(",") if b]
    if options.child:
        return _child(batches, options.calls, options.warmup, options.floor)
    try:
        rows = run(batches, options.calls, options.warmup, floor=options.floor)
    except RuntimeError as error:
        print(f"host-bench: {error}", file=sys.stderr)
        return 3
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
