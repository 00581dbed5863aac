"""The cost model (ttnn_flashdecode.tools.cost_model): its counts against the emulator, its seed fit, its terms.

The analytic per-core counts (compute API calls by name, DRAM and L1 bytes) come from per-feature
counts fitted on the emulator's calibration runs; here they are checked against emulator runs
of other shapes: awkward positions, a ragged batch, forced splits with empty slices, the seed's
16-tile blocks, head_dim 64.
"""

from __future__ import annotations

import numpy as np
import pytest

from ttnn_flashdecode.op import protocol

from ttnn_flashdecode.tools import cost_model as cm
from ttnn_flashdecode.op.schedule import Schedule, Slice

# The seed line through kv 1024 and 8192 must predict the measured kv 2048 point (0.236 ms) this
# well if the model's per-call cost is linear in the work, as the seed's timings are.
SEED_2048_TOLERANCE = 0.03


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh calibration cache for this module (calibrations run on the current kernels)."""
    path = tmp_path_factory.mktemp("cost_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(cm.CACHE_ENV, str(path))
        yield path


@pytest.fixture(scope="module")
def seed_model(cache):
    return cm.calibrate(cm.SEED_Q_ROWS, cm.SEED_HEAD_DIM // 32)


@pytest.fixture(scope="module")
def smol_model(cache):
    shape = cm.MODELS["smollm2"]
    return cm.calibrate(shape.q_rows, shape.dim_tiles)


def _check_against_emulator(model: cm.CallModel, shape: cm.Shape, kv_per_user, split, block_tiles=None):
    report, plan = cm._run_emulated(shape, kv_per_user, split, block_tiles)
    kv = [p for p in kv_per_user for _ in range(shape.n_kv_heads)]
    features = cm.work_features(plan.schedule, kv, plan.residency.block_tiles, users=len(kv_per_user))
    predicted_calls = model.core_calls(features)
    predicted_zone_calls = model.core_zone_calls(features)
    predicted_bytes = model.core_bytes(features)
    assert len(report.cores) == plan.schedule.used_cores
    for index, core in enumerate(plan.cores):
        stats = report.cores[core]
        assert predicted_calls[index] == cm.compute_calls(stats.calls), f"core {index} {core}"
        assert predicted_zone_calls[index] == {k: v for k, v in stats.zone_calls.items() if v}, f"zones of core {index}"
        for counter in ("dram_read_bytes", "dram_write_bytes", "l1_read_bytes", "l1_write_bytes"):
            assert int(predicted_bytes[counter][index]) == getattr(stats, counter), f"{counter} on core {index} {core}"
    return report, plan


@pytest.mark.parametrize("kv_per_user, n_kv_heads, split, block_tiles", [
    ([97, 1000, 33], 2, None, None),         # ragged, the planner's split and blocks
    ([5, 70, 3000, 8191], 1, None, None),    # one long, one medium, two short users
    ([150], 2, 7, 2),                        # 5 tiles in 7 slices: two empty slices
    ([2000], 1, 6, 4),                       # a 6-slice tree (children 1, 2, 4 and 5 of 4)
    ([1000], 1, 1, 16),                      # the seed's configuration, unsplit
])
def test_cost_model_counts_match_emulator(seed_model, kv_per_user, n_kv_heads, split, block_tiles):
    shape = cm.Shape("MiniCPM-like", cm.SEED_Q_ROWS * n_kv_heads, n_kv_heads, cm.SEED_HEAD_DIM)
    _check_against_emulator(seed_model, shape, kv_per_user, split, block_tiles)


def test_cost_model_counts_match_emulator_head_dim_64(smol_model):
    _check_against_emulator(smol_model, cm.MODELS["smollm2"], [1, 500, 4100], None)
    _check_against_emulator(smol_model, cm.MODELS["smollm2"], [700], 3, 2)


def test_cost_model_minicpm_batch1_8k_reads_near_minimum_on_32_cores(seed_model):
    """The issue's anchor on the emulator: DRAM bytes within 2% of the minimum, >= 32 cores."""
    report, plan = _check_against_emulator(seed_model, cm.MODELS["minicpm5-1b"], [8192], None)
    minimum = cm.min_dram_bytes([8192, 8192], dim_tiles=4)
    assert report.total_dram_read_bytes <= 1.02 * minimum
    assert len(report.cores) >= 32


def test_cost_model_seed_fit_reproduces_seed_line(seed_model):
    for weights in cm.WEIGHTINGS:
        check = cm.seed_check(seed_model, weights)
        assert check["predicted_2048_s"] == pytest.approx(check["measured_2048_s"], rel=SEED_2048_TOLERANCE)
        # The intercept is the seed driver's launch overhead (~32 us), not per-tile work.
        assert 10e-6 < check["intercept_s"] < 40e-6
    assert cm.LAUNCH_OVERHEAD_S == pytest.approx(31.7e-6, abs=0.1e-6)


def test_cost_model_wormhole_pays_the_clock_ratio(seed_model):
    n150, p150 = cm.device("n150"), cm.device("p150")
    assert cm.cost_per_call_s(seed_model, n150) == pytest.approx(1.35 * cm.cost_per_call_s(seed_model, p150))


def test_cost_model_devices_read_grids_from_core_descriptors():
    n150, p150 = cm.device("n150"), cm.device("p150")
    assert (n150.grid, n150.cores, n150.dram_gbps, n150.clock_ghz) == ((8, 8), 64, 288.0, 1.0)
    assert (p150.grid, p150.cores, p150.dram_gbps, p150.clock_ghz) == ((13, 10), 130, 512.0, 1.35)
    assert cm.device("p150", cores=110).grid == (11, 10)
    assert p150.link_bytes_per_s == pytest.approx(64 * 1.35e9)
    with pytest.raises(ValueError, match="expected one of"):
        cm.device("n300")


def test_cost_model_roofline_is_min_bytes_over_bandwidth():
    kv = [8192, 8192]  # MiniCPM5-1B batch 1 at 8k: 2 groups x 256 tiles x (K + V) x 4 dim tiles
    assert cm.min_dram_bytes(kv, 4) == 2 * 256 * 2 * 4 * 2048 == 8 * 2**20
    assert cm.roofline_s(kv, 4, cm.device("p150")) == pytest.approx(8 * 2**20 / 512e9)


def test_cost_model_tree_children_cover_every_slice_once():
    for count in range(1, 70):
        children = [c for i in range(count) for c in protocol.tree_children(i, count)]
        assert sorted(children) == list(range(1, count))
        assert all(c > i for i in range(count) for c in protocol.tree_children(i, count))
    assert protocol.tree_children(0, 8) == [1, 2, 4]
    assert protocol.tree_children(4, 8) == [5, 6]
    assert protocol.tree_children(4, 6) == [5]


def test_cost_model_long_batch_is_dram_bound_on_p150(seed_model):
    """Llama-3.1-8B at batch 32, 32k: every core streams, so the chip's DRAM bandwidth bounds it."""
    dev = cm.device("p150")
    plan, kv, block_tiles = cm.op_schedule(cm.MODELS["llama-3.1-8b"], [32768] * 32, dev)
    est = cm.estimate(plan, kv, block_tiles, seed_model, seed_model, dev)
    assert est.critical == "dram"
    assert est.roofline_ratio == pytest.approx(1.0, abs=0.01)
    assert est.cores_used == dev.cores


def test_cost_model_unsplit_core_time_is_calls_times_cost(seed_model):
    """One request on one core at the seed's configuration: the seed's slope, no launch overhead."""
    dev = cm.device("p150")
    plan = Schedule(((Slice(0, 0, 1),),))
    low, high = (cm.estimate(plan, [kv], cm.SEED_BLOCK_TILES, seed_model, seed_model, dev)
                 for kv in (cm.SEED_KV_POSITIONS[0], cm.SEED_KV_POSITIONS[2]))
    assert (high.time_s - low.time_s) == pytest.approx((cm.SEED_MS[2] - cm.SEED_MS[0]) * 1e-3)
    assert high.critical == "core"


def test_cost_model_split_beats_one_core_per_request_at_8k(seed_model):
    dev = cm.device("p150")
    shape = cm.MODELS["minicpm5-1b"]
    split = cm.estimate(*cm.op_schedule(shape, [8192], dev), seed_model, seed_model, dev)
    unsplit = cm.estimate(*cm.op_schedule(shape, [8192], dev, split=1), seed_model, seed_model, dev)
    assert split.cores_used >= 32 and unsplit.cores_used == 2
    assert split.time_s < unsplit.time_s / 3
    assert split.critical == "split"
    terms = split.breakdown
    assert set(terms) >= {"startup_s", "slowest_slice_s", "tree_s", "max_pass_s", "share_max_s", "sum_pass_s", "levels"}
    assert terms["max_pass_s"] + terms["share_max_s"] + terms["sum_pass_s"] == pytest.approx(terms["tree_s"])
    assert min(terms["max_pass_s"], terms["share_max_s"], terms["sum_pass_s"]) > 0
    assert terms["sum_pass_s"] > terms["max_pass_s"]  # a sum step moves and adds a whole partial


def test_cost_model_ratio_to_roofline_for_minicpm_8k_batch_1(seed_model, record_property):
    """The issue's anchor, as the model sees it today: p150 is not within 1.25x of the DRAM roofline
    (each slice's own calls and the combine's sum pass dominate). Printed so a kernel change that
    moves it shows up here and in the bench output."""
    dev = cm.device("p150")
    est = cm.estimate(*cm.op_schedule(cm.MODELS["minicpm5-1b"], [8192], dev), seed_model, seed_model, dev)
    floor = est.floor_s / est.roofline_s
    record_property("figure", f"MiniCPM5-1B batch 1 8k on p150 (MODELLED): {est.cores_used} cores, {est.time_s * 1e6:.1f} us "
                              f"= {est.roofline_ratio:.2f}x the {est.roofline_s * 1e6:.1f} us DRAM roofline; no even split of "
                              f"these kernels goes below {floor:.2f}x (target 1.25x)")
    assert 1.0 <= floor <= est.roofline_ratio <= 20.0
    assert floor > 1.25  # the target is out of reach of any even split of these kernels (floor_s)


def test_cost_model_floor_is_the_best_split_of_per_tile_and_per_level_costs(seed_model):
    """floor_s by hand for one request of 256 tiles on p150: min over p of ceil(256/p) tiles plus
    ceil(log2 p) combine levels, each a max and a sum step with their transfers (the partial on both NoCs)."""
    dev = cm.device("p150")
    plan, kv, block_tiles = cm.op_schedule(cm.MODELS["minicpm5-1b"], [8192], dev)
    est = cm.estimate(plan, kv, block_tiles, seed_model, seed_model, dev)
    per_call = cm.cost_per_call_s(seed_model, dev)
    tile_s = seed_model.weighted_per_feature()["live_tiles"] * per_call
    level_s = sum(seed_model.weighted_zone_per_feature(z)["partials_combined"] for z in ("fd-compute-max", "fd-compute-sum"))
    # one fp32 max tile + (O, L), the partial's 5 pages split over the NoCs (3 on the busier one, measured)
    assert seed_model.partial_busiest_noc_share == pytest.approx(3 / 5)
    level_s = level_s * per_call + (2 * 2048 + 3 * 4096) / dev.link_bytes_per_s
    by_hand = min(-(-256 // p) * tile_s + (p - 1).bit_length() * level_s for p in range(1, 66))
    assert est.floor_s == pytest.approx(by_hand)
    assert est.floor_s >= est.roofline_s


def test_cost_model_features_of_a_split_request():
    kv = [40 * 32]  # 40 tiles in 4 slices of 10; blocks of 4: 3 live blocks, padded to 4
    plan = Schedule(tuple((Slice(0, i, 4),) for i in range(4)))
    rows = {name: list(column) for name, column in zip(cm.FEATURES, cm.work_features(plan, kv, 4).T)}
    assert rows["live_tiles"] == [10, 10, 10, 10]
    assert rows["later_blocks"] == [2, 2, 2, 2]
    assert rows["skipped_blocks"] == [1, 1, 1, 1]
    assert rows["normalised"] == [1, 0, 0, 0]
    assert rows["split_roots"] == [1, 0, 0, 0]
    assert rows["max_first"] == rows["max_first_tiles"] == [0, 0, 0, 0]  # 10 tiles exceed a 4-tile block
    one_block = cm.work_features(plan, kv, 16).T[cm.FEATURES.index("max_first_tiles")]
    assert list(one_block) == [10, 10, 10, 10]
    assert rows["partials_sent"] == [0, 1, 1, 1]
    assert rows["partials_combined"] == [2, 0, 1, 0]
    assert rows["slices_fed"] == [3, 0, 0, 0]
    assert rows["masked_tiles"] == [0, 0, 0, 0]  # 1280 positions: the last tile is full


def test_cost_model_calibration_refuses_an_inexact_fit():
    features = np.array([[1, 0], [1, 1], [1, 2]])
    with pytest.raises(cm.CalibrationError, match="integer-linear"):
        cm._fit(features, np.array([0, 1, 3]), "made_up_call")
    assert cm._fit(features, np.array([2, 5, 8]), "ok") == (2, 3)


def test_cost_model_json_round_trip(seed_model):
    assert cm.CallModel.from_json(seed_model.to_json()) == seed_model


def test_cost_model_weighted_calls_per_tile(seed_model):
    per_feature = seed_model.weighted_per_feature("uniform")
    # QK^T and PV: dim_tiles matmuls each per live tile.
    assert seed_model.calls["matmul_tiles"][cm.FEATURES.index("live_tiles")] == 2 * 4
    assert per_feature["live_tiles"] > 8
    # K and V: dim_tiles bfloat16 tiles each per live tile.
    assert seed_model.bytes["dram_read_bytes"][cm.FEATURES.index("live_tiles")] == 2 * 4 * cm.TILE_BYTES


@pytest.mark.parametrize("kv_per_user, window, split", [([4101, 300], 512, None), ([2048], 256, 3)])
def test_cost_model_dram_bytes_follow_a_sliding_window(seed_model, kv_per_user, window, split):
    """A windowed call is modelled as the unwindowed work on its window's tiles
    (cm.windowed_kv_positions): every core's DRAM bytes exactly as the emulator counts them (the
    window mask is built in L1), planned with the window (op_schedule's / _op_plan's window)."""
    shape = cm.Shape("MiniCPM-like", cm.SEED_Q_ROWS * 2, 2, cm.SEED_HEAD_DIM)
    report, plan = cm._run_emulated(shape, kv_per_user, split, None, capacity=8192, window=window)
    kv = cm.windowed_kv_positions([p for p in kv_per_user for _ in range(shape.n_kv_heads)], window)
    features = cm.work_features(plan.schedule, kv, plan.residency.block_tiles, users=len(kv_per_user))
    predicted = seed_model.core_bytes(features)["dram_read_bytes"]
    assert len(report.cores) == plan.schedule.used_cores
    for index, core in enumerate(plan.cores):
        assert int(predicted[index]) == report.cores[core].dram_read_bytes, f"core {index} {core}"
    minimum = cm.min_dram_bytes([p for p in kv_per_user for _ in range(shape.n_kv_heads)], shape.dim_tiles,
                                window=window)
    assert minimum < report.total_dram_read_bytes <= 1.1 * minimum
