"""Non-causal decode with an attention mask (``is_causal=False, attn_mask=``, issue 20 item 3) on
the emulator, against the float64 reference: every query row attends every position of the cache,
the mask ``[B, 1, n_q_heads, capacity]`` (or ``[1, B, ...]``, ``B`` 1 or the batch) added to its
scores in score units.

Any values: ``-inf`` (ttnn's tests use ``finfo(float32).min``), NaN, large finite biases. The
reader clamps every entry into ``[-1e30, 1e30]`` (NaN -> -1e30) as it gathers a block's rows, so
a row with any position left attends only those, even when whole K blocks or split-K slices are
masked for it, and a fully masked row weighs every position alike -- the mean of V, what ttnn
gives for its ``finfo.min`` masks (all scores equal) -- never NaN. The mask is read once per K
block, only the rows of the request's Q heads. ttnn's drop-ins multiply the mask by ``scale`` as
ttnn does (tt-metal #40470). Pass bar: tests/bars.py.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from bars import assert_close
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op.reference import attention_reference
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode, scaled_dot_product_attention_decode

FINFO_MIN = float(np.finfo(np.float32).min)


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16)


def _inputs(rng, batch, n_q, n_kv, head_dim, capacity):
    q = _bf16(rng.standard_normal((1, 1, batch, n_q * head_dim), dtype=np.float32))
    k = _bf16(rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32))
    v = _bf16(rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32))
    return q, k, v


def _hard_mask(rng, users, n_q, capacity):
    """Random -inf (30%), a row whose first 96 positions (three K blocks of one tile) are -inf, a
    row masked but for its last position, a fully -inf row, a fully finfo.min row, NaN entries,
    and bfloat16-exact biases in [-2, 2] elsewhere (the scores' own scale: S is kept in bfloat16,
    so biases that make the softmax peakier than decode's make its rounding show, ~1% at [-8, 8])."""
    mask = _bf16(rng.uniform(-2, 2, size=(users, 1, n_q, capacity))).astype(np.float32)
    mask[rng.random(mask.shape) < 0.3] = -np.inf
    mask[0, 0, 0, :96] = -np.inf
    mask[0, 0, 1, :-1] = -np.inf
    mask[-1, 0, 2, :] = -np.inf
    mask[-1, 0, 3, :] = FINFO_MIN
    mask[0, 0, 4, ::5] = np.nan
    return mask


@pytest.mark.parametrize("split", [1, None, 3])
@pytest.mark.parametrize("users", [1, 3])
def test_mask_any_values_every_user_or_one_for_all(users, split):
    rng = np.random.default_rng(users * 10 + (split or 0))
    q, k, v = _inputs(rng, 3, 8, 2, 64, 256)
    mask = _hard_mask(rng, users, 8, 256)
    out = attention(q, k, v, is_causal=False, attn_mask=mask, split=split, block_tiles=1)
    want = attention_reference(q, k, v, is_causal=False, attn_mask=mask)
    got = assert_close(out, want, f"users={users} split={split}")
    rows = got.reshape(3, 8, 64)
    for user in range(3) if users == 1 else (2,):  # the fully masked rows (-inf, finfo.min): the mean of V
        for head in (2, 3):
            mean = v[user, head // 4].astype(np.float64).mean(axis=0)
            np.testing.assert_allclose(rows[user, head], mean, atol=2e-3)


def test_mask_layouts_and_no_mask():
    """[B, 1, nh, S] (tt-metal's tests) and [1, B, nh, S] (ttnn's docstring) are the same mask;
    is_causal=False without a mask attends every position."""
    rng = np.random.default_rng(4)
    q, k, v = _inputs(rng, 2, 8, 2, 64, 128)
    mask = _hard_mask(rng, 2, 8, 128)
    want = attention_reference(q, k, v, is_causal=False, attn_mask=mask)
    for layout in (mask, mask.reshape(1, 2, 8, 128)):
        assert_close(attention(q, k, v, is_causal=False, attn_mask=layout), want, f"layout {layout.shape}")
    out = attention(q, k, v, is_causal=False)
    assert_close(out, attention_reference(q, k, v, cur_pos=[127, 127]), "no mask: the whole cache")


def test_paged_non_causal_with_sinks():
    """Paged cache, a mask and sinks together (a non-causal layer of a sink model)."""
    rng = np.random.default_rng(6)
    block, entries, batch = 64, 4, 2
    q = _bf16(rng.standard_normal((1, 1, batch, 8 * 64), dtype=np.float32))
    k = _bf16(rng.standard_normal((batch * entries, 2, block, 64), dtype=np.float32))
    v = _bf16(rng.standard_normal((batch * entries, 2, block, 64), dtype=np.float32))
    table = rng.permutation(batch * entries).astype(np.int32).reshape(batch, entries)
    flat_k = np.stack([np.concatenate([k[b] for b in row], axis=1) for row in table])
    flat_v = np.stack([np.concatenate([v[b] for b in row], axis=1) for row in table])
    mask = _hard_mask(rng, batch, 8, block * entries)
    sinks = _bf16(rng.standard_normal(8) * 3).astype(np.float64)
    for split in (1, 3):
        out = attention(q, k, v, page_table_tensor=table, is_causal=False, attn_mask=mask, attention_sink=sinks,
                        split=split)
        want = attention_reference(q, flat_k, flat_v, is_causal=False, attn_mask=mask, attention_sink=sinks)
        assert_close(out, want, f"paged mask + sinks split={split}")


def test_mask_is_read_once_per_block_and_only_the_groups_rows():
    """DRAM bytes: the mask adds, per request and live tile, its stage rows once (two 64-byte reads
    per row, the face rows' DRAM chunks), plus each request's look at the POSITIONS page for the
    mask's address -- not a tile per head, not a read per K and V."""
    rng = np.random.default_rng(8)
    batch, n_q, n_kv, capacity = 2, 8, 2, 512
    q, k, v = _inputs(rng, batch, n_q, n_kv, 64, capacity)
    attention(q, k, v, is_causal=False, split=1)
    plain = last_report().totals.dram_read_bytes
    attention(q, k, v, is_causal=False, attn_mask=np.zeros((batch, 1, n_q, capacity), np.float32), split=1)
    masked = last_report().totals.dram_read_bytes
    requests, rows, tiles = batch * n_kv, n_q // n_kv, capacity // 32
    mask_rows = requests * tiles * rows * 2 * 64
    extra = masked - plain - mask_rows
    assert 0 <= extra <= requests * 4 * (batch + 1) + len(last_report().cores) * 4, (masked - plain, mask_rows)


def test_drop_ins_scale_the_mask_as_ttnn_does():
    """ttnn adds the mask to the unscaled scores (#40470): a finite mask acts scale times weaker
    than torch's; the drop-ins match ttnn, positions ignored as ttnn ignores them."""
    rng = np.random.default_rng(10)
    n_q, head_dim, capacity = 8, 64, 256
    q = _bf16(rng.standard_normal((1, 2, n_q, head_dim), dtype=np.float32))
    k, v = (_bf16(rng.standard_normal((2, 2, capacity, head_dim), dtype=np.float32)) for _ in range(2))
    mask = _hard_mask(rng, 2, n_q, capacity)
    scale = 1 / math.sqrt(head_dim)
    rows_q = q.reshape(1, 1, 2, n_q * head_dim)
    want = attention_reference(rows_q, k, v, is_causal=False, attn_mask=mask * scale)
    out = scaled_dot_product_attention_decode(q, k, v, is_causal=False, attn_mask=mask, cur_pos=[3, -1])
    assert_close(np.asarray(out).reshape(1, 1, 2, n_q * head_dim), want, "drop-in mask")
    table = np.arange(8, dtype=np.int32).reshape(2, 4)
    paged_k, paged_v = (x.reshape(2, 2, 4, 64, head_dim).transpose(0, 2, 1, 3, 4).reshape(8, 2, 64, head_dim) for x in (k, v))
    out = paged_scaled_dot_product_attention_decode(q, paged_k, paged_v, table, is_causal=False, attn_mask=mask)
    assert_close(np.asarray(out).reshape(1, 1, 2, n_q * head_dim), want, "paged drop-in mask")
    with pytest.raises(ValueError, match="attn_mask"):
        scaled_dot_product_attention_decode(q, k, v, cur_pos=[3, 4], attn_mask=mask)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(attn_mask=np.zeros((2, 1, 4, 128), np.float32)), ValueError, "attn_mask"),  # causal
    (dict(is_causal=False, cur_pos=[1, 2]), ValueError, "is_causal: non-causal attention takes no positions"),
    (dict(is_causal=False, sliding_window_size=16), ValueError, "is_causal"),
    (dict(is_causal=False, attn_mask=np.zeros((2, 1, 4, 64), np.float32)), ValueError, "attn_mask"),
    (dict(is_causal=False, attn_mask=np.zeros((3, 1, 4, 128), np.float32)), ValueError, "attn_mask"),
    (dict(is_causal=False, attn_mask=[[0.0]]), TypeError, "attn_mask"),
    (dict(is_causal=0), TypeError, "is_causal"),
])
def test_mask_refusals(kwargs, error, match):
    rng = np.random.default_rng(0)
    q, k, v = _inputs(rng, 2, 4, 1, 64, 128)
    kwargs = dict(kwargs)
    if kwargs.get("is_causal", True) is True and "cur_pos" not in kwargs:
        kwargs["cur_pos"] = [1, 2]
    with pytest.raises(error, match=match):
        attention(q, k, v, **kwargs)
