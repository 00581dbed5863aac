"""The pinned off-hardware pair: kernels/attention_protocol.hpp decodes what protocol.encode writes.

The header is compiled by the system C++ compiler into a small host program; several thousand
hypothesis-generated requests are encoded in Python, decoded in C++, and every field and derived
count is compared with the Python side's.
"""

import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttnn_flashdecode import protocol
from ttnn_flashdecode.paths import kernel_dir
from ttnn_flashdecode.residency import Residency

HERE = __import__("pathlib").Path(__file__).parent
REQUESTS_PER_EXAMPLE = 40  # requests per C++ process launch (keeps thousands of cases fast)


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("no host C++ compiler (g++) found; the protocol pair test needs one")
    exe = tmp_path_factory.mktemp("pair") / "decode"
    subprocess.run(
        [compiler, "-std=c++20", "-O1", "-Wall", "-Werror", f"-I{kernel_dir()}",
         str(HERE / "protocol_pair" / "decode_main.cpp"), "-o", str(exe)],
        check=True,
    )
    return exe


u32 = st.integers(0, 2**32 - 1)
operands = st.builds(protocol.Operand, coord=u32, base=u32)


@st.composite
def requests(draw):
    block_tiles = draw(st.integers(1, 64))
    flags = draw(st.sampled_from([0, protocol.Flag.CHUNK, protocol.Flag.ROWS]))
    q_rows = draw(st.integers(1, 32))
    positions = draw(st.integers(1, 32 // q_rows)) if flags & protocol.Flag.ROWS else 0
    rows_per_head = q_rows if flags & protocol.Flag.CHUNK else max(positions, 1)
    kv_positions = draw(st.one_of(st.integers(rows_per_head, 4096), st.integers(rows_per_head, 2**24)))
    window = protocol.padded_tiles(kv_positions, block_tiles)
    split_count = draw(st.sampled_from([0, 1, 2, 3, 7, 64, 255]))
    request = protocol.Request(
        q_rows=q_rows,
        query_row=draw(st.integers(0, 31)),
        flags=int(flags),
        positions=positions,
        dim_tiles=draw(st.integers(1, 16)),
        kv_positions=kv_positions,
        block_tiles=block_tiles,
        capacity_tiles=draw(st.integers(window, min(2**32 - 1, window + 10_000))),
        split_count=split_count,
        split_index=draw(st.integers(0, max(split_count, 1) - 1)),
        split_first_core=draw(st.integers(0, 0xFFFF)),
        q=draw(operands), k=draw(operands), v=draw(operands), constants=draw(operands), out=draw(operands),
    )
    return request


def _kind_fields(request):
    """What decode_main prints after the blocks for a valid request (request kind and masks)."""
    kv, rows = request.kv_positions, request.rows_per_head
    shape = dict(rows_per_head=rows, heads=request.heads)
    live = protocol.live_tiles(kv)
    fields = [f"k{request.heads}", rows, request.stage_rows]
    for s in range(request.stage_rows):
        row = (request.query_row + s % rows) % protocol.TILE_POSITIONS
        fields.append(f"q{protocol.query_page(request, s, 0, 1000)}:{row}")
    fields += [f"p{protocol.mask_page(kv, t, **shape)}" for t in range(max(live - 3, 0), live)]
    fields += [f"s{protocol.slice_mask_tile(request, protocol.MASK_PAGE)}",
               protocol.slice_mask_tile(request, protocol.MASK_BEFORE_PAGE)]
    fields += [f"w{protocol.row_width(kv, t, row, rows_per_head=rows)}" for t in range(max(live - 2, 0), live) for row in range(rows)]
    fields += ["r{}:{}".format(*protocol.mask_row_source(width)) for width in range(protocol.TILE_POSITIONS + 1)]
    return fields


def _expected_line(request):
    live = protocol.live_tiles(request.kv_positions)
    window = protocol.padded_tiles(request.kv_positions, request.block_tiles)
    begin, end = protocol.slice_tiles(request.kv_positions, request.split_index, request.split_count)
    double_block = 2 * request.block_tiles
    slice_window = -(-(end - begin) // double_block) * double_block
    fields = [
        request.q_rows, request.query_row, request.flags, request.positions, request.dim_tiles,
        request.kv_positions, request.block_tiles, request.capacity_tiles, request.split_index,
        request.split_count, request.split_first_core, begin, end, slice_window,
        request.q.coord, request.q.base, request.k.coord, request.k.base, request.v.coord, request.v.base,
        request.constants.coord, request.constants.base, request.out.coord, request.out.base,
        live, protocol.tail_width(request.kv_positions), window, slice_window // request.block_tiles, 1,
    ]
    count = max(request.split_count, 1)
    parent, slot = protocol.tree_parent(request.split_index) if request.split_index else (0, 0)
    tree = [f"t{len(protocol.tree_children(request.split_index, count))}", parent, slot]
    shape = dict(rows_per_head=request.rows_per_head, heads=request.heads)
    masks = [f"m{protocol.mask_tile(request.kv_positions, t, **shape)}" for t in range(window)]
    blocks = [
        f"b{max(0, min(request.block_tiles, end - begin - b * request.block_tiles))}"
        for b in range(slice_window // request.block_tiles)
    ]
    return " ".join(map(str, fields + tree + masks + blocks + _kind_fields(request)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(requests(), min_size=REQUESTS_PER_EXAMPLE, max_size=REQUESTS_PER_EXAMPLE))
def test_header_decodes_what_encode_writes(decoder, batch):
    stdin = []
    expected = []
    for request in batch:
        residency = Residency(q_rows=request.q_rows, dim_tiles=request.dim_tiles, block_tiles=request.block_tiles)
        words = protocol.encode(request, residency)
        stdin.append(" ".join(map(str, words)))
        expected.append(_expected_line(request))
    result = subprocess.run([str(decoder)], input="\n".join(stdin) + "\n", capture_output=True, text=True, check=True)
    got = result.stdout.splitlines()
    assert len(got) == len(expected)
    for request, line, want in zip(batch, got, expected):
        assert line == want, f"header and protocol.py disagree for {request}"


def test_header_constants_match_python(decoder):
    """The enum values in the header equal protocol.py's (parsed from the header text)."""
    import re

    text = (kernel_dir() / "attention_protocol.hpp").read_text()
    header = {name: int(value) for name, value in re.findall(r"\b(k\w+)\s*=\s*(\d+)u?\b", text)}
    for field in protocol.Field:
        camel = "kWord" + "".join(part.capitalize() for part in field.name.split("_"))
        assert header[camel] == field.value, field
    cb_names = {"Q": "kCbQ", "K": "kCbK", "V": "kCbV", "CONST": "kCbConst", "S": "kCbS", "SCRATCH": "kCbScratch",
                "M_A": "kCbMA", "M_B": "kCbMB", "L": "kCbL", "LSUM": "kCbLsum", "C": "kCbC", "O": "kCbO",
                "PV": "kCbPv", "QSTAGE": "kCbQStage", "QS": "kCbQs", "OUT": "kCbOut",
                "PARTIALS": "kCbPartials", "OUTBOX": "kCbOutbox", "MAX_INBOX": "kCbMaxInbox", "MAX_OUT": "kCbMaxOut",
                "MAX_GLOBAL": "kCbMaxGlobal"}
    assert set(cb_names) == {cb.name for cb in protocol.CB}
    for cb in protocol.CB:
        assert header[cb_names[cb.name]] == cb.value, cb
    assert header["kWords"] == protocol.WORDS
    for sem in protocol.Semaphore:
        assert header["kSem" + "".join(part.capitalize() for part in sem.name.split("_"))] == sem.value, sem
    assert header["kFlagChunk"] == protocol.Flag.CHUNK and header["kFlagRows"] == protocol.Flag.ROWS
    assert re.search(r"kConstTailMaskTile = 2;", text) and re.search(r"kConstCausalMaskTile = 34;", text)
    assert re.search(r"kConstTiles = 66;", text)
    assert re.search(r"kConstPageMask = 2;", text) and re.search(r"kConstPageMaskBefore = 3;", text)
    assert protocol.MASK_PAGE == 2 and protocol.MASK_BEFORE_PAGE == 3
    assert re.search(r"kNoMask = 0xFFFFFFFFu;", text) and protocol.NO_MASK == 0xFFFFFFFF
    assert re.search(r"kGatherMask = 0xFFFFFFFEu;", text) and protocol.GATHER_MASK == 0xFFFFFFFE


def _words(request, **patch):
    """``request``'s words with word 0 / word 2 fields replaced (bypassing encode's refusals)."""
    words = protocol.encode(request, Residency(q_rows=request.q_rows, dim_tiles=request.dim_tiles,
                                               block_tiles=request.block_tiles))
    fields = dict(q_rows=request.q_rows, query_row=request.query_row, flags=request.flags,
                  positions=request.positions) | patch
    words[protocol.Field.HEADS] = fields["q_rows"] | fields["query_row"] << 8 | fields["flags"] << 16 | fields["positions"] << 24
    words[protocol.Field.KV_POSITIONS] = patch.get("kv_positions", request.kv_positions)
    return words


ROWS, CHUNK = int(protocol.Flag.ROWS), int(protocol.Flag.CHUNK)


@pytest.mark.parametrize("patch", [
    dict(flags=CHUNK | ROWS, positions=2),  # both kinds at once
    dict(flags=ROWS, positions=0),  # ROWS without positions
    dict(flags=ROWS, q_rows=8, positions=5),  # 40 stage rows > 32
    dict(flags=0, positions=3),  # positions without ROWS
    dict(flags=CHUNK, q_rows=8, kv_positions=7),  # a chunk of 8 rows ending at position 6
    dict(flags=ROWS, q_rows=2, positions=4, kv_positions=3),
    dict(flags=4),  # unknown flag
])
def test_header_refuses_what_encode_refuses(decoder, patch):
    request = protocol.Request(q_rows=2, dim_tiles=2, kv_positions=100, block_tiles=1, capacity_tiles=64)
    words = _words(request, **patch)
    with pytest.raises(ValueError):
        protocol.encode(protocol.decode(words), Residency(q_rows=2, dim_tiles=2, block_tiles=1))
    result = subprocess.run([str(decoder)], input=" ".join(map(str, words)) + "\n", capture_output=True, text=True,
                            check=True)
    assert result.stdout.split()[28] == "0", f"the header accepts {patch}: {result.stdout[:200]}"
