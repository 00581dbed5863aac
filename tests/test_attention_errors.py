"""attention() refuses every bad input with a clear error before anything reaches a device."""

import ml_dtypes
import numpy as np
import pytest
import ttnn

from ttnn_flashdecode import attention

from bars import run_quiet

BF16 = ml_dtypes.bfloat16


def _good(batch=2, n_q=8, n_kv=2, head_dim=64, capacity=256):
    q = np.zeros((1, 1, batch, n_q * head_dim), BF16)
    k = np.zeros((batch, n_kv, capacity, head_dim), BF16)
    return q, k, k.copy()


@pytest.mark.parametrize("mutate, error, words", [
    (lambda q, k, v: (q[0], k, v), ValueError, ["q:", "expected shape [1, 1, batch"]),
    (lambda q, k, v: (q, k[0], v[0]), ValueError, ["k:", "expected shape"]),
    (lambda q, k, v: (q, k, v[:, :, :128]), ValueError, ["v:", "expected the shape of k"]),
    (lambda q, k, v: (q[:, :, :1], k, v), ValueError, ["q:", "expected 2 rows"]),
    (lambda q, k, v: (q[..., :-3], k, v), ValueError, ["multiple of head_dim"]),
    (lambda q, k, v: (np.zeros((1, 1, 2, 3 * 64), BF16), k, v), ValueError, ["GQA ratio", "multiple of n_kv_heads"]),
    (lambda q, k, v: (np.zeros((1, 1, 2, 66 * 64), BF16), k, v), ValueError, ["GQA ratio", "at most 32", "multiple of 32"]),
    (lambda q, k, v: (q.astype(np.float64), k, v), ValueError, ["q:", "float32 or bfloat16", "float64"]),
    (lambda q, k, v: (q, k.astype(np.int32), v), ValueError, ["k:", "int32"]),
    (lambda q, k, v: (q.tolist(), k, v), TypeError, ["q:", "list"]),
])
def test_attention_refuses_bad_tensors(mutate, error, words):
    q, k, v = mutate(*_good())
    with pytest.raises(error) as info:
        attention(q, k, v, cur_pos=[0, 0])
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("cur_pos, error, words", [
    ([0], ValueError, ["cur_pos", "expected 2 positions", "got 1"]),
    ([0, -2], ValueError, ["cur_pos[1]", "0 <= position < capacity 256", "-1 for an idle slot", "got -2"]),
    ([0, 256], ValueError, ["cur_pos[1]", "got 256"]),
    ([0, 1.5], TypeError, ["cur_pos[1]", "expected an int"]),
    (3, TypeError, ["cur_pos", "sequence"]),
])
def test_attention_refuses_bad_positions(cur_pos, error, words):
    with pytest.raises(error) as info:
        attention(*_good(), cur_pos=cur_pos)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("cur_pos", [[95, 0], [5, 0]])
def test_attention_refuses_a_cache_whose_last_window_does_not_fit(cur_pos):
    """3 position tiles: no double block of any size tiles them, so the last position could not be
    attended; refused on the first call, not only once a user gets there."""
    q, k, v = _good(capacity=96)
    with pytest.raises(ValueError, match=r"k: expected a KV cache of whole double blocks .* capacity 96 positions"):
        attention(q, k, v, cur_pos=cur_pos)


def test_attention_accepts_any_cache_of_whole_double_blocks():
    q, k, v = _good(capacity=100)  # 4 position tiles: double blocks of 2 tile them
    out = run_quiet(attention, q, k, v, cur_pos=[99, 3]).astype(np.float64)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("kwargs, words", [
    (dict(block_tiles=0), ["block_tiles", "positive"]),
    (dict(block_tiles=10_000), ["block_tiles", "expected <="]),
    (dict(scale=float("inf")), ["scale", "finite"]),
    (dict(backend="gpu"), ["backend", "gpu"]),
    (dict(backend="device"), ["backend", "device tensors"]),
    (dict(memory_config=ttnn.L1_MEMORY_CONFIG), ["memory_config"]),
])
def test_attention_refuses_bad_options(kwargs, words):
    with pytest.raises(ValueError) as info:
        attention(*_good(), cur_pos=[0, 0], **kwargs)
    for word in words:
        assert word in str(info.value)


def test_attention_refuses_head_dim_past_576():
    q, k, v = _good(n_q=2, n_kv=2, head_dim=608, capacity=64)
    with pytest.raises(ValueError, match="head_dim: expected <= 576, got 608"):
        attention(q, k, v, cur_pos=[0, 0])


@pytest.mark.parametrize("kwargs, words", [
    (dict(scale="0.1"), "scale: expected None or a number, got str"),
    (dict(scale=True), "scale: expected None or a number, got bool"),
    (dict(sliding_window_size=2.5), "sliding_window_size: expected None or an int, got float"),
    (dict(sliding_window_size=True), "sliding_window_size: expected None or an int, got bool"),
    (dict(rows=4.0), "rows: expected None or an int"),
    (dict(split=2.0), "split: expected None or an int, got float"),
    (dict(max_split=1.5), "max_split: expected None or an int, got float"),
    (dict(block_tiles=2.0), "block_tiles: expected None or an int, got float"),
    (dict(grid=(1.0, 1.0)), "grid: expected None, (x, y)"),
    (dict(backend=None), "backend: expected a str, one of"),
    (dict(q_layout=None), "q_layout: expected a str, one of"),
    (dict(memory_config="L1"), "memory_config: expected None or a ttnn.MemoryConfig, got str 'L1'"),
    (dict(is_causal=0), "is_causal: expected a bool, got int"),
    (dict(batch_invariant="yes"), "batch_invariant: expected a bool, got str"),
])
def test_attention_wrong_types_are_type_errors(kwargs, words):
    with pytest.raises(TypeError) as info:
        attention(*_good(), cur_pos=[0, 0], **kwargs)
    assert words in str(info.value)


def test_attention_takes_numpy_bools():
    q, k, v = _good()
    out, lse = run_quiet(attention, q, k, v, cur_pos=[3, 9], is_causal=np.bool_(True), batch_invariant=np.bool_(False),
                         return_lse=np.bool_(True))
    assert lse.shape == (1, 1, 2, 8) and np.isfinite(lse).all()


def test_attention_refuses_block_tiles_that_do_not_fit_l1():
    q, k, v = _good(n_q=2, n_kv=1, head_dim=512, capacity=64 * 32)
    with pytest.raises(ValueError, match=r"block_tiles: expected <= \d+ \(the largest that fits wormhole_b0 L1"):
        attention(q, k, v, cur_pos=[0, 0], block_tiles=32)


def test_attention_refuses_a_bad_compute_config():
    with pytest.raises(TypeError, match="compute_kernel_config"):
        attention(*_good(), cur_pos=[0, 0], compute_kernel_config="HiFi4")


# ------------------------------------------------------------------ CHUNK and ROWS arguments

@pytest.mark.parametrize("rows_of_q, kwargs, error, words", [
    (2, dict(), TypeError, ["cur_pos=", "chunk_start="]),  # neither
    (2, dict(cur_pos=[0, 0], chunk_start=0), ValueError, ["cur_pos, chunk_start", "got both"]),
    (2, dict(chunk_start=0, rows=1), ValueError, ["rows", "chunk_start"]),
    (2, dict(cur_pos=[0, 0], rows=0), ValueError, ["rows", "positive int"]),
    (18, dict(cur_pos=[8, 8], rows=9), ValueError, ["rows", "<= 32", "9 * 4 = 36"]),  # GQA ratio 4
    (6, dict(cur_pos=[2, 2], rows=2), ValueError, ["q:", "expected 4 rows", "rows=2", "got 6"]),
    (4, dict(cur_pos=[0, 5], rows=2), ValueError, ["cur_pos[0]", ">= rows - 1 = 1", "got 0"]),
    (3, dict(chunk_start=0), ValueError, ["q:", "batch x C rows", "got 3"]),
    (66, dict(chunk_start=0), ValueError, ["q:", "batch x C rows", "got 66"]),  # C = 33
    (4, dict(chunk_start=[0]), ValueError, ["chunk_start", "expected 2 starts", "got 1"]),
    (4, dict(chunk_start=[0, 255]), ValueError, ["chunk_start[1]", "capacity - C = 254", "got 255"]),
    (4, dict(chunk_start=[0, -1]), ValueError, ["chunk_start[1]", "got -1"]),
    (4, dict(chunk_start=[0, 1.0]), TypeError, ["chunk_start[1]", "expected an int"]),
    (4, dict(chunk_start="0"), TypeError, ["chunk_start", "str"]),
])
def test_attention_refuses_bad_chunk_and_rows_arguments(rows_of_q, kwargs, error, words):
    q, k, v = _good()  # batch 2, GQA ratio 4, capacity 256
    q = np.zeros((1, 1, rows_of_q, q.shape[-1]), BF16)
    with pytest.raises(error) as info:
        attention(q, k, v, **kwargs)
    for word in words:
        assert word in str(info.value), str(info.value)


@pytest.mark.parametrize("chunk_start", [[90, 0], [0, 0]])
def test_attention_refuses_a_chunk_on_a_cache_whose_last_window_does_not_fit(chunk_start):
    q, k, v = _good(capacity=96)
    with pytest.raises(ValueError, match=r"k: expected a KV cache of whole double blocks"):
        attention(np.zeros((1, 1, 4, q.shape[-1]), BF16), k, v, chunk_start=chunk_start)


def test_attention_refuses_integer_host_tensors():
    q, k, v = _good()
    as_int = ttnn.Tensor([0] * q.size, list(q.shape), ttnn.int32, ttnn.ROW_MAJOR_LAYOUT)
    with pytest.raises(ValueError, match="q: expected a bfloat16 or float32 ttnn.Tensor"):
        attention(as_int, k, v, cur_pos=[0, 0])


def test_host_tensors_and_numpy_arrays_mix_and_the_output_follows_q():
    q, k, v = _good()
    host_k = ttnn.Tensor(k.astype(np.float32).flatten().tolist(), list(k.shape), ttnn.float32, ttnn.ROW_MAJOR_LAYOUT)
    mixed = run_quiet(attention, q, host_k, v, cur_pos=[0, 3])
    assert isinstance(mixed, np.ndarray) and np.array_equal(mixed, run_quiet(attention, q, k, v, cur_pos=[0, 3]))


def test_attention_refuses_device_tensors_mixed_with_host_ones(mock_device):
    q, k, v = _good()
    device_k = ttnn.Tensor(k.astype(np.float32), ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mock_device,
                           mem_config=ttnn.DRAM_MEMORY_CONFIG)
    with pytest.raises(ValueError, match="expected device tensors for all three or none"):
        attention(q, device_k, v, cur_pos=[0, 0])


@pytest.mark.parametrize("scale", [0, -0.5])
def test_attention_refuses_non_positive_scale_like_its_reference(scale):
    with pytest.raises(ValueError, match="scale: expected a finite positive number"):
        attention(*_good(), cur_pos=[0, 0], scale=scale)


def test_attention_takes_chunk_starts_as_a_numpy_array():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 1, 2 * 3, 8 * 64), dtype=np.float32)
    k = rng.standard_normal((2, 2, 256, 64), dtype=np.float32)
    v = rng.standard_normal((2, 2, 256, 64), dtype=np.float32)
    out = run_quiet(attention, q, k, v, chunk_start=np.array([3, 70]))
    want = run_quiet(attention, q, k, v, chunk_start=[3, 70])
    np.testing.assert_array_equal(out, want)


def test_capacity_error_does_not_suggest_a_smaller_block_when_it_is_already_one():
    q, k, v = _good(capacity=96)
    with pytest.raises(ValueError) as info:
        attention(q, k, v, cur_pos=[5, 0])
    assert "smaller block_tiles" not in str(info.value) and "multiple of 64 positions" in str(info.value)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(cur_pos=[0, 0], cur_pos_tensor=np.zeros(2, np.int32)), ValueError, ["cur_pos, cur_pos_tensor", "got both"]),
    (dict(cur_pos_tensor=np.zeros(2, np.int32), chunk_start=0), ValueError, ["chunk_start", "cur_pos_tensor"]),
    (dict(cur_pos_tensor=np.zeros(3, np.int32)), ValueError, ["cur_pos_tensor", "expected shape [2] or [2, 1] (one position per user)", "got [3]"]),
    (dict(cur_pos_tensor=np.zeros(2, np.float32)), TypeError, ["cur_pos_tensor", "int32 array", "float32"]),
    (dict(cur_pos_tensor=np.array([0, 256], np.int32)), ValueError, ["cur_pos_tensor[1]", "got 256"]),
    (dict(cur_pos_tensor=np.array([-3, 0], np.int32)), ValueError, ["cur_pos_tensor[0]", "idle", "got -3"]),
    (dict(cur_pos_tensor=[0, 0]), TypeError, ["cur_pos_tensor", "ttnn.Tensor or a numpy int32 array", "list"]),
    (dict(cur_pos_tensor=np.zeros((1, 2), np.int32)), ValueError, ["cur_pos_tensor", "expected shape [2]", "[1, 2]"]),
    (dict(cur_pos_tensor=np.zeros(2, np.int64)), TypeError, ["cur_pos_tensor", "int32", "int64"]),
])
def test_attention_refuses_bad_cur_pos_tensor(kwargs, error, words):
    with pytest.raises(error) as info:
        attention(*_good(), **kwargs)
    for word in words:
        assert word in str(info.value)


def test_attention_refuses_a_host_cur_pos_tensor_of_the_wrong_dtype_or_layout():
    import ttnn

    floats = ttnn.Tensor(np.zeros(2, np.float32), ttnn.float32, layout=ttnn.ROW_MAJOR_LAYOUT)
    with pytest.raises(TypeError, match="cur_pos_tensor: expected dtype int32"):
        attention(*_good(), cur_pos_tensor=floats)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(a.shape, dtype=np.float32).astype(BF16) for a in _good())
    ok = ttnn.Tensor(np.array([3, 200], np.int32), ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT)
    listed = run_quiet(attention, q, k, v, cur_pos=[3, 200])
    assert np.abs(listed.astype(np.float32)).sum() > 0
    assert np.array_equal(run_quiet(attention, q, k, v, cur_pos_tensor=ok), listed)  # the same path, the same bits


def test_rows_refusal_names_cur_pos_tensor():
    q, k, v = _good()
    with pytest.raises(ValueError, match=r"cur_pos_tensor\[1\]: expected >= rows - 1 = 2"):
        attention(np.repeat(q, 3, axis=2), k, v, cur_pos_tensor=np.array([3, 1], np.int32), rows=3)
