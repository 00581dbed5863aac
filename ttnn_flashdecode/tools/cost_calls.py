"""The cost model's compute calls: per-feature counts fitted from the emulator, their weights, and
the seed fit. Part of :mod:`ttnn_flashdecode.tools.cost_model`; import the names from there.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pathlib
from collections.abc import Mapping, Sequence

import numpy as np

from ttnn_flashdecode.op.schedule import Schedule, Slice
from ttnn_flashdecode.tools.cost_base import (
    _BYTE_COUNTERS, FEATURES, SEED_BLOCK_TILES, SEED_KV_POSITIONS, SEED_MS, TILE_BYTES,
    Device, Shape, device, work_features,
)

# ------------------------------------------------------------------------------------------ calls

WEIGHTINGS = ("uniform", "tile-ops")
"""Per-call cost weightings (module docstring)."""

_FREE_IN_TILE_OPS = ("_init", "tile_regs_", "reconfig", "compute_kernel_hw_startup", "reduce_uninit")


def _weight(name: str, weights) -> float:
    """A call's weight: 1 (``"uniform"``), 0 or 1 (``"tile-ops"``), or, for model v2 (a mapping of
    API name to cycles, :mod:`ttnn_flashdecode.tools.device_model`), its cycles (0 for names not in it)."""
    if isinstance(weights, Mapping):
        return float(weights.get(name, 0.0))
    if weights == "uniform":
        return 1.0
    if weights == "tile-ops":
        return 0.0 if any(part in name for part in _FREE_IN_TILE_OPS) else 1.0
    raise ValueError(f"weights: expected one of {WEIGHTINGS}, got {weights!r}")


def compute_calls(calls: Mapping[str, int]) -> dict[str, int]:
    """The compute-kernel API calls of a core's merged ``CoreStats.calls``.

    Dataflow names (``noc_*``, ``get_*``, and the data-movement cores' L1 word accesses
    ``l1_read_word`` / ``l1_write_word``: a RISC-V load or store each, not a compute call) are
    dropped, and so are the circular-buffer calls (``cb_*``), which the emulator counts under one
    name for all three kernels of a core.
    """
    return {name: int(n) for name, n in calls.items() if not name.startswith(("cb_", "noc_", "get_", "l1_"))}


class CalibrationError(RuntimeError):
    """The emulator's counts are not an exact integer-linear function of :data:`FEATURES`."""


@dataclasses.dataclass(frozen=True)
class CallModel:
    """Per-feature compute calls and NoC bytes of one configuration, fitted from the emulator.

    Attributes:
        q_rows, dim_tiles: the group shape it was fitted for.
        fp32_dest_acc_en: the compute config it was fitted for (the op's default: True).
        calls: API name -> per-feature counts (aligned with :data:`FEATURES`).
        bytes: counter (``dram_read_bytes``, ``dram_write_bytes``, ``l1_read_bytes``,
            ``l1_write_bytes``) -> per-feature bytes.
        kernel_hash: blake2b of the kernel sources it was fitted on.
        zone_calls: ``"zone/api"`` -> per-feature compute calls made inside that profiler zone
            (``CoreStats.zone_calls``).
        sfpu_faces_per_call: SFPU API -> 16x16 faces it computed per call over the calibration runs
            (``CoreStats.sfpu_faces``: 4 on ``VectorMode::RC``, 2 on ``R``).
        sfpu_iterations_per_call: SFPU API -> 32-datum SFPU iterations it ran per call
            (``CoreStats.sfpu_iterations``: 8 a whole face; the kernels run 2 per 4 live rows).
        reconfig_share: the share of the units the data-format reconfig calls address (SrcA and
            SrcB for ``reconfig_data_format``, one for the other forms) that they reprogrammed
            (``CoreStats.format_reconfigs``; the LLK's ``(old, new)`` forms skip a unit already on
            the format). Like ``noc1_read_share``, a share over the runs, not a per-feature fit: it
            follows the order of the calls, not the features.
        noc1_read_share: NoC 1's share of the K/V read requests the calibration runs issued (the
            reader's ``fd-reader-kv`` zone, ``CoreStats.zone_noc_reads``; a share, not a per-feature
            fit: which NoC a K/V page takes follows its page index, not the features).
        partial_busiest_noc_share: the share of a split-K partial's bytes (the writer's
            ``fd-writer-partial`` zone, ``CoreStats.zone_noc_write_bytes``) that its busier NoC
            carries: 1.0 on one NoC, ~0.5 when the writer splits it over both; a combine level's
            transfer takes that share of the partial over one link.
    """

    q_rows: int
    dim_tiles: int
    fp32_dest_acc_en: bool
    calls: Mapping[str, tuple[int, ...]]
    bytes: Mapping[str, tuple[int, ...]]
    kernel_hash: str
    zone_calls: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    sfpu_faces_per_call: Mapping[str, float] = dataclasses.field(default_factory=dict)
    reconfig_share: float = 1.0
    noc1_read_share: float = 0.0
    partial_busiest_noc_share: float = 1.0
    sfpu_iterations_per_call: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def core_calls(self, features: np.ndarray) -> list[dict[str, int]]:
        """Per core, compute API name -> calls, for ``features`` ``[cores, len(FEATURES)]``."""
        names = sorted(self.calls)
        table = np.array([self.calls[n] for n in names], dtype=np.int64)  # [names, features]
        counts = features @ table.T
        return [{n: int(c) for n, c in zip(names, row) if c} for row in counts]

    def core_zone_calls(self, features: np.ndarray) -> list[dict[str, int]]:
        """Per core, ``"zone/api"`` -> compute calls inside that profiler zone (``CoreStats.zone_calls``)."""
        keys = sorted(self.zone_calls)
        counts = features @ np.array([self.zone_calls[k] for k in keys], dtype=np.int64).reshape(len(keys), -1).T
        return [{k: int(c) for k, c in zip(keys, row) if c} for row in counts]

    def weighted_calls(self, features: np.ndarray, weights: str = "uniform") -> np.ndarray:
        """Per core, the weighted compute-call count (float)."""
        vector = np.zeros(len(FEATURES))
        for name, per_feature in self.calls.items():
            vector += _weight(name, weights) * np.asarray(per_feature, dtype=float)
        return features @ vector

    def weighted_zone_calls(self, features: np.ndarray, zone: str, weights: str = "uniform") -> np.ndarray:
        """Per core, the weighted compute calls made inside profiler zone ``zone`` (float)."""
        vector = np.zeros(len(FEATURES))
        for key, per_feature in self.zone_calls.items():
            name, api = key.split("/", 1)
            if name == zone:
                vector += _weight(api, weights) * np.asarray(per_feature, dtype=float)
        return features @ vector

    def weighted_zone_per_feature(self, zone: str, weights: str = "uniform") -> dict[str, float]:
        """Weighted compute calls inside profiler zone ``zone`` per unit of each feature."""
        return dict(zip(FEATURES, self.weighted_zone_calls(np.eye(len(FEATURES), dtype=np.int64), zone, weights).tolist()))

    def weighted_per_feature(self, weights: str = "uniform") -> dict[str, float]:
        """Weighted compute calls per unit of each feature (e.g. per live tile, per partial combined)."""
        vector = np.zeros(len(FEATURES))
        for name, per_feature in self.calls.items():
            vector += _weight(name, weights) * np.asarray(per_feature, dtype=float)
        return dict(zip(FEATURES, vector.tolist()))

    def core_bytes(self, features: np.ndarray) -> dict[str, np.ndarray]:
        """Per core, each byte counter (int64 arrays)."""
        return {name: features @ np.asarray(self.bytes[name], dtype=np.int64) for name in _BYTE_COUNTERS}

    def to_json(self) -> dict:
        return dataclasses.asdict(self) | {"calls": dict(self.calls), "bytes": dict(self.bytes),
                                           "zone_calls": dict(self.zone_calls),
                                           "sfpu_faces_per_call": dict(self.sfpu_faces_per_call),
                                           "sfpu_iterations_per_call": dict(self.sfpu_iterations_per_call)}

    @classmethod
    def from_json(cls, data: Mapping) -> CallModel:
        return cls(
            q_rows=int(data["q_rows"]), dim_tiles=int(data["dim_tiles"]),
            fp32_dest_acc_en=bool(data["fp32_dest_acc_en"]),
            calls={k: tuple(int(x) for x in v) for k, v in data["calls"].items()},
            bytes={k: tuple(int(x) for x in v) for k, v in data["bytes"].items()},
            kernel_hash=str(data["kernel_hash"]),
            zone_calls={k: tuple(int(x) for x in v) for k, v in data.get("zone_calls", {}).items()},
            sfpu_faces_per_call={k: float(v) for k, v in data.get("sfpu_faces_per_call", {}).items()},
            reconfig_share=float(data.get("reconfig_share", 1.0)),
            noc1_read_share=float(data.get("noc1_read_share", 0.0)),
            partial_busiest_noc_share=float(data.get("partial_busiest_noc_share", 1.0)),
            sfpu_iterations_per_call={k: float(v) for k, v in data.get("sfpu_iterations_per_call", {}).items()},
        )


def _kernel_hash() -> str:
    from ttnn_flashdecode.op.paths import kernel_dir

    digest = hashlib.blake2b(digest_size=12)
    for path in sorted(kernel_dir().glob("*")):
        if path.suffix in (".cpp", ".hpp", ".h"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


CACHE_ENV = "TTNN_FLASHDECODE_COST_CACHE"
"""Environment variable naming the calibration cache folder (default ``~/.cache/ttnn_flashdecode/cost_model``)."""


def _cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get(CACHE_ENV) or pathlib.Path.home() / ".cache" / "ttnn_flashdecode" / "cost_model")


# Calibration runs: (batch, n_kv_heads, kv positions per user, split, block_tiles). Chosen so the
# features vary independently: several unsplit requests on one core (70 requests > the 64-core
# emulated n150 grid), partial and full last tiles, several blocks and padding blocks, splits
# with and without empty slices.
_CALIBRATION_RUNS = (
    (70, 1, [1 + (i * 37) % 200 for i in range(70)], 1, 2),
    (2, 2, [63, 300], 1, 2),
    (1, 1, [40], 3, 2),       # 2 live tiles in 3 slices: one empty sender
    (1, 2, [300], 4, 2),      # 10 tiles in 4 slices: 3, 2, 3, 2 tiles
    (2, 1, [1000, 64], 2, 2),
    (1, 1, [520], 5, 4),
)


def _run_emulated(shape: Shape, kv_positions: Sequence[int], split: int | None, block_tiles: int | None,
                  capacity: int | None = None, seed: int = 0, kv_dtype: str = "bfloat16", window: int = 0,
                  chunk: int = 0):
    """One ``attention`` call on the emulator; returns (report, plan). A block-float cache is a
    host ``ttnn.Tensor`` packed by ttnn (which needs tt-metal's context: a card, or
    ``TT_METAL_MOCK_CLUSTER_DESC_PATH``)."""
    from ttnn_flashdecode import attention, last_report

    batch = len(kv_positions)
    capacity = capacity or max(1024, -(-max(kv_positions) // 1024) * 1024)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 1, batch, shape.n_q_heads * shape.head_dim), dtype=np.float32)
    k = rng.standard_normal((batch, shape.n_kv_heads, capacity, shape.head_dim), dtype=np.float32)
    v = k.copy()  # a V of its own: one tensor as both would be read once (values from keys, MLA's case)
    if kv_dtype != "bfloat16":
        import ttnn

        k, v = (ttnn.Tensor(x, getattr(ttnn, kv_dtype), layout=ttnn.TILE_LAYOUT) for x in (k, v))
    attention(q, k, v, cur_pos=[p - 1 for p in kv_positions], split=split, block_tiles=block_tiles,
              backend="emulator", sliding_window_size=window or None, attention_chunk_size=chunk or None)
    report = last_report()
    plan = _op_plan(shape, kv_positions, capacity, "wormhole_b0", _emulated_grid(), split, block_tiles, kv_dtype,
                    window, chunk)
    return report, plan


@functools.cache
def _emulated_grid() -> tuple[int, int]:
    from ttnn_flashdecode.emulator.arch import ArchSpec
    from ttnn_flashdecode.op.plan import DEFAULT_ARCH

    return tuple(ArchSpec.for_name(DEFAULT_ARCH).default_grid)


def _op_plan(shape: Shape, kv_positions: Sequence[int], capacity: int, arch: str, grid: tuple[int, int],
             split: int | None, block_tiles: int | None, kv_dtype: str = "bfloat16", window: int = 0, chunk: int = 0,
             values_from_keys: bool = False):
    """The op's own program plan for a batch of ``len(kv_positions)`` users on a cache of
    ``capacity`` positions (schedule and residency), no device. ``values_from_keys``: one cache
    as K and V (MLA's latent): no CB V, so the planner's blocks may be larger.

    Uses the op's planner (``plan.plan_program``) with placeholder operand args, so the schedule,
    block size and split limit are exactly the ones ``attention()`` would use: planned from the
    capacity (trace-safe), whatever the positions; each slice's share of the live tiles follows
    from ``kv_positions`` at run time (:func:`work_features`).
    """
    from ttnn_flashdecode.op.plan import Target, plan_program
    from ttnn_flashdecode.emulator.arch import ArchSpec
    from ttnn_flashdecode.op.program_factory import OPERANDS
    from ttnn_flashdecode.op.modifiers import ScoreModifiers
    from ttnn_flashdecode.op.compute_options import ComputeOptions
    from ttnn_flashdecode.op.shape import DecodeShape

    decode = DecodeShape(len(kv_positions), shape.n_q_heads, shape.n_kv_heads, shape.head_dim, capacity,
                         kv_dtype=kv_dtype, scores=ScoreModifiers(window=window, attention_chunk=chunk),
                         values_from_keys=values_from_keys)
    spec = ArchSpec.for_name(arch)
    accessor_args = tuple((2, TILE_BYTES) for _ in range(len(OPERANDS)))
    noc_xy = spec.worker_noc_xy if (grid[0] <= len(spec.worker_xs) and grid[1] <= len(spec.worker_ys)) else (
        lambda x, y: (x % 64, y % 64))
    return plan_program(decode, Target(arch, grid, accessor_args, noc_xy), block_tiles=block_tiles, split=split,
                        compute=ComputeOptions())


def _fit(features: np.ndarray, values: np.ndarray, what: str) -> tuple[int, ...]:
    solution, *_ = np.linalg.lstsq(features.astype(float), values.astype(float), rcond=None)
    rounded = np.rint(solution).astype(np.int64)
    residual = features @ rounded - values
    if np.any(residual != 0):
        worst = int(np.argmax(np.abs(residual)))
        raise CalibrationError(
            f"{what}: expected the emulator's counts to be integer-linear in {FEATURES}, got a residual of "
            f"{int(residual[worst])} on calibration core {worst} (fit {dict(zip(FEATURES, solution.round(3)))}); "
            "the kernels do work the features do not describe: update cost_model.FEATURES"
        )
    return tuple(int(x) for x in rounded)


def _report_rows(report, plan) -> list:
    """The report's per-core stats in core-table order."""
    return [report.cores[core] for core in plan.cores]


_UNITS_PER_RECONFIG = {"reconfig_data_format": 2}
"""Units a reconfig API addresses (SrcA and SrcB; the ``_srca`` / ``_srcb`` / pack forms one)."""


def _sfpu_work_per_call(stats, kind: str = "sfpu_faces") -> dict[str, float]:
    """SFPU API -> ``CoreStats.<kind>`` (``sfpu_faces`` or ``sfpu_iterations``) per call over ``stats``."""
    faces: dict[str, int] = {}
    for s in stats:
        for api, n in getattr(s, kind).items():
            faces[api] = faces.get(api, 0) + n
    calls = {api: sum(s.calls.get(api, 0) for s in stats) for api in faces}
    return {api: faces[api] / calls[api] for api in faces if calls[api]}


def _reconfig_share(stats) -> float:
    addressed = sum(_UNITS_PER_RECONFIG.get(name.split("<", 1)[0], 1) * n
                    for s in stats for name, n in s.calls.items() if "reconfig" in name)
    reprogrammed = sum(sum(s.format_reconfigs.values()) for s in stats)
    return min(1.0, reprogrammed / addressed) if addressed else 1.0


def calibrate(q_rows: int, dim_tiles: int, *, use_cache: bool = True) -> CallModel:
    """Fit the per-feature compute calls and NoC bytes of the current kernels on the emulator.

    Runs the small :data:`_CALIBRATION_RUNS` (a few seconds in all, after the first kernel
    build) with ``q_rows`` Q heads per KV head and head_dim ``32 * dim_tiles``, and solves for
    integer per-feature counts that reproduce every core's counters exactly. Results are cached
    in ``~/.cache/ttnn_flashdecode/cost_model/`` (or ``$TTNN_FLASHDECODE_COST_CACHE``) under a
    hash of the kernel sources, so a kernel change recalibrates.

    Raises:
        CalibrationError: no exact integer fit (the features no longer describe the kernels).
        numpy.linalg.LinAlgError: the calibration runs do not determine every feature.
    """
    kernel_hash = _kernel_hash()
    cache = _cache_dir() / f"calls-v6-q{q_rows}-d{dim_tiles}-{kernel_hash}.json"  # v6: + SFPU iterations
    if use_cache and cache.exists():
        return CallModel.from_json(json.loads(cache.read_text()))
    shape = Shape(f"calibration q{q_rows} d{dim_tiles}", q_rows, 1, 32 * dim_tiles)
    feature_rows, stats = [], []
    for batch, n_kv, kv, split, block_tiles in _CALIBRATION_RUNS:
        run_shape = dataclasses.replace(shape, n_q_heads=q_rows * n_kv, n_kv_heads=n_kv)
        report, plan = _run_emulated(run_shape, kv[:batch], split, block_tiles)
        kv_requests = [p for p in kv[:batch] for _ in range(n_kv)]
        feature_rows.append(work_features(plan.schedule, kv_requests, plan.residency.block_tiles, users=batch))
        stats.extend(_report_rows(report, plan))
    features = np.concatenate(feature_rows)
    if np.linalg.matrix_rank(features) < len(FEATURES):
        raise np.linalg.LinAlgError(f"calibration runs determine only {np.linalg.matrix_rank(features)} of {len(FEATURES)} features")
    per_core_calls = [compute_calls(s.calls) for s in stats]
    names = sorted({n for c in per_core_calls for n in c})
    calls = {n: _fit(features, np.array([c.get(n, 0) for c in per_core_calls]), n) for n in names}
    counters = {name: _fit(features, np.array([getattr(s, name) for s in stats]), name) for name in _BYTE_COUNTERS}
    keys = sorted({k for s in stats for k in s.zone_calls})
    zone_calls = {k: _fit(features, np.array([s.zone_calls.get(k, 0) for s in stats]), k) for k in keys}
    reads = [sum(s.zone_noc_reads.get(f"fd-reader-kv/{n}", 0) for s in stats) for n in (0, 1)]
    partials = [sum(s.zone_noc_write_bytes.get(f"fd-writer-partial/{n}", 0) for s in stats) for n in (0, 1)]
    model = CallModel(q_rows, dim_tiles, True, calls, counters, kernel_hash, zone_calls, _sfpu_work_per_call(stats),
                      _reconfig_share(stats), reads[1] / max(1, sum(reads)),
                      max(partials) / sum(partials) if sum(partials) else 1.0,
                      _sfpu_work_per_call(stats, "sfpu_iterations"))
    if use_cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(model.to_json(), indent=1, sort_keys=True))
        tmp.replace(cache)
    return model


# ------------------------------------------------------------------------------------------ costs

def _seed_features(kv_positions: int) -> np.ndarray:
    plan = Schedule(((Slice(0, 0, 1),),))
    return work_features(plan, [kv_positions], SEED_BLOCK_TILES)


def cost_per_call_s(seed_model: CallModel, dev: Device, weights: str = "uniform") -> float:
    """Seconds per (weighted) compute call on ``dev``, fitted to the seed's slope.

    Args:
        seed_model: the :class:`CallModel` of the seed's group shape (``q_rows`` 8, ``dim_tiles`` 4).
        dev: the device (Wormhole pays the clock ratio).
        weights: ``"uniform"`` or ``"tile-ops"``.
    """
    if isinstance(weights, Mapping):  # model v2: weights are cycles, not fitted to the seed
        return 1.0 / (dev.clock_ghz * 1e9)
    low, high = (float(seed_model.weighted_calls(_seed_features(kv), weights)[0]) for kv in
                 (SEED_KV_POSITIONS[0], SEED_KV_POSITIONS[2]))
    per_call_blackhole = (SEED_MS[2] - SEED_MS[0]) * 1e-3 / (high - low)
    return per_call_blackhole * dev.clock_scale


def _first_block_s(plan: Schedule, kv_positions: Sequence[int], block_tiles: int, model: CallModel,
                   dev: Device) -> np.ndarray:
    """Per core, the time to read its first slice's first K block, before compute can start (the
    reader pushes a block's K before it reads its V; later blocks and requests are prefetched while
    compute works)."""
    per_tile = model.bytes["dram_read_bytes"][FEATURES.index("live_tiles")] // 2  # K of a K+V position tile
    return np.array([min(slices[0].live_tiles(int(kv_positions[slices[0].request])), block_tiles) * per_tile
                     for slices in plan.cores], dtype=float) / dev.core_dram_bytes_per_s


def seed_check(seed_model: CallModel, weights: str = "uniform") -> dict[str, float]:
    """The seed line the model implies (seconds): the per-call cost, the intercept left after the
    request's calls and its first-block read (the seed driver's launch overhead as the model sees
    it), and the kv 2048 prediction vs the 0.236 ms measured."""
    dev = device("p150")
    per_call = cost_per_call_s(seed_model, dev, weights)
    calls = {kv: float(seed_model.weighted_calls(_seed_features(kv), weights)[0]) for kv in SEED_KV_POSITIONS}
    plan = Schedule(((Slice(0, 0, 1),),))
    fill = float(_first_block_s(plan, [SEED_KV_POSITIONS[0]], SEED_BLOCK_TILES, seed_model, dev)[0])
    intercept = SEED_MS[0] * 1e-3 - calls[SEED_KV_POSITIONS[0]] * per_call - fill
    predicted_2048 = intercept + fill + calls[SEED_KV_POSITIONS[1]] * per_call
    return {"per_call_s": per_call, "intercept_s": intercept, "predicted_2048_s": predicted_2048,
            "measured_2048_s": SEED_MS[1] * 1e-3}


