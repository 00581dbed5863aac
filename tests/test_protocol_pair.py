"""The pinned off-hardware pair: kernels/attention_protocol.hpp decodes what protocol.encode writes.

The header is compiled by the system C++ compiler into a small host program; several thousand
hypothesis-generated requests are encoded in Python, decoded in C++, and every field and derived
count is compared with the Python side's.
"""

import dataclasses
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttnn_flashdecode.op import constants, protocol, tiles
from ttnn_flashdecode.op import kv_walk
from ttnn_flashdecode.op.paths import kernel_dir
from ttnn_flashdecode.op.program_factory import MAX_REQUESTS_PER_CORE, MAX_RUNTIME_ARGS, OPERANDS
from ttnn_flashdecode.op.residency import Residency

HERE = pathlib.Path(__file__).parent
REQUESTS_PER_EXAMPLE = 40  # requests per C++ process launch (keeps thousands of cases fast)


def _build_pair_program(tmp_path_factory, source: str):
    """Compile ``tests/protocol_pair/<source>`` (which includes the kernel header) into a host program."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("no host C++ compiler (g++) found; the protocol pair test needs one")
    exe = tmp_path_factory.mktemp("pair") / pathlib.Path(source).stem
    subprocess.run(
        [compiler, "-std=c++20", "-O1", "-Wall", "-Werror", f"-I{kernel_dir()}", str(HERE / "protocol_pair" / source),
         "-o", str(exe)],
        check=True,
    )
    return exe


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    return _build_pair_program(tmp_path_factory, "decode_main.cpp")


u32 = st.integers(0, 2**32 - 1)
operands = st.builds(protocol.Operand, coord=u32, base=u32)


@st.composite
def requests(draw):
    block_tiles = draw(st.integers(1, 64))
    flags = draw(st.sampled_from([0, protocol.Flag.CHUNK, protocol.Flag.ROWS, protocol.Flag.HEAD_ROWS]))
    q_rows = draw(st.integers(1, 32))
    positions = draw(st.integers(1, 32 // q_rows)) if flags & protocol.Flag.ROWS else 0
    rows_per_head = q_rows if flags & protocol.Flag.CHUNK else max(positions, 1)
    kv_positions = draw(st.one_of(st.integers(rows_per_head, 4096), st.integers(rows_per_head, 2**24)))
    window = kv_walk.padded_tiles(kv_positions, block_tiles)
    double_block = 2 * block_tiles
    split_count = draw(st.sampled_from([0, 1, 2, 3, 7, 64, 255]))
    capacity_tiles = draw(st.integers(window // double_block, (window + 10_000) // double_block)) * double_block
    # The POSITIONS entry: mostly the one that gives kv_positions, sometimes anything an int32 holds
    # (idle -1, negative, past the cache), which the kernels clamp.
    offset = q_rows if flags & protocol.Flag.CHUNK else 1
    position = draw(st.one_of(st.just(kv_positions - offset), st.integers(-2**31, 2**31 - 1),
                              st.integers(-40, 40), st.just(capacity_tiles * 32 - offset + 1)))
    # The sliding window (not on the wire: a named compile-time arg): none, shorter than a tile,
    # around the live length, or anything.
    window = draw(st.one_of(st.just(0), st.integers(1, 40), st.integers(max(kv_positions - 70, 1), kv_positions + 40),
                            st.integers(1, 2**20)))
    request = protocol.Request(
        window=window,
        q_rows=q_rows,
        query_row=draw(st.integers(0, 31)),
        flags=int(flags),
        positions=positions,
        dim_tiles=draw(st.integers(1, 16)),
        kv_positions=kv_positions,
        block_tiles=block_tiles,
        capacity_tiles=capacity_tiles,
        split_count=split_count,
        split_index=draw(st.integers(0, max(split_count, 1) - 1)),
        split_first_core=draw(st.integers(0, 0xFFFF)),
        user=draw(u32),
        q=draw(operands), k=draw(operands), v=draw(operands), constants=draw(operands), out=draw(operands),
    )
    return request, position


def _kind_fields(request):
    """What decode_main prints after the blocks for a valid request (request kind and masks)."""
    kv, rows = request.kv_positions, request.rows_per_head
    shape = dict(rows_per_head=rows, heads=request.heads)
    live = kv_walk.live_tiles(kv)
    fields = [f"k{request.heads}", rows, request.stage_rows]
    for s in range(request.stage_rows):
        row = kv_walk.query_row_of(request, s) % protocol.TILE_POSITIONS
        fields.append(f"q{kv_walk.query_page(request, s, 0, 1000)}:{row}")
    fields += [f"p{kv_walk.mask_page(kv, t, **shape)}" for t in range(max(live - 3, 0), live)]
    fields += [f"s{kv_walk.slice_mask_tile(request, protocol.MASK_PAGE)}",
               kv_walk.slice_mask_tile(request, protocol.MASK_BEFORE_PAGE)]
    fields += [f"w{kv_walk.row_width(kv, t, row, rows_per_head=rows)}" for t in range(max(live - 2, 0), live) for row in range(rows)]
    window = dict(rows_per_head=rows)
    first = kv_walk.window_first_tile(kv, request.window, **window)
    fields += [f"f{first}", live - first, kv_walk.window_stale_rows(kv, request.window, **window)]
    fields += [f"a{kv_walk.window_start(kv, request.window, row, **window)}" for row in range(rows)]
    for t in (first, first + 1):
        fields.append(f"g{kv_walk.window_page(kv, request.window, t, **window)}")
        fields += [f"d{kv_walk.window_dead(kv, request.window, t, row, **window)}" for row in range(rows)]
    fields += [f"h{int(kv_walk.slice_fills_window_page(request, protocol.WINDOW_PAGE))}",
               int(kv_walk.slice_fills_window_page(request, protocol.WINDOW_NEXT_PAGE))]
    fields += ["r{}:{}".format(*kv_walk.mask_row_source(width)) for width in range(protocol.TILE_POSITIONS + 1)]
    return fields


def _expected_line(request, position):
    """What decode_main prints for ``request`` (its ``kv_positions`` ignored) and POSITIONS entry
    ``position``: kv_positions comes from :func:`kv_walk.kv_positions_at`, as on device."""
    kv = kv_walk.kv_positions_at(request, position)
    head = [f"u{request.user}", "l1", f"c{int(kv_walk.position_clamped(request, position))}"]
    request = dataclasses.replace(request, kv_positions=kv)
    live = kv_walk.live_tiles(request.kv_positions)
    window = kv_walk.padded_tiles(request.kv_positions, request.block_tiles)
    begin, end = kv_walk.request_slice(request)
    double_block = 2 * request.block_tiles
    slice_window = -(-(end - begin) // double_block) * double_block
    fields = [
        request.q_rows, request.query_row, request.flags, request.positions, request.dim_tiles,
        request.kv_positions, request.block_tiles, request.capacity_tiles, request.split_index,
        request.split_count, request.split_first_core, begin, end, slice_window,
        request.q.coord, request.q.base, request.k.coord, request.k.base, request.v.coord, request.v.base,
        request.constants.coord, request.constants.base, request.out.coord, request.out.base,
        live, kv_walk.tail_width(request.kv_positions), window, slice_window // request.block_tiles, 1,
    ]
    count = max(request.split_count, 1)
    parent, slot = protocol.tree_parent(request.split_index) if request.split_index else (0, 0)
    tree = [f"t{len(protocol.tree_children(request.split_index, count))}", parent, slot]
    shape = dict(rows_per_head=request.rows_per_head, heads=request.heads)
    masks = [f"m{kv_walk.mask_tile(request.kv_positions, t, **shape)}" for t in range(window)]
    blocks = [
        f"b{max(0, min(request.block_tiles, end - begin - b * request.block_tiles))}"
        for b in range(slice_window // request.block_tiles)
    ]
    return " ".join(map(str, head + fields + tree + masks + blocks + _kind_fields(request)))


# 40 x 40 = 1,600 requests: the expected line walks every window tile in Python (~70 ms a request);
# every header function is also pinned on its own below (test_header_methods_match_their_twins).
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(requests(), min_size=REQUESTS_PER_EXAMPLE, max_size=REQUESTS_PER_EXAMPLE))
def test_header_decodes_what_encode_writes(decoder, batch):
    stdin = []
    expected = []
    for request, position in batch:
        residency = Residency(q_rows=request.q_rows, dim_tiles=request.dim_tiles, block_tiles=request.block_tiles)
        words = protocol.encode(request, residency)
        stdin.append(" ".join(map(str, words + [position, request.window])))
        expected.append(_expected_line(request, position))
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
                "MAX_GLOBAL": "kCbMaxGlobal", "POSITIONS": "kCbPositions",
                "PAGE_TABLE": "kCbPageTable", "MASK": "kCbMask", "WORK": "kCbWork", "READER_WORK": "kCbReaderWork",
                "WRITER_WORK": "kCbWriterWork", "LSE": "kCbLse", "LSE_STAGE": "kCbLseStage",
                "APPEND_STAGE": "kCbAppendStage",
                "SPARSE": "kCbSparse"}
    assert set(cb_names) == {cb.name for cb in protocol.CB}
    for cb in protocol.CB:
        assert header[cb_names[cb.name]] == cb.value, cb
    assert header["kWords"] == protocol.WORDS
    assert header["kRowRequestCount"] == protocol.ROW_REQUEST_COUNT
    assert header["kRowHeader"] == protocol.ROW_HEADER
    assert header["kPageTableChunkEntries"] == kv_walk.PAGE_TABLE_CHUNK_ENTRIES
    assert header["kMaxRequestsPerCore"] == MAX_REQUESTS_PER_CORE == protocol.MAX_REQUESTS_PER_CORE
    for arg in protocol.CommonArg:  # the common runtime args: addresses in OPERANDS order, then the NoC table
        assert header["kCommon" + "".join(part.capitalize() for part in arg.name.split("_"))] == arg.value, arg
    assert [a.name for a in protocol.CommonArg][:len(OPERANDS)] == [f"{o.upper()}_BASE".replace("CONSTANTS", "CONST") for o in OPERANDS]
    assert protocol.CommonArg.CORE_TABLE + 64 <= MAX_RUNTIME_ARGS
    for sem in protocol.Semaphore:
        assert header["kSem" + "".join(part.capitalize() for part in sem.name.split("_"))] == sem.value, sem
    assert header["kFlagChunk"] == protocol.Flag.CHUNK and header["kFlagRows"] == protocol.Flag.ROWS
    assert re.search(r"kConstTailMaskTile = 2;", text) and re.search(r"kConstCausalMaskTile = 34;", text)
    assert re.search(r"kConstTiles = 66;", text)
    assert re.search(r"kConstPageMask = 2;", text) and re.search(r"kConstPageMaskBefore = 3;", text)
    assert re.search(r"kConstPageWindow = 4;", text) and re.search(r"kConstPageWindowNext = 5;", text)
    assert (protocol.WINDOW_PAGE, protocol.WINDOW_NEXT_PAGE) == (4, 5)
    assert re.search(r"kConstPageSink = 6;", text) and protocol.SINK_PAGE == 6
    assert re.search(r"kConstSinkTile = kConstTiles;", text) and protocol.ConstTile.SINK == protocol.ConstTile.COUNT
    assert protocol.MASK_PAGE == 2 and protocol.MASK_BEFORE_PAGE == 3
    assert re.search(r"kNoMask = 0xFFFFFFFFu;", text) and protocol.NO_MASK == 0xFFFFFFFF
    assert re.search(r"kGatherMask = 0xFFFFFFFEu;", text) and protocol.GATHER_MASK == 0xFFFFFFFE
    # The reader fills the kill mask from this word: it must be the constants operand's tail mask 0, word for word.
    (word,) = re.findall(r"kKillMaskWord = 0x([0-9A-F]{8})u;", text)
    kill = constants.build_constants(64)[protocol.ConstTile.TAIL_MASK].view("<u4")
    assert (kill == int(word, 16)).all(), f"kKillMaskWord 0x{word} vs the constants' kill mask 0x{int(kill[0]):08X}"


def _words(request, **patch):
    """``request``'s words with word 0 fields replaced (bypassing encode's refusals)."""
    words = protocol.encode(request, Residency(q_rows=request.q_rows, dim_tiles=request.dim_tiles,
                                               block_tiles=request.block_tiles))
    fields = dict(q_rows=request.q_rows, query_row=request.query_row, flags=request.flags,
                  positions=request.positions) | {k: v for k, v in patch.items() if k != "capacity_tiles"}
    words[protocol.Field.HEADS] = fields["q_rows"] | fields["query_row"] << 8 | fields["flags"] << 16 | fields["positions"] << 24
    return words


ROWS, CHUNK, HEAD_ROWS = int(protocol.Flag.ROWS), int(protocol.Flag.CHUNK), int(protocol.Flag.HEAD_ROWS)


KIND_REFUSALS = [
    dict(flags=CHUNK | ROWS, positions=2),  # both kinds at once
    dict(flags=ROWS, positions=0),  # ROWS without positions
    dict(flags=ROWS, q_rows=8, positions=5),  # 40 stage rows > 32
    dict(flags=0, positions=3),  # positions without ROWS
    dict(flags=8),  # unknown flag
    dict(flags=HEAD_ROWS | CHUNK),  # heads on rows: decode only
    dict(flags=HEAD_ROWS | ROWS, positions=2),
]
REFUSED_PATCHES = KIND_REFUSALS + [
    dict(capacity_tiles=63),  # not whole double blocks: the last position's window leaves the cache
    dict(capacity_tiles=0),
]


@pytest.mark.parametrize("flags", [0, protocol.Flag.HEAD_ROWS])
def test_header_row_tiles_of_a_wide_group(functions, flags):
    """Row tile 0 of a 64- or 128-head group (q_rows 32, decode, both Q layouts, split or not) is
    valid with several row tiles and its row tiles' pages match; a request of fewer rows than a row
    tile is not (``attention_protocol.hpp`` "Q row tiles")."""
    for split_count, q_rows in ((0, 32), (2, 32), (2, 16)):
        request = protocol.Request(q_rows=q_rows, dim_tiles=4, kv_positions=1000, block_tiles=2, capacity_tiles=64,
                                   flags=int(flags), split_count=split_count, q=protocol.Operand.interleaved(0, 256),
                                   out=protocol.Operand.interleaved(0, 256))
        assert _row_tiles_valid(request) == (q_rows == 32)
        words = protocol.encode(request, Residency(q_rows=32, dim_tiles=4, block_tiles=2))
        _compare(functions, [pair for pair in _method_cases(request, words, 999)
                             if pair[0][0] in ("valid_layout", "row_tile_pages", "row_tile")])


@pytest.mark.parametrize("patch", REFUSED_PATCHES)
def test_header_refuses_what_encode_refuses(decoder, patch):
    request = protocol.Request(q_rows=2, dim_tiles=2, kv_positions=100, block_tiles=1, capacity_tiles=64)
    words = _words(request, **patch)
    words[protocol.Field.CAPACITY_TILES] = patch.get("capacity_tiles", request.capacity_tiles)
    with pytest.raises(ValueError):
        protocol.encode(protocol.decode(words), Residency(q_rows=2, dim_tiles=2, block_tiles=1))
    result = subprocess.run([str(decoder)], input=" ".join(map(str, words + [99, 0])) + "\n", capture_output=True,
                            text=True, check=True)
    assert result.stdout.split()[1] == "l0", f"the header accepts {patch}: {result.stdout[:200]}"


# Every function of the header, one at a time (tests/protocol_pair/functions_main.cpp evaluates a
# query per line), against its twin in protocol.py or, where the host has no use for one, an
# independent Python expression. Free functions run over their whole (small) domains; methods
# over hypothesis requests. test_header_every_function_is_pinned fails when the header gains a
# function that neither table below names.

HEADER_FUNCTION = re.compile(
    r"^\s*(?:template\s*<[^>]*>\s*)?(?:__attribute__\(\(\w+\)\)\s*)?(?:constexpr\s+|inline\s+|static\s+)*[\w:]+\s+(\w+)"
    r"\s*\([^;{}]*\)\s*(?:const\s*)?\{",
    re.M,
)


@pytest.fixture(scope="module")
def functions(tmp_path_factory):
    return _build_pair_program(tmp_path_factory, "functions_main.cpp")


def _ask(functions, queries):
    """Evaluate ``queries`` ((name, *numbers) tuples) in the header; one int per query."""
    stdin = "\n".join(" ".join(map(str, q)) for q in queries) + "\n"
    result = subprocess.run([str(functions)], input=stdin, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-300:] + result.stderr[-300:]
    got = [int(line) for line in result.stdout.split()]
    assert len(got) == len(queries)
    return got


def _compare(functions, cases):
    """``cases``: (query, expected) pairs; fails naming the first query the header answers differently."""
    got = _ask(functions, [q for q, _ in cases])
    for (query, want), answer in zip(cases, got):
        assert answer == int(want), f"{query[0]}{tuple(query[1:])}: header {answer}, host twin {int(want)}"


def _tilized_byte_offset(row, col):
    """Byte offset of element (row, col) inside one bfloat16 tile, from tiles.tilize's face order."""
    index = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    order = tiles.tilize(index, dtype=np.float32)[0]
    return int(np.flatnonzero(order == row * 32 + col)[0]) * 2


# Free functions: name -> (query, expected) pairs over the whole domain the kernels use.
FREE_FUNCTIONS = {
    "partial_pages": lambda: [(("partial_pages", d), protocol.partial_pages(d)) for d in range(0, 65)],
    "tree_levels": lambda: [(("tree_levels", n), protocol.tree_levels(n)) for n in range(0, 257)],
    # lowbit_level(0) never ends: the kernels call it for slices > 0 only (tree_slot, tree_children).
    "lowbit_level": lambda: [(("lowbit_level", i), (i & -i).bit_length() - 1)
                             for i in [*range(1, 1025), 2**31, 2**31 + 2**20, 2**32 - 2**16]],
    # The NoC table words program_factory writes, (y << 16) | x, for every coordinate up to 64,
    # and words whose halves both use all 16 bits.
    "core_noc_x": lambda: [(("core_noc_x", (y << 16) | x), x) for x in range(64) for y in range(0, 64, 7)]
                          + [(("core_noc_x", w), w & 0xFFFF) for w in (0xFFFFFFFF, 0xABCD1234, 0x8000FFFF)],
    "core_noc_y": lambda: [(("core_noc_y", (y << 16) | x), y) for y in range(64) for x in range(0, 64, 7)]
                          + [(("core_noc_y", w), w >> 16) for w in (0xFFFFFFFF, 0xABCD1234, 0x8000FFFF, 0x01000000)],
    # A tile row is two 32-byte face rows: half 0 starts at column 0, half 1 at column 16.
    "face_row_offset": lambda: [(("face_row_offset", row, half), _tilized_byte_offset(row, 16 * half))
                                for row in range(32) for half in range(2)],
    "mask_row_tile": lambda: [(("mask_row_tile", w), kv_walk.mask_row_source(w)[0]) for w in range(33)],
    "mask_row_row": lambda: [(("mask_row_row", w), kv_walk.mask_row_source(w)[1]) for w in range(33)],
    # Word 0 of a core's work row is the request count; request r's block follows.
    "request_row_offset": lambda: [(("request_row_offset", r), protocol.request_row_offset(r)) for r in range(64)],
    "work_row_words": lambda: [(("work_row_words", r), protocol.work_row_words(r)) for r in range(0, 22)],
    "sparse_count_word": lambda: [(("sparse_count_word", r), protocol.sparse_count_word(r))
                                  for r in range(MAX_REQUESTS_PER_CORE)],
    "work_slot": lambda: [(("work_slot", x, y, gx), protocol.work_slot(x, y, gx))
                          for gx in (1, 8, 13) for y in range(10) for x in range(gx)],
    # The request-count word as the kernels honour it: never more blocks than a core's args hold.
    "served_requests": lambda: [(("served_requests", c), min(c, MAX_REQUESTS_PER_CORE))
                                for c in [*range(0, 40), 2**31, 2**32 - 1]],
    # K/V tiles by format (tiles.py's block-float layout: 64 exponent bytes, then the data in face
    # order; bfloat16 rows where tiles.tilize puts them).
    "kv_datum_bits": lambda: [(("kv_datum_bits", b), bits) for b, bits in ((2048, 16), (1088, 8), (576, 4))],
    "kv_face_row_bytes": lambda: [(("kv_face_row_bytes", b), 16 * bits // 8) for b, bits in ((2048, 16), (1088, 8), (576, 4))],
    "kv_face_row_offset": lambda: [(("kv_face_row_offset", row, half, 2048), _tilized_byte_offset(row, 16 * half))
                                   for row in range(32) for half in range(2)]
                                  + [(("kv_face_row_offset", row, half, b), 64 + _tilized_byte_offset(row, 16 * half) * bits // 16)
                                     for b, bits in ((1088, 8), (576, 4)) for row in range(32) for half in range(2)],
    # The page-table walk: tiles of caches with 1, 2, 4 tiles per block (block sizes 32/64/128)
    # and a 16k-entry row; pages for contiguous and paged caches of 1..4 KV heads.
    "page_table_entry": lambda: [(("page_table_entry", t, b), kv_walk.page_table_entry(t, b))
                                 for b in (1, 2, 4, 7) for t in [*range(0, 70), 2**16 - 1, 2**20 + 3]],
    # Circular caches (slots of 1, 4, 32 tiles; 0: none) and blocks of 16 positions (two per tile).
    "cache_slot_tile": lambda: [(("cache_slot_tile", t, w), kv_walk.cache_slot_tile(t, w))
                                for w in (0, 1, 4, 32, 33) for t in [*range(0, 70), 2**20 + 3, 2**24 - 1]],
    "half_block_entry": lambda: [(("half_block_entry", t, h), kv_walk.half_block_entry(t, h))
                                 for t in [*range(0, 40), 2**16 - 1, 2**20] for h in (0, 1)],
    "cache_tile_page": lambda: [
        (("cache_tile_page", first, t, block, bt, bt * heads * d, d), kv_walk.cache_tile_page(first, t, block, bt, bt * heads * d, d))
        for bt in (0, 1, 2, 4) for heads in (1, 3) for d in (1, 4) for first in {0, (heads - 1) * bt * d}
        for t in (0, 1, 5, 63) for block in (0, 1, 999)],
    "cache_block_valid": lambda: [(("cache_block_valid", e & 0xFFFFFFFF, n), kv_walk.cache_block_valid(e, n))
                                  for n in (1, 7, 4096) for e in (-2**31, -2, -1, 0, 1, 6, 7, 4095, 4096, 2**31 - 1)],
    "page_table_chunk_first": lambda: [(("page_table_chunk_first", e), kv_walk.page_table_chunk(e, 2**20)[0])
                                       for e in [*range(0, 600, 7), 255, 256, 257, 16383]],
    "const_pages": lambda: [(("const_pages", w, s, r, u), protocol.const_pages(bool(w), bool(s), r, bool(u)))
                            for w in (0, 1) for s in (0, 1) for r in (1, 2, 3, 4, 11) for u in (0, 1)],
    "row_tile_user": lambda: [(("row_tile_user", user, r, u), kv_walk.row_tile_user(user, r, bool(u)))
                              for user in (0, 7, 44) for r in (0, 1, 10) for u in (0, 1)],
    "row_mask_page": lambda: [(("row_mask_page", s, rows, r), kv_walk.row_mask_page(bool(s), rows, r))
                              for s in (0, 1) for rows in (2, 4, 11) for r in range(rows)],
    # Every row tile's own count on and around tile edges, every tile from before its last to past it.
    "own_mask_page": lambda: [(("own_mask_page", own, t, 9), kv_walk.own_mask_page(own, t, 9))
                              for own in (0, 1, 31, 32, 33, 64, 1025) for t in range(0, 36)],
    "window_mask_word": lambda: [(("window_mask_word", dead, half, pair), kv_walk.window_mask_word(dead, half, pair))
                                 for dead in range(33) for half in range(2) for pair in range(8)],
    # Every bfloat16 bit pattern's clamp (NaN, +-inf, beyond +-1e30, the boundary 0x714A itself),
    # and words pairing them.
    "clamp_mask_half": lambda: [(("clamp_mask_half", h), kv_walk.clamp_mask_half(h)) for h in range(0, 1 << 16)],
    "clamp_mask_word": lambda: [(("clamp_mask_word", w), kv_walk.clamp_mask_word(w))
                                for w in [0, 0xFF80FF80, 0x7F807FC0, 0xF14A714A, 0xF14B714B, 0x3F80FF81, 0xC2F60000,
                                          *range(0, 2**32, 2**32 // 997)]],
    "page_table_chunk_entries": lambda: [
        (("page_table_chunk_entries", first, n), kv_walk.page_table_chunk(first, n)[1])
        for n in (1, 40, 256, 257, 1100, 16384) for first in range(0, n, kv_walk.PAGE_TABLE_CHUNK_ENTRIES)],
}


def _row_tiles_valid(request) -> bool:
    """Whether ``request`` may be row tile 0 of a request of several Q row tiles: what
    ``protocol.encode`` accepts with such a residency (``Params::valid_layout``'s last clause)."""
    try:
        protocol.encode(request, Residency(q_rows=request.q_rows, dim_tiles=request.dim_tiles,
                                           block_tiles=request.block_tiles, row_tiles=2))
    except ValueError:
        return False
    return True


def _method_cases(request, words, position):
    """(query, expected) pairs for every Params / Operand method of one valid request whose
    POSITIONS entry is ``position``. A query's block is the 16 words, then the kv_positions the
    kernels would have derived (functions_main.cpp sets it: it is not on the wire)."""
    kv, block, index = request.kv_positions, request.block_tiles, request.split_index
    words = [*words, kv, request.window]
    offset = request.q_rows if request.flags & protocol.Flag.CHUNK else 1
    probes = {position, -1, 0, -2**31, 2**31 - 1, kv - offset, request.capacity_tiles * 32 - offset,
              request.capacity_tiles * 32 - offset + 1}
    count = max(request.split_count, 1)
    live = kv_walk.live_tiles(kv)
    begin, end = kv_walk.request_slice(request)
    rows, heads = request.rows_per_head, request.heads
    win = request.window
    first = kv_walk.window_first_tile(kv, win, rows_per_head=rows)
    shape = dict(rows_per_head=rows, heads=heads)
    slice_window = kv_walk.padded_tiles((end - begin) * protocol.TILE_POSITIONS, block) if end > begin else 0
    children = protocol.tree_children(index, count)
    window = kv_walk.padded_tiles(kv, block)
    near_end = sorted({*range(max(live - 3, 0), min(live + 2, window)), 0, window - 1})
    # Blocks: the first two and the last three (long requests have up to 2**19), one past the end.
    blocks = slice_window // block
    some_blocks = sorted({b for b in (0, 1, blocks - 3, blocks - 2, blocks - 1) if 0 <= b < blocks})
    cases = {
        "live_tiles": [((), live)],
        "tail_width": [((), kv_walk.tail_width(kv))],
        "slices": [((), count)],
        "split": [((), count > 1)],
        "reducer": [((), index == 0)],
        "slice_begin": [((), begin)],
        "slice_end": [((), end)],
        "slice_live_tiles": [((), end - begin)],
        "tree_children": [((), len(children))],
        "tree_child": [((level,), child) for level, child in enumerate(children)],
        "tree_slot": [((), protocol.tree_parent(index)[1])] if index else [],
        "tree_parent": [((), protocol.tree_parent(index)[0])] if index else [],
        "round_to_double_blocks": [((t,), kv_walk.padded_tiles(t * protocol.TILE_POSITIONS, block) if t else 0)
                                   for t in (0, 1, 2 * block - 1, 2 * block, 2 * block + 1, end - begin, live)],
        "padded_tiles": [((), window)],
        "slice_padded_tiles": [((), slice_window)],
        "blocks": [((), slice_window // block)],
        "block_first_tile": [((b,), begin + b * block) for b in some_blocks],
        "live_tiles_in_block": [((b,), max(0, min(block, end - begin - b * block))) for b in [*some_blocks, blocks]],
        "chunk": [((), bool(request.flags & protocol.Flag.CHUNK))],
        "rows": [((), bool(request.flags & protocol.Flag.ROWS))],
        "heads": [((), heads)],
        "rows_per_head": [((), rows)],
        "stage_rows": [((), request.stage_rows)],
        "stage_head": [((s,), s // rows) for s in range(request.stage_rows)],
        "stage_row": [((s,), s % rows) for s in range(request.stage_rows)],
        "query_row_of": [((s,), kv_walk.query_row_of(request, s)) for s in range(request.stage_rows)],
        "head_rows": [((), bool(request.flags & protocol.Flag.HEAD_ROWS))],
        "query_page": [((s, d, width), kv_walk.query_page(request, s, d, width))
                       for s in range(request.stage_rows) for d in {0, request.dim_tiles - 1}
                       for width in {heads * request.dim_tiles, 1000}],
        "row_width": [((t, row), kv_walk.row_width(kv, t, row, rows_per_head=rows))
                      for t in near_end for row in range(rows)],
        "mask_tile": [((t,), kv_walk.mask_tile(kv, t, **shape)) for t in near_end],
        "mask_page": [((t,), kv_walk.mask_page(kv, t, **shape)) for t in near_end if t < live],
        # CONST page 2 holds the last live tile's mask, page 3 the one before's.
        "page_mask_tile": [((page,), live - 1 - (page - protocol.MASK_PAGE))
                           for page in (protocol.MASK_PAGE, protocol.MASK_BEFORE_PAGE) if live - 1 - (page - 2) >= 0],
        "slice_mask_tile": [((page,), kv_walk.slice_mask_tile(request, page))
                            for page in (protocol.MASK_PAGE, protocol.MASK_BEFORE_PAGE)],
        "window_start": [((row,), kv_walk.window_start(kv, win, row, rows_per_head=rows)) for row in range(rows)],
        "first_tile": [((), first)],
        "first_q_head": [((width,), kv_walk.first_q_head(request, width))
                         for width in {request.dim_tiles, heads * request.dim_tiles, 40 * request.dim_tiles}],
        "attn_mask_page": [((t, s, users, width), kv_walk.attn_mask_page(request, t, s, users, width))
                           for t in {0, live - 1} for s in range(min(request.stage_rows, 3)) for users in (1, 3)
                           for width in {heads * request.dim_tiles, 40 * request.dim_tiles}],
        "attn_mask_row": [((s, width), kv_walk.attn_mask_row(request, s, width))
                          for s in range(request.stage_rows) for width in {heads * request.dim_tiles, 40 * request.dim_tiles}],
        "window_tiles": [((), live - first)],
        "window_stale_rows": [((), kv_walk.window_stale_rows(kv, win, rows_per_head=rows))],
        "window_dead": [((t, row), kv_walk.window_dead(kv, win, t, row, rows_per_head=rows))
                        for t in sorted({first, first + 1, *near_end}) for row in range(rows)],
        "window_page": [((t,), kv_walk.window_page(kv, win, t, rows_per_head=rows))
                        for t in sorted({first, first + 1, first + 2, *near_end} - {-1})],
        "window_page_tile": [((page,), kv_walk.window_page_tile(request, page))
                             for page in (protocol.WINDOW_PAGE, protocol.WINDOW_NEXT_PAGE)],
        "slice_fills_window_page": [((page,), kv_walk.slice_fills_window_page(request, page))
                                    for page in (protocol.WINDOW_PAGE, protocol.WINDOW_NEXT_PAGE)],
        "valid_kind": [((), True)],
        "valid_layout": [((request.dim_tiles, block, 1), True), ((request.dim_tiles + 1, block, 1), False),
                         ((request.dim_tiles, block + 1, 1), False), ((request.dim_tiles, block, 2), _row_tiles_valid(request))],
        "row_tile_pages": [((), kv_walk.row_tile_pages(request))],
        "row_tile": [((r, operand), getattr(kv_walk.row_tile(request, r), name).first_page)
                     for r in (0, 1, 3) for operand, name in enumerate(("q", "k", "v", "constants", "out"))],
        "valid_positions": [((), True)],
        "valid_for": [((request.dim_tiles, block), True), ((request.dim_tiles + 1, block), False),
                      ((request.dim_tiles, block + 1), False)],
        # int32 positions travel as their two's-complement words (functions_main reads int32_t).
        "kv_positions_at": [((p & 0xFFFFFFFF,), kv_walk.kv_positions_at(request, p)) for p in sorted(probes)],
        "position_clamped": [((p & 0xFFFFFFFF,), kv_walk.position_clamped(request, p)) for p in sorted(probes)],
        "idle": [((), False)],
        "decode_words": [((field,), getattr(request, name)) for field, name in enumerate(
            ("q_rows", "query_row", "flags", "positions", "dim_tiles", "user", "block_tiles",
             "capacity_tiles", "split_index", "split_count", "split_first_core"))],
        "read_request": [((r,), request.user) for r in (0, 1, 20)],
    }
    out = [((name, *words, *args), want) for name, pairs in cases.items() for args, want in pairs]
    # The same block as an idle slot (kv_positions 0): valid, idle, every slice empty.
    idle_words = [*words[:-2], 0, win]
    out += [(("idle", *idle_words), True), (("valid_positions", *idle_words), True),
            (("slice_live_tiles", *idle_words), 0), (("blocks", *idle_words), 0),
            (("slice_mask_tile", *idle_words, protocol.MASK_PAGE), protocol.ConstTile.TAIL_MASK),
            (("slice_mask_tile", *idle_words, protocol.MASK_BEFORE_PAGE), protocol.NO_MASK)]
    for position, name in enumerate(("q", "k", "v", "constants", "out")):
        operand = getattr(request, name)
        out.append((("interleaved", *words, position), operand.is_interleaved))
        out.append((("first_page", *words, position), operand.first_page))
    return out


METHODS = {
    "live_tiles", "tail_width", "slices", "split", "reducer", "slice_begin", "slice_end", "slice_live_tiles",
    "tree_children", "tree_child", "tree_slot", "tree_parent", "round_to_double_blocks", "padded_tiles",
    "slice_padded_tiles", "blocks", "block_first_tile", "live_tiles_in_block", "chunk", "rows", "heads",
    "rows_per_head", "stage_rows", "stage_head", "stage_row", "query_row_of", "head_rows", "query_page", "row_width",
    "mask_tile", "mask_page", "page_mask_tile", "slice_mask_tile", "valid_kind", "valid_layout", "valid_positions", "idle",
    "valid_for", "kv_positions_at", "position_clamped", "decode_words", "read_request", "interleaved", "first_page",
    "window_start", "first_tile", "window_tiles", "window_stale_rows", "window_dead", "window_page", "window_page_tile",
    "slice_fills_window_page", "first_q_head", "attn_mask_page", "attn_mask_row", "row_tile_pages", "row_tile",
}


def test_header_every_function_is_pinned():
    """A function added to the header without a comparison here fails this test."""
    text = (kernel_dir() / "attention_protocol.hpp").read_text()
    declared = HEADER_FUNCTION.findall(text)
    assert len(declared) == len(set(declared)), "two header functions share a name; pin them separately"
    assert "decode_words" in declared and "read_request" in declared  # the regex sees the free functions
    unpinned = set(declared) - set(FREE_FUNCTIONS) - METHODS
    assert not unpinned, f"header functions with no pair comparison in tests/test_protocol_pair.py: {sorted(unpinned)}"
    stale = (set(FREE_FUNCTIONS) | METHODS) - set(declared)
    assert not stale, f"pinned functions no longer in the header: {sorted(stale)}"


@pytest.mark.parametrize("name", sorted(FREE_FUNCTIONS))
def test_header_free_function_matches_its_twin(functions, name):
    _compare(functions, FREE_FUNCTIONS[name]())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(requests(), min_size=REQUESTS_PER_EXAMPLE, max_size=REQUESTS_PER_EXAMPLE))
def test_header_methods_match_their_twins(functions, batch):
    cases = []
    asked = set()
    for request, position in batch:
        words = protocol.encode(request, Residency(q_rows=request.q_rows, dim_tiles=request.dim_tiles,
                                                   block_tiles=request.block_tiles))
        pairs = _method_cases(request, words, position)
        asked |= {query[0] for query, _ in pairs}
        cases += pairs
    _compare(functions, cases)
    # Per-request lists may be empty (no parent for slice 0, no children for a leaf), never all.
    assert asked <= METHODS


def test_header_methods_cover_every_method_on_some_request():
    """The hypothesis batch above asks every method something: a method whose cases are always
    empty would be pinned in name only."""
    request = protocol.Request(q_rows=4, dim_tiles=2, kv_positions=1000, block_tiles=2, capacity_tiles=64,
                               split_count=7, split_index=2, window=300)
    words = protocol.encode(request, Residency(q_rows=4, dim_tiles=2, block_tiles=2))
    assert {query[0] for query, _ in _method_cases(request, words, 999)} == METHODS


@pytest.mark.parametrize("patch", REFUSED_PATCHES)
def test_header_valid_layout_refuses_what_encode_refuses(functions, patch):
    request = protocol.Request(q_rows=2, dim_tiles=2, kv_positions=100, block_tiles=1, capacity_tiles=64)
    words = _words(request, **patch)
    words[protocol.Field.CAPACITY_TILES] = patch.get("capacity_tiles", request.capacity_tiles)
    asked = [("valid_layout", *words, 100, 0, 2, 1, 1)] + ([("valid_kind", *words, 100, 0)] if patch in KIND_REFUSALS else [])
    assert _ask(functions, asked) == [0] * len(asked), patch
