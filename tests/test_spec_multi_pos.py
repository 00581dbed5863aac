"""ttnn's speculative verify, ``spec_multi_pos_tiles=Tg`` on the paged drop-in (issue 20 item 4;
tt-metal's test_sdpa_decode_spec_multi_pos.py shapes), on the emulator against float64.

``Tg`` candidates per group, each with its own causal bound (``cur_pos_tensor`` ``[B * Tg]``),
Q ``[1, B, Tg * 32, dh]`` with candidate ``j``'s 6 valid heads on rows 0..5 of row tile ``j``
(rows 6..31 zero padding, as the peer test builds it), one KV head, the page table ``B`` rows of
shuffled blocks. Hard inputs: bounds on tile edges (p % 32 in {0, 31}), bounds straddling a K/V
block, bounds that are NOT consecutive (the op takes each candidate's own), an idle candidate
(-1), two groups on different page-table rows. The peer test's equivalence (spec form == B * Tg
separate users) is checked bit for bit. Pass bar: tests/bars.py on the valid heads.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from bars import assert_close, run_quiet
from ttnn_flashdecode.op.reference import attention_reference
from ttnn_flashdecode import last_report
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode

BLOCK, HEAD_DIM, VALID_HEADS = 64, 256, 6


def _bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _case(seed, groups, candidates, capacity):
    rng = np.random.default_rng(seed)
    k, v = (_bf16(rng.standard_normal((groups, 1, capacity, HEAD_DIM))) for _ in range(2))
    entries = capacity // BLOCK
    table = rng.permutation(groups * entries).astype(np.int32).reshape(groups, entries)
    pk, pv = (np.empty((groups * entries, 1, BLOCK, HEAD_DIM), np.float32) for _ in range(2))
    for group in range(groups):
        for entry in range(entries):
            pk[table[group, entry]] = k[group, :, entry * BLOCK:(entry + 1) * BLOCK]
            pv[table[group, entry]] = v[group, :, entry * BLOCK:(entry + 1) * BLOCK]
    q = np.zeros((1, groups, candidates * 32, HEAD_DIM), np.float32)
    for j in range(candidates):
        q[:, :, j * 32:j * 32 + VALID_HEADS] = rng.standard_normal((groups, VALID_HEADS, HEAD_DIM))
    return _bf16(q), k, v, pk, pv, table


def _reference(q, k, v, positions, candidates, window=None):
    """Each candidate's valid heads against its group's cache up to its own bound (within its
    sliding window)."""
    groups = q.shape[1]
    out = np.zeros(q.shape)
    for group in range(groups):
        for j in range(candidates):
            position = positions[group * candidates + j]
            if position < 0:
                continue
            rows = q[:, group:group + 1, j * 32:j * 32 + VALID_HEADS].reshape(1, 1, 1, VALID_HEADS * HEAD_DIM)
            cache = tuple(np.repeat(c[group:group + 1], VALID_HEADS, axis=1) for c in (k, v))
            want = attention_reference(rows, *cache, cur_pos=[position], scale=HEAD_DIM ** -0.5,
                                       sliding_window_size=window)
            out[0, group, j * 32:j * 32 + VALID_HEADS] = want.reshape(VALID_HEADS, HEAD_DIM)
    return out


def _valid(x, candidates):
    x = np.asarray(x, np.float64)
    return np.concatenate([x[:, :, j * 32:j * 32 + VALID_HEADS] for j in range(candidates)], axis=2)


@pytest.mark.parametrize("candidates", [4, 7])
@pytest.mark.parametrize("p", [1024, 1055, 1021])
def test_spec_candidates_match_float64(candidates, p):
    q, k, v, pk, pv, table = _case(p + candidates, 1, candidates, 2048)
    positions = np.array([p + j for j in range(candidates)], np.int32)
    out = run_quiet(paged_scaled_dot_product_attention_decode, q, pk, pv, table, cur_pos_tensor=positions,
                    scale=HEAD_DIM ** -0.5, spec_multi_pos_tiles=candidates)
    assert tuple(np.asarray(out).shape) == q.shape
    want = _reference(q, k, v, positions, candidates)
    assert_close(_valid(out, candidates), _valid(want, candidates), f"T={candidates} p={p}")


def test_two_groups_independent_bounds_and_an_idle_candidate():
    q, k, v, pk, pv, table = _case(11, 2, 4, 1024)
    positions = np.array([900, 31, 32, 500, 0, -1, 1023, 64], np.int32)  # not consecutive, one idle
    out = run_quiet(paged_scaled_dot_product_attention_decode, q, pk, pv, table, cur_pos_tensor=positions,
                    scale=HEAD_DIM ** -0.5, spec_multi_pos_tiles=4)
    want = _reference(q, k, v, positions, 4)
    assert_close(_valid(out, 4), _valid(want, 4), "two groups")
    assert not np.asarray(out)[0, 1, 32:64].any(), "the idle candidate's rows are zero"


def test_spec_with_a_sliding_window():
    """ttnn refuses a window with spec_multi_pos_tiles; here each candidate's window follows its own
    bound (the window starts on both sides of a tile edge across the candidates)."""
    q, k, v, pk, pv, table = _case(21, 1, 4, 1024)
    positions = np.array([600, 601, 602, 603], np.int32)
    out = run_quiet(paged_scaled_dot_product_attention_decode, q, pk, pv, table, cur_pos_tensor=positions,
                    scale=HEAD_DIM ** -0.5, spec_multi_pos_tiles=4, sliding_window_size=250)
    want = _reference(q, k, v, positions, 4, window=250)
    assert_close(_valid(out, 4), _valid(want, 4), "spec + window 250")


def test_spec_form_equals_separate_users_bit_for_bit():
    """The peer test's property: the same Q bytes as B * Tg users with aliased page-table rows, bit
    for bit where the reduction trees match: the candidates' bounds in one position tile, so the
    one-scan request's slices and blocks are each candidate's alone (its extra tiles: none), and
    the grid gives the 4 separate users the group's split (at 11 candidates x 16 slices it cannot:
    docs/design.md "Row-tile users")."""
    q, k, v, pk, pv, table = _case(5, 1, 4, 2048)
    positions = np.array([1024, 1025, 1026, 1027], np.int32)
    spec = paged_scaled_dot_product_attention_decode(q, pk, pv, table, cur_pos_tensor=positions,
                                                     spec_multi_pos_tiles=4)
    users = paged_scaled_dot_product_attention_decode(q.reshape(1, 4, 32, HEAD_DIM), pk, pv, np.repeat(table, 4, axis=0),
                                                      cur_pos_tensor=positions)
    assert np.array_equal(np.asarray(spec).reshape(1, 4, 32, HEAD_DIM), np.asarray(users))


def _plan():
    return last_report().plan


@pytest.mark.parametrize("candidates", [4, 11])
def test_spec_group_reads_its_cache_once(candidates, record_property):
    """The group is one request of a row tile per candidate (``attention_protocol.hpp`` "Row-tile
    users"): its K/V is read once for all candidates, not once per candidate. DRAM bytes read are
    within 1.05x of the minimum (the live K/V tiles up to the furthest candidate once, the
    candidates' Q tiles); the per-candidate call (the same candidates as separate users) reads about
    ``candidates`` times as much."""
    q, k, v, pk, pv, table = _case(40 + candidates, 1, candidates, 2048)
    positions = np.array([1500 + 3 * j for j in range(candidates)], np.int32)
    out = run_quiet(paged_scaled_dot_product_attention_decode, q, pk, pv, table, cur_pos_tensor=positions,
                    scale=HEAD_DIM ** -0.5, spec_multi_pos_tiles=candidates)
    shape = _plan().shape
    assert shape.row_tile_users and shape.row_tiles == candidates
    read = last_report().total_dram_read_bytes
    tiles = -(-(int(positions.max()) + 1) // 32)
    minimum = 2 * tiles * (HEAD_DIM // 32) * 2048 + candidates * (HEAD_DIM // 32) * 2048
    users = np.asarray(run_quiet(paged_scaled_dot_product_attention_decode, q.reshape(1, candidates, 32, HEAD_DIM), pk,
                                 pv, np.repeat(table, candidates, axis=0), cur_pos_tensor=positions, scale=HEAD_DIM ** -0.5))
    separate = last_report().total_dram_read_bytes
    record_property("figure", f"spec T={candidates}: {read} B read, {read / minimum:.3f}x the minimum; "
                              f"separate users {separate / read:.2f}x that")
    assert read <= 1.05 * minimum, (read, minimum)
    assert separate >= 0.8 * candidates * read  # each candidate reads the K/V (Q is read once either way)
    assert_close(_valid(out, candidates), _valid(_reference(q, k, v, positions, candidates), candidates), "one scan")
    assert_close(_valid(users.reshape(out.shape), candidates), _valid(_reference(q, k, v, positions, candidates), candidates),
                 "separate users")


@pytest.mark.parametrize("max_cores", [1, 8])
def test_spec_candidates_far_apart_lse_and_sinks(max_cores):
    """Candidates whose bounds lie far apart (tile 0, mid-cache, the cache's end, an idle one) in one
    scan, unsplit and split over 8 cores: a candidate's tiles past its own bound are killed (its
    later blocks and the later slices change nothing), its own tail mask sits in whichever slice
    owns its last tile. With attention sinks and return_lse against float64: the idle candidate's
    rows are zero and its LSE -inf."""
    import ttnn

    q, k, v, pk, pv, table = _case(77, 1, 4, 2048)
    positions = np.array([0, 1000, 2047, -1], np.int32)
    sinks = np.zeros((32, 32), np.float32)
    sinks[:VALID_HEADS, 0] = _bf16(np.random.default_rng(2).standard_normal(VALID_HEADS) * 3.0)
    scale = HEAD_DIM ** -0.5
    config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=0, k_chunk_size=0,
                                    exp_approx_mode=False, max_cores_per_head_batch=max_cores)
    out, lse = run_quiet(paged_scaled_dot_product_attention_decode, q, pk, pv, table, cur_pos_tensor=positions,
                         scale=scale, spec_multi_pos_tiles=4, attention_sink=sinks, program_config=config,
                         return_lse=True)
    assert _plan().shape.row_tile_users and _plan().split == (max_cores > 1)
    want = np.zeros(q.shape)
    want_lse = np.full(q.shape[:3], -np.inf)
    for j, position in enumerate(positions):
        if position < 0:
            continue
        rows = q[:, :, j * 32:j * 32 + VALID_HEADS].reshape(1, 1, 1, VALID_HEADS * HEAD_DIM)
        cache = tuple(np.repeat(c, VALID_HEADS, axis=1) for c in (k, v))
        got, got_lse = attention_reference(rows, *cache, cur_pos=[position], scale=scale, return_lse=True,
                                           attention_sink=sinks[:VALID_HEADS, 0].astype(np.float64) * scale)
        want[0, 0, j * 32:j * 32 + VALID_HEADS] = got.reshape(VALID_HEADS, HEAD_DIM)
        want_lse[0, 0, j * 32:j * 32 + VALID_HEADS] = np.asarray(got_lse).reshape(VALID_HEADS)
    assert_close(_valid(out, 4), _valid(want, 4), f"far apart, max_cores {max_cores}")
    got_lse = np.asarray(lse, np.float64)
    assert not np.asarray(out)[0, 0, 96:128].any(), "the idle candidate's rows are zero"
    assert np.isneginf(got_lse[0, 0, 96:96 + VALID_HEADS]).all(), "the idle candidate's LSE is -inf"
    live = [h for j in range(3) for h in range(j * 32, j * 32 + VALID_HEADS)]
    np.testing.assert_allclose(got_lse[0, 0, live], want_lse[0, 0, live], rtol=0, atol=2e-2)


@pytest.mark.parametrize("keywords, match", [
    (dict(spec_multi_pos_tiles=-1), "spec_multi_pos_tiles: expected an int >= 0"),
    (dict(spec_multi_pos_tiles=2.0), "spec_multi_pos_tiles: expected an int >= 0"),
    (dict(spec_multi_pos_tiles=3), r"input_tensor_q: expected \[1, B, 96, dh\]"),
])
def test_bad_spec_calls_are_refused_by_name(keywords, match):
    q, k, v, pk, pv, table = _case(1, 1, 4, 256)
    with pytest.raises(ValueError, match=match):
        paged_scaled_dot_product_attention_decode(q, pk, pv, table, cur_pos_tensor=np.arange(4, dtype=np.int32),
                                                  **keywords)


@pytest.mark.parametrize("change, match", [
    ("head_dim", "input_tensor_k: expected head_dim 256 \\(input_tensor_q's\\)"),
    ("table_rows", r"page_table_tensor: expected 2 rows with spec_multi_pos_tiles=4 \(one per group"),
    ("non_causal", "spec_multi_pos_tiles: expected is_causal=True"),
])
def test_spec_calls_that_do_not_fit_are_refused_by_name(change, match):
    """Found by a fresh user: each refusal names the argument as the caller wrote it (two groups,
    B = 2), not the internal one-user-per-candidate shapes."""
    q, k, v, pk, pv, table = _case(1, 2, 4, 256)
    positions = np.arange(8, dtype=np.int32)
    keywords = dict(cur_pos_tensor=positions, spec_multi_pos_tiles=4)
    if change == "head_dim":
        pk, pv = pk[..., :64], pv[..., :64]
    elif change == "table_rows":
        table = table[:1]
    else:
        keywords.update(is_causal=False, cur_pos_tensor=None)
    with pytest.raises(ValueError, match=match):
        paged_scaled_dot_product_attention_decode(q, pk, pv, table, **keywords)


def test_spec_needs_one_kv_head():
    q, k, v, pk, pv, table = _case(1, 1, 2, 256)
    two_heads = np.concatenate([pk, pk], axis=1)
    with pytest.raises(ValueError, match="input_tensor_k: expected one KV head with spec_multi_pos_tiles"):
        paged_scaled_dot_product_attention_decode(q, two_heads, two_heads, table,
                                                  cur_pos_tensor=np.arange(2, dtype=np.int32), spec_multi_pos_tiles=2)


@pytest.mark.parametrize("value, table, error", [(0, True, ValueError), (2, False, ValueError), (True, True, TypeError),
                                                (1.0, True, TypeError)])
def test_bad_users_per_table_row_is_refused(value, table, error):
    from ttnn_flashdecode import attention

    q, k, v, pk, pv, rows = _case(1, 1, 1, 256)
    flat = q[:, :, :1].reshape(1, 1, 1, HEAD_DIM)
    paged = dict(page_table_tensor=rows) if table else {}
    cache = (pk, pv) if table else (k, v)
    with pytest.raises(error, match="users_per_table_row: expected an int"):
        attention(flat, *cache, cur_pos=[5], users_per_table_row=value, **paged)
