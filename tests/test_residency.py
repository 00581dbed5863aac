"""residency.py: the 16-CB plan, L1 bytes, and max_block_tiles against the installed ttnn's L1."""

import dataclasses

import pytest

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op import kv_walk
from ttnn_flashdecode.emulator.arch import ArchSpec
from ttnn_flashdecode.op.residency import Residency, cb_plan, check_fits, l1_bytes, max_block_tiles

SEED = Residency(q_rows=8, dim_tiles=4, block_tiles=16)
ARCHES = ["wormhole_b0", "blackhole"]


def test_plan_has_the_sixteen_contract_cbs_with_unique_indices():
    plan = cb_plan(SEED)
    split_only = {protocol.CB.PARTIALS, protocol.CB.OUTBOX, protocol.CB.MAX_INBOX, protocol.CB.MAX_OUT,
                  protocol.CB.MAX_GLOBAL}
    paged_only = {protocol.CB.PAGE_TABLE}
    mask_only = {protocol.CB.MASK}
    lse_only = {protocol.CB.LSE, protocol.CB.LSE_STAGE}
    append_only, sparse_only = {protocol.CB.APPEND_STAGE}, {protocol.CB.SPARSE}
    optional = split_only | paged_only | mask_only | lse_only | append_only | sparse_only
    assert [cb.index for cb in plan] == sorted(int(cb) for cb in protocol.CB if cb not in optional)
    assert len({cb.index for cb in plan}) == 20  # the seed's 16, POSITIONS and the three copies of the work row


@pytest.mark.parametrize("requests, row_bytes", [(1, 128), (3, 256), (4, 320), (21, 1408)])
def test_work_cbs_hold_one_work_row(requests, row_bytes):
    """WORK (reader -> compute), READER_WORK and WRITER_WORK: one page each, one row of the WORK
    operand: the request count and 16 words per request, padded to 64 bytes."""
    residency = Residency(8, 4, 16, work_requests=requests)
    work = [cb for cb in cb_plan(residency) if cb.name in ("WORK", "READER_WORK", "WRITER_WORK")]
    assert [(cb.pages, cb.page_bytes, cb.data_format) for cb in work] == [(1, row_bytes, 8)] * 3
    with pytest.raises(ValueError, match="work_requests"):
        cb_plan(Residency(8, 4, 16, work_requests=22))


def test_attention_mask_adds_a_block_of_mask_tiles():
    masked = dataclasses.replace(SEED, mask=True)
    extra = {cb.index: cb for cb in cb_plan(masked)}.keys() - {cb.index for cb in cb_plan(SEED)}
    assert extra == {int(protocol.CB.MASK)}
    (mask,) = [cb for cb in cb_plan(masked) if cb.index == protocol.CB.MASK]
    assert (mask.pages, mask.page_bytes) == (SEED.block_tiles, 2048)
    assert masked.positions_bytes == SEED.positions_bytes  # the mask's address is a common runtime arg


def test_paged_cache_adds_one_page_table_chunk():
    paged = cb_plan(dataclasses.replace(SEED, paged=True))
    extra = {cb.index: cb for cb in paged} .keys() - {cb.index for cb in cb_plan(SEED)}
    assert extra == {int(protocol.CB.PAGE_TABLE)}
    (table,) = [cb for cb in paged if cb.index == protocol.CB.PAGE_TABLE]
    assert (table.page_bytes, table.pages) == (4 * kv_walk.PAGE_TABLE_CHUNK_ENTRIES, 1)
    assert l1_bytes(dataclasses.replace(SEED, paged=True)) == l1_bytes(SEED) + 1024


@pytest.mark.parametrize("batch, page", [(1, 32), (8, 32), (9, 64), (32, 128)])
def test_positions_cb_is_one_int32_page_of_the_whole_vector(batch, page):
    (positions,) = [cb for cb in cb_plan(Residency(8, 4, 16, batch=batch)) if cb.index == protocol.CB.POSITIONS]
    assert (positions.pages, positions.page_bytes, positions.data_format) == (1, page, 8)  # tt::DataFormat::Int32


def test_plan_page_counts():
    pages = {cb.name: cb.pages for cb in cb_plan(SEED)}
    assert pages["K"] == pages["V"] == 2 * 16 * 4
    assert pages["CONST"] == 4
    assert {cb.name: cb.pages for cb in cb_plan(dataclasses.replace(SEED, windowed=True))}["CONST"] == 6  # + window masks
    assert {cb.name: cb.pages for cb in cb_plan(dataclasses.replace(SEED, sink=True))}["CONST"] == 7  # + the sink page
    assert pages["S"] == pages["SCRATCH"] == 16
    assert all(pages[name] == 1 for name in ["M_A", "M_B", "L", "LSUM", "C"])
    assert pages["Q"] == 1
    assert all(pages[name] == 4 for name in ["O", "PV", "QSTAGE", "QS", "OUT"])
    assert pages["POSITIONS"] == 1
    assert all(pages[name] == 1 for name in ["WORK", "READER_WORK", "WRITER_WORK"])
    int32 = {"POSITIONS", "WORK", "READER_WORK", "WRITER_WORK"}
    assert all(cb.page_bytes == 2048 and cb.data_format == 5 for cb in cb_plan(SEED) if cb.name not in int32)


def test_l1_bytes_is_the_sum_of_the_cbs_and_flat_in_context():
    assert l1_bytes(SEED) == sum(cb.total_bytes for cb in cb_plan(SEED))
    # the context length is not an input: a residency serves any kv_positions
    # + the POSITIONS page and three 128-byte work rows
    assert l1_bytes(SEED) == (2 * 2 * 16 * 4 + 2 * 16 + 1 + 4 + 5 + 5 * 4) * 2048 + 32 + 3 * 128


@pytest.mark.parametrize("arch", ARCHES)
def test_seed_residency_fits(arch):
    check_fits(SEED, arch)


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("dim_tiles", [1, 2, 4, 8])
def test_max_block_tiles_is_the_largest_that_fits(arch, dim_tiles):
    best = max_block_tiles(8, dim_tiles, 2048, arch)
    assert best >= 1
    check_fits(Residency(8, dim_tiles, best), arch)
    with pytest.raises(ValueError, match="bytes"):
        check_fits(Residency(8, dim_tiles, best + 1), arch)


def test_free_l1_comes_from_the_installed_ttnn():
    wh, bh = ArchSpec.for_name("wormhole_b0"), ArchSpec.for_name("blackhole")
    assert wh.l1_bytes == 1464 * 1024 and bh.l1_bytes == 1536 * 1024  # dev_mem_map.h MEM_L1_SIZE
    assert wh.unreserved_base < wh.l1_bytes and bh.unreserved_base < bh.l1_bytes
    assert max_block_tiles(8, 4, 2048, "blackhole") >= max_block_tiles(8, 4, 2048, "wormhole_b0")


def test_too_big_residency_reports_needed_and_available_bytes():
    with pytest.raises(ValueError) as info:
        check_fits(Residency(8, 8, 64), "wormhole_b0")
    message = str(info.value)
    assert str(l1_bytes(Residency(8, 8, 64))) in message and "bytes free" in message


@pytest.mark.parametrize("bad", [dict(q_rows=0), dict(q_rows=33), dict(dim_tiles=0), dict(dim_tiles=19), dict(block_tiles=0), dict(tile_bytes=4096)])
def test_plan_refuses_bad_residency(bad):
    fields = dict(q_rows=8, dim_tiles=4, block_tiles=16, tile_bytes=2048) | bad
    with pytest.raises(ValueError):
        cb_plan(Residency(**fields))


def test_split_programs_add_an_inbox_slot_per_tree_level_and_an_outbox():
    plan = {cb.name: cb.pages for cb in cb_plan(Residency(8, 4, 16, max_split=7))}
    assert plan["PARTIALS"] == 3 * (4 + 1)  # ceil(log2(7)) levels of (O, L)
    assert plan["OUTBOX"] == 4 + 1
    assert plan["MAX_INBOX"] == 3 and plan["MAX_OUT"] == plan["MAX_GLOBAL"] == 1
    assert len(plan) == 25  # with POSITIONS and the three work-row copies
    assert l1_bytes(Residency(8, 4, 16, max_split=7)) == l1_bytes(SEED) + (4 * 5 + 3 + 1 + 1) * 2048


def test_fp32_stats_double_the_statistics_pages():
    plan = {cb.name: (cb.page_bytes, cb.data_format) for cb in cb_plan(Residency(8, 4, 16, max_split=2, fp32_stats=True))}
    for name in ["M_A", "M_B", "L", "LSUM", "C", "O", "PV", "PARTIALS", "OUTBOX", "MAX_INBOX", "MAX_OUT", "MAX_GLOBAL"]:
        assert plan[name] == (4096, 0), name
    for name in ["Q", "K", "V", "CONST", "S", "SCRATCH", "QSTAGE", "QS", "OUT"]:
        assert plan[name] == (2048, 5), name


def test_max_block_tiles_accounts_for_the_inbox():
    assert max_block_tiles(8, 4, 2048, "wormhole_b0", max_split=32) < max_block_tiles(8, 4, 2048, "wormhole_b0")
