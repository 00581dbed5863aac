"""Tables of device model v2 for ``bench --versus-ttnn``: what the kernel work of issue 35 item 3
would buy, OUR kernel at the seed's configuration op by op, and the #55760 reproduction.

Everything printed here is MODELLED (no card here); the seed's and #55760's figures are MEASURED
ON SILICON by their authors.
"""

from __future__ import annotations

import dataclasses

from ttnn_flashdecode.tools.device_model import kernel_model as km, llk_costs as llk, versus_ttnn as vt

__all__ = ["kernel_work_rows", "format_kernel_work", "format_seed", "format_55760", "WORK_SHOWN", "format_fpu_timing",
           "FPU_TIMING_LEGEND", "mla_rescale_split", "format_mla_rescale", "STATE_ROUNDING_CALLS"]

WORK_SHOWN = {  # the published rows whose gap the kernel work addresses: (source, dtype, position)
    ("tt-metal #57161", "bfloat4_b", 32768), ("tt-metal #57161", "bfloat8_b", 32768),
    ("tt-metal #57161", "bfloat16", 32768), ("tt-metal PR #56985", "bfloat8_b", 4096),
    ("tt-metal PR #56929", "bfloat8_b", 4096),
}


def kernel_work_rows(published=vt.PUBLISHED, shown=WORK_SHOWN) -> list[dict]:
    """For each shown published row, OUR modelled time under each :data:`kernel_model.WORK_ITEMS`
    entry and under the approximate exp (an existing option, ``exp_approx=True``), microseconds."""
    out = []
    for pub in published:
        if (pub.source, pub.kv_dtype, pub.position) not in shown:
            continue
        row = {"published": pub, "times": {}}
        for work in km.WORK_ITEMS:
            time_s, roof_s, bound, _ = vt._ours(pub, work)
            row["times"][work.label] = (time_s * 1e6, bound)
        row["roofline_us"] = roof_s * 1e6
        approx = dataclasses.replace(pub, config=dataclasses.replace(pub.config, exp_approx=True))
        time_s, _, bound, _ = vt._ours(approx, km.WORK_ITEMS[-2])
        row["times"]["all of the above + exp_approx (an existing option)"] = (time_s * 1e6, bound)
        out.append(row)
    return out


def format_kernel_work(rows: list[dict]) -> str:
    """One block per row: each kernel change's modelled time, % of peak and bound."""
    lines = ["What the kernel work of issue 35 items 3 and 4 would buy or cost (MODELLED; today = the kernels as they "
             "are; fp32_scores is accurate_scores, a cost):"]
    for row in rows:
        pub = row["published"]
        lines.append(f"  {pub.source} {vt._SHORT[pub.kv_dtype]} {pub.kind} B={pub.batch} pos {pub.position}: ttnn "
                     f"{pub.ttnn_us:.1f} us MEASURED, roofline {row['roofline_us']:.1f} us")
        for label, (us, bound) in row["times"].items():
            lines.append(f"    {label:<70}{us:>9.1f} us {row['roofline_us'] / us:>5.0%} of peak  {bound}")
    return "\n".join(lines)


def format_seed(cfg: llk.ComputeConfig = llk.ComputeConfig()) -> str:
    """OUR kernel at the seed's configuration beside the seed's measured times, op by op."""
    s = km.seed_comparison(cfg)
    lines = [f"OUR kernel at the seed's configuration (one Blackhole core, 8 Q rows, d128, 16-tile blocks, {s['config']}):",
             "  kv      seed ms (MEASURED)  ours ms (MODELLED)"]
    lines += [f"  {kv:<8}{seed:>10.3f}{ours:>20.3f}" for kv, seed, ours in zip(s["kv"], s["seed_ms"], s["ours_ms"])]
    lines.append(f"  slope: seed {s['seed_cycles_per_tile']:.0f} cycles per position tile (measured), ours "
                 f"{s['ours_cycles_per_tile']:.0f} modelled (math thread; pack thread {s['totals']['pack']:.0f}); "
                 "not fitted to the seed.")
    lines.append("  ours per position tile, op by op (calls per tile, math-thread cycles):")
    ranked = sorted(s["per_op"].items(), key=lambda kv: -kv[1]["cycles"])
    for name, r in ranked[:8]:
        lines.append(f"    {name:<28}{r['calls']:>7.3f}{r['cycles']:>9.0f}")
    rest = sum(r["cycles"] for _, r in ranked[8:])
    lines.append(f"    {'(the other ' + str(len(ranked) - 8) + ' calls)':<28}{'':>7}{rest:>9.0f}")
    block_front = sum(r["front"] for r in km.per_tile_cycles(km.cm.calibrate(km.cm.SEED_Q_ROWS, 4), cfg).values()) * 16
    lines.append(
        "  The gap, op by op: the seed's kernel is not ours and its source is not here (only its header, which says\n"
        "  compute-bound and suspects exp and the two reduces), so its call mix is unknown. In this model exp\n"
        f"  (accurate, fp32 DST, on the 8 live rows' SFPU iterations) is {s['per_op'].get('exp_tile', {'cycles': 0})['cycles']:.0f}"
        f" of our {s['ours_cycles_per_tile']:.0f} cycles, the matmuls {s['per_op'].get('matmul_tiles', {'cycles': 0})['cycles']:.0f}"
        f" and the two reduces {s['per_op'].get('reduce_tile', {'cycles': 0})['cycles']:.0f}. What could\n"
        f"  fill the seed's other ~{s['seed_cycles_per_tile'] - s['ours_cycles_per_tile']:.0f}: our front end of a whole "
        f"16-tile block (reconfigs, inits, handshakes: {block_front:.0f} cycles)\n"
        "  paid per tile instead of per 16-tile block; the pack thread not overlapping the math thread "
        f"(+{s['totals']['pack']:.0f});\n  circular-buffer waits, which this model does not price. These are "
        "hypotheses, not fitted.")
    return "\n".join(lines)


STATE_ROUNDING_CALLS = ("add_unary_tile_int32", "binop_with_scalar_tile_init", "bitwise_and_tile",
                        "bitwise_and_tile_init")
"""The calls of a later block that round the running state to TF32 (``attention_softmax.hpp``
``round_state_to_tf32``: ``live_round_to_tf32``, an integer add and an AND on each state tile's
bits); the rescale itself is FPU work (``mul_tiles``, ``add_reuse_dest_tiles``)."""


def mla_rescale_split(pub: vt.Published) -> dict[str, float]:
    """Math-thread cycles per row tile of one live tile and of one LATER block's rescale on ``pub``
    (an MLA row, its compute config), the share of that rescale spent rounding the state to TF32, and
    the K/V block the op's planner gives the call (``block_tiles``: the latent as K and V)."""
    model = km.cm.calibrate(32, pub.head_dim // 32)
    block = km._unit_cycles(model, pub.config, km.KernelWork(), 0.0, 1.0)
    tile, _ = km.tile_and_block_totals(model, pub.config)
    later = sum(r["fpu"] + r["sfpu"] + r["front"] for r in block.values())
    rounding = sum(r["fpu"] + r["sfpu"] + r["front"] for n, r in block.items() if n in STATE_ROUNDING_CALLS)
    _, block_tiles = vt.mla_schedule(pub)
    return {"tile": tile["math"], "later_block": later, "rounding": rounding, "block_tiles": block_tiles}


def format_mla_rescale(published=vt.PUBLISHED) -> str:
    """Why MLA's rows are SFPU-bound: a later block's rescale of the 4-row-tile float32 state against
    one live tile's own work, and how much of it is the state's TF32 rounding."""
    pub = max((p for p in published if p.kind == "mla"), key=lambda p: p.position)
    split = mla_rescale_split(pub)
    blocks = split["block_tiles"]
    return (f"MLA ({pub.source}, {pub.config.fidelity} fp32 DST), per row tile, MODELLED: one live tile's own calls "
            f"{split['tile']:.0f} cycles; one LATER block's rescale of the state {split['later_block']:.0f}, of which "
            f"rounding it to TF32 (round_state_to_tf32) {split['rounding']:.0f} ({split['rounding'] / split['later_block']:.0%}).\n"
            f"  With {blocks}-tile blocks (what the planner's L1 leaves beside 4 row tiles of 18-tile-wide float32 state, "
            f"the latent read once as K and V)\n  a slice pays that rescale every {blocks} tiles: fewer SFPU passes per "
            "rounded tile, or larger blocks, is what would speed MLA further.")


def format_55760() -> str:
    """Model v2's costs at tt-metal #55760's configuration beside that issue's measured figures."""
    model, reported, errors = km.reproduce_55760(), km.REPORTED_55760, km.relative_errors_55760()
    lines = ["Calibration check: model v2 at tt-metal #55760's configuration (p100a, HiFi2, bfp8, d128) vs its "
             "MEASURED figures:"]
    for key, value in reported.items():
        if isinstance(value, dict):
            for k, v in value.items():
                lines.append(f"  {key + f' k{k}':<28}{model[key][k]:>9.2f}  reported {v:>8.2f}  "
                             f"error {errors[f'{key}@k{k}']:.1%}")
        else:
            lines.append(f"  {key:<28}{model[key]:>9.2f}  reported {value:>8.2f}  error {errors[key]:.1%}")
    lines.append("  tile MAC: an LLK count (16 MVMULs x 2 phases); per tile MAC: that plus #55760's 4.9 % and its\n"
                 "  per-step cost spread over the step's MACs; exp: #55760's figure taken as the constant; softmax per\n"
                 "  q tile: this model's decomposition (column sub, exp, mul on 2 faces), not #55760's.")
    return "\n".join(lines)


FPU_TIMING_LEGEND = (
    "simulated = wolfpine 2.2's cost model (TT_SIM_COST_MODEL=1), one core: the marginal cycles of one call, from two\n"
    "  programs of N and 2N calls (their compute spans' difference / N); UNCALIBRATED, a floor (wolfpine's own word),\n"
    "  not silicon. modelled = this device model's llk_costs.call_cost (math thread: FPU + front end; pack_tile: the\n"
    "  pack thread). Neither is measured on a card. ratio = simulated / modelled. FPU/UNP ops = MATRIX / UNPACKER\n"
    "  instructions wolfpine issued per call. wolfpine's cost-table entries: occupancy in cycles (provenance).")


def format_fpu_timing(results: list[dict]) -> str:
    """wolfpine's simulated cycles per compute API call beside this model's (``wolfpine-check
    --fpu-timing``): one line per op and compute config, the legend, and each op's wolfpine cost-table
    provenance once. ``results`` are :func:`ttnn_flashdecode.tools.wolfpine_check.fpu_timing.run`'s."""
    lines = ["FPU op timing: SIMULATED by wolfpine (uncalibrated, a floor) vs MODELLED by the device model",
             f"  {'op':<22}{'config':<16}{'simulated':>10}{'modelled':>10}{'ratio':>7}{'FPU ops':>9}{'UNP ops':>9}  result"]
    for r in results:
        config = f"{r['fidelity']} {'fp32' if r['fp32_dest'] else 'bf16'} DST"
        model = r.get("model", float("nan"))
        ratio = r["cycles_per_call"] / model if model else float("nan")
        verdict = "ok" if r["ok"] else f"WRONG OUTPUT: {r['error'][:200]}"
        lines.append(f"  {r['op']:<22}{config:<16}{r['cycles_per_call']:>10.1f}{model:>10.1f}{ratio:>7.2f}"
                     f"{r['matrix_ops_per_call']:>9.1f}{r['unpacker_ops_per_call']:>9.1f}  {verdict}")
    lines.append(FPU_TIMING_LEGEND)
    seen = {}
    for r in results:
        seen.setdefault(r["op"], r.get("provenance", ""))
    lines += [f"  {op}: {prov}" for op, prov in seen.items()]
    return "\n".join(lines)
