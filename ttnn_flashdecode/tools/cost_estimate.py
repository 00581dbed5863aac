"""The cost model's estimate of one call: the critical path over cores, split requests and the chip's
DRAM. Part of :mod:`ttnn_flashdecode.tools.cost_model`; import the names from there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op import kv_walk
from ttnn_flashdecode.op.residency import stats_page_bytes
from ttnn_flashdecode.op.schedule import Schedule
from ttnn_flashdecode.tools.cost_base import (
    AFTER_MAX_ZONES, COMBINE_ZONES, FEATURES, TILE_BYTES, Device, RooflineRatios, Shape, kv_tile_bytes, min_dram_bytes,
    roofline_s, windowed_kv_positions, work_features,
)
from ttnn_flashdecode.tools.cost_calls import CallModel, _first_block_s, _op_plan, cost_per_call_s


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
    terms = _core_terms(plan, kv_positions, block_tiles, model, seed_model, dev, weights, users, kv_dtype)
    worst, critical, breakdown = 0.0, "core", {}
    in_split: set[int] = set()
    for request in range(plan.requests):
        if plan.split_count(request) == 1:
            continue
        in_split.update(plan.core_of(request, i) for i in range(plan.split_count(request)))
        done, split_breakdown = _split_request(plan, request, terms)
        if done > worst:
            worst, critical, breakdown = done, "split", split_breakdown
    t = terms
    combine_s = t.zone_s["fd-compute-max"] + t.zone_s["fd-compute-rescale"] + t.zone_s["fd-compute-sum"]
    busy = t.fill_s + np.maximum(t.pre_s + t.after_s + combine_s + t.post_s, t.core_dram_s - t.fill_s)
    for core in range(plan.used_cores):
        if core not in in_split and busy[core] > worst:
            worst, critical = float(busy[core]), "core"
            breakdown = {"first_block_s": float(t.fill_s[core]), "compute_s": float(t.pre_s[core] + t.post_s[core]),
                         "core_dram_s": float(t.core_dram_s[core])}
    dram_read = int(t.nbytes["dram_read_bytes"].sum())
    chip_dram_s = dram_read / (dev.dram_gbps * 1e9)
    floor_s = _floor_s(plan, kv_positions, model, dev, weights, t, kv_dtype)
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
        combine_noc_bytes=int(t.nbytes["l1_read_bytes"].sum() + t.nbytes["l1_write_bytes"].sum()),
        time_s=worst,
        roofline_s=roofline_s(kv_positions, model.dim_tiles, dev, kv_dtype),
        chip_dram_s=chip_dram_s,
        critical=critical,
        breakdown=breakdown,
        weights=weights if isinstance(weights, str) else "llk-v2",
        floor_s=floor_s,
    )


@dataclasses.dataclass(frozen=True)
class _Terms:
    """Per core (arrays over the plan's cores) and per call, the terms :func:`estimate` composes (seconds)."""

    pre_s: np.ndarray  # a slice's own work before pass 1
    after_s: np.ndarray  # a max-first slice's exp, P.V and sums after the request's max
    zone_s: dict  # COMBINE_ZONES -> per core
    post_s: np.ndarray  # normalise
    per_child_s: dict  # "fd-compute-max" / "fd-compute-sum" -> per child combined
    max_first: np.ndarray
    fill_s: np.ndarray  # the first K block's read
    core_dram_s: np.ndarray  # the core's DRAM bytes at its reader rate
    nbytes: dict
    link: float  # NoC link bytes per second
    stats_bytes: int
    partial_bytes: int  # of a partial, on its busier NoC (CallModel.partial_busiest_noc_share)
    per_call: float  # seconds per weighted compute call


def _core_terms(plan, kv_positions, block_tiles, model: CallModel, seed_model: CallModel, dev: Device, weights,
                users: int, kv_dtype: str) -> _Terms:
    """Each core's compute and DRAM terms from its work features (the module docstring's model)."""
    features = work_features(plan, kv_positions, block_tiles, users)
    kv_scale = kv_tile_bytes(kv_dtype) / TILE_BYTES
    per_call = cost_per_call_s(seed_model, dev, weights)
    zone_s = {zone: model.weighted_zone_calls(features, zone, weights) * per_call for zone in COMBINE_ZONES}
    per_child_s = {zone: model.weighted_zone_per_feature(zone, weights)["partials_combined"] * per_call
                   for zone in ("fd-compute-max", "fd-compute-sum")}
    max_first = features[:, FEATURES.index("max_first")] > 0
    after_s = np.where(max_first, sum(model.weighted_zone_calls(features, zone, weights) for zone in AFTER_MAX_ZONES), 0.0)
    after_s = after_s * per_call
    pre_s = model.weighted_calls(features, weights) * per_call - sum(zone_s.values()) - after_s
    nbytes = model.core_bytes(features)
    live_tile_bytes = model.bytes["dram_read_bytes"][FEATURES.index("live_tiles")]  # K + V, every dim tile
    nbytes["dram_read_bytes"] = nbytes["dram_read_bytes"] - features[:, FEATURES.index("live_tiles")] * round(
        live_tile_bytes * (1 - kv_scale))
    stats_bytes = stats_page_bytes(TILE_BYTES, model.fp32_dest_acc_en)
    return _Terms(pre_s=pre_s, after_s=after_s, zone_s=zone_s, post_s=zone_s["fd-compute-normalise"],
                  per_child_s=per_child_s, max_first=max_first,
                  fill_s=_first_block_s(plan, kv_positions, block_tiles, model, dev) * kv_scale,
                  core_dram_s=nbytes["dram_read_bytes"] / dev.core_dram_bytes_per_s, nbytes=nbytes,
                  link=dev.link_bytes_per_s, stats_bytes=stats_bytes,
                  partial_bytes=round(protocol.partial_pages(model.dim_tiles) * stats_bytes * model.partial_busiest_noc_share),
                  per_call=per_call)


def _up_the_tree(core, children, begin: list[float], step_s: float, message_s: float, base_s, end_s) -> list[float]:
    """Each slice from ``begin``, then its children folded in, in slot order, as each lands
    (``message_s`` after the child is done), then its ``end_s`` (before its own message leaves)."""
    done = [0.0] * len(core)
    for i in reversed(range(len(core))):  # children have higher indices than their parent
        t = begin[i] + float(base_s[core[i]]) - len(children[i]) * step_s
        for c in children[i]:
            t = max(t, done[c] + message_s) + step_s
        done[i] = t + float(end_s[core[i]])
    return done


def _split_request(plan: Schedule, request: int, t: _Terms) -> tuple[float, dict]:
    """When a split request's output is done (seconds), and the breakdown of its critical path."""
    count = plan.split_count(request)
    core = [plan.core_of(request, i) for i in range(count)]
    children = [protocol.tree_children(i, count) for i in range(count)]
    # Slices 1.. copy their parent's Q and constants (their L1 reads, less the request's max
    # they copy later); a parent's children queue at its NoC port in slot order, and a parent
    # starts its K/V stream once they all have.
    copy_s = [0.0] + [(int(t.nbytes["l1_read_bytes"][core[i]]) - t.stats_bytes) / t.link for i in range(1, count)]
    staged, start = [0.0] * count, [0.0] * count
    for i in range(count):  # parents have lower indices than their children
        clock = staged[i]
        for c in children[i]:
            clock += copy_s[c]
            staged[c] = clock
        start[i] = clock
    # A slice's work before pass 1: all of it, overlapped with its K/V stream; a max-first
    # slice's up to its scores and max, after its first block's K.
    own = [float(start[i] + t.fill_s[core[i]] + (t.pre_s[core[i]] if t.max_first[core[i]] else
                                                max(t.pre_s[core[i]], t.core_dram_s[core[i]] - t.fill_s[core[i]])))
           for i in range(count)]
    # Pass 1: subtree maxima. The request's max then travels down the tree like Q: a slice
    # copies it from its parent (queued at the parent's port) and hands it to its compute once
    # its own children have copied it; slice 0's compute has it at once.
    max_done = _up_the_tree(core, children, own, t.per_child_s["fd-compute-max"], t.stats_bytes / t.link,
                            t.zone_s["fd-compute-max"], 0 * t.post_s)
    landed, request_max = [max_done[0]] + [0.0] * (count - 1), [max_done[0]] + [0.0] * (count - 1)
    for i in range(count):
        clock = landed[i]
        for c in children[i]:
            clock += t.stats_bytes / t.link
            landed[c] = clock
        if i:
            request_max[i] = clock
    # Pass 2: a max-first slice runs exp(), P.V and its row sums (once its V has arrived too), the
    # others rescale their state; then each adds its children's partials as they land (the last
    # step fills OUTBOX) and slice 0 normalises.
    v_read = [float(start[i] + t.core_dram_s[core[i]]) if t.max_first[core[i]] else 0.0 for i in range(count)]
    rescaled = [max(max_done[i], request_max[i], v_read[i])
                + float(t.after_s[core[i]] + t.zone_s["fd-compute-rescale"][core[i]]) for i in range(count)]
    done = _up_the_tree(core, children, rescaled, t.per_child_s["fd-compute-sum"], t.partial_bytes / t.link,
                        t.zone_s["fd-compute-sum"], t.post_s)[0]
    return done, {"startup_s": max(start), "slowest_slice_s": max(own),
                  "max_pass_s": max_done[0] - max(own), "share_max_s": max(request_max) - max_done[0],
                  "sum_pass_s": done - max(request_max), "tree_s": done - max(own),
                  "levels": (count - 1).bit_length()}


def _floor_s(plan: Schedule, kv_positions, model: CallModel, dev: Device, weights, t: _Terms, kv_dtype: str) -> float:
    """:attr:`Estimate.floor_s`: the best even split of the longest request, never below the roofline."""
    tile_s = model.weighted_per_feature(weights)["live_tiles"] * t.per_call
    level_s = sum(t.per_child_s.values()) + (t.stats_bytes + t.partial_bytes) / t.link
    longest = max(kv_walk.live_tiles(int(p)) for p in kv_positions)
    return max(roofline_s(kv_positions, model.dim_tiles, dev, kv_dtype), min(
        -(-longest // p) * tile_s + protocol.tree_levels(p) * level_s
        for p in range(1, min(max(dev.cores // plan.requests, 1), longest, protocol.MAX_SPLIT) + 1)))


def op_schedule(shape: Shape, kv_positions_per_user: Sequence[int], dev: Device, *, capacity: int | None = None,
                split: int | None = None, block_tiles: int | None = None,
                kv_dtype: str = "bfloat16", window: int = 0, chunk: int = 0,
                values_from_keys: bool = False) -> tuple[Schedule, list[int], int]:
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
        values_from_keys: one cache as K and V (MLA's latent, as ``flash_mla_decode`` passes it):
            no CB V, so the blocks the planner gives may be larger.

    Returns:
        ``(schedule, kv_positions per request, block_tiles)``; requests are user-major.
    """
    capacity = capacity or max(1024, -(-max(kv_positions_per_user) // 1024) * 1024)
    plan = _op_plan(shape, kv_positions_per_user, capacity, dev.arch, dev.grid, split, block_tiles, kv_dtype, window,
                    chunk, values_from_keys)
    kv_requests = [p for p in kv_positions_per_user for _ in range(shape.n_kv_heads)]
    return plan.schedule, kv_requests, plan.residency.block_tiles


