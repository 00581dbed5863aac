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

from collections.abc import Iterable

# The model lives in three sibling modules (each under ~500 lines); this module is its one name space.
from ttnn_flashdecode.tools.cost_base import (  # noqa: F401
    _BLACKHOLE_CLOCK_GHZ, _BYTE_COUNTERS, _SPECS, AFTER_MAX_ZONES, COMBINE_ZONES, DEVICES, DRAM_GBPS, FEATURES,
    KV_SHORT, LAUNCH_OVERHEAD_S, MODELS, SEED_BLOCK_TILES, SEED_HEAD_DIM, SEED_KV_POSITIONS, SEED_MS, SEED_Q_ROWS,
    SEED_READER_GBPS, TILE_BYTES, Device, RooflineRatios, Shape, _slice_features, device, format_bytes, kv_tile_bytes,
    min_dram_bytes, roofline_s, windowed_kv_positions, work_features,
)
from ttnn_flashdecode.tools.cost_calls import (  # noqa: F401
    _CALIBRATION_RUNS, _FREE_IN_TILE_OPS, CACHE_ENV, WEIGHTINGS, CalibrationError, CallModel, _cache_dir,
    _emulated_grid, _first_block_s, _fit, _kernel_hash, _op_plan, _report_rows, _run_emulated, _seed_features,
    _weight, calibrate, compute_calls, cost_per_call_s, seed_check,
)
from ttnn_flashdecode.tools.cost_estimate import Estimate, estimate, op_schedule  # noqa: F401
from ttnn_flashdecode.op.residency import stats_page_bytes  # noqa: F401  (callers take it from here)

__all__ = [
    "SEED_KV_POSITIONS", "SEED_MS", "SEED_READER_GBPS", "LAUNCH_OVERHEAD_S", "FEATURES", "WEIGHTINGS",
    "Device", "device", "DEVICES", "Shape", "MODELS", "CallModel", "calibrate", "work_features",
    "op_schedule", "kv_tile_bytes", "RooflineRatios", "Estimate", "estimate", "cost_per_call_s", "roofline_s", "min_dram_bytes",
    "compute_calls", "CalibrationError", "seed_check", "COMBINE_ZONES", "CACHE_ENV", "TILE_BYTES",
]


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
