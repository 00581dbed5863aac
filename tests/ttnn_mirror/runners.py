"""The mirror's counterparts of tt-metal's ``sdpa_test_utils.py`` runners, written for our drop-ins on
the emulator: ``run_single_iter`` (``run_test_sdpa_decode_single_iter``), ``run_paged``
(``run_test_sdpa_decode_paged_attention``'s position sweep), ``run_paged_single_iter``
(``run_test_sdpa_decode_paged_attention_single_iter``). Same shapes, dtypes, positions, k_chunk rule,
program and compute configs as the peer's; our float64 reference and bars (mirror.py)."""

from __future__ import annotations

import numpy as np
import ttnn

from mirror import (FINFO_MIN, bf16_dst_score_floor, check, compute_config, fa_rand, get_chunk_size, height_sharded, host,
                    host_sharded, nearest_n, nearest_pow_2,
                    paged_pcc, poison_outside, positions, program_config, reference, rel_l2_bar, single_iter_pcc,
                    stored, to_paged)
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode, scaled_dot_product_attention_decode


def _window_first(p, window):
    return max(0, p + 1 - window) if window else 0


def _rel_l2_bar(compute, want, *reference_args, **reference_keywords) -> float:
    """The call's rel-L2 bar: with a bf16 DST, the config's plus the bf16-DST score floor of these
    inputs (mirror.py's docstring); with fp32 DST the config's alone."""
    if compute.fp32_dest_acc_en:
        return rel_l2_bar(compute)
    return rel_l2_bar(compute, bf16_dst_score_floor(want, *reference_args, **reference_keywords))


def run_single_iter(b, nh, nkv, s, d, dtype, grid, q_dtype=ttnn.bfloat16, cur_pos_tensor=False, *, start_indices=None,
                    causal=True, sub_core_grids=None, sliding_window_size=None, poison=False, q_layout=ttnn.TILE_LAYOUT,
                    mask_dtype=ttnn.bfloat4_b, seed=1234, sharded_in=False, sharded_out=False, label=""):
    """One decode call as ``run_test_sdpa_decode_single_iter`` makes it; returns (pcc, rel-L2).
    ``sharded_in`` / ``sharded_out``: Q / the output L1 height-sharded (:func:`mirror.height_sharded`),
    honoured by the emulator (Q's shards read from, the output's written to, the cores' L1)."""
    rng = np.random.default_rng(seed)
    padded_num_heads = nearest_pow_2(nearest_n(nh, 32))
    k, v = fa_rand(rng, b, nkv, s, d), fa_rand(rng, b, nkv, s, d)
    start = [s // 2] * b if start_indices is None else list(start_indices)
    scale = d ** -0.5
    config = program_config(grid, padded_num_heads, get_chunk_size(max(start) + 1, s), exp_approx_mode=False,
                            sub_core_grids=sub_core_grids)
    compute = compute_config("HiFi2")
    q = fa_rand(rng, 1, b, nh, d)
    upto = min(s, nearest_n(max(start) + 1, 32)) if causal else s  # the reference reads no further
    want_k, want_v = stored(k[:, :, :upto], dtype), stored(v[:, :, :upto], dtype)
    mask = None
    if causal:
        first = [_window_first(p, sliding_window_size) for p in start]
        last = start
        if poison:
            for u, p in enumerate(start):
                if p >= 0:
                    poison_outside(k, u, first[u], p, u)
                    poison_outside(v, u, first[u], p, u + 1)
    else:
        first, last = [0] * b, [s - 1] * b
        mask = (rng.random((b, nh, 1, s)) < 0.25) * FINFO_MIN
        mask = mask.transpose(0, 2, 1, 3)  # the peer's attn_mask.transpose(1, 2): [b, 1, nh, s]
    ref_args = (stored(q, q_dtype), want_k, want_v)
    ref_keywords = dict(first=first, last=last, scale=scale, mask=None if mask is None else stored(mask, mask_dtype)[:, 0])
    want = reference(*ref_args, **ref_keywords)
    sharded = height_sharded(b, padded_num_heads, d)
    tt_q = host_sharded(q, q_dtype, sharded) if sharded_in else host(q, q_dtype, layout=q_layout)
    tt_k, tt_v = host(k, dtype), host(v, dtype)
    keywords = dict(scale=scale, program_config=config, compute_kernel_config=compute,
                    memory_config=sharded if sharded_out else ttnn.DRAM_MEMORY_CONFIG)
    if not causal:
        out = scaled_dot_product_attention_decode(tt_q, tt_k, tt_v, is_causal=False,
                                                  attn_mask=host(mask, mask_dtype), **keywords)
    elif cur_pos_tensor:
        out = scaled_dot_product_attention_decode(tt_q, tt_k, tt_v, cur_pos_tensor=positions(start),
                                                  sliding_window_size=sliding_window_size, **keywords)
    else:
        out = scaled_dot_product_attention_decode(tt_q, tt_k, tt_v, cur_pos=start,
                                                  sliding_window_size=sliding_window_size, **keywords)
    assert list(out.shape) == [1, b, nh, d], f"{label}: output shape {list(out.shape)}"
    live = [u for u, p in enumerate(start) if p >= 0]
    return check(out, want, min_pcc=single_iter_pcc(grid, b, q_dtype, dtype),
                 max_rel_l2=_rel_l2_bar(compute, want, *ref_args, **ref_keywords), label=f"{label} pos={start[:4]}",
                 users=live)


def paged_sweep_positions(s, b):
    """The peer's sweep: max_start_idx 0, 31, 62, ... (+31 below 4096, +3001 beyond) while < s."""
    out, p = [], 0
    while p < s:
        out.append(p)
        p += 31 if p < 4096 else 3001
    return out


def run_paged(b, nh, nkv, s, d, kv_dtype, grid, q_dtype, cur_pos_tensor, block_size, *, sliding_window_size=None,
              sweep=None, poison=False, non_causal=False, seed=213919, label=""):
    """``run_test_sdpa_decode_paged_attention``: a shuffled paged cache, then one call per max start
    index of ``sweep`` (default: the peer's whole sweep), users spread by ``linspace(max(p - b, 0),
    p, b)``; ``non_causal``: the peer's last iteration instead (bernoulli mask, bfloat4_b)."""
    rng = np.random.default_rng(seed)
    k, v = fa_rand(rng, b, nkv, s, d), fa_rand(rng, b, nkv, s, d)
    want_k, want_v = stored(k, kv_dtype), stored(v, kv_dtype)
    padded_num_heads = nearest_pow_2(nearest_n(nh, 32))
    compute = compute_config("HiFi4")
    scale = d ** -0.5
    min_pcc = paged_pcc(grid, b, q_dtype, kv_dtype)
    sweep = paged_sweep_positions(s, b) if sweep is None else sweep
    figures = []
    for p in sweep:
        start = np.linspace(max(p - b, 0), p, b, dtype=np.int32).tolist()
        config = program_config(grid, padded_num_heads, get_chunk_size(p + 1, s), exp_approx_mode=False)
        q = fa_rand(rng, 1, b, nh, d)
        kk, vv = k, v
        if non_causal:
            first, last = [0] * b, [s - 1] * b
            mask = ((rng.random((b, nh, 1, s)) < 0.25) * FINFO_MIN).transpose(0, 2, 1, 3)
        else:
            first = [_window_first(x, sliding_window_size) for x in start]
            last, mask = start, None
            if poison:
                kk, vv = k.copy(), v.copy()
                for u, x in enumerate(start):
                    poison_outside(kk, u, first[u], x, u)
                    poison_outside(vv, u, first[u], x, u + 2)
        ref_args = (stored(q, q_dtype), want_k, want_v)
        ref_keywords = dict(first=first, last=last, scale=scale,
                            mask=None if mask is None else stored(mask, ttnn.bfloat4_b)[:, 0])
        want = reference(*ref_args, **ref_keywords)
        pages_k, table = to_paged(kk, block_size, np.random.default_rng(seed + 1))
        pages_v, _ = to_paged(vv, block_size, np.random.default_rng(seed + 1))
        keywords = dict(scale=scale, program_config=config, compute_kernel_config=compute,
                        memory_config=ttnn.DRAM_MEMORY_CONFIG)
        tt_page_table = ttnn.Tensor(table, ttnn.int32)
        if non_causal:
            out = paged_scaled_dot_product_attention_decode(host(q, q_dtype), host(pages_k, kv_dtype),
                                                            host(pages_v, kv_dtype), tt_page_table, is_causal=False,
                                                            attn_mask=host(mask, ttnn.bfloat4_b), **keywords)
        else:
            out = paged_scaled_dot_product_attention_decode(host(q, q_dtype), host(pages_k, kv_dtype),
                                                            host(pages_v, kv_dtype), tt_page_table,
                                                            cur_pos_tensor=positions(start),
                                                            sliding_window_size=sliding_window_size, **keywords)
        figures.append(check(out, want, min_pcc=min_pcc, max_rel_l2=_rel_l2_bar(compute, want, *ref_args, **ref_keywords),
                             label=f"{label} max_start={p}"))
    return figures


def run_paged_single_iter(b, nh, nkv, s, d, kv_dtype, grid, q_dtype, cur_pos, block_size, q_chunk_size, k_chunk_size,
                          *, poison=False, seed=1234, label=""):
    """``run_test_sdpa_decode_paged_attention_single_iter``: every user at ``cur_pos``, PCC 0.99."""
    rng = np.random.default_rng(seed)
    k, v = fa_rand(rng, b, nkv, s, d), fa_rand(rng, b, nkv, s, d)
    want_k, want_v = stored(k, kv_dtype), stored(v, kv_dtype)
    if poison:
        for u in range(b):
            poison_outside(k, u, 0, cur_pos, u)
            poison_outside(v, u, 0, cur_pos, u + 1)
    pages_k, table = to_paged(k, block_size, np.random.default_rng(seed + 1))
    pages_v, _ = to_paged(v, block_size, np.random.default_rng(seed + 1))
    config = program_config(grid, q_chunk_size, k_chunk_size, exp_approx_mode=False)
    compute = compute_config("HiFi2")
    q = fa_rand(rng, 1, b, nh, d)
    scale = d ** -0.5
    ref_args = (stored(q, q_dtype), want_k, want_v)
    ref_keywords = dict(first=[0] * b, last=[cur_pos] * b, scale=scale)
    want = reference(*ref_args, **ref_keywords)
    out = paged_scaled_dot_product_attention_decode(host(q, q_dtype), host(pages_k, kv_dtype), host(pages_v, kv_dtype),
                                                    ttnn.Tensor(table, ttnn.int32), cur_pos_tensor=positions([cur_pos] * b),
                                                    scale=scale, program_config=config, compute_kernel_config=compute,
                                                    memory_config=ttnn.DRAM_MEMORY_CONFIG)
    return check(out, want, min_pcc=0.99, max_rel_l2=_rel_l2_bar(compute, want, *ref_args, **ref_keywords), label=label)


def thin(sweep, every=16):
    """Every ``every``-th start of a position sweep and its last: the default run's share of it."""
    return sorted(set(sweep[::every] + [sweep[-1]]))


def window_positions(w, s):
    """``test_sdpa_decode_sliding_window``'s positions: window starts in each face of a tile
    (offsets 15, 16, 17 past 32 k), 2W, W/2, W-1, s/2, s-10; those below ``s``."""
    out = [(w + offset - 1) + 32 * k for k in (5, 10, 20, 30) for offset in (15, 16, 17)]
    return [p for p in out + [w * 2, w // 2, w - 1, s // 2, s - 10] if p < s]
