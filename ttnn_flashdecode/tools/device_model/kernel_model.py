"""Device model v2 applied to OUR kernels: per-call cycles x the emulator's call counts (issue 35).

**Modelled, not measured.** The compute kernel's API calls per core come from the emulator
(:func:`ttnn_flashdecode.tools.cost_model.calibrate`: ``last_report()`` counts every call per core,
fitted exactly per work feature); each call is priced by :func:`llk_costs.call_cost` for a compute
config; the schedule, the split-K combine tree and the overlap of the K/V stream with compute are
v1's (:func:`cost_model.estimate`), with two changes:

* **Compute** per call = its math-thread cycles (FPU + SFPU + TRISC front end, which issue in order
  on TRISC1 in our kernel: tt-metal #55759 measured FPU and SFPU not overlapping on that path),
  scaled up when the pack or unpack thread carries more per live tile than the math thread (the
  three threads pipeline, so the busiest one sets the pace).
* **DRAM**: the chip bandwidth times the fraction reads of the cache's page size reach on the NoCs
  the reader uses (:func:`hardware.dram_efficiency`, tt-metal #55898). Our reader issues one
  ``noc_async_read`` per K/V tile on its RISC's one NoC, K and V alike, as ttnn's does (#57161).

:class:`KernelWork` names the kernel changes of issue 35 items 3 and 4 and prices them the same way
(nothing here changes a kernel): SFPU on the live rows only, both NoCs for K/V, fewer reconfigs, a
half-height Q tile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ttnn_flashdecode.tools import cost_model as cm
from ttnn_flashdecode.tools.device_model import hardware, llk_costs as llk

__all__ = ["KernelWork", "WORK_ITEMS", "ROUND_SCORES_CALLS", "call_costs", "measured_sfpu_faces", "measured_reconfig_share", "measured_nocs", "weights_v2", "per_tile_cycles",
           "tile_and_block_totals", "ResultV2", "estimate_v2",
           "seed_comparison", "SEED_CYCLES_PER_TILE", "reproduce_55760", "REPORTED_55760", "relative_errors_55760"]

SEED_CYCLES_PER_TILE = (cm.SEED_MS[2] - cm.SEED_MS[0]) * 1e-3 / (
    (cm.SEED_KV_POSITIONS[2] - cm.SEED_KV_POSITIONS[0]) // 32) * 1.35e9
"""The seed's measured slope in Blackhole cycles per position tile (~4,270; DESIGN.md §8 figures)."""


@dataclasses.dataclass(frozen=True)
class KernelWork:
    """Kernel changes the model can price (issue 35 item 3); all off = today's kernels, priced from
    the emulator's counts of them (SFPU faces, reconfigs that reprogram a unit, K/V NoC split).

    Attributes:
        sfpu_live_faces: SFPU ops (exp, max, sums, recip, tanh, masks) on faces 0-1 only
            (``VectorMode::R``) when a request's Q rows fit 16 (built: the emulator measures it).
        both_nocs: K/V reads spread over both NoCs (built: ``kv_read_noc``; the emulator measures it).
        fewer_reconfigs: one unpack and one pack data-format reconfig per block instead of today's.
        half_height_q: 16x32 Q and score tiles (FPU tile ops on 2 faces) when Q rows fit 16.
        min_block_tiles: K/V blocks of at least this many position tiles (0: the planner's), so the
            running state's per-block work (rescale, TF32 rounding on fp32 DST) is paid less often;
            a what-if where L1 would allow it (MLA's wide state leaves the planner 2-tile blocks).
        fp32_scores: issue 35 item 4, the op's ``accurate_scores``: the score CB in float32 (S keeps
            its precision through the masks and exp): each live tile's score packs and unpacks twice
            the bytes, priced as one more pack and one more unpack of a tile ([U] rates,
            :data:`llk_costs.PACK_CYCLES_PER_TILE` for both), and is rounded to TF32 on the SFPU
            before it is packed (:data:`ROUND_SCORES_CALLS`, the kernel's ``round_scores_to_tf32``,
            and the matmul re-init after it); its L1 (the S CB doubles) is not modelled.
    """

    # issue 35 item 3: time
    sfpu_live_faces: bool = False
    both_nocs: bool = False
    fewer_reconfigs: bool = False
    half_height_q: bool = False
    # a residency what-if (L1), then item 4: precision
    min_block_tiles: int = 0
    fp32_scores: bool = False

    @property
    def label(self) -> str:
        names = [f.name for f in dataclasses.fields(self) if getattr(self, f.name) and f.name != "min_block_tiles"]
        if self.min_block_tiles:
            names.append(f"blocks>={self.min_block_tiles}")
        return "+".join(names) or "today"

    def block_tiles(self, planned: int) -> int:
        """The block size this work runs with, given the planner's."""
        return max(planned, self.min_block_tiles)


ROUND_SCORES_CALLS = {"binop_with_scalar_tile_init": 1, "add_unary_tile_int32": 1, "bitwise_and_tile_init": 1,
                      "bitwise_and_tile": 1, "matmul_init": 1}
"""The compute calls ``accurate_scores`` adds per live position tile (``attention_scores.hpp``
``round_scores_to_tf32``: ``live_round_to_tf32``'s two integer SFPU passes on the score's bits, then
matmul's re-init)."""

PER_LIVE_TILE_CALL = "sub_tiles_bcast_cols"
"""The compute call made exactly once per live position tile (``probabilities``' S - M): the call
whose weight carries ``accurate_scores``' rounding in the time estimate."""

WORK_ITEMS = (KernelWork(), KernelWork(fewer_reconfigs=True), KernelWork(half_height_q=True),
              KernelWork(min_block_tiles=16), KernelWork(fewer_reconfigs=True, half_height_q=True),
              KernelWork(fewer_reconfigs=True, half_height_q=True, min_block_tiles=16), KernelWork(fp32_scores=True))
"""The what-ifs bench prints: today, each change not built yet alone, those together; then item 4's
fp32 scores alone. Today's kernels already run the SFPU on the live rows only and read K/V over both NoCs,
which the model takes from the emulator's counts (:func:`measured_sfpu_faces`, :func:`measured_nocs`);
``sfpu_live_faces`` and ``both_nocs`` force them where the emulator did not measure them."""


def call_costs(names: Sequence[str], cfg: llk.ComputeConfig, q_rows: int, work: KernelWork = KernelWork(),
               model: cm.CallModel | None = None) -> dict[str, llk.OpCost]:
    """Each API name's :class:`llk_costs.OpCost` for a group of ``q_rows`` Q rows under ``work``.

    With ``model`` (the emulator's counts of today's kernels), an SFPU API is priced at the work the
    emulator MEASURED it doing per call, in whole-face equivalents (:func:`measured_sfpu_faces`:
    SFPU iterations / 8; 0.5 for a GQA group of 4, whose 4 live rows take 2 iterations on each of
    faces 0 and 1), and a data-format reconfig call at the share of calls that reprogrammed a unit
    (:func:`measured_reconfig_share`; the rest cost a compare, as the LLK's conditional reconfig
    skips the hardware write)."""
    narrow = q_rows <= 16
    sfpu_faces = 2 if work.sfpu_live_faces and narrow else 4
    fpu_faces = 2 if work.half_height_q and narrow else 4
    faces = measured_sfpu_faces(model) if model is not None else {}
    share = measured_reconfig_share(model) if model is not None else 1.0
    costs = {}
    for n in names:
        cost = llk.call_cost(n, cfg, sfpu_faces=min(sfpu_faces, faces.get(n, 4)), fpu_faces=fpu_faces)
        if "reconfig" in n:
            cost = llk.OpCost(front=cost.front * share + llk.REGS_HANDSHAKE_CYCLES * (1 - share))
        costs[n] = cost
    return costs


def measured_sfpu_faces(model: cm.CallModel) -> dict[str, float]:
    """SFPU API -> the work per call the emulator MEASURED over the calibration runs, in whole-face
    equivalents: its SFPU iterations per call (:attr:`cost_model.CallModel.sfpu_iterations_per_call`)
    / :data:`llk_costs.SFPU_ITERATIONS_PER_FACE`: 4 on ``VectorMode::RC``, 2 on ``R`` with whole
    faces, 2 x live rows / 16 on ``R`` with the live rows' iterations only."""
    per_face = llk.SFPU_ITERATIONS_PER_FACE
    return {api: f / per_face for api, f in model.sfpu_iterations_per_call.items()}


def measured_reconfig_share(model: cm.CallModel) -> float:
    """The share of the units today's reconfig calls address that the emulator MEASURED them
    reprogramming (:attr:`cost_model.CallModel.reconfig_share`)."""
    return model.reconfig_share


def measured_nocs(model: cm.CallModel) -> int:
    """NoCs today's reader spreads its K/V reads over, as the emulator MEASURED (2 when each NoC
    carries 40-60 % of them: the K/V pages alternate, ``kv_read_noc``)."""
    return 2 if 0.4 <= model.noc1_read_share <= 0.6 else 1


def _per_unit(model: cm.CallModel, feature: str) -> dict[str, int]:
    index = cm.FEATURES.index(feature)
    return {name: counts[index] for name, counts in model.calls.items() if counts[index]}


def _reconfig_scale(model: cm.CallModel, work: KernelWork) -> float:
    """Factor on reconfig calls: with ``fewer_reconfigs``, two per block (one unpack, one pack) over today's."""
    if not work.fewer_reconfigs:
        return 1.0
    today = sum(n for name, n in _per_unit(model, "later_blocks").items() if "reconfig" in name)
    return min(1.0, 2.0 / today) if today else 1.0


def _unit_cycles(model: cm.CallModel, cfg: llk.ComputeConfig, work: KernelWork, tile_weight: float,
                 block_weight: float) -> dict[str, dict[str, float]]:
    """Cycles per API name and thread for ``tile_weight`` live tiles' own calls plus ``block_weight``
    later blocks' (the running-state rescale)."""
    costs = call_costs(list(model.calls), cfg, model.q_rows, work, model)
    scale = _reconfig_scale(model, work)
    tile, block = _per_unit(model, "live_tiles"), _per_unit(model, "later_blocks")
    out = {}
    for name in sorted(set(tile) | set(block)):
        calls = tile.get(name, 0) * tile_weight + block.get(name, 0) * block_weight
        cost = costs[name]
        factor = calls * (scale if "reconfig" in name else 1.0)
        out[name] = {"calls": calls, "fpu": cost.fpu * factor, "sfpu": cost.sfpu * factor,
                     "front": cost.front * factor, "pack": cost.pack * factor, "unpack": cost.unpack * factor}
    if work.fp32_scores and tile_weight:
        _add_fp32_scores(out, cfg, model, work, tile_weight)
    return out


def per_tile_cycles(model: cm.CallModel, cfg: llk.ComputeConfig, work: KernelWork = KernelWork(),
                    block_tiles: int = cm.SEED_BLOCK_TILES) -> dict[str, dict[str, float]]:
    """Cycles per live position tile, per API name and thread: each live tile's own calls plus a
    ``1 / block_tiles`` share of a later block's (the running-state rescale)."""
    return _unit_cycles(model, cfg, work, 1.0, 1.0 / block_tiles)


def tile_and_block_totals(model: cm.CallModel, cfg: llk.ComputeConfig, work: KernelWork = KernelWork()
                          ) -> tuple[dict[str, float], dict[str, float]]:
    """Thread totals (cycles) of one live tile's own calls, and of one LATER block's (the first block
    of a slice rescales nothing): for slices of few tiles, where a per-tile share would charge
    rescales that never run."""
    return (_thread_totals(_unit_cycles(model, cfg, work, 1.0, 0.0)),
            _thread_totals(_unit_cycles(model, cfg, work, 0.0, 1.0)))


def _add_fp32_scores(rows: dict[str, dict[str, float]], cfg: llk.ComputeConfig, model: cm.CallModel, work: KernelWork,
                     tiles: float = 1.0) -> None:
    """``accurate_scores``' cycles for ``tiles`` live tiles into ``rows``: the score tile's second half
    (one more pack and one more unpack) and the TF32 rounding's calls (:data:`ROUND_SCORES_CALLS`)."""
    rows["fp32 score CB"] = {"calls": 0.0, "fpu": 0.0, "sfpu": 0.0, "front": 0.0,
                             "pack": float(llk.PACK_CYCLES_PER_TILE) * tiles,
                             "unpack": float(llk.PACK_CYCLES_PER_TILE) * tiles}
    costs = call_costs(list(ROUND_SCORES_CALLS), cfg, model.q_rows, work, model)
    for name, calls in ROUND_SCORES_CALLS.items():
        row = rows.setdefault(name, {"calls": 0.0, "fpu": 0.0, "sfpu": 0.0, "front": 0.0, "pack": 0.0, "unpack": 0.0})
        cost = costs[name]
        row["calls"] += calls * tiles
        for thread in ("fpu", "sfpu", "front", "pack", "unpack"):
            row[thread] += getattr(cost, thread) * calls * tiles


def _thread_totals(rows: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    totals = {k: sum(r[k] for r in rows.values()) for k in ("fpu", "sfpu", "front", "pack", "unpack")}
    totals["math"] = totals["fpu"] + totals["sfpu"] + totals["front"]
    return totals


def weights_v2(model: cm.CallModel, cfg: llk.ComputeConfig, work: KernelWork = KernelWork(),
               block_tiles: int = cm.SEED_BLOCK_TILES) -> tuple[dict[str, float], dict[str, float]]:
    """Per API name, the cycles :func:`cost_model.estimate` charges a call (its ``weights``), and the
    per-live-tile thread totals (``fpu``, ``sfpu``, ``front``, ``math``, ``pack``, ``unpack``, ``scale``)."""
    costs = call_costs(list(model.calls), cfg, model.q_rows, work, model)
    totals = _thread_totals(per_tile_cycles(model, cfg, work, block_tiles))
    scale = max(1.0, totals["pack"] / totals["math"], totals["unpack"] / totals["math"])
    reconfig = _reconfig_scale(model, work)
    weights = {n: c.math * scale * (reconfig if "reconfig" in n else 1.0) for n, c in costs.items()}
    if work.fp32_scores:  # the calibrated counts are today's kernel's: the rounding rides on S - M, once a live tile
        rounding = call_costs(list(ROUND_SCORES_CALLS), cfg, model.q_rows, work, model)
        weights[PER_LIVE_TILE_CALL] += scale * sum(rounding[n].math * k for n, k in ROUND_SCORES_CALLS.items())
    return weights, totals | {"scale": scale}


@dataclasses.dataclass(frozen=True)
class ResultV2:
    """One modelled call under model v2 (seconds)."""

    device: str
    time_s: float
    roofline_s: float
    dram_efficiency: float
    bound: str  # dram / request rate / FPU / SFPU / pack / combine
    cycles_per_tile: float  # the compute thread's pace per live position tile
    totals: Mapping[str, float]
    estimate: cm.Estimate

    @property
    def fraction_of_peak(self) -> float:
        """Roofline / modelled time: the share of DRAM peak the call streams at."""
        return self.roofline_s / self.time_s


def _compute_bound(totals: Mapping[str, float]) -> str:
    if totals["scale"] > 1.0:
        return "pack"
    return "FPU" if totals["fpu"] + totals["front"] >= totals["sfpu"] else "SFPU"


def estimate_v2(shape: cm.Shape, kv_positions_per_user: Sequence[int], device: str, cfg: llk.ComputeConfig,
                kv_dtype: str = "bfloat16", work: KernelWork = KernelWork(), *, capacity: int | None = None
                ) -> ResultV2:
    """Model one ``attention()`` call of OUR kernels (issue 35 item 1): see the module docstring."""
    dev = hardware.device_v2(device)
    model = cm.calibrate(shape.q_rows, shape.dim_tiles)
    plan, kv, block_tiles = cm.op_schedule(shape, kv_positions_per_user, dev.base, kv_dtype=kv_dtype, capacity=capacity)
    block_tiles = work.block_tiles(block_tiles)
    weights, totals = weights_v2(model, cfg, work, block_tiles)
    nocs = 2 if work.both_nocs else measured_nocs(model)
    efficiency = hardware.dram_efficiency(dev.arch, cm.kv_tile_bytes(kv_dtype), nocs)
    est = cm.estimate(plan, kv, block_tiles, model, model, dev.effective(cm.kv_tile_bytes(kv_dtype), nocs),
                      weights=weights, users=len(kv_positions_per_user), kv_dtype=kv_dtype)
    roofline = cm.roofline_s(kv, shape.dim_tiles, dev.base, kv_dtype)
    if est.critical == "dram":
        bound = "dram" if efficiency >= 0.97 else "request rate"
    elif est.critical == "split" and est.breakdown.get("tree_s", 0.0) > est.breakdown.get("slowest_slice_s", 0.0):
        bound = "combine"
    else:
        bound = _compute_bound(totals)
    pace = max(totals["math"], totals["pack"], totals["unpack"])
    return ResultV2(device, max(est.time_s, roofline), roofline, efficiency, bound, pace, totals, est)


def seed_comparison(cfg: llk.ComputeConfig = llk.ComputeConfig()) -> dict:
    """OUR kernel modelled at the seed's configuration (one Blackhole core, 8 Q rows, d128, 16-tile
    blocks, HiFi4) beside the seed's measured times. Not fitted to them.

    Returns ``{"kv": [...], "seed_ms": [...], "ours_ms": [...], "ours_cycles_per_tile", "seed_cycles_per_tile",
    "per_op": {api: {"calls", "cycles"}}}`` (``per_op``: math-thread cycles per position tile).
    """
    model = cm.calibrate(cm.SEED_Q_ROWS, cm.SEED_HEAD_DIM // 32)
    weights, totals = weights_v2(model, cfg)
    clock = 1.35e9
    ours = [float(model.weighted_calls(cm._seed_features(kv), weights)[0]) / clock * 1e3 for kv in cm.SEED_KV_POSITIONS]
    rows = per_tile_cycles(model, cfg)
    per_op = {name: {"calls": r["calls"], "cycles": r["fpu"] + r["sfpu"] + r["front"], "pack": r["pack"]}
              for name, r in rows.items()}
    tiles = (cm.SEED_KV_POSITIONS[2] - cm.SEED_KV_POSITIONS[0]) // 32
    return {"kv": list(cm.SEED_KV_POSITIONS), "seed_ms": list(cm.SEED_MS), "ours_ms": ours,
            "ours_cycles_per_tile": (ours[2] - ours[0]) * 1e-3 * clock / tiles,
            "seed_cycles_per_tile": SEED_CYCLES_PER_TILE, "per_op": per_op, "totals": totals, "config": cfg.label}


REPORTED_55760 = {"tile_mac_hifi2": 32.0, "fpu_per_tile_mac": {128: 36.85, 256: 35.27, 512: 34.53},
                  "step_per_q_tile_hifi2": 105.0, "exp_per_tile": 70.0, "softmax_per_q_tile": 204.0}
"""tt-metal #55760's measured p100a figures (HiFi2, bfp8, d128): the tile MAC, FPU_COUNTER per tile MAC
at k_chunk 128/256/512, the per q tile per k-chunk step matmul cost, exp per tile, and the softmax SFPU
overhead per q tile."""


def reproduce_55760(head_dim: int = 128) -> dict:
    """Model v2's per-op costs at #55760's configuration (p100a, HiFi2, bfp8, d128, the streaming
    kernel's approximate exp, bf16 DST), to compare with :data:`REPORTED_55760`.

    - tile MAC: :func:`llk_costs.tile_mac_cycles` (16 MVMULs x 2 phases: an LLK count, not their figure);
    - FPU cycles per tile MAC at k_chunk ``k``: the MAC with #55760's 4.9 % plus its per-step cost
      amortised over the step's ``2 x (k / 32) x (d / 32)`` tile MACs (Q.K^T and P.V of one q tile);
    - exp per tile: the approximate exp (their measurement, taken as the constant);
    - softmax SFPU per q tile per step, from per-op costs: the running-state rescale on the score
      tile's column vector (``VectorMode::C``, 2 faces): ``max_old - max_new`` (SFPU binary), its exp,
      and the running sum times it (SFPU binary). The decomposition is this model's, not #55760's.
    """
    cfg = llk.ComputeConfig("HiFi2", fp32_dest=False, exp_approx=True)
    mac = llk.tile_mac_cycles(cfg)
    step = llk.step_overhead_cycles(cfg)
    d_tiles = head_dim // 32
    per_mac = {k: mac * (1 + llk.MATMUL_OVERHEAD_FRACTION) + step / (2 * (k // 32) * d_tiles) for k in (128, 256, 512)}
    column = 2
    binary = llk.call_cost("sub_binary_tile", cfg, sfpu_faces=column).sfpu
    softmax = 2 * binary + llk.call_cost("exp_tile", cfg, sfpu_faces=column).sfpu
    return {"tile_mac_hifi2": mac, "fpu_per_tile_mac": per_mac, "step_per_q_tile_hifi2": step,
            "exp_per_tile": llk.call_cost("exp_tile", cfg).sfpu, "softmax_per_q_tile": softmax}


def relative_errors_55760() -> dict[str, float]:
    """|model - reported| / reported for every figure of :data:`REPORTED_55760`."""
    model, out = reproduce_55760(), {}
    for key, value in REPORTED_55760.items():
        if isinstance(value, dict):
            for k, v in value.items():
                out[f"{key}@k{k}"] = abs(model[key][k] - v) / v
        else:
            out[key] = abs(model[key] - value) / value
    return out
