"""``python -m ttnn_flashdecode bench``: work balance, DRAM efficiency and MODELLED device time.

For each model shape (MiniCPM5-1B 16/2 heads d128, Llama-3.1-8B 32/8 d128, SmolLM2 9/3 d64),
context (1k, 8k, 32k, 128k; every user at the full context) and batch (1, 32), and for n150 and
p150, it prints what the op's own planner schedules (cores used, max/min live tiles per core,
largest split), the DRAM bytes it reads against the minimum (every live K and V tile once), the
L1-to-L1 NoC bytes of the split-K combine, and a **modelled, not measured** time per call next to
the DRAM roofline (minimum bytes / DRAM bandwidth): device model v2 by default
(:mod:`ttnn_flashdecode.tools.device_model`: each compute call priced from the LLK sources at the
op's compute config, HiFi4 fp32 DST accurate exp; ``--fidelity`` / ``--dst`` / ``--exp-approx``
change it), or model v1 with ``--weights uniform`` / ``tile-ops`` (one cost per call, fitted to the
seed's single-core slope: :mod:`ttnn_flashdecode.tools.cost_model`).

Where a run is affordable (``batch x n_kv_heads x context`` up to ``--emulate-budget``), the n150
row's byte counts and cores come from the host emulator running the real kernels (``src``
column ``emu``); other rows are analytic (``model``), from per-feature counts the emulator
calibrated. The emulator models Wormhole's 8x8 grid, so p150 rows are always analytic. Times
are always modelled: there is no card here.

Options: ``--json PATH`` writes every row and the model's constants; ``--plot PATH.png`` draws
modelled time vs context against the roofline, one panel per model and device.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import sys
import time
from collections.abc import Sequence

from ttnn_flashdecode.tools import cost_model as cm

__all__ = ["main", "Row", "run"]

CONTEXTS = (1024, 8192, 32768, 131072)
BATCHES = (1, 32)
EMULATE_BUDGET = 262_144
"""Default limit of ``batch x n_kv_heads x context`` (request-positions) for an emulator run:
every such run takes a few seconds on a 2-core host (Llama-3.1-8B at batch 32, 1k: ~6 s)."""

NOTE = ("Device times are MODELLED, not measured (no Tenstorrent card): ttnn_flashdecode.tools.cost_model, "
        "per-call cost fitted to the seed's Blackhole slope (the seed: the single-core op this project grew from, "
        "timed on a card by its authors; docs/reference/DESIGN.md §8), DRAM 288/512 GB/s, clocks "
        "1.0/1.35 GHz (docs/reference/TT_FACTS.md §8). Not included: the seed's per-launch overhead (its line's ~{launch:.0f} us "
        "intercept, ~{residual:.0f} us of it beyond the work the model counts).")


@dataclasses.dataclass(frozen=True)
class Row(cm.RooflineRatios):
    """One benchmark row (times in seconds, bytes in bytes)."""

    model: str
    context: int
    batch: int
    device: str
    kv_dtype: str  # the K/V cache's: bfloat16, bfloat8_b or bfloat4_b
    cores: int
    cores_used: int
    max_live_tiles: int
    min_live_tiles: int
    max_split: int
    block_tiles: int
    dram_read_bytes: int
    min_dram_bytes: int
    combine_noc_bytes: int
    time_s: float
    roofline_s: float
    floor_s: float  # cost_model.Estimate.floor_s
    critical: str
    source: str  # "emu" (emulator-measured bytes and cores) or "model" (analytic)
    weights: str
    breakdown: dict


def _measured(shape: cm.Shape, context: int, batch: int, split, kv_dtype: str = "bfloat16", window: int = 0,
              chunk: int = 0):
    """Emulator counters of one call: (DRAM read bytes, L1-to-L1 bytes, cores used), and the plan."""
    report, plan = cm._run_emulated(shape, [context] * batch, split, None, kv_dtype=kv_dtype, window=window, chunk=chunk)
    totals = report.totals
    return (totals.dram_read_bytes, totals.l1_read_bytes + totals.l1_write_bytes, len(report.cores)), plan


@contextlib.contextmanager
def _min_slice_tiles(tiles: int | None):
    """Make the op's planner cut slices no smaller than ``tiles`` (a what-if; None: its default).

    The op's planner (``plan.plan_program``) calls :func:`ttnn_flashdecode.op.schedule.schedule` with
    the bound ``plan.min_slice_tiles_per_row_tile``; this swaps in another for the duration, for
    both the analytic rows and the emulator runs.
    """
    if tiles is None:
        yield
        return
    from ttnn_flashdecode.op import plan

    original = plan.min_slice_tiles_per_row_tile
    plan.min_slice_tiles_per_row_tile = tiles
    plan.plan_program.cache_clear()  # plans are cached: none made under either bound may leak
    try:
        yield
    finally:
        plan.min_slice_tiles_per_row_tile = original
        plan.plan_program.cache_clear()


def run(
    models: Sequence[str] = tuple(cm.MODELS),
    contexts: Sequence[int] = CONTEXTS,
    batches: Sequence[int] = BATCHES,
    devices: Sequence[str] = cm.DEVICES,
    *,
    weights=None,
    emulate_budget: int = EMULATE_BUDGET,
    p150_cores: int | None = None,
    split: int | None = None,
    min_slice_tiles: int | None = None,
    kv_dtypes: Sequence[str] = ("bfloat16",),
    log=None,
    window: int = 0,
    chunk: int = 0,
) -> list[Row]:
    """Compute every row (see the module docstring).

    ``weights``: None (default) for device model v2 at the op's compute config, a
    ``device_model.llk_costs.ComputeConfig`` for v2 at that config, or a v1 weighting
    (``cost_model.WEIGHTINGS``: ``"uniform"``, ``"tile-ops"``).

    ``min_slice_tiles`` overrides the planner's smallest split-K slice
    (``schedule.DEFAULT_MIN_SLICE_TILES``) to compare bounds. ``kv_dtypes``: the K/V cache dtypes
    to run each call with (``bfloat16``, ``bfloat8_b``, ``bfloat4_b``); an emulated block-float
    row packs its cache with ttnn (:func:`ttnn_flashdecode.op.devices.ensure_host_context` first).
    ``window``: a sliding window for every call (0: none); its rows are named ``model W=...``.
    ``chunk``: an attention chunk for every call (0: none; ``attention_chunk_size``): DRAM bytes
    follow the chunk's tiles; its rows are named ``model C=...``.

    Raises:
        cost_model.CalibrationError: the kernels no longer fit the cost model's features.
        RuntimeError: an emulator run's bytes or cores disagree with the analytic model.
    """
    if weights is None:
        from ttnn_flashdecode.tools.device_model.llk_costs import ComputeConfig

        weights = ComputeConfig()  # the op's: HiFi4, fp32 DST, the accurate exp
    with _min_slice_tiles(min_slice_tiles):
        return _run(models, contexts, batches, devices, weights, emulate_budget, p150_cores, split, kv_dtypes, log,
                    window, chunk)


def _run(models, contexts, batches, devices, weights, emulate_budget, p150_cores, split, kv_dtypes, log,
         window=0, chunk=0) -> list[Row]:
    seed = cm.calibrate(cm.SEED_Q_ROWS, cm.SEED_HEAD_DIM // 32)
    v2 = not isinstance(weights, str)  # a device_model ComputeConfig: model v2 at that config
    rows = []
    for key in models:
        shape = cm.MODELS[key]
        model = cm.calibrate(shape.q_rows, shape.dim_tiles)
        for device_name in devices:
            dev = cm.device(device_name, p150_cores if device_name == "p150" else None)
            for context in contexts:
                for batch, kv_dtype in ((b, d) for b in batches for d in kv_dtypes):
                    plan, kv, block_tiles = cm.op_schedule(shape, [context] * batch, dev, split=split, kv_dtype=kv_dtype,
                                                           window=window, chunk=chunk)
                    est = _estimate(plan, kv, block_tiles, model, seed, dev, weights, batch, kv_dtype, window, chunk) \
                        if v2 else cm.estimate(plan, kv, block_tiles, model, seed, dev, weights=weights, users=batch,
                                               kv_dtype=kv_dtype, window=window, chunk=chunk)
                    source, dram, noc, used = "model", est.dram_read_bytes, est.combine_noc_bytes, est.cores_used
                    emulable = dev.arch == "wormhole_b0" and dev.grid == cm._emulated_grid()
                    if emulable and batch * shape.n_kv_heads * context <= emulate_budget:
                        if log:
                            log(f"  emulating {shape.name} context {context} batch {batch} {kv_dtype} ...")
                        (dram, noc, used), _ = _measured(shape, context, batch, split, kv_dtype, window, chunk)
                        if (dram, noc, used) != (est.dram_read_bytes, est.combine_noc_bytes, est.cores_used):
                            raise RuntimeError(
                                f"{shape.name} context {context} batch {batch} {kv_dtype}: expected the emulator to match the "
                                f"analytic model (DRAM {est.dram_read_bytes} B, NoC {est.combine_noc_bytes} B, "
                                f"{est.cores_used} cores), got DRAM {dram} B, NoC {noc} B, {used} cores")
                        source = "emu"
                    rows.append(Row(
                        model=shape.name + (f" W={window}" if window else "") + (f" C={chunk}" if chunk else ""),
                        context=context, batch=batch,
                        device=device_name, kv_dtype=kv_dtype,
                        cores=dev.cores,
                        cores_used=used, max_live_tiles=est.max_live_tiles, min_live_tiles=est.min_live_tiles,
                        max_split=est.max_split, block_tiles=block_tiles, dram_read_bytes=dram,
                        min_dram_bytes=est.min_dram_bytes, combine_noc_bytes=noc, time_s=est.time_s,
                        roofline_s=est.roofline_s, floor_s=est.floor_s, critical=est.critical, source=source,
                        weights=f"llk-v2 {weights.label}" if v2 else weights,
                        breakdown=dict(est.breakdown),
                    ))
    return rows


def _estimate(plan, kv, block_tiles, model, seed, dev, cfg, batch, kv_dtype, window, chunk) -> cm.Estimate:
    """Device model v2 for a bench row: per-call LLK cycles at ``cfg``, DRAM at the request-rate
    efficiency of the cache's pages on the NoCs the reader uses (both: the emulator's count,
    ``kernel_model.measured_nocs``); the roofline stays at the chip's peak and ``critical`` says
    ``req`` where the request rate binds."""
    from ttnn_flashdecode.tools.device_model import hardware, kernel_model as km

    weights, _ = km.weights_v2(model, cfg, block_tiles=block_tiles)
    efficiency = hardware.dram_efficiency(dev.arch, cm.kv_tile_bytes(kv_dtype), km.measured_nocs(model))
    est = cm.estimate(plan, kv, block_tiles, model, seed, dataclasses.replace(dev, dram_gbps=dev.dram_gbps * efficiency),
                      weights=weights, users=batch, kv_dtype=kv_dtype, window=window, chunk=chunk)
    roofline = cm.roofline_s(cm.windowed_kv_positions(kv, window, chunk), model.dim_tiles, dev, kv_dtype)
    critical = "req" if est.critical == "dram" and efficiency < 0.97 else est.critical
    return dataclasses.replace(est, roofline_s=roofline, time_s=max(est.time_s, roofline), critical=critical,
                               floor_s=max(est.floor_s, roofline))


def bytes_vs_bfloat16(rows: Sequence[Row]) -> dict[int, float]:
    """Per row index, its DRAM read bytes over those of the bfloat16 row of the same call (model,
    context, batch, device), when that row is present."""
    bf16 = {(r.model, r.context, r.batch, r.device): r.dram_read_bytes for r in rows if r.kv_dtype == "bfloat16"}
    return {i: r.dram_read_bytes / bf16[key] for i, r in enumerate(rows)
            if (key := (r.model, r.context, r.batch, r.device)) in bf16}


def format_table(rows: Sequence[Row]) -> str:
    """The rows as a fixed-width table (times in microseconds)."""
    header = (f"{'model':<13}{'ctx':>7}{'batch':>6} {'dev':<5}{'kv':<5}{'cores':>8}{'tiles/core':>12}{'split':>6}"
              f"{'DRAM read':>11}{'/min':>7}{'/bf16':>7}{'NoC L1':>9}{'time us*':>10}{'roof us':>9}{'x roof':>8}{'floor':>7}"
              f"  {'bound':<6}{'src':<5}")
    lines = [header, "-" * len(header)]
    versus = bytes_vs_bfloat16(rows)
    for i, r in enumerate(rows):
        ratio = f"{versus[i]:.3f}" if i in versus else "-"
        lines.append(
            f"{r.model:<13}{r.context:>7}{r.batch:>6} {r.device:<5}{cm.KV_SHORT[r.kv_dtype]:<5}{f'{r.cores_used}/{r.cores}':>8}"
            f"{f'{r.max_live_tiles}/{r.min_live_tiles}':>12}{r.max_split:>6}{cm.format_bytes(r.dram_read_bytes):>11}"
            f"{r.dram_ratio:>7.3f}{ratio:>7}{cm.format_bytes(r.combine_noc_bytes):>9}{r.time_s * 1e6:>10.1f}{r.roofline_s * 1e6:>9.1f}"
            f"{r.roofline_ratio:>8.2f}{r.floor_s / r.roofline_s:>7.2f}  {r.critical:<6}{r.source:<5}"
        )
    return "\n".join(lines)


def _legend_v2(cfg) -> str:
    return "\n".join([
        f"* MODELLED, not measured: device model v2 (ttnn_flashdecode/tools/device_model) at {cfg.label}: each compute",
        "  call priced from the LLK sources (fidelity phases, DST mode, SFPU iterations), the emulator's call counts per core,",
        "  DRAM at the fraction of peak the cache's page size reaches on the NoCs the reader uses (both; tt-metal #55898).",
        "  Not fitted to the seed (model v1, fitted to it: --weights uniform). bound: dram = chip DRAM bandwidth; req = the",
        "  DRAM request rate (small pages); core = a core of unsplit requests; split = a split request's slices and",
        "  combine tree.",
    ])


def _legend(weights) -> str:
    if not isinstance(weights, str):
        return _legend_v2(weights)
    seed = cm.calibrate(cm.SEED_Q_ROWS, cm.SEED_HEAD_DIM // 32)
    check = cm.seed_check(seed, weights)
    per_tile = seed.weighted_per_feature(weights)
    per_child = {zone: seed.weighted_zone_per_feature(f"fd-compute-{zone}", weights)["partials_combined"]
                 for zone in ("max", "sum")}
    rescale = seed.weighted_zone_per_feature("fd-compute-rescale", weights)["partials_sent"]
    return "\n".join([
        "* " + NOTE.format(launch=cm.LAUNCH_OVERHEAD_S * 1e6, residual=check["intercept_s"] * 1e6),
        f"  weights={weights}: {check['per_call_s'] * 1e9:.0f} ns per compute call on p150 (x1.35 on n150); "
        f"per live tile {per_tile['live_tiles']:.0f} calls, per later block {per_tile['later_blocks']:.0f}, "
        f"per slice ~{per_tile['normalised']:.0f}; split-K combine: per child {per_child['max']:.0f} (max pass) + "
        f"{per_child['sum']:.0f} (sum pass), per slice {rescale:.0f} to rescale; seed check: "
        f"kv 2048 {check['predicted_2048_s'] * 1e3:.3f} ms modelled vs {check['measured_2048_s'] * 1e3:.3f} ms measured.",
        "  cores: used/grid. tiles/core: max/min live position tiles on a used core. split: most slices of one request.",
        "  kv: the K/V cache's dtype (bf16 2048-, bfp8 1088-, bfp4 576-byte tiles; Q and the output stay bfloat16).",
        "  DRAM read /min: bytes read over every live K and V tile once (in the row's format); /bf16: over the",
        "  bfloat16 row of the same call. NoC L1: core-to-core bytes (Q/constants to",
        "  slices, partials up the combine tree, semaphores, local query-row copies). roof: min bytes / DRAM bandwidth.",
        "  bound: dram = chip DRAM bandwidth; core = a core of unsplit requests; split = a split request's slices and",
        "  combine tree. src: emu = bytes and cores measured by the emulator (n150 grid), model = analytic.",
        "  floor: the least time / roofline any even split of the longest request could reach with these kernels'",
        "  per-tile and per-combine-level costs alone (no fixed, startup or fill costs; cost_model.Estimate.floor_s).",
    ])


def write_plot(rows: Sequence[Row], path: str) -> None:
    """Modelled time per call vs context (log-log), one panel per (model, device), with the roofline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r.model for r in rows))
    devices = list(dict.fromkeys(r.device for r in rows))
    fig, axes = plt.subplots(len(models), len(devices), figsize=(5 * len(devices), 3.6 * len(models)),
                             squeeze=False, sharex=True)
    for i, model in enumerate(models):
        for j, dev in enumerate(devices):
            ax = axes[i][j]
            for batch, kv in dict.fromkeys((r.batch, r.kv_dtype) for r in rows):
                sel = sorted((r for r in rows if (r.model, r.device, r.batch, r.kv_dtype) == (model, dev, batch, kv)),
                             key=lambda r: r.context)
                if not sel:
                    continue
                xs, name = [r.context for r in sel], f"batch {batch} {cm.KV_SHORT[kv]}"
                line, = ax.plot(xs, [r.time_s * 1e6 for r in sel], marker="o", label=f"{name}: modelled")
                ax.plot(xs, [r.roofline_s * 1e6 for r in sel], linestyle="--", color=line.get_color(),
                        label=f"{name}: DRAM roofline")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{model} on {dev}")
            ax.set_xlabel("context (positions)")
            ax.set_ylabel("time per call (us)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle("ttnn_flashdecode.attention: MODELLED device time (not measured) vs DRAM roofline", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ints(text: str) -> list[int]:
    """Comma-separated positive ints; a ``k`` suffix means x1024 (``8k`` = 8192)."""
    values = []
    for word in (w.strip().lower() for w in text.split(",") if w.strip()):
        try:
            value = int(word[:-1]) * 1024 if word.endswith("k") else int(word)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"expected comma-separated positive ints (8192 or 8k), got {text!r}") from error
        if value < 1:
            raise argparse.ArgumentTypeError(f"expected positive values, got {value}")
        values.append(value)
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one value, got {text!r}")
    return values


def _split(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 255:
        raise argparse.ArgumentTypeError(f"expected 1..255 (word 5's slice-count byte), got {value}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ttnn_flashdecode bench",
        description="Work balance, DRAM efficiency and MODELLED (not measured) device time of the "
                    "flash-decode op for MiniCPM5-1B, Llama-3.1-8B and SmolLM2 shapes.",
    )
    parser.add_argument("--models", default=",".join(cm.MODELS), help=f"comma-separated, from {', '.join(cm.MODELS)}")
    parser.add_argument("--contexts", type=_ints, default=list(CONTEXTS), help="comma-separated positions (default 1k,8k,32k,128k)")
    parser.add_argument("--batches", type=_ints, default=list(BATCHES), help="comma-separated (default 1,32)")
    parser.add_argument("--devices", default=",".join(cm.DEVICES), help="comma-separated, from n150, p150")
    parser.add_argument("--weights", choices=(*cm.WEIGHTINGS, "llk-v2"), default="llk-v2",
                        help="the device model (default llk-v2: device model v2, each call priced from the LLK sources "
                             "at the compute config --fidelity / --dst / --exp-approx, DRAM at the request-rate "
                             "efficiency; uniform: model v1, one cost per call fitted to the seed's slope; tile-ops: v1 "
                             "with inits and DST handshakes free)")
    parser.add_argument("--fidelity", choices=("LoFi", "HiFi2", "HiFi3", "HiFi4"), default="HiFi4",
                        help="with --weights llk-v2: math fidelity (default HiFi4, the op's)")
    parser.add_argument("--dst", choices=("fp32", "bf16"), default="fp32",
                        help="with --weights llk-v2: DST accumulation mode (default fp32, the op's; the call counts stay "
                             "the fp32 kernel's)")
    parser.add_argument("--exp-approx", action="store_true", help="with --weights llk-v2: the approximate exp")
    parser.add_argument("--p150-cores", type=_positive, default=None,
                        help="p150 worker cores (default: the installed core descriptor's 13x10 = 130; 110 for firmware >= v19.5)")
    parser.add_argument("--split", type=_split, default=None, help="force split-K slices per request (default: the planner's)")
    parser.add_argument("--min-slice-tiles", type=_positive, default=None,
                        help="smallest split-K slice the planner cuts (default: schedule.DEFAULT_MIN_SLICE_TILES)")
    parser.add_argument("--emulate-budget", type=int, default=EMULATE_BUDGET,
                        help=f"emulate n150 rows up to batch x n_kv_heads x context request-positions (default {EMULATE_BUDGET}; 0: none)")
    parser.add_argument("--kv-dtypes", default=",".join(cm.KV_SHORT),
                        help="comma-separated K/V cache dtypes, from bfloat16, bfloat8_b, bfloat4_b (default: all three)")
    parser.add_argument("--window", type=_positive, default=0,
                        help="sliding window (positions) for every call: DRAM bytes and time follow the window's tiles")
    parser.add_argument("--chunk", type=_positive, default=0,
                        help="attention chunk (positions, a multiple of 32) for every call: DRAM bytes and time follow "
                             "the chunk's tiles, not the position")
    parser.add_argument("--mesh", action="store_true",
                        help="instead: Llama-3.1-70B on a mesh, tensor parallel (T3K) and context parallel (8 and 32 "
                             "devices, 128k and 1M), the merge's all-gather and ops next to the attention "
                             "(tools/mesh_bench.py; --batches and --kv-dtypes apply)")
    parser.add_argument("--mla", action="store_true",
                        help="instead: DeepSeek-V3's MLA decode: DRAM bytes measured on the emulator at 16/64/128 heads "
                             "(the first of --contexts, default 1024) and a modelled DRAM / FPU bound at 1k/8k/32k "
                             "(tools/mla_bench.py; --contexts, --batches apply)")
    parser.add_argument("--sparse", action="store_true",
                        help="instead: DeepSeek-V3.2's sparse MLA decode, top-2048 rows: DRAM bytes measured on the "
                             "emulator at 32k, modelled time against the dense MLA call at 32k and 128k (tools/sparse_bench.py)")
    parser.add_argument("--versus-ttnn", action="store_true",
                        help="instead: every published ttnn decode figure (MEASURED ON SILICON, cited) beside this op "
                             "MODELLED at ttnn's shape and compute config (device model v2), the DRAM roofline and the "
                             "bound; what the kernel work of issue 35 would buy; the seed and #55760 checks")
    parser.add_argument("--json", metavar="PATH", help="write the rows and the model's constants as JSON")
    parser.add_argument("--plot", metavar="PATH.png", help="write modelled time vs context with the roofline")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns 0 (argparse exits 2 on bad arguments)."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    kv_dtypes = [d.strip() for d in args.kv_dtypes.split(",") if d.strip()]
    for name, allowed, values in (("--models", cm.MODELS, models), ("--devices", cm.DEVICES, devices),
                                  ("--kv-dtypes", cm.KV_SHORT, kv_dtypes)):
        bad = [v for v in values if v not in allowed]
        if bad:
            _parser().error(f"{name}: expected names from {', '.join(allowed)}, got {', '.join(bad)}")
    started = time.monotonic()
    if args.mesh:
        return _mesh(args, kv_dtypes, started)
    if args.mla:
        return _mla(args, started)
    if args.sparse:
        from ttnn_flashdecode.tools import sparse_bench
        return sparse_bench.report(args.json, started)
    if args.versus_ttnn:
        return _versus_ttnn(args, started)
    if set(kv_dtypes) - {"bfloat16"}:
        from ttnn_flashdecode.op.devices import ensure_host_context

        ensure_host_context()  # ttnn's block-float packing needs tt-metal's context
    log = functools.partial(print, file=sys.stderr, flush=True)
    if args.weights == "llk-v2":
        from ttnn_flashdecode.tools.device_model.llk_costs import ComputeConfig

        args.weights = ComputeConfig(args.fidelity, args.dst == "fp32", args.exp_approx)
    rows = run(models, args.contexts, args.batches, devices, weights=args.weights,
               emulate_budget=args.emulate_budget, p150_cores=args.p150_cores, split=args.split,
               min_slice_tiles=args.min_slice_tiles, kv_dtypes=kv_dtypes, log=log, window=args.window,
               chunk=args.chunk)
    print("ttnn_flashdecode bench -- device times are MODELLED, NOT MEASURED")
    print(format_table(rows))
    print(_legend(args.weights))
    if args.json:
        v2 = not isinstance(args.weights, str)
        payload = {
            "note": _legend_v2(args.weights) if v2 else NOTE.format(launch=cm.LAUNCH_OVERHEAD_S * 1e6, residual=cm.seed_check(
                cm.calibrate(cm.SEED_Q_ROWS, cm.SEED_HEAD_DIM // 32), args.weights)["intercept_s"] * 1e6),
            "weights": dataclasses.asdict(args.weights) | {"model": "llk-v2"} if v2 else args.weights,
            "launch_overhead_s": cm.LAUNCH_OVERHEAD_S,
            "seed": {"kv_positions": cm.SEED_KV_POSITIONS, "ms": cm.SEED_MS, "reader_gbps": cm.SEED_READER_GBPS},
            "devices": {d: dataclasses.asdict(cm.device(d, args.p150_cores if d == "p150" else None)) for d in devices},
            "rows": [dataclasses.asdict(r) | {"dram_ratio": r.dram_ratio, "roofline_ratio": r.roofline_ratio} for r in rows],
        }
        with open(args.json, "w") as handle:
            json.dump(payload, handle, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        write_plot(rows, args.plot)
        print(f"wrote {args.plot}")
    print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


def _mla(args, started) -> int:
    """``--mla``: :mod:`ttnn_flashdecode.tools.mla_bench`'s measured and modelled rows."""
    from ttnn_flashdecode.tools import mla_bench

    default = args.contexts == list(CONTEXTS)
    measured = mla_bench.measure(context=1024 if default else args.contexts[0],
                                 log=functools.partial(print, file=sys.stderr, flush=True))
    modelled = mla_bench.model(contexts=(1024, 8192, 32768) if default else args.contexts,
                               batches=args.batches if args.batches != list(BATCHES) else (1, 32))
    print("ttnn_flashdecode bench --mla -- DeepSeek-V3 MLA decode: bytes MEASURED on the emulator; "
          "device times MODELLED, NOT MEASURED")
    print(mla_bench.format_measured(measured))
    print(mla_bench.format_modelled(modelled))
    print(mla_bench.legend())
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"note": mla_bench.legend(),
                       "measured": [dataclasses.asdict(r) | {"ratio": r.ratio} for r in measured],
                       "modelled": [dataclasses.asdict(r) | {"bound": r.bound, "time_s": r.time_s} for r in modelled]},
                      handle, indent=1)
        print(f"wrote {args.json}")
    print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


def _versus_ttnn(args, started) -> int:
    """``--versus-ttnn``: :mod:`ttnn_flashdecode.tools.device_model.versus_ttnn`'s rows and checks."""
    from ttnn_flashdecode.tools.device_model import report, versus_ttnn

    rows = versus_ttnn.run()
    print("ttnn_flashdecode bench --versus-ttnn -- ttnn: MEASURED ON SILICON (cited); ours: MODELLED, NOT MEASURED")
    print(versus_ttnn.format_table(rows))
    print(versus_ttnn.legend(rows))
    print()
    print(report.format_kernel_work(report.kernel_work_rows()))
    print()
    print(report.format_mla_rescale())
    print()
    print(report.format_seed())
    print()
    print(report.format_55760())
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(versus_ttnn.to_json(rows), handle, indent=1)
        print(f"wrote {args.json}")
    print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


def _mesh(args, kv_dtypes, started) -> int:
    """``--mesh``: :mod:`ttnn_flashdecode.tools.mesh_bench`'s rows (analytic: no emulator run)."""
    from ttnn_flashdecode.tools import mesh_bench

    batches = args.batches if args.batches != list(BATCHES) else [1, 32]
    kv = [d for d in kv_dtypes if d != "bfloat4_b"] if kv_dtypes == list(cm.KV_SHORT) else kv_dtypes
    rows = mesh_bench.run(batches=batches, kv_dtypes=kv)
    print("ttnn_flashdecode bench --mesh -- device times are MODELLED, NOT MEASURED")
    print(mesh_bench.format_table(rows))
    print(mesh_bench.legend())
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"note": mesh_bench.legend(), "eth_link_gbps": mesh_bench.ETH_LINK_GBPS,
                       "eth_hop_s": mesh_bench.ETH_HOP_S, "op_launch_s": mesh_bench.OP_LAUNCH_S,
                       "rows": [dataclasses.asdict(r) | {"total_s": r.total_s} for r in rows]}, handle, indent=1)
        print(f"wrote {args.json}")
    print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
