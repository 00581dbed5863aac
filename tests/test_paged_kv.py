"""Paged KV caches (issue 13, item 1): ttnn's layout ``[cache_blocks, n_kv_heads, block_size,
head_dim]`` and an int32 page table ``[batch, blocks_per_user]``, read on device.

Each test builds a contiguous bfloat16 cache, scatters it into a paged one through a random block
permutation (the blocks nobody owns hold NaN / +-Inf, so a wrong page-table walk cannot pass),
and checks the op on the paged cache against the float64 reference on the contiguous one, which
never sees a page table. Pass bar: tests/test_attention.py's (PCC >= 0.9999, rel-L2 <= 1e-2,
bfloat16 inputs and output, float32 statistics).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op import kv_walk
from ttnn_flashdecode.op.reference import attention_reference

from bars import assert_close, run_quiet

POISONS = (np.nan, np.inf, -np.inf)


def _bf16(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)


def _paged(rng, k, v, block_size, *, spare=3, last_live=None, unused_entry=None):
    """``(k_paged, v_paged, page_table)`` holding contiguous ``k``/``v`` ``[batch, n_kv, capacity,
    head_dim]``: user ``b``'s block ``i`` lands in a random cache block; ``spare`` more blocks
    belong to nobody. Every slot nobody attends holds poison: unowned blocks, and (given
    ``last_live``, per user) the slots past each user's position. Entries past a user's last live
    block become ``unused_entry`` when given (serving stacks leave -1 there)."""
    batch, n_kv, capacity, head_dim = k.shape
    per_user = capacity // block_size
    blocks = batch * per_user + spare
    table = rng.permutation(blocks)[: batch * per_user].reshape(batch, per_user).astype(np.int32)
    paged = []
    for i, cache in enumerate((k, v)):
        out = np.full((blocks, n_kv, block_size, head_dim), POISONS[i], dtype=np.float32)
        out[..., ::5] = POISONS[(i + 1) % 3]
        for b in range(batch):
            for e in range(per_user):
                out[table[b, e]] = np.asarray(cache[b, :, e * block_size:(e + 1) * block_size], np.float32)
                if last_live is not None:
                    stale = max(0, last_live[b] + 1 - e * block_size)
                    out[table[b, e], :, stale:] = POISONS[(b + i) % 3]
        paged.append(out.astype(ml_dtypes.bfloat16))
    if unused_entry is not None and last_live is not None:
        for b, last in enumerate(last_live):
            table[b, (last + block_size) // block_size if last >= 0 else 0:] = unused_entry
    return paged[0], paged[1], table


@pytest.mark.parametrize("split", [1, None, 3])
@pytest.mark.parametrize("block_size", [32, 64, 128])
def test_decode_through_a_random_page_table(block_size, split):
    rng = np.random.default_rng(block_size + (split or 0))
    cur_pos = [0, 31, 200, 511]
    k, v = _bf16(rng, (4, 2, 512, 64)), _bf16(rng, (4, 2, 512, 64))
    kp, vp, table = _paged(rng, k, v, block_size, last_live=cur_pos, unused_entry=-1)
    q = _bf16(rng, (1, 1, 4, 8 * 64))
    out = run_quiet(attention, q, kp, vp, cur_pos=cur_pos, page_table_tensor=table, split=split)
    assert_close(out, attention_reference(q, k, v, cur_pos=cur_pos), f"paged {block_size} split={split}")


@pytest.mark.parametrize("split", [1, 3])
def test_rows_through_a_page_table(split):
    rng = np.random.default_rng(11)
    cur_pos = [3, 70, 500]
    k, v = _bf16(rng, (3, 2, 512, 64)), _bf16(rng, (3, 2, 512, 64))
    kp, vp, table = _paged(rng, k, v, 64, last_live=cur_pos)
    q = _bf16(rng, (1, 1, 3 * 4, 4 * 64))
    out = run_quiet(attention, q, kp, vp, cur_pos=cur_pos, rows=4, page_table_tensor=table, split=split)
    assert_close(out, attention_reference(q, k, v, cur_pos=cur_pos, rows=4), f"paged rows split={split}")


@pytest.mark.parametrize("start, length, split", [(45, 7, 1), (100, 20, 3), (0, 32, None)])
def test_chunk_through_a_page_table(start, length, split):
    rng = np.random.default_rng(start)
    k, v = _bf16(rng, (2, 1, 256, 64)), _bf16(rng, (2, 1, 256, 64))
    kp, vp, table = _paged(rng, k, v, 32, last_live=[start + length - 1] * 2)
    q = _bf16(rng, (1, 1, 2 * length, 2 * 64))
    out = run_quiet(attention, q, kp, vp, chunk_start=start, page_table_tensor=table, split=split)
    assert_close(out, attention_reference(q, k, v, chunk_start=start), f"paged chunk {start}+{length} split={split}")


def test_long_page_table_crosses_reader_chunks():
    """1100 entries per user (block size 32: 35,200 positions): the reader loads its 256-entry
    chunks as its tiles need them, split and unsplit."""
    rng = np.random.default_rng(5)
    capacity = 1100 * 32
    k, v = _bf16(rng, (1, 1, capacity, 64)), _bf16(rng, (1, 1, capacity, 64))
    kp, vp, table = _paged(rng, k, v, 32, spare=0)
    q = _bf16(rng, (1, 1, 1, 2 * 64))
    for cur_pos, split in (([capacity - 1], None), ([8200], 1), ([256 * 32 - 1], 2)):
        out = run_quiet(attention, q, kp, vp, cur_pos=cur_pos, page_table_tensor=table, split=split)
        assert_close(out, attention_reference(q, k, v, cur_pos=cur_pos), f"long table at {cur_pos} split={split}")
        # The same tiles in the same order as from the contiguous cache: the same bits.
        same = run_quiet(attention, q, k, v, cur_pos=cur_pos, split=split)
        assert np.array_equal(out, same), f"{cur_pos} split={split}"


def test_users_may_share_blocks():
    """A shared prefix: both users' first blocks are the same cache block."""
    rng = np.random.default_rng(9)
    k, v = _bf16(rng, (2, 1, 128, 64)), _bf16(rng, (2, 1, 128, 64))
    k[1, :, :64], v[1, :, :64] = k[0, :, :64], v[0, :, :64]
    kp, vp, table = _paged(rng, k, v, 64, spare=1)
    table[1, 0] = table[0, 0]
    q = _bf16(rng, (1, 1, 2, 2 * 64))
    assert_close(run_quiet(attention, q, kp, vp, cur_pos=[100, 127], page_table_tensor=table),
           attention_reference(q, k, v, cur_pos=[100, 127]), "shared prefix block")


def test_idle_slot_reads_no_block():
    rng = np.random.default_rng(4)
    k, v = _bf16(rng, (2, 2, 256, 64)), _bf16(rng, (2, 2, 256, 64))
    kp, vp, table = _paged(rng, k, v, 64)
    table[1] = -1  # an idle slot's row: never read
    q = _bf16(rng, (1, 1, 2, 4 * 64))
    out = run_quiet(attention, q, kp, vp, cur_pos=[100, -1], page_table_tensor=table)
    assert_close(out, attention_reference(q, k, v, cur_pos=[100, -1]), "idle slot")
    assert not np.asarray(out, np.float64)[..., 1, :].any()


def test_program_does_not_depend_on_the_page_table():
    """Trace-safe: a new table (and new positions) runs the same program with the same runtime args."""
    rng = np.random.default_rng(2)
    k, v = _bf16(rng, (2, 2, 256, 64)), _bf16(rng, (2, 2, 256, 64))
    q = _bf16(rng, (1, 1, 2, 4 * 64))
    identities = []
    for seed, cur_pos in ((1, [10, 200]), (2, [255, 0])):
        kp, vp, table = _paged(np.random.default_rng(seed), k, v, 64)
        assert_close(run_quiet(attention, q, kp, vp, cur_pos=cur_pos, page_table_tensor=table),
               attention_reference(q, k, v, cur_pos=cur_pos), f"table {seed}")
        identities.append((last_report().program_hash, last_report().runtime_args_sha256))
    assert identities[0] == identities[1]


def test_reader_never_follows_an_entry_outside_the_cache():
    """A device-side table the host never saw: the reader skips the bad entry (its tiles read as
    zeros, nothing outside the cache is read) and reports it in the run report. The emulator is
    driven directly, as ``generic_op`` would be, so the host's own check does not run."""
    from ttnn_flashdecode.op import constants, tiles
    from ttnn_flashdecode.emulator import Emulator, tensor_accessor_compile_time_args
    from ttnn_flashdecode.op.operation import DEFAULT_ARCH, plan_program, program_for
    from ttnn_flashdecode.op.plan import Target
    from ttnn_flashdecode.op.program_factory import Addresses, operand_accessor_args, set_addresses, work_table
    from ttnn_flashdecode.op.compute_options import ComputeOptions
    from ttnn_flashdecode.op.shape import DecodeShape

    rng = np.random.default_rng(8)
    k, v = _bf16(rng, (1, 1, 256, 64)), _bf16(rng, (1, 1, 256, 64))
    kp, vp, table = _paged(rng, k, v, 64, spare=0)
    table[0, 1] = 1 << 20  # positions 64..127
    q = _bf16(rng, (1, 1, 1, 2 * 64))
    emu = Emulator(arch=DEFAULT_ARCH)
    contents = [tiles.to_tile_bytes(q), tiles.to_tile_bytes(kp), tiles.to_tile_bytes(vp),
                constants.build_constants(64, None), tiles.to_tile_bytes(np.zeros_like(q)),
                np.asarray([200], "<i4"), table.astype("<i4")]
    pages = [(len(c), c.shape[1]) for c in contents[:5]] + [(1, 4), (1, table.shape[1] * 4)]
    buffers = [emu.allocate_dram(*p) for p in pages]
    for buffer, data in zip(buffers, contents):
        emu.write_pages(buffer, data)
    shape = DecodeShape(1, 2, 1, 64, 256, cache_block_size=64, cache_blocks=4)
    accessor_args = operand_accessor_args([tensor_accessor_compile_time_args(b) for b in buffers])
    plan = plan_program(shape, Target(DEFAULT_ARCH, tuple(emu.grid), accessor_args, emu.worker_core_from_logical_core))
    work = work_table(plan)
    work_buffer = emu.allocate_dram(work.shape[0], work.shape[1] * 4)
    emu.write_pages(work_buffer, work)
    program = program_for(plan)
    set_addresses(program, Addresses(*(b.address for b in buffers), work=work_buffer.address))
    report = emu.run(program)
    assert any("page table [0][1] = 1048576 is not a block of the cache (4 blocks)" in e for e in report.errors), report.errors
    out = tiles.from_tile_bytes(emu.read_pages(buffers[4]), q.shape)
    k_zeroed, v_zeroed = k.copy(), v.copy()
    k_zeroed[:, :, 64:128] = 0
    v_zeroed[:, :, 64:128] = 0
    assert_close(out, attention_reference(q, k_zeroed, v_zeroed, cur_pos=[200]), "bad entry read as zeros")
    for buffer in buffers:
        emu.free(buffer)


@pytest.mark.parametrize("patch, message", [
    (dict(block_size=48), "multiple of 32 (whole position tiles), got 48"),
    (dict(entry=(1, 2, 99)), "page_table_tensor[1][2]: expected a block of the cache (0..10; user 1 reads entries 0..3), got 99"),
    (dict(entry=(0, 0, -1)), "page_table_tensor[0][0]: expected a block of the cache"),
    (dict(table_dtype=np.int64), "page_table_tensor: expected an int32 array"),
    (dict(table_shape=(8,)), "page_table_tensor: expected shape [batch, blocks_per_user], got [8]"),
])
def test_bad_page_tables_are_refused_by_name(patch, message):
    rng = np.random.default_rng(0)
    block = patch.get("block_size", 64)
    k, v = _bf16(rng, (2, 1, 4 * block, 64)), _bf16(rng, (2, 1, 4 * block, 64))
    if block % 32:
        kp, vp = _bf16(rng, (8, 1, block, 64)), _bf16(rng, (8, 1, block, 64))
        table = np.arange(8, dtype=np.int32).reshape(2, 4)
    else:
        kp, vp, table = _paged(rng, k, v, block)
    if "entry" in patch:
        user, entry, value = patch["entry"]
        table[user, entry] = value
    table = table.astype(patch.get("table_dtype", np.int32)).reshape(patch.get("table_shape", table.shape))
    q = _bf16(rng, (1, 1, 2, 2 * 64))
    with pytest.raises((ValueError, TypeError)) as raised:
        attention(q, kp, vp, cur_pos=[100, 4 * block - 1], page_table_tensor=table)
    assert message in str(raised.value)


def test_entries_past_a_users_position_are_not_checked():
    """-1 (or anything) past the blocks a call reads is how serving stacks leave a table."""
    rng = np.random.default_rng(1)
    k, v = _bf16(rng, (1, 1, 256, 64)), _bf16(rng, (1, 1, 256, 64))
    kp, vp, table = _paged(rng, k, v, 64, last_live=[70], unused_entry=-7)
    assert (table[0, 2:] == -7).all()
    q = _bf16(rng, (1, 1, 1, 2 * 64))
    assert_close(run_quiet(attention, q, kp, vp, cur_pos=[70], page_table_tensor=table),
           attention_reference(q, k, v, cur_pos=[70]), "unused entries")


def test_page_table_walk_matches_ttnn_layout():
    """The host twin of the header's walk (pinned to it by the pair test) addresses the tile a
    numpy view of ttnn's paged layout puts there."""
    heads, block_tiles, dim_tiles, blocks = 3, 2, 2, 5
    ids = np.arange(blocks * heads * block_tiles * dim_tiles).reshape(blocks, heads, block_tiles, dim_tiles)
    for head in range(heads):
        for tile in range(2 * block_tiles):
            cache_block = (tile * 3 + 1) % blocks
            page = kv_walk.cache_tile_page(head * block_tiles * dim_tiles, tile, cache_block, block_tiles,
                                            heads * block_tiles * dim_tiles, dim_tiles)
            assert page == ids[cache_block, head, tile % block_tiles, 0]


@pytest.mark.requires_device
def test_paged_decode_on_a_card(device):
    """On a card: a paged bfloat16 cache and page table as device tensors. Skips without one."""
    import ttnn

    rng = np.random.default_rng(6)
    cur_pos = [5, 300]
    k, v = _bf16(rng, (2, 2, 512, 64)), _bf16(rng, (2, 2, 512, 64))
    kp, vp, table = _paged(rng, k, v, 64, last_live=cur_pos, unused_entry=-1)
    q = _bf16(rng, (1, 1, 2, 8 * 64))

    def upload(array, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT):
        host = ttnn.Tensor(np.asarray(array, np.float32 if dtype == ttnn.bfloat16 else np.int32), dtype, layout=layout)
        return host.to(device, ttnn.DRAM_MEMORY_CONFIG)

    out = attention(upload(q), upload(kp), upload(vp), cur_pos_tensor=upload(np.asarray(cur_pos), ttnn.int32,
                    ttnn.ROW_MAJOR_LAYOUT), page_table_tensor=upload(table, ttnn.int32, ttnn.ROW_MAJOR_LAYOUT))
    got = np.asarray(ttnn.to_layout(out.cpu(), ttnn.ROW_MAJOR_LAYOUT).to_list(), dtype=np.float64)
    assert_close(got, attention_reference(q, k, v, cur_pos=cur_pos), "paged on a card")


def test_page_table_batch_and_length_refusals_name_the_page_table():
    """The batch comes from the page table's rows, and its capacity from its entries: when they do
    not fit, the messages say so (not "k's batch" or "a capacity of k")."""
    rng = np.random.default_rng(0)
    k, v = _bf16(rng, (2, 1, 4 * 64, 64)), _bf16(rng, (2, 1, 4 * 64, 64))
    kp, vp, table = _paged(rng, k, v, 64)
    q = _bf16(rng, (1, 1, 2, 2 * 64))
    with pytest.raises(ValueError, match=r"q: expected 3 rows \(one per user, page_table_tensor's rows\), got 2"):
        attention(q, kp, vp, cur_pos=[1, 2, 3], page_table_tensor=np.concatenate([table, table[:1]]))
    odd, _, odd_table = _paged(rng, k[:, :, :96], v[:, :, :96], 32)  # 3 entries of 32: 3 tiles, not double blocks
    with pytest.raises(ValueError, match=r"page_table_tensor \(3 entries x block size 32\).*multiple of 2 entries per "
                                         r"user \(pad rows with -1"):
        attention(q, odd, odd, cur_pos=[1, 2], page_table_tensor=odd_table)
    padded = np.concatenate([odd_table, np.full((2, 1), -1, np.int32)], axis=1)  # the fix the message gives
    assert_close(run_quiet(attention, q, odd, odd, cur_pos=[40, 95], page_table_tensor=padded),
                 attention_reference(q, k[:, :, :96], k[:, :, :96], cur_pos=[40, 95]), "padded table")
