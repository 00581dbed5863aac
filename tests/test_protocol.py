"""protocol.py: encode/decode round trips and every refusal DESIGN.md §3 lists."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op import kv_walk
from ttnn_flashdecode.op.protocol import Field, Operand, Request
from ttnn_flashdecode.op.residency import Residency

RESIDENCY = Residency(q_rows=8, dim_tiles=4, block_tiles=16)
CHUNK, ROWS = protocol.Flag.CHUNK, protocol.Flag.ROWS


def _request(**overrides):
    fields = dict(q_rows=8, dim_tiles=4, kv_positions=1000, block_tiles=16, capacity_tiles=256,
                  q=Operand.interleaved(0x1000, 3), k=Operand.interleaved(0x2000, 128),
                  v=Operand.interleaved(0x3000, 128), constants=Operand.interleaved(0x4000),
                  out=Operand.interleaved(0x5000, 3))
    fields.update(overrides)
    return Request(**fields)


def test_encode_places_every_field_in_its_word():
    words = protocol.encode(_request(query_row=5, user=7), RESIDENCY)
    assert len(words) == protocol.WORDS
    assert words[Field.HEADS] == 8 | 5 << 8
    assert words[Field.DIM_TILES] == 4
    assert words[Field.USER] == 7
    assert 1000 not in words  # kv_positions is not on the wire (the POSITIONS operand holds it)
    assert words[Field.BLOCK_TILES] == 16
    assert words[Field.CAPACITY_TILES] == 256
    assert words[Field.SPLIT] == 0
    assert words[Field.Q_COORD] == protocol.INTERLEAVED_BIT | 3 and words[Field.Q_BASE] == 0x1000
    assert words[Field.K_COORD] == protocol.INTERLEAVED_BIT | 128 and words[Field.K_BASE] == 0x2000
    assert words[Field.CONST_COORD] == protocol.INTERLEAVED_BIT and words[Field.CONST_BASE] == 0x4000
    assert words[Field.OUT_BASE] == 0x5000


def test_rows_mode_positions_live_in_byte_three():
    words = protocol.encode(_request(q_rows=2, flags=protocol.Flag.ROWS, positions=4), RESIDENCY)
    assert words[Field.HEADS] == 2 | protocol.Flag.ROWS << 16 | 4 << 24


@given(q_rows=st.integers(1, 32), query_row=st.integers(0, 31), kv=st.integers(1, 100_000),
       base=st.integers(0, 2**32 - 1), page=st.integers(0, 2**31 - 1))
def test_decode_inverts_encode(q_rows, query_row, kv, base, page):
    capacity = kv_walk.padded_tiles(kv, 16)
    request = _request(q_rows=q_rows, query_row=query_row, kv_positions=0, capacity_tiles=capacity,
                       k=Operand.interleaved(base, page), user=kv)
    assert protocol.decode(protocol.encode(request, RESIDENCY)) == request


@pytest.mark.parametrize("overrides, field", [
    (dict(q_rows=0), "q_rows"),
    (dict(q_rows=33), "q_rows"),
    (dict(query_row=32), "query_row"),
    (dict(dim_tiles=0), "dim_tiles"),
    (dict(capacity_tiles=0), "capacity_tiles"),
    (dict(capacity_tiles=48), "capacity_tiles"),  # not whole double blocks of 16 tiles
    (dict(user=2**32), "user"),
    (dict(tile_bytes=1088), "tile_bytes"),
    (dict(block_tiles=8), "block_tiles"),
    (dict(dim_tiles=2), "dim_tiles"),
    (dict(positions=3), "positions"),  # positions without the ROWS flag
    (dict(flags=8), "flags"),
    (dict(flags=4 | 1), "flags"),  # HEAD_ROWS is for decode only
    (dict(split_count=256), "split_count"),
    (dict(split_count=3, split_index=3), "split_index"),
    (dict(split_index=1), "split_index"),  # a slice index without a split
    (dict(split_count=2, split_first_core=65536), "split_first_core"),
    (dict(k=Operand(coord=2**32, base=0)), "k.coord"),
    (dict(out=Operand(coord=0, base=-1)), "out.base"),
])
def test_encode_refuses_with_field_value_and_bound(overrides, field):
    with pytest.raises(ValueError, match=field) as info:
        protocol.encode(_request(**overrides), RESIDENCY)
    message = str(info.value)
    assert "expected" in message and "got" in message


def test_encode_refuses_a_cache_of_partial_double_blocks_naming_both():
    with pytest.raises(ValueError) as info:
        protocol.encode(_request(capacity_tiles=144), RESIDENCY)
    assert "2 * block_tiles = 32" in str(info.value) and "got 144" in str(info.value)


@pytest.mark.parametrize("flags, q_rows, positions, position, want", [
    (0, 8, 0, 99, 100),          # decode: the last row attends 0..position
    (0, 8, 0, 256 * 32 - 1, 256 * 32),
    (0, 8, 0, 256 * 32, 256 * 32),  # past the cache: clamped to its last position
    (0, 8, 0, -1, 0),            # -1: an idle slot, no live position
    (0, 8, 0, -5, 0),            # below -1: idle too (and reported: position_clamped)
    (ROWS, 2, 4, 10, 11),
    (ROWS, 2, 4, 1, 4),          # ROWS' first row must attend position 0
    (CHUNK, 7, 0, 40, 47),       # CHUNK: start + C
    (CHUNK, 7, 0, 256 * 32 - 3, 256 * 32),
    (CHUNK, 7, 0, -2**31, 0),
])
def test_kv_positions_at_derives_and_clamps(flags, q_rows, positions, position, want):
    request = _request(q_rows=q_rows, flags=flags, positions=positions)
    assert kv_walk.kv_positions_at(request, position) == want
    offset = q_rows if flags == CHUNK else 1
    assert kv_walk.position_clamped(request, position) == (position != -1 and want != position + offset)
    offset = q_rows if flags == CHUNK else 1
    assert kv_walk.position_clamped(request, position) == (position != -1 and want != position + offset)


def test_operand_interleaved_refuses_pages_past_31_bits():
    with pytest.raises(ValueError, match="first_page"):
        Operand.interleaved(0, 2**31)


def test_decode_refuses_wrong_length_and_oversized_words():
    with pytest.raises(ValueError, match="16 words"):
        protocol.decode([0] * 15)
    with pytest.raises(ValueError, match=r"words\[3\]"):
        protocol.decode([0, 0, 0, 2**32] + [0] * 12)


@pytest.mark.parametrize("kv, live, tail", [(1, 1, 1), (31, 1, 31), (32, 1, 0), (33, 2, 1), (8192, 256, 0)])
def test_live_tiles_and_tail_width(kv, live, tail):
    assert kv_walk.live_tiles(kv) == live
    assert kv_walk.tail_width(kv) == tail


@pytest.mark.parametrize("kv, block, padded", [(1, 16, 32), (32 * 32, 16, 32), (32 * 32 + 1, 16, 64), (33, 1, 2), (65, 1, 4)])
def test_padded_tiles_rounds_up_to_double_blocks(kv, block, padded):
    assert kv_walk.padded_tiles(kv, block) == padded


def test_mask_tile_selects_tail_and_kills_dead_tiles():
    assert kv_walk.mask_tile(1000, 0) == protocol.NO_MASK
    assert kv_walk.mask_tile(1000, 31) == protocol.ConstTile.TAIL_MASK + 1000 % 32
    assert kv_walk.mask_tile(1000, 32) == protocol.ConstTile.TAIL_MASK
    assert kv_walk.mask_tile(1024, 31) == protocol.NO_MASK


def test_split_word_packs_index_count_and_first_core():
    words = protocol.encode(_request(split_index=2, split_count=7, split_first_core=300), RESIDENCY)
    assert words[Field.SPLIT] == 2 | 7 << 8 | 300 << 16


@given(kv=st.integers(1, 200_000), count=st.integers(1, 255))
def test_slices_cover_live_tiles_exactly_once_and_slice_zero_is_never_empty(kv, count):
    ranges = [kv_walk.slice_tiles(kv, i, count) for i in range(count)]
    assert ranges[0][0] == 0 and ranges[-1][1] == kv_walk.live_tiles(kv)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert ranges[0][1] > 0
    sizes = [end - begin for begin, end in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_unsplit_slice_is_the_whole_live_range():
    assert kv_walk.slice_tiles(1000, 0, 0) == kv_walk.slice_tiles(1000, 0, 1) == (0, 32)


@pytest.mark.parametrize("count", [2, 3, 7, 16, 64, 255])
def test_combine_tree_reaches_every_slice_once_within_its_depth(count):
    seen, depth = {0}, {0: 0}
    frontier = [0]
    while frontier:
        node = frontier.pop()
        for level, child in enumerate(protocol.tree_children(node, count)):
            assert protocol.tree_parent(child) == (node, level)  # child lands in slot = its level
            assert child not in seen
            seen.add(child)
            depth[child] = depth[node] + 1
            frontier.append(child)
    assert seen == set(range(count))
    assert max(depth.values()) <= protocol.tree_levels(count)
    assert len(protocol.tree_children(0, count)) == protocol.tree_levels(count)  # the root fills every inbox slot


# ------------------------------------------------------------------ CHUNK and ROWS request kinds



@pytest.mark.parametrize("overrides, field", [
    (dict(flags=CHUNK | ROWS, positions=1, q_rows=2), "flags"),  # both kinds at once
    (dict(flags=ROWS, positions=0), "positions"),  # ROWS needs its positions
    (dict(flags=ROWS, q_rows=8, positions=5), "positions"),  # 40 rows > one tile
    (dict(flags=ROWS, q_rows=3, positions=11), "positions"),  # 33 rows
    (dict(flags=CHUNK, q_rows=33), "q_rows"),  # a chunk longer than 32
])
def test_encode_refuses_bad_chunk_and_rows_requests(overrides, field):
    with pytest.raises(ValueError, match=field) as info:
        protocol.encode(_request(**overrides), RESIDENCY)
    assert "expected" in str(info.value) and "got" in str(info.value)


def test_encode_accepts_the_largest_rows_and_chunk_requests():
    protocol.encode(_request(flags=ROWS, q_rows=8, positions=4), RESIDENCY)
    protocol.encode(_request(flags=ROWS, q_rows=1, positions=32, kv_positions=32), RESIDENCY)
    protocol.encode(_request(flags=CHUNK, q_rows=32, kv_positions=32, query_row=31), RESIDENCY)  # straddles row tiles


@given(flags=st.sampled_from([CHUNK, ROWS]), q_rows=st.integers(1, 32), query_row=st.integers(0, 31),
       extra=st.integers(0, 100_000), data=st.data())
def test_decode_inverts_encode_for_chunk_and_rows(flags, q_rows, query_row, extra, data):
    positions = data.draw(st.integers(1, 32 // q_rows)) if flags == ROWS else 0
    rows = q_rows if flags == CHUNK else positions
    kv = rows + extra
    request = _request(q_rows=q_rows, query_row=query_row, flags=int(flags), positions=positions, kv_positions=0,
                       capacity_tiles=kv_walk.padded_tiles(kv, 16))
    decoded = protocol.decode(protocol.encode(request, RESIDENCY))
    assert decoded == request
    assert (decoded.rows_per_head, decoded.heads) == (rows, 1 if flags == CHUNK else q_rows)


def test_request_kind_derived_counts():
    decode = _request(q_rows=8)
    chunk = _request(q_rows=7, flags=CHUNK)
    rows = _request(q_rows=3, flags=ROWS, positions=10)
    assert (decode.heads, decode.rows_per_head, decode.stage_rows) == (8, 1, 8)
    assert (chunk.heads, chunk.rows_per_head, chunk.stage_rows) == (1, 7, 7)
    assert (rows.heads, rows.rows_per_head, rows.stage_rows) == (3, 10, 30)


def test_query_page_continues_into_the_next_row_tile():
    rows = _request(q_rows=3, flags=ROWS, positions=10, query_row=30)
    width = 48
    # stage row 0 = head 0, row 0 -> Q row 30 (row tile 0); stage row 2 = head 0, row 2 -> Q row 32 (row tile 1)
    assert kv_walk.query_page(rows, 0, 1, width) == 1
    assert kv_walk.query_page(rows, 2, 1, width) == width + 1
    assert kv_walk.query_page(rows, 12, 0, width) == width + 4  # head 1 (dim tiles 4), row 2


def test_mask_tile_for_decode_is_the_tail_mask_as_before():
    for kv in (1, 31, 32, 33, 1000, 1024):
        for tile in range(kv_walk.padded_tiles(kv, 1)):
            live = kv_walk.live_tiles(kv)
            want = (protocol.NO_MASK if tile < live - 1 or (tile == live - 1 and kv % 32 == 0)
                    else protocol.ConstTile.TAIL_MASK + kv % 32 if tile == live - 1 else protocol.ConstTile.TAIL_MASK)
            assert kv_walk.mask_tile(kv, tile) == want


@pytest.mark.parametrize("length", [2, 7, 31, 32])
def test_a_tile_aligned_chunk_takes_causal_mask_c_minus_one(length):
    for start in (0, 64, 1024):
        kv = start + length
        last = start // 32
        assert kv_walk.mask_tile(kv, last, rows_per_head=length, heads=1) == protocol.ConstTile.CAUSAL_MASK + length - 1
        assert kv_walk.mask_page(kv, last, rows_per_head=length, heads=1) == protocol.MASK_PAGE
        assert all(kv_walk.mask_tile(kv, t, rows_per_head=length, heads=1) == protocol.NO_MASK for t in range(last))


def test_a_mid_tile_chunk_gathers_the_masks_of_the_last_two_tiles():
    kv = 45 + 32  # positions 45..76: rows 0..18 end in tile 1, rows 19..31 in tile 2
    shape = dict(rows_per_head=32, heads=1)
    assert [kv_walk.mask_tile(kv, t, **shape) for t in range(3)] == [protocol.NO_MASK, protocol.GATHER_MASK,
                                                                      protocol.GATHER_MASK]
    assert [kv_walk.mask_page(kv, t, **shape) for t in range(3)] == [protocol.NO_MASK, protocol.MASK_BEFORE_PAGE,
                                                                      protocol.MASK_PAGE]
    assert kv_walk.row_width(kv, 1, 0, rows_per_head=32) == 14 and kv_walk.row_width(kv, 1, 18, rows_per_head=32) == 32
    assert kv_walk.row_width(kv, 2, 18, rows_per_head=32) == 0 and kv_walk.row_width(kv, 2, 31, rows_per_head=32) == 13


def test_mask_row_sources():
    assert kv_walk.mask_row_source(0) == (protocol.ConstTile.TAIL_MASK, 0)
    assert kv_walk.mask_row_source(17) == (protocol.ConstTile.TAIL_MASK + 17, 0)
    assert kv_walk.mask_row_source(32) == (protocol.ConstTile.CAUSAL_MASK + 31, 31)


@given(flags=st.sampled_from([0, CHUNK, ROWS]), q_rows=st.integers(1, 32), extra=st.integers(0, 200), data=st.data())
def test_masks_built_from_the_constants_give_every_row_its_own_positions(flags, q_rows, extra, data):
    """What the reader puts in CONST pages 2/3 (a whole constants tile, or rows gathered from
    mask_row_source), added to each live tile, leaves stage row s live exactly on positions
    0..(its own position): the float64 truth, independent of the protocol's tile arithmetic."""
    from ttnn_flashdecode.op.constants import constant_tiles

    positions = data.draw(st.integers(1, 32 // q_rows)) if flags == ROWS else 0
    request = _request(q_rows=q_rows, flags=int(flags), positions=positions,
                       kv_positions=(q_rows if flags == CHUNK else max(positions, 1)) + extra)
    tiles = constant_tiles(64)
    heads, rows, kv = request.heads, request.rows_per_head, request.kv_positions
    for tile in range(kv_walk.live_tiles(kv)):
        source = kv_walk.mask_tile(kv, tile, rows_per_head=rows, heads=heads)
        if source == protocol.NO_MASK:
            mask = np.zeros((32, 32))
        elif source == protocol.GATHER_MASK:
            mask = np.zeros((32, 32))
            for s in range(request.stage_rows):
                page, row = kv_walk.mask_row_source(kv_walk.row_width(kv, tile, s % rows, rows_per_head=rows))
                mask[s] = tiles[page, row]
        else:
            mask = tiles[source]
        for s in range(request.stage_rows):
            own = kv - rows + s % rows  # stage row s's last position
            live = np.arange(tile * 32, tile * 32 + 32) <= own
            assert ((mask[s] == 0) == live).all(), (tile, s, source)


def test_split_slices_fetch_only_the_masks_of_the_tiles_they_own():
    def fetched(index, count):
        request = _request(q_rows=32, flags=CHUNK, kv_positions=77, split_index=index, split_count=count)
        return kv_walk.slice_mask_tile(request, protocol.MASK_PAGE), kv_walk.slice_mask_tile(request, protocol.MASK_BEFORE_PAGE)

    # 3 live tiles, tiles 1 and 2 masked; 2 slices own [0, 2) and [2, 3)
    assert fetched(0, 2) == (protocol.NO_MASK, protocol.GATHER_MASK)
    assert fetched(1, 2) == (protocol.GATHER_MASK, protocol.NO_MASK)
    assert fetched(0, 0) == (protocol.GATHER_MASK, protocol.GATHER_MASK)  # not split: both
    assert fetched(5, 7) == (protocol.ConstTile.TAIL_MASK, protocol.NO_MASK)  # an empty slice: the kill mask


def test_the_largest_split_fits_the_per_core_semaphores():
    assert len(protocol.semaphore_ids(protocol.MAX_SPLIT)) == 5 + 8 <= protocol.SEMAPHORES_PER_CORE
    assert protocol.semaphore_ids(1) == [0, 1, 2, 3, 4]
