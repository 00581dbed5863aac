"""``bench --versus-ttnn``: every published ttnn decode figure beside OUR kernel modelled at ttnn's
shape and compute config (issue 35, item 2).

ttnn's figures are **MEASURED ON SILICON** by tt-metal's developers (each row cites its source);
ours are **MODELLED** (:mod:`.kernel_model`; no card here). The DRAM roofline is every live K/V byte
once at the card's peak; "% peak" is roofline / time.

Positions: #57161 attends the whole cache (its K+V bytes at 32768 are the whole cache's); #56985
and #56929 give the decode *position* p, so p + 1 positions are live. Paged caches (#56985,
#56929; block 32 = one tile per page) read the same pages as a contiguous cache, one request per
tile, so they are modelled as one. Where a source leaves a compute-config field out, the row says
what was assumed ([U]).

ttnn's softmax exp, read from the kernels the ttnn 0.81 wheel ships: ``sub_exp_block_bcast_cols_inplace``
(``transformer/sdpa/device/kernels/compute/compute_common.hpp``, which the decode kernel includes) takes the
APPROXIMATE exp whenever ``EXP_APPROX_MODE`` is set or its vector mode is not RC, and the decode kernel
(``sdpa_decode/device/kernels/compute/sdpa_flash_decode.cpp``) runs vector mode R ("half tile") for at most
16 Q heads per KV head. So #57161 and #56985 (4 heads a group) and FlashDecode.md (8) ran the approximate
exp whatever their program config said; with more heads (MLA's 128) the mode is the program config's
``exp_approx_mode``, whose default the decode factory makes ``true`` (tt-metal
``sdpa_decode_program_factory.cpp``; #56929's config is not in the corpus [U]). tt-metal #51927 and
PR #56925 say the same of the softmax exp. Each row is therefore modelled twice: at the op's default
(accurate exp) and with the exp ttnn ran (``exp_approx=True``, an existing option of ours).
"""

from __future__ import annotations

import dataclasses

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.tools import cost_model as cm
from ttnn_flashdecode.tools.device_model import hardware, kernel_model as km, llk_costs as llk

__all__ = ["Published", "PUBLISHED", "VersusRow", "run", "format_table", "legend", "to_json", "estimate_mla", "closes_gap",
           "MLA_LATENT", "MLA_VALUE", "mla_schedule", "ttnn_exp_approx", "with_ttnn_exp", "HALF_TILE_MAX_HEADS"]

MLA_LATENT, MLA_VALUE = 576, 512
"""DeepSeek-V3's MLA: the latent's 576 columns (512 + 64 RoPE), V its first 512."""


@dataclasses.dataclass(frozen=True)
class Published:
    """One published ttnn figure (MEASURED ON SILICON by its source)."""

    source: str
    url: str
    device: str
    kind: str  # "gqa" or "mla"
    batch: int
    q_heads: int
    kv_heads: int
    head_dim: int
    position: int  # as the source states it
    live_positions: int  # positions attended
    kv_dtype: str
    ttnn_us: float
    config: llk.ComputeConfig
    note: str = ""


_57161 = "https://github.com/tenstorrent/tt-metal/issues/57161"
_56985 = "https://github.com/tenstorrent/tt-metal/pull/56985"
_56929 = "https://github.com/tenstorrent/tt-metal/pull/56929"
_FD_MD = "https://github.com/tenstorrent/tt-metal/blob/main/tech_reports/FlashAttention/FlashDecode.md"
_HIFI2_FP32 = llk.ComputeConfig("HiFi2", fp32_dest=True, exp_approx=False)


def _published() -> tuple[Published, ...]:
    rows = []
    for dtype, (at8k, at32k) in (("bfloat16", (748, 2959)), ("bfloat8_b", (416, 1655)), ("bfloat4_b", (327, 1308))):
        for context, us in ((8192, at8k), (32768, at32k)):
            rows.append(Published("tt-metal #57161", _57161, "p100a", "gqa", 8, 32, 8, 128, context, context, dtype, us,
                                  _HIFI2_FP32, "non-paged; fp32 DST not stated [U: assumed as tt-transformers]"))
    for position, us in ((128, 64.0), (1024, 244.9), (4096, 864.5)):
        rows.append(Published("tt-metal PR #56985", _56985, "p100a", "gqa", 32, 32, 8, 128, position, position + 1,
                              "bfloat8_b", us, _HIFI2_FP32, "Llama-3.1-8B paged (block 32), full grid, fp32 acc"))
    for position, us in ((512, 53.7), (1024, 65.8), (2048, 90.6), (4096, 139.2)):
        rows.append(Published("tt-metal PR #56929", _56929, "p100a", "mla", 4, 128, 1, MLA_LATENT, position, position + 1,
                              "bfloat8_b", us, _HIFI2_FP32, "MLA paged; figures as quoted by issue 35 (the PR "
                              "text was not in the searchable corpus); compute config not stated [U: HiFi2, fp32]"))
    # FlashDecode.md: "up to 180 GB/s" over bsz 8/16/32, 128k, head_dim 64/128/256, 1 KV / 8 Q heads, BFP8 KV, on
    # Wormhole; its byte formula 2*bsz*head_dim*n_kv_heads*kv_len (one byte per element). Expressed as us at the
    # largest point of the sweep (bsz 32, d128): which point reached 180 GB/s is in a figure, not the text.
    fd_bytes = 2 * 32 * 128 * 1 * 131072
    rows.append(Published("tt-metal FlashDecode.md §4.1", _FD_MD, "n150", "gqa", 32, 8, 1, 128, 131072, 131072,
                          "bfloat8_b", round(fd_bytes / 180e9 * 1e6, 1), llk.ComputeConfig("HiFi2", True, False),
                          "derived: its byte formula / its best 180 GB/s (the point is not named in the text) "
                          "[U: compute config, shape point]"))
    return tuple(rows)


PUBLISHED = _published()
"""Every published ttnn row of issue 35 item 2."""

HALF_TILE_MAX_HEADS = 16
"""Q heads per KV head up to which ttnn's decode kernel runs half tiles (vector mode R) and so the
approximate softmax exp whatever its config (``use_half_tile``; module docstring)."""


def ttnn_exp_approx(pub: Published) -> tuple[bool, str]:
    """Whether ttnn's softmax exp was the approximate one on ``pub``'s run, and why (module docstring)."""
    if pub.q_heads // pub.kv_heads <= HALF_TILE_MAX_HEADS:
        return True, "pinned: half tile (<= 16 Q heads per KV head)"
    return True, "exp_approx_mode's default (true) [U: the program config is not stated]"


def with_ttnn_exp(pub: Published) -> Published:
    """``pub`` with OUR exp set to the one ttnn ran (:func:`ttnn_exp_approx`)."""
    return dataclasses.replace(pub, config=dataclasses.replace(pub.config, exp_approx=ttnn_exp_approx(pub)[0]))


@dataclasses.dataclass(frozen=True)
class VersusRow:
    """A published figure and our model at its shape (times in microseconds)."""

    published: Published
    ours_us: float
    ours_with_work_us: float
    roofline_us: float
    bound: str
    bound_with_work: str
    dram_efficiency: float
    same_exp_us: float = 0.0  # ours with the softmax exp ttnn ran (:func:`with_ttnn_exp`)
    same_exp_bound: str = ""

    @property
    def same_exp_fraction_of_peak(self) -> float:
        return self.roofline_us / self.same_exp_us

    @property
    def ours_fraction_of_peak(self) -> float:
        return self.roofline_us / self.ours_us

    @property
    def ttnn_fraction_of_peak(self) -> float:
        return self.roofline_us / self.published.ttnn_us


WORK = km.KernelWork(fewer_reconfigs=True, half_height_q=True)
"""The kernel work of issue 35 item 3 not built yet: two reconfigs a block, a half-height Q tile (SFPU
on the live rows only and K/V over both NoCs are today's kernels)."""


def _slice_pace_s(model: cm.CallModel, cfg: llk.ComputeConfig, work: km.KernelWork, tiles: int, block_tiles: int,
                  clock_hz: float) -> float:
    """One row tile's compute time over a slice of ``tiles`` live tiles in blocks of ``block_tiles``:
    every tile's own calls and every LATER block's rescale (the slice's first block has none), the
    slowest of the math, pack and unpack threads setting the pace."""
    tile, block = km.tile_and_block_totals(model, cfg, work)
    later_blocks = max(0, -(-tiles // block_tiles) - 1)
    return max(tiles * tile[t] + later_blocks * block[t] for t in ("math", "pack", "unpack")) / clock_hz


def estimate_mla(pub: Published, work: km.KernelWork = km.KernelWork()) -> tuple[float, float, str, float]:
    """OUR kernel at an MLA row, analytic: (time s, roofline s, bound, DRAM efficiency).

    Per-call counts come from the emulator calibrated for one 32-row tile over the 576-wide latent
    (``calibrate(32, 18)``; the calibration cannot fit a many-row-tile group yet), times the group's
    row tiles (the op serves all of them in one request). The op's planner gives the block size and
    each user's split ``p`` (its slices cut the user's live tiles evenly); a slice's work is its
    tiles, its later blocks' rescales (:func:`_slice_pace_s`), plus one max and one sum step (with
    its partial's NoC transfer: the share its busier NoC carries, measured) per combine level, and
    its fixed costs (start-up, normalise) once.
    DRAM: the latent read once (values from keys), at the request-rate efficiency of its page size.
    """
    dev = hardware.device_v2(pub.device)
    dim_tiles = pub.head_dim // 32
    model = cm.calibrate(32, dim_tiles)
    plan, block_tiles = mla_schedule(pub)
    block_tiles = work.block_tiles(block_tiles)
    weights, totals = km.weights_v2(model, pub.config, work, block_tiles)
    row_tiles = pub.q_heads // 32
    per = model.weighted_per_feature(weights)
    fixed = (per["cores"] + per["normalised"]) * row_tiles / dev.clock_hz
    per_child = sum(model.weighted_zone_per_feature(z, weights)["partials_combined"]
                    for z in ("fd-compute-max", "fd-compute-sum")) * row_tiles / dev.clock_hz
    link = dev.base.link_bytes_per_s
    partial = (protocol.partial_pages(dim_tiles) * cm.stats_page_bytes(cm.TILE_BYTES, True) * row_tiles
               * model.partial_busiest_noc_share)  # on its busier NoC (the writer splits it over both)
    level = per_child + partial / link
    tiles = -(-pub.live_positions // 32)
    split = max(plan.split_count(r) for r in range(plan.requests))
    slice_s = _slice_pace_s(model, pub.config, work, -(-tiles // split), block_tiles, dev.clock_hz) * row_tiles
    compute = fixed + slice_s + protocol.tree_levels(split) * level
    page = cm.kv_tile_bytes(pub.kv_dtype)
    eff = hardware.dram_efficiency(dev.arch, page, 2 if work.both_nocs else km.measured_nocs(model))
    latent = pub.batch * tiles * dim_tiles * page
    roofline = latent / (dev.base.dram_gbps * 1e9)
    dram = roofline / eff
    if dram >= compute:
        return dram, roofline, "dram" if eff >= 0.97 else "request rate", eff
    if protocol.tree_levels(split) * level > slice_s:
        return compute, roofline, "combine", eff
    return compute, roofline, km._compute_bound(totals), eff


def mla_schedule(pub: Published):
    """The op planner's schedule and K/V block for an MLA row: the latent passed as K and V (values
    from keys, no CB V), as ``flash_mla_decode`` passes it."""
    shape = cm.Shape("mla", pub.q_heads, pub.kv_heads, pub.head_dim)
    plan, _, block_tiles = cm.op_schedule(shape, [pub.live_positions] * pub.batch, hardware.device_v2(pub.device).base,
                                          kv_dtype=pub.kv_dtype, values_from_keys=True)
    return plan, block_tiles


def _ours(pub: Published, work: km.KernelWork) -> tuple[float, float, str, float]:
    if pub.kind == "mla":
        return estimate_mla(pub, work)
    shape = cm.Shape(f"{pub.q_heads}/{pub.kv_heads} d{pub.head_dim}", pub.q_heads, pub.kv_heads, pub.head_dim)
    capacity = max(1024, -(-pub.live_positions // 1024) * 1024)
    result = km.estimate_v2(shape, [pub.live_positions] * pub.batch, pub.device, pub.config, pub.kv_dtype, work,
                            capacity=capacity)
    return result.time_s, result.roofline_s, result.bound, result.dram_efficiency


def run(published=PUBLISHED) -> list[VersusRow]:
    """Model every published row (today's kernels, and with :data:`WORK`)."""
    rows = []
    for pub in published:
        time_s, roof_s, bound, eff = _ours(pub, km.KernelWork())
        work_s, _, work_bound, _ = _ours(pub, WORK)
        same_s, _, same_bound, _ = _ours(with_ttnn_exp(pub), km.KernelWork())
        rows.append(VersusRow(pub, time_s * 1e6, work_s * 1e6, roof_s * 1e6, bound, work_bound, eff,
                              same_s * 1e6, same_bound))
    return rows


_SHORT = {"bfloat16": "bf16", "bfloat8_b": "bfp8", "bfloat4_b": "bfp4"}


def format_table(rows) -> str:
    """The rows as a fixed-width table."""
    header = (f"{'source':<29}{'dev':<6}{'kind':<5}{'B':>3}{'Q/KV':>8}{'d':>5}{'pos':>7} {'kv':<5}{'cfg':<6}"
              f"{'ttnn us':>9}{'ours us':>9}{'ours/ttnn':>10}{'roof us':>9}{'ttnn %pk':>9}{'ours %pk':>9}  {'bound':<13}"
              f"{'open us':>9}  {'bound':<12}{'same-exp us':>12}{'%pk':>5}  {'bound':<12}")
    lines = [header, "-" * len(header)]
    for r in rows:
        p = r.published
        lines.append(
            f"{p.source:<29}{p.device:<6}{p.kind:<5}{p.batch:>3}{f'{p.q_heads}/{p.kv_heads}':>8}{p.head_dim:>5}"
            f"{p.position:>7} {_SHORT[p.kv_dtype]:<5}{p.config.fidelity:<6}{p.ttnn_us:>9.1f}{r.ours_us:>9.1f}"
            f"{r.ours_us / p.ttnn_us:>10.2f}{r.roofline_us:>9.1f}{r.ttnn_fraction_of_peak:>9.0%}"
            f"{r.ours_fraction_of_peak:>9.0%}  {r.bound:<13}{r.ours_with_work_us:>9.1f}  {r.bound_with_work:<12}"
            f"{r.same_exp_us:>12.1f}{r.same_exp_fraction_of_peak:>5.0%}  {r.same_exp_bound:<12}")
    return "\n".join(lines)


def legend(rows) -> str:
    """What the columns mean, the sources, and the rows where ours is modelled slower."""
    slower = [r for r in rows if r.ours_us > r.published.ttnn_us]
    lines = [
        "ttnn us: MEASURED ON SILICON by tt-metal's developers (source column; FlashDecode.md's row is derived from",
        "  its GB/s). ours us: MODELLED (device model v2, not measured; no card here), today's kernels at ttnn's shape",
        "  and compute config (our exp: accurate, the op's default). roof: live K/V bytes once at the card's DRAM peak",
        "  (p100a 448 GB/s, n150 288). %pk: roofline / time. pos: as the source states it: the context attended",
        "  (#57161, FlashDecode.md) or the decode position p, p + 1 positions live (PR #56985, PR #56929).",
        "  bound: dram, request rate (DRAM pages below ~1.5 KB on one",
        "  NoC, tt-metal #55898), FPU / SFPU / pack (the compute thread setting the pace), combine (split-K tree).",
        "  open: a what-if, the same with issue 35 item 3's kernel work that is NOT built applied (two reconfigs a",
        "  block, a half-height Q tile); today's kernels already run the SFPU on the live rows only and read K/V over both NoCs",
        "  (emulator-measured: SFPU iterations per call, K/V requests per NoC).",
        "  same-exp: today's kernels with the softmax exp ttnn ran on that row (exp_approx=True, an existing option):",
        "  ttnn's decode kernel pins the approximate exp for <= 16 Q heads per KV head (half tiles) whatever its",
        "  config, and defaults exp_approx_mode to true otherwise (the wheel's sdpa_flash_decode.cpp and",
        "  compute_common.hpp; sdpa_decode_program_factory.cpp; tt-metal #51927). ours us and open us keep our",
        "  default, the accurate exp.",
    ]
    lines.append("  Not modelled: the per-launch fixed cost (program start on every core), part of ttnn's device\n"
                 "  duration; the seed's line has a ~32 us intercept at kv 0, partly host-side: rows under ~100 us\n"
                 "  (PR #56985 at 128) compare less well than the long ones.")
    sources = sorted({(r.published.source, r.published.url) for r in rows})
    lines += [f"  {s}: {u}" for s, u in sources]
    lines.append("  The DRAM term is #55898's per-endpoint efficiency for the page size (bf16 98 %); ttnn measured 81 %\n"
                 "  on bf16 (#57161): the rest (bank spread, NoC contention, barriers) is not modelled and would slow\n"
                 "  our DRAM-bound rows as much.")
    if slower:
        lines.append(f"MODELLED SLOWER THAN TTNN on {len(slower)} of {len(rows)} rows:")
        for r in slower:
            closing = closes_gap(r.published)
            lines.append(f"  {r.published.source} {_SHORT[r.published.kv_dtype]} pos {r.published.position}: "
                         f"{r.ours_us:.0f} vs {r.published.ttnn_us:.0f} us, {r.bound}-bound; closed by: "
                         + (f"{closing[0]} ({closing[1]:.0f} us)" if closing else "none of the modelled kernel work"))
    else:
        lines.append(f"Modelled at or below ttnn's measured time on all {len(rows)} rows.")
    return "\n".join(lines)


def closes_gap(pub: Published) -> tuple[str, float] | None:
    """The first of :data:`kernel_model.WORK_ITEMS` (one change alone first, then together) that models
    OUR kernel at or below ttnn's measured time on ``pub``: (its label, its time in us), or None."""
    for work in (w for w in km.WORK_ITEMS[1:] if not w.fp32_scores):  # item 4 buys precision, not time
        time_s = _ours(pub, work)[0]
        if time_s * 1e6 <= pub.ttnn_us:
            return work.label, time_s * 1e6
    return None


def to_json(rows) -> list[dict]:
    """The rows as a list of objects (issue 35's fields and the config behind each)."""
    out = []
    for r in rows:
        p = r.published
        row = {"source": p.source, "url": p.url, "device": p.device, "kind": p.kind, "batch": p.batch,
               "q_heads": p.q_heads, "kv_heads": p.kv_heads, "head_dim": p.head_dim, "position": p.position,
               "live_positions": p.live_positions, "kv_dtype": p.kv_dtype, "ttnn_us": p.ttnn_us,
               "ttnn_measured": "MEASURED ON SILICON", "ours_us": round(r.ours_us, 2), "ours_modelled": "MODELLED",
               "roofline_us": round(r.roofline_us, 2), "bound": r.bound,
               "ours_fraction_of_peak": round(r.ours_fraction_of_peak, 4),
               "ttnn_fraction_of_peak": round(r.ttnn_fraction_of_peak, 4),
               "ours_with_kernel_work_us": round(r.ours_with_work_us, 2), "bound_with_kernel_work": r.bound_with_work,
               "dram_efficiency": round(r.dram_efficiency, 3), "math_fidelity": p.config.fidelity,
               "fp32_dest_acc_en": p.config.fp32_dest, "exp_approx_mode": p.config.exp_approx, "note": p.note,
               "ours_same_exp_us": round(r.same_exp_us, 2), "bound_same_exp": r.same_exp_bound,
               "ours_same_exp_fraction_of_peak": round(r.same_exp_fraction_of_peak, 4),
               "ttnn_softmax_exp": "approximate, " + ttnn_exp_approx(p)[1]}
        if p.kind == "mla":
            row["head_dim_v"] = MLA_VALUE
        out.append(row)
    return out
