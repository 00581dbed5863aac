"""ttnn 0.81's decode settings that do not change the maths, honoured by the drop-ins (issue 20):
every ``ttnn.SDPAProgramConfig`` field, ``share_cache=True`` and a block-float Q, on the emulator
against float64 (``tests/bars.py``). The calls are written in the shape ttnn's own decode tests
write them (tt-metal ``tests/ttnn/unit_tests/operations/sdpa/sdpa_test_utils.py``): Q ``[1, b, nh,
dh]`` as a ttnn tensor, ``cur_pos`` / ``cur_pos_tensor``, ``scale=d**-0.5``, ``program_config=
ttnn.SDPAProgramConfig(compute_with_storage_grid_size=grid_size, q_chunk_size=padded_num_heads,
k_chunk_size=..., exp_approx_mode=False)``, a ``ttnn.WormholeComputeKernelConfig`` and
``memory_config=ttnn.DRAM_MEMORY_CONFIG``. Their compute configs (HiFi2 / HiFi4 with bf16 DST)
would need the per-config bars of ``tests/test_attention_adversarial.py``; these calls keep the
call shape with fp32 DST and HiFi4, so the suite's one bar applies.

Shapes stay small (MQA, 8 Q heads, head_dim 64, a few hundred to 2048 positions) so the emulator's
cost is a few seconds per distinct program.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import ttnn

from bars import assert_close
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op import transformer
from ttnn_flashdecode.op.reference import attention_reference, pcc, relative_l2

BF16 = ml_dtypes.bfloat16
NH, NKV, D = 8, 1, 64
PADDED_NUM_HEADS = 32  # ttnn's tests: nearest_pow_2(nearest_n(nh, 32)), their q_chunk_size
COMPUTE = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi4, math_approx_mode=False,
                                           fp32_dest_acc_en=True, packer_l1_acc=False)


def _fa_inputs(b, s, seed=0, nkv=NKV, kv_batch=None):
    """Q ``[1, b, nh, d]``, K and V ``[kv_batch or b, nkv, s, d]``, bfloat16-exact, unit normal."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, b, NH, D), dtype=np.float32).astype(BF16).astype(np.float32)
    shape = (kv_batch or b, nkv, s, D)
    k, v = (rng.standard_normal(shape, dtype=np.float32).astype(BF16).astype(np.float32) for _ in range(2))
    return q, k, v


def _host(array, dtype=ttnn.bfloat16):
    """A host ttnn tensor, as ``ttnn.as_tensor(..., layout=ttnn.TILE_LAYOUT)`` makes it (without a device)."""
    return ttnn.Tensor(np.ascontiguousarray(array, np.float32), dtype, layout=ttnn.TILE_LAYOUT)


def _want(q, k, v, cur_pos):
    """float64 reference on ``[1, 1, b, nh * d]`` rows, reshaped to ``[1, b, nh, d]``."""
    b = q.shape[1]
    return attention_reference(q.reshape(1, 1, b, NH * D), k, v, cur_pos=cur_pos).reshape(1, b, NH, D)


def _decode(q, k, v, start_indices, program_config, *, cur_pos_tensor=False, **keywords):
    """The decode call as ttnn's ``run_test_sdpa_decode_single_iter`` writes it."""
    tt_Q, tt_K, tt_V = _host(q), _host(k), _host(v)
    scale = D**-0.5
    if cur_pos_tensor:
        start_indices_tt = ttnn.Tensor(np.asarray(start_indices, np.int32), ttnn.int32)
        return transformer.scaled_dot_product_attention_decode(
            tt_Q, tt_K, tt_V, cur_pos_tensor=start_indices_tt, scale=scale, program_config=program_config,
            compute_kernel_config=COMPUTE, memory_config=ttnn.DRAM_MEMORY_CONFIG, **keywords)
    return transformer.scaled_dot_product_attention_decode(
        tt_Q, tt_K, tt_V, cur_pos=start_indices, scale=scale, program_config=program_config,
        compute_kernel_config=COMPUTE, memory_config=ttnn.DRAM_MEMORY_CONFIG, **keywords)


def _cores():
    return set(last_report().cores_used)


# ------------------------------------------------------------------------------------- the grid

@pytest.mark.parametrize("grid_size", [(8, 6), (8, 4), (8, 2), (8, 1)])
def test_grids_of_ttnn_decode_tests_run_on_that_grid(grid_size):
    """ttnn's decode tests' grids (n150's 8x8 less rows, as on n300 / T3K configs): the program runs on
    cores inside the rectangle, and uses as many as the request's work (64 position tiles, slices of
    at least 4) and the config's ``max_cores_per_head_batch`` (16) allow."""
    s = 2048
    q, k, v = _fa_inputs(1, s)
    start_indices = [s // 2]
    program_config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=grid_size,
                                            q_chunk_size=PADDED_NUM_HEADS, k_chunk_size=128, exp_approx_mode=False)
    out = _decode(q, k, v, start_indices, program_config, cur_pos_tensor=grid_size[1] % 2 == 0)
    cores = _cores()
    assert all(x < grid_size[0] and y < grid_size[1] for x, y in cores), (grid_size, sorted(cores))
    assert len(cores) == min(grid_size[0] * grid_size[1], 16), (grid_size, len(cores))
    assert_close(out, _want(q, k, v, start_indices), f"grid {grid_size}")


def test_sub_core_grids_run_on_exactly_those_cores():
    """``sub_core_grids``: the program's cores are taken from the set, ranges in order, row by row
    (ttnn: ``num_cores_to_corerangeset_in_subcoregrids(..., row_wise=True)``), never outside it."""
    s = 1024
    q, k, v = _fa_inputs(2, s, seed=1)
    sub_core_grids = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(1, 2), ttnn.CoreCoord(3, 3)),
                                        ttnn.CoreRange(ttnn.CoreCoord(6, 5), ttnn.CoreCoord(7, 6))])
    allowed = {(x, y) for y in (2, 3) for x in (1, 2, 3)} | {(x, y) for y in (5, 6) for x in (6, 7)}
    program_config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(5, 2), sub_core_grids=sub_core_grids,
                                            q_chunk_size=PADDED_NUM_HEADS, k_chunk_size=0, exp_approx_mode=False)
    start_indices = [300, 1000]
    out = _decode(q, k, v, start_indices, program_config)
    assert _cores() == allowed  # 2 requests x 5 slices of 32 tiles: all ten cores
    assert_close(out, _want(q, k, v, start_indices), "sub_core_grids")


def test_attention_takes_a_core_set_and_a_rectangle_in_the_same_order():
    """``attention(grid=...)``: a core set that is a rectangle from (0, 0), row by row, plans as that
    rectangle; a sequence of cores is used as given."""
    q, k, v = _fa_inputs(1, 512, seed=2)
    rows = q.reshape(1, 1, 1, NH * D)
    want = attention_reference(rows, k, v, cur_pos=[400])
    first = attention(rows, k, v, cur_pos=[400], grid=(2, 1))
    assert _cores() == {(0, 0), (1, 0)}
    same = attention(rows, k, v, cur_pos=[400], grid=[(0, 0), (1, 0)])
    assert np.array_equal(first, same)
    elsewhere = attention(rows, k, v, cur_pos=[400], grid=[(7, 7), (3, 5)])
    assert _cores() == {(7, 7), (3, 5)}
    assert np.array_equal(first, elsewhere)  # the same slices on other cores: the same bits
    assert_close(first, want, "grid (2, 1)")


@pytest.mark.parametrize("config, words", [
    (dict(compute_with_storage_grid_size=(9, 8)), ["program_config.compute_with_storage_grid_size", "8x8", "9x8"]),
    (dict(compute_with_storage_grid_size=(8, 10)), ["program_config.compute_with_storage_grid_size", "8x10"]),
    (dict(compute_with_storage_grid_size=(2, 1),
          sub_core_grids=ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(7, 0), ttnn.CoreCoord(8, 0))])),
     ["program_config.sub_core_grids", "(8, 0)"]),
    (dict(compute_with_storage_grid_size=(2, 2),
          sub_core_grids=ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(2, 0))])),
     ["program_config.sub_core_grids", "expected 4 cores", "got 3"]),
    (dict(compute_with_storage_grid_size=(8, 8), k_chunk_size=48), ["program_config.k_chunk_size", "got 48"]),
])
def test_what_ttnn_refuses_is_refused_by_name(config, words):
    """A grid the device does not have (the emulated n150 is 8x8), a core set of another size than
    the grid (ttnn: TT_FATAL), a K chunk that is not whole tiles: ValueError naming the field,
    before anything runs."""
    q, k, v = _fa_inputs(1, 128)
    program_config = ttnn.SDPAProgramConfig(q_chunk_size=PADDED_NUM_HEADS, **{"k_chunk_size": 64, **config})
    with pytest.raises(ValueError) as info:
        transformer.scaled_dot_product_attention_decode(q.astype(BF16), k.astype(BF16), v.astype(BF16), cur_pos=[5],
                                                        program_config=program_config)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize("bad, words", [
    (dict(grid=(0, 1)), ["grid", "1 <= x <= 8"]),
    (dict(grid=[(1, 1), (1, 1)]), ["grid", "(1, 1) twice"]),
    (dict(grid=[]), ["grid"]),
    (dict(grid="8x8"), ["grid: expected None, (x, y), a ttnn.CoreCoord", "got '8x8'"]),
    (dict(max_split=0), ["max_split", "1..255"]),
    (dict(split=4, max_split=2), ["split: expected <= 2", "max_split 2"]),
])
def test_attention_refuses_a_bad_grid_or_max_split(bad, words):
    q, k, v = _fa_inputs(1, 128)
    error = TypeError if isinstance(bad.get("grid"), str) else ValueError  # a wrong type, not a wrong value
    with pytest.raises(error) as info:
        attention(q.reshape(1, 1, 1, NH * D), k, v, cur_pos=[100], **bad)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# --------------------------------------------------------------------- cores per (user, KV head)

@pytest.mark.parametrize("max_cores_per_head_batch, cores", [(0, 1), (1, 1), (2, 2), (5, 5)])
def test_max_cores_per_head_batch_bounds_the_split(max_cores_per_head_batch, cores):
    """ttnn's ``max_cores_per_head_batch``: at most that many cores attend one (user, KV head)
    request (0 behaves as 1 in ttnn's factory: ``max(1, cores_per_batch / nkv)``)."""
    s = 1024
    q, k, v = _fa_inputs(1, s, seed=3)
    program_config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=PADDED_NUM_HEADS,
                                            k_chunk_size=0, exp_approx_mode=False,
                                            max_cores_per_head_batch=max_cores_per_head_batch)
    out = _decode(q, k, v, [777], program_config)
    assert len(_cores()) == cores
    assert_close(out, _want(q, k, v, [777]), f"max_cores_per_head_batch {max_cores_per_head_batch}")


def test_k_chunk_size_zero_lets_the_op_choose_its_block():
    """``k_chunk_size=0`` (ttnn: "choose for me"): the op's own block, the same program and bits as
    ``attention()`` with the config's other settings."""
    s = 512
    q, k, v = _fa_inputs(2, s, seed=4)
    program_config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=PADDED_NUM_HEADS,
                                            k_chunk_size=0, exp_approx_mode=False)
    out = _decode(q, k, v, [17, 511], program_config)
    chosen = last_report().program_hash
    direct = attention(q.astype(BF16), k.astype(BF16), v.astype(BF16), cur_pos=[17, 511], q_layout="heads",
                       scale=D**-0.5, max_split=16, compute_kernel_config=COMPUTE)
    assert last_report().program_hash == chosen
    assert np.array_equal(_np(out), np.asarray(direct, np.float32))
    assert_close(out, _want(q, k, v, [17, 511]), "k_chunk_size 0")


def _np(tensor) -> np.ndarray:
    """Values as float32 (a block-float tensor's dequantised values)."""
    from ttnn_flashdecode.op.operation import to_numpy

    if isinstance(tensor, ttnn.Tensor) and tensor.dtype in (ttnn.bfloat8_b, ttnn.bfloat4_b):
        return np.asarray(tensor.to_numpy(), np.float32)
    return np.asarray(to_numpy(tensor), np.float32)


# ---------------------------------------------------------------------------- approximate exp

#: The LLK's approximate exp (Schraudolph; per-datum relative error about -4%..+3%) dominates the
#: error whatever the rest of the config: measured rel-L2 4.2e-2..5.0e-2 at docs/accuracy.md's shape
#: (tests/test_attention_adversarial.py); these smaller calls land near 3e-2.
APPROX_MIN_PCC, APPROX_MAX_REL_L2 = 0.998, 6e-2


def test_exp_approx_mode_selects_the_approximate_exp():
    """``exp_approx_mode``: False is the accurate exp (bit-identical to no program config on the same
    grid and cap); True the LLK's approximate exp, whatever ``math_approx_mode`` says (and None
    leaves it to ``math_approx_mode``)."""
    s = 512
    q, k, v = _fa_inputs(1, s, seed=5)
    want = _want(q, k, v, [450])
    results = {}
    for mode in (False, True, None):
        program_config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=PADDED_NUM_HEADS,
                                                k_chunk_size=128, exp_approx_mode=mode)
        results[mode] = _np(_decode(q, k, v, [450], program_config))
    assert np.array_equal(results[False], results[None])  # None: math_approx_mode False -> accurate
    assert_close(results[False], want, "exp_approx_mode False")
    assert not np.array_equal(results[True], results[False])
    figures = pcc(results[True], want), relative_l2(results[True], want)
    assert figures[0] >= APPROX_MIN_PCC and figures[1] <= APPROX_MAX_REL_L2, figures
    assert figures[1] >= 5e-3, figures  # the approximation is really there: ~6x the accurate exp's error
    approx_compute = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi4, math_approx_mode=True,
                                                      fp32_dest_acc_en=True, packer_l1_acc=False)
    program_config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=PADDED_NUM_HEADS,
                                            k_chunk_size=128)  # exp_approx_mode None: math_approx_mode decides
    follows = transformer.scaled_dot_product_attention_decode(
        _host(q), _host(k), _host(v), cur_pos=[450], scale=D**-0.5, program_config=program_config,
        compute_kernel_config=approx_compute)
    assert np.array_equal(_np(follows), results[True])


# ------------------------------------------------------------------------------ share_cache=True

def test_share_cache_every_user_reads_user_zeros_cache():
    """``share_cache=True``: K and V hold one cache ``[1, nkv, s, d]`` and every user attends to it
    up to its own position (ttnn: K/V batch 1; the golden keeps Q's batch)."""
    s, b = 512, 3
    q, k, v = _fa_inputs(b, s, seed=6, kv_batch=1)
    start_indices = [5, 300, 511]
    program_config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=PADDED_NUM_HEADS,
                                            k_chunk_size=64, exp_approx_mode=False)
    out = _decode(q, k, v, start_indices, program_config, cur_pos_tensor=True, share_cache=True)
    assert tuple(out.shape) == (1, b, NH, D)
    want = _want(q, np.repeat(k, b, axis=0), np.repeat(v, b, axis=0), start_indices)
    assert_close(out, want, "share_cache")
    plain = transformer.scaled_dot_product_attention_decode(q.astype(BF16), k.astype(BF16), v.astype(BF16),
                                                            cur_pos=start_indices, share_cache=True)
    assert_close(plain, want, "share_cache, numpy, no program config")


@pytest.mark.parametrize("share_cache", [False, None])
def test_share_cache_false_or_none_is_the_ordinary_call(share_cache):
    q, k, v = _fa_inputs(2, 128, seed=7)
    out = transformer.scaled_dot_product_attention_decode(q.astype(BF16), k.astype(BF16), v.astype(BF16),
                                                          cur_pos=[3, 100], share_cache=share_cache)
    assert_close(out, _want(q, k, v, [3, 100]), f"share_cache={share_cache}")


def test_share_cache_needs_a_cache_of_batch_one():
    q, k, v = _fa_inputs(2, 128, seed=8)
    with pytest.raises(ValueError, match=r"input_tensor_k: expected batch 1 with share_cache=True"):
        transformer.scaled_dot_product_attention_decode(q.astype(BF16), k.astype(BF16), v.astype(BF16),
                                                        cur_pos=[3, 100], share_cache=True)


# -------------------------------------------------------------------------------- block-float Q

@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("q_dtype", ["bfloat8_b", "bfloat4_b"])
def test_a_block_float_q_is_taken_as_its_bfloat16_values(q_dtype):
    """ttnn's ``all_bfp8`` decode case (MQA: K, V and Q bfloat8_b), and a bfloat4_b Q: Q is read as
    its bfloat16 values (exact) and the output comes back in Q's dtype, as ttnn's op returns it."""
    s = 256
    q, k, v = _fa_inputs(2, s, seed=9)
    dtype = getattr(ttnn, q_dtype)
    tt_q = _host(q, dtype)
    q_values = _np(tt_q)
    program_config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=PADDED_NUM_HEADS,
                                            k_chunk_size=64, exp_approx_mode=False)
    tt_k, tt_v = _host(k, ttnn.bfloat8_b), _host(v, ttnn.bfloat8_b)
    out = transformer.scaled_dot_product_attention_decode(tt_q, tt_k, tt_v, cur_pos=[40, 255], scale=D**-0.5,
                                                          program_config=program_config, compute_kernel_config=COMPUTE,
                                                          memory_config=ttnn.DRAM_MEMORY_CONFIG)
    assert out.dtype == dtype and tuple(out.shape) == (1, 2, NH, D)
    k_values, v_values = (np.asarray(t.to_numpy(), np.float32) for t in (tt_k, tt_v))
    as_bf16 = transformer.scaled_dot_product_attention_decode(
        _host(q_values), tt_k, tt_v, cur_pos=[40, 255], scale=D**-0.5, program_config=program_config,
        compute_kernel_config=COMPUTE)
    assert np.array_equal(_np(out), _np(_host(_np(as_bf16), dtype)))  # the bf16 result, stored as Q's dtype
    assert_close(as_bf16, _want(q_values, k_values, v_values, [40, 255]), f"{q_dtype} Q")


# --------------------------------------------------------------------- nothing ttnn accepts is refused

#: Every field of ``ttnn.SDPAProgramConfig`` away from its default, and the keywords this share
#: covers, in combinations ttnn 0.81's decode op accepts.
ACCEPTED = [
    dict(program_config=dict(compute_with_storage_grid_size=(8, 4), q_chunk_size=64, k_chunk_size=0,
                             exp_approx_mode=True, max_cores_per_head_batch=32, max_k_splits=4,
                             matmul_math_fidelity=ttnn.MathFidelity.HiFi2, segmented_accumulation=True)),
    dict(program_config=dict(compute_with_storage_grid_size=(3, 1), q_chunk_size=32, k_chunk_size=32,
                             exp_approx_mode=False, max_cores_per_head_batch=0,
                             sub_core_grids=ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(5, 7),
                                                                              ttnn.CoreCoord(7, 7))]))),
    dict(program_config=dict(compute_with_storage_grid_size=(1, 1), q_chunk_size=0, k_chunk_size=512)),
    dict(share_cache=True, program_config=dict(compute_with_storage_grid_size=(8, 8), q_chunk_size=32,
                                               k_chunk_size=128, exp_approx_mode=None)),
    dict(share_cache=False),
    dict(q_dtype="bfloat8_b"),
]


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("case", ACCEPTED, ids=lambda case: "-".join(case))
def test_nothing_ttnn_accepts_among_these_is_refused(case):
    s, b = 512, 2
    share = case.get("share_cache")
    q, k, v = _fa_inputs(b, s, seed=10, kv_batch=1 if share else None)
    keywords = {}
    if "program_config" in case:
        keywords["program_config"] = ttnn.SDPAProgramConfig(**case["program_config"])
    if "share_cache" in case:
        keywords["share_cache"] = share
    tt_q = _host(q, getattr(ttnn, case.get("q_dtype", "bfloat16")))
    out = transformer.scaled_dot_product_attention_decode(tt_q, _host(k), _host(v), cur_pos=[100, 511], scale=D**-0.5,
                                                          compute_kernel_config=COMPUTE, **keywords)
    q_values = _np(tt_q)
    kk, vv = (np.repeat(a, b, axis=0) for a in (k, v)) if share else (k, v)
    got, want = _np(out).astype(np.float64), _want(q_values, kk, vv, [100, 511])
    approx = keywords.get("program_config") is not None and case["program_config"].get("exp_approx_mode")
    bf8_out = case.get("q_dtype") is not None
    if approx or bf8_out:  # the approximate exp, or an output stored as bfloat8_b: their own error
        assert pcc(got, want) >= APPROX_MIN_PCC and relative_l2(got, want) <= APPROX_MAX_REL_L2
    else:
        assert_close(got, want, str(case))


# ------------------------------------------------------------------ the device path (mock device)

def test_device_path_takes_a_grid_a_core_set_and_share_cache(mock_device):
    """On a MOCK Wormhole (nothing executes: tt-metal's host pipeline and checks only, no values): an
    8x4 grid, a core set and ``share_cache=True`` (its page table uploaded once per device and batch)
    build descriptors ``ttnn.generic_op`` accepts. (A block-float device Q goes through
    ``ttnn.typecast``, a native ttnn op whose kernels the mock device's stand-in compiler cannot
    build, so it is not tried here.)"""
    s, b = 256, 2
    q, k, v = _fa_inputs(b, s, seed=11, kv_batch=1)

    def on_device(array):
        return ttnn.Tensor(np.ascontiguousarray(array, np.float32), ttnn.bfloat16, layout=ttnn.TILE_LAYOUT,
                           device=mock_device, mem_config=ttnn.DRAM_MEMORY_CONFIG)

    tt_Q, tt_K, tt_V = on_device(q), on_device(k), on_device(v)
    sub = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(2, 1), ttnn.CoreCoord(5, 2))])
    for program_config in (
            ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 4), q_chunk_size=32, k_chunk_size=64,
                                   exp_approx_mode=False),
            ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(4, 2), sub_core_grids=sub, q_chunk_size=32,
                                   k_chunk_size=0, exp_approx_mode=True, max_cores_per_head_batch=2)):
        out = transformer.scaled_dot_product_attention_decode(
            tt_Q, tt_K, tt_V, cur_pos=[5, 200], scale=D**-0.5, program_config=program_config,
            compute_kernel_config=COMPUTE, memory_config=ttnn.DRAM_MEMORY_CONFIG, share_cache=True)
        assert tuple(out.shape) == (1, b, NH, D) and out.storage_type() == ttnn.StorageType.DEVICE
    assert (mock_device.id(), b) in transformer._shared_tables
