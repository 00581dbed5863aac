"""The drop-in for ttnn's decode call, in a tt-transformers-style decode step (emulator).

The step: fused QKV projection of the token's hidden state, split into Q heads ``[1, b, nh, dh]``
and the new K/V rows (what ``nlp_create_qkv_heads_decode`` gives), cache update at each user's
position, attention through ``ttnn_flashdecode.transformer.scaled_dot_product_attention_decode``
(the call tt-transformers makes, swapped), heads concatenated. Compared with float64 on the same
cache; bar as tests/test_attention.py (PCC >= 0.9999, rel-L2 <= 1e-2 on bf16 inputs).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import ttnn

from ttnn_flashdecode import transformer
from ttnn_flashdecode.operation import to_numpy
from ttnn_flashdecode.reference import attention_reference, pcc, relative_l2

B, NQ, NKV, D, S, HIDDEN = 3, 8, 2, 64, 256, 128
BF16 = ml_dtypes.bfloat16


def _step(rng, k_cache, v_cache, cur_pos, **kwargs):
    x = rng.standard_normal((1, 1, B, HIDDEN), dtype=np.float32)
    wqkv = rng.standard_normal((HIDDEN, (NQ + 2 * NKV) * D), dtype=np.float32) / np.sqrt(HIDDEN)
    qkv = (x @ wqkv).reshape(B, NQ + 2 * NKV, D)
    q = qkv[:, :NQ].reshape(1, B, NQ, D).astype(BF16)
    for user, position in enumerate(cur_pos):
        if position >= 0:
            k_cache[user, :, position] = qkv[user, NQ:NQ + NKV].astype(BF16)
            v_cache[user, :, position] = qkv[user, NQ + NKV:].astype(BF16)
    attn = transformer.scaled_dot_product_attention_decode(q, k_cache, v_cache, cur_pos=cur_pos, **kwargs)
    concat = np.asarray(attn, dtype=np.float64).reshape(1, 1, B, NQ * D)  # nlp_concat_heads_decode
    want = attention_reference(q.reshape(1, 1, B, NQ * D), k_cache, v_cache, cur_pos=cur_pos, scale=kwargs.get("scale"))
    return concat, want


def _cache(rng):
    return (rng.standard_normal((B, NKV, S, D), dtype=np.float32).astype(BF16) for _ in range(2))


@pytest.mark.parametrize("kwargs", [{}, {"scale": 0.2}, {"program_config": "k_chunk_64"}])
def test_decode_step_with_the_drop_in_matches_float64(kwargs):
    rng = np.random.default_rng(4)
    if kwargs.get("program_config") == "k_chunk_64":
        kwargs = {"program_config": ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(8, 8),
                                                           q_chunk_size=32, k_chunk_size=64)}
    k_cache, v_cache = _cache(rng)
    for cur_pos in ([5, 130, -1], [6, 131, 0]):  # two tokens; the idle slot starts on the second
        got, want = _step(rng, k_cache, v_cache, cur_pos, **kwargs)
        idle = [u for u, p in enumerate(cur_pos) if p < 0]
        live = [u for u, p in enumerate(cur_pos) if p >= 0]
        assert not got[0, 0, idle].any()
        figures = pcc(got[0, 0, live], want[0, 0, live]), relative_l2(got[0, 0, live], want[0, 0, live])
        assert figures[0] >= 0.9999 and figures[1] <= 1e-2, (cur_pos, figures)


@pytest.mark.parametrize("kwargs, words", [
    (dict(attn_mask=np.zeros(1)), ["attn_mask"]),
    (dict(is_causal=False), ["is_causal"]),
    (dict(sliding_window_size=128), ["sliding_window_size"]),
    (dict(attention_sink=np.zeros(1)), ["attention_sink"]),
    (dict(share_cache=True), ["share_cache"]),
    (dict(program_config="grid 4x4"), ["compute_with_storage_grid_size", "4x4"]),
    (dict(program_config="max_k_splits 4"), ["program_config.max_k_splits"]),
])
def test_unsupported_keywords_are_refused_by_name(kwargs, words):
    if kwargs.get("program_config") == "grid 4x4":
        kwargs = {"program_config": ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(4, 4),
                                                           q_chunk_size=32, k_chunk_size=64)}
    elif kwargs.get("program_config") == "max_k_splits 4":
        kwargs = {"program_config": ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(8, 8),
                                                           q_chunk_size=32, k_chunk_size=64, max_k_splits=4)}
    rng = np.random.default_rng(0)
    k_cache, v_cache = _cache(rng)
    q = np.zeros((1, B, NQ, D), BF16)
    with pytest.raises(NotImplementedError) as info:
        transformer.scaled_dot_product_attention_decode(q, k_cache, v_cache, cur_pos=[1, 2, 3], **kwargs)
    for word in words:
        assert word in str(info.value)


def test_bad_k_chunk_size_and_q_shape_are_refused():
    rng = np.random.default_rng(0)
    k_cache, v_cache = _cache(rng)
    config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(8, 8), q_chunk_size=32, k_chunk_size=48)
    with pytest.raises(ValueError, match="k_chunk_size: expected a positive multiple of 32"):
        transformer.scaled_dot_product_attention_decode(np.zeros((1, B, NQ, D), BF16), k_cache, v_cache,
                                                        cur_pos=[1, 2, 3], program_config=config)
    with pytest.raises(ValueError, match=r"expected shape \[1, b, nh, dh\]"):
        transformer.scaled_dot_product_attention_decode(np.zeros((B, NQ, D), BF16), k_cache, v_cache, cur_pos=[1, 2, 3])


def test_host_ttnn_tensors_and_a_positions_tensor_go_through():
    rng = np.random.default_rng(9)
    k_cache, v_cache = _cache(rng)
    q = rng.standard_normal((1, B, NQ, D), dtype=np.float32).astype(BF16)

    def host(array, dtype=ttnn.bfloat16):
        return ttnn.Tensor(np.asarray(array, np.float32 if dtype == ttnn.bfloat16 else np.int32), dtype,
                           layout=ttnn.ROW_MAJOR_LAYOUT)

    positions = host([40, -1, 255], ttnn.int32)
    out = transformer.scaled_dot_product_attention_decode(host(q), host(k_cache), host(v_cache), cur_pos_tensor=positions)
    assert isinstance(out, ttnn.Tensor) and tuple(out.shape) == (1, B, NQ, D)
    same = transformer.scaled_dot_product_attention_decode(q, k_cache, v_cache, cur_pos=[40, -1, 255])
    assert np.array_equal(to_numpy(out), np.asarray(same, np.float32))
    assert np.abs(np.asarray(same, np.float32)).sum() > 0
