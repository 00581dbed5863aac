"""Mirror of tt-metal's nightly ``tests/ttnn/nightly/unit_tests/operations/sdpa/test_sdpa_decode.py``
(stored version at commit 1138a3dc), through our drop-ins on the emulator (runners.py, mirror.py).

Every test function of the peer has its counterpart of the same name, with the peer's
parametrisations, and a ``poison`` twin (NaN / +-Inf in every cache slot outside each row's range:
past its position, before its sliding window; the output must not change).

Scaled down (the emulator took over a minute for the peer's shape; the peer's shape runs in the
long sweep, ``-m long_sweep``):

* test_sdpa_decode ``[32, 32, 8, 8192, 128, (8, 8)]`` (every dtype pair): s 8192 -> 1024 (the
  emulator: ~110 s a call at s // 2 = 4096).
* test_sdpa_decode_non_causal ``[32, 32, 8, 4224, 128, (8, 8)]``: s 4224 -> 640 (the whole cache
  is attended: ~120 s a call).
* test_sdpa_decode_sharded ``[16, 8, 1, 32768, 128, (8, 8)]`` (both dtypes): s 32768 -> 4096 (three
  calls of ~25 s).
* test_sdpa_decode_paged_attention / _regressions: the peer's position sweep (max start index 0,
  31, 62, ... below 4096, then +3001, one call each: 133 calls for 4096 positions, ~175 for 128k)
  thinned in the default run to every 16th start plus the last; the long sweep runs every start.
* test_sdpa_decode_sliding_window: the default run takes the cur_pos_tensor=True half; the
  cur_pos list half is in the long sweep (the same windows and positions through the other
  positions keyword).

The default run also keeps, per test function, the poison twins of one dtype pair (the first);
the other poison twins are in the long sweep.

Not mirrored, or not as written:

* test_sdpa_decode_perf, test_sdpa_decode_ndpcc: skipped in the peer (``pytest.mark.skip``).
* Sharded memory configs (``sharded_in`` / ``sharded_out``: Q and the output L1 height-sharded):
  honoured, each of the peer's three calls made (:func:`mirror.height_sharded`; the emulator
  places the shards in the cores' L1 and the kernels read / write them there).
* ``device.num_program_cache_entries()`` / ``cache_entries_counter`` assertions: ttnn's program
  cache is a device feature; not asserted.
* test_sdpa_decode_sharded_on_subcoregrids: ``device_params={"dispatch_core_axis": COL}`` is a
  device setting, and the peer's ``sub_core_grids`` (cores (1,0)-(3,9), (5,0)-(6,9)) need a 7x10
  grid: the peer itself skips below it, and the emulated n150 is 8x8. Mirrored with the same call
  on a sub-core set of the same shape that fits 8x8 (rows 0-7 instead of 0-9), 32 cores from
  (1, 0) row-wise, as the peer derives them.
* test_sdpa_decode_paged_attention_default_config_regression's ``use_program_config=False``:
  mirrored as ``program_config=None``.
* test_sdpa_decode_broadcast_mask_batch: its helper is not in the stored sdpa_test_utils.py;
  mirrored from its docstring (issue #39910, a batch-1 mask broadcast over every user): one
  ``[1, 1, nh, s]`` mask, is_causal=False, for b=32.
* The paged sweep's last, non-causal iteration (bernoulli mask in bfloat4_b) is its own
  parametrisation (``test_sdpa_decode_paged_attention_non_causal``), so a refusal of the mask
  does not hide the causal sweep.

No case is refused (issue 20): 64 Q heads per KV head (row-major Q nh=64, nkv=1), paged block_size
16 and host block-float attn_masks whose heads are not a multiple of 32 run like the rest. The
128k-position cases (paged non-causal llama3.1-b, gemma-3-27b, GPT-OSS) are in the long sweep:
building their cache alone costs ~20 s.

Also in the long sweep for the default budget (each under a minute): test_sdpa_decode_ignore_users
at the peer's s=32768 (the default run scales s 32768 -> 4096: only positions 0..100 are read, the
cost was host-side, building and checking a 32 x 32768 x 128 cache, ~60 s), the program-cache
calls, and all but one poison twin of the paged regressions.
"""

from __future__ import annotations

import numpy as np
import pytest
import ttnn

from mirror import (check, compute_config, default_part, fa_rand, get_chunk_size, host, long_sweep, nearest_n, nearest_pow_2,
                    positions, program_config, reference, rel_l2_bar, slow, stored)
from runners import paged_sweep_positions, run_paged, run_paged_single_iter, run_single_iter
from ttnn_flashdecode.transformer import scaled_dot_product_attention_decode

BF16, BFP8, BFP4 = ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b
POISON = [pytest.param(False, id="clean"), pytest.param(True, id="poison")]
POISON_SLOW = [pytest.param(False, id="clean"), pytest.param(True, id="poison", marks=long_sweep)]


# ------------------------------------------------------------------ row-major Q

@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
@pytest.mark.parametrize("nh", [32, 64], ids=["1_tile_row", "2_tile_rows"])
def test_sdpa_decode_row_major_q_interleaved(nh, poison):
    run_single_iter(1, nh, 1, 128, 128, BF16, (8, 1), BF16, True, q_layout=ttnn.ROW_MAJOR_LAYOUT, poison=poison,
                    label=f"row-major Q nh={nh}")


# ------------------------------------------------------------------ test_sdpa_decode

DTYPES = [(BFP8, BFP8, "all_bfp8"), (BF16, BF16, "all_bfp16"), (BFP8, BF16, "kv_bfp8"), (BFP4, BF16, "kv_bfp4")]
SHAPES = [  # b, nh, nkv, s, d, grid, single_iter, cur_pos_tensor, peer s (when scaled)
    ([8, 8, 1, 32768, 128, (8, 6), True, False], "llama2-70b"),
    ([32, 8, 1, 8192, 128, (8, 8), True, True], "mixtral"),
    ([4, 32, 8, 8192, 128, (8, 8), True, True], "llama3.1-8b-b4"),
    ([32, 32, 8, 8192, 128, (8, 8), True, False], "llama3.1-8b-b32"),
]


def _decode_cases():
    cases = []
    for (dtype, q_dtype, dtype_id) in DTYPES:
        for shape, shape_id in SHAPES:
            b, nh, nkv, s, d, grid, single, tensor = shape
            if nkv > 1 and q_dtype != BF16:
                continue  # the peer skips: "nkv > 1 requires q_dtype to be bfloat16"
            for poison in (False, True):
                values = (b, nh, nkv, s, d, grid, tensor, dtype, q_dtype, poison)
                name = f"{dtype_id}-{shape_id}-{'poison' if poison else 'clean'}"
                heavy = shape_id == "llama3.1-8b-b32"
                if heavy:  # scaled: s 8192 -> 1024 by default; the peer's s in the long sweep
                    cases.append(pytest.param(*values, marks=long_sweep, id=name))
                    values = (b, nh, nkv, 1024, d, grid, tensor, dtype, q_dtype, poison)
                    name += "-scaled_s1024"
                slow_twin = poison and dtype_id != "all_bfp8"
                cases.append(pytest.param(*values, marks=long_sweep if slow_twin else (), id=name))
    return cases


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("b, nh, nkv, s, d, grid_size, cur_pos_tensor, dtype, q_dtype, poison", default_part(
    _decode_cases(), {"kv_bfp8-llama3.1-8b-b4-clean", "kv_bfp8-llama3.1-8b-b4-poison"}))
def test_sdpa_decode(b, nh, nkv, s, d, grid_size, cur_pos_tensor, dtype, q_dtype, poison):
    run_single_iter(b, nh, nkv, s, d, dtype, grid_size, q_dtype, cur_pos_tensor, poison=poison,
                    label=f"decode {b}x{nh}/{nkv} s={s} {dtype}")


# ------------------------------------------------------------------ non-causal

NON_CAUSAL = [
    pytest.param(32, 32, 8, 4224, 128, (8, 8), marks=long_sweep, id="llama3.2-vision-n150"),
    pytest.param(32, 32, 8, 640, 128, (8, 8), id="llama3.2-vision-n150-scaled_s640"),
    pytest.param(8, 16, 4, 4224, 128, (8, 8), id="llama3.2-vision-n300-a"),
    pytest.param(32, 4, 1, 4224, 128, (8, 8), id="llama3.2-vision-n300-b"),
    pytest.param(1, 64, 8, 2048, 128, (8, 8), id="nh64"),
]


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("b, nh, nkv, s, d, grid_size", default_part(NON_CAUSAL, {"nh64"}))
def test_sdpa_decode_non_causal(b, nh, nkv, s, d, grid_size):
    for _ in range(2):  # the peer calls twice (program cache)
        run_single_iter(b, nh, nkv, s, d, BFP8, grid_size, BF16, causal=False, label=f"non-causal {b}x{nh}/{nkv}")


# ------------------------------------------------------------------ ignore users

@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
@pytest.mark.parametrize("s", [pytest.param(32768, marks=long_sweep), pytest.param(4096, id="scaled_s4096")])
def test_sdpa_decode_ignore_users(s, poison):
    b = 32
    start = [100 if u % 2 == 0 else -1 for u in range(b)]
    run_single_iter(b, 8, 1, s, 128, BF16, (8, 6), BF16, True, start_indices=start, poison=poison,
                    label="ignore users")


# ------------------------------------------------------------------ paged

PAGED_SHAPES = [  # b, nh, nkv, s, d, grid, cur_pos_tensor, window, id
    (8, 16, 4, 4096, 128, (8, 2), True, None, "llama3.1-a"),
    (1, 8, 1, 128 * 1024, 128, (8, 4), True, None, "llama3.1-b"),
    (1, 32, 8, 32 * 1024, 128, (8, 1), True, None, "llama3.1-c"),
    (1, 4, 2, 1024 * 128, 128, (8, 8), True, 1024, "gemma-3-27b"),
    (1, 8, 1, 1024 * 128, 64, (8, 8), True, 128, "GPT-OSS"),
]


def _thin(sweep, every=16):
    return sorted(set(sweep[::every] + [sweep[-1]]))


def _paged_cases():
    cases = []
    for *shape, shape_id in PAGED_SHAPES:
        for block_size in (32, 64, 128):
            if shape[3] == 128 * 1024 and block_size != 64:
                continue  # the peer: 128k only with block_size 64
            for poison in (False, True):
                name = f"{shape_id}-paged_{block_size}-{'poison' if poison else 'clean'}"
                cases.append(pytest.param(*shape, block_size, poison, False, id=name + "-thinned",
                                          marks=long_sweep if poison and block_size != 64 else ()))
                cases.append(pytest.param(*shape, block_size, poison, True, id=name, marks=long_sweep))
    return cases


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("b, nh, nkv, s, d, grid_size, cur_pos_tensor, sliding_window_size, block_size, poison, full",
                         default_part(_paged_cases(), {"GPT-OSS-paged_64-clean-thinned",
                                                       "GPT-OSS-paged_64-poison-thinned"}))
def test_sdpa_decode_paged_attention(b, nh, nkv, s, d, grid_size, cur_pos_tensor, sliding_window_size, block_size,
                                     poison, full):
    sweep = paged_sweep_positions(s, b)
    run_paged(b, nh, nkv, s, d, BFP8, grid_size, BF16, cur_pos_tensor, block_size,
              sliding_window_size=sliding_window_size, sweep=sweep if full else _thin(sweep), poison=poison,
              label=f"paged {b}x{nh}/{nkv} s={s} bs={block_size} W={sliding_window_size}")


def _paged_non_causal_cases():
    cases = []
    for *shape, shape_id in PAGED_SHAPES:
        cases.append(pytest.param(*shape, 64, id=shape_id, marks=long_sweep if shape[3] > 4096 else ()))
        if shape[3] > 32768:  # building a 128k cache costs ~20 s even for a refusal
            cases[-1] = pytest.param(*cases[-1].values, marks=[*cases[-1].marks, long_sweep], id=shape_id)
    return cases


@pytest.mark.parametrize("b, nh, nkv, s, d, grid_size, cur_pos_tensor, sliding_window_size, block_size",
                         _paged_non_causal_cases())
@pytest.mark.usefixtures("mock_cluster")
def test_sdpa_decode_paged_attention_non_causal(b, nh, nkv, s, d, grid_size, cur_pos_tensor, sliding_window_size,
                                                block_size):
    """The peer sweep's last iteration: is_causal=False with a bernoulli bfloat4_b mask over the whole cache."""
    run_paged(b, nh, nkv, s, d, BFP8, grid_size, BF16, cur_pos_tensor, block_size, sweep=[s], non_causal=True,
              label=f"paged non-causal {b}x{nh}/{nkv} s={s}")


REGRESSION_SHAPES = [(1, 32, 8, 32 * 16, 128, (8, 1), "paged-block16-regr"),
                     (1, 64, 8, 64 * 64, 64, (8, 1), "paged-qchunk-eq-d-regr")]


def _regression_cases():
    cases = []
    for *shape, shape_id in REGRESSION_SHAPES:
        for block_size in (16, 32, 64, 128):
            for poison in (False, True):
                values = (*shape, block_size, poison)
                name = f"{shape_id}-paged_{block_size}-{'poison' if poison else 'clean'}"
                cases.append(pytest.param(*values, id=name, marks=long_sweep if poison and block_size not in (16, 64) else ()))
    return cases


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("b, nh, nkv, s, d, grid_size, block_size, poison", default_part(
    _regression_cases(), {"paged-block16-regr-paged_32-poison", "paged-qchunk-eq-d-regr-paged_64-poison"}))
def test_sdpa_decode_paged_attention_regressions(b, nh, nkv, s, d, grid_size, block_size, poison):
    if block_size < 32:  # the peer: one causal iteration at s // 2
        padded = nearest_pow_2(nearest_n(nh, 32))
        run_paged_single_iter(b, nh, nkv, s, d, BF16, grid_size, BF16, s // 2, block_size, padded,
                              get_chunk_size(s // 2 + 1, s), poison=poison, label=f"regression bs={block_size}")
    else:
        sweep = paged_sweep_positions(s, b)
        run_paged(b, nh, nkv, s, d, BF16, grid_size, BF16, True, block_size, sweep=_thin(sweep), poison=poison,
                  label=f"regression {b}x{nh}/{nkv} bs={block_size}")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
def test_sdpa_decode_paged_attention_default_config_regression(poison, monkeypatch):
    """Gemma-style global layer, head_dim 512, the op's default config (``program_config=None``)."""
    import runners

    monkeypatch.setattr(runners, "program_config", lambda *args, **kwargs: None)
    run_paged(1, 8, 1, 1024, 512, BFP8, (8, 8), BF16, True, 32, sweep=_thin(paged_sweep_positions(1024, 1), 4),
              poison=poison, label="default config d=512")


# ------------------------------------------------------------------ tree reduction, no program_config

@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
def test_sdpa_decode_tree_reduction_power_of_2_regression(poison):
    """No program_config: the whole (8x8, 64-core) grid on one (user, KV head): 64 split-K slices."""
    from mirror import poison_outside

    b, nkv, nh, s, d = 1, 1, 8, 2048, 128
    rng = np.random.default_rng(1234)
    q, k, v = (rng.standard_normal(shape, dtype=np.float32) for shape in ((1, b, nh, d), (b, nkv, s, d), (b, nkv, s, d)))
    want = reference(stored(q, BF16), stored(k, BF16), stored(v, BF16), first=[0], last=[s // 2], scale=d ** -0.5)
    if poison:
        poison_outside(k, 0, 0, s // 2, 0)
        poison_outside(v, 0, 0, s // 2, 1)
    out = scaled_dot_product_attention_decode(host(q), host(k), host(v), cur_pos_tensor=positions([s // 2] * b),
                                              scale=d ** -0.5, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    check(out, want, min_pcc=0.99, max_rel_l2=rel_l2_bar(compute_config("HiFi4", True)), label="tree reduction")


# ------------------------------------------------------------------ sharded (L1 height-sharded Q and output)

def _sharded_cases():
    cases = []
    for dtype, q_dtype, dtype_id in ((BFP8, BFP8, "all_bfp8"), (BF16, BF16, "all_bfp16")):
        for b in (1, 16):
            for poison in (False, True):
                name = f"{dtype_id}-b{b}-{'poison' if poison else 'clean'}"
                slow_twin = poison and dtype_id != "all_bfp8"
                if b == 16:
                    cases.append(pytest.param(b, 32768, dtype, q_dtype, poison, id=name, marks=long_sweep))
                    cases.append(pytest.param(b, 4096, dtype, q_dtype, poison, id=name + "-scaled_s4096",
                                              marks=long_sweep if slow_twin else ()))
                else:
                    cases.append(pytest.param(b, 32768, dtype, q_dtype, poison, id=name,
                                              marks=long_sweep if slow_twin else ()))
    return cases


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("b, s, dtype, q_dtype, poison", default_part(
    _sharded_cases(), {"all_bfp8-b1-clean", "all_bfp8-b1-poison"}))
def test_sdpa_decode_sharded(b, s, dtype, q_dtype, poison):
    """The peer's three calls: Q L1 height-sharded, the output, both (the emulator places the shards in
    the cores' L1 and reads / writes them there)."""
    for sharded_in, sharded_out in ((True, False), (False, True), (True, True)):
        run_single_iter(b, 8, 1, s, 128, dtype, (8, 8), q_dtype, poison=poison, sharded_in=sharded_in,
                        sharded_out=sharded_out, label=f"sharded b={b} s={s} in={sharded_in} out={sharded_out}")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
@pytest.mark.parametrize("s", [pytest.param(2048, marks=long_sweep), 256])
def test_sdpa_decode_sharded_on_subcoregrids(s, poison):
    sub_core_grids = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(3, 7)),
                                        ttnn.CoreRange(ttnn.CoreCoord(5, 0), ttnn.CoreCoord(6, 7))])
    compute_sub = ttnn.num_cores_to_corerangeset_in_subcoregrids(ttnn.CoreCoord(1, 0), 8 * 4, sub_core_grids,
                                                                 row_wise=True)
    for _ in range(2):
        run_single_iter(8, 8, 1, s, 128, BFP8, (8, 4), BF16, sub_core_grids=compute_sub, poison=poison,
                        label=f"sub-core grids s={s}")


# ------------------------------------------------------------------ program cache (the maths of its calls)

@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON_SLOW)
@pytest.mark.parametrize("dtype", [pytest.param(BFP8, marks=long_sweep), pytest.param(BF16, marks=long_sweep)],
                         ids=["bfp8", "bf16"])
def test_sdpa_decode_program_cache(dtype, poison):
    """The peer's four calls (cur_pos_tensor True / False; sharded variants are device-only) at its
    random positions, the first user at s - 1; Q in the cache's dtype."""
    b, s = 16, 8192
    start = np.random.default_rng(213919).integers(0, s - 1, b).tolist()
    start[0] = s - 1
    for cur_pos_tensor in (True, False):
        run_single_iter(b, 8, 1, s, 128, dtype, (8, 6), dtype, cur_pos_tensor, start_indices=start, poison=poison,
                        label=f"program cache {dtype} tensor={cur_pos_tensor}")


# ------------------------------------------------------------------ sliding window

WINDOW_SHAPES = [
    (1, 4, 2, 1024 * 16, 128, (8, 8), 1024, "gemma"),
    (1, 8, 1, 1024 * 16, 128, (8, 8), 128, "gpt-oss"),
    (4, 8, 1, 1024, 128, (8, 4), 64, "small"),
    (4, 8, 1, 1024, 128, (8, 4), 128, "medium"),
    (4, 8, 1, 1024, 128, (8, 4), 256, "large"),
    (8, 16, 4, 2048, 128, (8, 8), 128, "multi-head"),
    (1, 8, 1, 4096, 128, (8, 4), 512, "long"),
]


def window_positions(w, s):
    """The peer's positions: window starts in each face of a tile, 2W, W/2, W-1, s/2, s-10 (< s)."""
    out = [(w + offset - 1) + 32 * k for k in (5, 10, 20, 30) for offset in (15, 16, 17)]
    return [p for p in out + [w * 2, w // 2, w - 1, s // 2, s - 10] if p < s]


def _window_cases():
    cases = []
    for dtype, dtype_id in ((BF16, "all_bfp16"), (BFP8, "kv_bfp8_q_bf16")):
        for *shape, shape_id in WINDOW_SHAPES:
            for tensor in (False, True):
                for poison in (False, True):
                    name = f"{dtype_id}-{shape_id}-{'tensor' if tensor else 'list'}-{'poison' if poison else 'clean'}"
                    slow_case = not tensor or (poison and dtype_id != "all_bfp16")
                    cases.append(pytest.param(*shape, dtype, tensor, poison, id=name,
                                              marks=long_sweep if slow_case else ()))
    return cases


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("b, nh, nkv, s, d, grid_size, sliding_window_size, dtype, cur_pos_tensor, poison",
                         default_part(_window_cases(), {"all_bfp16-small-tensor-clean",
                                                        "all_bfp16-small-tensor-poison"}))
def test_sdpa_decode_sliding_window(b, nh, nkv, s, d, grid_size, sliding_window_size, dtype, cur_pos_tensor, poison):
    for cur_pos in window_positions(sliding_window_size, s):
        run_single_iter(b, nh, nkv, s, d, dtype, grid_size, BF16, cur_pos_tensor,
                        start_indices=[cur_pos + i for i in range(b)], sliding_window_size=sliding_window_size,
                        poison=poison, seed=cur_pos, label=f"window W={sliding_window_size} p={cur_pos}")


# ------------------------------------------------------------------ broadcast mask

@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("mask_dtype", [BFP4, BF16], ids=["mask_bfp4", "mask_bf16"])
def test_sdpa_decode_broadcast_mask_batch(mask_dtype):
    """Issue #39910: one batch-1 mask ``[1, 1, nh, s]`` read by all 32 users."""
    b, nh, nkv, s, d = 32, 8, 1, 128, 128
    rng = np.random.default_rng(39910)
    q, k, v = fa_rand(rng, 1, b, nh, d), fa_rand(rng, b, nkv, s, d), fa_rand(rng, b, nkv, s, d)
    mask = (rng.random((1, 1, nh, s)) < 0.25) * np.float32(np.finfo(np.float32).min)
    mask[..., 0] = 0.0  # no fully masked row
    compute = compute_config("HiFi2")
    want = reference(stored(q, BF16), stored(k, BF16), stored(v, BF16), first=[0] * b, last=[s - 1] * b,
                     scale=d ** -0.5, mask=stored(mask, mask_dtype)[:, 0])
    out = scaled_dot_product_attention_decode(host(q), host(k), host(v), is_causal=False,
                                              attn_mask=host(mask, mask_dtype), scale=d ** -0.5,
                                              program_config=program_config((8, 4), 32, 32, exp_approx_mode=False),
                                              compute_kernel_config=compute, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    check(out, want, min_pcc=0.99, max_rel_l2=rel_l2_bar(compute), label=f"broadcast mask {mask_dtype}")
