"""Mirror of tt-metal's nightly ``tests/ttnn/nightly/unit_tests/operations/sdpa/test_sdpa_decode_cache.py``
(stored version at commit 1cb37a01), through our drop-in on the emulator.

The peer's tests are program-cache tests: two calls that differ in one attribute (mask dtype,
share_cache, the K/V batch relation, cur_pos values, Q's padded shape, cur_pos_tensor's rank) must
compile two programs. ttnn's program cache is a device feature, so the mirror keeps the peer's two
calls and checks what a wrong cached program would break: each call's output against our float64
reference, with the file's PCC bar (0.97) and the rel-L2 bar of the call's compute config (HiFi2,
bf16 DST: mirror.py); the peer only checks PCC in the mask and K/V-batch tests. Poison twins (NaN
/ +-Inf past each user's position) for the causal tests.

Not mirrored: ``test_mla_head_dim_v_change_program_cache_distinct`` (it calls
``flash_multi_latent_attention_decode``, not a decode call this project replaces); the
``num_program_cache_entries`` assertions. ``share_cache=True`` on a batch-1 K/V: every user reads
the one cache (ttnn's meaning; b=1 here, so the output equals share_cache=False's).

Formerly refused, now run (issue 20): a rank-2 ``cur_pos_tensor`` ``[b, 1]``; a host Q whose
heads are padded to 64 rows; the bfloat8_b mask of ``test_mask_dtype_bf16_then_bfp8``. Scaled down: none; all in the default run.
"""

from __future__ import annotations

import numpy as np
import pytest
import ttnn

from mirror import FINFO_MIN, check, compute_config, fa_rand, get_chunk_size, host, poison_outside, positions
from mirror import program_config, reference, rel_l2_bar, stored
from ttnn_flashdecode.transformer import scaled_dot_product_attention_decode

BF16, BFP8 = ttnn.bfloat16, ttnn.bfloat8_b
POISON = [pytest.param(False, id="clean"), pytest.param(True, id="poison")]
COMPUTE = compute_config("HiFi2")
BARS = dict(min_pcc=0.97, max_rel_l2=rel_l2_bar(COMPUTE))


def _config(k_chunk_size, grid=(8, 4), **keywords):
    return program_config(grid, 32, k_chunk_size, exp_approx_mode=False, **keywords)


def _causal(b, nh, nkv, s, d, cur_pos, *, poison, seed, share_cache=None, label, q=None, tt_q=None,
            cur_pos_tensor=None, grid=(8, 4)):
    rng = np.random.default_rng(seed)
    k, v = fa_rand(rng, b, nkv, s, d), fa_rand(rng, b, nkv, s, d)
    q = fa_rand(rng, 1, b, nh, d) if q is None else q
    want = reference(stored(q, BF16), stored(k, BFP8), stored(v, BFP8), first=[0] * b, last=cur_pos, scale=d ** -0.5)
    if poison:
        for u, p in enumerate(cur_pos):
            poison_outside(k, u, 0, p, u)
            poison_outside(v, u, 0, p, u + 1)
    where = dict(cur_pos=cur_pos) if cur_pos_tensor is None else dict(cur_pos_tensor=cur_pos_tensor)
    extra = {} if share_cache is None else dict(share_cache=share_cache, is_causal=True)
    out = scaled_dot_product_attention_decode(host(q) if tt_q is None else tt_q, host(k, BFP8), host(v, BFP8), **where,
                                              scale=d ** -0.5, program_config=_config(get_chunk_size(max(cur_pos) + 1, s),
                                                                                      grid),
                                              compute_kernel_config=COMPUTE, memory_config=ttnn.DRAM_MEMORY_CONFIG,
                                              **extra)
    return check(out, want, **BARS, label=label)


def _non_causal(b, nh, nkv, s, d, mask_dtype, seed):
    rng = np.random.default_rng(seed)
    k, v, q = fa_rand(rng, b, nkv, s, d), fa_rand(rng, b, nkv, s, d), fa_rand(rng, 1, b, nh, d)
    mask = ((rng.random((b, nh, 1, s)) < 0.25) * FINFO_MIN).transpose(0, 2, 1, 3)
    want = reference(stored(q, BF16), stored(k, BFP8), stored(v, BFP8), first=[0] * b, last=[s - 1] * b,
                     scale=d ** -0.5, mask=stored(mask, mask_dtype)[:, 0])
    out = scaled_dot_product_attention_decode(host(q), host(k, BFP8), host(v, BFP8), is_causal=False,
                                              attn_mask=host(mask, mask_dtype), scale=d ** -0.5,
                                              program_config=_config(get_chunk_size(s // 4 + 1, s)),
                                              compute_kernel_config=COMPUTE, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    return check(out, want, **BARS, label=f"non-causal b={b} nkv={nkv} mask {mask_dtype}")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("mask_dtype", [BF16, BFP8], ids=["bf16_mask", "bfp8_mask"])
def test_mask_dtype_bf16_then_bfp8(mask_dtype):
    _non_causal(2, 8, 1, 1024, 64, mask_dtype, seed=20250322)


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
def test_share_cache_false_then_true_program_cache_distinct(poison):
    for share_cache in (False, True):
        _causal(1, 8, 1, 512, 64, [127], poison=poison, seed=42, share_cache=share_cache,
                label=f"share_cache={share_cache}")


@pytest.mark.usefixtures("mock_cluster")
def test_share_cache_nullopt_bkv_relation_change():
    _non_causal(8, 8, 8, 256, 64, BF16, seed=20250325)
    _non_causal(8, 8, 1, 256, 64, BF16, seed=20250326)


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
def test_cur_pos_list_values_change_program_cache_distinct(poison):
    for cur_pos in ([10, 20], [300, 310]):
        _causal(2, 8, 1, 512, 64, cur_pos, poison=poison, seed=43, label=f"cur_pos={cur_pos}")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
@pytest.mark.parametrize("padded_heads", [32, 64])
def test_q_shard_height_diff_same_logical_program_cache_distinct(padded_heads, poison):
    """Q ``[1, 1, 8, 64]`` with its heads padded to 32 rows, then to 64 (``ttnn.reshape(..., padded_shape=)``)."""
    b, nh, d = 1, 8, 64
    q = fa_rand(np.random.default_rng(46), 1, b, nh, d)
    padded = np.zeros((1, b, padded_heads, d), np.float32)
    padded[:, :, :nh] = q
    tt_q = ttnn.reshape(host(padded), ttnn.Shape((1, b, nh, d)), ttnn.Shape((1, b, padded_heads, d)))
    _causal(b, nh, 1, 512, d, [127], poison=poison, seed=47, q=q, tt_q=tt_q, label=f"Q padded to {padded_heads}")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
@pytest.mark.parametrize("rank", [1, 2])
def test_cur_pos_tensor_rank1_then_rank2_same_dram_same_qkv_program_cache(rank, poison):
    b, s = 2, 64
    start = [min(s // 4 + i, s - 1) for i in range(b)]
    values = np.asarray(start, np.int32).reshape((b,) if rank == 1 else (b, 1))
    tensor = ttnn.Tensor(values, ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT)
    _causal(b, 4, 1, s, 64, start, poison=poison, seed=204, cur_pos_tensor=tensor, grid=(4, 2),
            label=f"cur_pos_tensor rank {rank}")
