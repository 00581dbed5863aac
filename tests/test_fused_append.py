"""The KV-cache append fused into the op (issue 37 part 2): ``attention(..., append_k=, append_v=)``
and MLA's ``append_latent=`` on the emulator.

Each test pins the fused call against ttnn's update-then-attend, bit for bit: the caches updated on
the host the way ``update_cache`` / ``paged_update_cache`` update a bfloat16 cache (a copy of the
row, :func:`~ttnn_flashdecode.op.append.reference_update`), then the plain decode call. The slots
the append overwrites hold NaN before the fused call, so a row attended from the cache's old
contents (a stale DRAM read, the wrong position or face row) turns the output NaN, and the cache
after the call must equal the host-updated one everywhere (poison included elsewhere).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op.append import reference_update

from bars import run_quiet

GQA = dict(batch=3, n_kv=2, n_q=8, head_dim=64, capacity=256)


def _bf16(rng, shape) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)


def _case(seed, *, rows=1, batch=3, n_kv=2, n_q=8, head_dim=64, capacity=256):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 1, batch * rows, n_q * head_dim), dtype=np.float32)
    k, v = _bf16(rng, (batch, n_kv, capacity, head_dim)), _bf16(rng, (batch, n_kv, capacity, head_dim))
    new_k = rng.standard_normal((rows, batch, n_kv, head_dim), dtype=np.float32)  # ttnn's update input
    new_v = rng.standard_normal((rows, batch, n_kv, head_dim), dtype=np.float32)
    return q, k, v, new_k, new_v


def _paged(rng, cache, block_size, table):
    """``cache`` ``[batch, n_kv, capacity, head_dim]`` scattered into blocks by ``table``; unowned blocks NaN."""
    batch, n_kv, capacity, head_dim = cache.shape
    out = np.full((table.size + 2, n_kv, block_size, head_dim), np.nan, dtype=ml_dtypes.bfloat16)
    for b in range(batch):
        for e in range(capacity // block_size):
            out[table[b, e]] = cache[b, :, e * block_size:(e + 1) * block_size]
    return out


def _poison_appended(cache, positions, rows, table=None, block_size=0):
    """NaN into the slots the append will overwrite (what ttnn's update replaces)."""
    for user, position in enumerate(positions):
        for logical in range(position - rows + 1, position + 1) if position >= 0 else ():
            if table is None:
                cache[user, :, logical] = np.nan
            else:
                cache[table[user, logical // block_size], :, logical % block_size] = np.nan


def _update_then_attend(q, k, v, new_k, new_v, positions, table=None, block_size=0, **keywords):
    """ttnn's update (on the host) then the plain call: ``(output, k, v)``."""
    k, v = k.copy(), v.copy()
    reference_update(k, new_k, positions, table, block_size)
    reference_update(v, new_v, positions, table, block_size)
    paged = {} if table is None else {"page_table_tensor": table}
    return run_quiet(attention, q, k, v, cur_pos=positions, **paged, **keywords), k, v


def _assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, positions, *, rows=1, table=None, block_size=0,
                                            **keywords):
    if rows > 1:
        keywords["rows"] = rows  # ROWS: P rows per user, the last at cur_pos
    expected, k_expected, v_expected = _update_then_attend(q, k, v, new_k, new_v, positions, table, block_size,
                                                           **keywords)
    _poison_appended(k, positions, rows, table, block_size)
    _poison_appended(v, positions, rows, table, block_size)
    paged = {} if table is None else {"page_table_tensor": table}
    out = run_quiet(attention, q, k, v, cur_pos=positions, append_k=new_k, append_v=new_v, **paged, **keywords)
    assert not np.isnan(out).any()
    np.testing.assert_array_equal(out, expected)  # bit for bit
    np.testing.assert_array_equal(k.view(np.uint16), k_expected.view(np.uint16))
    np.testing.assert_array_equal(v.view(np.uint16), v_expected.view(np.uint16))
    return out


@pytest.mark.parametrize("split", [1, 4])
def test_decode_append_equals_update_then_attend_contiguous(split):
    q, k, v, new_k, new_v = _case(1)
    positions = [5, 100, 255]  # mid-tile, a tile's middle, the cache's last slot
    _assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, positions, split=split)


def test_decode_append_idle_slot_appends_nothing():
    q, k, v, new_k, new_v = _case(2)
    positions = [31, -1, 32]  # a tile's last row, an idle slot, a tile's first row
    before = k[1].copy(), v[1].copy()
    expected, _, _ = _update_then_attend(q, k, v, new_k, new_v, positions)
    out = run_quiet(attention, q, k, v, cur_pos=positions, append_k=new_k, append_v=new_v)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(k[1].view(np.uint16), before[0].view(np.uint16))  # the idle user's cache: untouched
    np.testing.assert_array_equal(v[1].view(np.uint16), before[1].view(np.uint16))


@pytest.mark.parametrize("split", [1, 3])
def test_paged_append_through_a_shuffled_page_table(split):
    rng = np.random.default_rng(3)
    q, k, v, new_k, new_v = _case(3)
    block_size = 64
    table = rng.permutation(3 * 4).reshape(3, 4).astype(np.int32)
    k_paged, v_paged = _paged(rng, k, block_size, table), _paged(rng, v, block_size, table)
    positions = [70, -1, 191]
    _assert_fused_equals_update_then_attend(q, k_paged, v_paged, new_k, new_v, positions, table=table,
                                            block_size=block_size, split=split)


def test_rows_append_spanning_a_tile_edge():
    rows = 3
    q, k, v, new_k, new_v = _case(4, rows=rows)
    positions = [33, 130, -1]  # 31..33 straddles tiles 0 and 1
    _assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, positions, rows=rows, split=2)


def test_append_reads_the_new_rows_from_l1_and_writes_them_once():
    """DRAM traffic: the fused call reads what the plain call reads plus the APPEND operand's rows,
    and writes the output plus the appended face rows (2 x 32 bytes per dim tile per row, K and V)."""
    q, k, v, new_k, new_v = _case(5)
    positions = [40, 90, 200]
    run_quiet(attention, q, k.copy(), v.copy(), cur_pos=positions)
    plain = last_report()
    run_quiet(attention, q, k, v, cur_pos=positions, append_k=new_k, append_v=new_v)
    fused = last_report()
    rows = GQA["batch"] * GQA["n_kv"] * 2 * (GQA["head_dim"] // 32)  # (user, KV head, K/V, dim tile) rows of 2 face rows
    assert fused.total_dram_write_bytes == plain.total_dram_write_bytes + rows * 64
    assert fused.total_dram_read_bytes == plain.total_dram_read_bytes + rows * 2 * 64  # each face row's 64-byte chunk


def test_append_is_trace_safe():
    """The program (hash, runtime args) does not depend on the positions."""
    q, k, v, new_k, new_v = _case(6)
    seen = set()
    for positions in ([5, 100, 255], [200, -1, 0], [64, 64, 64]):
        run_quiet(attention, q, k, v, cur_pos=positions, append_k=new_k, append_v=new_v)
        report = last_report()
        seen.add((report.program_hash, report.runtime_args_sha256))
    assert len(seen) == 1


REFUSED = [
    (dict(append_k="shape"), ValueError, "append_k: expected \\[rows, batch, n_kv_heads, head_dim\\]"),
    (dict(append_v="shape"), ValueError, "append_v: expected \\[rows, batch, n_kv_heads, head_dim\\]"),
    (dict(append_k="int32"), ValueError, "append_k: expected a float32 or bfloat16 array"),
    (dict(append_v=None), ValueError, "append_v: expected V's new rows"),
    (dict(rows=2), ValueError, "append_k: expected \\[rows, batch, n_kv_heads, head_dim\\] = \\[2, 3, 2, 64\\]"),
    (dict(cur_pos=[5, 300, 1]), ValueError, "cur_pos"),
]


@pytest.mark.parametrize("change, error, match", REFUSED, ids=[m.split(":")[0] + str(i) for i, (_, _, m) in enumerate(REFUSED)])
def test_a_refused_call_writes_nothing(change, error, match):
    q, k, v, new_k, new_v = _case(7)
    k_before, v_before = k.copy(), v.copy()
    call = dict(cur_pos=[5, 100, 255], append_k=new_k, append_v=new_v)
    for name in ("append_k", "append_v"):
        if change.get(name) == "shape":
            call[name] = call[name][:, :, :1]
        elif change.get(name) == "int32":
            call[name] = call[name].astype(np.int32)
        elif name in change:
            call[name] = change[name]
    if "rows" in change:
        call["rows"], q = change["rows"], np.repeat(q, change["rows"], axis=2)
    if "cur_pos" in change:
        call["cur_pos"] = change["cur_pos"]
    with pytest.raises(error, match=match):
        attention(q, k, v, **call)
    np.testing.assert_array_equal(k.view(np.uint16), k_before.view(np.uint16))
    np.testing.assert_array_equal(v.view(np.uint16), v_before.view(np.uint16))


def test_append_refuses_what_it_does_not_take_by_name():
    q, k, v, new_k, new_v = _case(8)
    with pytest.raises(ValueError, match="append_k: not supported with a chunk"):
        attention(q[:, :, :1], k[:1], v[:1], chunk_start=4, append_k=new_k[:, :1], append_v=new_v[:, :1])
    with pytest.raises(ValueError, match=r"append_v: given without append_k: expected None \(or append_k as well\), "
                                         r"got ndarray of shape \[1, 3, 2, 64\]"):
        attention(q, k, v, cur_pos=[1, 2, 3], append_v=new_v)
    with pytest.raises(ValueError, match="append_k: the k cache is read-only"):
        k.flags.writeable = False
        attention(q, k, v, cur_pos=[1, 2, 3], append_k=new_k, append_v=new_v)


@pytest.mark.parametrize("n_q, split", [(16, 1), (64, None), (64, 2)])
def test_mla_append_latent_equals_update_then_attend(n_q, split):
    """MLA (V is the latent's first head_dim_v columns, one cache): the latent row appended once."""
    rng = np.random.default_rng(n_q)
    batch, head_dim, head_dim_v, capacity = 2, 96, 64, 128
    q = rng.standard_normal((1, batch, n_q, head_dim), dtype=np.float32)
    latent = _bf16(rng, (batch, 1, capacity, head_dim))
    new = rng.standard_normal((1, batch, 1, head_dim), dtype=np.float32)
    positions = [77, 127]
    updated = latent.copy()
    reference_update(updated, new, positions)
    call = dict(cur_pos=positions, q_layout="heads", head_dim_v=head_dim_v, split=split)
    expected = run_quiet(attention, q, updated, None, **call)
    _poison_appended(latent, positions, 1)
    out = run_quiet(attention, q, latent, None, append_latent=new, **call)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(latent.view(np.uint16), updated.view(np.uint16))
    with pytest.raises(ValueError, match=r"append_latent: expected an MLA call.*append_k and append_v, got a separate V "
                                         r"\(ndarray, not k itself\)"):
        attention(q, latent, latent[..., :head_dim_v].copy(), append_latent=new, **call)
    with pytest.raises(ValueError, match=r"append_latent: given with append_k / append_v: expected them None .*got "
                                         r"append_k ndarray of shape \[1, 2, 1, 96\]"):
        attention(q, latent, None, append_latent=new, append_k=new, **call)
    with pytest.raises(ValueError, match="append_v: not supported with a separate V of head_dim_v columns"):
        attention(q, latent, latent[..., :head_dim_v].copy(), append_k=new, append_v=new[..., :head_dim_v], **call)


def test_device_append_launches_and_refuses_by_name(mock_device):
    """On a (mock) device: the fused call builds and launches through generic_op with the rows as
    they are (no extra op), never through the fast path; rows in L1, or host rows for a device
    cache, are refused by name before anything is launched."""
    import ttnn

    from ttnn_flashdecode.op.operation import cached_launch

    rng = np.random.default_rng(9)

    def device(array, memory=ttnn.DRAM_MEMORY_CONFIG):
        return ttnn.Tensor(np.asarray(array, np.float32), ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mock_device,
                           mem_config=memory)

    q = device(rng.standard_normal((1, 1, 2, 8 * 64)))
    k, v = device(rng.standard_normal((2, 2, 128, 64))), device(rng.standard_normal((2, 2, 128, 64)))
    rows = rng.standard_normal((1, 2, 2, 64))
    positions = ttnn.Tensor(np.asarray([5, 100], np.int32), ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT, device=mock_device,
                            mem_config=ttnn.DRAM_MEMORY_CONFIG)
    call = dict(cur_pos_tensor=positions, append_k=device(rows), append_v=device(rows))
    out = attention(q, k, v, **call)
    assert tuple(out.shape) == (1, 1, 2, 8 * 64)
    assert cached_launch(q, k, v, **call) is None  # a fused call is never remembered nor served
    with pytest.raises(ValueError, match="append_k: expected a bfloat16 TILE DRAM-interleaved device tensor"):
        attention(q, k, v, **call | {"append_k": device(rows, ttnn.L1_MEMORY_CONFIG)})
    with pytest.raises(ValueError, match="append_v: expected a device tensor"):
        attention(q, k, v, **call | {"append_v": rows.astype(np.float32)})


def _shared_table_case(table, positions, seed=10):
    """Two users, head_dim 64, 4 blocks of 32 positions each through ``table``: the paged caches
    (NaN outside the table's blocks) and the rest of the call."""
    rng = np.random.default_rng(seed)
    q, k, v, new_k, new_v = _case(seed, batch=2, capacity=128)
    table = np.asarray(table, np.int32)
    return q, _paged(rng, k, 32, table), _paged(rng, v, 32, table), new_k, new_v, table


def test_append_into_a_block_another_user_attends_is_refused_and_writes_nothing():
    """Both users' rows land in block 1, which both attend: another core may read that tile in the
    same call before or after the row lands, so the host refuses it by name, the cache untouched."""
    q, k, v, new_k, new_v, table = _shared_table_case([[0, 1, 2, 3], [0, 1, 4, 5]], [40, 41])
    k_before, v_before = k.copy(), v.copy()
    with pytest.raises(ValueError, match=r"append_k: expected the blocks a user appends into to be read by no other "
                                         r"user .*got user 0 appending into block 1, which user 1 attends "
                                         r"\(page_table_tensor\[1\]\[1\]\)"):
        attention(q, k, v, cur_pos=[40, 41], page_table_tensor=table, append_k=new_k, append_v=new_v)
    np.testing.assert_array_equal(k.view(np.uint16), k_before.view(np.uint16))
    np.testing.assert_array_equal(v.view(np.uint16), v_before.view(np.uint16))


@pytest.mark.parametrize("table, positions", [
    ([[0, 1, 2, 3], [0, 4, 5, 6]], [40, 41]),  # a shared prefix block nobody appends into
    ([[0, 1, 2, 3], [4, 1, 5, 6]], [40, 20]),  # block 1 in user 1's row, past what user 1 attends
    ([[0, 1, 2, 3], [0, 1, 4, 5]], [40, -1]),  # the other user idle
])
def test_append_beside_a_shared_block_nobody_else_reads_is_taken(table, positions):
    q, k, v, new_k, new_v, table = _shared_table_case(table, positions)
    _assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, positions, table=table, block_size=32)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("layout", ["TILE_LAYOUT", "ROW_MAJOR_LAYOUT"])
def test_host_ttnn_tensor_rows_equal_the_numpy_rows(dtype, layout):
    """Host ttnn.Tensor rows (no torch here): the output and the caches are the numpy rows' bit for bit."""
    import ttnn

    q, k, v, new_k, new_v = _case(11)
    positions = [5, 100, 255]
    k_numpy, v_numpy = k.copy(), v.copy()
    rows_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32  # what the tensor holds
    expected = run_quiet(attention, q, k_numpy, v_numpy, cur_pos=positions, append_k=new_k.astype(rows_dtype),
                         append_v=new_v.astype(rows_dtype))

    def host(rows):
        return ttnn.Tensor(rows, getattr(ttnn, dtype), layout=getattr(ttnn, layout))

    out = run_quiet(attention, q, k, v, cur_pos=positions, append_k=host(new_k), append_v=host(new_v))
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(k.view(np.uint16), k_numpy.view(np.uint16))
    np.testing.assert_array_equal(v.view(np.uint16), v_numpy.view(np.uint16))
    assert not np.array_equal(k.view(np.uint16), _case(11)[1].view(np.uint16))  # the rows did land


def test_append_v_is_refused_when_v_is_k_even_as_append_k_itself():
    """V is K (one cache): its rows are appended once, so append_v is refused, also when it is the
    very object given as append_k."""
    q, k, _, new_k, _ = _case(12)
    k_before = k.copy()
    with pytest.raises(ValueError, match=r"append_v: V is K .*expected None, got ndarray of shape \[1, 3, 2, 64\] "
                                         r"\(append_k itself\)"):
        attention(q, k, k, cur_pos=[5, 100, 255], append_k=new_k, append_v=new_k)
    np.testing.assert_array_equal(k.view(np.uint16), k_before.view(np.uint16))
