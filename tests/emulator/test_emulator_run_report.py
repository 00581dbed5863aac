"""RunReport says what the descriptor ran (issue 25 item 3): the cores of each kernel, and per core the
CB table (page size, page count, data format, address) and each kernel's compile-time args."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

ttnn = pytest.importorskip("ttnn")

from ttnn_flashdecode import attention, last_report  # noqa: E402
from ttnn_flashdecode.op import protocol  # noqa: E402
from ttnn_flashdecode.emulator import (  # noqa: E402
    TT_DATA_FORMATS,
    CBConfig,
    Emulator,
    tensor_accessor_compile_time_args,
)
from ttnn_flashdecode.op.compute_options import ComputeOptions  # noqa: E402
from ttnn_flashdecode.op.residency import Residency, cb_plan  # noqa: E402
from ttnn_flashdecode.op.paths import kernel_dir, named_args_used  # noqa: E402

KERNELS = Path(__file__).parent / "kernels"
TILE_BYTES = 2048
BFP8_TILE_BYTES = 1088


def _crs(*cores):
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(x, y), ttnn.CoreCoord(x, y)) for x, y in cores])


def _fmt(index, dtype, page_bytes):
    return ttnn.CBFormatDescriptor(buffer_index=index, data_format=dtype, page_size=page_bytes)


@pytest.fixture(scope="module")
def emu():
    return Emulator(arch="wormhole_b0")


def test_report_lists_kernel_cores_cb_tables_and_compile_time_args(emu):
    """A copy pipeline on two cores; core (1, 0) also has a CBDescriptor holding two CB ids."""
    cores = [(0, 0), (1, 0)]
    num_pages = 6
    data = np.random.default_rng(3).integers(0, 256, (2, num_pages * TILE_BYTES), dtype=np.uint8)
    src = [emu.allocate_dram(num_pages, TILE_BYTES) for _ in cores]
    dst = [emu.allocate_dram(num_pages, TILE_BYTES) for _ in cores]
    for buf, d in zip(src, data):
        emu.write_pages(buf, d)
    accessor = tensor_accessor_compile_time_args(src[0])
    assert accessor == tensor_accessor_compile_time_args(dst[0]) == [2, TILE_BYTES]
    reader = ttnn.KernelDescriptor(
        kernel_source=str(KERNELS / "reader_copy.cpp"), core_ranges=_crs(*cores), compile_time_args=accessor,
        named_compile_time_args=[("cb", 0), ("block", 2)],
        runtime_args=[(c, [s.address, num_pages]) for c, s in zip(cores, src)], config=ttnn.ReaderConfigDescriptor())
    writer = ttnn.KernelDescriptor(
        kernel_source=str(KERNELS / "writer_copy.cpp"), core_ranges=_crs(*cores), compile_time_args=accessor,
        named_compile_time_args=[("cb", 0), ("block", 1)],
        runtime_args=[(c, [d.address, num_pages]) for c, d in zip(cores, dst)], config=ttnn.WriterConfigDescriptor())
    cbs = [
        ttnn.CBDescriptor(total_size=4 * TILE_BYTES, core_ranges=_crs(*cores),
                          format_descriptors=[_fmt(0, ttnn.bfloat16, TILE_BYTES)]),
        ttnn.CBDescriptor(total_size=4 * BFP8_TILE_BYTES, core_ranges=_crs((1, 0)),
                          format_descriptors=[_fmt(2, ttnn.bfloat8_b, BFP8_TILE_BYTES), _fmt(3, ttnn.int32, 64)]),
    ]
    report = emu.run(ttnn.ProgramDescriptor(kernels=[reader, writer], cbs=cbs, semaphores=[]))
    for d, want in zip(dst, data):  # the program really ran
        np.testing.assert_array_equal(emu.read_pages(d), want)

    assert report.kernel_cores == {"reader_copy": cores, "writer_copy": cores}
    base = emu.spec.unreserved_base
    cb0 = CBConfig(page_bytes=TILE_BYTES, num_pages=4, data_format="Float16_b", address=base)
    assert report.cb_pages == {
        (0, 0): {0: cb0},
        (1, 0): {
            0: cb0,
            2: CBConfig(page_bytes=BFP8_TILE_BYTES, num_pages=4, data_format="Bfp8_b", address=base + 4 * TILE_BYTES),
            3: CBConfig(page_bytes=64, num_pages=68, data_format="Int32", address=base + 4 * TILE_BYTES),
        },
    }
    assert report.cb_pages[(1, 0)][2].page_bytes == BFP8_TILE_BYTES
    for c in cores:
        assert report.compile_time_args[c] == {"reader_copy": (2, TILE_BYTES), "writer_copy": (2, TILE_BYTES)}
        assert report.named_compile_time_args[c] == {"reader_copy": {"cb": 0, "block": 2},
                                                     "writer_copy": {"cb": 0, "block": 1}}
    assert set(report.cb_pages) == set(report.compile_time_args) == set(report.cores) == set(cores)
    for buf in src + dst:
        emu.free(buf)


EMPTY = "void kernel_main() {}\n"


def test_report_names_inline_kernels_and_kernels_sharing_a_source(emu):
    """Two descriptors of one source are told apart by their index; an inline kernel is "inline#i"."""

    def writer(source, core, inline=False):
        kw = {"source_type": ttnn.KernelDescriptor.SourceType.SOURCE_CODE} if inline else {}
        return ttnn.KernelDescriptor(kernel_source=source, core_ranges=_crs(core), compile_time_args=[7, core[0]],
                                     config=ttnn.WriterConfigDescriptor(), **kw)

    empty = KERNELS / "empty_kernel.cpp"
    report = emu.run(ttnn.ProgramDescriptor(
        kernels=[writer(str(empty), (0, 0)), writer(str(empty), (2, 1)), writer(EMPTY, (3, 3), inline=True)],
        cbs=[], semaphores=[]))
    assert report.kernel_cores == {"empty_kernel#0": [(0, 0)], "empty_kernel#1": [(2, 1)], "inline#2": [(3, 3)]}
    assert report.compile_time_args == {(0, 0): {"empty_kernel#0": (7, 0)}, (2, 1): {"empty_kernel#1": (7, 2)},
                                        (3, 3): {"inline#2": (7, 3)}}
    assert report.named_compile_time_args == {(0, 0): {"empty_kernel#0": {}}, (2, 1): {"empty_kernel#1": {}},
                                              (3, 3): {"inline#2": {}}}
    assert report.cb_pages == {(0, 0): {}, (2, 1): {}, (3, 3): {}}


def test_report_of_the_attention_program(mock_cluster):
    """The op's own program: its three kernels on the same cores, one CB table and the same named
    compile-time args on every core (each kernel given the ones it reads), as planned."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 1, 2, 8 * 64), dtype=np.float32).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((2, 1, 256, 64), dtype=np.float32).astype(ml_dtypes.bfloat16)
    v = rng.standard_normal((2, 1, 256, 64), dtype=np.float32).astype(ml_dtypes.bfloat16)
    attention(q, k, v, cur_pos=[40, 200], block_tiles=2, split=1)
    report = last_report()
    names = ("attention_reader", "attention_compute", "attention_writer")
    assert set(report.kernel_cores) == set(names)
    used = report.kernel_cores["attention_reader"]
    assert used == report.kernel_cores["attention_compute"] == report.kernel_cores["attention_writer"]
    assert used == report.cores_used and len(used) == 2  # two requests (batch 2 x 1 KV head), one core each
    table = report.cb_pages[used[0]]
    for c in used:
        assert report.cb_pages[c] == table
        assert report.named_compile_time_args[c] == report.named_compile_time_args[used[0]]
    # Each kernel is given the named args its source reads, and nothing else.
    for n in names:
        given = report.named_compile_time_args[used[0]][n]
        assert set(given) == named_args_used(kernel_dir() / f"{n}.cpp"), n
    named = report.named_compile_time_args[used[0]]["attention_reader"]
    assert (named["block_tiles"], named["dim_tiles"], named["tile_bytes"]) == (2, 2, TILE_BYTES)
    # The CB table is the residency's plan: attention() with block_tiles=2, split=1 plans q_rows 8
    # (GQA 8:1), dim_tiles 2 (head_dim 64), no split, statistics in fp32 when DST accumulates in fp32.
    planned = cb_plan(Residency(8, 2, 2, batch=2, fp32_stats=ComputeOptions().fp32_dest_acc_en))
    assert {i: (cb.page_bytes, cb.num_pages, cb.data_format) for i, cb in table.items()} == {
        spec.index: (spec.page_bytes, spec.pages, TT_DATA_FORMATS[spec.data_format]) for spec in planned}
    assert table[protocol.CB.POSITIONS].data_format == "Int32"
    # CBs sit from the unreserved base upward without overlapping.
    spans = sorted((cb.address, cb.page_bytes * cb.num_pages) for cb in table.values())
    assert spans[0][0] == Emulator(arch="wormhole_b0").spec.unreserved_base
    assert all(a + size <= b for (a, size), (b, _) in zip(spans, spans[1:]))
