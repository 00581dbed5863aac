"""protocol.py: encode/decode round trips and every refusal DESIGN.md §3 lists."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttnn_flashdecode import protocol
from ttnn_flashdecode.protocol import Field, Operand, Request
from ttnn_flashdecode.residency import Residency

RESIDENCY = Residency(q_rows=8, dim_tiles=4, block_tiles=16)


def _request(**overrides):
    fields = dict(q_rows=8, dim_tiles=4, kv_positions=1000, block_tiles=16, capacity_tiles=256,
                  q=Operand.interleaved(0x1000, 3), k=Operand.interleaved(0x2000, 128),
                  v=Operand.interleaved(0x3000, 128), constants=Operand.interleaved(0x4000),
                  out=Operand.interleaved(0x5000, 3))
    fields.update(overrides)
    return Request(**fields)


def test_encode_places_every_field_in_its_word():
    words = protocol.encode(_request(query_row=5), RESIDENCY)
    assert len(words) == protocol.WORDS
    assert words[Field.HEADS] == 8 | 5 << 8
    assert words[Field.DIM_TILES] == 4
    assert words[Field.KV_POSITIONS] == 1000
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
    capacity = protocol.padded_tiles(kv, 16)
    request = _request(q_rows=q_rows, query_row=query_row, kv_positions=kv, capacity_tiles=capacity,
                       k=Operand.interleaved(base, page))
    assert protocol.decode(protocol.encode(request, RESIDENCY)) == request


@pytest.mark.parametrize("overrides, field", [
    (dict(q_rows=0), "q_rows"),
    (dict(q_rows=33), "q_rows"),
    (dict(query_row=32), "query_row"),
    (dict(dim_tiles=0), "dim_tiles"),
    (dict(kv_positions=0), "kv_positions"),
    (dict(tile_bytes=1088), "tile_bytes"),
    (dict(block_tiles=8), "block_tiles"),
    (dict(dim_tiles=2), "dim_tiles"),
    (dict(kv_positions=256 * 32 + 1), "kv_positions"),  # padded window 288 tiles > capacity 256
    (dict(positions=3), "positions"),  # positions without the ROWS flag
    (dict(flags=4), "flags"),
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


def test_encode_refuses_padded_window_past_capacity_naming_both():
    with pytest.raises(ValueError) as info:
        protocol.encode(_request(kv_positions=4097, capacity_tiles=128), RESIDENCY)
    assert "160 tiles" in str(info.value) and "capacity_tiles 128" in str(info.value)


def test_padded_window_exactly_at_capacity_is_accepted():
    protocol.encode(_request(kv_positions=256 * 32, capacity_tiles=256), RESIDENCY)


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
    assert protocol.live_tiles(kv) == live
    assert protocol.tail_width(kv) == tail


@pytest.mark.parametrize("kv, block, padded", [(1, 16, 32), (32 * 32, 16, 32), (32 * 32 + 1, 16, 64), (33, 1, 2), (65, 1, 4)])
def test_padded_tiles_rounds_up_to_double_blocks(kv, block, padded):
    assert protocol.padded_tiles(kv, block) == padded


def test_mask_tile_selects_tail_and_kills_dead_tiles():
    assert protocol.mask_tile(1000, 0) == protocol.NO_MASK
    assert protocol.mask_tile(1000, 31) == protocol.ConstTile.TAIL_MASK + 1000 % 32
    assert protocol.mask_tile(1000, 32) == protocol.ConstTile.TAIL_MASK
    assert protocol.mask_tile(1024, 31) == protocol.NO_MASK


def test_split_word_packs_index_count_and_first_core():
    words = protocol.encode(_request(split_index=2, split_count=7, split_first_core=300), RESIDENCY)
    assert words[Field.SPLIT] == 2 | 7 << 8 | 300 << 16


@given(kv=st.integers(1, 200_000), count=st.integers(1, 255))
def test_slices_cover_live_tiles_exactly_once_and_slice_zero_is_never_empty(kv, count):
    ranges = [protocol.slice_tiles(kv, i, count) for i in range(count)]
    assert ranges[0][0] == 0 and ranges[-1][1] == protocol.live_tiles(kv)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert ranges[0][1] > 0
    sizes = [end - begin for begin, end in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_unsplit_slice_is_the_whole_live_range():
    assert protocol.slice_tiles(1000, 0, 0) == protocol.slice_tiles(1000, 0, 1) == (0, 32)


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
