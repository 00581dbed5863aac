"""Emulator runtime and dataflow API: CB pipelines, DRAM placement, checks, watchdog, semaphores."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest

ttnn = pytest.importorskip("ttnn")

from ttnn_flashdecode.emulator import (  # noqa: E402
    ArchSpec,
    DeadlockError,
    Emulator,
    EmulatorError,
    tensor_accessor_compile_time_args,
)

KERNELS = Path(__file__).parent / "kernels"
TILE_BYTES = 2048  # one bf16 32x32 tile
CB = 0


def _crs(*cores: tuple[int, int]):
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(x, y), ttnn.CoreCoord(x, y)) for x, y in cores])


def _cb(cores, pages: int, page_bytes: int = TILE_BYTES, index: int = CB):
    fmt = ttnn.CBFormatDescriptor(buffer_index=index, data_format=ttnn.bfloat16, page_size=page_bytes)
    return ttnn.CBDescriptor(total_size=pages * page_bytes, core_ranges=cores, format_descriptors=[fmt])


def _kernel(path_or_src, cores, config, *, ct=(), named=(), rt=(), defines=(), inline=False):
    kw = {}
    if inline:
        kw["source_type"] = ttnn.KernelDescriptor.SourceType.SOURCE_CODE
    return ttnn.KernelDescriptor(
        kernel_source=str(path_or_src),
        core_ranges=cores,
        compile_time_args=list(ct),
        named_compile_time_args=list(named),
        defines=list(defines),
        runtime_args=list(rt),
        config=config,
        **kw,
    )


def _copy_program(emu, src, dst, num_pages, cb_pages, *, reader_block=1, writer_block=None, core=(0, 0),
                  reader_pages=None, writer_pages=None, reader_defines=()):
    cores = _crs(core)
    writer_block = writer_block or reader_block
    reader = _kernel(
        KERNELS / "reader_copy.cpp", cores, ttnn.ReaderConfigDescriptor(),
        ct=tensor_accessor_compile_time_args(src), named=[("cb", CB), ("block", reader_block)],
        rt=[(core, [src.address, reader_pages or num_pages])], defines=reader_defines,
    )
    writer = _kernel(
        KERNELS / "writer_copy.cpp", cores, ttnn.WriterConfigDescriptor(),
        ct=tensor_accessor_compile_time_args(dst), named=[("cb", CB), ("block", writer_block)],
        rt=[(core, [dst.address, writer_pages or num_pages])],
    )
    return ttnn.ProgramDescriptor(kernels=[reader, writer], cbs=[_cb(cores, cb_pages)], semaphores=[])


@pytest.fixture(scope="module")
def emu():
    return Emulator(arch="wormhole_b0")


def _random_pages(num_pages, page_bytes=TILE_BYTES, seed=0):
    return np.random.default_rng(seed).integers(0, 256, num_pages * page_bytes, dtype=np.uint8)


@pytest.mark.parametrize("cb_pages", [1, 2, 4])
def test_copy_pipeline_moves_every_byte(emu, cb_pages):
    num_pages = 37  # not a multiple of the bank count
    src = emu.allocate_dram(num_pages, TILE_BYTES)
    dst = emu.allocate_dram(num_pages, TILE_BYTES)
    data = _random_pages(num_pages, seed=cb_pages)
    emu.write_pages(src, data)
    report = emu.run(_copy_program(emu, src, dst, num_pages, cb_pages))
    np.testing.assert_array_equal(emu.read_pages(dst), data)
    stats = report.cores[(0, 0)]
    assert stats.dram_read_bytes == num_pages * TILE_BYTES
    assert stats.dram_write_bytes == num_pages * TILE_BYTES
    assert stats.calls["cb_push_back"] == num_pages and stats.calls["cb_pop_front"] == num_pages
    assert stats.zones == {"reader-block": num_pages, "writer-block": num_pages}
    assert report.cores_used == [(0, 0)]
    emu.free(src)
    emu.free(dst)


def test_copy_pipeline_multi_page_blocks(emu):
    num_pages = 48
    src = emu.allocate_dram(num_pages, TILE_BYTES)
    dst = emu.allocate_dram(num_pages, TILE_BYTES)
    data = _random_pages(num_pages, seed=7)
    emu.write_pages(src, data)
    emu.run(_copy_program(emu, src, dst, num_pages, cb_pages=8, reader_block=4, writer_block=2))
    np.testing.assert_array_equal(emu.read_pages(dst), data)


def test_interleaved_page_placement_matches_formula(emu):
    spec = ArchSpec.for_name("wormhole_b0")
    page = 1088  # bfp8 tile: aligned stride stays 1088 (a multiple of 32)
    odd_page = 100  # aligned up to 128 per bank slot
    for page_bytes in (page, odd_page):
        num_pages = 29
        buf = emu.allocate_dram(num_pages, page_bytes)
        data = _random_pages(num_pages, page_bytes, seed=page_bytes)
        emu.write_pages(buf, data)
        aligned = -(-page_bytes // spec.dram_alignment) * spec.dram_alignment
        assert tensor_accessor_compile_time_args(buf) == [2, aligned]
        for i in range(num_pages):
            bank, off = i % spec.dram_banks, (i // spec.dram_banks) * aligned
            got = emu.peek_bank(bank, buf.address + off, page_bytes)
            np.testing.assert_array_equal(got, data[i * page_bytes : (i + 1) * page_bytes])
        emu.free(buf)


def test_kernel_bank_formula_agrees_with_tensor_accessor(emu):
    """A kernel addressing banks by the formula reads what TensorAccessor-addressed writes put back."""
    num_pages = 30
    src = emu.allocate_dram(num_pages, TILE_BYTES)
    dst = emu.allocate_dram(num_pages, TILE_BYTES)
    data = _random_pages(num_pages, seed=3)
    emu.write_pages(src, data)
    cores = _crs((1, 2))
    reader = _kernel(KERNELS / "reader_bank_formula.cpp", cores, ttnn.ReaderConfigDescriptor(),
                     ct=[CB, src.aligned_page_bytes], rt=[((1, 2), [src.address, num_pages])])
    writer = _kernel(KERNELS / "writer_copy.cpp", cores, ttnn.WriterConfigDescriptor(),
                     ct=tensor_accessor_compile_time_args(dst), named=[("cb", CB), ("block", 1)],
                     rt=[((1, 2), [dst.address, num_pages])])
    emu.run(ttnn.ProgramDescriptor(kernels=[reader, writer], cbs=[_cb(cores, 2)], semaphores=[]))
    np.testing.assert_array_equal(emu.read_pages(dst), data)


ARGS_KERNEL = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    uint32_t a = get_arg_val<uint32_t>(0);
    uint32_t b = get_arg_val<uint32_t>(5);
    (void)a; (void)b;
}
"""


def test_get_arg_val_past_count_is_refused(emu):
    cores = _crs((0, 0))
    k = _kernel(ARGS_KERNEL, cores, ttnn.ReaderConfigDescriptor(), rt=[((0, 0), [1, 2])], inline=True)
    with pytest.raises(EmulatorError, match=r"core \(0,0\) reader kernel inline#0: get_arg_val\(5\): this kernel has 2 runtime args"):
        emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[], semaphores=[]))


def test_kernel_without_runtime_args_on_a_core_gets_zero_args(emu):
    cores = _crs((0, 0), (1, 0))
    k = _kernel(ARGS_KERNEL, cores, ttnn.ReaderConfigDescriptor(), rt=[((0, 0), [1, 2, 3, 4, 5, 6])], inline=True)
    with pytest.raises(EmulatorError, match=r"core \(1,0\) .*get_arg_val\(0\): this kernel has 0 runtime args"):
        emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[], semaphores=[]))


def test_cb_count_mismatch_is_a_deadlock_naming_kernel_core_cb_and_counts(emu):
    # The reader pushes 3 pages one at a time; the writer waits for 4 at once on a 4-page CB.
    src = emu.allocate_dram(4, TILE_BYTES)
    dst = emu.allocate_dram(4, TILE_BYTES)
    prog = _copy_program(emu, src, dst, 4, cb_pages=4, reader_block=1, writer_block=4, core=(2, 1),
                         reader_pages=3, writer_pages=4)
    t0 = time.perf_counter()
    with pytest.raises(DeadlockError) as ei:
        emu.run(prog, timeout_s=30)
    assert time.perf_counter() - t0 < 5, "deadlock must be detected, not timed out"
    msg = str(ei.value)
    assert "deadlock" in msg
    assert re.search(
        r"core \(2,1\) writer kernel writer_copy\.cpp: cb_wait_front\(cb=0, 4 pages\) waits for data: "
        r"received=3 acked=0 \(3 pages in the CB\), page count=4, requested=4",
        msg,
    ), msg
    assert "core (2,1) reader kernel reader_copy.cpp: finished" in msg


def test_l1_over_allocation_is_refused_with_byte_counts(emu):
    spec = ArchSpec.for_name("wormhole_b0")
    free = spec.l1_bytes - spec.unreserved_base
    pages = free // TILE_BYTES + 1
    src = emu.allocate_dram(4, TILE_BYTES)
    dst = emu.allocate_dram(4, TILE_BYTES)
    prog = _copy_program(emu, src, dst, 4, cb_pages=pages)
    with pytest.raises(EmulatorError) as ei:
        emu.run(prog)
    msg = str(ei.value)
    assert "over-allocate L1 on core (0, 0)" in msg
    assert f"{pages * TILE_BYTES} bytes" in msg and f"{free} are free" in msg
    assert f"past L1's {spec.l1_bytes} bytes by {pages * TILE_BYTES - free}" in msg


WRAP_KERNEL = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    cb_reserve_back(0, 2);
    cb_push_back(0, 2);
    cb_reserve_back(0, 2);   // write pointer at page 2 of 3: crosses the end
}
"""


def test_wrap_crossing_reserve_is_refused(emu):
    cores = _crs((0, 0))
    k = _kernel(WRAP_KERNEL, cores, ttnn.ReaderConfigDescriptor(), inline=True)
    with pytest.raises(EmulatorError, match=r"cb_reserve_back\(cb=0, 2\): the write pointer is at page 2 of 3, "
                                            r"so 2 pages would run past the CB's end"):
        emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[_cb(cores, 3)], semaphores=[]))


def test_push_before_read_barrier_is_refused(emu):
    src = emu.allocate_dram(4, TILE_BYTES)
    dst = emu.allocate_dram(4, TILE_BYTES)
    prog = _copy_program(emu, src, dst, 4, cb_pages=2, reader_defines=[("SKIP_BARRIER", "1")])
    with pytest.raises(EmulatorError, match=r"reader kernel reader_copy\.cpp: cb_push_back\(cb=0, 1\) pushes L1 .* "
                                            r"noc_async_read_barrier"):
        emu.run(prog)


PUSH_TOO_MANY = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    cb_reserve_back(0, 1);
    cb_push_back(0, 2);
}
"""

READ_UNRESERVED = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    const uint32_t src = get_arg_val<uint32_t>(0);
    const InterleavedAddrGen<true> g{.bank_base_address = src, .page_size = 2048};
    noc_async_read(g.get_noc_addr(0), get_write_ptr(0), 2048);   // no cb_reserve_back first
}
"""


def test_push_more_than_reserved_is_refused(emu):
    cores = _crs((0, 0))
    k = _kernel(PUSH_TOO_MANY, cores, ttnn.ReaderConfigDescriptor(), inline=True)
    with pytest.raises(EmulatorError, match=r"cb_push_back\(cb=0, 2\): only 1 pages are reserved"):
        emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[_cb(cores, 2)], semaphores=[]))


def test_noc_read_into_unreserved_cb_page_is_refused(emu):
    src = emu.allocate_dram(1, TILE_BYTES)
    cores = _crs((0, 0))
    k = _kernel(READ_UNRESERVED, cores, ttnn.ReaderConfigDescriptor(), rt=[((0, 0), [src.address])], inline=True)
    with pytest.raises(EmulatorError, match=r"noc_async_read writes L1 .* in CB 0 .* outside the pages reserved"):
        emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[_cb(cores, 2)], semaphores=[]))


def test_address_outside_every_dram_buffer_is_refused(emu):
    cores = _crs((0, 0))
    k = _kernel(READ_UNRESERVED.replace("noc_async_read(g", "cb_reserve_back(0, 1); noc_async_read(g"), cores,
                ttnn.ReaderConfigDescriptor(), rt=[((0, 0), [0x3F000000])], inline=True)
    with pytest.raises(EmulatorError, match=r"DRAM bank 0 address 0x3f000000 .* outside every allocated buffer"):
        emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[_cb(cores, 2)], semaphores=[]))


def test_semaphore_ping_pong_between_two_cores(emu):
    rounds = 50
    a, b = (0, 0), (3, 2)
    out = emu.allocate_dram(2, 32)
    ax, ay = emu.worker_core_from_logical_core(*a)
    bx, by = emu.worker_core_from_logical_core(*b)
    cores = _crs(a, b)
    k = _kernel(KERNELS / "sem_pingpong.cpp", cores, ttnn.WriterConfigDescriptor(),
                rt=[(a, [1, bx, by, rounds, out.address, 0]), (b, [0, ax, ay, rounds, out.address, 1])])
    sem = ttnn.SemaphoreDescriptor(id=0, core_ranges=cores, initial_value=0)
    report = emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[], semaphores=[sem]))
    words = emu.read_pages(out).view(np.uint32).reshape(2, 8)[:, 0]
    assert list(words) == [rounds, rounds]
    assert report.cores[a].calls["noc_semaphore_inc"] == rounds
    assert report.cores[b].zones["round"] == rounds
    assert report.cores[a].l1_write_bytes == 4 * rounds


def test_256_tile_copy_timing(emu):
    num_pages = 256
    src = emu.allocate_dram(num_pages, TILE_BYTES)
    dst = emu.allocate_dram(num_pages, TILE_BYTES)
    data = _random_pages(num_pages, seed=11)
    emu.write_pages(src, data)
    for cb_pages in (2, 4):
        prog = _copy_program(emu, src, dst, num_pages, cb_pages)
        emu.run(prog)  # warm: compile + load
        t0 = time.perf_counter()
        report = emu.run(prog)
        dt = time.perf_counter() - t0
        np.testing.assert_array_equal(emu.read_pages(dst), data)
        print(f"\n256-tile copy, {cb_pages}-page CB: run() {dt * 1e3:.1f} ms "
              f"(kernel threads {report.wall_s * 1e3:.1f} ms, setup {report.setup_s * 1e3:.1f} ms)")
        assert dt < 5.0


def test_blackhole_copy(emu):
    bh = Emulator(arch="blackhole")
    assert bh.grid == ArchSpec.for_name("blackhole").default_grid
    num_pages = 19
    src = bh.allocate_dram(num_pages, TILE_BYTES)
    dst = bh.allocate_dram(num_pages, TILE_BYTES)
    data = _random_pages(num_pages, seed=5)
    bh.write_pages(src, data)
    bh.run(_copy_program(bh, src, dst, num_pages, cb_pages=2, core=(12, 9)))
    np.testing.assert_array_equal(bh.read_pages(dst), data)


POLL_FOREVER = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    while (!cb_pages_available_at_front(0, 1)) {
    }
}
"""


def test_polling_kernel_is_stopped_by_the_wall_clock_watchdog(emu):
    cores = _crs((0, 0))
    k = _kernel(POLL_FOREVER, cores, ttnn.WriterConfigDescriptor(), inline=True)
    t0 = time.perf_counter()
    with pytest.raises(DeadlockError, match=r"(?s)timeout: .*core \(0,0\) writer kernel inline#0: running"):
        emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[_cb(cores, 2)], semaphores=[]), timeout_s=0.5)
    assert time.perf_counter() - t0 < 3


PRODUCE_ONE = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    cb_reserve_back(0, 1);
    cb_push_back(0, 1);
}
"""


def test_two_kernels_pushing_one_cb_is_refused(emu):
    cores = _crs((0, 0))
    r = _kernel(PRODUCE_ONE, cores, ttnn.ReaderConfigDescriptor(), inline=True)
    w = _kernel(PRODUCE_ONE, cores, ttnn.WriterConfigDescriptor(), inline=True)
    with pytest.raises(EmulatorError, match=r"cb_reserve_back\(cb=0, 1\): CB 0 is produced by (reader|writer) kernel "
                                            r"inline#\d; only one kernel may reserve/push a CB"):
        emu.run(ttnn.ProgramDescriptor(kernels=[r, w], cbs=[_cb(cores, 4)], semaphores=[]))


def test_runs_are_sequential_safe(emu):
    """Many runs of one program on one emulator: same result every time, no state leaks."""
    num_pages = 12
    src = emu.allocate_dram(num_pages, TILE_BYTES)
    dst = emu.allocate_dram(num_pages, TILE_BYTES)
    prog = _copy_program(emu, src, dst, num_pages, cb_pages=2)
    for seed in range(20):
        data = _random_pages(num_pages, seed=100 + seed)
        emu.write_pages(src, data)
        emu.run(prog)
        np.testing.assert_array_equal(emu.read_pages(dst), data)


DPRINT_ASSERT = r"""
#include "api/dataflow/dataflow_api.h"
#include "api/debug/assert.h"
#include "api/debug/dprint.h"
void kernel_main() {
    const uint32_t v = get_arg_val<uint32_t>(0);
    DPRINT("v={}\n", v);
    ASSERT(v < 10);
}
"""


def test_dprint_goes_to_the_report_and_assert_fails_the_run(emu):
    cores = _crs((1, 1))
    ok = _kernel(DPRINT_ASSERT, cores, ttnn.ReaderConfigDescriptor(), rt=[((1, 1), [7])], inline=True)
    report = emu.run(ttnn.ProgramDescriptor(kernels=[ok], cbs=[], semaphores=[]))
    assert report.log == ["core (1,1) reader kernel inline#0: v=7"]
    bad = _kernel(DPRINT_ASSERT, cores, ttnn.ReaderConfigDescriptor(), rt=[((1, 1), [12])], inline=True)
    with pytest.raises(EmulatorError, match=r"core \(1,1\) reader kernel inline#0: ASSERT\(v < 10\) failed"):
        emu.run(ttnn.ProgramDescriptor(kernels=[bad], cbs=[], semaphores=[]))


PUSH_ONE_AND_SHOW = r"""
#include "api/dataflow/dataflow_api.h"
#include "api/debug/dprint.h"
void kernel_main() {
    cb_reserve_back(0, 1);
    cb_push_back(0, 1);
    DPRINT("wr={}\n", get_write_ptr(0));
}
"""

POP_ONE_AND_SHOW = r"""
#include "api/dataflow/dataflow_api.h"
#include "api/debug/dprint.h"
void kernel_main() {
    cb_wait_front(0, 1);
    const uint32_t wr = get_write_ptr(0), before = get_read_ptr(0);
    cb_pop_front(0, 1);
    DPRINT("wr={} rd={} rd_after={}\n", wr, before, get_read_ptr(0));
}
"""


def test_each_kernel_sees_its_own_cb_pointers(emu):
    """As on silicon (each RISC's local CB interface): a kernel's get_write_ptr / get_read_ptr move
    only with its own pushes / pops, so the consumer still sees the CB's start as the write pointer
    after the producer has pushed, and the producer never sees the consumer's pops."""
    cores = _crs((0, 0))
    producer = _kernel(PUSH_ONE_AND_SHOW, cores, ttnn.ReaderConfigDescriptor(), inline=True)
    consumer = _kernel(POP_ONE_AND_SHOW, cores, ttnn.WriterConfigDescriptor(), inline=True)
    report = emu.run(ttnn.ProgramDescriptor(kernels=[producer, consumer], cbs=[_cb(cores, 4)], semaphores=[]))
    values = {}
    for line in report.log:
        role = "producer" if "reader kernel" in line else "consumer"
        values.update({f"{role}_{k}": int(v) for k, v in re.findall(r"(\w+)=(\d+)", line.split(": ", 1)[1])})
    start = values["consumer_wr"]
    assert values["producer_wr"] == start + TILE_BYTES  # the producer's own push moved it
    assert values["consumer_rd"] == start and values["consumer_rd_after"] == start + TILE_BYTES


# ----- NoC ordering: data lands at the covering barrier ------------------------------------------

IN_FLIGHT_POISON = 0xFFAD  # every 16-bit half of a read's destination until the read lands


def _local_copy_program(emu, src, dst, num_pages, *, reader_defines=()):
    cores = _crs((0, 0))
    reader = _kernel(KERNELS / "reader_local_copy.cpp", cores, ttnn.ReaderConfigDescriptor(),
                     ct=tensor_accessor_compile_time_args(src), named=[("cb", CB)],
                     rt=[((0, 0), [src.address, num_pages])], defines=reader_defines)
    writer = _kernel(KERNELS / "writer_copy.cpp", cores, ttnn.WriterConfigDescriptor(),
                     ct=tensor_accessor_compile_time_args(dst), named=[("cb", CB), ("block", 2)],
                     rt=[((0, 0), [dst.address, 2 * num_pages])])
    return ttnn.ProgramDescriptor(kernels=[reader, writer], cbs=[_cb(cores, 2)], semaphores=[])


def test_local_copy_after_its_read_barrier_moves_the_data(emu):
    num_pages = 5
    src = emu.allocate_dram(num_pages, TILE_BYTES)
    dst = emu.allocate_dram(2 * num_pages, TILE_BYTES)
    data = _random_pages(num_pages, seed=21)
    emu.write_pages(src, data)
    emu.run(_local_copy_program(emu, src, dst, num_pages))
    pages = data.reshape(num_pages, TILE_BYTES)
    np.testing.assert_array_equal(emu.read_pages(dst).reshape(2 * num_pages, TILE_BYTES), np.repeat(pages, 2, axis=0))


def test_local_copy_from_a_page_still_being_read_is_refused(emu):
    """No CB push sits between the DRAM read and the local copy out of its landing page, so only the
    in-flight model sees the missing barrier."""
    src = emu.allocate_dram(2, TILE_BYTES)
    dst = emu.allocate_dram(4, TILE_BYTES)
    prog = _local_copy_program(emu, src, dst, 2, reader_defines=[("SKIP_LANDING_BARRIER", "1")])
    with pytest.raises(EmulatorError, match=r"core \(0,0\) reader kernel reader_local_copy\.cpp: noc_async_read reads "
                                            r"L1 \[0x[0-9a-f]+, \+2048\) on core \(0,0\) while noc_async_read #1 of this "
                                            r"kernel \(2048 bytes from NoC .*\) is still filling L1 .*: expected this "
                                            r"kernel's noc_async_read_barrier before this"):
        emu.run(prog)


READ_AND_RETURN = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    const InterleavedAddrGen<true> src{.bank_base_address = get_arg_val<uint32_t>(0), .page_size = 2048};
    cb_reserve_back(0, 1);
    noc_async_read(src.get_noc_addr(0), get_write_ptr(0), 2048);
#ifndef SKIP_BARRIER
    noc_async_read_barrier();
#endif
}
"""


@pytest.mark.parametrize("barrier", [True, False])
def test_read_destination_holds_poison_until_its_barrier(emu, barrier):
    spec = ArchSpec.for_name("wormhole_b0")
    src = emu.allocate_dram(1, TILE_BYTES)
    data = _random_pages(1, seed=22)
    emu.write_pages(src, data)
    cores = _crs((0, 0))
    k = _kernel(READ_AND_RETURN, cores, ttnn.ReaderConfigDescriptor(), rt=[((0, 0), [src.address])],
                defines=[] if barrier else [("SKIP_BARRIER", "1")], inline=True)
    prog = ttnn.ProgramDescriptor(kernels=[k], cbs=[_cb(cores, 1)], semaphores=[])
    if barrier:
        emu.run(prog)
    else:
        with pytest.raises(EmulatorError, match=r"kernel_main returns with 1 noc_async_read\(s\) in flight, first "
                                                r"noc_async_read #1 of this kernel \(2048 bytes .*\): expected "
                                                r"noc_async_read_barrier before returning"):
            emu.run(prog)
    page = emu.peek_l1((0, 0), spec.unreserved_base, TILE_BYTES)  # CB 0 is the first CB
    if barrier:
        np.testing.assert_array_equal(page, data)
    else:
        assert set(page.view(np.uint16).tolist()) == {IN_FLIGHT_POISON}
        assert np.isnan(page.view(np.float32)).all()


WRITE_AND_RETURN = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    const InterleavedAddrGen<true> dst{.bank_base_address = get_arg_val<uint32_t>(0), .page_size = 32};
    noc_async_write(get_semaphore(0), dst.get_noc_addr(0), 4);
}
"""


def test_write_destination_keeps_its_old_bytes_until_flushed(emu):
    out = emu.allocate_dram(1, 32)
    before = np.full(32, 0x5A, dtype=np.uint8)
    emu.write_pages(out, before)
    cores = _crs((0, 0))
    k = _kernel(WRITE_AND_RETURN, cores, ttnn.WriterConfigDescriptor(), rt=[((0, 0), [out.address])], inline=True)
    sem = ttnn.SemaphoreDescriptor(id=0, core_ranges=cores, initial_value=7)
    with pytest.raises(EmulatorError, match=r"writer kernel inline#\d+: kernel_main returns with 1 noc_async_write\(s\) "
                                            r"in flight, first noc_async_write #1 of this kernel \(4 bytes .*\): "
                                            r"expected noc_async_write_barrier before returning"):
        emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[], semaphores=[sem]))
    np.testing.assert_array_equal(emu.read_pages(out), before)


def _handoff_program(emu, src, dst, num_pages, *, sender_defines=()):
    """Core (0,0) reads src pages and sends each into core (2,1)'s CB page; (2,1) writes them to dst."""
    tx, rx = (0, 0), (2, 1)
    tx_noc, rx_noc = emu.worker_core_from_logical_core(*tx), emu.worker_core_from_logical_core(*rx)
    both = _crs(tx, rx)
    kernels = [
        _kernel(KERNELS / "reader_copy.cpp", _crs(tx), ttnn.ReaderConfigDescriptor(),
                ct=tensor_accessor_compile_time_args(src), named=[("cb", CB), ("block", 1)],
                rt=[(tx, [src.address, num_pages])]),
        _kernel(KERNELS / "handoff_sender.cpp", _crs(tx), ttnn.WriterConfigDescriptor(), named=[("cb", CB)],
                rt=[(tx, [*rx_noc, num_pages])], defines=sender_defines),
        _kernel(KERNELS / "handoff_receiver.cpp", _crs(rx), ttnn.ReaderConfigDescriptor(), named=[("cb", CB)],
                rt=[(rx, [*tx_noc, num_pages])]),
        _kernel(KERNELS / "writer_copy.cpp", _crs(rx), ttnn.WriterConfigDescriptor(),
                ct=tensor_accessor_compile_time_args(dst), named=[("cb", CB), ("block", 1)],
                rt=[(rx, [dst.address, num_pages])]),
    ]
    sems = [ttnn.SemaphoreDescriptor(id=i, core_ranges=both, initial_value=0) for i in (0, 1)]
    return ttnn.ProgramDescriptor(kernels=kernels, cbs=[_cb(both, 1)], semaphores=sems)


@pytest.mark.parametrize("sender_defines", [(), (("FLUSH_ONLY", "1"),)], ids=["write-barrier", "writes-flushed"])
def test_handoff_flushed_before_its_signal_moves_the_data(emu, sender_defines):
    num_pages = 4
    src = emu.allocate_dram(num_pages, TILE_BYTES)
    dst = emu.allocate_dram(num_pages, TILE_BYTES)
    data = _random_pages(num_pages, seed=23)
    emu.write_pages(src, data)
    emu.run(_handoff_program(emu, src, dst, num_pages, sender_defines=sender_defines))
    np.testing.assert_array_equal(emu.read_pages(dst), data)


def test_semaphore_signal_before_the_write_is_flushed_is_refused(emu):
    src = emu.allocate_dram(2, TILE_BYTES)
    dst = emu.allocate_dram(2, TILE_BYTES)
    prog = _handoff_program(emu, src, dst, 2, sender_defines=[("SIGNAL_BEFORE_FLUSH", "1")])
    with pytest.raises(EmulatorError, match=r"core \(0,0\) writer kernel handoff_sender\.cpp: noc_semaphore_inc\(core "
                                            r"\(2,1\) semaphore @0x[0-9a-f]+, 1\) while noc_async_write #1 of this kernel "
                                            r"\(2048 bytes from NoC .* to NoC .*\) is not flushed: .* expected "
                                            r"noc_async_write_barrier \(or noc_async_writes_flushed\) before the signal"):
        emu.run(prog)


SIGNAL_BY_WRITE = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    const uint64_t peer_sem = get_noc_addr(get_arg_val<uint32_t>(1), get_arg_val<uint32_t>(2), get_semaphore(0));
    auto* sem = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(0));
    if (get_arg_val<uint32_t>(0)) {
        noc_async_write(get_semaphore(1), peer_sem, 4);  // semaphore 1 holds 1
        noc_semaphore_wait(sem, 1);                       // the peer answers once the write lands
        noc_async_write_barrier();
    } else {
        noc_semaphore_wait(sem, 1);
        noc_semaphore_inc(peer_sem, 1);
    }
}
"""


def test_un_barriered_write_still_arrives_when_every_kernel_waits(emu):
    """The data of a write lands at its barrier, or earlier when nothing else can run: on silicon it
    arrives eventually, so waiting on it is not a deadlock."""
    a, b = (0, 0), (1, 0)
    ax, ay = emu.worker_core_from_logical_core(*a)
    bx, by = emu.worker_core_from_logical_core(*b)
    cores = _crs(a, b)
    k = _kernel(SIGNAL_BY_WRITE, cores, ttnn.WriterConfigDescriptor(),
                rt=[(a, [1, bx, by]), (b, [0, ax, ay])], inline=True)
    sems = [ttnn.SemaphoreDescriptor(id=0, core_ranges=cores, initial_value=0),
            ttnn.SemaphoreDescriptor(id=1, core_ranges=cores, initial_value=1)]
    report = emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[], semaphores=sems), timeout_s=10)
    assert report.cores[b].calls["noc_semaphore_inc"] == 1
