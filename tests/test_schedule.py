"""The split-K scheduler (ttnn_flashdecode.op.schedule): invariants and balance, no device.

Grids: 8x8 = 64 cores (n150's default compute grid) and 13x10 = 130 (p150's, TT_FACTS §8).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op import kv_walk
from ttnn_flashdecode.op.schedule import DEFAULT_MIN_SLICE_TILES, Schedule, Slice, schedule

N150_CORES = 8 * 8
P150_CORES = 13 * 10
MAX_SPLIT = protocol.MAX_SPLIT

# Balance bounds: max live tiles on a core <= bound * mean over used cores + 1 (slice_tiles cuts a
# request into slices that differ by one tile, so a 32-tile request in 6 slices is 6,5,5,6,5,5).
# Uniform batches cut evenly, so only that rounding and whole requests per core remain: 5%. A
# ragged batch also pays for dedicated split cores and whole small requests: 25%.
UNIFORM_MAX_OVER_MEAN = 1.05
RAGGED_MAX_OVER_MEAN = 1.25


def _check_invariants(plan: Schedule, kv: list[int], cores: int, max_split: int = MAX_SPLIT,
                      max_slices_per_core: int = 21) -> None:
    """Every rule of the module docstring."""
    assert 1 <= plan.used_cores <= cores
    seen: dict[tuple[int, int], int] = {}
    for core, slices in enumerate(plan.cores):
        assert slices, f"core {core} is used but runs nothing"
        assert len(slices) <= max_slices_per_core
        for s in slices:
            assert (s.request, s.index) not in seen, f"slice {s} twice"
            seen[(s.request, s.index)] = core
            assert 1 <= s.count <= max_split
            if s.count > 1:
                assert len(slices) == 1, f"core {core} holds split slice {s} and {len(slices) - 1} more"
    for r in range(len(kv)):
        count = plan.split_count(r)
        assert {i for (q, i) in seen if q == r} == set(range(count))
        first = plan.first_core(r)
        for i in range(count):
            assert seen[(r, i)] == first + i == plan.core_of(r, i)
    # The slices cover every request's live tiles exactly once.
    total = sum(kv_walk.live_tiles(p) for p in kv)
    assert sum(plan.live_tiles_per_core(kv)) == total


def _balance(plan: Schedule, kv: list[int]) -> float:
    """max / mean live tiles per used core, the one-tile rounding of slice_tiles forgiven."""
    per_core = plan.live_tiles_per_core(kv)
    return (max(per_core) - 1) / (sum(per_core) / len(per_core))


@pytest.mark.parametrize("cores", [N150_CORES, P150_CORES])
@pytest.mark.parametrize("batch, n_kv_heads, context", [
    (1, 2, 8192),    # MiniCPM5-1B, batch 1, 8k
    (32, 2, 8192),   # MiniCPM5-1B, batch 32
    (1, 8, 1024),    # Llama-3.1-8B, batch 1, 1k
    (32, 8, 1024),   # Llama-3.1-8B, batch 32, 1k
    (32, 8, 32768),  # Llama-3.1-8B, batch 32, 32k
    (1, 3, 131072),  # SmolLM2, batch 1, 128k
    (7, 3, 1000),    # awkward sizes
])
def test_schedule_balances_uniform_batches(cores, batch, n_kv_heads, context):
    kv = [context] * (batch * n_kv_heads)
    plan = schedule(kv, cores, max_split=MAX_SPLIT)
    _check_invariants(plan, kv, cores)
    assert _balance(plan, kv) <= UNIFORM_MAX_OVER_MEAN, plan.live_tiles_per_core(kv)


@pytest.mark.parametrize("cores", [N150_CORES, P150_CORES])
def test_schedule_minicpm_batch1_8k_uses_at_least_32_cores(cores):
    kv = [8192, 8192]  # 2 KV groups x 256 live tiles
    plan = schedule(kv, cores, max_split=MAX_SPLIT)
    _check_invariants(plan, kv, cores)
    assert plan.used_cores >= 32
    assert plan.split_count(0) == plan.split_count(1) >= 16
    assert min(plan.live_tiles_per_core(kv)) >= DEFAULT_MIN_SLICE_TILES


def test_schedule_minicpm_batch1_8k_slices_of_min_slice_tiles():
    plan = schedule([8192, 8192], P150_CORES, max_split=MAX_SPLIT)
    assert plan.used_cores == 2 * 256 // DEFAULT_MIN_SLICE_TILES
    assert plan.live_tiles_per_core([8192, 8192]) == [DEFAULT_MIN_SLICE_TILES] * plan.used_cores


def test_schedule_small_min_slice_fills_p150():
    plan = schedule([8192, 8192], P150_CORES, max_split=MAX_SPLIT, min_slice_tiles=4)
    assert plan.used_cores == 128  # 2 x 64 slices of 4 tiles
    assert plan.live_tiles_per_core([8192, 8192]) == [4] * 128


@pytest.mark.parametrize("cores", [N150_CORES, P150_CORES])
def test_schedule_llama_batch32_1k_packs_whole_requests(cores):
    kv = [1024] * (32 * 8)  # 256 requests x 32 tiles: enough requests to fill the grid unsplit
    plan = schedule(kv, cores, max_split=MAX_SPLIT)
    _check_invariants(plan, kv, cores)
    assert plan.used_cores == cores
    assert _balance(plan, kv) <= UNIFORM_MAX_OVER_MEAN


@pytest.mark.parametrize("cores", [N150_CORES, P150_CORES])
def test_schedule_balances_ragged_batch(cores):
    # One long, one medium and two short users, 8 KV groups each (Llama-3.1-8B's group count).
    kv = [p for p in (5, 70, 3000, 8191) for _ in range(8)]
    plan = schedule(kv, cores, max_split=MAX_SPLIT)
    _check_invariants(plan, kv, cores)
    per_core = plan.live_tiles_per_core(kv)
    assert _balance(plan, kv) <= RAGGED_MAX_OVER_MEAN, per_core
    # The long users are split, the short ones are not (a 1-tile request cannot be cut).
    assert plan.split_count(31) > 1 and plan.split_count(0) == 1
    # Far better than one core per request: the longest request alone is 256 tiles.
    assert max(per_core) <= 256 // 3


@pytest.mark.parametrize("split", [1, 2, 3, 7, 16, 64])
def test_schedule_forced_split(split):
    kv = [40, 2000]  # 2 and 63 live tiles: split 3.. leaves empty slices in the first request
    plan = schedule(kv, P150_CORES, max_split=MAX_SPLIT, split=split)
    _check_invariants(plan, kv, P150_CORES)
    assert [plan.split_count(r) for r in range(2)] == [split, split]
    if split > 1:
        assert plan.used_cores == 2 * split
        assert [plan.first_core(r) for r in range(2)] == [0, split]
        per_core = plan.live_tiles_per_core(kv)
        assert per_core[:split] == [b - a for a, b in (kv_walk.slice_tiles(40, i, split) for i in range(split))]
        assert per_core[0] >= 1  # slice 0 is never empty
    else:
        assert plan.used_cores == 2


def test_schedule_forced_split_is_clamped_to_max_split():
    plan = schedule([8192], 64, max_split=4, split=16)
    assert plan.split_count(0) == 4


def test_schedule_respects_max_split_and_min_slice():
    plan = schedule([8192], 130, max_split=8)
    assert plan.split_count(0) == 8
    plan = schedule([8192], 130, max_split=MAX_SPLIT, min_slice_tiles=32)
    assert plan.split_count(0) == 8
    assert min(plan.live_tiles_per_core([8192])) >= 32


def test_schedule_never_splits_below_min_slice():
    plan = schedule([7 * 32], 130, max_split=MAX_SPLIT, min_slice_tiles=4)  # 7 tiles
    assert plan.split_count(0) == 1
    plan = schedule([8 * 32], 130, max_split=MAX_SPLIT, min_slice_tiles=4)  # 8 tiles
    assert plan.split_count(0) == 2


def test_schedule_packs_at_most_max_slices_per_core():
    kv = [100] * 50
    plan = schedule(kv, 3, max_split=MAX_SPLIT, max_slices_per_core=17)
    _check_invariants(plan, kv, 3, max_slices_per_core=17)
    assert plan.used_cores == 3


def test_schedule_rejects_more_requests_than_places():
    with pytest.raises(ValueError, match=r"expected at most 42 requests .* got 43"):
        schedule([100] * 43, 2, max_split=MAX_SPLIT)


def test_schedule_rejects_forced_split_past_grid():
    with pytest.raises(ValueError, match=r"expected at most 64 cores .* got 96"):
        schedule([8192] * 3, 64, max_split=MAX_SPLIT, split=32)


@pytest.mark.parametrize("kwargs, message", [
    ({"cores": 0}, r"cores: expected >= 1, got 0"),
    ({"max_split": 0}, r"max_split: expected 1 <= max_split <= 255, got 0"),
    ({"max_split": 256}, r"max_split: expected 1 <= max_split <= 255, got 256"),
    ({"split": 0}, r"split: expected 1 <= split <= 255, got 0"),
    ({"min_slice_tiles": 0}, r"min_slice_tiles: expected >= 1, got 0"),
    ({"kv_positions": [10, 0]}, r"kv_positions\[1\]: expected >= 1, got 0"),
    ({"kv_positions": []}, r"kv_positions: expected at least one request, got none"),
])
def test_schedule_rejects_bad_arguments(kwargs, message):
    args = {"kv_positions": [100], "cores": 4, "max_split": MAX_SPLIT} | kwargs
    with pytest.raises(ValueError, match=message):
        schedule(args.pop("kv_positions"), args.pop("cores"), **args)


def test_schedule_rejects_non_int_position():
    with pytest.raises(TypeError, match="expected an int, got float"):
        schedule([10.0], 4, max_split=4)


def test_slice_tiles_helpers():
    s = Slice(request=0, index=1, count=3)
    assert s.tiles(100 * 32) == kv_walk.slice_tiles(100 * 32, 1, 3) == (34, 67)
    assert s.live_tiles(100 * 32) == 33


@settings(max_examples=300, deadline=None)
@given(
    kv=st.lists(st.integers(min_value=1, max_value=40_000), min_size=1, max_size=80),
    cores=st.integers(min_value=1, max_value=140),
    max_split=st.integers(min_value=1, max_value=MAX_SPLIT),
    min_slice_tiles=st.integers(min_value=1, max_value=16),
)
def test_schedule_invariants_hold_for_any_batch(kv, cores, max_split, min_slice_tiles):
    if len(kv) > cores * 21:
        with pytest.raises(ValueError):
            schedule(kv, cores, max_split=max_split, min_slice_tiles=min_slice_tiles)
        return
    plan = schedule(kv, cores, max_split=max_split, min_slice_tiles=min_slice_tiles)
    _check_invariants(plan, kv, cores, max_split=max_split)
    for r, p in enumerate(kv):
        count = plan.split_count(r)
        if count > 1:
            # No slice under the bound: the smallest slice is floor(live / count).
            assert kv_walk.live_tiles(p) // count >= min_slice_tiles
    # Never worse than one request per core (the seed's plan) when that fits the grid.
    if len(kv) <= cores:
        assert max(plan.live_tiles_per_core(kv)) <= max(kv_walk.live_tiles(p) for p in kv)


@settings(max_examples=150, deadline=None)
@given(
    kv=st.lists(st.integers(min_value=1, max_value=5_000), min_size=1, max_size=8),
    split=st.integers(min_value=1, max_value=16),
)
def test_schedule_forced_split_invariants(kv, split):
    cores = 130
    if split > 1 and len(kv) * split > cores:
        with pytest.raises(ValueError):
            schedule(kv, cores, max_split=MAX_SPLIT, split=split)
        return
    plan = schedule(kv, cores, max_split=MAX_SPLIT, split=split)
    _check_invariants(plan, kv, cores)
    assert all(plan.split_count(r) == split for r in range(len(kv)))


def test_schedule_refuses_what_the_kernels_cannot_run():
    """Split-K handshakes count one split item per core, and the tree addresses consecutive cores."""
    with pytest.raises(ValueError, match="split-K slice to hold nothing else, got core 0"):
        Schedule(((Slice(0, 0, 2), Slice(1, 0, 1)), (Slice(0, 1, 2),)))
    with pytest.raises(ValueError, match="consecutive cores"):
        Schedule(((Slice(0, 0, 2),), (Slice(1, 0, 1),), (Slice(0, 1, 2),)))
    Schedule(((Slice(0, 0, 2),), (Slice(0, 1, 2),), (Slice(1, 0, 1), Slice(2, 0, 1))))  # fine
