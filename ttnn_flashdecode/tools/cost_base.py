"""The cost model's base: constants, devices, shapes, work features, bytes and rooflines.

Part of :mod:`ttnn_flashdecode.tools.cost_model` (its docstring says what the model is and where each
figure comes from); import the names from there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op import kv_walk
from ttnn_flashdecode.op.residency import BFLOAT16_TILE_BYTES, KV_FORMATS, KV_TILE_BYTES
from ttnn_flashdecode.op.schedule import Schedule, Slice

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
an unsplit request, normalise (``attention_softmax.hpp``, ``attention_combine.hpp``). A "max first" slice (its live tiles in
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


