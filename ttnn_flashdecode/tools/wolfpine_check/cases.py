"""The wolfpine check's cases, run on wolfpine's simulated Wormhole:
``python -m ttnn_flashdecode.tools.wolfpine_check.cases [--case NAME ...]``.

Started by :func:`ttnn_flashdecode.tools.wolfpine_check.run` in a subprocess with the environment of
:func:`.root.environment` (the device is wolfpine's, through tt-metal's UMD simulation backend). Each
case calls :func:`ttnn_flashdecode.attention` on real device tensors: the op's own validation, plan,
``prepare_device_launch`` and ``build_program`` descriptor, ``ttnn.generic_op``; the only change is
that the descriptor's compute kernel is the probe (``probe_compute.cpp``), swapped in where
:func:`ttnn_flashdecode.op.launch.device_program` hands the descriptor over (the planted-bug check
points ``TTNN_FLASHDECODE_KERNEL_DIR`` at a mutated copy of the kernels). The output is compared with :func:`expected`,
the probe's fingerprint in float64, bit for bit.

Prints one line per case, ``CASE {"name", "ok", "seconds", "error", "mismatches", "plan", ...}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

LINE_PREFIX = "CASE "
HERE = Path(__file__).resolve().parent
POISON = {"bfloat16": np.nan, "bfloat8_b": 4096.0}  # bfloat8_b holds no NaN: a value that cannot cancel


@dataclasses.dataclass(frozen=True)
class Case:
    """One call: shapes, positions, then :func:`~ttnn_flashdecode.attention` keywords."""

    name: str
    batch: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int
    capacity: int
    positions: tuple[int, ...]  #: cur_pos per user (-1: an idle slot)
    call: dict = dataclasses.field(default_factory=dict)
    rows: int = 1  #: ROWS: query rows per user
    cache_block_size: int = 0  #: paged: positions per cache block (shuffled page table); 0: contiguous
    kv_dtype: str = "bfloat16"
    positions_tensor: bool = False  #: positions as a device int32 tensor (cur_pos_tensor)
    window: int = 0  #: sliding_window_size
    blocked: str = ""  #: why wolfpine cannot run it (reported, not run)


#: Small shapes (the simulator runs ~10 ms per tile per core). 32 stage rows per request wherever the
#: kind allows (32 Q heads on one KV head; ROWS 4 x 8 heads), so every row of every K/V tile the
#: reader delivers reaches a written output row.
CASES = (
    Case("decode bf16 contiguous, 2 users", 2, 32, 1, 64, 256, (150, 37)),
    Case("paged bf16, shuffled page table, poison past the position", 2, 32, 1, 64, 256, (100, 200),
         cache_block_size=32),
    Case("paged bfloat8_b, shuffled page table, poison past the position", 2, 32, 1, 64, 256, (100, 200),
         cache_block_size=32, kv_dtype="bfloat8_b",
         blocked="wolfpine 2.2's unpacker has no BFP8 datum conversion: the simulator server dies with "
                 "NotImplementedError in framework/pe/tensix/backends/unpacker.py formatConversion (line 1579) "
                 "when a compute kernel unpacks a bfloat8_b K tile"),
    Case("split-K over 3 cores with the combine", 1, 32, 1, 64, 512, (300,), dict(split=3, block_tiles=2)),
    Case("positions from a device tensor, idle slot (-1)", 3, 32, 1, 64, 256, (70, -1, 200), positions_tensor=True),
    Case("ROWS 4 rows x 8 heads per user", 1, 8, 1, 64, 256, (130,), rows=4),
    Case("sliding window 70 (stale rows before the window zeroed)", 1, 32, 1, 64, 256, (200,), window=70),
)


def _tensor(device, array: np.ndarray, dtype: str = "bfloat16"):
    import ttnn

    return ttnn.Tensor(np.ascontiguousarray(array, dtype=np.float32), getattr(ttnn, dtype), layout=ttnn.TILE_LAYOUT,
                       device=device, mem_config=ttnn.DRAM_MEMORY_CONFIG)


def _small_ints(rng, shape) -> np.ndarray:
    return rng.integers(-1, 2, size=shape).astype(np.float32)


def live_range(case: Case, user: int) -> tuple[int, int]:
    """Positions ``[start, end)`` whose K/V rows user ``user``'s request sums, from the call's
    meaning (not the kernels'): up to and including its last row's position, from its first row's
    window start (the last ``window`` positions of that row, itself included)."""
    pos = case.positions[user]
    if pos < 0:
        return 0, 0
    first_row = pos - case.rows + 1
    start = max(0, first_row + 1 - case.window) if case.window else 0
    return start, pos + 1


def make_inputs(case: Case, rng: np.random.Generator):
    """Q ``[1, 1, batch*rows, n_q_heads*head_dim]`` and the logical K, V ``[batch, n_kv, capacity,
    head_dim]`` (small integers; every position outside a user's :func:`live_range` poisoned)."""
    q = _small_ints(rng, (1, 1, case.batch * case.rows, case.n_q_heads * case.head_dim))
    k = _small_ints(rng, (case.batch, case.n_kv_heads, case.capacity, case.head_dim))
    v = _small_ints(rng, (case.batch, case.n_kv_heads, case.capacity, case.head_dim))
    for b in range(case.batch):
        start, end = live_range(case, b)
        for cache in (k, v):
            cache[b, :, :start] = POISON[case.kv_dtype]
            cache[b, :, end:] = POISON[case.kv_dtype]
    return q, k, v


def expected(case: Case, q: np.ndarray, k: np.ndarray, v: np.ndarray, split_counts) -> np.ndarray:
    """The probe's output in float64 (probe_compute.cpp): per request (user b, KV group g) and
    stage row s = head * rows + row, ``n Q + Ksum[s % 32] + 2 Vsum[s % 32]`` plus, on a split
    request's dim tile 0, ``n`` times that tile's value (the max and L the combine carried);
    ``n`` the request's slices. Ksum row r = the sum of the K rows at positions ``p ≡ r (mod 32)`` of
    the live range."""
    gqa = case.n_q_heads // case.n_kv_heads
    out = np.zeros(q.shape, np.float64)
    requests = [(b, g) for b in range(case.batch) for g in range(case.n_kv_heads)]
    for (b, g), n in zip(requests, split_counts):
        start, end = live_range(case, b)
        ksum = np.zeros((32, case.head_dim))
        vsum = np.zeros((32, case.head_dim))
        for p in range(start, end):
            ksum[p % 32] += k[b, g, p]
            vsum[p % 32] += v[b, g, p]
        for h in range(gqa):
            head = g * gqa + h
            cols = slice(head * case.head_dim, (head + 1) * case.head_dim)
            for row in range(case.rows):
                s = h * case.rows + row
                value = n * q[0, 0, b * case.rows + row, cols].astype(np.float64) + ksum[s] + 2 * vsum[s]
                if n > 1:
                    value[:32] *= 1 + n
                out[0, 0, b * case.rows + row, cols] = value
    return out


class ProbeSwap:
    """Hands the op's descriptors over with the probe compute kernel in place of the op's, while active: wraps
    ``launch.device_program``, the one place the device path gets its descriptor from ``build_program``.
    Records each plan it saw."""

    def __init__(self, scratch: Path):
        from ttnn_flashdecode.op.paths import kernel_dir

        self.plans = []
        protocol = kernel_dir() / "attention_protocol.hpp"
        self.probe = scratch / "wolfpine_probe_compute.cpp"
        self.probe.write_text(f'#define PROTOCOL_HEADER "{protocol}"\n' + (HERE / "probe_compute.cpp").read_text())

    def __enter__(self):
        from ttnn_flashdecode.op import launch
        from ttnn_flashdecode.op.program_factory import KERNEL_FILES, build_program

        roles = list(KERNEL_FILES)
        self._original = launch.device_program

        def device_program(plan):
            program = build_program(plan)
            kernels = program.kernels
            kernels[roles.index("compute")].kernel_source = str(self.probe)
            program.kernels = kernels
            # Another structure: never the op's own program out of ttnn's program cache.
            program.custom_program_hash = (plan.program_hash ^ 0x5EED_0F_90B3) & (2**64 - 1)
            self.plans.append(plan)
            return program

        launch.device_program = device_program
        return self

    def __exit__(self, *exc):
        from ttnn_flashdecode.op import launch

        launch.device_program = self._original


def run_case(device, case: Case, rng: np.random.Generator, swap: ProbeSwap) -> dict:
    """Build the case's tensors, call the op with the probe, compare; returns the case's record."""
    import ttnn

    from ttnn_flashdecode import attention
    from ttnn_flashdecode.op.launch import to_numpy

    q, k, v = make_inputs(case, rng)
    call = dict(case.call)
    if case.cache_block_size:  # a shuffled page table: user b's block j is cache block table[b, j]
        per_user = case.capacity // case.cache_block_size
        table = rng.permutation(case.batch * per_user).reshape(case.batch, per_user).astype(np.int32)
        blocks = np.zeros((case.batch * per_user, case.n_kv_heads, case.cache_block_size, case.head_dim), np.float32)
        paged = []
        for cache in (k, v):
            blocks = np.full_like(blocks, POISON[case.kv_dtype])
            for b in range(case.batch):
                for j in range(per_user):
                    blocks[table[b, j]] = cache[b, :, j * case.cache_block_size:(j + 1) * case.cache_block_size]
            paged.append(blocks)
        k_dev, v_dev = (_tensor(device, x, case.kv_dtype) for x in paged)
        call["page_table_tensor"] = ttnn.Tensor(table, ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT, device=device,
                                                mem_config=ttnn.DRAM_MEMORY_CONFIG)
    else:
        k_dev, v_dev = (_tensor(device, x, case.kv_dtype) for x in (k, v))
    if case.kv_dtype != "bfloat16":  # what the device holds: ttnn's own block-float packing, read back
        k, v = (to_numpy(ttnn.Tensor(x, getattr(ttnn, case.kv_dtype), layout=ttnn.TILE_LAYOUT)) for x in (k, v))
    if case.positions_tensor:
        call["cur_pos_tensor"] = ttnn.Tensor(np.asarray(case.positions, np.int32), ttnn.int32,
                                             layout=ttnn.ROW_MAJOR_LAYOUT, device=device, mem_config=ttnn.DRAM_MEMORY_CONFIG)
    else:
        call["cur_pos"] = list(case.positions)
    if case.rows > 1:
        call["rows"] = case.rows
    if case.window:
        call["sliding_window_size"] = case.window
    before = len(swap.plans)
    out = attention(_tensor(device, q), k_dev, v_dev, grid=(4, 1), **call)
    ttnn.synchronize_device(device)
    got = to_numpy(out).astype(np.float64)
    plan = swap.plans[before] if len(swap.plans) > before else None
    if plan is None:
        raise RuntimeError("the op did not build a descriptor through launch.device_program (a cached launch?)")
    want = expected(case, q, k, v, plan.split_counts)
    bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    # K/V tiles the call reads: each request's tiles from its range's first to its last, K and V.
    tiles = sum(-(-end // 32) - start // 32 for start, end in (live_range(case, b) for b in range(case.batch)) if end)
    record = {"ok": not bad.any(), "mismatches": int(bad.sum()), "elements": int(bad.size),
              "cores": len(plan.cores), "split_counts": list(plan.split_counts),
              "kv_tiles": 2 * tiles * case.n_kv_heads * plan.residency.dim_tiles,
              "kv_tile_bytes": plan.residency.kv_tile_bytes}
    if bad.any():
        where = np.argwhere(bad)[:4]
        record["error"] = (f"{int(bad.sum())} of {bad.size} output elements differ from the model; first at "
                           + ", ".join(f"{tuple(int(i) for i in w)}: got {got[tuple(w)]}, want {want[tuple(w)]}"
                                       for w in where))
    return record


def main(argv=None) -> int:
    import ttnn

    parser = argparse.ArgumentParser()
    parser.add_argument("--case", action="append", help="run only cases whose name starts with this")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.case or any(c.name.startswith(n) for n in args.case)]
    device = ttnn.open_device(device_id=0)
    failed = 0
    try:
        with ProbeSwap(Path.cwd()) as swap:
            for case in cases:
                start = time.perf_counter()
                record = {"name": case.name}
                if case.blocked:
                    record.update(ok=None, blocked=case.blocked, seconds=0.0)
                    print(LINE_PREFIX + json.dumps(record), flush=True)
                    continue
                try:
                    record.update(run_case(device, case, np.random.default_rng(CASES.index(case)), swap))
                except Exception as error:  # reported, not raised: the other cases still run
                    lines = [line for line in str(error).splitlines() if line.strip() and not line.startswith(" ---")]
                    record.update(ok=False, error=f"{type(error).__name__}: " + " | ".join(lines[:8])[:2000])
                failed += not record["ok"]
                record["seconds"] = round(time.perf_counter() - start, 2)
                print(LINE_PREFIX + json.dumps(record), flush=True)
    finally:
        ttnn.close_device(device)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
