"""Modelled device time of one :func:`ttnn_flashdecode.attention` call on n150 and p150.

**Modelled, not measured.** No Tenstorrent card was available; every number here comes from
the constants below (each cited) and from call and byte counts that the host emulator produces
for the real kernels. Treat the times as a design aid: they rank schedules and show which term
bounds a call; they are not benchmarks.

Inputs and where they come from
-------------------------------
- The seed's silicon timings (DESIGN.md §8, ``seed/ft_tt_op_attention.h``): one Blackhole core,
  one request, ``q_rows`` 8, head_dim 128 (``dim_tiles`` 4), ``block_tiles`` 16: **0.133 /
  0.236 / 0.842 ms** at kv 1024 / 2048 / 8192, compute bound at 5.0 GB/s against a reader
  measured at **~28 GB/s** per core.
- Chip figures (TT_FACTS §8, docs.tenstorrent.com specs): DRAM **288 GB/s** (n150, Wormhole
  B0) and **512 GB/s** (p150, Blackhole); AI clock **1.0 GHz** and **1.35 GHz**; NoC link
  **32 / 64 B per cycle** (flit width, noc_parameters.h; [U] unverified as a sustained rate).
- Grids: the installed core descriptors (:class:`ttnn_flashdecode.emulator.arch.ArchSpec`):
  8x8 = 64 (n150) and 13x10 = 130 (p150). p150 firmware >= v19.5 exposes 11x10 = 110 worker
  cores (TT_FACTS §8, tt-metal issue #47014): :func:`device` takes ``cores=110`` for that case.
- Per-core work: :mod:`ttnn_flashdecode.op.schedule` (the op's own planner, via
  :func:`op_schedule`) says which slices each core runs; per slice, the compute kernel's API
  calls and the NoC bytes are a linear function of a few *work features* (live tiles, blocks,
  padding blocks, a masked tile, partials sent / combined, ...). The per-feature counts are
  **fitted from the emulator** (:func:`calibrate`: a few small ``attention(..., backend=
  "emulator")`` runs, ``last_report()``), exactly: a calibration whose integer fit leaves any
  residual is refused, and ``tests/test_cost_model.py`` checks the analytic counts against the
  emulator on other shapes.

The model
---------
- **Cost of a compute call.** One constant per call (``weights="uniform"``, the default) or per
  tile-processing call (``weights="tile-ops"``: ``*_init``, ``tile_regs_*``, reconfig and
  startup calls free), fitted so the seed configuration reproduces the seed's **slope**:
  ``(0.842 - 0.133) ms / (calls(kv 8192) - calls(kv 1024))`` on Blackhole. The seed's
  **intercept** (~0.03 ms at kv 0) is the seed driver's per-launch cost (dispatch, kernel
  start), reported separately as :data:`LAUNCH_OVERHEAD_S` and NOT added to a call's time
  (:func:`seed_check`: after the request's own calls and first-block read, ~22 us of it remain).
  Circular-buffer calls (``cb_*``) are not counted: the emulator merges them over the three
  kernels of a core, and the fit absorbs their share into the per-call cost. On Wormhole every
  compute call costs ``1.35 / 1.0`` times more (the seed measured Blackhole at 1.35 GHz; the
  same cycles at 1.0 GHz).
- **A core's time** = its first K block's read + ``max(compute calls x cost, the rest of its
  DRAM bytes / 28 GB/s)``: compute waits for the first block's K (the reader pushes a block's K
  before reading its V), then the reader double-buffers, so compute and the stream overlap;
  28 GB/s is the seed's per-core reader figure (Wormhole: scaled by the clock ratio, [U]).
- **A split request** combines up a binomial tree (``attention_protocol.hpp``; slice ``i > 0``
  sends to ``i - lowbit(i)``) in two passes. Slice ``i > 0`` copies Q and the constants from
  its parent once the parent has them (a parent's children queue at its NoC port, in slot order:
  ``bytes / link rate`` each), and a parent starts its K/V stream once all its children have
  copied; then each runs its own slice (as a core, above). Pass 1: it folds its children's subtree
  maxima in, in slot order, each as soon as it has landed (child done + ``one statistics tile /
  link rate``); slice 0 then holds the request's max, which travels back down the tree as Q did.
  Pass 2: each slice rescales its own state, adds its children's partials as they land (child
  done + ``partial bytes / link rate``), the last step writing its partial straight into OUTBOX
  (slice 0 normalises instead). A *max-first* slice (its live tiles in one block) enters pass 1
  after its scores and max only (from its first block's K), and runs its exp(), P.V and row sums
  once it has the request's max and its V, instead of a rescale. Which calls belong to which step
  is measured, not assumed: the emulator charges every compute call to the innermost profiler
  zone (``fd-compute-max``, ``-rescale``, ``-sum``, ``-normalise``, ``-after-max`` and the P.V
  zone inside it; the rest, before pass 1, is the slice's own work), and those counts are fitted
  per feature like the totals. Link rate = ``bytes per cycle x clock`` (32 GB/s on n150, 86.4 GB/s
  on p150).
- **A call** takes ``max(slowest core or split request, total DRAM bytes / chip DRAM
  bandwidth)``.
- **Roofline** = minimum bytes (every live K and V tile read once) / chip DRAM bandwidth.

What it leaves out: NoC contention for DRAM (the chip bound stands in), the DRAM bank
distribution, the TRISC pipeline overlap, per-call cost differences beyond the two weightings,
dispatch and the host. The seed's kernel was the same design (one KV group per core, online
softmax, block prefetch) but not the same source, so the per-call cost is an extrapolation.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pathlib
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op import kv_walk
from ttnn_flashdecode.op.residency import BFLOAT16_TILE_BYTES, KV_FORMATS, KV_TILE_BYTES, stats_page_bytes
from ttnn_flashdecode.op.schedule import Schedule, Slice

__all__ = [
    "SEED_KV_POSITIONS", "SEED_MS", "SEED_READER_GBPS", "LAUNCH_OVERHEAD_S", "FEATURES", "WEIGHTINGS",
    "Device", "device", "DEVICES", "Shape", "MODELS", "CallModel", "calibrate", "work_features",
    "op_schedule", "kv_tile_bytes", "RooflineRatios", "Estimate", "estimate", "cost_per_call_s", "roofline_s", "min_dram_bytes",
    "compute_calls", "CalibrationError", "seed_check", "COMBINE_ZONES", "CACHE_ENV", "TILE_BYTES",
]

# ------------------------------------------------------------------------------------------ constants

SEED_KV_POSITIONS = (1024, 2048, 8192)
"""kv positions of the seed's silicon timings (DESIGN.md §8)."""

SEED_MS = (0.133, 0.236, 0.842)
"""The seed's ms per request at :data:`SEED_KV_POSITIONS`, one Blackhole core (DESIGN.md §8)."""

SEED_Q_ROWS, SEED_HEAD_DIM, SEED_BLOCK_TILES = 8, 128, 16
"""The seed's configuration: MiniCPM5-1B's group (8 Q heads per KV head), head_dim 128, 16-tile blocks."""

SEED_READER_GBPS = 28.0
"""The seed's measured per-core DRAM reader rate on Blackhole, GB/s (DESIGN.md §8)."""

COMBINE_ZONES = ("fd-compute-max", "fd-compute-rescale", "fd-compute-sum", "fd-compute-normalise")
"""The compute kernel's profiler zones after a slice's own K/V stream, in the order they run: pass 1
(maxima), pass 2 (rescale, sums; the last step writes a sender's partial), then, on slice 0 or
an unsplit request, normalise (``attention_compute.cpp``). A "max first" slice (its live tiles in
one block) runs its exp(), P.V and row sums (:data:`AFTER_MAX_ZONES`) between pass 1 and pass 2
instead of before, and has no rescale."""

AFTER_MAX_ZONES = ("fd-compute-after-max", "fd-compute-pv")
"""Where a max-first slice's work after the request's max is charged: its own zone, and the P.V
zone nested in it (the innermost zone takes the calls)."""

LAUNCH_OVERHEAD_S = (SEED_MS[0] - (SEED_MS[2] - SEED_MS[0]) / (SEED_KV_POSITIONS[2] - SEED_KV_POSITIONS[0])
                     * SEED_KV_POSITIONS[0]) * 1e-3
"""The seed line's intercept at kv 0 (~31.7 us): per-launch cost of the seed's driver, reported
separately, never added to a modelled call."""


@dataclasses.dataclass(frozen=True)
class Device:
    """One card as the model sees it.

    Attributes:
        name: ``"n150"`` or ``"p150"``.
        arch: ``"wormhole_b0"`` or ``"blackhole"``.
        clock_ghz: AI clock, GHz (TT_FACTS §8).
        dram_gbps: chip DRAM bandwidth, GB/s (1e9 bytes/s; TT_FACTS §8).
        cores: worker cores in the compute grid.
        grid: the grid ``(x, y)``.
        noc_bytes_per_cycle: NoC link width, bytes per cycle (TT_FACTS §8, [U]).
    """

    name: str
    arch: str
    clock_ghz: float
    dram_gbps: float
    grid: tuple[int, int]
    noc_bytes_per_cycle: int

    @property
    def cores(self) -> int:
        """Worker cores: ``grid[0] * grid[1]``."""
        return self.grid[0] * self.grid[1]

    @property
    def clock_scale(self) -> float:
        """Time of a cycle relative to Blackhole's (the seed's): 1.35 / clock_ghz."""
        return _BLACKHOLE_CLOCK_GHZ / self.clock_ghz

    @property
    def core_dram_bytes_per_s(self) -> float:
        """One core's DRAM read rate: the seed's 28 GB/s on Blackhole, scaled by the clock ([U])."""
        return SEED_READER_GBPS * 1e9 / self.clock_scale

    @property
    def link_bytes_per_s(self) -> float:
        """One NoC link: bytes per cycle x clock."""
        return self.noc_bytes_per_cycle * self.clock_ghz * 1e9


_BLACKHOLE_CLOCK_GHZ = 1.35
_SPECS = {
    # name: (arch, clock GHz, DRAM GB/s, NoC bytes/cycle) -- TT_FACTS §8
    "n150": ("wormhole_b0", 1.0, 288.0, 32),
    "p150": ("blackhole", _BLACKHOLE_CLOCK_GHZ, 512.0, 64),
}
DEVICES = tuple(_SPECS)
"""Devices the model knows: n150 (Wormhole B0) and p150 (Blackhole)."""

DRAM_GBPS = {name: spec[2] for name, spec in _SPECS.items()}
"""Chip DRAM bandwidth per device, GB/s (TT_FACTS §8)."""


def device(name: str, cores: int | None = None) -> Device:
    """The :class:`Device` ``name``, its grid read from the installed core descriptor.

    Args:
        name: ``"n150"`` or ``"p150"``.
        cores: override the grid with ``cores`` worker cores laid out 10 rows high when it divides
            (``110`` models a p150 on firmware >= v19.5: 11x10), else one row.

    Raises:
        ValueError: unknown name or ``cores`` < 1.
    """
    if name not in _SPECS:
        raise ValueError(f"device: expected one of {DEVICES}, got {name!r}")
    from ttnn_flashdecode.emulator.arch import ArchSpec

    arch, clock, dram, noc = _SPECS[name]
    grid = tuple(ArchSpec.for_name(arch).default_grid)
    if cores is not None:
        if cores < 1:
            raise ValueError(f"cores: expected >= 1, got {cores}")
        grid = (cores // 10, 10) if cores % 10 == 0 else (cores, 1)
    return Device(name, arch, clock, dram, grid, noc)


@dataclasses.dataclass(frozen=True)
class Shape:
    """A model's attention shape: Q heads, KV heads, head_dim."""

    name: str
    n_q_heads: int
    n_kv_heads: int
    head_dim: int

    @property
    def q_rows(self) -> int:
        """Q heads per KV group."""
        return self.n_q_heads // self.n_kv_heads

    @property
    def dim_tiles(self) -> int:
        """``ceil(head_dim / 32)``."""
        return -(-self.head_dim // 32)


MODELS = {
    "minicpm5-1b": Shape("MiniCPM5-1B", 16, 2, 128),
    "llama-3.1-8b": Shape("Llama-3.1-8B", 32, 8, 128),
    "smollm2": Shape("SmolLM2", 9, 3, 64),
}
"""The issue's model shapes (Q heads / KV heads, head_dim)."""

TILE_BYTES = BFLOAT16_TILE_BYTES
"""bfloat16 tile (TT_FACTS §1)."""

# ------------------------------------------------------------------------------------------ features

FEATURES = (
    "cores",              # 1 per core (kernel start-up)
    "users",              # POSITIONS entries each core reads (4 bytes per user of the batch)
    "normalised",         # unsplit slices and split roots (slice 0): normalise, write the output rows
    "split_roots",        # split roots (slice 0): both combine passes, share the request's max
    "partials_sent",      # split slices 1..: send a partial (O, l, m) up the combine tree
    "empty_slices",       # split slices with no live tile (forced splits): neutral running state
    "max_first",          # split slices whose live tiles fit one block: the request's max before exp()
    "max_first_tiles",    # the live tiles of those slices (their exp(), P.V and row sums wait for the max)
    "partials_combined",  # partials a slice folds in: its children in the combine tree
    "slices_fed",         # on a split root: slices 1.. that copy its Q and constants (count - 1)
    "live_tiles",         # live position tiles attended over
    "later_blocks",       # live blocks after a slice's first (they rescale the running state)
    "skipped_blocks",     # padding blocks (no live tile) up to a whole double block
    "masked_tiles",       # slices holding the request's partial last tile (tail mask)
    "stale_rows",         # rows past the position in that tile, zeroed by the reader in K and V
    "work_row_words",     # words of the core's work row (the plan's busiest core sets it), read 3 times
)
"""Work features of a core; every count the model uses is linear in them."""

_BYTE_COUNTERS = ("dram_read_bytes", "dram_write_bytes", "l1_read_bytes", "l1_write_bytes")


def _slice_features(kv_positions: int, item: Slice, block_tiles: int) -> np.ndarray:
    """The work features of one slice (mirrors ``Params`` in ``attention_protocol.hpp``)."""
    begin, end = item.tiles(kv_positions)
    live = end - begin
    total_live = kv_walk.live_tiles(kv_positions)
    double = 2 * block_tiles
    blocks = -(-live // double) * double // block_tiles
    live_blocks = -(-live // block_tiles)
    split, root = item.count > 1, item.index == 0
    row = dict(
        normalised=int(root),
        split_roots=int(split and root),
        partials_sent=int(not root),
        empty_slices=int(split and live == 0),
        max_first=int(split and 0 < live <= block_tiles),
        max_first_tiles=live if split and 0 < live <= block_tiles else 0,
        partials_combined=len(protocol.tree_children(item.index, item.count)),
        slices_fed=item.count - 1 if split and root else 0,
        live_tiles=live,
        later_blocks=max(live_blocks - 1, 0),
        skipped_blocks=blocks - live_blocks,
        masked_tiles=int(live > 0 and end == total_live and kv_walk.tail_width(kv_positions) != 0),
        stale_rows=(protocol.TILE_POSITIONS - kv_walk.tail_width(kv_positions)
                    if live > 0 and end == total_live and kv_walk.tail_width(kv_positions) != 0 else 0),
    )
    return np.array([row.get(name, 0) for name in FEATURES], dtype=np.int64)


def work_features(plan: Schedule, kv_positions: Sequence[int], block_tiles: int, users: int = 1) -> np.ndarray:
    """Work features (:data:`FEATURES`) of every used core, ``[cores, len(FEATURES)]`` int64.

    Args:
        plan: the schedule (planned from the cache's capacity: the slice counts).
        kv_positions: per request, live positions at run time (each slice's share follows from it).
        block_tiles: the residency's block size (position tiles).
        users: the batch (entries of the POSITIONS page every core reads).
    """
    rows = np.zeros((plan.used_cores, len(FEATURES)), dtype=np.int64)
    row_words = protocol.work_row_words(max(len(slices) for slices in plan.cores))
    for core, slices in enumerate(plan.cores):
        rows[core, 0] = 1
        rows[core, 1] = users
        rows[core, FEATURES.index("work_row_words")] = row_words
        for item in slices:
            rows[core] += _slice_features(int(kv_positions[item.request]), item, block_tiles)
    return rows


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
    """

    q_rows: int
    dim_tiles: int
    fp32_dest_acc_en: bool
    calls: Mapping[str, tuple[int, ...]]
    bytes: Mapping[str, tuple[int, ...]]
    kernel_hash: str
    zone_calls: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)

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
                                           "zone_calls": dict(self.zone_calls)}

    @classmethod
    def from_json(cls, data: Mapping) -> CallModel:
        return cls(
            q_rows=int(data["q_rows"]), dim_tiles=int(data["dim_tiles"]),
            fp32_dest_acc_en=bool(data["fp32_dest_acc_en"]),
            calls={k: tuple(int(x) for x in v) for k, v in data["calls"].items()},
            bytes={k: tuple(int(x) for x in v) for k, v in data["bytes"].items()},
            kernel_hash=str(data["kernel_hash"]),
            zone_calls={k: tuple(int(x) for x in v) for k, v in data.get("zone_calls", {}).items()},
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
             split: int | None, block_tiles: int | None, kv_dtype: str = "bfloat16", window: int = 0, chunk: int = 0):
    """The op's own program plan for a batch of ``len(kv_positions)`` users on a cache of
    ``capacity`` positions (schedule and residency), no device.

    Uses the op's planner (``plan.plan_program``) with placeholder operand args, so the schedule,
    block size and split limit are exactly the ones ``attention()`` would use: planned from the
    capacity (trace-safe), whatever the positions; each slice's share of the live tiles follows
    from ``kv_positions`` at run time (:func:`work_features`).
    """
    from ttnn_flashdecode.op.plan import plan_program
    from ttnn_flashdecode.emulator.arch import ArchSpec
    from ttnn_flashdecode.op.program_factory import OPERANDS
    from ttnn_flashdecode.op.modifiers import ScoreModifiers
    from ttnn_flashdecode.op.shape import ComputeOptions, DecodeShape

    decode = DecodeShape(len(kv_positions), shape.n_q_heads, shape.n_kv_heads, shape.head_dim, capacity,
                         kv_dtype=kv_dtype, scores=ScoreModifiers(window=window, attention_chunk=chunk))
    spec = ArchSpec.for_name(arch)
    accessor_args = tuple((2, TILE_BYTES) for _ in range(len(OPERANDS)))
    noc_xy = spec.worker_noc_xy if (grid[0] <= len(spec.worker_xs) and grid[1] <= len(spec.worker_ys)) else (
        lambda x, y: (x % 64, y % 64))
    return plan_program(decode, block_tiles, split, ComputeOptions(), arch, grid, accessor_args, noc_xy)


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
    cache = _cache_dir() / f"calls-v2-q{q_rows}-d{dim_tiles}-{kernel_hash}.json"  # v2: with zone_calls
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
    model = CallModel(q_rows, dim_tiles, True, calls, counters, kernel_hash, zone_calls)
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


def windowed_kv_positions(kv_positions: Sequence[int], window: int, chunk: int = 0) -> list[int]:
    """Per request, the live positions of an unwindowed request that does the same work as one
    with a sliding window of ``window`` positions (0: none): the window's tiles moved to start at
    tile 0 (``kv - 32 * first_tile``), so live tiles, the tail tile and every slice's share are the
    windowed request's. What this leaves out: the window mask of the window's first tile (built in
    L1 by the reader, added by compute; no DRAM byte). ``chunk``: an attention chunk (0: none), a
    start like the window's (the later of the two)."""
    return [int(p) - 32 * kv_walk.window_first_tile(int(p), window, chunk=chunk) for p in kv_positions]


KV_SHORT = {"bfloat16": "bf16", "bfloat8_b": "bfp8", "bfloat4_b": "bfp4"}
"""A K/V dtype's short name in the benches' tables."""


def format_bytes(n: int) -> str:
    """``n`` bytes in GiB / MiB / KiB (one decimal) or B, for the benches' tables."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n}B"


def kv_tile_bytes(kv_dtype: str) -> int:
    """Bytes of one K/V tile of a ``kv_dtype`` cache: 2048 (bfloat16), 1088 (bfloat8_b), 576 (bfloat4_b)."""
    return KV_TILE_BYTES[KV_FORMATS[kv_dtype]]


def min_dram_bytes(kv_positions: Sequence[int], dim_tiles: int, kv_dtype: str = "bfloat16", window: int = 0,
                   chunk: int = 0) -> int:
    """Every live K and V tile once (with a sliding window, every tile the window touches):
    ``sum(2 * live_tiles * dim_tiles * tile bytes)`` bytes."""
    return sum(2 * kv_walk.live_tiles(p) * dim_tiles * kv_tile_bytes(kv_dtype)
               for p in windowed_kv_positions(kv_positions, window, chunk))


def roofline_s(kv_positions: Sequence[int], dim_tiles: int, dev: Device, kv_dtype: str = "bfloat16") -> float:
    """Minimum DRAM bytes / chip DRAM bandwidth, seconds."""
    return min_dram_bytes(kv_positions, dim_tiles, kv_dtype) / (dev.dram_gbps * 1e9)


class RooflineRatios:
    """The two ratios a modelled call is judged by, for any record with ``dram_read_bytes``,
    ``min_dram_bytes``, ``time_s`` and ``roofline_s`` (:class:`Estimate`, ``bench.Row``)."""

    @property
    def dram_ratio(self) -> float:
        """DRAM bytes read / minimum."""
        return self.dram_read_bytes / self.min_dram_bytes

    @property
    def roofline_ratio(self) -> float:
        """Modelled time / roofline (>= 1)."""
        return self.time_s / self.roofline_s


@dataclasses.dataclass(frozen=True)
class Estimate(RooflineRatios):
    """One modelled call (all times in seconds, bytes in bytes).

    Attributes:
        device: the device name.
        cores_used: cores that run a slice.
        max_live_tiles, min_live_tiles: live position tiles on the busiest / idlest used core.
        max_split: the largest split count in the schedule.
        dram_read_bytes: DRAM bytes read (analytic, from the fitted per-feature bytes).
        min_dram_bytes: every live K and V tile once.
        combine_noc_bytes: L1-to-L1 NoC bytes (Q/constants copies to slices 1.., partials up the
            combine tree, semaphores, and the reader's local copies of the query rows).
        time_s: modelled time per call (launch overhead not included).
        roofline_s: ``min_dram_bytes`` / chip DRAM bandwidth.
        chip_dram_s: ``dram_read_bytes`` / chip DRAM bandwidth.
        critical: what bounds the call: ``"dram"`` (chip bandwidth), ``"core"`` (a core of
            unsplit requests), or ``"split"`` (a split request's slices and combine tree).
        breakdown: the critical path's terms, seconds: for ``"split"``, ``startup_s`` (the latest
            K/V stream start: a slice's wait for its Q/constants copy and its children's),
            ``slowest_slice_s`` (the longest slice,
            startup included; a max-first slice's up to its scores and max), ``tree_s`` (from that
            slice's end to the root's output), split into ``max_pass_s`` (to the request's max on
            slice 0), ``share_max_s`` (until the last slice has copied it) and ``sum_pass_s``
            (max-first slices' exp, P.V and row sums, rescales, sums, normalise), and ``levels``
            (tree depth, a count); for ``"core"``, ``first_block_s``, ``compute_s`` and ``core_dram_s``.
        floor_s: the least time an even split of the call's longest request could take under
            this model, and never less than the roofline: its live tiles' compute spread evenly
            over ``p`` slices (``p`` up to the cores per request) plus one max step and one sum
            step (with their transfers) per combine level, minimised over ``p``; no fixed,
            startup, fill, rescale or normalise costs. What re-scheduling these kernels into even
            slices could at best reach (uneven ones model slower: pass 1 waits for every slice's
            scores).
    """

    device: str
    cores_used: int
    max_live_tiles: int
    min_live_tiles: int
    max_split: int
    dram_read_bytes: int
    min_dram_bytes: int
    combine_noc_bytes: int
    time_s: float
    roofline_s: float
    chip_dram_s: float
    critical: str
    breakdown: Mapping[str, float]
    weights: str = "uniform"
    floor_s: float = 0.0


def estimate(
    plan: Schedule,
    kv_positions: Sequence[int],
    block_tiles: int,
    model: CallModel,
    seed_model: CallModel,
    dev: Device,
    *,
    weights: str = "uniform",
    users: int = 1,
    kv_dtype: str = "bfloat16",
    window: int = 0,
    chunk: int = 0,
) -> Estimate:
    """Model one call that runs ``plan`` on ``dev`` (see the module docstring for the terms).

    Args:
        plan: the schedule (the op's: :func:`op_schedule`).
        kv_positions: per request, live positions.
        block_tiles: the residency's block size.
        model: the :class:`CallModel` of the call's group shape.
        seed_model: the :class:`CallModel` of the seed's (``q_rows`` 8, ``dim_tiles`` 4), for the
            per-call cost.
        dev: the device.
        weights: per-call weighting, ``"uniform"`` (default) or ``"tile-ops"``.
        users: the batch (the POSITIONS page each core reads).
        kv_dtype: the cache's dtype: the model is fitted on bfloat16 caches, so each live K+V
            tile's DRAM bytes scale by the format's tile size (the emulator reads exactly those
            tiles, bench checks it); compute calls are the same (the unpacker converts as it reads).
        window: the call's sliding window (0: none); ``plan`` must be planned with it
            (:func:`op_schedule`). Modelled as the equivalent unwindowed work
            (:func:`windowed_kv_positions`): DRAM bytes exact, the window mask's few calls left out.
        chunk: the call's attention chunk (0: none), modelled like the window.
    """
    kv_positions = windowed_kv_positions(kv_positions, window, chunk)
    features = work_features(plan, kv_positions, block_tiles, users)
    kv_scale = kv_tile_bytes(kv_dtype) / TILE_BYTES
    per_call = cost_per_call_s(seed_model, dev, weights)
    zone_s = {zone: model.weighted_zone_calls(features, zone, weights) * per_call for zone in COMBINE_ZONES}
    per_child_s = {zone: model.weighted_zone_per_feature(zone, weights)["partials_combined"] * per_call
                   for zone in ("fd-compute-max", "fd-compute-sum")}
    post_s = zone_s["fd-compute-normalise"]
    max_first = features[:, FEATURES.index("max_first")] > 0
    after_s = np.where(max_first, sum(model.weighted_zone_calls(features, zone, weights) for zone in AFTER_MAX_ZONES), 0.0)
    after_s = after_s * per_call
    pre_s = model.weighted_calls(features, weights) * per_call - sum(zone_s.values()) - after_s
    nbytes = model.core_bytes(features)
    live_tile_bytes = model.bytes["dram_read_bytes"][FEATURES.index("live_tiles")]  # K + V, every dim tile
    nbytes["dram_read_bytes"] = nbytes["dram_read_bytes"] - features[:, FEATURES.index("live_tiles")] * round(
        live_tile_bytes * (1 - kv_scale))
    core_dram_s = nbytes["dram_read_bytes"] / dev.core_dram_bytes_per_s
    fill_s = _first_block_s(plan, kv_positions, block_tiles, model, dev) * kv_scale
    link = dev.link_bytes_per_s
    stats_bytes = stats_page_bytes(TILE_BYTES, model.fp32_dest_acc_en)
    partial_bytes = protocol.partial_pages(model.dim_tiles) * stats_bytes

    worst, critical, breakdown = 0.0, "core", {}
    in_split: set[int] = set()
    for request in range(plan.requests):
        count = plan.split_count(request)
        if count == 1:
            continue
        core = [plan.core_of(request, i) for i in range(count)]
        in_split.update(core)
        children = [protocol.tree_children(i, count) for i in range(count)]
        # Slices 1.. copy their parent's Q and constants (their L1 reads, less the request's max
        # they copy later); a parent's children queue at its NoC port in slot order, and a parent
        # starts its K/V stream once they all have.
        copy_s = [0.0] + [(int(nbytes["l1_read_bytes"][core[i]]) - stats_bytes) / link for i in range(1, count)]
        staged, start = [0.0] * count, [0.0] * count
        for i in range(count):  # parents have lower indices than their children
            t = staged[i]
            for c in children[i]:
                t += copy_s[c]
                staged[c] = t
            start[i] = t
        # A slice's work before pass 1: all of it, overlapped with its K/V stream; a max-first
        # slice's up to its scores and max, after its first block's K.
        own = [float(start[i] + fill_s[core[i]] + (pre_s[core[i]] if max_first[core[i]] else
                                                  max(pre_s[core[i]], core_dram_s[core[i]] - fill_s[core[i]])))
               for i in range(count)]

        def up_the_tree(begin: list[float], step_s: float, message_bytes: int, base_s, end_s) -> list[float]:
            """Each slice from `begin`, then its children folded in, in slot order, as each lands,
            then its `end_s` (before its message leaves)."""
            done = [0.0] * count
            for i in reversed(range(count)):  # children have higher indices than their parent
                t = begin[i] + float(base_s[core[i]]) - len(children[i]) * step_s
                for c in children[i]:
                    t = max(t, done[c] + message_bytes / link) + step_s
                done[i] = t + float(end_s[core[i]])
            return done

        # Pass 1: subtree maxima. The request's max then travels down the tree like Q: a slice
        # copies it from its parent (queued at the parent's port) and hands it to its compute once
        # its own children have copied it; slice 0's compute has it at once.
        max_done = up_the_tree(own, per_child_s["fd-compute-max"], stats_bytes, zone_s["fd-compute-max"], 0 * post_s)
        landed, request_max = [max_done[0]] + [0.0] * (count - 1), [max_done[0]] + [0.0] * (count - 1)
        for i in range(count):
            t = landed[i]
            for c in children[i]:
                t += stats_bytes / link
                landed[c] = t
            if i:
                request_max[i] = t
        # Pass 2: a max-first slice runs exp(), P.V and its row sums (once its V has arrived too), the
        # others rescale their state; then each adds its children's partials as they land (the last
        # step fills OUTBOX) and slice 0 normalises.
        v_read = [float(start[i] + core_dram_s[core[i]]) if max_first[core[i]] else 0.0 for i in range(count)]
        rescaled = [max(max_done[i], request_max[i], v_read[i]) + float(after_s[core[i]] + zone_s["fd-compute-rescale"][core[i]])
                    for i in range(count)]
        sum_done = up_the_tree(rescaled, per_child_s["fd-compute-sum"], partial_bytes, zone_s["fd-compute-sum"], post_s)
        done = sum_done[0]
        if done > worst:
            worst, critical = done, "split"
            breakdown = {"startup_s": max(start), "slowest_slice_s": max(own),
                         "max_pass_s": max_done[0] - max(own), "share_max_s": max(request_max) - max_done[0],
                         "sum_pass_s": done - max(request_max), "tree_s": done - max(own),
                         "levels": (count - 1).bit_length()}
    combine_s = zone_s["fd-compute-max"] + zone_s["fd-compute-rescale"] + zone_s["fd-compute-sum"]
    busy = fill_s + np.maximum(pre_s + after_s + combine_s + post_s, core_dram_s - fill_s)
    for core in range(plan.used_cores):
        if core not in in_split and busy[core] > worst:
            worst, critical = float(busy[core]), "core"
            breakdown = {"first_block_s": float(fill_s[core]), "compute_s": float(pre_s[core] + post_s[core]),
                         "core_dram_s": float(core_dram_s[core])}
    dram_read = int(nbytes["dram_read_bytes"].sum())
    chip_dram_s = dram_read / (dev.dram_gbps * 1e9)
    tile_s = model.weighted_per_feature(weights)["live_tiles"] * per_call
    level_s = sum(per_child_s.values()) + (stats_bytes + partial_bytes) / link
    longest = max(kv_walk.live_tiles(int(p)) for p in kv_positions)
    floor_s = max(roofline_s(kv_positions, model.dim_tiles, dev, kv_dtype), min(
        -(-longest // p) * tile_s + protocol.tree_levels(p) * level_s
        for p in range(1, min(max(dev.cores // plan.requests, 1), longest, protocol.MAX_SPLIT) + 1)))
    if chip_dram_s >= worst:
        worst, critical = chip_dram_s, "dram"
    live = plan.live_tiles_per_core(kv_positions)
    return Estimate(
        device=dev.name,
        cores_used=plan.used_cores,
        max_live_tiles=max(live),
        min_live_tiles=min(live),
        max_split=max(plan.split_count(r) for r in range(plan.requests)),
        dram_read_bytes=dram_read,
        min_dram_bytes=min_dram_bytes(kv_positions, model.dim_tiles, kv_dtype),
        combine_noc_bytes=int(nbytes["l1_read_bytes"].sum() + nbytes["l1_write_bytes"].sum()),
        time_s=worst,
        roofline_s=roofline_s(kv_positions, model.dim_tiles, dev, kv_dtype),
        chip_dram_s=chip_dram_s,
        critical=critical,
        breakdown=breakdown,
        weights=weights if isinstance(weights, str) else "llk-v2",
        floor_s=floor_s,
    )


def op_schedule(shape: Shape, kv_positions_per_user: Sequence[int], dev: Device, *, capacity: int | None = None,
                split: int | None = None, block_tiles: int | None = None,
                kv_dtype: str = "bfloat16", window: int = 0, chunk: int = 0) -> tuple[Schedule, list[int], int]:
    """The schedule and block size ``attention()`` would use on ``dev`` for these users.

    Args:
        shape: the model shape.
        kv_positions_per_user: per user, live positions (``cur_pos + 1``).
        dev: the device (its arch sizes L1, its grid the schedule).
        capacity: the KV cache's positions; default: the longest user rounded up to 1024.
        split, block_tiles: as ``attention()``'s.
        kv_dtype: the cache's dtype (block-float K/V blocks take less L1, so blocks may be larger).
        window: a sliding window (0: none): the plan schedules its tiles, not the cache's.
        chunk: an attention chunk (0: none): likewise.

    Returns:
        ``(schedule, kv_positions per request, block_tiles)``; requests are user-major.
    """
    capacity = capacity or max(1024, -(-max(kv_positions_per_user) // 1024) * 1024)
    plan = _op_plan(shape, kv_positions_per_user, capacity, dev.arch, dev.grid, split, block_tiles, kv_dtype, window,
                    chunk)
    kv_requests = [p for p in kv_positions_per_user for _ in range(shape.n_kv_heads)]
    return plan.schedule, kv_requests, plan.residency.block_tiles


def _main(argv: Iterable[str] | None = None) -> int:  # pragma: no cover - developer aid
    """Print the fitted per-feature counts and the seed fit: ``python -m ttnn_flashdecode.tools.cost_model``."""
    seed = calibrate(SEED_Q_ROWS, SEED_HEAD_DIM // 32)
    for weights in WEIGHTINGS:
        check = seed_check(seed, weights)
        print(f"[{weights}] per call {check['per_call_s'] * 1e9:.1f} ns (Blackhole); seed intercept "
              f"{check['intercept_s'] * 1e6:.1f} us; kv 2048: {check['predicted_2048_s'] * 1e3:.3f} ms modelled vs "
              f"{check['measured_2048_s'] * 1e3:.3f} ms measured")
        print("  weighted calls per feature:", {k: round(v, 1) for k, v in seed.weighted_per_feature(weights).items()})
    print("bytes per feature:", dict(seed.bytes))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
