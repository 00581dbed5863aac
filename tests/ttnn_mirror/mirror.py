"""What the mirror of tt-metal's decode tests shares (tests/ttnn_mirror/, issue 20 item 7).

The peer tests build torch tensors, upload them with ``ttnn.as_tensor(..., device=device)`` and call
``ttnn.transformer.scaled_dot_product_attention_decode`` / ``paged_scaled_dot_product_attention_decode``.
The mirror makes the same inputs with numpy (:func:`fa_rand`: the peer's unit normal plus a 0.1% of
10x outliers), hands them to our drop-ins as HOST ttnn tensors of the peer's dtypes and layouts (the
emulator's stand-in for device tensors; an L1 height-sharded Q or output as the peer's, through
:func:`host_sharded` / :func:`height_sharded`, placed in the emulated cores' L1) and makes the call with the peer's keywords: ``scale=d**-0.5``, ``program_config=
ttnn.SDPAProgramConfig(...)`` (:func:`program_config`), the peer's ``WormholeComputeKernelConfig``,
``cur_pos`` / ``cur_pos_tensor``, ``sliding_window_size``, ``attention_sink``, ``attn_mask`` ...

The reference is our own float64 one (:func:`reference`), on the values the tensors STORE (bfloat16
rounding, bfloat8_b / bfloat4_b dequantised: :func:`stored`), so the bars measure the op, not the
input formats. Bars (:func:`check`): the peer test's own PCC bar, and a relative-L2 bar: the one
tests/test_attention_adversarial.py measured and set for the call's compute config
(``CONFIG_BARS``: bf16 DST / HiFi2 4e-2, bf16 DST / HiFi4 2.5e-2, ...), measured on unit-normal
inputs. With a bf16 DST a score is accumulated in DST, each 16-element step of QS . K rounded to
bfloat16: its error grows with the score, and the peer's 10x outliers make scores that unit-normal
inputs never do. So with a bf16 DST the rel-L2 bar is the config's bar plus how much more that
rounding alone costs these inputs (:func:`bf16_dst_score_floor`, a float64 model of it) than it
cost the inputs the config's bar was measured on (:func:`config_case_score_floor`, 6.8e-3 of the
1.13e-2 measured with a bf16 DST at HiFi4). PCC is blind to a wrong scale; rel-L2 is not.

Poison twins (:func:`poison_outside`): NaN / +-Inf in every cache slot a row must not read (past
its position, before its window, past the valid pages); the output must not change.
"""

from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np
import pytest
import ttnn

from bars import assert_quiet
from test_attention_adversarial import CONFIG_BARS
from ttnn_flashdecode.op import tiles
from ttnn_flashdecode.op.operation import to_numpy
from ttnn_flashdecode.op.reference import pcc, relative_l2

BF16 = ml_dtypes.bfloat16
POISONS = (np.nan, np.inf, -np.inf)
FINFO_MIN = float(np.finfo(np.float32).min)

#: The marker of the mirror's long sweeps (pyproject: deselected by default; ``-m long_sweep`` runs them).
long_sweep = pytest.mark.long_sweep


def slow(*values, reason: str = ""):
    """A parametrisation that belongs to the long sweep."""
    return pytest.param(*values, marks=long_sweep)


# ------------------------------------------------------------------ the peer helpers' arithmetic

def nearest_n(x: int, n: int) -> int:
    return -(-x // n) * n


def nearest_pow_2(x: int) -> int:
    return 1 << math.ceil(math.log2(x))


def get_chunk_size(max_start_pos: int, s: int) -> int:
    """The peer's k_chunk_size rule: 32 up to 128 positions, 128 up to 1024, 512 beyond, at most the
    largest power of two dividing ``s``."""
    chunk = 32 if max_start_pos <= 128 else 128 if max_start_pos <= 1024 else 512
    largest = s & -s
    return min(chunk, largest)


def fa_rand(rng, *shape) -> np.ndarray:
    """The peer's ``fa_rand``: unit normal plus, with probability 1e-3, a 10x-normal outlier."""
    base = rng.standard_normal(shape, dtype=np.float32)
    spikes = rng.standard_normal(shape, dtype=np.float32) * 10 * (rng.random(shape) < 1e-3)
    return (base + spikes).astype(np.float32)


def compute_config(fidelity: str = "HiFi4", fp32_dest_acc_en: bool = False):
    return ttnn.WormholeComputeKernelConfig(math_fidelity=getattr(ttnn.MathFidelity, fidelity), math_approx_mode=False,
                                            fp32_dest_acc_en=fp32_dest_acc_en, packer_l1_acc=False)


def program_config(grid, q_chunk_size, k_chunk_size, **keywords):
    return ttnn.SDPAProgramConfig(compute_with_storage_grid_size=grid, q_chunk_size=q_chunk_size,
                                  k_chunk_size=k_chunk_size, **keywords)


def rel_l2_bar(config, score_floor: float = 0.0) -> float:
    """tests/test_attention_adversarial.py's relative-L2 bar for a compute kernel config; with a bf16
    DST plus the excess of ``score_floor`` (:func:`bf16_dst_score_floor` of the call) over the
    config case's (:func:`config_case_score_floor`). fp32 DST accumulates scores in fp32: no floor."""
    bar = CONFIG_BARS[(bool(config.fp32_dest_acc_en), str(config.math_fidelity).split(".")[-1])].max_rel_l2
    if config.fp32_dest_acc_en or score_floor == 0.0:
        return bar
    return bar + max(0.0, score_floor - config_case_score_floor())


@functools.cache
def config_case_score_floor() -> float:
    """:func:`bf16_dst_score_floor` of the inputs ``CONFIG_BARS`` were measured on
    (``test_attention_compute_configs``: 8 Q heads, head_dim 128, unit normal, 3000 positions)."""
    from test_attention import _inputs

    q, k, v = (np.asarray(x, np.float64) for x in _inputs(1, 8, 1, 128, 4096, seed=0))
    keywords = dict(first=[0], last=[2999], scale=128 ** -0.5)
    q = q.reshape(1, 1, 8, 128)
    return bf16_dst_score_floor(reference(q, k, v, **keywords), q, k, v, **keywords)


DST_STEP = 16
"""Elements of a score's dot product per DST accumulation step: the FPU adds one face's 16 products
into DST at a time (the emulator's matmul, ``compute_engine.cpp`` ``matmul_one``)."""


def bf16_dst_score_floor(want, q, k, v, *, first, last, scale, mask=None, sink=None) -> float:
    """Relative L2 between ``want`` (:func:`reference`) and the same attention whose scores are made
    as a bf16 DST makes them: the query scaled by the scale as the kernel holds it (bfloat16: the
    CONST page, ``constants.build_constants``) and rounded to bfloat16 (the QS CB), each score
    accumulated over the head dim :data:`DST_STEP` products at a time, rounded to bfloat16 after
    every step; everything else exact. The error no bf16-DST kernel avoids (ttnn's accumulates its
    scores the same way); arguments as :func:`reference`."""
    model = reference(q, k, v, first=first, last=last, scale=scale, mask=mask, sink=sink, bf16_dst_scores=True)
    return float(np.linalg.norm(model - want) / np.linalg.norm(want)) if np.any(want) else 0.0


def single_iter_pcc(grid, b, q_dtype, kv_dtype) -> float:
    """``run_test_sdpa_decode_single_iter``'s PCC bar."""
    if grid[0] * grid[1] // b == 1:
        return 0.90
    if kv_dtype == ttnn.bfloat4_b:
        return 0.91
    return 0.98 if q_dtype == ttnn.bfloat8_b else 0.99


def paged_pcc(grid, b, q_dtype, kv_dtype) -> float:
    """``run_test_sdpa_decode_paged_attention``'s PCC bar."""
    if grid[0] * grid[1] // b == 1:
        return 0.90
    return 0.91 if kv_dtype == ttnn.bfloat4_b else 0.98


# ------------------------------------------------------------------ tensors

def host(array, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT):
    """A host ttnn tensor of ``array`` (what ``ttnn.as_tensor(..., dtype, layout)`` makes, without a device)."""
    return ttnn.Tensor(np.ascontiguousarray(array, np.float32), dtype, layout=layout)


def host_sharded(array, dtype, config):
    """A host ttnn tensor of ``array`` (TILE) carrying the memory config ``config``, as a sharded
    device tensor's ``.cpu()`` keeps it: the emulator places its shards in the cores' L1."""
    array = np.ascontiguousarray(array, np.float32)
    return ttnn.Tensor(array.reshape(-1).tolist(), list(array.shape), dtype, ttnn.TILE_LAYOUT, None, config)


def height_sharded(b: int, padded_num_heads: int, d: int):
    """The peer's ``height_sharded_memcfg``: L1 height-sharded, one user's ``padded_num_heads`` rows a
    shard, on ``num_to_corerange(b)`` (a row of ``min(b, 8)`` cores, ``b // 8`` rows past 8)."""
    across = min(b, 8)
    grid = ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(across - 1, b // across - 1))
    spec = ttnn.ShardSpec(ttnn.CoreRangeSet({grid}), [padded_num_heads, d], ttnn.ShardOrientation.ROW_MAJOR)
    return ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)


def positions(values):
    """``ttnn.Tensor(torch.tensor(start_indices), ttnn.int32)``."""
    return ttnn.Tensor(np.asarray(values, np.int32), ttnn.int32)


def stored(array, dtype) -> np.ndarray:
    """float64 values a tensor of ``dtype`` stores for ``array`` (NaN / inf kept where they were)."""
    array = np.asarray(array, np.float32)
    if dtype == ttnn.bfloat16:
        return array.astype(BF16).astype(np.float64)
    name = "bfloat8_b" if dtype == ttnn.bfloat8_b else "bfloat4_b"
    return np.asarray(tiles.block_float_values(np.nan_to_num(array, nan=0.0, posinf=0.0, neginf=0.0), name), np.float64)


def poison_outside(cache, user, first, last, seed):
    """NaN / +-Inf in every slot of ``cache[user]`` (``[.., nkv, S, d]``) outside positions ``first .. last``."""
    for span in (cache[user, :, :max(first, 0)], cache[user, :, last + 1:]):
        span[...] = POISONS[seed % 3]
        span[..., ::3] = POISONS[(seed + 1) % 3]


def to_paged(cache, block_size, rng):
    """ttnn's paged layout of a contiguous cache ``[b, nkv, s, d]``: shuffled blocks ``[b * s / bs,
    nkv, bs, d]`` and the page table ``[b, s / bs]`` (int32), as the peer's ``to_paged_cache`` +
    ``randperm``."""
    b, nkv, s, d = cache.shape
    per_user = s // block_size
    blocks = cache.reshape(b, nkv, per_user, block_size, d).transpose(0, 2, 1, 3, 4).reshape(b * per_user, nkv,
                                                                                             block_size, d)
    permutation = rng.permutation(b * per_user)
    table = np.argsort(permutation).reshape(b, per_user).astype(np.int32)
    return np.ascontiguousarray(blocks[permutation]), table


# ------------------------------------------------------------------ reference and bars

def reference(q, k, v, *, first, last, scale, mask=None, sink=None, bf16_dst_scores=False) -> np.ndarray:
    """float64 GQA decode attention. ``q`` ``[1, b, nh, d]``; ``k``, ``v`` ``[b or 1, nkv, S, d]``
    (batch 1: one cache every user reads); user ``u`` attends positions ``first[u] .. last[u]``
    (``last[u] < 0``: an idle slot, zero output); ``mask`` ``[b or 1, nh, S]`` added to the scaled
    scores (torch SDPA's ``attn_mask``); ``sink`` one logit per Q head (score units) joining each
    row's softmax denominator with no value; ``bf16_dst_scores``: the scores as a bf16 DST makes them
    (:func:`bf16_dst_score_floor`). Returns ``[1, b, nh, d]``."""
    q = np.asarray(q, np.float64)
    _, b, nh, d = q.shape
    nkv = k.shape[1]
    group = nh // nkv
    out = np.zeros((1, b, nh, d))
    for u in range(b):
        if last[u] < 0:
            continue
        kv = 0 if k.shape[0] == 1 else u
        span = slice(first[u], last[u] + 1)
        keys, values = k[kv, :, span], v[kv, :, span]  # [nkv, n, d]
        if bf16_dst_scores:
            # The kernel's own arithmetic, step for step: which way each rounding falls decides an
            # outlier score's error (measured: 9.056 made 9.0 with the bfloat16 scale, 9.0625 without).
            qs = _bf16_round(q[0, u].reshape(nkv, group, d) * _bf16_round(scale))
            scores = np.zeros((nkv, group, keys.shape[1]))
            for step in range(0, d, DST_STEP):
                part = np.einsum("hgd,hnd->hgn", qs[..., step:step + DST_STEP], keys[..., step:step + DST_STEP])
                scores = _bf16_round(scores + part)
        else:
            scores = np.einsum("hgd,hnd->hgn", q[0, u].reshape(nkv, group, d), keys) * scale
        scores = scores.reshape(nh, -1)
        if mask is not None:
            scores = scores + np.asarray(mask, np.float64)[0 if len(mask) == 1 else u][:, span]
        top = scores.max(axis=1)
        if sink is not None:
            top = np.maximum(top, sink)
        weights = np.exp(scores - top[:, None])
        denominator = weights.sum(axis=1) + (np.exp(np.asarray(sink) - top) if sink is not None else 0.0)
        mixed = np.einsum("hgn,hnd->hgd", weights.reshape(nkv, group, -1), values).reshape(nh, d)
        out[0, u] = mixed / denominator[:, None]
    return out


def _bf16_round(x) -> np.ndarray:
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def check(out, want, *, min_pcc, max_rel_l2, label, users=None, quiet=True):
    """The drop-in's output ``[1, b, nh, d]`` finite and within the bars of ``want`` on ``users``
    (default all); returns (pcc, rel-L2)."""
    if quiet:
        assert_quiet(label)
    if isinstance(out, ttnn.Tensor) and out.dtype in (ttnn.bfloat8_b, ttnn.bfloat4_b):
        out = ttnn.to_dtype(out, ttnn.bfloat16)  # a block-float TILE tensor unpads only as bfloat16
    got = np.asarray(to_numpy(out), np.float64).reshape(want.shape)
    if users is not None:
        idle = [u for u in range(want.shape[1]) if u not in set(users)]
        assert not got[:, idle].any(), f"{label}: an idle user's output is not zero"
        got, want = got[:, users], want[:, users]
    assert np.isfinite(got).all(), f"{label}: a non-finite output (poison reached it?)"
    figures = pcc(got, want), relative_l2(got, want)
    assert figures[0] >= min_pcc and figures[1] <= max_rel_l2, (
        f"{label}: PCC {figures[0]:.6f} (bar {min_pcc}), rel-L2 {figures[1]:.3e} (bar {max_rel_l2})")
    return figures


def default_part(cases, keep):
    """``cases`` (pytest.param with ids) with every case whose id is not in ``keep`` moved to the
    long sweep."""
    out = []
    for case in cases:
        marks = list(case.marks)
        names = {mark.name for mark in marks}
        if case.id not in keep and "long_sweep" not in names:
            marks.append(long_sweep)
        out.append(pytest.param(*case.values, marks=marks, id=case.id))
    return out
